"""ACL admin codes of 4.9.8's AdminBrokerProcessor: 50, 51, 52, 53.

Why: mqadmin updateAclConfig / deleteAccessConfig / clusterAclConfigVersion /
updateGlobalWhiteAddr send these; the answers (codes 209/210/211 with 4.9.8's remarks, the
GetBrokerAclConfigResponseHeader fields) must be what the tools expect. The ACL check itself
(processors/acl.py, run before every handler) is what guards them: only a signed request of
an admin account (or a white-listed address) gets here; 4.9.8 lets any configured account
through, which rmqd does only with nonAdminAclConfigEnable=true. 54
(GET_BROKER_CLUSTER_ACL_CONFIG) is not a code 4.9.8's broker handles, so it stays
"not supported" here too.

The files are written by broker/acl_config.AclService (blocking disk work in a thread; it
answers SUCCESS only once the change is on disk, and refuses values its loader would refuse).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import trio

from rmqd.processors.acl import AclError
from rmqd.wire import fastjson
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.javamap import java_hashmap_order

log = logging.getLogger("rmqd.acl")


class AclWriter(Protocol):
    default_file: Any

    def update_account(self, config: dict[str, Any]) -> bool: ...
    def delete_account(self, access_key: str) -> bool: ...
    def update_global_white(self, addresses: list[str], file_name: str | None) -> bool: ...
    def data_versions(self) -> dict[str, dict[str, int]]: ...


def _field(request: RemotingCommand, name: str) -> str | None:
    """A header field; a missing one is null, as 4.9.8's decoder skips it (no refusal there)."""
    return (request.ext_fields or {}).get(name)


def _jstr(value: str | None) -> str:
    return "null" if value is None else value


def _split(text: str | None) -> list[str] | None:
    """UtilAll.split(str, ","): null stays null; Java's String.split drops trailing empties."""
    if text is None:
        return None
    parts = text.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class AclAdminProcessor:
    """Handlers for codes 50-53; `service` is None when aclEnable=false."""

    def __init__(self, service: AclWriter | None, *, broker_name: str, broker_addr: str, cluster_name: str) -> None:
        self.service = service
        self.broker_name = broker_name
        self.broker_addr = broker_addr
        self.cluster_name = cluster_name

    async def _run(self, request: RemotingCommand, failed_code: int, failed_remark: str, call: Any) -> RemotingCommand:
        if self.service is None:  # 4.9.8: a NullPointerException, whose message is null
            return make_response(request, failed_code, None)
        try:
            ok = await trio.to_thread.run_sync(call)
        except AclError as exc:
            return make_response(request, failed_code, exc.message)
        except OSError as exc:
            log.error("acl file write failed: %s", exc)
            return make_response(request, failed_code, f"{exc.filename}: {exc.strerror}")
        if not ok:
            log.warning(failed_remark)
            return make_response(request, failed_code, failed_remark)
        return make_response(request, ResponseCode.SUCCESS, None)

    async def update_and_create_acl_config(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        ak = _field(request, "accessKey")
        config = {
            "accessKey": ak, "secretKey": _field(request, "secretKey"),
            "whiteRemoteAddress": _field(request, "whiteRemoteAddress"),
            "admin": (_field(request, "admin") or "").lower() == "true",
            "defaultTopicPerm": _field(request, "defaultTopicPerm"),
            "defaultGroupPerm": _field(request, "defaultGroupPerm"),
            "topicPerms": _split(_field(request, "topicPerms")),
            "groupPerms": _split(_field(request, "groupPerms")),
        }
        remark = f"The accesskey[{_jstr(ak)}] corresponding to accessConfig has been updated failed."
        return await self._run(request, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, remark,
                               lambda: self.service.update_account(config))  # type: ignore[union-attr]

    async def delete_acl_config(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        ak = _field(request, "accessKey")
        log.info("DeleteAccessConfig called by %s", ctx.remote_addr)
        remark = f"The accesskey[{_jstr(ak)}] corresponding to accessConfig has been deleted failed."
        return await self._run(request, ResponseCode.DELETE_ACL_CONFIG_FAILED, remark,
                               lambda: self.service.delete_account(ak or ""))  # type: ignore[union-attr]

    async def update_global_white_addrs_config(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        addrs = _field(request, "globalWhiteAddrs")
        path = _field(request, "aclFileFullPath")   # missing: the default file, as 4.9.8
        remark = f"The globalWhiteAddresses[{_jstr(addrs)}] has been updated failed."
        white = _split(addrs)
        return await self._run(request, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, remark,
                               lambda: white is not None and self.service.update_global_white(white, path))  # type: ignore[union-attr]

    async def get_broker_cluster_acl_info(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        if self.service is None:
            # 4.9.8 answers nothing here (the client times out); a clear error instead
            return make_response(request, ResponseCode.SYSTEM_ERROR, "acl is not enabled on this broker (aclEnable=false)")
        versions = await trio.to_thread.run_sync(self.service.data_versions)
        default = versions.get(str(self.service.default_file), {"counter": 0, "timestamp": 0})
        fields = {
            "version": fastjson.dumps(default),
            "allAclFileVersion": fastjson.dumps(java_hashmap_order(versions)),
            "brokerName": self.broker_name, "brokerAddr": self.broker_addr, "clusterName": self.cluster_name,
        }
        return make_response(request, ResponseCode.SUCCESS, None, ext_fields=java_hashmap_order(fields))

    def handlers(self) -> dict[int, Any]:
        return {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_and_create_acl_config,
            RequestCode.DELETE_ACL_CONFIG: self.delete_acl_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_broker_cluster_acl_info,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white_addrs_config,
        }
