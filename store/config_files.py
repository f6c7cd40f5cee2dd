"""RocketMQ's ConfigManager pattern for ``<storePathRootDir>/config/*.json``.

Why this exact dance: RocketMQ's tools and a RocketMQ broker started on an rmqd store read
these files, so they are written the way ``ConfigManager.persist`` writes them — fastjson
pretty print (tabs, unquoted integer map keys, see ``wire/fastjson.py``), the new text first
to ``<name>.tmp``, the previous text copied to ``<name>.bak``, then the temp file renamed
over the original. Loading falls back to ``.bak`` when the file is missing, empty or does
not parse (``ConfigManager.load``/``loadBak``).

Unlike RocketMQ, the temp file is fsynced before the rename: consumer offsets are
acknowledged state and must not come back empty after a power loss.
"""
from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from wire import fastjson
from wire.errors import WireError
from wire.javamap import java_concurrent_hashmap_order as java_map_order

TOPICS_JSON = "topics.json"
CONSUMER_OFFSET_JSON = "consumerOffset.json"
SUBSCRIPTION_GROUP_JSON = "subscriptionGroup.json"
DELAY_OFFSET_JSON = "delayOffset.json"


def config_path(store_path_root_dir: str | os.PathLike, name: str) -> Path:
    """``BrokerPathConfigHelper`` / ``StorePathConfigHelper``: ``<root>/config/<name>``."""
    return Path(store_path_root_dir) / "config" / name


def detect_capacity(table: dict, candidates: tuple[int | None, ...]) -> int | None:
    """The first candidate capacity whose Java map order is ``table``'s current order (a
    file tells which Java map wrote it); the last candidate when none fits."""
    keys = list(table)
    for cap in candidates:
        if list(java_map_order(table, cap)) == keys:
            return cap
    return candidates[-1]


def _read_text(path: Path) -> str | None:
    """``MixAll.file2String``: None when the file does not exist."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None


def _write_text(path: Path, text: str, sync: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(text.encode("utf-8"))
        if sync:
            f.flush()
            os.fsync(f.fileno())


def string_to_file(text: str, path: str | os.PathLike) -> None:
    """``MixAll.string2File``: tmp, previous content to .bak, rename tmp over the file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    _write_text(tmp, text, sync=True)
    prev = _read_text(path)
    if prev is not None:
        _write_text(path.with_name(path.name + ".bak"), prev, sync=True)
    os.replace(tmp, path)
    try:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


class ConfigManager(ABC):
    """Base of the JSON-backed managers. ``load()`` returns False only when both the file
    and its ``.bak`` are unusable; ``load_error`` then says which file and why."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.load_error: str | None = None
        self._persist_lock = threading.Lock()

    @abstractmethod
    def encode_obj(self) -> Any:
        """The fastjson value tree of the file (dicts keep their order)."""

    @abstractmethod
    def decode_obj(self, obj: Any) -> None:
        """Merge a parsed file into this manager; raise ValueError/WireError on a bad shape."""

    def encode(self, pretty: bool = False) -> str:
        return fastjson.dumps(self.encode_obj(), pretty=pretty)

    def decode(self, text: str) -> None:
        obj = fastjson.loads(text)
        if not isinstance(obj, dict):
            raise WireError(f"expected a JSON object, got {type(obj).__name__}")
        self.decode_obj(obj)

    def load(self) -> bool:
        try:
            text = _read_text(self.path)
            if not text:
                return self._load_bak()
            self.decode(text)
            return True
        except (ValueError, UnicodeDecodeError, OSError) as exc:  # WireError is a ValueError
            self.load_error = f"{self.path}: {exc}"
            return self._load_bak()

    def _load_bak(self) -> bool:
        bak = self.path.with_name(self.path.name + ".bak")
        try:
            text = _read_text(bak)
            if text:
                self.decode(text)
            return True
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            self.load_error = f"{bak}: {exc}" if self.load_error is None else f"{self.load_error}; {bak}: {exc}"
            return False

    def persist(self) -> None:
        with self._persist_lock:
            string_to_file(self.encode(pretty=True), self.path)
