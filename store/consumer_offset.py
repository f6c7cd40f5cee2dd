"""``consumerOffset.json``: committed consumer offsets (``ConsumerOffsetManager``).

Shape ``{"offsetTable":{"topic@group":{0:12,1:7}}}``: integer queue-id keys, unquoted.
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

from rmqd.store.config_files import CONSUMER_OFFSET_JSON, ConfigManager, config_path, detect_capacity, java_map_order

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager(ConfigManager):
    def __init__(self, store_path_root_dir: str | os.PathLike) -> None:
        super().__init__(config_path(store_path_root_dir, CONSUMER_OFFSET_JSON))
        self.offset_table: dict[str, dict[int, int]] = {}
        self._lock = threading.Lock()
        # Which Java maps hold the table decides the written order: the manager's
        # ConcurrentHashMap(512) of ConcurrentHashMap(32) on a fresh broker, the no-arg maps
        # fastjson creates after a restart (RocketMQ replaces the table on load). A loaded
        # file shows which one wrote it; keep that, so load-then-persist is byte-identical.
        self._outer_capacity: int | None = 512
        self._inner_capacity: dict[str, int | None] = {}

    def encode_obj(self) -> Any:
        with self._lock:
            table = java_map_order(self.offset_table, self._outer_capacity)
            return {"offsetTable": {k: java_map_order(v, self._inner_capacity.get(k, 32))
                                    for k, v in table.items()}}

    def decode_obj(self, obj: Any) -> None:
        table = obj.get("offsetTable")
        if table is None:
            return
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise ValueError("offsetTable is not an object of objects")
        new = {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}
        with self._lock:
            self.offset_table = new  # RocketMQ replaces the table on decode
            self._outer_capacity = detect_capacity(new, (512, None))
            self._inner_capacity = {k: detect_capacity(v, (32, None)) for k, v in new.items()}

    @staticmethod
    def key(topic: str, group: str) -> str:
        return topic + TOPIC_GROUP_SEPARATOR + group

    def commit_offset(self, client_host: str | None, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self.offset_table.setdefault(self.key(topic, group), {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """Committed offset or -1 (``queryOffset``)."""
        m = self.offset_table.get(self.key(topic, group))
        if m is None:
            return -1
        return m.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int] | None:
        m = self.offset_table.get(self.key(topic, group))
        return dict(m) if m is not None else None

    def which_topic_by_consumer(self, group: str) -> set[str]:
        out = set()
        for k in list(self.offset_table):
            parts = k.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2 and parts[1] == group:
                out.add(parts[0])
        return out

    def which_group_by_topic(self, topic: str) -> set[str]:
        out = set()
        for k in list(self.offset_table):
            parts = k.split(TOPIC_GROUP_SEPARATOR)
            if len(parts) == 2 and parts[0] == topic:
                out.add(parts[1])
        return out

    def query_min_offset_in_all_group(self, topic: str, filter_groups: str | None,
                                      min_offset_in_queue: Callable[[str, int], int]) -> dict[int, int]:
        """``queryMinOffsetInAllGroup``: per queue, the smallest committed offset that is
        still at or above the store's min offset, skipping ``filter_groups`` (comma list)."""
        skip = {g for g in (filter_groups or "").split(",") if g.strip()}
        out: dict[int, int] = {}
        for k, table in list(self.offset_table.items()):
            parts = k.split(TOPIC_GROUP_SEPARATOR)
            if parts[0] != topic or (len(parts) > 1 and parts[1] in skip):
                continue
            for qid, off in table.items():
                if off >= min_offset_in_queue(topic, qid):
                    out[qid] = min(off, out.get(qid, off))
        return out

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        with self._lock:
            src = self.offset_table.get(self.key(topic, src_group))
            if src is not None:
                self.offset_table[self.key(topic, dest_group)] = dict(src)

    def remove_offset(self, group: str) -> None:
        with self._lock:
            for k in [k for k in self.offset_table if k.split(TOPIC_GROUP_SEPARATOR)[1:] == [group]]:
                del self.offset_table[k]

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for k in [k for k in self.offset_table if k.split(TOPIC_GROUP_SEPARATOR)[0] == topic]:
                del self.offset_table[k]
