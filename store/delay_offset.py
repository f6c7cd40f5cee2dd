"""``delayOffset.json``: how far ScheduleMessageService has delivered each delay level.

Keyed by **delay level** (1-based), not by SCHEDULE_TOPIC_XXXX queue id (= level - 1):
``{"offsetTable":{2:1,3:4}}`` (``DelayOffsetSerializeWrapper``).
"""
from __future__ import annotations

import os
from typing import Any

from rmqd.store.config_files import DELAY_OFFSET_JSON, ConfigManager, config_path, java_map_order


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


def queue_id_to_delay_level(queue_id: int) -> int:
    return queue_id + 1


class DelayOffsetManager(ConfigManager):
    def __init__(self, store_path_root_dir: str | os.PathLike) -> None:
        super().__init__(config_path(store_path_root_dir, DELAY_OFFSET_JSON))
        self.offset_table: dict[int, int] = {}

    def encode_obj(self) -> Any:
        return {"offsetTable": java_map_order(self.offset_table, 32)}  # ConcurrentHashMap(32)

    def decode_obj(self, obj: Any) -> None:
        table = obj.get("offsetTable") or {}
        if not isinstance(table, dict):
            raise ValueError("offsetTable is not an object")
        self.offset_table.update({int(k): int(v) for k, v in table.items()})

    def update_offset(self, delay_level: int, offset: int) -> None:
        self.offset_table[delay_level] = offset

    def get_offset(self, delay_level: int) -> int | None:
        return self.offset_table.get(delay_level)

    def correct_delay_offset(self, level: int, cq_min_offset: int, cq_max_offset: int) -> int | None:
        """``ScheduleMessageService.correctDelayOffset`` for one level: clamp the stored
        offset into [min, max] of its queue; returns the corrected value if it changed."""
        cur = self.offset_table.get(level)
        if cur is None:
            return None
        fixed = cur
        if cur < cq_min_offset:
            fixed = cq_min_offset
        if cur > cq_max_offset:
            fixed = cq_max_offset
        if fixed != cur:
            self.offset_table[level] = fixed
            return fixed
        return None
