"""``config/messageRequestMode.json``: which consumer groups consume a topic by POP
(RocketMQ 5.x MessageRequestModeManager; set by SET_MESSAGE_REQUEST_MODE / ``mqadmin
setConsumeMode``, read by QUERY_ASSIGNMENT).

Shape (fastjson pretty, like every config file)::

    {"messageRequestModeMap":{"<topic>":{"<group>":{"consumerGroup":..,"mode":"POP",
      "popShareQueueNum":0,"topic":..}}}}

Source: apache/rocketmq 5.3.3 broker/.../loadbalance/MessageRequestModeManager.java and
remoting/.../protocol/body/SetMessageRequestModeRequestBody.java.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from rmqd.store.config_files import ConfigManager, config_path, java_map_order

MESSAGE_REQUEST_MODE_JSON = "messageRequestMode.json"
MODES = ("PULL", "POP")

__all__ = ["MESSAGE_REQUEST_MODE_JSON", "MessageRequestModeManager", "SetMessageRequestMode"]


@dataclass(slots=True)
class SetMessageRequestMode:
    """SetMessageRequestModeRequestBody (the file stores the request bodies as they came)."""

    topic: str
    consumer_group: str
    mode: str = "PULL"
    pop_share_queue_num: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {"consumerGroup": self.consumer_group, "mode": self.mode, "popShareQueueNum": self.pop_share_queue_num,
                "topic": self.topic}

    @classmethod
    def from_json_obj(cls, obj: Any) -> "SetMessageRequestMode":
        if not isinstance(obj, dict):
            raise ValueError("SetMessageRequestModeRequestBody is not an object")
        mode = obj.get("mode") or "PULL"
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not PULL or POP")
        return cls(topic=str(obj.get("topic") or ""), consumer_group=str(obj.get("consumerGroup") or ""),
                   mode=mode, pop_share_queue_num=int(obj.get("popShareQueueNum") or 0))


class MessageRequestModeManager(ConfigManager):
    def __init__(self, store_path_root_dir: str | os.PathLike) -> None:
        super().__init__(config_path(store_path_root_dir, MESSAGE_REQUEST_MODE_JSON))
        self.table: dict[str, dict[str, SetMessageRequestMode]] = {}
        self._lock = threading.Lock()

    def set_mode(self, body: SetMessageRequestMode) -> None:
        with self._lock:
            self.table.setdefault(body.topic, {})[body.consumer_group] = body

    def get_mode(self, topic: str, group: str) -> SetMessageRequestMode | None:
        groups = self.table.get(topic)
        return None if groups is None else groups.get(group)

    def encode_obj(self) -> Any:
        with self._lock:
            return {"messageRequestModeMap": {
                t: {g: b.to_json_obj() for g, b in java_map_order(groups, None).items()}
                for t, groups in java_map_order(self.table, None).items()}}

    def decode_obj(self, obj: Any) -> None:
        table = obj.get("messageRequestModeMap")
        if table is None:
            return
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise ValueError("messageRequestModeMap is not an object of objects")
        new = {str(t): {str(g): SetMessageRequestMode.from_json_obj(b) for g, b in groups.items()}
               for t, groups in table.items()}
        with self._lock:
            self.table = new
