"""``topics.json.journal.<seq>``: the topic changes a running broker made since its last
topics.json save, one JSON line each (an rmqd file; RocketMQ has none).

Why: 4.9 rewrites the whole topics.json before it answers a change, so creating the n-th
topic costs O(n). rmqd appends the change here instead - O(1), before the answer, so an
acknowledged topic survives a kill as in 4.9 - and rewrites topics.json in the background
for many changes at once (see store/topic_config.py). Each save starts a new journal file;
once the save is on disk the files it covers are deleted. A broker that starts on a store
with journal files applies them over topics.json (in file order, lines in order; an
unfinished last line - a kill mid-write - is ignored) and saves at once, which deletes them.
A clean shutdown saves too: after one, no journal is left and topics.json says everything
(what RocketMQ's tools and brokers read).

Line: ``{"topic":NAME,"config":TOPIC_CONFIG_OR_NULL,"dataVersion":{"counter":C,"timestamp":T}}``
(null config: deleted). UPDATE_AND_CREATE_TOPIC, deletions and retry/DLQ topics are
fdatasync-ed before the answer; topics auto-created by sends are written (page cache), as
4.9 writes topics.json without a sync.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterable

log = logging.getLogger("rmqd.store.config")

_SEP = ".journal."


class TopicJournal:
    def __init__(self, config_file: str | os.PathLike) -> None:
        self.config_file = Path(config_file)
        self._fd: int | None = None
        self._name: str | None = None
        self.start = 0  # the change number the current journal file starts after

    def _path(self, start: int) -> Path:
        return self.config_file.with_name(f"{self.config_file.name}{_SEP}{start:020d}")

    def files(self) -> list[Path]:
        """The journal files there are, oldest first."""
        prefix = self.config_file.name + _SEP
        try:
            names = [n for n in os.listdir(self.config_file.parent)
                     if n.startswith(prefix) and n[len(prefix):].isdigit()]
        except FileNotFoundError:
            return []
        return [self.config_file.with_name(n) for n in sorted(names)]

    def append(self, entries: Iterable[dict[str, Any]], sync: bool) -> None:
        data = "".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n" for e in entries)
        if not data:
            return
        if self._fd is None:
            self.config_file.parent.mkdir(parents=True, exist_ok=True)
            path = self._path(self.start)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            self._name = path.name
        raw = data.encode("utf-8", "replace")
        written = os.write(self._fd, raw)
        if written != len(raw):
            raise OSError(f"{self._name}: short write ({written} of {len(raw)} bytes)")
        if sync:
            os.fdatasync(self._fd)

    def rotate(self, start: int) -> list[Path]:
        """Close the current file; later changes go to a new one after change ``start``.
        Returns every journal file there is now: a save of the state at ``start`` covers
        them, delete them (:meth:`delete`) once it is on disk."""
        self.close()
        self.start = start
        return self.files()

    @staticmethod
    def delete(paths: Iterable[Path]) -> None:
        for p in paths:
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def replay(self, apply: Callable[[str, Any, Any], None]) -> int:
        """``apply(name, config_json_or_None, data_version_json)`` for every complete line of
        every journal file, oldest first; returns how many."""
        n = 0
        for path in self.files():
            try:
                text = path.read_bytes().decode("utf-8", "replace")
            except OSError as exc:
                log.warning("%s: unreadable (%s), skipped", path, exc)
                continue
            for i, line in enumerate(text.split("\n")):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    name = entry["topic"]
                except (ValueError, KeyError, TypeError):
                    log.warning("%s line %d: not a journal entry (a write cut short?), ignored from there", path, i + 1)
                    break
                apply(str(name), entry.get("config"), entry.get("dataVersion"))
                n += 1
        return n

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
