"""The 5.x admin codes of processors/admin5.py, mqadmin 5.3.3's exportMetrics and the transaction
topics of the topic list, against rmqd and Apache RocketMQ 5.3.3 (one start of each).

On both brokers: mqadmin 5.3.3 haStatus (GET_BROKER_HA_STATUS of a master without slaves) and
exportMetrics (which reads brokerStatus' getTransferredTps: it failed on rmqd before) succeed and
print the same lines; the raw answers to getColdDataFlowCtrInfo, checkRocksdbCqWriteProgress,
rocksDBConfigToJson (a good and an unknown type), exportPopRecord and setCommitLogReadAheadMode
(good, bad, missing) are equal code, remark and body. Then a committed transaction and
mqadmin topicList: both list RMQ_SYS_TRANS_HALF_TOPIC; Apache 5.3.3 also lists
RMQ_SYS_TRANS_OP_HALF_TOPIC (5.x's TopicConfigManager puts both in its startup table), rmqd does
not (as 4.9.8, whose topic table rmqd keeps: the op topic never gets a config there).
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Iterator

import pytest
import trio

from apache5_rocketmq import mqadmin5
from pair5 import rmqd_and_apache5

pytestmark = pytest.mark.timeout(480)

CLUSTER = "DefaultCluster"
HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TX_TOPIC = "Adm5TxT"
CONF = {"transactionCheckInterval": "1000"}  # the half topic appears with the first check round
#: the raw requests whose answers must be the same on both brokers: (code, extFields)
RAW = [
    (2003, None),
    (354, {"topic": "", "checkStoreTime": "1700000000000"}),
    (355, {"configType": "topics;subscriptionGroups;consumerOffsets;"}),
    (355, {"configType": "topics;bogus;"}),
    (200056, None),
    (2004, {"READ_AHEAD_MODE": "0"}),
    (2004, {"READ_AHEAD_MODE": "7"}),
    (2004, {"READ_AHEAD_MODE": "x"}),
]


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, str]]]:
    """side -> (name server, broker Remoting address)."""
    with rmqd_and_apache5(tmp_path_factory.mktemp("admin5"), CONF) as sides:
        yield sides


async def _invoke(addr: str, code: int, ext: dict[str, str] | None) -> tuple[int, str | None, bytes | None]:
    from rmqd.broker.remoting_client import RemotingClient
    from rmqd.wire.frame import make_request

    async with RemotingClient("admin5") as client:
        r = await client.invoke(addr, make_request(code, ext), timeout=10)
    return r.code, r.remark, None if r.body is None else bytes(r.body)


async def _commit_one_transaction(addr: str) -> None:
    """A half message (SEND_MESSAGE_V2, TRAN_MSG) and its COMMIT, as a 5.x producer sends them."""
    from rmqd.broker.remoting_client import RemotingClient
    from rmqd.wire.codes import RequestCode
    from rmqd.wire.frame import make_request
    from rmqd.wire.message import encode_properties

    props = encode_properties({"TRAN_MSG": "true", "PGROUP": "adm5pg", "WAIT": "true",
                               "UNIQ_KEY": "7F0000010001000000000000000A0001"})
    ext = {"a": "adm5pg", "b": TX_TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "4",
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
    async with RemotingClient("admin5-tx") as client:
        r = await client.invoke(addr, make_request(RequestCode.SEND_MESSAGE_V2, ext, b"tx-body"), timeout=10)
        assert r.code == 0, (r.code, r.remark)
        msg_id = r.ext_fields["msgId"]
        end = {"producerGroup": "adm5pg", "tranStateTableOffset": r.ext_fields["queueOffset"],
               "commitLogOffset": str(int(msg_id[-16:], 16)), "commitOrRollback": "8",
               "fromTransactionCheck": "false", "msgId": "7F0000010001000000000000000A0001"}
        await client.invoke_oneway(addr, make_request(RequestCode.END_TRANSACTION, end))


def _ok(r, side: str, what: str) -> str:
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "Exception" not in out, (side, what, r.returncode, out)
    return r.stdout


def _topics(namesrv: str, workdir: Path) -> set[str]:
    return set(_ok(mqadmin5(namesrv, "topicList", workdir=workdir), namesrv, "topicList").split())


def test_ha_status_export_metrics_raw_answers_and_the_topic_list(brokers: dict[str, tuple[str, str]],
                                                                  tmp_path: Path) -> None:
    raw: dict[str, list[tuple[int, str | None, bytes | None]]] = {}
    listed: dict[str, set[str]] = {}
    for side, (namesrv, broker) in brokers.items():
        work = tmp_path / side
        work.mkdir()
        # haStatus of a master with no slave
        out = _ok(mqadmin5(namesrv, "haStatus", "-b", broker, workdir=work), side, "haStatus")
        assert f"#MasterAddr\t{broker}" in out and "#SlaveNum\t0" in out and "#InSyncSlaveNum\t0" in out, (side, out)
        assert re.search(r"#MasterCommitLogMaxOffset\t\d+", out), (side, out)
        # exportMetrics reads getTransferredTps from brokerStatus
        out = _ok(mqadmin5(namesrv, "exportMetrics", "-c", CLUSTER, "-f", str(work / "export"), workdir=work),
                  side, "exportMetrics")
        metrics = json.loads((work / "export" / "metrics.json").read_text())
        assert "totalNormalOutTps" in metrics["totalData"]["totalTps"], (side, metrics)
        raw[side] = [trio.run(_invoke, broker, code, ext) for code, ext in RAW]
        # a committed transaction, then the topic list once the first check round has run
        r = mqadmin5(namesrv, "updateTopic", "-c", CLUSTER, "-t", TX_TOPIC, "-r", "1", "-w", "1",
                     "-a", "+message.type=TRANSACTION", workdir=work)
        assert r.returncode == 0 and "success" in r.stdout, (side, r.stdout, r.stderr)
        trio.run(_commit_one_transaction, broker)
        deadline = time.monotonic() + 60
        while HALF not in (topics := _topics(namesrv, work)) and time.monotonic() < deadline:
            time.sleep(1)
        listed[side] = topics
    assert raw["rmqd"] == raw["apache"], [(RAW[i], mine, theirs) for i, (mine, theirs)
                                          in enumerate(zip(raw["rmqd"], raw["apache"])) if mine != theirs]
    assert raw["rmqd"][0][0] == 0 and b'"runtimeTable":{}' in (raw["rmqd"][0][2] or b"")
    assert HALF in listed["rmqd"] and OP not in listed["rmqd"], listed["rmqd"]
    assert HALF in listed["apache"] and OP in listed["apache"], listed["apache"]
