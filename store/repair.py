"""``rmqd store repair-config``: the way out when a config/*.json file and its .bak are damaged.

A broker refuses to start on such a store (see ``config_files.ConfigManager.load``) rather
than run without, say, its topic table and overwrite it. This module moves the damaged files
aside (``<name>.corrupt-<time>``, never deleted), restores a file from a readable ``.bak``,
and rebuilds what the store itself can tell: topics (and their queue counts) and consumer
groups from the consumequeue/ directories. Consumer and delay offsets live nowhere else, so
they start empty; the report says what that means for consumers.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import time
from pathlib import Path
from typing import Callable

from rmqd.store.config import MessageStoreConfig
from rmqd.store.config_files import _MISSING, ConfigManager
from rmqd.store.consumer_offset import ConsumerOffsetManager
from rmqd.store.delay_offset import DelayOffsetManager
from rmqd.store.errors import StoreLockError
from rmqd.store.schedule import TimerProgress
from rmqd.store.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rmqd.store.topic_config import TopicBrokerSettings, TopicConfigManager
from rmqd.wire.bodies import TopicConfig
from rmqd.wire.names import RETRY_GROUP_TOPIC_PREFIX, group_remark, topic_remark

PERM_READ_WRITE = 6  # PermName.PERM_READ | PERM_WRITE


def _consume_queue_topics(cq_root: Path) -> tuple[dict[str, int], list[str]]:
    """topic -> queue count (highest queue directory + 1), and the names skipped."""
    topics: dict[str, int] = {}
    skipped: list[str] = []
    if not cq_root.is_dir():
        return topics, skipped
    for topic_dir in sorted(cq_root.iterdir()):
        if not topic_dir.is_dir():
            continue
        qids = [int(q.name) for q in topic_dir.iterdir() if q.is_dir() and q.name.isdigit()]
        if not qids:
            continue
        if topic_remark(topic_dir.name) is not None:
            skipped.append(topic_dir.name)
            continue
        topics[topic_dir.name] = max(qids) + 1
    return topics, skipped


def _rebuild_topics(m: ConfigManager, cq: dict[str, int], skipped: list[str]) -> str:
    assert isinstance(m, TopicConfigManager)
    system = set(m.system_topics)
    m.topic_config_table = {name: tc for name, tc in m.topic_config_table.items() if name in system}
    rebuilt = 0
    for name, n in cq.items():
        if name not in system:
            m.topic_config_table[name] = TopicConfig(topicName=name, readQueueNums=n, writeQueueNums=n,
                                                     perm=PERM_READ_WRITE)
            rebuilt += 1
    note = f"; skipped directories that are not topic names: {skipped}" if skipped else ""
    return (f"rebuilt {rebuilt} topic(s) from consumequeue/ (queue counts from the queue directories, perm 6 = "
            f"read+write; order flags, filter types and other per-topic settings are not recoverable){note}")


def _rebuild_groups(m: ConfigManager, cq: dict[str, int], _skipped: list[str]) -> str:
    assert isinstance(m, SubscriptionGroupManager)
    groups = [t[len(RETRY_GROUP_TOPIC_PREFIX):] for t in cq if t.startswith(RETRY_GROUP_TOPIC_PREFIX)]
    groups = [g for g in groups if group_remark(g) is None]
    m.subscription_group_table.update({g: SubscriptionGroupConfig(groupName=g) for g in groups})
    return (f"rebuilt {len(groups)} consumer group(s) with default settings from their %RETRY% queues "
            f"(retry counts, broadcast and other per-group settings are not recoverable)")


def _empty(why: str) -> Callable[[ConfigManager, dict[str, int], list[str]], str]:
    return lambda _m, _cq, _skipped: why


_KINDS: list[tuple[Callable[[str], ConfigManager], Callable[[ConfigManager, dict[str, int], list[str]], str]]] = [
    (TopicConfigManager, _rebuild_topics),
    (SubscriptionGroupManager, _rebuild_groups),
    (ConsumerOffsetManager, _empty(
        "consumer offsets cannot be rebuilt: started empty, so each group starts at its consumeFromWhere "
        "(new messages only by default); set positions with mqadmin resetOffsetByTime")),
    (DelayOffsetManager, _empty(
        "delay-level progress cannot be rebuilt: started empty, so delayed messages are delivered again "
        "from the start of each level's queue (duplicates, never a loss)")),
    (TimerProgress, _empty("timer progress cannot be rebuilt: started empty (due timer messages may be delivered again)")),
]


def _aside(path: Path, stamp: str) -> str:
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, target)
    return target.name


def repair_config(store_dir: str | os.PathLike, config: MessageStoreConfig | None = None,
                  topic_settings: TopicBrokerSettings | None = None) -> list[str]:
    """Repair every config/*.json of a stopped store; returns one line per change (empty when
    every file is readable). Raises StoreLockError while a broker holds the store."""
    root = Path(store_dir)
    cfg = config or MessageStoreConfig(storePathRootDir=str(root))
    lock = root / "lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644) if root.is_dir() else None
    try:
        if fd is not None:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise StoreLockError(f"{lock}: the store is in use by a running broker; stop it first") from None
        return _repair(root, cfg, topic_settings)
    finally:
        if fd is not None:
            os.close(fd)


def _repair(root: Path, cfg: MessageStoreConfig, topic_settings: TopicBrokerSettings | None) -> list[str]:
    stamp = time.strftime("%Y%m%d%H%M%S")
    cq, skipped = _consume_queue_topics(Path(cfg.get_store_path_consume_queue()))
    lines: list[str] = []
    for make, rebuild in _KINDS:
        m = make(str(root)) if make is not TopicConfigManager else TopicConfigManager(str(root), topic_settings)
        path = m.path
        bak = path.with_name(path.name + ".bak")
        main_problem = m._try_load(path)
        if main_problem is None:
            continue
        probe = make(str(root)) if make is not TopicConfigManager else TopicConfigManager(str(root), topic_settings)
        bak_problem = probe._try_load(bak)
        if main_problem is _MISSING and bak_problem is _MISSING:
            continue
        where = f"config/{path.name}"
        if bak_problem is None:
            moved = f" (damaged file kept as {_aside(path, stamp)})" if main_problem is not _MISSING else ""
            shutil.copyfile(bak, path)
            lines.append(f"{where}: {'missing' if main_problem is _MISSING else main_problem}; restored from "
                         f"{bak.name}{moved}")
            continue
        kept = []
        if main_problem is not _MISSING:
            kept.append(_aside(path, stamp))
        if bak_problem is not _MISSING:
            kept.append(_aside(bak, stamp))
        what = rebuild(m, cq, skipped)
        m.persist()
        lines.append(f"{where}: {'missing' if main_problem is _MISSING else main_problem}; {bak.name}: "
                     f"{'does not exist' if bak_problem is _MISSING else bak_problem}; damaged file(s) kept as "
                     f"{', '.join(kept)}; {what}")
    return lines


__all__ = ["repair_config"]
