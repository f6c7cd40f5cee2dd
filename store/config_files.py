"""RocketMQ's ConfigManager pattern for ``<storePathRootDir>/config/*.json``.

Why this exact dance: RocketMQ's tools and a RocketMQ broker started on an rmqd store read
these files, so they are written the way ``ConfigManager.persist`` writes them — fastjson
pretty print (tabs, unquoted integer map keys, see ``wire/fastjson.py``), the new text first
to ``<name>.tmp``, the previous file kept as ``<name>.bak``, then the temp file renamed
over the original. Loading falls back to ``.bak`` when the file is missing, empty or does
not parse (``ConfigManager.load``/``loadBak``); when neither can be read, ``load()`` says
False and the broker refuses to start (as RocketMQ's BrokerController does), naming both.

Unlike RocketMQ, an unreadable file is never overwritten: loaded from ``.bak`` instead, it
is moved aside to ``<name>.corrupt-<time>`` before the first save, and an empty file is
treated as damaged (RocketMQ would start with an empty table and later overwrite it, making
every topic's messages unreachable). ``rmqd store repair-config`` is the way out.

Unlike RocketMQ, the temp file is fsynced before the rename: consumer offsets are
acknowledged state and must not come back empty after a power loss.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from rmqd.wire import fastjson
from rmqd.wire.errors import WireError
from rmqd.wire.javamap import java_concurrent_hashmap_order as java_map_order

log = logging.getLogger("rmqd.store.config")

TOPICS_JSON = "topics.json"
CONSUMER_OFFSET_JSON = "consumerOffset.json"
SUBSCRIPTION_GROUP_JSON = "subscriptionGroup.json"
DELAY_OFFSET_JSON = "delayOffset.json"


def config_path(store_path_root_dir: str | os.PathLike, name: str) -> Path:
    """``BrokerPathConfigHelper`` / ``StorePathConfigHelper``: ``<root>/config/<name>``."""
    return Path(store_path_root_dir) / "config" / name


def config_refusal(load_error: str | None, store_path_root_dir: str | os.PathLike) -> str:
    """The one line a broker that will not start on a damaged config file prints."""
    return (f"{load_error}: not starting, nothing was changed; restore the file, or run "
            f"`rmqd store repair-config {store_path_root_dir}` (moves damaged files aside, rebuilds "
            f"topics.json from consumequeue/)")


def detect_capacity(table: dict, candidates: tuple[int | None, ...]) -> int | None:
    """The first candidate capacity whose Java map order is ``table``'s current order (a
    file tells which Java map wrote it); the last candidate when none fits."""
    keys = list(table)
    for cap in candidates:
        if list(java_map_order(table, cap)) == keys:
            return cap
    return candidates[-1]


def _write_text(path: Path, text: str, sync: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(text.encode("utf-8"))
        if sync:
            f.flush()
            os.fsync(f.fileno())


def string_to_file(text: str, path: str | os.PathLike) -> None:
    """``MixAll.string2File``: tmp, previous content to .bak, rename tmp over the file.

    The previous file becomes the .bak by a rename rather than a copy (the same bytes, as
    they are, without reading and writing them again: topics.json holds thousands of topics).
    A crash between the two renames leaves no file and the .bak, which ``load`` reads, as
    after 4.9's delete-then-rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    _write_text(tmp, text, sync=True)
    try:
        os.replace(path, path.with_name(path.name + ".bak"))
    except FileNotFoundError:
        pass
    os.replace(tmp, path)
    try:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


_MISSING = object()


class ConfigManager(ABC):
    """Base of the JSON-backed managers. ``load()`` returns False only when both the file
    and its ``.bak`` are unusable; ``load_error`` then says which file and why."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.load_error: str | None = None
        self._unreadable_main = False
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
        """The file, else its ``.bak``; False (and ``load_error``) when there is a file or a
        ``.bak`` and neither can be used."""
        bak = self.path.with_name(self.path.name + ".bak")
        main_problem = self._try_load(self.path)
        if main_problem is None:
            return True
        bak_problem = self._try_load(bak)
        if main_problem is _MISSING:
            if bak_problem is None or bak_problem is _MISSING:
                return True  # a fresh store; or the crash window of a save (file renamed away)
            self.load_error = f"{self.path}: missing; {bak}: {bak_problem}"
            return False
        if bak_problem is None:
            log.warning("%s: %s; loaded %s instead (the damaged file is kept as %s.corrupt-<time>)",
                        self.path, main_problem, bak.name, self.path.name)
            self._unreadable_main = True
            self.load_error = f"{self.path}: {main_problem}"  # informational: .bak was used
            return True
        self.load_error = (f"{self.path}: {main_problem}; {bak}: "
                           f"{'does not exist' if bak_problem is _MISSING else bak_problem}")
        return False

    def _try_load(self, path: Path) -> object:
        """None when ``path`` was loaded; _MISSING; else why it cannot be used."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return _MISSING
        except OSError as exc:
            return f"unreadable ({exc.strerror or exc})"
        if not data.strip():
            return "empty"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 text (byte {exc.start})"
        try:
            self.decode(text)  # every decode_obj parses whole before it changes the table
        except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
            return f"not a valid {self.path.name} ({type(exc).__name__}: {exc})"
        return None

    def set_aside_unreadable(self) -> Path | None:
        """Move the damaged file (loaded from .bak instead) out of the way of the next save."""
        if not self._unreadable_main:
            return None
        self._unreadable_main = False
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d%H%M%S')}")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return None
        log.warning("%s moved aside to %s", self.path, aside.name)
        return aside

    def persist(self) -> None:
        with self._persist_lock:
            self.set_aside_unreadable()
            string_to_file(self.encode(pretty=True), self.path)
            self.after_persist()

    def after_persist(self) -> None:
        """Called (under the persist lock) once a save is on disk."""
