"""ConsumerFilterManager (bloom-free) and the CHECK_CLIENT_CONFIG / pull decisions."""

from __future__ import annotations

from types import SimpleNamespace

from rmqd.processors.consumer_filter import (
    FILTER_DATA_NOT_EXIST,
    FILTER_DATA_NOT_LATEST,
    NOT_SUPPORTED_REMARK,
    ConsumerFilterManager,
    build_filter_data,
    check_expression,
    registered_filter,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def sub(topic: str, expr: str, version: int, kind: str = "SQL92"):
    return SimpleNamespace(topic=topic, subString=expr, expressionType=kind, subVersion=version)


def test_check_expression_remarks() -> None:
    assert check_expression("SQL92", "a > 1 AND b = 'x'") is None
    remark = check_expression("SQL92", "a > ")
    assert remark.startswith("org.apache.rocketmq.filter.parser.ParseException: Encountered")
    assert check_expression("SQL92", None) == "java.lang.NullPointerException"
    assert "NullPointerException" in check_expression("JAVASCRIPT", "x")
    assert NOT_SUPPORTED_REMARK("SQL92") == "The broker does not support consumer to filter message by SQL92"


def test_register_versions_and_matching() -> None:
    clock = Clock()
    m = ConsumerFilterManager(clock=clock)
    m.register("g", [sub("T", "a > 1", 10), sub("%RETRY%g", "*", 10, "TAG")])
    data = m.get("T", "g")
    assert data is not None and data.clientVersion == 10 and m.get("%RETRY%g", "g") is None
    assert data.matches({"a": "2"}) and not data.matches({"a": "0"}) and not data.matches({})
    # an older version is ignored, a newer one replaces the expression
    m.register("g", [sub("T", "a > 5", 9)])
    assert m.get("T", "g").expression == "a > 1"
    m.register("g", [sub("T", "a > 5", 11)])
    assert m.get("T", "g").expression == "a > 5" and m.get("T", "g").clientVersion == 11
    # a new expression that does not compile removes the filter: pulls get FILTER_DATA_NOT_EXIST
    m.register("g", [sub("T", "a >", 12)])
    assert m.get("T", "g") is None
    assert registered_filter(m, "T", "g", 12) == (
        FILTER_DATA_NOT_EXIST, "The broker's consumer filter data is not exist!Your expression may be wrong!")
    m.register("g", [sub("T", "b = 1", 13)])
    assert registered_filter(m, "T", "g", 14)[0] == FILTER_DATA_NOT_LATEST
    assert registered_filter(m, "T", "g", 13).expression == "b = 1"


def test_dead_and_clean() -> None:
    clock = Clock()
    m = ConsumerFilterManager(clean_time_span_ms=1000, clock=clock)
    m.register("g", [sub("T", "a = 1", 1), sub("U", "a = 2", 1)])
    clock.now += 10
    m.register("g", [sub("T", "a = 1", 1)])  # U no longer subscribed: dead
    assert m.get("U", "g").is_dead() and not m.get("T", "g").is_dead()
    m.unregister("g")
    assert m.get("T", "g").is_dead()
    m.register("g", [sub("T", "a = 1", 1)])  # same version re-registers a dead filter
    assert not m.get("T", "g").is_dead()
    clock.now += 2000
    m.clean()
    assert m.get("U", "g") is None and m.get("T", "g") is not None
    obj = m.to_json()
    assert list(obj["filterDataByTopic"]) == ["T"]
    assert obj["filterDataByTopic"]["T"]["groupFilterData"]["g"]["expression"] == "a = 1"
    other = ConsumerFilterManager(clock=clock)
    other.load_json(obj)
    loaded = other.get("T", "g")
    assert loaded.compiled is not None and loaded.is_dead()  # dead until the next heartbeat


def test_build_filter_data() -> None:
    assert build_filter_data("T", "g", "TagA", "TAG", 1) is None
    assert build_filter_data("T", "g", "a ==", "SQL92", 1) is None
    d = build_filter_data("T", "g", "a = 1", "SQL92", 5, now_ms=77)
    assert d.bornTime == 77 and d.is_msg_in_live(78) and not d.is_msg_in_live(77)
