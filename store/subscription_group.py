"""``subscriptionGroup.json``: SubscriptionGroupManager (``broker/.../subscription/``).

The 4.9.8 broker puts seven built-in groups in the table before loading the file, and
auto-creates a group the first time it is looked up (``autoCreateSubscriptionGroup``,
default true, or any ``CID_RMQ_SYS_`` group).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from rmqd.store.config_files import SUBSCRIPTION_GROUP_JSON, ConfigManager, config_path, java_map_order
from rmqd.store.topic_config import next_version, now_ms
from rmqd.wire.bodies import DataVersion, as_bool, as_int, as_str, to_json_obj
from rmqd.wire.names import group_remark

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """``SubscriptionGroupConfig`` (4.9.8 fields and defaults; a fastjson bean)."""

    groupName: str | None = None
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True
    # 5.x fields, kept when a 5.x admin sets them (None: left out of the JSON, as 4.9.8 writes it):
    # orderly (FIFO) consumption of the group's POP / gRPC consumers, and its retry backoff
    consumeMessageOrderly: bool | None = None
    groupRetryPolicy: dict[str, Any] | None = None

    @classmethod
    def from_json_obj(cls, obj: Any) -> "SubscriptionGroupConfig":
        if not isinstance(obj, dict):
            raise ValueError(f"SubscriptionGroupConfig: expected an object, got {type(obj).__name__}")
        d = cls()
        return cls(groupName=as_str(obj.get("groupName")),
                   consumeEnable=as_bool(obj.get("consumeEnable"), d.consumeEnable),
                   consumeFromMinEnable=as_bool(obj.get("consumeFromMinEnable"), d.consumeFromMinEnable),
                   consumeBroadcastEnable=as_bool(obj.get("consumeBroadcastEnable"), d.consumeBroadcastEnable),
                   retryQueueNums=as_int(obj.get("retryQueueNums"), d.retryQueueNums),
                   retryMaxTimes=as_int(obj.get("retryMaxTimes"), d.retryMaxTimes),
                   brokerId=as_int(obj.get("brokerId"), d.brokerId),
                   whichBrokerWhenConsumeSlowly=as_int(obj.get("whichBrokerWhenConsumeSlowly"),
                                                       d.whichBrokerWhenConsumeSlowly),
                   notifyConsumerIdsChangedEnable=as_bool(obj.get("notifyConsumerIdsChangedEnable"),
                                                          d.notifyConsumerIdsChangedEnable),
                   consumeMessageOrderly=as_bool(obj["consumeMessageOrderly"])
                   if obj.get("consumeMessageOrderly") is not None else None,
                   groupRetryPolicy=dict(obj["groupRetryPolicy"])
                   if isinstance(obj.get("groupRetryPolicy"), dict) else None)


class SubscriptionGroupManager(ConfigManager):
    def __init__(self, store_path_root_dir: str | os.PathLike, auto_create_subscription_group: bool = True) -> None:
        super().__init__(config_path(store_path_root_dir, SUBSCRIPTION_GROUP_JSON))
        self.auto_create_subscription_group = auto_create_subscription_group
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion(timestamp=now_ms(), counter=0)
        self._lock = threading.RLock()
        for name, broadcast in ((TOOLS_CONSUMER_GROUP, None), (FILTERSRV_CONSUMER_GROUP, None),
                                (SELF_TEST_CONSUMER_GROUP, None), (ONS_HTTP_PROXY_GROUP, True),
                                (CID_ONSAPI_PULL_GROUP, True), (CID_ONSAPI_PERMISSION_GROUP, True),
                                (CID_ONSAPI_OWNER_GROUP, True)):
            cfg = SubscriptionGroupConfig(groupName=name)
            if broadcast is not None:
                cfg.consumeBroadcastEnable = broadcast
            self.subscription_group_table[name] = cfg

    def encode_obj(self) -> Any:
        with self._lock:
            table = java_map_order(self.subscription_group_table, 1024)  # ConcurrentHashMap(1024)
            return {"dataVersion": to_json_obj(self.data_version),
                    "subscriptionGroupTable": {k: to_json_obj(v) for k, v in table.items()}}

    def decode_obj(self, obj: Any) -> None:
        table = obj.get("subscriptionGroupTable") or {}
        if not isinstance(table, dict):
            raise ValueError("subscriptionGroupTable is not an object")
        parsed = {str(k): SubscriptionGroupConfig.from_json_obj(v) for k, v in table.items()}
        dv = DataVersion.from_json_obj(obj.get("dataVersion") or {})
        with self._lock:
            self.subscription_group_table.update(parsed)
            self.data_version = dv

    def _changed(self) -> None:
        next_version(self.data_version)
        self.persist()

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            cfg = self.subscription_group_table.get(group)
            if cfg is None and group_remark(group) is None and (
                    self.auto_create_subscription_group or is_sys_consumer_group(group)):
                cfg = SubscriptionGroupConfig(groupName=group)
                self.subscription_group_table[group] = cfg
                self._changed()
            return cfg

    def update_subscription_group_config(self, cfg: SubscriptionGroupConfig) -> None:
        remark = group_remark(cfg.groupName)  # a None/invalid key would break every later save
        if remark is not None or cfg.groupName is None:  # (group_remark refuses None)
            raise ValueError(f"subscription group config refused: {remark}")
        with self._lock:
            self.subscription_group_table[cfg.groupName] = cfg
            self._changed()

    def disable_consume(self, group: str) -> None:
        with self._lock:
            cfg = self.subscription_group_table.get(group)
            if cfg is not None:
                cfg.consumeEnable = False
                next_version(self.data_version)

    def delete_subscription_group_config(self, group: str) -> bool:
        with self._lock:
            if self.subscription_group_table.pop(group, None) is None:
                return False
            self._changed()
            return True
