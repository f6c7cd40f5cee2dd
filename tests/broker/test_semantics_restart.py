"""Issue 5, "Done means": a real `rmqd serve` process is stopped IN THE MIDDLE of delay, retry and
transaction flows — with SIGKILL (no shutdown hook: abort file left, abnormal recovery, config
files only as fresh as their last periodic persist) and with a clean SIGTERM — and after the
restart nothing is lost and nothing is duplicated beyond RocketMQ's at-least-once contract.

The test plays the Java 4.9.8 client's part over raw Remoting frames (the requests' extFields
are those of the frame capture (the java-4.9.8-remoting-capture fixture, scripts/fixtures) and of
``MQClientAPIImpl``: SEND_MESSAGE_V2 with one-letter fields, HEART_BEAT with the Java body,
PULL_MESSAGE with sysFlag 4 + subscription, CONSUMER_SEND_MSG_BACK, END_TRANSACTION oneway
(flag 2), answering CHECK_TRANSACTION_STATE on the producer's own connection).

Deliveries are counted in the real topic's consume queues by UNIQ_KEY (the Java msgId, kept by
every schedule / retry / DLQ / transaction copy).

Where exactly-once is asserted and why RocketMQ gives it here (at-least-once would allow a
duplicate only in these windows, which the tests stay out of on purpose):

* delay levels: ScheduleMessageService moves a level's offset only after the due message was put
  to its real topic, and rmqd persists delayOffset.json right after every round that moved it
  (RocketMQ every flushDelayOffsetInterval). A SIGKILL between that put and that persist would
  re-deliver the message after the restart (RocketMQ: a duplicate within at-least-once). The
  exactly-once tests kill while messages are still pending (not due), or once delayOffset.json
  on disk records the deliveries made; test_sigkill_while_delivering_loses_nothing kills inside
  that window on purpose and allows at most one extra copy of a round's messages.
* retry/DLQ: CONSUMER_SEND_MSG_BACK is synchronous; once answered, the retry copy is in the commit
  log (a killed process loses no page-cache writes), so it must survive and appear once.
* transactions: a half message stays until an op message resolves it; after a restart the check
  asks the producer again. rmqd goes beyond 4.9.8 and never writes a second real copy for a
  commit that arrives twice, late or after a restart (4.9.8 would write a second copy for a
  duplicate END_TRANSACTION — the one case where RocketMQ itself duplicates).
* consumer offsets: see test_consumer_offsets_sigterm_vs_sigkill.
"""

from __future__ import annotations

import json
import signal
import subprocess
import itertools
import threading
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
import trio

from rmqd.broker.config import load_broker_settings
from rmqd.broker.remoting_client import RemotingClient
from rmqd.store import tools as store_tools
from support import READY_PREFIX, free_broker_port, free_port, rmqd, rmqd_command, wait_until, wait_until_blocking
from rmqd.wire import fastjson
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_request
from rmqd.wire.message import MessageRecord, UniqIdGenerator, decode_messages, encode_properties, parse_offset_msg_id

pytestmark = pytest.mark.timeout(90)

BROKER_NAME = "broker-restart"
READY_TIMEOUT_S = 20.0

#: short delay levels and transaction timings so a test runs in seconds; small files (the 1 GiB
#: default commit log is allocated in full, per store)
BASE_CONF = f"""\
brokerName={BROKER_NAME}
brokerClusterName=RestartCluster
messageDelayLevel=1s 2s 3s
transactionCheckInterval=1000
transactionTimeOut=1000
mappedFileSizeCommitLog=4194304
mappedFileSizeConsumeQueue=12000
"""

UNIQ = UniqIdGenerator(ip="192.0.2.2")
SCHEDULE_LEVELS = (1, 2, 3)  # messageDelayLevel above
_barriers = itertools.count()


# --------------------------------------------------------------------------------------------
# the server process


