"""Admin codes mqadmin and the dashboards use (RocketMQ 4.9.8 AdminBrokerProcessor subset).

Config writes over the network (UPDATE_BROKER_CONFIG) are refused unless the operator
turned them on: unauthenticated config updates are how CVE-2023-33246 / CVE-2023-37582
executed commands on RocketMQ brokers, and nothing a client needs depends on them.
"""

from __future__ import annotations

import logging
import math
import shutil
from typing import Any

from rmqd.processors.common import (
    is_system_topic, java_hashmap_order, system_topic_remark, validate_group, validate_topic, SYSTEM_TOPIC_SET,
)
from rmqd.processors.names import guard_names
from rmqd.store.errors import StoreBusyError
from rmqd.wire import fastjson
from rmqd.wire.bodies import TOPIC_MESSAGE_TYPE_ATTRIBUTE, alter_topic_attributes
from rmqd.wire.codes import CURRENT_VERSION, LanguageCode, MQVersion, RequestCode, ResponseCode, version_desc
from rmqd.wire.errors import WireError
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.processors.seams import AdminBroker, Context, RequestHandler

log = logging.getLogger("rmqd.admin")

#: MQVersion.Version.V5_0_0's ordinal: the first client whose admin tools read 5.x's tables.
V5_0_0 = int(MQVersion["V5_0_0"].value)

#: AdminBrokerProcessor.validateSlave.
SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
#: AdminBrokerProcessor.configBlackList defaults (plus configBlackList itself).
CONFIG_BLACK_LIST = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})


def _ok(request: RemotingCommand, body: bytes | None = None, ext: dict[str, str] | None = None) -> RemotingCommand:
    return make_response(request, ResponseCode.SUCCESS, None,
                         ext_fields=None if ext is None else java_hashmap_order(ext), body=body)


def human_readable_bytes(n: int) -> str:
    """MixAll.humanReadableByteCount(bytes, si=false)."""
    unit = 1024
    if n < unit:
        return f"{n} B"
    exp = int(math.log(n) / math.log(unit))
    return f"{n / unit ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


