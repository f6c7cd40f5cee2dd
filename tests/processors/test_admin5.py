"""The 5.x admin codes mqadmin 5.x sends with no 4.9.8 counterpart (processors/admin5.py), on a
running broker: haStatus of a master without slaves, getColdDataFlowCtrInfo,
setCommitLogReadAheadMode, exportPopRecord, checkRocksdbCqWriteProgress, rocksDBConfigToJson,
malformed headers (a code and a remark, never an exception), their ACL rows, and brokerStatus'
out-TPS key by the requester's version.

Facts: apache/rocketmq rocketmq-all-5.3.3 (AdminBrokerProcessor, DefaultHAService,
ColdDataCgCtrService, MQClientAPIImpl); the same code in develop 8fc57f1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_harness import run_with_broker
from rmqd.processors.acl import DEFAULT_ADMIN_CODES, SUB, parse_request
from rmqd.processors.admin5 import Admin5Processor
from rmqd.wire import fastjson
from rmqd.wire.admin5 import HARuntimeInfo
from rmqd.wire.bodies import KVTable
from rmqd.wire.codes import MQVersion, RequestCode, ResponseCode
from rmqd.wire.frame import make_request
from rmqd.wire.names import TOPIC_ILLEGAL

COLD_INFO = (b'{"runtimeTable":{},"configTable":{},"cgColdReadThreshold":3145728,"globalColdReadThreshold":104857600,'
             b'"globalAcc":0}')
#: createResponseCommand(null)'s remark, which 5.3.3 leaves on the answers of 200056 and 354
UNSET = "not set any response code"


def test_ha_status_of_a_master_without_slaves(tmp_path: Path) -> None:
    async def fn(h) -> None:
        assert (await h.send_v2("HaT", b"x" * 50)).code == ResponseCode.SUCCESS
        r = await h.invoke(RequestCode.GET_BROKER_HA_STATUS)
        assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
        end = h.role.store.get_max_phy_offset()
        assert end > 0
        # fastjson's order; the master's HAClientRuntimeInfo is all defaults (masterAddr null: left out)
        assert bytes(r.body) == (
            b'{"haClientRuntimeInfo":{"lastReadTimestamp":0,"lastWriteTimestamp":0,"masterFlushOffset":0,'
            b'"maxOffset":0,"transferredByteInSecond":0},"haConnectionInfo":[],"inSyncSlaveNums":0,'
            b'"master":true,"masterCommitLogMaxOffset":%d}' % end)
        info = HARuntimeInfo.decode(r.body)
        assert info.master and info.masterCommitLogMaxOffset == end and info.haConnectionInfo == []
    run_with_broker(tmp_path, fn)


def test_cold_data_read_ahead_pop_and_rocksdb_codes(tmp_path: Path) -> None:
    async def fn(h) -> None:
        # getColdDataFlowCtrInfo: no group is counted or configured; 5.x's default thresholds
        r = await h.invoke(RequestCode.GET_COLD_DATA_FLOW_CTR_INFO)
        assert (r.code, r.remark, bytes(r.body)) == (ResponseCode.SUCCESS, None, COLD_INFO)
        assert fastjson.loads(COLD_INFO.decode())["runtimeTable"] == {}

        # setCommitLogReadAheadMode: 0 / 1, madvise'd on the mapped commit-log files
        assert (await h.send_v2("RaT", b"y")).code == ResponseCode.SUCCESS
        for mode in ("1", "0"):
            r = await h.invoke(RequestCode.SET_COMMITLOG_READ_MODE, {"READ_AHEAD_MODE": mode})
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, f"set commitlog readahead mode success, mode: {mode}")
        assert Admin5Processor(h.role)._advise_commit_log(1) >= 1
        r = await h.invoke(RequestCode.SET_COMMITLOG_READ_MODE, {"READ_AHEAD_MODE": "2"})
        assert (r.code, r.remark) == (ResponseCode.INVALID_PARAMETER, "set commitlog readahead mode param value error")
        for ext in ({"READ_AHEAD_MODE": "x"}, {"READ_AHEAD_MODE": ""}, {"READ_AHEAD_MODE": " 1"}, {"other": "1"}):
            r = await h.invoke(RequestCode.SET_COMMITLOG_READ_MODE, ext)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode failed"), ext
        r = await h.invoke(RequestCode.SET_COMMITLOG_READ_MODE, None)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode param error")

        # exportPopRecord: the POP records are in the file store already
        r = await h.invoke(RequestCode.POP_ROLLBACK)
        assert (r.code, r.remark, r.body) == (ResponseCode.SUCCESS, UNSET, None)

        # checkRocksdbCqWriteProgress: answered at once with CHECK_IN_PROGRESS, as 5.x does
        for ext in ({"topic": "", "checkStoreTime": "1700000000000"}, {"topic": "RaT"}, {"topic": "NoSuch"}):
            r = await h.invoke(RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS, ext)
            assert (r.code, r.remark, bytes(r.body)) == (ResponseCode.SUCCESS, UNSET, b'{"checkStatus":2}'), ext
        r = await h.invoke(RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS, {"checkStoreTime": "1"})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                      "header field 'CheckRocksdbCqWriteProgressRequestHeader.topic': is missing")
        r = await h.invoke(RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS, {"topic": "a/b"})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, TOPIC_ILLEGAL)

        # rocksDBConfigToJson: nothing kept in RocksDB, so nothing to export; the names are checked
        for types in ("topics;", "topics;subscriptionGroups;consumerOffsets;", " CONSUMEROFFSETS ;;", ""):
            r = await h.invoke(RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON, {"configType": types})
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, "export done."), types
        r = await h.invoke(RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON, {"configType": "topics;bogus;"})
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark.startswith("java.lang.IllegalArgumentException: Unknown config type: bogus, org.apache.")
        r = await h.invoke(RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON, {})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                      "header field 'ExportRocksDBConfigToJsonRequestHeader.configType': is missing")
    run_with_broker(tmp_path, fn)


@pytest.mark.parametrize("version, key, other", [
    (MQVersion["V4_9_8"].value, "getTransferedTps", "getTransferredTps"),
    (MQVersion["V5_3_3"].value, "getTransferredTps", "getTransferedTps"),
])
def test_runtime_info_names_the_out_tps_as_the_requesters_broker(tmp_path: Path, version: int, key: str,
                                                                 other: str) -> None:
    """4.9.8 writes getTransferedTps, 5.x getTransferredTps (ExportMetricsCommand of each reads
    its own spelling and fails without it)."""
    async def fn(h) -> None:
        request = make_request(RequestCode.GET_BROKER_RUNTIME_INFO)
        request.version = version
        r = await h.client.invoke(h.broker_addr, request, 5.0)
        table = KVTable.decode(r.body).table
        assert key in table and other not in table
        assert len(table[key].split(" ")) == 3 and "putTps" in table  # "tps10 tps60 tps600"
    run_with_broker(tmp_path, fn)


def test_acl_rows() -> None:
    """354 is @RocketMQAction GET with @RocketMQResource(TOPIC): SUB on the topic; 907, 2003 and
    355 name no topic or group; 2004 and 200056 change the broker's own state: admin codes in
    rmqd (5.x checks no resource for them)."""
    def needs(code: int, ext: dict[str, str] | None = None) -> dict[str, int] | None:
        return parse_request(make_request(code, {"AccessKey": "ak", **(ext or {})}), "1.2.3.4:5").resources

    assert needs(RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS, {"topic": "T", "checkStoreTime": "0"}) == {"T": SUB}
    # "every topic": 5.x checks the blank resource against the defaults, as plain ACL does here
    assert needs(RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS, {"topic": ""}) == {"": SUB}
    for code in (RequestCode.GET_BROKER_HA_STATUS, RequestCode.GET_COLD_DATA_FLOW_CTR_INFO,
                 RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON):
        assert not needs(code, {"configType": "topics;"}) and int(code) not in DEFAULT_ADMIN_CODES
    assert {int(RequestCode.SET_COMMITLOG_READ_MODE), int(RequestCode.POP_ROLLBACK)} <= DEFAULT_ADMIN_CODES
