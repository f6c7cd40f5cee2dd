"""Transactions over a real store: END_TRANSACTION outcomes, op messages, the check-back,
transactionCheckMax, duplicates / late / unknown resolutions and restarts."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from fixtures import CLEAN, require, sent, stored
from rmqd.processors.common import java_hashmap_order
from rmqd.processors.transaction import (
    EndTransactionProcessor,
    TransactionalMessageCheckService,
    TransactionalMessageService,
)
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.consumer_offset import ConsumerOffsetManager
from rmqd.store.message_store import DefaultMessageStore
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand
from rmqd.wire.headers import EndTransactionRequestHeader
from rmqd.wire.message import decode_record, encode_properties

pytestmark = pytest.mark.timeout(60)

HALF, OP, MAXT = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC"
HOST = bytes([127, 0, 0, 1])


class TxHarness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.created: list[str] = []
        self.open()

    def open(self) -> None:
        cfg = MessageStoreConfig(storePathRootDir=str(self.root), mappedFileSizeCommitLog=1024 * 1024,
                                 mappedFileSizeConsumeQueue=6000, maxHashSlotNum=1000, maxIndexNum=4000)
        self.store = DefaultMessageStore(cfg)
        self.store.load()
        self.store.start()
        self.offsets = ConsumerOffsetManager(self.root)
        self.offsets.load()
        self.service = TransactionalMessageService(
            self.store, self.offsets, store_host=HOST, store_port=10911,
            create_topic=lambda t, n, p, f: self.created.append(t))
        self.service.load()

    def restart(self) -> None:
        self.offsets.persist()
        self.store.shutdown()
        self.open()

    def close(self) -> None:
        self.store.shutdown()

    def half(self, key: str, topic: str = "TxTopic", queue_id: int = 1, born: int | None = None,
             group: str = "pg") -> tuple[int, int]:
        """A half message as BrokerRole.prepare_transaction_message stores it -> (queue offset, phy)."""
        props = {"TAGS": "TagTx", "UNIQ_KEY": key, "TRAN_MSG": "true", "PGROUP": group, "WAIT": "true",
                 "REAL_TOPIC": topic, "REAL_QID": str(queue_id)}
        ordered = java_hashmap_order(props)
        msg = MessageExtBrokerInner(topic=HALF, queue_id=0, body=f"body-{key}".encode(), properties=dict(ordered),
                                    properties_string=encode_properties(ordered),
                                    born_timestamp=born if born is not None else int(time.time() * 1000),
                                    born_host=HOST, born_port=5555, store_host=HOST, store_port=10911)
        r = self.store.put_message(msg)
        assert r.is_ok()
        self.store.wait_dispatched()
        return r.appendMessageResult.logicsOffset, r.appendMessageResult.wroteOffset

    def end(self, queue_offset: int, phy: int, kind: int, group: str = "pg", check: bool = False):
        h = EndTransactionRequestHeader(producerGroup=group, tranStateTableOffset=queue_offset, commitLogOffset=phy,
                                        commitOrRollback=kind, fromTransactionCheck=check, msgId="x")
        res = self.service.end_transaction(h)
        self.store.wait_dispatched()
        return res

    def messages(self, topic: str, queue_id: int = 0) -> list:
        self.store.wait_dispatched()
        r = self.store.get_message("t", topic, queue_id, 0, 1000)
        return [decode_record(b) for b in (r.message_buffers if r else [])]


@pytest.fixture
def tx(tmp_path: Path):
    h = TxHarness(tmp_path / "store")
    yield h
    h.close()


def test_commit_writes_real_copy_and_op(tx: TxHarness) -> None:
    qo, phy = tx.half("K1")
    res = tx.end(qo, phy, 8)
    assert res.code == ResponseCode.SUCCESS and res.wrote == ["commit", "op"]
    real = tx.messages("TxTopic", 1)
    assert len(real) == 1
    m = real[0]
    assert m.sys_flag & 0xC == 0x8 and m.prepared_transaction_offset == phy
    assert m.body == b"body-K1" and m.born_port == 5555
    # the half's property string is kept (as the fixture's committed copies show)
    assert m.properties["TRAN_MSG"] == "true" and m.properties["REAL_TOPIC"] == "TxTopic"
    ops = tx.messages(OP)
    assert len(ops) == 1 and ops[0].body == str(qo).encode() and ops[0].properties == {"TAGS": "d", "WAIT": "true"}
    assert OP not in tx.created  # 4.9.8's writeOp: no topic config for the op topic


def test_duplicate_and_late_resolutions_write_nothing_more(tx: TxHarness) -> None:
    qo, phy = tx.half("K2")
    assert tx.end(qo, phy, 8).wrote == ["commit", "op"]
    again = tx.end(qo, phy, 8)
    assert again.code == ResponseCode.SUCCESS and again.wrote == []
    assert tx.end(qo, phy, 12).wrote == []  # a rollback after the commit changes nothing
    assert len(tx.messages("TxTopic", 1)) == 1 and len(tx.messages(OP)) == 1
    tx.restart()
    assert tx.end(qo, phy, 8).wrote == []  # remembered across a restart from the op queue
    assert len(tx.messages("TxTopic", 1)) == 1


def test_rollback_writes_only_the_op(tx: TxHarness) -> None:
    qo, phy = tx.half("K3")
    assert tx.end(qo, phy, 12).wrote == ["op"]
    assert tx.messages("TxTopic", 1) == []
    assert tx.end(qo, phy, 8).wrote == []  # a late commit after the rollback
    assert tx.messages("TxTopic", 1) == []


def test_unknown_and_mismatched_requests(tx: TxHarness) -> None:
    qo, phy = tx.half("K4")
    assert tx.end(qo, phy + 7, 8).remark == "Find prepared transaction message failed"
    assert tx.end(qo, 10 ** 9, 8).remark == "Find prepared transaction message failed"
    assert tx.end(qo, phy, 8, group="other").remark == "The producer group wrong"
    assert tx.end(qo + 5, phy, 8).remark == "The transaction state table offset wrong"
    assert tx.end(qo, phy, 0) is None  # UNKNOW: no answer
    assert tx.end(qo, phy, 0, check=True) is None
    assert tx.messages("TxTopic", 1) == []
    # a normal message's offset is not a half message
    msg = MessageExtBrokerInner(topic="Plain", queue_id=0, body=b"x", properties={"PGROUP": "pg"})
    r = tx.store.put_message(msg)
    assert tx.end(0, r.appendMessageResult.wroteOffset, 8).remark == "Find prepared transaction message failed"


def test_check_back_reputs_and_asks_the_producer(tx: TxHarness) -> None:
    now = int(time.time() * 1000)
    qo, phy = tx.half("K5", born=now - 60_000)
    fresh_qo, _ = tx.half("K6")  # too young to be checked
    now = int(time.time() * 1000) + 5
    reqs = tx.service.check(6000, 15, now)
    assert len(reqs) == 1
    req = reqs[0]
    assert req.group == "pg"
    ext = req.ext_fields
    assert ext["msgId"] == "K5" and ext["transactionId"] == "K5"
    new_qo, new_phy = int(ext["tranStateTableOffset"]), int(ext["commitLogOffset"])
    assert new_qo == 2 and new_phy > phy
    body = decode_record(req.body)
    assert body.topic == "TxTopic" and body.queue_id == 1 and body.physical_offset == new_phy
    assert body.properties["TRANSACTION_CHECK_TIMES"] == "1"
    halves = tx.messages(HALF)
    assert len(halves) == 3 and halves[2].properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert ext["offsetMsgId"] == halves[2].offset_msg_id
    assert req.command().code == RequestCode.CHECK_TRANSACTION_STATE
    # the producer answers COMMIT for the re-put copy
    assert tx.end(new_qo, new_phy, 8, check=True).wrote == ["commit", "op"]
    # ... and a late commit of the original copy is not a second message
    assert tx.end(qo, phy, 8).wrote == ["op"]
    assert len(tx.messages("TxTopic", 1)) == 1
    # the young half stays unchecked; the resolved ones are not asked about again
    assert tx.service.check(6000, 15, now + 20) == []
    assert tx.offsets.query_offset("CID_RMQ_SYS_TRANS", HALF, 0) == 1  # stops at the young one


def test_check_max_moves_the_half_away(tx: TxHarness) -> None:
    now = int(time.time() * 1000)
    tx.half("K7", born=now - 60_000)
    asked = 0
    for round_ in range(20):
        reqs = tx.service.check(6000, 3, now + 1000 * (round_ + 1))
        tx.store.wait_dispatched()
        asked += len(reqs)
        if not reqs:
            break
    assert asked == 3
    parked = tx.messages(MAXT)
    assert len(parked) == 1 and parked[0].properties["UNIQ_KEY"] == "K7"
    assert parked[0].properties["TRANSACTION_CHECK_TIMES"] == "3"
    assert tx.messages("TxTopic", 1) == []


def test_check_skips_halves_with_an_op(tx: TxHarness) -> None:
    now = int(time.time() * 1000)
    a = tx.half("A", born=now - 60_000)
    b = tx.half("B", born=now - 60_000)
    tx.end(*a, 12)
    reqs = tx.service.check(6000, 15, int(time.time() * 1000) + 5)
    assert [r.ext_fields["msgId"] for r in reqs] == ["B"]
    assert tx.offsets.query_offset("CID_RMQ_SYS_TRANS", OP, 0) == 1
    tx.end(*b, 8)


class FakeChannel:
    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []
        self.remote_addr = "127.0.0.1:1"

    async def send_request_oneway(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)


def test_processor_and_check_service(tx: TxHarness) -> None:
    channel = FakeChannel()
    broker = SimpleNamespace(
        message_store_config=SimpleNamespace(brokerRole="ASYNC_MASTER"),
        broker_config=SimpleNamespace(transactionTimeOut=0, transactionCheckMax=15, transactionCheckInterval=100),
        producer_manager=SimpleNamespace(get_available_channel=lambda g: channel if g == "pg" else None))
    proc = EndTransactionProcessor(broker, tx.service)
    qo, phy = tx.half("P1")

    async def main() -> None:
        req = RemotingCommand(code=RequestCode.END_TRANSACTION, opaque=9, ext_fields=EndTransactionRequestHeader(
            producerGroup="pg", tranStateTableOffset=qo, commitLogOffset=phy, commitOrRollback=12,
            fromTransactionCheck=False, msgId="P1").to_ext())
        resp = await proc.end_transaction(None, req)
        assert resp.code == ResponseCode.SUCCESS and resp.opaque == 9
        tx.half("P2", born=int(time.time() * 1000) - 10_000)
        tx.store.wait_dispatched()
        await trio.sleep(0.01)
        checker = TransactionalMessageCheckService(broker, tx.service)
        assert await checker.run_once() == 1
        assert channel.sent[0].code == RequestCode.CHECK_TRANSACTION_STATE
        slave = EndTransactionProcessor(SimpleNamespace(message_store_config=SimpleNamespace(brokerRole="SLAVE")),
                                        tx.service)
        assert (await slave.end_transaction(None, req)).code == ResponseCode.SLAVE_NOT_AVAILABLE

    trio.run(main)


FIXTURE = CLEAN


def _half(kind: str) -> tuple[int, int]:
    """(HALF queue offset, physical offset) of the transaction's original half message."""
    r = stored(FIXTURE, HALF, sent(FIXTURE, kind)["msgId"])
    return r["queueOffset"], r["physicalOffset"]