class AdminBrokerProcessor:
    def __init__(self, broker: AdminBroker) -> None:
        self.broker = broker

    # -- topics ----------------------------------------------------------------------------------
    def _check_topic_change(self, request: RemotingCommand, topic: str | None) -> RemotingCommand | None:
        """validateSlave + TopicValidator.validateTopic + isSystemTopic: the refusal, or None."""
        if self.broker.message_store_config.brokerRole == "SLAVE":
            return make_response(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        remark = validate_topic(topic)
        if remark is None and is_system_topic(topic or ""):
            remark = system_topic_remark(topic or "")
        return None if remark is None else make_response(request, ResponseCode.SYSTEM_ERROR, remark)

    async def update_and_create_topic(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import CreateTopicRequestHeader

        h = CreateTopicRequestHeader.from_ext(request.ext_fields)
        refused = self._check_topic_change(request, h.topic)
        if refused is not None:
            return refused
        log.info("updateAndCreateTopic %s called by %s", h.topic, ctx.channel.remote_addr)
        current = self.broker.topic_config_manager.select_topic_config(h.topic)
        try:  # 5.x attributes (message.type), altered onto the topic's current ones
            attributes = alter_topic_attributes(current.attributes if current is not None else None,
                                                getattr(h, "attributes", None), current is None)
        except ValueError as exc:
            return make_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if attributes and attributes.get(TOPIC_MESSAGE_TYPE_ATTRIBUTE) == "MIXED":
            return make_response(request, ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
        await self.broker.update_topic_config(
            topic=h.topic, read_queue_nums=int(h.readQueueNums), write_queue_nums=int(h.writeQueueNums),
            perm=int(h.perm), topic_filter_type=getattr(h, "topicFilterType", None) or "SINGLE_TAG",
            topic_sys_flag=int(getattr(h, "topicSysFlag", None) or 0),
            order=bool(getattr(h, "order", False)), attributes=attributes)
        return make_response(request, ResponseCode.SUCCESS)

    async def delete_topic(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import DeleteTopicRequestHeader

        h = DeleteTopicRequestHeader.from_ext(request.ext_fields)
        refused = self._check_topic_change(request, h.topic)
        if refused is not None:
            return refused
        log.info("deleteTopic %s called by %s", h.topic, ctx.channel.remote_addr)
        try:
            await self.broker.delete_topic(h.topic)
        except StoreBusyError as exc:
            return make_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        return _ok(request)

    async def get_all_topic_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        content = self.broker.topic_config_manager.encode()
        if not content:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "No topic in this broker", ext_fields={})
        return make_response(request, ResponseCode.SUCCESS, None, ext_fields={}, body=content.encode("utf-8"))

    async def get_system_topic_list_from_broker(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.bodies import TopicList

        # TopicValidator's set grows with what TopicConfigManager adds (cluster, broker, reply, trace topics)
        topics = SYSTEM_TOPIC_SET | self.broker.topic_config_manager.system_topics
        return _ok(request, TopicList(topicList=sorted(topics)).encode())

    async def get_topic_stats_info(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.bodies import MessageQueue, TopicOffset, TopicStatsTable
        from rmqd.wire.headers import GetTopicStatsInfoRequestHeader

        b = self.broker
        h = GetTopicStatsInfoRequestHeader.from_ext(request.ext_fields)
        tc = b.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        table = TopicStatsTable()
        for i in range(tc.writeQueueNums):
            mq = MessageQueue(topic=h.topic, brokerName=b.broker_config.brokerName, queueId=i)
            lo = max(b.store.get_min_offset_in_queue(h.topic, i), 0)
            hi = max(b.store.get_max_offset_in_queue(h.topic, i), 0)
            ts = b.store.get_message_store_timestamp(h.topic, i, hi - 1) if hi > 0 else 0
            table.offsetTable[mq] = TopicOffset(minOffset=lo, maxOffset=hi, lastUpdateTimestamp=ts)
        return _ok(request, table.encode())

    async def get_topic_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG (5.x, 351): one topic's config as TopicConfigAndQueueMapping JSON.
        rocketmq-tools 5.x asks every broker of the route for it in examineTopicStats (and so
        mqadmin topicStatus, consumerProgress, cloneGroupOffset and the dashboard's topic page):
        without an answer those fail. An unknown topic is TOPIC_NOT_EXIST with 5.x's remark, which
        the admin client takes as "not on this broker". ``lo`` asks for the static-topic mapping,
        which no rmqd topic has (null, left out, as 5.x answers for a topic that is not static)."""
        from rmqd.wire.bodies import encode_topic_config_and_queue_mapping
        from rmqd.wire.headers import GetTopicConfigRequestHeader

        h = GetTopicConfigRequestHeader.from_ext(request.ext_fields)
        tc = self.broker.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            log.info("No topic in this broker, client: %s topic: %.300r", ctx.channel.remote_addr, h.topic)
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
        return _ok(request, encode_topic_config_and_queue_mapping(tc))

    # -- consumers / producers -------------------------------------------------------------------
    async def get_consume_stats(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.processors.admin_observe import consume_stats_of
        from rmqd.wire.bodies import ConsumeStats
        from rmqd.wire.headers import GetConsumeStatsRequestHeader

        b = self.broker
        h = GetConsumeStatsRequestHeader.from_ext(request.ext_fields)
        group = h.consumerGroup
        if not (getattr(h, "topic", None) or "").strip():
            topics = b.consumer_offset_manager.which_topic_by_consumer(group)
        else:
            topics = {h.topic}
        stats = ConsumeStats()
        for topic in topics:
            tc = b.topic_config_manager.select_topic_config(topic)
            if tc is None:
                continue
            if (b.consumer_manager.find_subscription_data(group, topic) is None
                    and b.consumer_manager.find_subscription_data_count(group) > 0):
                continue
            one = consume_stats_of(b, group, topic, tc.readQueueNums)
            stats.offsetTable.update(one.offsetTable)
            stats.consumeTps += one.consumeTps
        return _ok(request, stats.encode())

    async def get_consumer_connection_list(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.bodies import Connection, ConsumerConnection
        from rmqd.wire.headers import GetConsumerConnectionListRequestHeader

        b = self.broker
        h = GetConsumerConnectionListRequestHeader.from_ext(request.ext_fields)
        info = b.consumer_manager.get_consumer_group_info(h.consumerGroup)
        if info is None:
            return make_response(request, ResponseCode.CONSUMER_NOT_ONLINE,
                                 f"the consumer group[{h.consumerGroup}] not online")
        body = ConsumerConnection(consumeType=info.consume_type, messageModel=info.message_model,
                                  consumeFromWhere=info.consume_from_where,
                                  subscriptionTable=dict(info.subscription_table))
        for client in info.channel_info_table.values():
            body.connectionSet.append(Connection(clientId=client.client_id,
                                                 clientAddr=client.channel.remote_addr,
                                                 language=_language(client.language),
                                                 version=client.version))
        return _ok(request, body.encode())

    async def get_producer_connection_list(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.bodies import Connection
        from rmqd.wire.headers import GetProducerConnectionListRequestHeader

        b = self.broker
        h = GetProducerConnectionListRequestHeader.from_ext(request.ext_fields)
        table = b.producer_manager.group_channel_table.get(h.producerGroup)
        if table is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"the producer group[{h.producerGroup}] not exist")
        conns = [Connection(clientId=c.client_id, clientAddr=c.channel.remote_addr,
                            language=_language(c.language), version=c.version).to_json_obj()
                 for c in table.values()]
        return _ok(request, fastjson.dumps({"connectionSet": conns}).encode("utf-8"))

    async def query_topic_consume_by_who(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import QueryTopicConsumeByWhoRequestHeader

        b = self.broker
        h = QueryTopicConsumeByWhoRequestHeader.from_ext(request.ext_fields)
        groups = set(b.consumer_manager.query_topic_consume_by_who(h.topic))
        groups |= set(b.consumer_offset_manager.which_group_by_topic(h.topic))
        return _ok(request, fastjson.dumps({"groupList": sorted(groups)}).encode("utf-8"))

    # -- subscription groups -------------------------------------------------------------------------
    async def get_all_subscription_group(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        content = self.broker.subscription_group_manager.encode()
        if not content:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "No subscription group in this broker")
        return _ok(request, content.encode("utf-8"))

    async def update_and_create_subscription_group(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        if b.message_store_config.brokerRole == "SLAVE":
            return make_response(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        body = bytes(request.body or b"")
        remark = subscription_group_body_error(body)
        if remark is not None:  # checked whole before the table is touched (issue 11: a {} body broke it)
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
        log.info("updateAndCreateSubscriptionGroup called by %s", ctx.channel.remote_addr)
        b.update_subscription_group_from_body(body)
        return _ok(request)

    async def delete_subscription_group(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import DeleteSubscriptionGroupRequestHeader

        b = self.broker
        if b.message_store_config.brokerRole == "SLAVE":
            return make_response(request, ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        h = DeleteSubscriptionGroupRequestHeader.from_ext(request.ext_fields)
        b.subscription_group_manager.delete_subscription_group_config(h.groupName)
        if getattr(h, "removeOffset", False):
            b.consumer_offset_manager.remove_offset(h.groupName)
        if b.broker_config.autoDeleteUnusedStats:
            b.stats.on_group_deleted(h.groupName)
        return _ok(request)

    async def get_all_consumer_offset(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        content = self.broker.consumer_offset_manager.encode()
        if not content:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "No consumer offset in this broker")
        return _ok(request, content.encode("utf-8"))

    # -- broker ---------------------------------------------------------------------------------
    async def update_broker_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        log.warning("updateBrokerConfig called by %s", ctx.channel.remote_addr)
        if not b.allow_config_update:
            return make_response(request, ResponseCode.NO_PERMISSION,
                                 "UPDATE_BROKER_CONFIG is disabled on this broker (unauthenticated config writes "
                                 "are refused; see CVE-2023-33246)")
        body = bytes(request.body or b"").decode("utf-8", "replace")
        props = string_to_properties(body)
        if any(k in CONFIG_BLACK_LIST for k in props):
            return make_response(request, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        unknown = b.update_config(props)
        if unknown:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"unknown config keys: {', '.join(unknown)}")
        return _ok(request)

    async def get_broker_config(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        content = "".join(f"{k}={v}\n" for k, v in b.all_configs().items())
        version = fastjson.dumps(b.config_data_version())
        return _ok(request, content.encode("utf-8"), {"version": version})

    async def delete_expired_commit_log(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        """deleteExpiredCommitLog: the store's clean service deletes expired files on its next
        passes whatever the hour (deleteWhen); SUCCESS at once, as 4.9.8 answers."""
        log.warning("invoke deleteExpiredCommitLog")
        self.broker.store.execute_delete_files_manually()
        return _ok(request)

    async def get_broker_runtime_info(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.bodies import KVTable

        return _ok(request, KVTable(table=self.runtime_info(request.version)).encode())

    def runtime_info(self, client_version: int = CURRENT_VERSION) -> dict[str, str]:
        """The brokerStatus table. StoreStatsService's out-TPS key is ``getTransferedTps`` in
        4.9.8 and ``getTransferredTps`` from 5.0.0 on; each admin tool reads its own broker's
        spelling (mqadmin 5.x's exportMetrics fails on a table without it), so a requester
        of 5.0.0 or later gets 5.x's key, an older one 4.9.8's."""
        b = self.broker
        bc = b.broker_config
        s = b.stats
        info: dict[str, str] = {}
        info.update(b.store_runtime_info())
        if client_version >= V5_0_0 and "getTransferedTps" in info:
            info["getTransferredTps"] = info.pop("getTransferedTps")
        info["brokerVersionDesc"] = version_desc(CURRENT_VERSION)
        info["brokerVersion"] = str(CURRENT_VERSION)
        info["msgPutTotalYesterdayMorning"] = str(s.put_yesterday_morning)
        info["msgPutTotalTodayMorning"] = str(s.put_today_morning)
        info["msgPutTotalTodayNow"] = str(s.put_total)
        info["msgGetTotalYesterdayMorning"] = str(s.get_yesterday_morning)
        info["msgGetTotalTodayMorning"] = str(s.get_today_morning)
        info["msgGetTotalTodayNow"] = str(s.get_total)
        for pool, cap in (("send", "sendThreadPoolQueueCapacity"), ("pull", "pullThreadPoolQueueCapacity"),
                          ("query", "queryThreadPoolQueueCapacity")):
            info[f"{pool}ThreadPoolQueueSize"] = "0"
            info[cap] = str(getattr(bc, cap, 0))
            info[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
        info["EndTransactionQueueSize"] = "0"
        info["EndTransactionThreadPoolQueueCapacity"] = str(getattr(bc, "endTransactionPoolQueueCapacity", 100000))
        schedule = getattr(b, "schedule_service", None)
        if schedule is not None:  # ScheduleMessageService.buildRunningStats
            info.update(schedule.running_stats())
        info["dispatchBehindBytes"] = str(b.dispatch_behind_bytes())
        info["pageCacheLockTimeMills"] = "0"
        info["earliestMessageTimeStamp"] = str(b.earliest_message_time())
        info["startAcceptSendRequestTimeStamp"] = str(getattr(bc, "startAcceptSendRequestTimeStamp", 0))
        info["remainTransientStoreBufferNumbs"] = str(2**31 - 1)
        info["remainHowManyDataToFlush"] = human_readable_bytes(b.remain_to_flush())
        root = b.message_store_config.storePathRootDir
        try:
            usage = shutil.disk_usage(root)
            info["commitLogDirCapacity"] = (f"Total : {human_readable_bytes(usage.total)}, "
                                            f"Free : {human_readable_bytes(usage.free)}.")
        except OSError:
            pass
        return info

    async def reset_offset(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime): Broker2Client.resetOffset -
        the offsets by time for every write queue, sent oneway (RESET_CONSUMER_CLIENT_OFFSET) to
        each online consumer of the group, which then commits them itself; the same table in
        the answer. A C++ requester gets the list form (ResetOffsetBodyForC)."""
        from rmqd.wire.bodies import MessageQueue, ResetOffsetBody, ResetOffsetBodyForC
        from rmqd.wire.codes import MQVersion
        from rmqd.wire.headers import ResetOffsetRequestHeader

        b = self.broker
        h = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        topic, group, ts = h.topic or "", h.group or "", h.timestamp
        tc = b.topic_config_manager.select_topic_config(topic)
        if tc is None:
            log.warning("[reset-offset] reset offset failed, no topic in this broker. topic=%s", topic)
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        table: dict[MessageQueue, int] = {}
        for qid in range(tc.writeQueueNums):
            consumer_offset = b.consumer_offset_manager.query_offset(group, topic, qid)
            if consumer_offset == -1:
                return make_response(request, ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if ts == -1:
                by_time = b.store.get_max_offset_in_queue(topic, qid)
            else:
                by_time = b.store.get_offset_in_queue_by_time(topic, qid, ts)
            if by_time < 0:
                log.warning("reset offset is invalid. topic=%s, queueId=%d, timeStampOffset=%d", topic, qid, by_time)
                by_time = 0
            mq = MessageQueue(topic=topic, brokerName=b.broker_config.brokerName, queueId=qid)
            table[mq] = by_time if h.isForce or by_time < consumer_offset else consumer_offset
        if request.language == LanguageCode.CPP:
            push_body = ResetOffsetBodyForC([{"brokerName": mq.brokerName, "offset": off, "queueId": mq.queueId,
                                              "topic": mq.topic} for mq, off in table.items()]).encode()
        else:
            push_body = ResetOffsetBody(table).encode()
        info = b.consumer_manager.get_consumer_group_info(group)
        channels = list(info.channel_info_table.values()) if info is not None else []
        if not channels:
            remark = f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} Timestamp: {ts}"
            log.warning(remark)
            return make_response(request, ResponseCode.CONSUMER_NOT_ONLINE, remark)
        for client in channels:
            if client.version < MQVersion["V3_0_7_SNAPSHOT"]:
                return make_response(request, ResponseCode.SYSTEM_ERROR,
                                     f"the client does not support this feature. version={version_desc(client.version)}")
            push = RemotingCommand(code=RequestCode.RESET_CONSUMER_CLIENT_OFFSET, body=push_body, ext_fields={
                "topic": topic, "group": group, "timestamp": str(ts), "isForce": "false"})
            try:
                await client.channel.send_request_oneway(push)
            except Exception as exc:  # noqa: BLE001 - one client gone: the others are still reset
                log.error("[reset-offset] reset offset exception. topic=%s, group=%s ,error=%s", topic, group, exc)
        return _ok(request, ResetOffsetBody(table).encode())

    def handlers(self) -> dict[int, RequestHandler]:
        return guard_names({
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list_from_broker,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
        })


def _language(code: int) -> LanguageCode:
    try:
        return LanguageCode(int(code))
    except ValueError:
        return LanguageCode.OTHER


#: SubscriptionGroupConfig's typed fields (4.9.8): Java ints and booleans.
_GROUP_INT_FIELDS = ("retryQueueNums", "retryMaxTimes", "brokerId", "whichBrokerWhenConsumeSlowly")
_GROUP_BOOL_FIELDS = ("consumeEnable", "consumeFromMinEnable", "consumeBroadcastEnable",
                      "notifyConsumerIdsChangedEnable")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def subscription_group_body_error(body: bytes) -> str | None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's body, checked whole: None when it is a
    SubscriptionGroupConfig with a valid groupName and fields of the right types, else why not.

    4.9.8 decodes the body with fastjson and puts whatever comes out in its table (a body
    without groupName becomes a null key that breaks every later save); rmqd refuses such a
    body and leaves the table and subscriptionGroup.json as they were."""
    from rmqd.wire.bodies import as_bool, as_int

    if not body:
        return "the subscription group config body is missing"
    try:
        obj = fastjson.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return f"the subscription group config body is not UTF-8 (byte {exc.start})"
    except WireError as exc:
        return f"the subscription group config body is not JSON: {exc}"
    if not isinstance(obj, dict):
        return f"the subscription group config body is not a JSON object but {_json_type(obj)}"
    name = obj.get("groupName")
    if name is not None and not isinstance(name, str):
        return f"the subscription group config's groupName is {_json_type(name)}, not a string"
    remark = validate_group(name)
    if remark is not None:
        return remark
    try:
        for key in _GROUP_INT_FIELDS:
            if isinstance(obj.get(key), bool):
                raise WireError(f"cannot read {obj.get(key)!r} as a number")
            as_int(obj.get(key), 0, _INT_MIN, _INT_MAX)
        for key in _GROUP_BOOL_FIELDS:
            as_bool(obj.get(key))
    except WireError as exc:
        return f"the subscription group config's {key} is invalid: {exc}"
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number")


def string_to_properties(text: str) -> dict[str, str]:
    """MixAll.string2Properties (java.util.Properties.load, the simple cases)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                out[k.strip()] = v.strip()
                break
        else:
            out[line] = ""
    return out


__all__ = ["AdminBrokerProcessor", "CONFIG_BLACK_LIST", "human_readable_bytes", "string_to_properties",
           "subscription_group_body_error"]