class Serve:
    """`rmqd serve` on fixed free loopback ports and a tmp store; restarted on the same ports
    (the stored messages' storeHost, and so their offset msgIds, stay valid)."""

    def __init__(self, tmp: Path, conf_text: str = BASE_CONF) -> None:
        self.tmp = tmp
        self.store = tmp / "store"
        self.conf = tmp / "broker.conf"
        self.conf.write_text(conf_text)
        self.namesrv_port = free_port()
        self.broker_port = free_broker_port()
        self.log_path = tmp / "rmqd.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def set_conf(self, conf_text: str) -> None:
        self.conf.write_text(conf_text)

    def start(self) -> "Serve":
        assert self.proc is None or self.proc.poll() is not None
        args = ("serve", "--store", str(self.store), "--namesrv-port", str(self.namesrv_port),
                "--broker-port", str(self.broker_port), "--host", "127.0.0.1", "-c", str(self.conf))
        self.starts += 1
        log = open(self.log_path, "a", encoding="utf-8", errors="replace")
        log.write(f"--- start {self.starts}: {' '.join(rmqd_command(*args))}\n")
        log.flush()
        proc = rmqd(*args, stderr=subprocess.STDOUT, env={"RMQD_LOG_LEVEL": "INFO"})
        self.proc = proc
        ready = threading.Event()
        seen: list[str] = []

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if line.startswith(READY_PREFIX):
                    seen.append(line)
                    ready.set()
            log.close()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(READY_TIMEOUT_S) or not seen:
            self.sigkill()
            raise AssertionError(f"rmqd serve did not get ready (start {self.starts})\n{self.tail()}")
        return self

    def sigkill(self) -> None:
        """kill -9: no shutdown hook, no flush, the abort file stays."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def sigterm(self) -> None:
        """A clean stop, which must exit 0."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.sigkill()
            raise AssertionError(f"rmqd did not stop within 20 s of SIGTERM\n{self.tail()}") from None
        assert code == 0, f"rmqd exited {code} after SIGTERM\n{self.tail()}"

    def finish(self) -> None:
        """The last clean stop, then what `rmqd store verify` checks (every record, consume-queue
        unit and index entry of the store the crashes left behind), with this broker.conf: the
        CLI has no -c and would expect the default delay levels' SCHEDULE_TOPIC_XXXX tag codes."""
        self.sigterm()
        problems = store_tools.verify(self.store, load_broker_settings(self.conf).store)
        assert not problems, "\n".join(str(p) for p in problems[:20])

    def stop(self, how: str) -> None:
        if how == "SIGKILL":
            self.sigkill()
            assert (self.store / "abort").exists(), "a killed broker leaves its abort file"
        else:
            self.sigterm()
            assert not (self.store / "abort").exists(), "a clean stop removes the abort file"

    def _offset_table(self, name: str) -> dict:
        try:
            return fastjson.loads((self.store / "config" / name).read_text()).get("offsetTable") or {}
        except (OSError, ValueError):  # not written yet
            return {}

    def delay_offsets(self) -> dict[int, int]:
        """config/delayOffset.json as on disk: delay level -> next offset to deliver."""
        return {int(k): int(v) for k, v in self._offset_table("delayOffset.json").items()}

    def consumer_offsets(self, topic: str, group: str) -> dict[int, int]:
        """config/consumerOffset.json as on disk: queue id -> committed offset."""
        return {int(k): int(v) for k, v in (self._offset_table("consumerOffset.json").get(f"{topic}@{group}")
                                            or {}).items()}

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


@pytest.fixture
def serve(tmp_path: Path):
    servers: list[Serve] = []

    def make(conf_text: str = BASE_CONF) -> Serve:
        s = Serve(tmp_path, conf_text)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.sigkill()


# --------------------------------------------------------------------------------------------
# the Java client's part


