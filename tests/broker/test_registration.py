"""Registrations and topics.json saves: one in flight, the rest coalesced; increments carry
the changed topics with the current DataVersion; a failure makes the next one full; a live
broker creating hundreds of topics leaves the name server with every one of them, the file
with every one of them, and far fewer registrations and saves than topics."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import trio

from broker_harness import run_with_broker
from rmqd.broker.registration import BrokerRegistrar, Coalescer
from rmqd.store.topic_config import TopicConfigManager
from rmqd.wire.bodies import TopicConfig, TopicConfigSerializeWrapper, TopicList
from rmqd.wire.codes import RequestCode, ResponseCode


def test_coalescer_runs_one_at_a_time_and_serves_every_ask_made_meanwhile() -> None:
    async def main() -> None:
        release = trio.Event()
        started = trio.Event()
        state = {"runs": 0, "in_flight": 0, "max": 0}

        async def work() -> None:
            state["in_flight"] += 1
            state["max"] = max(state["max"], state["in_flight"])
            started.set()
            await release.wait()
            state["runs"] += 1
            state["in_flight"] -= 1

        c = Coalescer("test", work)
        async with trio.open_nursery() as nursery:
            await nursery.start(c.run)
            first = c.request()
            await started.wait()  # the first run is in flight
            later = [c.request() for _ in range(50)]
            waited = []

            async def waiter(ticket: int) -> None:
                await c.wait(ticket)
                waited.append(ticket)

            for t in later:
                nursery.start_soon(waiter, t)
            await trio.testing.wait_all_tasks_blocked()
            assert waited == [] and state["in_flight"] == 1
            release.set()
            with trio.fail_after(10):
                await c.wait(later[-1])
                await trio.testing.wait_all_tasks_blocked()
            assert state == {"runs": 2, "in_flight": 0, "max": 1}  # the first run, then one for all 50
            assert sorted(waited) == later and first < later[0]
            await c.wait(first)  # served long ago: returns at once
            nursery.cancel_scope.cancel()

    import trio.testing  # noqa: F401 - wait_all_tasks_blocked

    trio.run(main)


def test_coalescer_survives_a_failing_run() -> None:
    async def main() -> None:
        calls = []

        async def work() -> None:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("boom")

        c = Coalescer("test", work)
        async with trio.open_nursery() as nursery:
            await nursery.start(c.run)
            with trio.fail_after(10):
                await c.request_and_wait()
                await c.request_and_wait()
            assert len(calls) == 2
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_coalescer_paces_runs_nobody_waits_for_and_a_waiter_cuts_the_pause() -> None:
    from trio.testing import MockClock

    async def main() -> None:
        starts: list[float] = []

        async def work() -> None:
            starts.append(trio.current_time())
            await trio.sleep(1.0)  # a save of a big table

        c = Coalescer("test", work, pace=4.0, max_pause=10.0)
        async with trio.open_nursery() as nursery:
            await nursery.start(c.run)
            t0 = trio.current_time()
            c.request()
            await trio.sleep(0.5)
            c.request()  # asked during the run, nobody waiting: the next run waits 4 x 1 s
            await trio.sleep(2.0)
            assert len(starts) == 1
            await trio.sleep(3.0)
            assert len(starts) == 2 and starts[1] - t0 == pytest.approx(5.0)
            await trio.sleep(1.5)  # the second run is over: nothing pending, nothing waits
            c.request()
            await trio.sleep(0.1)
            assert len(starts) == 3 and starts[2] - t0 == pytest.approx(7.0)  # after an idle spell: at once
            c.request()
            await trio.sleep(1.5)  # the third run ended at t0 + 8; the next would start at t0 + 12
            with trio.fail_after(1.5):
                await c.wait(c.request())  # a waiter: its run starts now (and takes its 1 s)
            assert starts[3] - t0 == pytest.approx(8.6)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=MockClock(autojump_threshold=0))


def test_registrar_full_then_increments_then_full_after_a_failure(tmp_path: Path) -> None:
    topics = TopicConfigManager(tmp_path)
    sent: list[tuple[TopicConfigSerializeWrapper, bool]] = []
    answers = [True, True, False, True, True]

    async def send(wrapper: TopicConfigSerializeWrapper, check_order: bool) -> bool:
        sent.append((wrapper, check_order))
        return answers[len(sent) - 1]

    async def main() -> None:
        registrar = BrokerRegistrar(topics, send)
        async with trio.open_nursery() as nursery:
            await nursery.start(registrar.run)
            with trio.fail_after(10):
                await registrar.wait(registrar.request_increment())  # the first is full regardless
                full = sent[-1][0]
                assert "TBW102" in full.topicConfigTable and full.dataVersion == topics.data_version

                for name in ("A", "B"):
                    topics.create_topic_in_send_message_method(name, "TBW102", 8, 0)
                await registrar.wait(registrar.request_increment())
                inc = sent[-1][0]
                assert set(inc.topicConfigTable) == {"A", "B"} and inc.dataVersion == topics.data_version
                assert sent[-1][1] is False  # auto-create: no order-config check (4.9: checkOrderConfig=false)

                await registrar.wait(registrar.request_increment())  # nothing changed: nothing sent
                assert len(sent) == 2

                topics.update_topic_config(TopicConfig("C", 2, 2, 6))
                await registrar.wait(registrar.request_increment(check_order_config=True))  # this one fails
                assert set(sent[-1][0].topicConfigTable) == {"C"} and sent[-1][1] is True

                topics.create_topic_in_send_message_method("D", "TBW102", 8, 0)
                await registrar.wait(registrar.request_increment())
                assert {"A", "B", "C", "D", "TBW102"} <= set(sent[-1][0].topicConfigTable)  # full again
                assert registrar.sent_full == 2 and registrar.sent_increments == 2
            nursery.cancel_scope.cancel()

    topics.start_journal()  # changes journaled, not saved one by one
    trio.run(main)


def test_snapshot_and_delta_carry_the_version_that_counts_them(tmp_path: Path) -> None:
    topics = TopicConfigManager(tmp_path)
    topics.start_journal()
    topics.take_registration_snapshot()
    topics.create_topic_in_send_message_method("X", "TBW102", 8, 0)
    topics.delete_topic_config("X")
    topics.create_topic_in_send_message_method("Y", "TBW102", 4, 0)
    delta = topics.take_registration_delta()
    assert list(delta.topicConfigTable) == ["Y"] and delta.dataVersion == topics.data_version
    assert topics.take_registration_delta().topicConfigTable == {}


def test_changes_are_journaled_and_saved_by_the_broker_writer_not_per_change(tmp_path: Path) -> None:
    topics = TopicConfigManager(tmp_path)
    asked = []
    topics.start_journal()
    topics.deferred_persist = lambda: asked.append(1)
    for i in range(20):
        topics.create_topic_in_send_message_method(f"T{i}", "TBW102", 8, 0)
    topics.update_topic_config(TopicConfig("Adm", 2, 2, 6))
    topics.delete_topic_config("T3")
    assert len(asked) == 22 and not (tmp_path / "config" / "topics.json").exists()
    assert topics.change_seq == 22 and topics.persisted_seq == 0
    (journal,) = topics.journal.files()
    assert len(journal.read_text().splitlines()) == 22  # one line per change, before the answer

    # a broker killed now: the next one reads the file (none yet) and the journal
    again = TopicConfigManager(tmp_path)
    assert again.load()
    assert {f"T{i}" for i in range(20)} - {"T3"} <= set(again.topic_config_table)
    assert "T3" not in again.topic_config_table and again.topic_config_table["Adm"].writeQueueNums == 2
    assert again.data_version == topics.data_version

    topics.persist()  # the writer's save: the file holds everything, the journal it covers goes
    assert topics.persisted_seq == 22 and topics.journal.files() == []
    saved = json.loads((tmp_path / "config" / "topics.json").read_text())
    assert {f"T{i}" for i in range(20)} - {"T3"} <= set(saved["topicConfigTable"])
    topics.create_topic_in_send_message_method("After", "TBW102", 8, 0)
    assert len(topics.journal.files()) == 1  # a new journal file for changes after the save
    topics.stop_journal()
    topics.deferred_persist = None
    topics.create_topic_in_send_message_method("Now", "TBW102", 8, 0)  # no journal: saved at once
    assert topics.persisted_seq == 24 and topics.journal.files() == []


def test_a_killed_brokers_journal_is_folded_at_start_and_a_cut_line_ignored(tmp_path: Path) -> None:
    topics = TopicConfigManager(tmp_path)
    topics.persist()
    topics.start_journal()
    topics.deferred_persist = lambda: None
    topics.create_topic_in_send_message_method("Kept", "TBW102", 8, 0)
    (journal,) = topics.journal.files()
    with open(journal, "a") as f:
        f.write('{"topic":"Cut","config":{"topicNa')  # a write cut short by the kill
    again = TopicConfigManager(tmp_path)
    assert again.load() and "Kept" in again.topic_config_table and "Cut" not in again.topic_config_table
    again.start_journal()  # folds: the file says it, no journal left
    assert again.journal.files() == []
    assert "Kept" in json.loads((tmp_path / "config" / "topics.json").read_text())["topicConfigTable"]


N_TOPICS = 300


def test_live_broker_creating_many_topics_registers_them_all_with_few_registrations(tmp_path: Path) -> None:
    """Auto-create by sending from several connections at once, and UPDATE_AND_CREATE_TOPIC
    (answered once routable and on disk: journaled): never two registrations (or saves) in
    flight, far fewer of either than topics, and in the end the name server routes every
    topic and topics.json holds every topic."""

    async def fn(h) -> None:
        role = h.role
        seen = {"reg": 0, "reg_max": 0, "save": 0, "save_max": 0}
        outer = role._outer
        real_register = outer.register_broker_all

        async def counting_register(**kw):
            seen["reg"] += 1
            seen["reg_max"] = max(seen["reg_max"], role.registrar.worker.in_flight)
            await trio.sleep(0.01)  # a name server that takes a while: requests pile up behind
            return await real_register(**kw)

        outer.register_broker_all = counting_register
        real_save = role.topic_config_manager.persist

        def counting_save() -> None:
            seen["save"] += 1
            seen["save_max"] = max(seen["save_max"], role.topics_writer.in_flight)
            real_save()

        role.topic_config_manager.persist = counting_save

        async def sender(k: int) -> None:
            for i in range(k, N_TOPICS, 4):
                r = await h.send_v2(f"Scale{i}", b"x", default_topic_queue_nums=8)
                assert r.code == ResponseCode.SUCCESS, r.remark

        t0 = time.monotonic()
        async with trio.open_nursery() as nursery:
            for k in range(4):
                nursery.start_soon(sender, k)
        for i in range(20):  # UPDATE_AND_CREATE_TOPIC: routable as soon as it is answered
            r = await h.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": f"Adm{i}", "defaultTopic": "TBW102", "readQueueNums": "8", "writeQueueNums": "8",
                "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
            assert r.code == ResponseCode.SUCCESS
            route = await h.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"Adm{i}"}, addr=h.namesrv_addr)
            assert route.code == ResponseCode.SUCCESS
            on_disk = TopicConfigManager(role.settings.store.storePathRootDir)  # what a restart after a kill reads
            assert on_disk.load() and f"Adm{i}" in on_disk.topic_config_table
        with trio.fail_after(20):
            await role.registrar.worker.drain()
            await role.topics_writer.drain()
        elapsed = time.monotonic() - t0

        r = await h.invoke(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, addr=h.namesrv_addr)
        listed = set(TopicList.decode(r.body).topicList)
        wanted = {f"Scale{i}" for i in range(N_TOPICS)} | {f"Adm{i}" for i in range(20)}
        assert wanted <= listed
        saved = json.loads((Path(role.settings.store.storePathRootDir) / "config" / "topics.json").read_text())
        assert wanted <= set(saved["topicConfigTable"])
        assert seen["reg_max"] == 1 and seen["save_max"] == 1
        # each admin create waits for its own registration; the 300 sends share theirs, and
        # saves are shared by all (nobody waits for one)
        assert seen["reg"] < N_TOPICS // 3 + 20 + 5, (seen, elapsed)
        assert seen["save"] < N_TOPICS // 3, (seen, elapsed)

    run_with_broker(tmp_path, fn, timeout=120)


def test_compressed_registrations_reach_the_name_server(tmp_path: Path) -> None:
    """compressedRegister=true: full and incremental registrations in 4.9's compressed form."""

    async def fn(h) -> None:
        seen: list[bool] = []
        real = h.role._outer.register_broker_all

        async def spy(**kw):
            seen.append(kw["compressed"])
            return await real(**kw)

        h.role._outer.register_broker_all = spy
        r = await h.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "Zipped", "defaultTopic": "TBW102", "readQueueNums": "3", "writeQueueNums": "3", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        assert r.code == ResponseCode.SUCCESS
        await h.role.register_broker_all()  # a full one too
        assert seen == [True, True]
        for topic in ("Zipped", "TBW102"):
            route = await h.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, addr=h.namesrv_addr)
            assert route.code == ResponseCode.SUCCESS

    run_with_broker(tmp_path, fn, compressedRegister="true")
