"""The POP records and config files byte for byte as Apache RocketMQ 5.3.3 writes them (the
literals below are from a store a 5.3.3 broker wrote: compat_tests/apache5_rocketmq.py, one pop
of 1 message from queue 2 of PopT by PopG, its ack, and an orderly pop of 2 messages), and
property tests of their codecs."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.store.consumer_order_info import ConsumerOrderInfoManager, OrderInfo
from rmqd.wire import fastjson
from rmqd.store.message_request_mode import MessageRequestModeManager, SetMessageRequestMode
from rmqd.store.pop import (
    AckMsg, BatchAckMsg, PopCheckPoint, build_ack_message, build_ck_message, decode_revive_body, java5_properties,
)
from rmqd.store.schedule import TIMER_TOPIC, apply_timer

CK_BODY = (b'{"bm":0,"bn":"broker-a","c":"PopG","d":[0],"it":20000,"n":1,"pt":1795739631599,"q":2,'
           b'"reviveTime":1795739651599,"ro":0,"so":0,"t":"PopT"}')
CK_PROPS = ("REAL_TOPIC\x01rmq_sys_REVIVE_LOG_DefaultCluster\x02TIMER_DELIVER_MS\x011795739650599\x02"
            "UNIQ_KEY\x01PopT@2@0@PopG@1795739631599@broker-a@ck\x02TAGS\x01ck\x02TIMER_OUT_MS\x011795739650000"
            "\x02REAL_QID\x010\x02")
ACK_BODY = b'{"ao":0,"bn":"broker-a","c":"PopG","pt":1795739631599,"q":2,"so":0,"t":"PopT"}'
ACK_PROPS = ("REAL_TOPIC\x01rmq_sys_REVIVE_LOG_DefaultCluster\x02TIMER_DELIVER_MS\x011795739651599\x02"
             "UNIQ_KEY\x01PopT@2@0@PopG@1795739631599@broker-a@ack\x02TAGS\x01ack\x02TIMER_OUT_MS\x011795739651000"
             "\x02REAL_QID\x010\x02")
ORDER_INFO = ('{\n\t"table":{\n\t\t"OrdT@OrdG":{0:{\n\t\t\t\t"a":"att1",\n\t\t\t\t"cm":0,\n\t\t\t\t"i":20000,\n'
              '\t\t\t\t"l":1795739764181,\n\t\t\t\t"o":[\n\t\t\t\t\t0,\n\t\t\t\t\t1\n\t\t\t\t],\n\t\t\t\t"oc":{},\n'
              '\t\t\t\t"popTime":1795739764180\n\t\t\t}\n\t\t}\n\t}\n}')
REVIVE = "rmq_sys_REVIVE_LOG_DefaultCluster"
HOST = b"\x7f\x00\x00\x01"


def test_checkpoint_record_is_5_3_3s() -> None:
    ck = decode_revive_body("ck", CK_BODY)
    assert isinstance(ck, PopCheckPoint)
    assert (ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.queue_offset_diff, ck.num) == ("PopT", "PopG", 2, 0, [0], 1)
    assert ck.encode() == CK_BODY
    msg = build_ck_message(ck, revive_topic=REVIVE, revive_qid=0, now_ms=ck.pop_time + 77, store_host=HOST,
                           store_port=35713)
    assert apply_timer(msg, ck.pop_time + 77) is None
    assert msg.topic == TIMER_TOPIC and msg.queue_id == 0
    assert java5_properties(msg.get_properties_string()) == CK_PROPS


def test_ack_record_is_5_3_3s() -> None:
    ack = decode_revive_body("ack", ACK_BODY)
    assert isinstance(ack, AckMsg) and not isinstance(ack, BatchAckMsg)
    assert ack.encode() == ACK_BODY
    msg = build_ack_message(ack, invisible_time=20000, revive_topic=REVIVE, revive_qid=0, now_ms=ack.pop_time + 232,
                            store_host=HOST, store_port=35713)
    assert apply_timer(msg, ack.pop_time + 232) is None
    assert java5_properties(msg.get_properties_string()) == ACK_PROPS
    # the ack belongs to the checkpoint above
    ck = decode_revive_body("ck", CK_BODY)
    assert isinstance(ck, PopCheckPoint)
    assert ack.merge_key("broker-a") == ck.merge_key()


def test_batch_ack_record() -> None:
    b = BatchAckMsg(ack_offset=-1, start_offset=3, consumer_group="g", topic="t", queue_id=1, pop_time=9,
                    broker_name="bn", ack_offset_list=[3, 5])
    assert b.encode() == b'{"ao":-1,"aol":[3,5],"bn":"bn","c":"g","pt":9,"q":1,"so":3,"t":"t"}'
    assert decode_revive_body("bAck", b.encode()) == b
    assert b.batch_unique_id() == "t@1@[3, 5]@g@9@bAck"
    # 5.3 overwrites the batch key with the single-ack key: what its records carry
    msg = build_ack_message(b, invisible_time=1, revive_topic=REVIVE, revive_qid=0, now_ms=0, store_host=HOST,
                            store_port=1)
    assert msg.properties["UNIQ_KEY"] == "t@1@-1@g@9@bn@ack" and msg.properties["TAGS"] == "bAck"


def test_ack_accepts_long_names() -> None:
    a = decode_revive_body("ack", b'{"ackOffset":4,"startOffset":1,"consumerGroup":"g","topic":"t","queueId":2,'
                                  b'"popTime":5}')
    assert a == AckMsg(ack_offset=4, start_offset=1, consumer_group="g", topic="t", queue_id=2, pop_time=5)


def test_checkpoint_indexes() -> None:
    ck = PopCheckPoint(start_offset=10, pop_time=0, invisible_time=0, bit_map=0, num=3, queue_id=0, topic="t",
                       cid="g", queue_offset_diff=[0, 2, 5])
    assert [ck.index_of_ack(o) for o in (9, 10, 11, 12, 15)] == [-1, 0, -1, 1, 2]
    assert [ck.ack_offset_by_index(i) for i in range(3)] == [10, 12, 15]
    old = PopCheckPoint(start_offset=10, pop_time=0, invisible_time=0, bit_map=0, num=2, queue_id=0, topic="t", cid="g")
    assert [old.index_of_ack(o) for o in (10, 11, 12)] == [0, 1, -1]
    ck.set_acked(31)
    assert ck.bit_map < 0 and ck.is_acked(31)  # Java's int


checkpoints = st.builds(
    PopCheckPoint, start_offset=st.integers(0, 2**62), pop_time=st.integers(0, 2**45),
    invisible_time=st.integers(0, 2**40), bit_map=st.integers(-(2**31), 2**31 - 1), num=st.integers(0, 32),
    queue_id=st.integers(0, 2**31 - 1), topic=st.text(min_size=1, max_size=20),
    cid=st.text(min_size=1, max_size=20), revive_offset=st.integers(0, 2**62),
    queue_offset_diff=st.one_of(st.none(), st.lists(st.integers(0, 2**31 - 1), max_size=32)),
    broker_name=st.one_of(st.none(), st.text(max_size=10)),
    re_put_times=st.one_of(st.none(), st.integers(0, 20).map(str)))


@settings(deadline=None)
@given(checkpoints)
def test_checkpoint_round_trip(ck: PopCheckPoint) -> None:
    assert decode_revive_body("ck", ck.encode()) == ck


@settings(deadline=None)
@given(st.integers(-1, 2**62), st.integers(0, 2**62), st.text(max_size=20), st.text(max_size=20),
       st.integers(0, 2**31 - 1), st.integers(0, 2**45), st.one_of(st.none(), st.text(max_size=10)),
       st.lists(st.integers(0, 2**62), max_size=40))
def test_ack_round_trip(ao: int, so: int, g: str, t: str, q: int, pt: int, bn: str | None, aol: list[int]) -> None:
    a = AckMsg(ao, so, g, t, q, pt, bn)
    assert decode_revive_body("ack", a.encode()) == a
    assert a.encode() == fastjson.dumps(a.to_json_obj()).encode("utf-8")  # the one format, the generic writer's bytes
    b = BatchAckMsg(ao, so, g, t, q, pt, bn, ack_offset_list=aol)
    assert decode_revive_body("bAck", b.encode()) == b


def test_consumer_order_info_file_is_5_3_3s(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "consumerOrderInfo.json").write_text(ORDER_INFO)
    m = ConsumerOrderInfoManager(tmp_path, clock=lambda: 1795739764181)
    assert m.load()
    info = m.get("OrdT", "OrdG", 0)
    assert info == OrderInfo(pop_time=1795739764180, invisible_time=20000, offset_list=[0, 1],
                             last_consume_timestamp=1795739764181, attempt_id="att1", offset_consumed_count={})
    assert m.encode(pretty=True) == ORDER_INFO


def test_consumer_order_info_semantics() -> None:
    now = [1000]
    m = ConsumerOrderInfoManager("/nonexistent", clock=lambda: now[0])
    counts = m.update("a1", "T", "G", 0, pop_time=1000, invisible_time=5000, msg_queue_offsets=[4, 5, 7])
    assert counts == [(None, 0)]
    assert m.get("T", "G", 0).offset_list == [4, 1, 3]
    assert m.check_block("a2", "T", "G", 0, 5000) and not m.check_block("a1", "T", "G", 0, 5000)
    assert m.commit_and_next("T", "G", 0, 5, pop_time=999) == -2  # another pop's receipt
    assert m.commit_and_next("T", "G", 0, 5, pop_time=1000) == 4  # 4 still not acked
    assert m.commit_and_next("T", "G", 0, 6, pop_time=1000) == -1  # never handed out
    assert m.commit_and_next("T", "G", 0, 4, pop_time=1000) == 7
    m.update_next_visible_time("T", "G", 0, 7, pop_time=1000, next_visible_time=2000)
    now[0] = 2001
    assert not m.check_block("a2", "T", "G", 0, 5000)  # 7 is visible again, the rest acked
    again = m.update("a3", "T", "G", 0, pop_time=2001, invisible_time=5000, msg_queue_offsets=[7])
    assert again == [(7, 1), (None, 1)]  # delivered once before


def test_consumer_order_info_file_only_once_used(tmp_path: Path) -> None:
    """A store no orderly POP consumer touched keeps 4.9's config/ file set."""
    path = tmp_path / "config" / "consumerOrderInfo.json"
    m = ConsumerOrderInfoManager(tmp_path, clock=lambda: 1000)
    m.persist()
    assert not path.exists()
    m.update("a1", "T", "G", 0, pop_time=1000, invisible_time=5000, msg_queue_offsets=[4])
    m.persist()
    assert '"T@G"' in path.read_text()
    m.table.clear()  # emptied after use: the file is kept up to date, not left stale
    m.persist()
    assert fastjson.loads(path.read_text()) == {"table": {}}


def test_message_request_mode_file(tmp_path: Path) -> None:
    m = MessageRequestModeManager(tmp_path)
    m.set_mode(SetMessageRequestMode(topic="T", consumer_group="G", mode="POP"))
    m.persist()
    again = MessageRequestModeManager(tmp_path)
    assert again.load() and again.get_mode("T", "G") == SetMessageRequestMode("T", "G", "POP", 0)
    assert '"mode":"POP"' in (tmp_path / "config" / "messageRequestMode.json").read_text()


def test_damaged_checkpoint_names_only_what_it_has() -> None:
    ck = PopCheckPoint(start_offset=5, pop_time=0, invisible_time=0, bit_map=0, num=4, queue_id=0, topic="t",
                       cid="g", queue_offset_diff=[0, 3])
    assert ck.message_offsets() == [(0, 5), (1, 8)]
    old = PopCheckPoint(start_offset=5, pop_time=0, invisible_time=0, bit_map=0, num=2, queue_id=0, topic="t", cid="g")
    assert old.message_offsets() == [(0, 5), (1, 6)]
