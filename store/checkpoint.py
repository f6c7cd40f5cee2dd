"""StoreCheckpoint: the 4,096-byte ``checkpoint`` file (4.9.x: three int64 timestamps).

Crash recovery starts from the newest commit-log file whose first message is older than what
the checkpoint says was flushed, so these timestamps bound how much must be re-validated.
"""

from __future__ import annotations

import mmap
import os

from construct import Int64sb, Struct

from rmqd.store.errors import StoreFileError
from rmqd.store.layout import struct_of

CHECKPOINT_LAYOUT = Struct(
    "physicMsgTimestamp" / Int64sb,   # store time of the last commit-log message flushed
    "logicsMsgTimestamp" / Int64sb,   # store time of the last message flushed into consume queues
    "indexMsgTimestamp" / Int64sb,    # end time of the last index file that was flushed full
)
_LAYOUT = struct_of(CHECKPOINT_LAYOUT)
CHECKPOINT_FILE_SIZE = 4096  # one OS page (MappedFile.OS_PAGE_SIZE)


class StoreCheckpoint:
    """The checkpoint file mapped in memory (StoreCheckpoint.java)."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            exists = size > 0
            if size < CHECKPOINT_FILE_SIZE:
                if exists and size < _LAYOUT.size:
                    raise StoreFileError(self.path, size, f"checkpoint file is {size} bytes, expected "
                                                          f"{CHECKPOINT_FILE_SIZE}")
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
            self._mm = mmap.mmap(fd, CHECKPOINT_FILE_SIZE)
        finally:
            os.close(fd)
        if exists:
            self.physicMsgTimestamp, self.logicsMsgTimestamp, self.indexMsgTimestamp = _LAYOUT.unpack_from(self._mm, 0)
        else:
            self.physicMsgTimestamp = self.logicsMsgTimestamp = self.indexMsgTimestamp = 0
        # what the file says (the attributes run ahead of it between flushes)
        self.flushed_min_timestamp = self.get_min_timestamp()

    def flush(self) -> None:
        _LAYOUT.pack_into(self._mm, 0, self.physicMsgTimestamp, self.logicsMsgTimestamp, self.indexMsgTimestamp)
        self.flushed_min_timestamp = self.get_min_timestamp()
        try:
            self._mm.flush()
        except ValueError:
            pass

    def shutdown(self) -> None:
        self.flush()
        try:
            self._mm.close()
        except (BufferError, ValueError):
            pass

    def get_min_timestamp(self) -> int:
        """min(physic, logics) minus 3 s of margin, never negative (StoreCheckpoint.getMinTimestamp)."""
        m = min(self.physicMsgTimestamp, self.logicsMsgTimestamp) - 3000
        return max(m, 0)

    def get_min_timestamp_index(self) -> int:
        return min(self.get_min_timestamp(), self.indexMsgTimestamp)
