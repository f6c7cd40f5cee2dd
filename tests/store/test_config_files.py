"""config/*.json managers: byte-for-byte round trips of RocketMQ 4.9.8's files, .bak fallback."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import CLEAN, CRASHED, facts, require
from rmqd.store.config_files import java_map_order, string_to_file
from rmqd.store.consumer_offset import ConsumerOffsetManager
from rmqd.store.delay_offset import DelayOffsetManager
from rmqd.store.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rmqd.store.topic_config import TopicBrokerSettings, TopicConfigManager
from rmqd.wire import fastjson
from rmqd.wire.bodies import TopicConfig

SETTINGS = TopicBrokerSettings(brokerClusterName="FixtureCluster", brokerName="broker-fix")

MANAGERS = {
    "topics.json": lambda root: TopicConfigManager(root, SETTINGS),
    "consumerOffset.json": ConsumerOffsetManager,
    "subscriptionGroup.json": SubscriptionGroupManager,
    "delayOffset.json": DelayOffsetManager,
}


@pytest.fixture(params=[CLEAN, CRASHED], ids=["clean", "crashed"])
def root(request, tmp_path: Path) -> Path:
    shutil.copytree(require(request.param / "store" / "config"), tmp_path / "config")
    return tmp_path


@pytest.mark.parametrize("name", sorted(MANAGERS))
@pytest.mark.parametrize("variant", ["", ".bak"])
def test_load_then_persist_is_byte_identical(root: Path, name: str, variant: str) -> None:
    original = (root / "config" / (name + variant)).read_bytes()
    if variant:  # make the .bak the file under test
        (root / "config" / name).write_bytes(original)
    m = MANAGERS[name](root)
    assert m.load() and m.load_error is None
    assert m.encode(pretty=True).encode() == original
    m.persist()
    assert (root / "config" / name).read_bytes() == original
    assert (root / "config" / (name + ".bak")).read_bytes() == original  # previous content
    assert not (root / "config" / (name + ".tmp")).exists()


def test_loaded_values(root: Path) -> None:
    reported = facts(CLEAN)["reported"]["consumers"]  # what the Apache broker answered GET_CONSUME_STATS with
    off = ConsumerOffsetManager(root)
    off.load()
    for q, o in reported["FixConsumerGroup"]["FixTopicA"].items():
        assert off.query_offset("FixConsumerGroup", "FixTopicA", int(q)) == o["consumerOffset"] == o["brokerOffset"]
    assert off.query_offset("FixConsumerGroup", "FixTopicA", 9) == -1
    half = reported["CID_RMQ_SYS_TRANS"]["RMQ_SYS_TRANS_HALF_TOPIC"]["0"]
    assert off.query_offset("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0) == half["consumerOffset"] == 4
    assert "FixRetryGroup" in off.which_group_by_topic("%RETRY%FixRetryGroup")
    assert off.which_topic_by_consumer("FixOrderGroup") == {"FixOrderTopic", "%RETRY%FixOrderGroup"}
    delay = DelayOffsetManager(root)
    delay.load()
    assert delay.offset_table == {2: 1, 3: 4}
    topics = TopicConfigManager(root, SETTINGS)
    topics.load()
    tc = topics.select_topic_config("FixBulkTopic")
    assert (tc.readQueueNums, tc.writeQueueNums, tc.perm) == (4, 4, 6)
    assert topics.data_version.counter >= 14


def test_fresh_managers_create_rocketmq_system_entries(tmp_path: Path) -> None:
    """Every built-in topic/group a 4.9.8 broker creates equals the fixture's entry."""
    file_topics = fastjson.loads(require(CLEAN / "store" / "config" / "topics.json").read_text())["topicConfigTable"]
    fresh = TopicConfigManager(tmp_path, SETTINGS)
    assert set(fresh.topic_config_table) == {"SELF_TEST_TOPIC", "TBW102", "BenchmarkTest", "FixtureCluster",
                                             "broker-fix", "OFFSET_MOVED_EVENT", "SCHEDULE_TOPIC_XXXX",
                                             "FixtureCluster_REPLY_TOPIC"}
    for name, tc in fresh.topic_config_table.items():
        assert fastjson.loads(fresh.encode())["topicConfigTable"][name] == file_topics[name], name
    file_groups = fastjson.loads(require(CLEAN / "store" / "config" / "subscriptionGroup.json").read_text())
    groups = SubscriptionGroupManager(tmp_path)
    enc = fastjson.loads(groups.encode())["subscriptionGroupTable"]
    assert len(enc) == 7
    for name in ("SELF_TEST_C_GROUP", "CID_ONSAPI_OWNER", "CID_ONSAPI_PERMISSION"):
        assert enc[name] == file_groups["subscriptionGroupTable"][name]


