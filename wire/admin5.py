"""The bodies of the RocketMQ 5.x admin codes rmqd answers beside 4.9.8's (processors/admin5.py).

Facts from apache/rocketmq rocketmq-all-5.3.3 (the same code in develop 8fc57f1): every one
is written by fastjson, beans with their getters' properties in alphabetical order and null
properties left out, a ``JSONObject`` in the order its keys were put.

* HARuntimeInfo (GET_BROKER_HA_STATUS 907, mqadmin haStatus): remoting/.../body/HARuntimeInfo
  with its HAConnectionRuntimeInfo (one per slave connection of a master) and
  HAClientRuntimeInfo (a slave's link to its master). ``isActivated`` has no getter: never written.
* CheckRocksdbCqWriteResult (CHECK_ROCKSDB_CQ_WRITE_PROGRESS 354): common/CheckRocksdbCqWriteResult.
* the cold-data flow control table (GET_COLD_DATA_FLOW_CTR_INFO 2003):
  ColdDataCgCtrService.getColdDataFlowCtrInfo's JSONObject.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqd.wire import fastjson
from rmqd.wire.bodies import as_bool, as_int, as_str
from rmqd.wire.errors import WireError

#: CheckRocksdbCqWriteResult.CheckStatus values.
CHECK_OK, CHECK_NOT_OK, CHECK_IN_PROGRESS, CHECK_ERROR = 0, 1, 2, 3


@dataclass
class HAConnectionRuntimeInfo:
    """One slave connection of a master (fields as the getters name them)."""

    addr: str | None = None
    diff: int = 0
    inSync: bool = False
    slaveAckOffset: int = 0
    transferFromWhere: int = 0
    transferredByteInSecond: int = 0


@dataclass
class HAClientRuntimeInfo:
    """A slave's connection to its master; a master sends it with every field at its default."""

    lastReadTimestamp: int = 0
    lastWriteTimestamp: int = 0
    masterAddr: str | None = None
    masterFlushOffset: int = 0
    maxOffset: int = 0
    transferredByteInSecond: int = 0


@dataclass
class HARuntimeInfo:
    haClientRuntimeInfo: HAClientRuntimeInfo = field(default_factory=HAClientRuntimeInfo)
    haConnectionInfo: list[HAConnectionRuntimeInfo] = field(default_factory=list)
    inSyncSlaveNums: int = 0
    master: bool = False
    masterCommitLogMaxOffset: int = 0

    def encode(self) -> bytes:
        """RemotingSerializable.encode: JSON.toJSONString(this, false) as UTF-8."""
        return fastjson.dumps(self).encode("utf-8", "replace")

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> HARuntimeInfo:
        """What the 5.x admin client reads back (HARuntimeInfo.decode); a WireError when the
        body is not such an object."""
        obj = _object(body, "HARuntimeInfo")
        client = obj.get("haClientRuntimeInfo")
        client = {} if client is None else client
        conns = obj.get("haConnectionInfo")
        conns = [] if conns is None else conns
        if not isinstance(client, dict) or not isinstance(conns, list) or \
                not all(isinstance(c, dict) for c in conns):
            raise WireError("HARuntimeInfo: haClientRuntimeInfo / haConnectionInfo have the wrong shape")
        return cls(
            haClientRuntimeInfo=HAClientRuntimeInfo(
                lastReadTimestamp=as_int(client.get("lastReadTimestamp")),
                lastWriteTimestamp=as_int(client.get("lastWriteTimestamp")),
                masterAddr=as_str(client.get("masterAddr")),
                masterFlushOffset=as_int(client.get("masterFlushOffset")),
                maxOffset=as_int(client.get("maxOffset")),
                transferredByteInSecond=as_int(client.get("transferredByteInSecond"))),
            haConnectionInfo=[HAConnectionRuntimeInfo(
                addr=as_str(c.get("addr")), diff=as_int(c.get("diff")), inSync=as_bool(c.get("inSync")),
                slaveAckOffset=as_int(c.get("slaveAckOffset")), transferFromWhere=as_int(c.get("transferFromWhere")),
                transferredByteInSecond=as_int(c.get("transferredByteInSecond"))) for c in conns],
            inSyncSlaveNums=as_int(obj.get("inSyncSlaveNums")),
            master=as_bool(obj.get("master")),
            masterCommitLogMaxOffset=as_int(obj.get("masterCommitLogMaxOffset")))


@dataclass
class CheckRocksdbCqWriteResult:
    checkResult: str | None = None
    checkStatus: int = 0

    def encode(self) -> bytes:
        """JSON.toJSONBytes(result)."""
        return fastjson.dumps(self).encode("utf-8", "replace")


def encode_cold_data_flow_ctr_info(runtime_table: dict[str, Any], config_table: dict[str, int],
                                   cg_cold_read_threshold: int, global_cold_read_threshold: int,
                                   global_acc: int) -> bytes:
    """ColdDataCgCtrService.getColdDataFlowCtrInfo: a JSONObject of the runtime table (group ->
    its cold-read accumulation), the configured per-group thresholds, both threshold settings and
    the global accumulation, in the order they are put (Apache 5.3.3's answer, compared in
    compat_tests/test_admin5_mqadmin.py). The two tables are ConcurrentHashMaps: written in
    their order."""
    obj = {
        "runtimeTable": runtime_table,
        "configTable": config_table,
        "cgColdReadThreshold": int(cg_cold_read_threshold),
        "globalColdReadThreshold": int(global_cold_read_threshold),
        "globalAcc": int(global_acc),
    }
    return fastjson.dumps(obj).encode("utf-8", "replace")


def _object(body: bytes | memoryview | None, what: str) -> dict[str, Any]:
    try:
        obj = fastjson.loads(bytes(body or b"").decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise WireError(f"{what}: not UTF-8 (byte {exc.start})") from None
    if not isinstance(obj, dict):
        raise WireError(f"{what}: not a JSON object")
    return obj


__all__ = ["CHECK_ERROR", "CHECK_IN_PROGRESS", "CHECK_NOT_OK", "CHECK_OK", "CheckRocksdbCqWriteResult",
           "HAClientRuntimeInfo", "HAConnectionRuntimeInfo", "HARuntimeInfo", "encode_cold_data_flow_ctr_info"]
