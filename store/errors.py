"""The store's error types, in a module of their own so every store module can import them
without import-order cycles (mapped_file, consumequeue, indexfile, checkpoint, ...)."""

from __future__ import annotations


class StoreFileError(ValueError):
    """A store file that is not what RocketMQ would have written: names file and offset
    (``"file:offset: reason"``), so an operator can find it."""

    def __init__(self, file: str, offset: int, reason: str) -> None:
        super().__init__(f"{file}:{offset}: {reason}")
        self.file = file
        self.offset = offset
        self.reason = reason


class StoreLockError(RuntimeError):
    """Another process holds the store's ``lock`` file."""


class StoreNameError(ValueError):
    """A topic name the store refuses to make a path of (TopicValidator's rules): nothing is
    created, so no name can reach outside the store directory."""


class StoreConfigError(ValueError):
    """A config/*.json file and its .bak are both unusable: the broker refuses to start (as
    RocketMQ's does) rather than run without the table and overwrite it at the next save."""


class StoreBusyError(RuntimeError):
    """An operation that must wait for the store (e.g. dispatch to catch up) timed out;
    nothing was changed and it may be tried again."""


__all__ = ["StoreBusyError", "StoreConfigError", "StoreFileError", "StoreLockError", "StoreNameError"]
