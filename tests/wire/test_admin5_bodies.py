"""wire/admin5: the 5.x admin bodies as fastjson writes them (alphabetical getters, nulls left
out, HashMap order for a JSONObject), and HARuntimeInfo read back as the 5.x admin client reads it."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from rmqd.wire import fastjson
from rmqd.wire.admin5 import (
    CheckRocksdbCqWriteResult, HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo,
    encode_cold_data_flow_ctr_info,
)
from rmqd.wire.errors import WireError

LONGS = st.integers(-(2**63), 2**63 - 1)
ADDRS = st.one_of(st.none(), st.from_regex(r"\A[0-9.]{7,15}:[0-9]{1,5}\Z"))
CONNS = st.builds(HAConnectionRuntimeInfo, addr=ADDRS, diff=LONGS, inSync=st.booleans(), slaveAckOffset=LONGS,
                  transferFromWhere=LONGS, transferredByteInSecond=LONGS)
CLIENTS = st.builds(HAClientRuntimeInfo, lastReadTimestamp=LONGS, lastWriteTimestamp=LONGS, masterAddr=ADDRS,
                    masterFlushOffset=LONGS, maxOffset=LONGS, transferredByteInSecond=LONGS)


@given(st.builds(HARuntimeInfo, haClientRuntimeInfo=CLIENTS, haConnectionInfo=st.lists(CONNS, max_size=3),
                 inSyncSlaveNums=st.integers(0, 2**31 - 1), master=st.booleans(), masterCommitLogMaxOffset=LONGS))
def test_ha_runtime_info_round_trips_in_fastjson_order(info: HARuntimeInfo) -> None:
    body = info.encode()
    obj = fastjson.loads(body.decode())
    assert list(obj) == ["haClientRuntimeInfo", "haConnectionInfo", "inSyncSlaveNums", "master",
                         "masterCommitLogMaxOffset"]
    client_keys = ["lastReadTimestamp", "lastWriteTimestamp", "masterAddr", "masterFlushOffset", "maxOffset",
                   "transferredByteInSecond"]
    assert list(obj["haClientRuntimeInfo"]) == [k for k in client_keys
                                                if k != "masterAddr" or info.haClientRuntimeInfo.masterAddr]
    for c in obj["haConnectionInfo"]:
        assert [k for k in c if k != "addr"] == ["diff", "inSync", "slaveAckOffset", "transferFromWhere",
                                                 "transferredByteInSecond"]
    assert HARuntimeInfo.decode(body) == info


@pytest.mark.parametrize("body", [b"", b"[]", b"\xff", b'{"haConnectionInfo":{}}', b'{"haClientRuntimeInfo":1}',
                                  b'{"master":"maybe"}', b'{"haConnectionInfo":[1]}'])
def test_ha_runtime_info_refuses_what_is_not_one(body: bytes) -> None:
    with pytest.raises(WireError):
        HARuntimeInfo.decode(body)


def test_check_result_and_cold_data_info() -> None:
    assert CheckRocksdbCqWriteResult(checkStatus=2).encode() == b'{"checkStatus":2}'
    assert CheckRocksdbCqWriteResult("x", 1).encode() == b'{"checkResult":"x","checkStatus":1}'
    # the JSONObject's keys in the order getColdDataFlowCtrInfo puts them (as Apache 5.3.3 answers)
    body = encode_cold_data_flow_ctr_info({"g1": {"coldAcc": 5}}, {"g1": 7}, 1, 2, 3)
    assert body == (b'{"runtimeTable":{"g1":{"coldAcc":5}},"configTable":{"g1":7},"cgColdReadThreshold":1,'
                    b'"globalColdReadThreshold":2,"globalAcc":3}')
