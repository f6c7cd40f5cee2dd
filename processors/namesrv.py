"""Name-server request processing (RocketMQ 4.9.8 DefaultRequestProcessor).

`NamesrvProcessor(config).handlers()` is the dispatch table the name-server role registers
on its RemotingServer. Answers (codes, remarks, headers, body shapes) follow 4.9.8; the
one deliberate difference is UPDATE_NAMESRV_CONFIG, refused unless `enableUpdateConfig`
is set, because unauthenticated config writes are how CVE-2023-33246/37582 worked.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Awaitable, Callable

from rmqd.processors.kvconfig import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rmqd.processors.route_info import RouteInfoManager
from rmqd.wire.bodies import (DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper, as_bool, as_int,
                         format_properties, parse_properties)
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.headers import (AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
                          DeleteKVConfigRequestHeader, DeleteTopicFromNamesrvRequestHeader, GetKVConfigRequestHeader,
                          GetKVConfigResponseHeader, GetKVListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
                          GetTopicsByClusterRequestHeader, PutKVConfigRequestHeader, QueryDataVersionRequestHeader,
                          QueryDataVersionResponseHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
                          UnRegisterBrokerRequestHeader, WipeWritePermOfBrokerRequestHeader,
                          WipeWritePermOfBrokerResponseHeader)
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.processors.seams import Context, RequestHandler

log = logging.getLogger("rmqd.namesrv")

FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."  # FAQUrl.suggestTodo(APPLY_TOPIC_URL)
V3_0_11 = 54  # MQVersion.Version.V3_0_11.ordinal(): older brokers send a bare TopicConfigSerializeWrapper


@dataclass(slots=True)
class NamesrvConfig:
    """RocketMQ NamesrvConfig keys (+ rmqd's enableUpdateConfig, off by default)."""
    rocketmqHome: str = ""
    kvConfigPath: str = str(Path.home() / "namesrv" / "kvConfig.json")
    configStorePath: str = str(Path.home() / "namesrv" / "namesrv.properties")
    productEnvName: str = "center"
    clusterTest: bool = False
    orderMessageEnable: bool = False
    configBlackList: str = "configBlackList;configStorePath;kvConfigPath"
    enableUpdateConfig: bool = False
    listenPort: int = 9876
    serverChannelMaxIdleTimeSeconds: int = 120

    def to_properties(self) -> str:
        """Configuration.getAllConfigsFormatString: key=value lines."""
        return format_properties({f.name: getattr(self, f.name) for f in fields(self)})

    def update(self, props: dict[str, str]) -> list[str]:
        """Apply known keys; returns the unknown ones (ignored, as RocketMQ does)."""
        unknown = []
        known = {f.name: f for f in fields(self)}
        for key, value in props.items():
            f = known.get(key)
            if f is None:
                unknown.append(key)
                continue
            current = getattr(self, key)
            if isinstance(current, bool):
                setattr(self, key, as_bool(value))
            elif isinstance(current, int):
                setattr(self, key, as_int(value))
            else:
                setattr(self, key, value)
        return unknown


def _ok(request: RemotingCommand, body: bytes | None = None, ext: dict[str, str] | None = None) -> RemotingCommand:
    return make_response(request, ResponseCode.SUCCESS, None, ext, body)


Handler = RequestHandler


@dataclass
class NamesrvProcessor:
    config: NamesrvConfig = field(default_factory=NamesrvConfig)
    routes: RouteInfoManager = field(default_factory=RouteInfoManager)
    kv: KVConfigManager = None  # type: ignore[assignment]  # None: made from config in __post_init__

    def __post_init__(self) -> None:
        if self.kv is None:
            self.kv = KVConfigManager(self.config.kvConfigPath or None)

    def handlers(self) -> dict[int, Handler]:
        c = RequestCode
        return {
            c.PUT_KV_CONFIG: self.put_kv_config,
            c.GET_KV_CONFIG: self.get_kv_config,
            c.DELETE_KV_CONFIG: self.delete_kv_config,
            c.QUERY_DATA_VERSION: self.query_data_version,
            c.REGISTER_BROKER: self.register_broker,
            c.UNREGISTER_BROKER: self.unregister_broker,
            c.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            c.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            c.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            c.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            c.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            c.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            c.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            c.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            c.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            c.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            c.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            c.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topic_list,
            c.UPDATE_NAMESRV_CONFIG: self.update_config,
            c.GET_NAMESRV_CONFIG: self.get_config,
        }

    def on_channel_close(self, channel: Any) -> None:
        """Close listener: a broker whose connection dropped is removed at once (BrokerHousekeepingService)."""
        self.routes.on_channel_destroy(channel.remote_addr, channel)

    # -- KV config ---------------------------------------------------------------------------
    async def put_kv_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = PutKVConfigRequestHeader.from_ext(request.ext_fields)
        self.kv.put(h.namespace, h.key, h.value)
        return _ok(request)

    async def get_kv_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = GetKVConfigRequestHeader.from_ext(request.ext_fields)
        value = self.kv.get(h.namespace, h.key)
        if value is not None:
            return _ok(request, ext=GetKVConfigResponseHeader(value).to_ext())
        return make_response(request, ResponseCode.QUERY_NOT_FOUND,
                             f"No config item, Namespace: {h.namespace} Key: {h.key}",
                             ext_fields=GetKVConfigResponseHeader().to_ext())

    async def delete_kv_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = DeleteKVConfigRequestHeader.from_ext(request.ext_fields)
        self.kv.delete(h.namespace, h.key)
        return _ok(request)

    async def get_kv_list_by_namespace(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        namespace = GetKVListByNamespaceRequestHeader.from_ext(request.ext_fields).namespace
        body = self.kv.kv_list(namespace)
        if body is not None:
            return _ok(request, body)
        return make_response(request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")

    # -- brokers -----------------------------------------------------------------------------
    async def register_broker(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.from_ext(request.ext_fields)
        body = bytes(request.body) if request.body is not None else None
        if h.bodyCrc32 != 0:
            crc = zlib.crc32(body or b"") & 0x7FFFFFFF  # UtilAll.crc32
            if crc != h.bodyCrc32:
                log.warning("receive registerBroker request,crc32 not match,from %s", ctx.remote_addr)
                return make_response(request, ResponseCode.SYSTEM_ERROR, "crc32 not match",
                                     ext_fields=RegisterBrokerResponseHeader().to_ext())

        filter_servers: list[str] | None
        if request.version >= V3_0_11:
            if body and not h.compressed:
                reg = self._decode_register_body(body, h)
            elif body:
                reg = RegisterBrokerBody.decode_register(body, h.compressed)
            else:
                reg = RegisterBrokerBody()
                reg.topicConfigSerializeWrapper.dataVersion = DataVersion(timestamp=0, counter=0)
            wrapper, filter_servers = reg.topicConfigSerializeWrapper, reg.filterServerList
        else:
            wrapper = TopicConfigSerializeWrapper.decode(body) if body else TopicConfigSerializeWrapper()
            filter_servers = None
        result = self.routes.register_broker(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId, h.haServerAddr,
                                             wrapper, filter_servers, ctx.channel if ctx is not None else None)
        ext = RegisterBrokerResponseHeader(result.haServerAddr, result.masterAddr).to_ext()
        return _ok(request, self.kv.kv_list(NAMESPACE_ORDER_TOPIC_CONFIG), ext)

    def _decode_register_body(self, body: bytes, h: RegisterBrokerRequestHeader) -> RegisterBrokerBody:
        """The JSON body; its topic configs only when the route tables will take them (a
        broker's periodic registration repeats thousands of them under the same DataVersion)."""
        obj = RegisterBrokerBody.decode_json_obj(body)
        wrapper_obj = obj.get("topicConfigSerializeWrapper")
        version = DataVersion.from_json_obj(wrapper_obj.get("dataVersion") if isinstance(wrapper_obj, dict) else None)
        if not self.routes.wants_topic_table(h.brokerAddr or "", h.brokerName or "", -1 if h.brokerId is None else int(h.brokerId), version):
            reg = RegisterBrokerBody.from_json_obj({**obj, "topicConfigSerializeWrapper": None})
            reg.topicConfigSerializeWrapper.dataVersion = version
            return reg
        return RegisterBrokerBody.from_json_obj(obj)

    async def unregister_broker(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = UnRegisterBrokerRequestHeader.from_ext(request.ext_fields)
        self.routes.unregister_broker(h.clusterName, h.brokerAddr, h.brokerName, h.brokerId)
        return _ok(request)

    async def query_data_version(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        broker_addr = QueryDataVersionRequestHeader.from_ext(request.ext_fields).brokerAddr
        data_version = DataVersion.decode(request.body)
        changed = self.routes.is_broker_topic_config_changed(broker_addr, data_version)
        if not changed:
            self.routes.update_broker_info_update_timestamp(broker_addr, self.routes.now_ms())
        ns_version = self.routes.query_broker_topic_config(broker_addr)
        body = ns_version.encode() if ns_version is not None else None
        return _ok(request, body, QueryDataVersionResponseHeader(changed).to_ext())

    async def wipe_write_perm_of_broker(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = WipeWritePermOfBrokerRequestHeader.from_ext(request.ext_fields)
        count = self.routes.operate_write_perm_of_broker(h.brokerName, wipe=True)
        return _ok(request, ext=WipeWritePermOfBrokerResponseHeader(count).to_ext())

    async def add_write_perm_of_broker(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = AddWritePermOfBrokerRequestHeader.from_ext(request.ext_fields)
        count = self.routes.operate_write_perm_of_broker(h.brokerName, wipe=False)
        return _ok(request, ext=AddWritePermOfBrokerResponseHeader(count).to_ext())

    # -- routes and topic lists ----------------------------------------------------------------
    async def get_route_info_by_topic(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = GetRouteInfoRequestHeader.from_ext(request.ext_fields)
        topic = h.topic
        route = self.routes.pickup_topic_route_data(topic)
        if route is None:
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST,
                                 f"No topic route info in name server for the topic: {topic}{FAQ_SUFFIX}")
        if self.config.orderMessageEnable:
            route.orderTopicConf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        return _ok(request, route.encode_for_version(request.version, bool(h.acceptStandardJsonOnly)))

    async def get_broker_cluster_info(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, self.routes.get_all_cluster_info().encode())

    async def get_all_topic_list(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, self.routes.get_all_topic_list().encode())

    async def delete_topic_in_namesrv(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        h = DeleteTopicFromNamesrvRequestHeader.from_ext(request.ext_fields)
        self.routes.delete_topic(h.topic, h.clusterName)
        return _ok(request)

    async def get_topics_by_cluster(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        cluster = GetTopicsByClusterRequestHeader.from_ext(request.ext_fields).cluster
        topics = self.routes.get_topics_by_cluster(cluster)
        if topics is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"the cluster[{cluster}] not exist")
        return _ok(request, topics.encode())

    async def get_system_topic_list(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, self.routes.get_system_topic_list().encode())

    async def get_unit_topic_list(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, self.routes.get_unit_topics().encode())

    async def get_has_unit_sub_topic_list(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, self.routes.get_has_unit_sub_topic_list().encode())

    async def get_has_unit_sub_ununit_topic_list(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, self.routes.get_has_unit_sub_ununit_topic_list().encode())

    # -- config ------------------------------------------------------------------------------
    async def update_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        if not self.config.enableUpdateConfig:
            log.warning("refused UPDATE_NAMESRV_CONFIG from %s (enableUpdateConfig=false)",
                        ctx.remote_addr if ctx is not None else "?")
            return make_response(request, ResponseCode.NO_PERMISSION,
                                 "Updating the name server config remotely is disabled "
                                 "(set enableUpdateConfig=true to allow it)")
        if request.body:
            try:
                text = bytes(request.body).decode("utf-8")
            except UnicodeDecodeError as exc:
                return make_response(request, ResponseCode.SYSTEM_ERROR, f"UnsupportedEncodingException {exc}")
            props = parse_properties(text)
            black = {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome", "enableUpdateConfig"}
            black.update(x for x in self.config.configBlackList.split(";") if x)
            if black & props.keys():
                return make_response(request, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            self.config.update(props)
        return _ok(request)

    async def get_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        return _ok(request, self.config.to_properties().encode("utf-8"))
