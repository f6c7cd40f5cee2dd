"""Issue 11 item 5: a damaged config/*.json never silently loses data. Every kind of config
file, every kind of damage: only the file damaged -> its .bak is used and the damaged bytes
are kept aside at the first save; file and .bak damaged -> load() is False naming both, and
nothing is written; `repair_config` is the way out."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from rmqd.store.config_files import ConfigManager, string_to_file
from rmqd.store.consumer_offset import ConsumerOffsetManager
from rmqd.store.delay_offset import DelayOffsetManager
from rmqd.store.errors import StoreLockError
from rmqd.store.repair import repair_config
from rmqd.store.schedule import TimerProgress
from rmqd.store.subscription_group import SubscriptionGroupManager
from rmqd.store.topic_config import TopicConfigManager
from rmqd.wire.bodies import TopicConfig


def _topics(m: Any) -> None:
    m.update_topic_config(TopicConfig(topicName="KeepT", readQueueNums=4, writeQueueNums=4, perm=6))


def _groups(m: Any) -> None:
    assert m.find_subscription_group_config("KeepG") is not None


def _offsets(m: Any) -> None:
    m.commit_offset(None, "KeepG", "KeepT", 0, 42)


def _delay(m: Any) -> None:
    m.update_offset(3, 17)


def _timer(m: Any) -> None:
    m.floor_offset = 5


# (manager class, put one entry, has that entry?)
KINDS: dict[str, tuple[Callable[[Any], ConfigManager], Callable[[Any], None], Callable[[Any], bool]]] = {
    "topics.json": (TopicConfigManager, _topics, lambda m: "KeepT" in m.topic_config_table),
    "subscriptionGroup.json": (SubscriptionGroupManager, _groups, lambda m: "KeepG" in m.subscription_group_table),
    "consumerOffset.json": (ConsumerOffsetManager, _offsets, lambda m: m.query_offset("KeepG", "KeepT", 0) == 42),
    "delayOffset.json": (DelayOffsetManager, _delay, lambda m: m.get_offset(3) == 17),
    "rmqdTimerOffset.json": (TimerProgress, _timer, lambda m: m.floor_offset == 5),
}
DAMAGE = {
    "bad JSON": b'{"offsetTable":{"T@G":{0:',
    "non-UTF-8": b'{"a":"\xff\xfe"}',
    "empty": b"",
    "wrong shape": b"[1,2]",
}


def _written(root: Path, name: str) -> ConfigManager:
    make, put, _has = KINDS[name]
    m = make(root)
    assert m.load()
    put(m)
    m.persist()
    m.persist()  # now the file and its .bak both hold the entry
    return m


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "config").iterdir())}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("name", KINDS)
def test_only_the_file_damaged_uses_bak_and_keeps_the_damaged_bytes(tmp_path, name, damage):
    root = tmp_path / "store"
    m = _written(root, name)
    path = m.path
    path.write_bytes(DAMAGE[damage])
    make, put, has = KINDS[name]
    m = make(root)
    assert m.load()
    assert has(m), "the .bak's content was not loaded"
    assert m.load_error and str(path) in m.load_error
    m.persist()  # the first save: the damaged file goes aside, never into .bak or lost
    aside = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == DAMAGE[damage]
    again = make(root)
    assert again.load() and again.load_error is None and has(again)
    bak = make(root)
    assert bak._try_load(path.with_name(path.name + ".bak")) is None
    m.persist()  # and saving keeps working
    assert make(root).load()


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("name", KINDS)
def test_file_and_bak_damaged_refuses_and_writes_nothing(tmp_path, name, damage):
    root = tmp_path / "store"
    m = _written(root, name)
    m.path.write_bytes(DAMAGE[damage])
    m.path.with_name(m.path.name + ".bak").write_bytes(b"\x00garbage")
    before = _files(root)
    make, _put, _has = KINDS[name]
    m = make(root)
    assert not m.load()
    assert f"{m.path}:" in m.load_error and f"{m.path}.bak:" in m.load_error
    assert _files(root) == before


@pytest.mark.parametrize("name", KINDS)
def test_damaged_file_without_bak_refuses(tmp_path, name):
    root = tmp_path / "store"
    make, _put, _has = KINDS[name]
    string_to_file("{not json", make(root).path)
    m = make(root)
    assert not m.load()
    assert "does not exist" in m.load_error


@pytest.mark.parametrize("name", KINDS)
def test_fresh_store_and_missing_file_with_good_bak_load(tmp_path, name):
    root = tmp_path / "store"
    make, _put, has = KINDS[name]
    assert make(root).load()  # nothing at all: first start
    m = _written(root, name)
    m.path.unlink()  # the crash window of a save: the file renamed away, .bak there
    m = make(root)
    assert m.load() and has(m)


def _cq_dirs(root: Path, layout: dict[str, int]) -> None:
    for topic, n in layout.items():
        for q in range(n):
            (root / "consumequeue" / topic / str(q)).mkdir(parents=True)


def test_repair_config_rebuilds_topics_and_groups_and_keeps_damaged_files(tmp_path):
    root = tmp_path / "store"
    for name in KINDS:
        m = _written(root, name)
        m.path.write_bytes(b"{broken")
        m.path.with_name(m.path.name + ".bak").write_bytes(b"\xff")
    _cq_dirs(root, {"KeepT": 4, "Other": 2, "%RETRY%KeepG": 1, "%DLQ%KeepG": 1, "SCHEDULE_TOPIC_XXXX": 2,
                    "bad.name": 1})
    lines = repair_config(root)
    assert len(lines) == len(KINDS)
    text = "\n".join(lines)
    assert "rebuilt 4 topic(s)" in text and "bad.name" in text and "consumer offsets cannot be rebuilt" in text
    for name, (make, _put, _has) in KINDS.items():
        m = make(root)
        assert m.load() and m.load_error is None, name
        kept = sorted(p.name for p in (root / "config").iterdir() if p.name.startswith(name + "."))
        assert sorted(k.split(".corrupt-")[0] for k in kept if ".corrupt-" in k) == [name, name + ".bak"]
    topics = TopicConfigManager(root)
    topics.load()
    t = topics.topic_config_table
    assert (t["KeepT"].readQueueNums, t["KeepT"].writeQueueNums, t["KeepT"].perm) == (4, 4, 6)
    assert t["Other"].writeQueueNums == 2 and "%RETRY%KeepG" in t and "%DLQ%KeepG" in t
    assert t["SCHEDULE_TOPIC_XXXX"].readQueueNums == 18  # system topics keep the broker's own settings
    assert "bad.name" not in t
    groups = SubscriptionGroupManager(root)
    groups.load()
    assert "KeepG" in groups.subscription_group_table
    assert repair_config(root) == []  # all readable now


def test_repair_config_restores_from_bak_and_refuses_a_running_store(tmp_path):
    root = tmp_path / "store"
    m = _written(root, "topics.json")
    m.path.write_bytes(b"\xff\xff")
    lines = repair_config(root)
    assert len(lines) == 1 and "restored from topics.json.bak" in lines[0] and ".corrupt-" in lines[0]
    assert KINDS["topics.json"][2](_loaded(root))
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLockError, match="in use"):
            repair_config(root)
    finally:
        holder.kill()
        holder.wait(10)


# a broker holding the store (POSIX locks are per process: the holder must be another one)
_HOLD = """
import fcntl, os, sys, time
fd = os.open(os.path.join(sys.argv[1], "lock"), os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
time.sleep(30)
"""


def _loaded(root: Path) -> TopicConfigManager:
    m = TopicConfigManager(root)
    assert m.load()
    return m