class JavaClient:
    """Requests shaped like the 4.9.8 Java client's (DefaultMQProducer / DefaultMQPushConsumer /
    TransactionMQProducer), on one connection to the broker."""

    def __init__(self, client: RemotingClient, addr: str, client_id: str = "192.0.2.2@4242#1") -> None:
        self.client = client
        self.addr = addr
        self.client_id = client_id
        self.checks: list[RemotingCommand] = []

        async def on_check(ctx: Any, request: RemotingCommand) -> None:
            self.checks.append(request)  # oneway from the broker: never answered with a response

        async def on_notify(ctx: Any, request: RemotingCommand) -> None:
            return None

        client.register(RequestCode.CHECK_TRANSACTION_STATE, on_check)
        client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)

    async def invoke(self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None,
                     timeout: float = 5.0) -> RemotingCommand:
        return await self.client.invoke(self.addr, make_request(code, ext, body), timeout)

    async def oneway(self, code: int, ext: dict[str, str]) -> None:
        await self.client.invoke_oneway(self.addr, make_request(code, ext, oneway=True))

    async def send(self, topic: str, body: bytes, *, queue_id: int = 1, tags: str = "TagR", group: str = "pg",
                   props: dict[str, str] | None = None, sys_flag: int = 0) -> tuple[str, RemotingCommand]:
        """SEND_MESSAGE_V2 (310); returns (UNIQ_KEY, response)."""
        uniq = UNIQ.next_id()
        p = dict(props or {})
        p.update({"UNIQ_KEY": uniq, "WAIT": "true", "TAGS": tags})
        ext = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": str(sys_flag),
               "g": str(int(time.time() * 1000)), "h": "0", "i": encode_properties(p), "j": "0", "k": "false",
               "m": "false", "n": BROKER_NAME}
        r = await self.invoke(RequestCode.SEND_MESSAGE_V2, ext, body)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        return uniq, r

    async def heartbeat(self, *, consumer_group: str | None = None, topic: str | None = None,
                        producer_groups: tuple[str, ...] = ()) -> None:
        data_set = []
        if consumer_group:
            subs = [{"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
                     "subVersion": int(time.time() * 1000), "tagsSet": [], "topic": t}
                    for t in (f"%RETRY%{consumer_group}", topic)]
            data_set.append({"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                             "groupName": consumer_group, "messageModel": "CLUSTERING",
                             "subscriptionDataSet": subs, "unitMode": False})
        body = {"clientID": self.client_id, "consumerDataSet": data_set,
                "producerDataSet": [{"groupName": g} for g in (*producer_groups, "CLIENT_INNER_PRODUCER")]}
        r = await self.invoke(RequestCode.HEART_BEAT, None, json.dumps(body).encode())
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)

    async def pull(self, topic: str, group: str, queue_id: int, offset: int) -> RemotingCommand:
        ext = {"queueId": str(queue_id), "maxMsgNums": "32", "sysFlag": "4", "suspendTimeoutMillis": "0",
               "commitOffset": "0", "bname": BROKER_NAME, "topic": topic, "queueOffset": str(offset),
               "expressionType": "TAG", "subVersion": "0", "consumerGroup": group, "subscription": "*"}
        return await self.invoke(RequestCode.PULL_MESSAGE, ext)

    async def read_topic(self, topic: str, queues: int = 4, group: str = "restart_reader") -> list[MessageRecord]:
        """Every message in the topic's consume queues, from offset 0."""
        out: list[MessageRecord] = []
        for qid in range(queues):
            offset = 0
            while True:
                r = await self.pull(topic, group, qid, offset)
                if r.code != ResponseCode.SUCCESS:
                    break
                msgs = decode_messages(bytes(r.body or b""))
                if not msgs:
                    break
                out.extend(msgs)
                offset = int(r.ext_fields["nextBeginOffset"])
        return out

    async def send_back(self, msg: MessageRecord, group: str, origin_topic: str, max_reconsume_times: int) -> None:
        """What DefaultMQPushConsumerImpl.sendMessageBack sends after RECONSUME_LATER (delay level 0:
        the broker picks 3 + reconsumeTimes)."""
        ext = {"offset": str(msg.physical_offset), "group": group, "delayLevel": "0",
               "originMsgId": msg.properties["UNIQ_KEY"], "originTopic": origin_topic, "unitMode": "false",
               "maxReconsumeTimes": str(max_reconsume_times), "bname": BROKER_NAME}
        r = await self.invoke(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)

    async def end_transaction(self, *, group: str, uniq: str, commit_log_offset: int, queue_offset: int,
                              commit: bool, from_check: bool) -> None:
        """DefaultMQProducerImpl.endTransaction / checkTransactionState: oneway (flag 2)."""
        await self.oneway(RequestCode.END_TRANSACTION, {
            "producerGroup": group, "tranStateTableOffset": str(queue_offset),
            "commitLogOffset": str(commit_log_offset), "commitOrRollback": "8" if commit else "12",
            "fromTransactionCheck": "true" if from_check else "false", "msgId": uniq, "transactionId": uniq})


async def with_client(server: Serve, fn: Callable[[JavaClient], Awaitable[Any]], timeout: float = 40.0) -> Any:
    with trio.fail_after(timeout):
        async with RemotingClient("java-as") as client:
            java = JavaClient(client, server.addr)
            try:
                return await fn(java)
            finally:
                client.close_channel(server.addr)


def run(server: Serve, fn: Callable[[JavaClient], Awaitable[Any]], timeout: float = 40.0) -> Any:
    return trio.run(with_client, server, fn, timeout)


async def schedule_barrier(java: JavaClient) -> None:
    """Wait until the schedule service has run a whole round after this call: a 5.x timer
    message that is due at once (TIMER_DELAY_MS 1, rounded down to the second) goes through
    rmq_sys_wheel_timer and is put to its own topic by the service's next tick, which delivers
    every due delay level and timer under one lock; the consume queues are dispatched in
    commit-log order, so whatever an earlier round put (a re-delivery after a restart
    included) is readable once the barrier message is. Replaces a fixed "room for a duplicate"
    sleep with the exact moment a duplicate would have shown."""
    topic = f"ScheduleBarrier{next(_barriers)}"
    await java.send(topic, b"barrier", props={"TIMER_DELAY_MS": "1"})

    async def through() -> bool:
        return len(await java.read_topic(topic)) == 1
    await wait_until(through, 10, f"the schedule service's next round (barrier message in {topic})")


