"""MappedFile / MappedFileQueue: RocketMQ's fixed-size memory-mapped files.

Every file of a queue (commit log, one consume queue) has the same fixed size and is named by
the 20-digit zero-padded offset of its first byte (UtilAll.offset2FileName). A new file has its
full size at once but is sparse, as RocketMQ's (RandomAccessFile.setLength): it takes disk
blocks only as it is written, so a new store does not take 1 GiB of disk for a commit-log file
it has not written; ``preallocate`` (warmMapedFileEnable) reserves every block up front. Writers
write with pwrite(2) through a descriptor of their own (see :meth:`MappedFile.write`); readers
get memoryviews of the mapping (zero-copy pull responses);
flushing is fdatasync of the file (MappedByteBuffer.force in RocketMQ), see :func:`sync_file`.

A file whose size differs from the configured size, or whose name is not an offset, is refused
with a StoreFileError naming the file: serving it would mis-address every record after it.
"""

from __future__ import annotations

import collections
import errno
import logging
import mmap
import os
import threading
import time
import types
import weakref
from pathlib import Path
from typing import Callable, Iterable

from rmqd.store.errors import StoreFileError

log = logging.getLogger("rmqd.store")

OS_PAGE_SIZE = 4096
TEMP_SUFFIX = ".creating"  # a file being created (see create_file_atomically)
DELETE_FILES_BATCH_MAX = 10


def offset_to_file_name(offset: int) -> str:
    """UtilAll.offset2FileName."""
    return f"{offset:020d}"


def create_file_atomically(path: str, size: int, allocate: bool = False,
                           prepare: Callable[[mmap.mmap], None] | None = None, sync_dir: bool = False,
                           map_it: bool = True) -> mmap.mmap | None:
    """Create ``path`` at its full ``size`` and return it mapped: the file is sized - sparse
    (ftruncate), or with ``allocate`` its blocks reserved (posix_fallocate) - (and
    ``prepare``-d, e.g. a header written) under a temporary name and then renamed, so a crash
    at any point leaves either no file or a complete one - never a 0-byte or short file that
    the next start would refuse. Leftover temporaries are removed by
    :func:`remove_temp_files`. With ``sync_dir`` the directory is fsynced so the new name
    survives power loss (the commit log; derived files are rebuilt from it instead). Without
    ``map_it`` (and ``prepare``) the file is only created: None is returned."""
    tmp = path + TEMP_SUFFIX
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        if allocate:
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:  # a full disk must fail here, not as SIGBUS on a later write
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
                # file systems without fallocate stay sparse
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) if map_it or prepare else None
        try:
            if prepare is not None:
                assert mm is not None  # (prepare implies a mapping)
                prepare(mm)
            os.rename(tmp, path)
        except BaseException:
            if mm is not None:
                mm.close()
            raise
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        os.close(fd)
    if sync_dir:
        _fsync_dir(os.path.dirname(path) or ".")
    if mm is not None and not map_it:
        mm.close()
        return None
    return mm


