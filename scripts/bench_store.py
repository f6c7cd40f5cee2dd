#!/usr/bin/env python3
"""Store benchmark: appends/s (1 KiB, ASYNC_FLUSH; SYNC_FLUSH with 1 and 32 writer threads),
recovery time of a commit log of --recovery-gib GiB, and the disk's own sequential write speed
measured in the same run. Prints a table (numbers, not assertions)."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqd.store.commitlog import MessageExtBrokerInner  # noqa: E402
from rmqd.store.config import MessageStoreConfig  # noqa: E402
from rmqd.store.message_store import DefaultMessageStore  # noqa: E402

BODY = os.urandom(1024)


def disk_speed(d: Path, mib: int) -> float:
    p = d / "disk-speed"
    chunk = os.urandom(1 << 20)
    t = time.perf_counter()
    with open(p, "wb", buffering=0) as f:
        for _ in range(mib):
            f.write(chunk)
        os.fsync(f.fileno())
    dt = time.perf_counter() - t
    p.unlink()
    return mib / dt


def _store(root: Path, flush: str, file_size: int = 1 << 30) -> DefaultMessageStore:
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), flushDiskType=flush,
                                               mappedFileSizeCommitLog=file_size))
    s.load()
    s.start()
    return s


def _msg(i: int) -> MessageExtBrokerInner:
    return MessageExtBrokerInner("BenchTopic", i & 7, BODY, {"TAGS": "TagA", "KEYS": f"k{i}", "UNIQ_KEY": f"U{i:028d}"})


def bench_async(root: Path, n: int) -> tuple[float, float, float]:
    """-> (append path alone, dispatch deferred), (appends with dispatch running concurrently),
    (end to end: appended + dispatched into consume queues and index)."""
    s = _store(root, "ASYNC_FLUSH")
    put = s.put_message
    msgs = [_msg(i) for i in range(n)]
    s.reput_service.suspend()
    t = time.perf_counter()
    for m in msgs:
        put(m)
    alone = n / (time.perf_counter() - t)
    s.reput_service.resume()
    s.wait_dispatched(timeout_s=600)
    msgs = [_msg(i) for i in range(n)]
    t = time.perf_counter()
    for m in msgs:
        put(m)
    concurrent = n / (time.perf_counter() - t)
    s.wait_dispatched(timeout_s=600)
    end_to_end = n / (time.perf_counter() - t)
    s.shutdown()
    return alone, concurrent, end_to_end


def bench_sync(root: Path, writers: int, seconds: float) -> tuple[float, int]:
    s = _store(root, "SYNC_FLUSH")
    stop = time.perf_counter() + seconds
    counts = [0] * writers

    def run(w: int) -> None:
        i = 0
        while time.perf_counter() < stop:
            r = s.put_message(_msg(i))
            if not s.wait_for_flush(r.end_offset):
                raise RuntimeError("flush timeout")
            i += 1
        counts[w] = i

    t = time.perf_counter()
    th = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    dt = time.perf_counter() - t
    flushes = s.flush_service.flush_count
    s.shutdown()
    return sum(counts) / dt, flushes


def bench_sync_listeners(root: Path, in_flight: int, seconds: float) -> tuple[float, int]:
    """How the trio broker uses the store: one thread sends, each ack comes from the flush
    thread through add_flush_listener, at most ``in_flight`` sends awaiting their fsync."""
    s = _store(root, "SYNC_FLUSH")
    sem = threading.Semaphore(in_flight)
    acked = [0]
    failed = [0]

    def done(ok: bool) -> None:
        if ok:
            acked[0] += 1
        else:
            failed[0] += 1
        sem.release()

    t = time.perf_counter()
    stop = t + seconds
    i = 0
    while time.perf_counter() < stop:
        sem.acquire()
        r = s.put_message(_msg(i))
        s.add_flush_listener(r.end_offset, done)
        i += 1
    for _ in range(in_flight):
        sem.acquire()
    dt = time.perf_counter() - t
    flushes = s.flush_service.flush_count
    s.shutdown()
    if failed[0]:
        raise RuntimeError(f"{failed[0]} flush timeouts")
    return acked[0] / dt, flushes


def fsync_rate(d: Path, n: int = 300) -> float:
    """1 KiB write + fdatasync round trips per second: the ceiling for one synchronous writer."""
    p = d / "fsync-rate"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT)
    buf = os.urandom(1024)
    t = time.perf_counter()
    for i in range(n):
        os.pwrite(fd, buf, i * 1024)
        os.fdatasync(fd)
    dt = time.perf_counter() - t
    os.close(fd)
    p.unlink()
    return n / dt


def bench_recovery(root: Path, gib: float) -> tuple[int, float, float]:
    s = _store(root, "ASYNC_FLUSH")
    target = int(gib * (1 << 30)) - (1 << 20)
    i = 0
    while s.get_max_phy_offset() < target:
        s.put_message(_msg(i))
        i += 1
    s.wait_dispatched(timeout_s=3600)
    s.shutdown()
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1 << 30)
    t = time.perf_counter()
    s = DefaultMessageStore(cfg)
    s.load()
    clean = time.perf_counter() - t
    s.shutdown()
    (root / "abort").touch()  # as if killed: checkpoint-based crash recovery with re-dispatch
    t = time.perf_counter()
    s = DefaultMessageStore(cfg)
    s.load()
    crash = time.perf_counter() - t
    s.shutdown()
    return i, clean, crash


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument("--async-count", type=int, default=200_000)
    ap.add_argument("--sync-seconds", type=float, default=3.0)
    ap.add_argument("--recovery-gib", type=float, default=1.0)
    ap.add_argument("--disk-mib", type=int, default=256)
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rmqd-bench-", dir=a.dir))
    rows = []
    try:
        mbs = disk_speed(base, a.disk_mib)
        rows.append(("disk sequential write + fsync", f"{mbs:,.0f} MiB/s", f"= {mbs * 1024:,.0f} KiB-records/s"))
        rows.append(("disk 1 KiB write + fdatasync", f"{fsync_rate(base):,.0f} ops/s", "one synchronous writer's ceiling"))
        alone, concurrent, e2e = bench_async(base / "async", a.async_count)
        rows.append(("ASYNC_FLUSH append, 1 KiB, 1 thread", f"{alone:,.0f} appends/s", "dispatch deferred"))
        rows.append(("ASYNC_FLUSH append, dispatch running", f"{concurrent:,.0f} appends/s",
                     "CQ+index dispatch shares the GIL"))
        rows.append(("ASYNC_FLUSH append+dispatch end to end", f"{e2e:,.0f} msgs/s", "until CQ and index caught up"))
        for w in (1, 32):
            r, flushes = bench_sync(base / f"sync{w}", w, a.sync_seconds)
            rows.append((f"SYNC_FLUSH append+ack, {w} writer thread(s)", f"{r:,.0f} appends/s",
                         f"{flushes:,} group commits"))
        r, flushes = bench_sync_listeners(base / "synclisten", 32, a.sync_seconds)
        rows.append(("SYNC_FLUSH, 32 in flight via add_flush_listener", f"{r:,.0f} appends/s",
                     f"{flushes:,} group commits (the broker's way)"))
        shutil.rmtree(base / "async", ignore_errors=True)
        if a.recovery_gib > 0:
            n, clean, crash = bench_recovery(base / "recovery", a.recovery_gib)
            rows.append((f"recovery, {a.recovery_gib:g} GiB commit log ({n:,} msgs), clean", f"{clean:.2f} s",
                         "last 3 files, CRC checked"))
            rows.append((f"recovery, {a.recovery_gib:g} GiB commit log, after crash", f"{crash:.2f} s",
                         "from checkpoint, CRC + re-dispatch"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    w = max(len(r[0]) for r in rows)
    print(f"{'benchmark':<{w}} | {'result':>20} | note")
    print("-" * w + "-+-" + "-" * 20 + "-+-" + "-" * 40)
    for name, val, note in rows:
        print(f"{name:<{w}} | {val:>20} | {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