def test_fixture_store_late_duplicates_are_absorbed(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "store"
    shutil.copytree(require(FIXTURE / "store"), root)
    queues = sorted({stored(FIXTURE, "FixTxTopic", sent(FIXTURE, k)["msgId"])["queueId"]
                     for k in ("tx-commit", "tx-unknown-then-commit-by-check")})
    h = TxHarness(root)
    try:
        before = [len(h.messages("FixTxTopic", q)) for q in queues]
        # the committed transaction committed again by a late client
        assert h.end(*_half("tx-commit"), 8, group="FixTxProducerGroup").wrote == []
        # the original copy of the transaction the check committed through its re-put copy
        assert h.end(*_half("tx-unknown-then-commit-by-check"), 8, group="FixTxProducerGroup").wrote == ["op"]
        # the rolled-back one stays rolled back
        assert h.end(*_half("tx-rollback"), 8, group="FixTxProducerGroup").wrote == []
        assert [len(h.messages("FixTxTopic", q)) for q in queues] == before
        # RocketMQ's check progress (HALF 4 / OP 3 in consumerOffset.json) is honoured: nothing to ask
        assert h.service.check(6000, 15) == []
    finally:
        h.close()


def test_commit_and_op_bytes_match_rocketmq(tmp_path: Path) -> None:
    import shutil

    from rmqd.wire.message import MessageRecord

    root = tmp_path / "store"
    shutil.copytree(require(FIXTURE / "store"), root)
    half_qo, half_phy = _half("tx-commit")
    committed = stored(FIXTURE, "FixTxTopic", sent(FIXTURE, "tx-commit")["msgId"])["physicalOffset"]
    op_real = stored(FIXTURE, OP, bodyUtf8=str(half_qo))["physicalOffset"]  # the op naming that half
    h = TxHarness(root)
    try:
        half = h.store.look_message_by_offset(half_phy)
        header = EndTransactionRequestHeader(producerGroup="FixTxProducerGroup", tranStateTableOffset=half_qo,
                                             commitLogOffset=half_phy, commitOrRollback=8, msgId="x")
        final = TransactionalMessageService._end_message_transaction(half, header)
        real: MessageRecord = h.store.look_message_by_offset(committed)
        assert final.properties_string.encode() == bytes(real.properties_raw)
        assert (final.topic, final.queue_id, final.sys_flag, final.prepared_transaction_offset) == \
               (real.topic, real.queue_id, real.sys_flag, real.prepared_transaction_offset)
        h.service.put_op_message(half)
        h.store.wait_dispatched()
        op = h.messages(OP)[-1]
        assert bytes(op.properties_raw) == bytes(h.store.look_message_by_offset(op_real).properties_raw)
        assert op.body == str(half_qo).encode()
    finally:
        h.close()


def test_sigkill_snapshot_keeps_outcomes(tmp_path: Path) -> None:
    import shutil

    live = TxHarness(tmp_path / "live")
    try:
        qo, phy = live.half("S1")
        assert live.end(qo, phy, 8).wrote == ["commit", "op"]
        live.store.wait_dispatched()
        snap = tmp_path / "crashed"
        shutil.copytree(live.root, snap, ignore=shutil.ignore_patterns("lock"))
    finally:
        live.close()
    crashed = TxHarness(snap)
    try:
        assert crashed.store.last_exit_ok is False
        assert crashed.end(qo, phy, 8).wrote == []
        assert len(crashed.messages("TxTopic", 1)) == 1
    finally:
        crashed.close()


def test_commit_on_a_sync_master_waits_for_the_slave(tx: TxHarness) -> None:
    """4.9.8's final message takes the half's properties (WAIT=true), so on a SYNC_MASTER its
    putMessage waits for the slave; a slave timeout still answers SUCCESS (sendFinalMessage)."""
    waited: list[tuple[int, int]] = []

    class FakeHA:
        async def wait_replicated(self, offset_end: int, timeout_ms: int) -> str:
            waited.append((offset_end, timeout_ms))
            return "FLUSH_SLAVE_TIMEOUT"

    broker = SimpleNamespace(message_store_config=SimpleNamespace(brokerRole="SYNC_MASTER", flushDiskType="ASYNC_FLUSH",
                                                                  syncFlushTimeout=1234),
                             ha_service=FakeHA(), store=tx.store)
    proc = EndTransactionProcessor(broker, tx.service)
    qo, phy = tx.half("S1")

    async def main() -> None:
        req = RemotingCommand(code=RequestCode.END_TRANSACTION, opaque=3, ext_fields=EndTransactionRequestHeader(
            producerGroup="pg", tranStateTableOffset=qo, commitLogOffset=phy, commitOrRollback=8,
            fromTransactionCheck=False, msgId="S1").to_ext())
        resp = await proc.end_transaction(None, req)
        assert resp.code == ResponseCode.SUCCESS
        committed = tx.messages("TxTopic", 1)[-1]
        assert waited == [(committed.physical_offset + committed.total_size, 1234)]
        rollback = await proc.end_transaction(None, req)  # already resolved: nothing new to wait for
        assert rollback.code == ResponseCode.SUCCESS and len(waited) == 1

    trio.run(main)