async def schedule_idle(java: JavaClient) -> bool:
    """Nothing pending in any delay level: GET_BROKER_RUNTIME_INFO's scheduleMessageOffset_<level>
    ("delivered,max") is at the queue's end for every level that has a queue."""
    r = await java.invoke(RequestCode.GET_BROKER_RUNTIME_INFO)
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    table = fastjson.loads(bytes(r.body or b"{}")).get("table") or {}
    for level in SCHEDULE_LEVELS:
        stats = table.get(f"scheduleMessageOffset_{level}")
        if stats is not None:
            delivered, top = (int(x) for x in stats.split(","))
            if delivered < top:
                return False
    return True


def count_by_uniq(msgs: list[MessageRecord]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in msgs:
        key = m.properties.get("UNIQ_KEY", "?")
        counts[key] = counts.get(key, 0) + 1
    return counts


# --------------------------------------------------------------------------------------------
# a) delayed messages


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_delayed_messages_survive_restart_exactly_once(serve, how: str) -> None:
    server = serve().start()
    topic = f"DelayRestart_{how}"
    sent: dict[str, dict[str, Any]] = {}
    overdue_at: list[float] = []

    async def phase1(java: JavaClient) -> None:
        # delivered before the stop: must not come back after the restart
        for i in range(2):
            uniq, _ = await java.send(topic, f"early-{i}".encode(), props={"DELAY": "1"})
            sent[uniq] = {"body": f"early-{i}".encode(), "delay_ms": 1000}

        async def early_delivered() -> bool:
            return len(await java.read_topic(topic)) == 2
        await wait_until(early_delivered, 10, "the level-1 messages")

        async def progress_persisted() -> bool:  # (a kill before this would allow a re-delivery)
            return server.delay_offsets().get(1) == 2
        await wait_until(progress_persisted, 5, "delayOffset.json to record the delivery")
        # pending when the broker stops: level 3 (3 s, due after the restart), level 1 (due while
        # the broker is down), a 5.x timer message (TIMER_DELAY_MS) due after the restart
        for i in range(3):
            uniq, _ = await java.send(topic, f"pending-{i}".encode(), props={"DELAY": "3"})
            sent[uniq] = {"body": f"pending-{i}".encode(), "delay_ms": 3000}
        for i in range(2):
            uniq, _ = await java.send(topic, f"overdue-{i}".encode(), props={"DELAY": "1"})
            sent[uniq] = {"body": f"overdue-{i}".encode(), "delay_ms": 1000}
        overdue_at.append(time.monotonic() + 1.0)  # stored by the time the send is answered
        uniq, _ = await java.send(topic, b"timer-0", props={"TIMER_DELAY_MS": "2500"})
        # 5.x rounds the delivery time down to timerPrecisionMs (1 s): due 1.5..2.5 s after the send
        sent[uniq] = {"body": b"timer-0", "delay_ms": 1500}
        pending = await java.read_topic(topic)
        assert len(pending) == 2, "nothing pending may be delivered early"

    run(server, phase1)
    server.stop(how)
    # the behaviour under test: the level-1 ones fall due while no broker runs (what is left of
    # their 1 s after the stop, plus a margin for the millisecond store timestamps)
    time.sleep(max(0.0, overdue_at[0] + 0.05 - time.monotonic()))
    server.start()

    async def phase2(java: JavaClient) -> list[MessageRecord]:
        async def all_delivered() -> bool:
            return len(await java.read_topic(topic)) >= len(sent)
        await wait_until(all_delivered, 15, "every delayed message after the restart")
        await schedule_barrier(java)  # a duplicate would be readable by now
        return await java.read_topic(topic)

    msgs = run(server, phase2)
    counts = count_by_uniq(msgs)
    assert counts == {u: 1 for u in sent}, f"deliveries by UNIQ_KEY after {how}: {counts}"
    for m in msgs:
        row = sent[m.properties["UNIQ_KEY"]]
        assert m.body == row["body"] and m.topic == topic and m.queue_id == 1
        assert m.properties["REAL_TOPIC"] == topic and m.properties["TAGS"] == "TagR"
        assert m.store_timestamp - m.born_timestamp >= row["delay_ms"] - 50, (m.body, "delivered early")

    # the delivery progress survives one more SIGKILL: no re-delivery of anything delivered
    server.sigkill()
    server.start()

    async def phase3(java: JavaClient) -> list[MessageRecord]:
        await schedule_barrier(java)  # the restart's first round (where a re-delivery would be) is over
        return await java.read_topic(topic)

    assert count_by_uniq(run(server, phase3)) == {u: 1 for u in sent}
    server.finish()


def test_sigkill_while_delivering_loses_nothing(serve) -> None:
    """SIGKILL while the schedule service is delivering due messages and new delayed sends keep
    coming. No acknowledged message may be lost. One may come twice only where RocketMQ would
    deliver it twice too: it was put to its topic in the last round before the kill, whose
    delayOffset.json persist the kill beat — so at most twice and only a round's worth. Small
    commit-log files (16 KiB): the burst and its deliveries span several of them."""
    server = serve(BASE_CONF.replace("mappedFileSizeCommitLog=4194304", "mappedFileSizeCommitLog=16384")).start()
    topic = "DelayBurstKill"
    acked: set[str] = set()
    seen_before_kill: list[int] = []

    async def phase1(java: JavaClient) -> None:
        async def sender() -> None:
            for i in range(300):  # one every ~10 ms: the first fall due while later ones are sent
                try:
                    uniq, _ = await java.send(topic, f"burst-{i}".encode(), queue_id=i % 4, props={"DELAY": "1"})
                except Exception:  # noqa: BLE001 - the broker was killed under this send
                    return
                acked.add(uniq)
                await trio.sleep(0.01)

        async def killer() -> None:
            async def delivering() -> bool:
                n = len(await java.read_topic(topic))
                seen_before_kill.append(n)
                return n > 0
            await wait_until(delivering, 10, "the first deliveries")
            await trio.to_thread.run_sync(server.sigkill)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            nursery.start_soon(killer)

    run(server, phase1)
    assert (server.store / "abort").exists()
    server.start()

    async def phase2(java: JavaClient) -> list[MessageRecord]:
        async def all_there() -> bool:
            return set(count_by_uniq(await java.read_topic(topic))) >= acked
        await wait_until(all_there, 15, "every acknowledged delayed message after the restart")
        await schedule_barrier(java)  # a second copy would be readable by now
        return await java.read_topic(topic)

    counts = count_by_uniq(run(server, phase2))
    assert 0 < seen_before_kill[-1] < len(acked) + 1, (seen_before_kill[-1], len(acked))
    assert acked <= set(counts), f"{len(acked - set(counts))} acknowledged delayed messages lost"
    assert len(set(counts) - acked) <= 1, "only the send the kill interrupted may show up unacknowledged"
    twice = [u for u, n in counts.items() if n > 1]
    assert all(counts[u] <= 2 for u in twice), counts
    assert len(twice) <= 20, f"{len(twice)} delivered twice: more than one round's worth"
    server.finish()


# --------------------------------------------------------------------------------------------
# b) retry and dead letters


def test_retry_and_dlq_across_restarts(serve) -> None:
    """A consumer (maxReconsumeTimes 2) fails one message three times; the broker is stopped
    after every send-back, before the retry is due: SIGKILL, SIGTERM, SIGKILL."""
    server = serve().start()
    topic, group = "RetryRestartT", "RetryRestartG"
    retry, dlq = f"%RETRY%{group}", f"%DLQ%{group}"
    max_times = 2
    state: dict[str, Any] = {}

    async def produce_and_fail(java: JavaClient) -> None:
        await java.heartbeat(consumer_group=group, topic=topic)
        uniq, r = await java.send(topic, b"fail-me", props={"KEYS": "rk", "u": "1"})
        (orig,) = await java.read_topic(topic)
        state.update(uniq=uniq, origin_offset_msg_id=orig.offset_msg_id, origin_phy=orig.physical_offset)
        assert r.ext_fields["msgId"] == orig.offset_msg_id
        await java.send_back(orig, group, topic, max_times)  # reconsumeTimes 0 -> level 3 (3 s)

    run(server, produce_and_fail)
    server.stop("SIGKILL")
    server.start()

    def consume_retry_and_fail(expect_times: int, send_back: bool) -> Callable[[JavaClient], Awaitable[None]]:
        async def fn(java: JavaClient) -> None:
            await java.heartbeat(consumer_group=group, topic=topic)

            async def arrived() -> bool:
                return len(await java.read_topic(retry, queues=1)) >= expect_times
            await wait_until(arrived, 15, f"retry copy #{expect_times} in {retry}")
            copies = await java.read_topic(retry, queues=1)
            assert len(copies) == expect_times, [c.reconsume_times for c in copies]
            assert [c.reconsume_times for c in copies] == list(range(1, expect_times + 1))
            latest = copies[-1]
            assert latest.properties["UNIQ_KEY"] == state["uniq"]
            assert latest.properties["ORIGIN_MESSAGE_ID"] == state["origin_offset_msg_id"]
            assert latest.properties["RETRY_TOPIC"] == topic
            assert latest.properties["KEYS"] == "rk" and latest.properties["u"] == "1"
            assert latest.body == b"fail-me"
            if send_back:
                # the Java client restores the topic from RETRY_TOPIC before it sends back
                await java.send_back(latest, group, topic, max_times)
        return fn

    run(server, consume_retry_and_fail(1, send_back=True))  # reconsumeTimes 1 -> level 4, clamped to 3
    server.stop("SIGTERM")
    server.start()
    run(server, consume_retry_and_fail(2, send_back=True))  # reconsumeTimes 2 >= 2 -> %DLQ%
    server.stop("SIGKILL")
    server.start()

    async def check_dlq(java: JavaClient) -> None:
        async def dead_lettered() -> bool:
            return len(await java.read_topic(dlq, queues=1)) >= 1
        await wait_until(dead_lettered, 10, f"the copy in {dlq} after the restart")
        dead = await java.read_topic(dlq, queues=1)
        assert len(dead) == 1, f"{len(dead)} copies in {dlq}"
        (d,) = dead
        assert d.reconsume_times == max_times + 1 and d.properties["DELAY"] == "0"
        assert d.properties["UNIQ_KEY"] == state["uniq"]
        assert d.properties["ORIGIN_MESSAGE_ID"] == state["origin_offset_msg_id"]
        assert d.properties["RETRY_TOPIC"] == topic and d.body == b"fail-me"
        # ... and no third retry copy was made, nothing doubled by the restarts: once no delay
        # level holds anything undelivered (a stray retry copy would wait there up to 3 s) and
        # a round ran after that, every copy the broker will ever make is readable
        await wait_until(lambda: schedule_idle(java), 10, "every delay level delivered to its end")
        await schedule_barrier(java)
        copies = await java.read_topic(retry, queues=1)
        assert [c.reconsume_times for c in copies] == [1, 2]
        assert len(await java.read_topic(dlq, queues=1)) == 1
        assert len(await java.read_topic(topic)) == 1

    run(server, check_dlq)
    server.finish()


# --------------------------------------------------------------------------------------------
# c) transactions


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_transactions_across_restarts(serve, how: str) -> None:
    """Half messages outlive a stop (SIGKILL or SIGTERM) and then a SIGKILL; the check-back after
    a restart resolves them, and no commit — repeated, late, answered from a stale check, or
    after a restart — shows a transaction twice, nor a rolled-back one ever."""
    server = serve().start()
    topic, pg = "TxRestartT", "TxRestartPG"
    tx: dict[str, dict[str, Any]] = {}

    async def half(java: JavaClient, name: str) -> None:
        uniq, r = await java.send(topic, name.encode(), group=pg, props={"TRAN_MSG": "true", "PGROUP": pg},
                                  sys_flag=4)
        _ip, _port, phy = parse_offset_msg_id(r.ext_fields["msgId"])
        tx[name] = {"uniq": uniq, "phy": phy, "qoff": int(r.ext_fields["queueOffset"])}

    async def end(java: JavaClient, name: str, commit: bool = True) -> None:
        """The producer's own END_TRANSACTION for the half it sent (fromTransactionCheck false)."""
        t = tx[name]
        await java.end_transaction(group=pg, uniq=t["uniq"], commit_log_offset=t["phy"], queue_offset=t["qoff"],
                                   commit=commit, from_check=False)

    async def answer(java: JavaClient, check: RemotingCommand, commit: bool) -> None:
        """TransactionMQProducer's answer to CHECK_TRANSACTION_STATE: the offsets of the check."""
        await java.end_transaction(group=pg, uniq=check.ext_fields["transactionId"],
                                   commit_log_offset=int(check.ext_fields["commitLogOffset"]),
                                   queue_offset=int(check.ext_fields["tranStateTableOffset"]), commit=commit,
                                   from_check=True)

    async def phase1(java: JavaClient) -> None:
        await java.heartbeat(producer_groups=(pg,))
        for name in ("commit-before", "rollback-before", "commit-after-check", "rollback-after-check",
                     "commit-late", "commit-stale-check"):
            await half(java, name)
        await end(java, "commit-before")
        await end(java, "rollback-before", commit=False)

        async def resolved() -> bool:
            # both oneway ENDs were processed once both op messages are written (the Java client
            # cannot know; a oneway END the crash swallowed is asked about again by the check).
            # The op topic has no config (4.9.8): a pull is TOPIC_NOT_EXIST, its queue's max offset counts
            r = await java.invoke(RequestCode.GET_MAX_OFFSET, {"topic": "RMQ_SYS_TRANS_OP_HALF_TOPIC", "queueId": "0"})
            ops = int((r.ext_fields or {}).get("offset", 0)) if r.code == ResponseCode.SUCCESS else 0
            return ops >= 2 and len(await java.read_topic(topic)) >= 1
        await wait_until(resolved, 5, "both transactions resolved")
        # no END_TRANSACTION for the others before the crash (the producer "died" with them)

    run(server, phase1)
    server.stop(how)
    server.start()
    stale: list[RemotingCommand] = []

    async def phase2(java: JavaClient) -> None:
        # a live producer of the group (the restarted application) registers by heartbeat
        await java.heartbeat(producer_groups=(pg,))
        await end(java, "commit-late")  # the old producer's commit, late: arrives after the restart
        by_uniq = {t["uniq"]: name for name, t in tx.items()}
        answered: set[str] = set()
        want = {"commit-after-check", "rollback-after-check", "commit-stale-check"}

        async def checked() -> bool:
            for check in list(java.checks):
                assert check.is_oneway
                (m,) = decode_messages(check.body)
                name = by_uniq[check.ext_fields["transactionId"]]
                assert m.topic == topic and m.properties["UNIQ_KEY"] == tx[name]["uniq"] and m.body == name.encode()
                if name in answered:
                    continue
                answered.add(name)
                if name == "commit-stale-check":
                    stale.append(check)  # answered only after the next crash
                elif name != "commit-late":  # (if checked before its late commit: nothing to answer)
                    await answer(java, check, commit=name.startswith("commit"))
            return want <= answered
        await wait_until(checked, 15, "CHECK_TRANSACTION_STATE for the unresolved halves")
        assert not {"commit-before", "rollback-before"} & answered, \
            "a transaction resolved before the crash was checked again"

        async def visible() -> bool:
            return len(await java.read_topic(topic)) >= 3
        await wait_until(visible, 5, "the commits from the check and the late commit")
        # duplicates: the producer's own commit after the check's, a repeat of the pre-crash
        # commit, the check answered twice, a late commit of a rolled-back transaction
        await end(java, "commit-after-check")
        await end(java, "commit-before")
        await end(java, "commit-late")
        await answer(java, next(c for c in java.checks if by_uniq[c.ext_fields["transactionId"]]
                                == "commit-after-check"), commit=True)
        await end(java, "rollback-before")
        # the oneway ENDs above have no answer to wait for: a last transaction committed after
        # them on this connection (the broker hands each END to a worker in arrival order, and
        # they take one lock) becomes visible once they were handled
        uniq, r = await java.send("TxBarrierT", b"barrier", group=pg, props={"TRAN_MSG": "true", "PGROUP": pg},
                                  sys_flag=4)
        _ip, _port, phy = parse_offset_msg_id(r.ext_fields["msgId"])
        await java.end_transaction(group=pg, uniq=uniq, commit_log_offset=phy,
                                   queue_offset=int(r.ext_fields["queueOffset"]), commit=True, from_check=False)

        async def barrier_visible() -> bool:
            return len(await java.read_topic("TxBarrierT")) == 1
        await wait_until(barrier_visible, 5, "the commit sent after the duplicate ENDs")

    run(server, phase2)
    expect = {tx[n]["uniq"]: 1 for n in ("commit-before", "commit-after-check", "commit-late")}

    async def visible_once(java: JavaClient) -> None:
        msgs = await java.read_topic(topic)
        assert count_by_uniq(msgs) == expect, count_by_uniq(msgs)
        for m in msgs:
            assert m.sys_flag & 0xC == 0x8 and m.body.startswith(b"commit-")

    run(server, visible_once)
    server.stop("SIGKILL")  # once more: the outcomes must be remembered across this crash too
    server.start()
    expect[tx["commit-stale-check"]["uniq"]] = 1

    async def phase3(java: JavaClient) -> None:
        await java.heartbeat(producer_groups=(pg,))
        (check,) = stale
        await answer(java, check, commit=True)  # the answer to a check sent before this crash
        for name in ("commit-after-check", "commit-before", "commit-late"):
            await end(java, name)
        await trio.sleep(2.5)  # > transactionCheckInterval + transactionTimeOut: a stray check would come
        assert not java.checks, [c.ext_fields for c in java.checks]
        msgs = await java.read_topic(topic)
        assert count_by_uniq(msgs) == expect, count_by_uniq(msgs)

    run(server, phase3)
    server.finish()


def test_transaction_check_max_counts_across_sigterm(serve) -> None:
    """A producer that never answers: transactionCheckMax (3) checks in all, across a clean
    restart (the TRANSACTION_CHECK_TIMES count lives in the re-put half copies, the check's
    progress in consumerOffset.json), then the half is parked in TRANS_CHECK_MAX_TIME_TOPIC once
    and never reaches its topic. (After a SIGKILL the check's progress may be older than the
    last re-put, so RocketMQ — and rmqd — may ask again: checks are at-least-once.)"""
    server = serve(BASE_CONF + "transactionCheckMax=3\n").start()
    topic, pg = "TxCheckMaxT", "TxCheckMaxPG"
    state: dict[str, Any] = {}

    async def phase1(java: JavaClient) -> None:
        await java.heartbeat(producer_groups=(pg,))
        uniq, _ = await java.send(topic, b"never-answered", group=pg, props={"TRAN_MSG": "true", "PGROUP": pg},
                                  sys_flag=4)
        state["uniq"] = uniq

        async def two_checks() -> bool:
            return len(java.checks) >= 2
        await wait_until(two_checks, 10, "two checks")
        state["before"] = len(java.checks)

    run(server, phase1)
    server.stop("SIGTERM")
    server.start()

    async def phase2(java: JavaClient) -> None:
        await java.heartbeat(producer_groups=(pg,))

        async def parked() -> bool:
            return len(await java.read_topic("TRANS_CHECK_MAX_TIME_TOPIC", queues=1)) >= 1
        await wait_until(parked, 10, "the half in TRANS_CHECK_MAX_TIME_TOPIC")
        await trio.sleep(2.5)  # > transactionCheckInterval + transactionTimeOut: no check any more
        checks = state["before"] + len(java.checks)
        assert checks == 3, f"{checks} checks in all; transactionCheckMax is 3"
        assert all(c.ext_fields["transactionId"] == state["uniq"] for c in java.checks)
        (parked_msg,) = await java.read_topic("TRANS_CHECK_MAX_TIME_TOPIC", queues=1)
        assert parked_msg.properties["UNIQ_KEY"] == state["uniq"]
        assert parked_msg.properties["TRANSACTION_CHECK_TIMES"] == "3"
        assert await java.read_topic(topic) == []

    run(server, phase2)
    server.finish()


# --------------------------------------------------------------------------------------------
# d) consumer offsets


def test_consumer_offsets_sigterm_vs_sigkill(serve) -> None:
    """Like RocketMQ: a clean stop persists consumerOffset.json; after a SIGKILL only what the
    periodic persist (flushConsumerOffsetInterval) wrote is there, so offsets committed after
    the last persist are lost and those messages are consumed again (at-least-once)."""
    slow = BASE_CONF + "flushConsumerOffsetInterval=600000\n"  # no periodic persist in this test
    server = serve(slow).start()
    topic, group = "OffsetRestartT", "OffsetRestartG"

    def commit_and_query(commit: int | None) -> Callable[[JavaClient], Awaitable[int]]:
        async def fn(java: JavaClient) -> int:
            await java.heartbeat(consumer_group=group, topic=topic)
            if commit is not None:
                await java.oneway(RequestCode.UPDATE_CONSUMER_OFFSET, {
                    "queueId": "1", "bname": BROKER_NAME, "commitOffset": str(commit), "topic": topic,
                    "consumerGroup": group})
            async def query() -> int:
                r = await java.invoke(RequestCode.QUERY_CONSUMER_OFFSET, {
                    "queueId": "1", "bname": BROKER_NAME, "topic": topic, "consumerGroup": group})
                assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
                return int(r.ext_fields["offset"])

            if commit is not None:  # the oneway update is not ordered before the query: wait for it
                async def applied() -> bool:
                    return await query() == commit
                await wait_until(applied, 5, f"offset {commit} to be applied")
            return await query()
        return fn

    async def produce(java: JavaClient) -> None:
        for i in range(6):
            await java.send(topic, f"m{i}".encode())

    run(server, produce)
    assert run(server, commit_and_query(3)) == 3
    server.stop("SIGTERM")
    server.start()
    assert run(server, commit_and_query(None)) == 3, "an offset committed before SIGTERM is kept"
    assert run(server, commit_and_query(5)) == 5
    server.stop("SIGKILL")
    server.start()
    assert run(server, commit_and_query(None)) == 3, \
        "after SIGKILL the offset is the last persisted one (RocketMQ: at-least-once redelivery of 3..4)"
    server.finish()

    # with the periodic persist on, an offset older than one interval survives SIGKILL
    server.set_conf(BASE_CONF + "flushConsumerOffsetInterval=300\n")
    server.start()
    assert run(server, commit_and_query(6)) == 6
    wait_until_blocking(lambda: server.consumer_offsets(topic, group).get(1) == 6, 5,
                        "the periodic persist to write offset 6 to consumerOffset.json")
    server.stop("SIGKILL")
    server.start()
    assert run(server, commit_and_query(None)) == 6, "a periodically persisted offset survives SIGKILL"
    server.finish()