def test_auto_create_topic_from_tbw102_like_rocketmq(tmp_path: Path) -> None:
    file_topics = fastjson.loads(require(CLEAN / "store" / "config" / "topics.json").read_text())["topicConfigTable"]
    m = TopicConfigManager(tmp_path, SETTINGS)
    counter = m.data_version.counter
    tc, created = m.create_topic_in_send_message_method("FixAutoCreatedTopic", "TBW102", 4, 0)
    assert created and m.data_version.counter == counter + 1
    assert fastjson.loads(m.encode())["topicConfigTable"]["FixAutoCreatedTopic"] == file_topics["FixAutoCreatedTopic"]
    assert m.create_topic_in_send_message_method("FixAutoCreatedTopic", "TBW102", 4, 0) == (tc, False)
    assert (tmp_path / "config" / "topics.json").exists()  # persisted
    # not inheritable -> refused
    assert m.create_topic_in_send_message_method("X", "FixAutoCreatedTopic", 4, 0) == (None, False)
    assert m.create_topic_in_send_message_method("X", "NoSuchDefault", 4, 0) == (None, False)
    retry, created = m.create_topic_in_send_message_back_method("%RETRY%G", 1, 6, 0)
    assert created and (retry.readQueueNums, retry.perm) == (1, 6)
    assert m.delete_topic_config("%RETRY%G") and not m.delete_topic_config("%RETRY%G")
    again = TopicConfigManager(tmp_path, SETTINGS)
    assert again.load()
    assert again.select_topic_config("FixAutoCreatedTopic") == tc
    assert again.select_topic_config("%RETRY%G") is None


def test_subscription_group_auto_create(tmp_path: Path) -> None:
    m = SubscriptionGroupManager(tmp_path, auto_create_subscription_group=False)
    assert m.find_subscription_group_config("G1") is None
    assert m.find_subscription_group_config("CID_RMQ_SYS_X").groupName == "CID_RMQ_SYS_X"
    m2 = SubscriptionGroupManager(tmp_path)
    assert m2.load()
    assert "CID_RMQ_SYS_X" in m2.subscription_group_table
    cfg = m2.find_subscription_group_config("FixConsumerGroup")
    assert cfg == SubscriptionGroupConfig(groupName="FixConsumerGroup")


def test_new_offsets_written_in_java_order(tmp_path: Path) -> None:
    m = ConsumerOffsetManager(tmp_path)
    for q in (3, 0, 2, 1):
        m.commit_offset("127.0.0.1", "G", "T", q, 10 + q)
    m.persist()
    assert (tmp_path / "config" / "consumerOffset.json").read_text() == \
        '{\n\t"offsetTable":{\n\t\t"T@G":{0:10,1:11,2:12,3:13\n\t\t}\n\t}\n}'
    d = DelayOffsetManager(tmp_path)
    d.update_offset(3, 4)
    d.update_offset(2, 1)
    d.persist()
    assert (tmp_path / "config" / "delayOffset.json").read_text() == require(CLEAN / "store" / "config" / "delayOffset.json").read_text()


