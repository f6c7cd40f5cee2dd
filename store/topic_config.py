"""``topics.json``: TopicConfigManager (``broker/.../topic/TopicConfigManager.java``).

The system topics a 4.9.8 broker creates on start (SELF_TEST_TOPIC, TBW102 when
autoCreateTopicEnable, BenchmarkTest, the cluster-name and broker-name topics,
OFFSET_MOVED_EVENT, SCHEDULE_TOPIC_XXXX, the trace topic when enabled, ``<cluster>_REPLY_TOPIC``)
are put in the table before the file is loaded, so the file's values win, as in RocketMQ.
Every change bumps the DataVersion and is saved; the broker re-registers with the name
servers when a ``create_*`` call returns ``created=True``.

Saving: 4.9 rewrites the whole file on every change, on the thread that made it, which makes
creating the n-th topic cost O(n). A running broker journals each change instead
(store/topic_journal.py: one line, appended before the caller goes on) and saves the whole
file from a writer of its own (``deferred_persist``), once for all changes made meanwhile
(broker/registration.py); the file's text is put together from each topic's cached text.
Without a journal (tools, tests, a broker not running) every change is saved at once.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from rmqd.store.config_files import TOPICS_JSON, ConfigManager, config_path, java_map_order, string_to_file
from rmqd.store.consumequeue import SCHEDULE_TOPIC
from rmqd.store.topic_journal import TopicJournal
from rmqd.wire import fastjson
from rmqd.wire.javamap import ConcurrentHashMapOrder
from rmqd.wire.bodies import (PERM_INHERIT, PERM_READ, PERM_WRITE, DataVersion, TopicConfig,
                         TopicConfigSerializeWrapper, to_json_obj, topic_config_json)

log = logging.getLogger("rmqd.store.config")

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC = SCHEDULE_TOPIC
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
SCHEDULE_TOPIC_QUEUE_NUM = 18


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def next_version(dv: DataVersion) -> None:
    """``DataVersion.nextVersion``."""
    dv.timestamp = now_ms()
    dv.counter += 1


@dataclass(slots=True)
class TopicBrokerSettings:
    """The BrokerConfig keys TopicConfigManager reads (names and defaults as RocketMQ's)."""

    brokerClusterName: str = "DefaultCluster"
    brokerName: str = "broker-a"
    autoCreateTopicEnable: bool = True
    defaultTopicQueueNums: int = 8
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    traceTopicEnable: bool = False
    msgTraceTopicName: str = RMQ_SYS_TRACE_TOPIC

    @classmethod
    def of(cls, broker_config: Any) -> "TopicBrokerSettings":
        """The same keys taken from a BrokerConfig."""
        return cls(**{name: getattr(broker_config, name) for name in cls.__dataclass_fields__})


class TopicConfigManager(ConfigManager):
    def __init__(self, store_path_root_dir: str | os.PathLike,
                 settings: TopicBrokerSettings | None = None) -> None:
        super().__init__(config_path(store_path_root_dir, TOPICS_JSON))
        self.settings = s = settings or TopicBrokerSettings()
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion(timestamp=now_ms(), counter=0)
        self.system_topics: set[str] = set()
        self._lock = threading.RLock()
        # registration: the topics changed since the last snapshot taken for the name servers
        self._unregistered: set[str] = set()
        # saving: every change bumps change_seq; persisted_seq is the change_seq the file holds.
        # With ``deferred_persist`` set (by a running broker) a change only calls it, and the
        # broker's writer saves soon after, once for however many changes came meanwhile;
        # without it (tools, tests, a broker not yet running) each change saves at once.
        self.change_seq = 0
        self.persisted_seq = 0
        self._encoded_seq = 0
        self.deferred_persist: Callable[[], None] | None = None
        # what a save of thousands of topics would compute again each time: each name's Java
        # hash (for the file's ConcurrentHashMap order) and each topic's text in the file
        self._order = ConcurrentHashMapOrder(1024)  # ConcurrentHashMap(1024), as the file's map
        self._texts: dict[str, str] = {}
        # a running broker appends every change to the journal before it answers, and saves
        # the whole file later (store/topic_journal.py)
        self.journal = TopicJournal(self.path)
        self.journaling = False

        def sys_topic(name: str, queues: int | None = None, perm: int | None = None) -> None:
            tc = TopicConfig(topicName=name)
            if queues is not None:
                tc.readQueueNums = tc.writeQueueNums = queues
            if perm is not None:
                tc.perm = perm
            self.system_topics.add(name)
            self.topic_config_table[name] = tc

        sys_topic(RMQ_SYS_SELF_TEST_TOPIC, 1)
        if s.autoCreateTopicEnable:
            sys_topic(AUTO_CREATE_TOPIC_KEY_TOPIC, s.defaultTopicQueueNums, PERM_INHERIT | PERM_READ | PERM_WRITE)
        sys_topic(RMQ_SYS_BENCHMARK_TOPIC, 1024)
        sys_topic(s.brokerClusterName, None,
                  PERM_INHERIT | (PERM_READ | PERM_WRITE if s.clusterTopicEnable else 0))
        sys_topic(s.brokerName, 1, PERM_INHERIT | (PERM_READ | PERM_WRITE if s.brokerTopicEnable else 0))
        sys_topic(RMQ_SYS_OFFSET_MOVED_EVENT, 1)
        sys_topic(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        if s.traceTopicEnable:
            sys_topic(s.msgTraceTopicName, 1)
        sys_topic(f"{s.brokerClusterName}_{REPLY_TOPIC_POSTFIX}", 1)

    # -- file -------------------------------------------------------------------------------
    def encode_obj(self) -> Any:
        with self._lock:
            self._encoded_seq = self.change_seq
            table = java_map_order(self.topic_config_table, 1024)  # ConcurrentHashMap(1024)
            # the bean itself: fastjson's writer has a fast path for TopicConfig
            return TopicConfigSerializeWrapper(table, DataVersion(self.data_version.timestamp,
                                                                  self.data_version.counter))

    def encode(self, pretty: bool = False) -> str:
        """The file's text; saves (pretty) are put together from each topic's text, kept
        until the topic changes: what fastjson.dumps(encode_obj(), pretty=True) writes."""
        if not pretty:
            return super().encode(pretty)
        with self._lock:
            self._encoded_seq = self.change_seq
            table, texts = self.topic_config_table, self._texts
            for name in table.keys() - texts.keys():
                texts[name] = f"\n\t\t{fastjson.quote(name)}:{topic_config_json(table[name], True, False, 2)}"
            if len(texts) > 2 * len(table) + 64:  # many topics deleted: forget their texts
                self._texts = texts = {name: texts[name] for name in table}
            body = ",".join(map(texts.__getitem__, self._order.keys(table)))
            dv = self.data_version
            head = (f'{{\n\t"dataVersion":{{\n\t\t"counter":{int(dv.counter)},\n\t\t"timestamp":{int(dv.timestamp)}'
                    f'\n\t}},\n\t"topicConfigTable":{{')
        return head + (body + "\n\t}\n}" if body else "}\n}")

    def load(self) -> bool:
        """topics.json (or its .bak), then the changes journaled since it was saved."""
        if not super().load():
            return False
        with self._lock:
            replayed = self.journal.replay(self._apply_journaled)
        if replayed:
            log.info("%s: %d change(s) from the journal applied", self.path, replayed)
        return True

    def _apply_journaled(self, name: str, config: Any, version: Any) -> None:
        if config is None:
            self.topic_config_table.pop(name, None)
        else:
            self.topic_config_table[name] = TopicConfig.from_json_obj(config)
        self._texts.pop(name, None)
        if version is not None:
            dv = DataVersion.from_json_obj(version)
            if dv.counter >= self.data_version.counter:
                self.data_version = dv

    def start_journal(self) -> None:
        """From now on every change is journaled before the caller goes on (and saved in
        the background by whoever set ``deferred_persist``). Journal files left by a broker
        that was killed have been applied by ``load``: folded into the file first."""
        if self.journal.files():
            self.persist()
        with self._lock:
            self.journaling = True

    def stop_journal(self) -> None:
        with self._lock:
            self.journaling = False
            self.journal.close()

    def persist(self) -> None:
        """Save the whole file; journal files it covers are deleted once it is on disk."""
        with self._persist_lock:
            self.set_aside_unreadable()
            with self._lock:
                text = self.encode(pretty=True)
                covered = self.journal.rotate(self._encoded_seq)
            string_to_file(text, self.path)
            self.after_persist()
            self.journal.delete(covered)

    def decode_obj(self, obj: Any) -> None:
        w = TopicConfigSerializeWrapper.from_json_obj(obj)
        with self._lock:
            self._texts.clear()
            self.topic_config_table.update(w.topicConfigTable)
            self.data_version = DataVersion(timestamp=w.dataVersion.timestamp, counter=w.dataVersion.counter)

    def after_persist(self) -> None:
        self.persisted_seq = max(self.persisted_seq, self._encoded_seq)

    def build_topic_config_serialize_wrapper(self) -> TopicConfigSerializeWrapper:
        with self._lock:
            return TopicConfigSerializeWrapper(dict(self.topic_config_table),
                                               DataVersion(self.data_version.timestamp, self.data_version.counter))

    def take_registration_snapshot(self) -> TopicConfigSerializeWrapper:
        """The whole table for a full registration; what changed before is in it."""
        with self._lock:
            self._unregistered.clear()
            return self.build_topic_config_serialize_wrapper()

    def take_registration_delta(self) -> TopicConfigSerializeWrapper:
        """The topics changed since the last snapshot, with the current DataVersion (taken
        together under the lock: a name server that takes this version has every topic the
        version counts). Deleted topics are left out: a name server keeps their routes until
        told otherwise, as after 4.9's full registrations."""
        with self._lock:
            names, self._unregistered = self._unregistered, set()
            table = {n: self.topic_config_table[n] for n in names if n in self.topic_config_table}
            return TopicConfigSerializeWrapper(table, DataVersion(self.data_version.timestamp,
                                                                  self.data_version.counter))

    # -- queries ----------------------------------------------------------------------------
    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def is_order_topic(self, topic: str) -> bool:
        tc = self.topic_config_table.get(topic)
        return bool(tc and tc.order)

    # -- changes ----------------------------------------------------------------------------
    def _changed(self, *names: str, sync: bool = False) -> None:
        """After a change of ``names`` (under the lock): journaled (``sync``: fdatasync-ed)
        and saved later, or - no journal - saved now."""
        next_version(self.data_version)
        self.change_seq += 1
        self._unregistered.update(names)
        for name in names:
            self._texts.pop(name, None)
        if self.journaling:
            dv = {"counter": self.data_version.counter, "timestamp": self.data_version.timestamp}
            table = self.topic_config_table
            self.journal.append(({"topic": n, "config": to_json_obj(table[n]) if n in table else None,
                                  "dataVersion": dv} for n in names), sync)
        if self.deferred_persist is not None and self.journaling:
            self.deferred_persist()
        else:
            self.persist()

    def create_topic_in_send_message_method(self, topic: str, default_topic: str,
                                            client_default_topic_queue_nums: int,
                                            topic_sys_flag: int) -> tuple[TopicConfig | None, bool]:
        """Auto-create ``topic`` from ``default_topic`` (TBW102) when that one is inheritable.
        Returns (config or None, created)."""
        with self._lock:
            tc = self.topic_config_table.get(topic)
            if tc is not None:
                return tc, False
            default = self.topic_config_table.get(default_topic)
            if default is None:
                return None, False
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.settings.autoCreateTopicEnable:
                default.perm = PERM_READ | PERM_WRITE
                self._texts.pop(default_topic, None)
            if not default.perm & PERM_INHERIT:
                return None, False
            queue_nums = max(min(client_default_topic_queue_nums, default.writeQueueNums), 0)
            tc = TopicConfig(topicName=topic, readQueueNums=queue_nums, writeQueueNums=queue_nums,
                             perm=default.perm & ~PERM_INHERIT, topicFilterType=default.topicFilterType,
                             topicSysFlag=topic_sys_flag)
            self.topic_config_table[topic] = tc
            self._changed(topic)
            return tc, True

    def create_topic_in_send_message_back_method(self, topic: str, client_default_topic_queue_nums: int,
                                                 perm: int, topic_sys_flag: int) -> tuple[TopicConfig, bool]:
        """Retry/DLQ/transaction topics (``createTopicInSendMessageBackMethod``)."""
        with self._lock:
            tc = self.topic_config_table.get(topic)
            if tc is not None:
                return tc, False
            tc = TopicConfig(topicName=topic, readQueueNums=client_default_topic_queue_nums,
                             writeQueueNums=client_default_topic_queue_nums, perm=perm, topicSysFlag=topic_sys_flag)
            self.topic_config_table[topic] = tc
            # on disk before the caller goes on: a retry or DLQ topic must survive a kill
            # right after the message it was made for
            self._changed(topic, sync=True)
            return tc, True

    def update_topic_config(self, tc: TopicConfig) -> None:
        with self._lock:
            assert tc.topicName is not None  # (built from a validated topic; Java's table refuses null too)
            self.topic_config_table[tc.topicName] = tc
            self._changed(tc.topicName, sync=True)

    def update_order_topic_config(self, order_topics: set[str]) -> None:
        """``updateOrderTopicConfig`` from the name server's ORDER_TOPIC_CONFIG KV table."""
        with self._lock:
            changed = []
            for name, tc in self.topic_config_table.items():
                want = name in order_topics
                if tc.order != want:
                    tc.order = want
                    changed.append(name)
            if changed:
                self._changed(*changed)

    def delete_topic_config(self, topic: str) -> bool:
        with self._lock:
            if self.topic_config_table.pop(topic, None) is None:
                return False
            self._changed(topic, sync=True)
            return True