def sync_file(path: str) -> bool:
    """fdatasync ``path``: writes back every page dirtied through a mapping of it and -
    unlike ``mmap.flush`` (msync), which holds the GIL in CPython 3.11 - lets other threads
    run meanwhile, so appends go on while the disk works. A commit-log file is dirty only up
    to its write position, so this costs what an msync of the range would. False if the file
    is gone (deleted by expiry)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.fdatasync(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, pos: int, path: str) -> None:
    n = len(data)
    done = os.pwrite(fd, data, pos)
    while done < n:  # a regular file writes short only when the disk fills up mid-way
        more = os.pwrite(fd, memoryview(data)[done:], pos + done)
        if more <= 0:
            raise OSError(errno.ENOSPC, f"short write to {path} at {pos + done}")
        done += more


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def remove_temp_files(d: Path) -> list[str]:
    """Delete what a crash inside :func:`create_file_atomically` left in ``d``; returns the
    names removed (the file never existed under its real name, so nothing is lost)."""
    gone = []
    for p in d.iterdir():
        if p.name.endswith(TEMP_SUFFIX) and p.is_file():
            log.warning("%s: unfinished file creation left by a crash, removed", p)
            p.unlink()
            gone.append(p.name)
    return gone


class MappedFile:
    """One fixed-size file mapped in memory.

    Positions are plain ints updated by the single writer (under the owner's lock) and read by
    flush/dispatch threads; an int assignment is atomic under the GIL, and the writer publishes
    the bytes before it publishes the new position.
    """

    __slots__ = ("path", "file_name", "file_size", "file_from_offset", "mm", "wrote_position",
                 "flushed_position", "store_timestamp", "first_create_in_queue", "_available",
                 "_fd", "_handles", "__weakref__")

    def __init__(self, path: str | os.PathLike, file_size: int, *, create: bool = True, sync_dir: bool = False,
                 preallocate: bool = False, handles: "FileHandles | None" = None, checked: bool = False):
        self.path = str(path)
        self.file_name = os.path.basename(self.path)
        if len(self.file_name) != 20 or not self.file_name.isdigit():
            raise StoreFileError(self.path, 0, "file name is not a 20-digit start offset")
        self.file_size = file_size
        self.file_from_offset = int(self.file_name)
        self._handles = handles
        if create and not os.path.exists(self.path):
            # sparse unless ``preallocate`` (the commit log with warmMapedFileEnable=true):
            # writes are pwrite(2) (see write), so a hole costs an append nothing more than a
            # reserved block does - the file system allocates the block as the page is
            # written back - and a full disk fails that pwrite with ENOSPC, refused like any
            # failed write; consume queues of 1024 queues would otherwise take 1024 x 5.7 MiB
            mm = create_file_atomically(self.path, file_size, allocate=preallocate, sync_dir=sync_dir,
                                        map_it=handles is None)
            if mm is not None:
                self.mm = mm
        elif handles is None:
            self.mm = self._open_mapping()
        elif not checked:  # (MappedFileQueue.load has checked the size already)
            size = os.stat(self.path).st_size
            if size != file_size:
                raise StoreFileError(self.path, 0, f"file size {size} does not match the configured size {file_size}")
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        self.first_create_in_queue = False
        self._available = True
        self._fd = -1  # the write descriptor, opened by the first write (see write)

    def __repr__(self) -> str:
        return f"MappedFile({self.file_name}, wrote={self.wrote_position}, flushed={self.flushed_position})"

    def _open_mapping(self) -> mmap.mmap:
        fd = os.open(self.path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size != self.file_size:
                raise StoreFileError(self.path, 0, f"file size {size} does not match the configured size "
                                                   f"{self.file_size}")
            return mmap.mmap(fd, self.file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)

    @property
    def is_mapped(self) -> bool:
        try:
            _MM.__get__(self)
        except AttributeError:
            return False
        return True

    def read(self, pos: int, n: int) -> bytes:
        """Bytes [pos, pos + n) (fewer at the end of the file): from the mapping when the
        file is mapped, else read with pread(2) without mapping it (recovery of tens of
        thousands of consume queues must not map, hold a descriptor for, or read whole
        files of which it needs a few units)."""
        if self.is_mapped:
            return bytes(self.mm[pos:pos + n])
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            # no read-ahead: it would pull the pages after these (holes, mostly) into the page
            # cache, 16 KiB or more for each of tens of thousands of files read for a page
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            return os.pread(fd, n, pos)
        finally:
            os.close(fd)

    def data_end(self) -> int:
        """Where the file's first hole starts (SEEK_HOLE): a sparse file written from its
        start holds nothing past it. The file size where holes are not reported."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return self.file_size
        try:
            return min(os.lseek(fd, 0, os.SEEK_HOLE), self.file_size)
        except OSError:
            return self.file_size
        finally:
            os.close(fd)

    # ---- state -------------------------------------------------------------------------------
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def is_available(self) -> bool:
        return self._available

    @property
    def read_position(self) -> int:
        return self.wrote_position

    def get_last_modified_timestamp(self) -> int:
        try:
            return int(os.path.getmtime(self.path) * 1000)
        except OSError:
            return 0

    # ---- writing ----------------------------------------------------------------------------
    def append_message(self, data: bytes | memoryview) -> bool:
        """Append raw bytes (consume queue units, index-free files); False if they don't fit."""
        pos = self.wrote_position
        n = len(data)
        if pos + n > self.file_size:
            return False
        self.write(pos, data)
        self.wrote_position = pos + n
        return True

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``pos`` with pwrite(2) rather than through the mapping.

        A store through the mapping into a page that a flush has just cleaned (or never
        touched) takes a write fault in the kernel (ext4's page_mkwrite, waiting for the page's
        writeback), 100 us on average and tens of ms at worst for a consume-queue unit, and
        CPython holds the GIL all that time, stalling the event loop. pwrite costs ~3 us,
        drops the GIL inside the kernel, and on a full disk fails with ENOSPC instead of a
        SIGBUS. The mapping and pwrite share the page cache, so readers of the mapping see
        the bytes as soon as this returns. The descriptor is opened lazily (files only read
        never hold one) and closed when the object goes (never while a writer still holds
        it, so a closed file can never have another file's reused descriptor written); if it
        cannot be opened (descriptors exhausted) the file is written through the mapping."""
        if not self._available:
            raise ValueError(f"{self.path} is closed")
        if self._handles is not None:
            self._handles.pwrite(self, data, pos)
            return
        fd = self._fd
        if fd < 0:
            fd = self._open_write_fd() if fd == -1 else -2
            if fd < 0:
                self.mm[pos:pos + len(data)] = data
                return
        pwrite_all(fd, data, pos, self.path)

    def _open_write_fd(self) -> int:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as exc:
            log.warning("%s: no descriptor for writing (%s); writing through the mapping", self.path, exc)
            self._fd = -2
            return -2
        self._fd = fd
        weakref.finalize(self, os.close, fd)
        return fd

    def write_at(self, pos: int, data: bytes | memoryview) -> None:
        self.write(pos, data)

    # ---- flushing ---------------------------------------------------------------------------
    def is_able_to_flush(self, least_pages: int) -> bool:
        flush = self.flushed_position
        write = self.wrote_position
        if self.is_full():
            return flush < write
        if least_pages > 0:
            return (write // OS_PAGE_SIZE - flush // OS_PAGE_SIZE) >= least_pages
        return write > flush

    def flush(self, least_pages: int = 0) -> int:
        """Make the written bytes durable if at least ``least_pages`` pages are dirty; returns
        the flushed position. The position is read once, so concurrent appends beyond it are
        simply covered by the next flush."""
        if self.is_able_to_flush(least_pages) and self._available:
            write = self.wrote_position
            if write > (self.flushed_position // OS_PAGE_SIZE) * OS_PAGE_SIZE and not sync_file(self.path):
                return self.flushed_position
            self.flushed_position = write
        return self.flushed_position

    # ---- reading ----------------------------------------------------------------------------
    def select_mapped_buffer(self, pos: int, size: int | None = None) -> memoryview | None:
        """A view of [pos, pos+size) (or to the read position) if it is fully written."""
        read = self.wrote_position
        if size is None:
            size = read - pos
        if pos < 0 or size < 0 or pos + size > read or not self._available:
            return None
        return memoryview(self.mm)[pos:pos + size]

    def view(self) -> memoryview:
        """The whole mapping (recovery and tools walk it regardless of positions)."""
        return memoryview(self.mm)

    # ---- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        self._available = False
        if self._handles is not None:
            self._handles.forget(self)
        if not self.is_mapped:
            return
        try:
            self.mm.close()
        except BufferError:
            pass  # readers still hold views; the mapping goes away with the last one

    def destroy(self) -> bool:
        """Unmap and delete the file (readers holding views keep a valid mapping until done)."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        return True


#: the slot's descriptor (LazyMappedFile.mm fills it on first use), taken from the class's
#: namespace: a checker knows a slot only as the instance attribute
_MM: types.MemberDescriptorType = MappedFile.__dict__["mm"]


class LazyMappedFile(MappedFile):
    """A MappedFile mapped on first read of ``mm`` and written through :class:`FileHandles`
    (consume queues: a broker with 80,000 of them must not hold 80,000 mappings and twice as
    many descriptors - CPython's mmap keeps a descriptor of its own - when it reads or writes
    a few of them at a time)."""

    __slots__ = ()

    @property
    def mm(self) -> mmap.mmap:
        try:
            return _MM.__get__(self)
        except AttributeError:
            pass
        if not self._available:
            raise ValueError(f"{self.path} is closed")
        assert self._handles is not None
        with self._handles.lock:
            try:
                return _MM.__get__(self)
            except AttributeError:
                m = self._open_mapping()
                _MM.__set__(self, m)
                self._handles.mapped += 1
                return m

    @mm.setter
    def mm(self, value: mmap.mmap) -> None:
        _MM.__set__(self, value)


class FileHandles:
    """The write descriptors of one store's consume-queue files: at most ``limit`` open, the
    least recently written closed first (reopened by its next write). Writes and closes
    happen under one lock, so a descriptor is never closed - and its number reused - while
    a write to it is under way."""

    def __init__(self, limit: int = 1024) -> None:
        self.limit = max(limit, 1)
        self.lock = threading.Lock()
        self._fds: "collections.OrderedDict[MappedFile, int]" = collections.OrderedDict()
        self.opened = 0  # descriptors opened so far (tests, stats)
        self.mapped = 0  # files mapped so far

    @property
    def open_count(self) -> int:
        return len(self._fds)

    def pwrite(self, mf: MappedFile, data: bytes | bytearray | memoryview, pos: int) -> None:
        with self.lock:
            fds = self._fds
            fd = fds.get(mf)
            if fd is None:
                while len(fds) >= self.limit:
                    os.close(fds.popitem(last=False)[1])
                fd = fds[mf] = os.open(mf.path, os.O_RDWR | os.O_CLOEXEC)
                self.opened += 1
            else:
                fds.move_to_end(mf)
            pwrite_all(fd, data, pos, mf.path)

    def forget(self, mf: MappedFile) -> None:
        with self.lock:
            fd = self._fds.pop(mf, None)
            if fd is not None:
                os.close(fd)

    def close_all(self) -> None:
        with self.lock:
            while self._fds:
                os.close(self._fds.popitem()[1])


class MappedFileQueue:
    """The ordered files of one queue directory (MappedFileQueue.java)."""

    def __init__(self, store_path: str | os.PathLike, mapped_file_size: int, durable_names: bool = False,
                 preallocate: bool = False, handles: FileHandles | None = None):
        """``durable_names``: fsync the directory after creating a file (the commit log, whose
        acknowledged data must not lose its file name in a power cut). ``preallocate``: give
        new files all their blocks at creation (the commit log with warmMapedFileEnable=true:
        a full disk then fails the file's creation, not a later write) or leave them sparse
        (the default, as RocketMQ's files are).
        ``handles``: files are :class:`LazyMappedFile`s written through these descriptors."""
        self.store_path = str(store_path)
        self.handles = handles
        self.mapped_file_size = mapped_file_size
        self.durable_names = durable_names
        self.preallocate = preallocate
        self.mapped_files: list[MappedFile] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0
        self._lock = threading.RLock()

    # ---- loading ----------------------------------------------------------------------------
    def load(self) -> None:
        """Map every file in name order, all marked full (recovery sets the real end).
        Raises StoreFileError for a file of the wrong size or a foreign name."""
        d = Path(self.store_path)
        try:
            entries = [e for e in os.scandir(self.store_path) if e.is_file()]
        except (FileNotFoundError, NotADirectoryError):
            return
        if any(e.name.endswith(TEMP_SUFFIX) for e in entries):
            remove_temp_files(d)
            entries = [e for e in entries if not e.name.endswith(TEMP_SUFFIX)]
        entries.sort(key=lambda e: e.name)
        files: list[MappedFile] = []
        try:
            for entry in entries:
                name = entry.name
                path = entry.path
                size = entry.stat().st_size
                if len(name) != 20 or not name.isdigit():
                    raise StoreFileError(str(path), 0, "unexpected file in a mapped-file directory (name is not a 20-digit offset)")
                if size != self.mapped_file_size:
                    raise StoreFileError(str(path), 0, f"file size {size} does not match the configured size "
                                               f"{self.mapped_file_size}")
                if int(name) % self.mapped_file_size != 0:
                    raise StoreFileError(str(path), 0, f"start offset {int(name)} is not a multiple of the file size "
                                               f"{self.mapped_file_size}")
                if files and int(name) != files[-1].file_from_offset + self.mapped_file_size:
                    raise StoreFileError(str(path), 0, f"gap: previous file {files[-1].file_name} does not end at {name}")
                mf = self._file(path, create=False, checked=True)
                mf.wrote_position = mf.flushed_position = self.mapped_file_size
                files.append(mf)
        except BaseException:
            for mf in files:
                mf.close()
            raise
        with self._lock:
            self.mapped_files = files

    def check_self(self) -> list[str]:
        """Adjacent files must be exactly one file size apart (MappedFileQueue.checkSelf)."""
        problems = []
        for a, b in zip(self.mapped_files, self.mapped_files[1:]):
            if b.file_from_offset - a.file_from_offset != self.mapped_file_size:
                problems.append(f"{a.file_name} -> {b.file_name}: offsets are not contiguous")
        return problems

    # ---- access -----------------------------------------------------------------------------
    def get_first_mapped_file(self) -> MappedFile | None:
        files = self.mapped_files
        return files[0] if files else None

    def get_last_mapped_file(self, start_offset: int | None = None, need_create: bool = True) -> MappedFile | None:
        """Without ``start_offset``: the last file or None. With it: the last file, or a new one
        when there is none (created at start_offset rounded down) or the last one is full."""
        files = self.mapped_files
        last = files[-1] if files else None
        if start_offset is None:
            return last
        create_offset = -1
        if last is None:
            create_offset = start_offset - (start_offset % self.mapped_file_size)
        elif last.is_full():
            create_offset = last.file_from_offset + self.mapped_file_size
        if create_offset != -1 and need_create:
            return self._create(create_offset)
        return last

    def _create(self, offset: int) -> MappedFile:
        os.makedirs(self.store_path, exist_ok=True)
        mf = self._file(os.path.join(self.store_path, offset_to_file_name(offset)))
        with self._lock:
            if not self.mapped_files:
                mf.first_create_in_queue = True
            self.mapped_files = self.mapped_files + [mf]
        return mf

    def _file(self, path: str, create: bool = True, checked: bool = False) -> MappedFile:
        if self.handles is None:
            return MappedFile(path, self.mapped_file_size, create=create, sync_dir=self.durable_names,
                              preallocate=self.preallocate)
        return LazyMappedFile(path, self.mapped_file_size, create=create, sync_dir=self.durable_names,
                              preallocate=self.preallocate, handles=self.handles, checked=checked)

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        files = self.mapped_files  # a snapshot: the list is replaced, never mutated in place
        if not files:
            return None
        first = files[0]
        size = self.mapped_file_size
        if first.file_from_offset <= offset < files[-1].file_from_offset + size:
            idx = offset // size - first.file_from_offset // size
            if 0 <= idx < len(files):
                mf = files[idx]
                if mf.file_from_offset <= offset < mf.file_from_offset + size:
                    return mf
            for mf in files:
                if mf.file_from_offset <= offset < mf.file_from_offset + size:
                    return mf
        return first if return_first_on_not_found else None

    def get_min_offset(self) -> int:
        files = self.mapped_files
        return files[0].file_from_offset if files else -1

    def get_max_offset(self) -> int:
        files = self.mapped_files
        return files[-1].file_from_offset + files[-1].read_position if files else 0

    def get_max_wrote_position(self) -> int:
        return self.get_max_offset()

    def remain_how_many_data_to_flush(self) -> int:
        return self.get_max_offset() - self.flushed_where

    def get_mapped_memory_size(self) -> int:
        return len(self.mapped_files) * self.mapped_file_size

    # ---- flush ------------------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        """Flush the file holding flushed_where; True if nothing new was flushed."""
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        # read before the flush, in this order: an append advances wrote_position before it
        # sets store_timestamp, so every record stored at or before ts lies below wrote
        ts = mf.store_timestamp
        wrote = mf.wrote_position
        flushed = mf.flush(least_pages)
        where = mf.file_from_offset + flushed
        unchanged = where == self.flushed_where
        self.flushed_where = where
        if flushed >= wrote:
            # 4.9.8 moves storeTimestamp on thorough flushes only (flushLeastPages == 0), so
            # the checkpoint lags up to flushCommitLogThoroughInterval behind what is on disk
            # and a crash re-walks those seconds of writes; any flush that reached every
            # byte written when ts was read makes the same promise
            self.store_timestamp = ts
        return unchanged

    # ---- truncation / deletion -------------------------------------------------------------
    def truncate_dirty_files(self, offset: int) -> None:
        """Set the end of data to ``offset``: zero nothing, but forget everything after it and
        delete files that start beyond it (MappedFileQueue.truncateDirtyFiles)."""
        keep, remove = [], []
        for mf in self.mapped_files:
            tail = mf.file_from_offset + self.mapped_file_size
            if tail > offset:
                if offset >= mf.file_from_offset:
                    pos = offset % self.mapped_file_size
                    mf.wrote_position = mf.flushed_position = pos
                    keep.append(mf)
                else:
                    mf.destroy()
                    remove.append(mf)
            else:
                keep.append(mf)
        with self._lock:
            self.mapped_files = keep

    def delete_last_mapped_file(self) -> None:
        last = self.get_last_mapped_file()
        if last is not None:
            last.destroy()
            with self._lock:
                self.mapped_files = [m for m in self.mapped_files if m is not last]

    def reset_offset(self, offset: int) -> bool:
        last = self.get_last_mapped_file()
        if last is not None and last.file_from_offset + last.wrote_position - offset > 2 * self.mapped_file_size:
            return False
        files = list(self.mapped_files)
        while files:
            mf = files[-1]
            if offset >= mf.file_from_offset:
                where = offset % self.mapped_file_size
                mf.wrote_position = mf.flushed_position = where
                break
            files.pop()
        with self._lock:
            self.mapped_files = files
        return True

    def delete_expired_file_by_time(self, expired_time_ms: int, delete_files_interval_ms: int = 0,
                                    clean_immediately: bool = False, now_ms: int | None = None) -> int:
        """Delete leading files (never the last one, the file in use) older than
        ``expired_time_ms`` by mtime, at most DELETE_FILES_BATCH_MAX per call."""
        files = list(self.mapped_files)
        deleted: list[MappedFile] = []
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        for i, mf in enumerate(files[:-1]):
            if now_ms >= mf.get_last_modified_timestamp() + expired_time_ms or clean_immediately:
                mf.destroy()
                deleted.append(mf)
                if len(deleted) >= DELETE_FILES_BATCH_MAX:
                    break
                if delete_files_interval_ms > 0 and i + 1 < len(files) - 1:
                    time.sleep(delete_files_interval_ms / 1000)
            else:
                break
        self._forget(deleted)
        return len(deleted)

    def delete_expired_file_by_offset(self, offset: int, unit_size: int) -> int:
        """For consume queues: delete leading files whose last unit points below ``offset``
        (the commit log's min offset). Never the last file."""
        files = list(self.mapped_files)
        deleted: list[MappedFile] = []
        for mf in files[:-1]:
            pos = self.mapped_file_size - unit_size
            max_phy = int.from_bytes(mf.read(pos, 8), "big", signed=True) if mf.is_available() else -1
            if max_phy < offset:
                mf.destroy()
                deleted.append(mf)
            else:
                break
        self._forget(deleted)
        return len(deleted)

    def _forget(self, gone: Iterable[MappedFile]) -> None:
        ids = {id(m) for m in gone}
        if ids:
            with self._lock:
                self.mapped_files = [m for m in self.mapped_files if id(m) not in ids]

    def shutdown(self) -> None:
        for mf in self.mapped_files:
            mf.close()

    def destroy(self) -> None:
        for mf in self.mapped_files:
            mf.destroy()
        with self._lock:
            self.mapped_files = []
        self.flushed_where = 0
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass
