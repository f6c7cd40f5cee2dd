"""Dispatch taken from the append (CommitLog.appended): the same DispatchRequest fields as
parsing the written record back, and the send processor's claim that its stored-properties
map is exactly what the stored string decodes to."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqd.processors.send import properties_to_store
from rmqd.store.commitlog import CommitLog, MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
from rmqd.wire.javamap import java_hashmap_order
from rmqd.wire.message import decode_properties, encode_properties

# property text as clients could send it: separators, empty names and values included
_TEXT = st.lists(st.sampled_from(["a", "B", "_", "\x01", "\x02", "é", "中", "TAGS", "KEYS", "UNIQ_KEY", "WAIT",
                                  "DELAY", " "]), max_size=16).map("".join)


def _config(tmp_path) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(tmp_path / "s"), mappedFileSizeCommitLog=64 * 1024,
                              mappedFileSizeConsumeQueue=600, maxHashSlotNum=100, maxIndexNum=400,
                              maxMessageSize=16 * 1024)


@settings(max_examples=500, deadline=None)
@given(client=st.one_of(st.none(), _TEXT), cluster=_TEXT)
def test_stored_map_is_what_the_stored_string_decodes_to(client, cluster):
    props, stored_string, stored = properties_to_store(client, cluster)
    assert props["CLUSTER"] == cluster
    if stored is not None:
        assert decode_properties(stored_string) == stored and "WAIT" not in stored
        assert list(decode_properties(stored_string)) == list(stored)
        assert encode_properties(stored) == stored_string
    else:  # only a cluster name that cannot round-trip withholds the map
        assert not cluster or "\x02" in cluster


_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "CLUSTER", "DELAY", "a", "b", "Aa", "BB", "x1",
                          "TRAN_MSG", "PGROUP", "MSG_REGION", "TRACE_ON", "k" * 20, "\u4e2d", "p0", "p1", "p2"])


@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.one_of(_NAMES, st.text("abcXYZ_09", min_size=1, max_size=6)), max_size=30, unique=True),
       cluster=st.sampled_from(["DefaultCluster", "c", ""]))
def test_stored_string_is_in_the_order_of_the_java_map(names, cluster):
    """The stored order kept per key sequence is the HashMap order of the client's map plus
    CLUSTER (its table sized for every key it held, WAIT included), without WAIT, whatever the
    keys (colliding hashes "Aa"/"BB", a table that doubled) and on the second call too."""
    client = encode_properties({n: f"v{i}" for i, n in enumerate(names)})
    expect_props = decode_properties(client)
    expect_props["CLUSTER"] = cluster
    without_wait = {k: v for k, v in expect_props.items() if k != "WAIT"}
    expect = encode_properties(java_hashmap_order(without_wait, max_size=len(expect_props)))
    for _ in range(2):
        props, stored_string, _stored = properties_to_store(client, cluster)
        assert props == expect_props and list(props) == list(expect_props)
        assert stored_string == expect


def _message(i: int, topic: str, props: dict[str, str], sys_flag: int = 0) -> MessageExtBrokerInner:
    string = encode_properties(props)
    return MessageExtBrokerInner(topic, i % 3, b"body%d" % i, dict(props), sys_flag=sys_flag, born_timestamp=7,
                                 properties_string=string, stored_properties=(string, dict(props)),
                                 prepared_transaction_offset=11 * i)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["T", "Topic中", "t" * 130]),
                          st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "x", "CLUSTER"]),
                                          st.text(alphabet="ab 3", min_size=1, max_size=6), max_size=5),
                          st.sampled_from([0, 0x4, 0x8, 0xC, 0x2])), min_size=1, max_size=12))
def test_appended_entries_equal_the_parsed_records(tmp_path_factory, records):
    cl = CommitLog(_config(tmp_path_factory.mktemp("cl")))
    cl.load()
    try:
        for i, (topic, props, sys_flag) in enumerate(records):
            msg = _message(i, topic, props, sys_flag)
            given_string = msg.properties_string
            r = cl.put_message(msg)
            assert r.is_ok()
            phy = r.appendMessageResult.wroteOffset
            entry = cl.appended.get(phy)
            if entry is None:  # a delayed message: the store rewrote its properties, so it is parsed back
                assert msg.properties_string is not given_string and msg.topic == "SCHEDULE_TOPIC_XXXX"
                continue
            start, view = cl.get_data(phy)
            try:
                assert start == phy
                assert entry == cl.dispatch_info(view, 0, True)
            finally:
                view.release()
    finally:
        cl.shutdown()


def test_a_replaced_properties_string_is_parsed_back(tmp_path):
    cl = CommitLog(_config(tmp_path))
    cl.load()
    try:
        msg = _message(1, "T", {"TAGS": "a"})
        msg.properties_string = "TAGS\x01b"  # rewritten after the map was handed over
        r = cl.put_message(msg)
        assert r.is_ok() and r.appendMessageResult.wroteOffset not in cl.appended
        no_map = MessageExtBrokerInner("T", 0, b"x", {"TAGS": "a"})
        r = cl.put_message(no_map)
        assert r.is_ok() and r.appendMessageResult.wroteOffset not in cl.appended
    finally:
        cl.shutdown()


def test_dispatch_takes_the_entries_and_indexes_as_parsing_does(tmp_path):
    s = DefaultMessageStore(_config(tmp_path))
    s.load()
    parsed = []
    parse = s.commit_log.dispatch_info

    def counting(buf, pos, check_crc=True):
        info = parse(buf, pos, check_crc)
        if not isinstance(info, int):
            parsed.append(info[2])
        return info
    s.commit_log.dispatch_info = counting
    s.start()
    try:
        for i in range(30):
            props = {"TAGS": f"tag{i % 2}", "KEYS": f"k{i} shared", "UNIQ_KEY": f"U{i:04d}"}
            msg = _message(i, "Topic", props)
            if i % 3 == 0:
                msg.stored_properties = None  # these are parsed back, as after a restart
            assert s.put_message(msg).is_ok()
        assert s.wait_dispatched()
        assert not s.commit_log.appended
        assert len(parsed) == 10  # only the records without a map were read back
        for q in range(3):
            assert s.get_max_offset_in_queue("Topic", q) == 10
            units = [s.find_consume_queue("Topic", q).get_unit(o) for o in range(10)]
            assert [u[2] for u in units] == [hash_of(f"tag{i % 2}") for i in range(q, 30, 3)]
        assert len(s.query_message("Topic", "shared", 64, 0, 2**62).message_buffers) == 30
        assert len(s.query_message("Topic", "U0007", 64, 0, 2**62).message_buffers) == 1
    finally:
        s.shutdown()


def hash_of(tag: str) -> int:
    from rmqd.wire.message import java_string_hash
    return java_string_hash(tag)


def test_the_table_is_bounded_and_recovery_forgets_it(tmp_path):
    from rmqd.store import commitlog, recovery
    cl = CommitLog(_config(tmp_path))
    cl.load()
    try:
        for i in range(commitlog._APPENDED_MAX + 5):
            assert cl.put_message(_message(i, "T", {"TAGS": "a"})).is_ok()
        assert 0 < len(cl.appended) <= commitlog._APPENDED_MAX
        end = cl.get_max_offset()
        recovery._truncate(cl, end, 0, (), recovery.RecoveryReport(False, None, end, "end of data"))
        assert not cl.appended  # offsets past a truncation are written anew
    finally:
        cl.shutdown()