def test_rebuilt_tables_match_rocketmq_order(tmp_path: Path) -> None:
    """Insert the fixture's entries in sorted (not file) order: the written file is still
    identical, because the order is the Java map's, not insertion order."""
    src = require(CLEAN / "store" / "config")
    loaded = ConsumerOffsetManager(tmp_path)
    loaded.decode((src / "consumerOffset.json").read_text())
    fresh = ConsumerOffsetManager(tmp_path)
    for key in sorted(loaded.offset_table):
        topic, group = key.split("@")
        for q, o in sorted(loaded.offset_table[key].items(), reverse=True):
            fresh.commit_offset(None, group, topic, q, o)
    assert fresh.encode(pretty=True) == (src / "consumerOffset.json").read_text()
    topics = TopicConfigManager(tmp_path, SETTINGS)
    want = fastjson.loads((src / "topics.json").read_text())
    for name in sorted(want["topicConfigTable"]):
        topics.topic_config_table[name] = TopicConfig.from_json_obj(want["topicConfigTable"][name])
    topics.data_version.counter = want["dataVersion"]["counter"]
    topics.data_version.timestamp = want["dataVersion"]["timestamp"]
    assert topics.encode(pretty=True) == (src / "topics.json").read_text()


def test_bak_fallback_and_errors(root: Path) -> None:
    cfg = root / "config"
    good = (cfg / "consumerOffset.json.bak").read_text()
    (cfg / "consumerOffset.json").write_text('{"offsetTable":{"T@G":{0:')  # torn write
    m = ConsumerOffsetManager(root)
    assert m.load()
    assert "consumerOffset.json:" in m.load_error
    assert m.encode(pretty=True) == good
    (cfg / "consumerOffset.json").write_text("")  # empty -> .bak, and said (rmqd never writes an empty file)
    m = ConsumerOffsetManager(root)
    topic_a = facts(CLEAN)["reported"]["consumers"]["FixConsumerGroup"]["FixTopicA"]
    assert m.load() and "consumerOffset.json: empty" in m.load_error
    assert m.query_offset("FixConsumerGroup", "FixTopicA", 0) == topic_a["0"]["consumerOffset"] > 0
    (cfg / "consumerOffset.json.bak").write_text("[1,2]")
    (cfg / "consumerOffset.json").write_text("not json")
    m = ConsumerOffsetManager(root)
    assert not m.load()
    assert "consumerOffset.json.bak" in m.load_error
    # nothing at all (first start): fine, empty table
    empty = ConsumerOffsetManager(root / "nowhere")
    assert empty.load() and empty.offset_table == {}


def test_string_to_file_keeps_previous_as_bak(tmp_path: Path) -> None:
    p = tmp_path / "config" / "x.json"
    string_to_file("one", p)
    assert p.read_text() == "one" and not p.with_name("x.json.bak").exists()
    string_to_file("two", p)
    assert p.read_text() == "two" and p.with_name("x.json.bak").read_text() == "one"


def test_java_map_order_examples() -> None:
    # the fixture's topics.json order (a ConcurrentHashMap(1024) -> 2048 bins)
    names = list(fastjson.loads(require(CLEAN / "store" / "config" / "topics.json").read_text())["topicConfigTable"])
    assert list(java_map_order({n: 0 for n in sorted(names)}, 1024)) == names
    assert list(java_map_order({5: 0, 1: 0, 40: 0, 3: 0}, 32)) == [1, 3, 5, 40]


@given(st.dictionaries(st.text(max_size=20), st.integers(), max_size=40))
def test_java_map_order_is_a_stable_permutation(d) -> None:
    once = java_map_order(d, 16)
    assert once == d and sorted(once) == sorted(d)
    assert list(java_map_order(once, 16)) == list(once)


@settings(max_examples=50, deadline=None)  # writes files: slow on a busy machine
@given(st.dictionaries(st.from_regex(r"[A-Za-z%_]{1,12}@[A-Za-z_]{1,8}", fullmatch=True),
                       st.dictionaries(st.integers(0, 300), st.integers(-1, 2**62), min_size=1, max_size=8),
                       max_size=10))
def test_offset_table_roundtrip(tmp_path_factory, table) -> None:
    root = tmp_path_factory.mktemp("off")
    m = ConsumerOffsetManager(root)
    m.offset_table = {k: dict(v) for k, v in table.items()}
    m.persist()
    back = ConsumerOffsetManager(root)
    assert back.load()
    assert back.offset_table == table
    back.persist()
    assert (root / "config" / "consumerOffset.json").read_text() == m.encode(pretty=True)
