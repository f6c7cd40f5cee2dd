"""The name server's namespaced key/value store (RocketMQ KVConfigManager).

Kept in memory and persisted, on every change, to kvConfig.json in fastjson's shape
`{"configTable":{namespace:{key:value}}}` so a RocketMQ name server can read the same file.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from rmqd.wire import fastjson
from rmqd.wire.bodies import KVTable
from rmqd.wire.errors import WireError

log = logging.getLogger("rmqd.namesrv.kvconfig")

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG


class KVConfigManager:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.config_table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read kvConfig.json if there is one; a corrupt file is a clear error naming it."""
        if self.path is None or not self.path.exists():
            return
        try:
            text = self.path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireError(f"{self.path}: not UTF-8 text (byte {exc.start})") from None
        if not text.strip():
            return
        try:
            obj = fastjson.loads(text)
        except WireError as exc:
            raise WireError(f"{self.path}: {exc}") from exc
        table = obj.get("configTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict):
            raise WireError(f"{self.path}: no configTable object")
        for namespace, kv in table.items():
            if isinstance(kv, dict):
                self.config_table[str(namespace)] = {str(k): str(v) for k, v in kv.items() if v is not None}

    def persist(self) -> None:
        if self.path is None:
            return
        content = fastjson.dumps({"configTable": self.config_table})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(content, encoding="utf-8")
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)

    def put(self, namespace: str, key: str, value: str | None) -> None:
        self.config_table.setdefault(namespace, {})[key] = value if value is not None else ""
        self._persist_quietly()

    def delete(self, namespace: str, key: str) -> None:
        table = self.config_table.get(namespace)
        if table is not None:
            table.pop(key, None)
        self._persist_quietly()

    def get(self, namespace: str | None, key: str | None) -> str | None:
        table = self.config_table.get(namespace or "")
        return table.get(key or "") if table is not None else None

    def kv_list(self, namespace: str | None) -> bytes | None:
        """KVTable body of one namespace, None when the namespace does not exist."""
        table = self.config_table.get(namespace or "")
        if table is None:
            return None
        return KVTable(table=dict(table)).encode()

    def _persist_quietly(self) -> None:
        # like RocketMQ: a failed write is logged, the in-memory change stands
        try:
            self.persist()
        except OSError as exc:
            log.error("persist kvconfig to %s failed: %s", self.path, exc)
