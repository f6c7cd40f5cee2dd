#!/usr/bin/env python
"""Commit-log scan rate of spark/ against the raw read speed of the same files, same run.

Generates a store of ``--size`` bytes (default 1 GiB) of ~1 KiB messages written with
wire/message.py's encoder straight into commit-log files (RocketMQ's layout: 20-digit names,
BLANK end-of-file record), then measures, on warm page cache:
  raw read        sequential readinto of every file (the physical limit, one core)
  reader          spark.scan -> Arrow batches in this process (one core), several option sets
  spark local[N]  spark.read.format("rocketmq") aggregated on N cores (rows cross into the JVM)
and prints MB/s and MB/s per core, and each rate as a fraction of the raw rate.

    .venv/bin/python scripts/bench_spark.py [--size BYTES] [--dir DIR] [--cores N] [--keep]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wire.message import BLANK_MAGIC_CODE, encode_record  # noqa: E402

MiB = 1024 * 1024


def generate(root: Path, total: int, file_size: int, body_size: int = 1024) -> tuple[int, int]:
    """Fill commit-log files with records until ``total`` bytes; returns (messages, bytes of data)."""
    cl = root / "commitlog"
    cl.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(7)
    bodies = [bytes(rnd.getrandbits(8) for _ in range(body_size)) for _ in range(16)]
    n = 0
    phys = 0
    written = 0
    while written < total:
        buf = bytearray()
        base = phys
        while True:
            i = n
            props = {"TAGS": f"Tag{i % 8}", "KEYS": f"key-{i}", "UNIQ_KEY": f"{i:032X}", "CLUSTER": "BenchCluster"}
            rec = encode_record(queue_id=i % 4, flag=0, queue_offset=i // 4, physical_offset=phys, sys_flag=0,
                                born_timestamp=1_700_000_000_000 + i, born_ip="10.0.0.2", born_port=40000,
                                store_timestamp=1_700_000_000_005 + i, store_ip="10.0.0.1", store_port=10911,
                                reconsume_times=0, prepared_transaction_offset=0, body=bodies[i % 16],
                                topic="BenchTopic", properties=props)
            if len(buf) + len(rec) + 8 > file_size or written + len(buf) + len(rec) > total:
                break
            buf += rec
            phys += len(rec)
            n += 1
        remaining = file_size - len(buf)
        tail = remaining.to_bytes(4, "big") + BLANK_MAGIC_CODE.to_bytes(4, "big")
        with open(cl / ("%020d" % base), "wb") as fh:
            fh.write(buf)
            fh.write(tail)
            fh.truncate(file_size)
        written += len(buf)
        phys = base + file_size
        if written + len(rec) > total:
            break
    return n, written


def raw_read(root: Path) -> tuple[float, int]:
    buf = bytearray(8 * MiB)
    mv = memoryview(buf)
    total = 0
    t = time.perf_counter()
    for p in sorted((root / "commitlog").iterdir()):
        with open(p, "rb", buffering=0) as fh:
            while True:
                k = fh.readinto(mv)
                if not k:
                    break
                total += k
    return time.perf_counter() - t, total


def direct_read(root: Path) -> tuple[float, int] | None:
    """Sequential O_DIRECT reads: the disk's own speed, bypassing the page cache (None if the
    file system refuses O_DIRECT)."""
    import mmap
    if not hasattr(os, "O_DIRECT"):
        return None
    buf = mmap.mmap(-1, 8 * MiB)  # page-aligned, as O_DIRECT needs
    total = 0
    t = time.perf_counter()
    try:
        for p in sorted((root / "commitlog").iterdir()):
            fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
            try:
                while True:
                    k = os.readv(fd, [buf])
                    if not k:
                        break
                    total += k
            finally:
                os.close(fd)
    except OSError:
        return None
    return time.perf_counter() - t, total


def reader_scan(root: Path, **kw) -> tuple[float, int]:
    from spark import scan
    rows = 0
    t = time.perf_counter()
    for sp in scan.plan_commitlog(root):
        for b in scan.scan_commitlog(sp, **kw):
            rows += b.num_rows
    return time.perf_counter() - t, rows


def spark_scan(spark, root: Path, **opts) -> tuple[float, int]:
    from pyspark.sql import functions as F
    from spark.session import read
    df = read(spark, root, "commitlog", **opts)
    t = time.perf_counter()
    r = df.agg(F.count("*").alias("n"), F.sum("bodyLength"), F.max(F.length("body")), F.max("topic"),
               F.sum(F.size("properties"))).first()
    return time.perf_counter() - t, r["n"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024 * MiB, help="bytes of commit-log data (default 1 GiB)")
    ap.add_argument("--file-size", type=int, default=1024 * MiB, help="mappedFileSizeCommitLog (default 1 GiB)")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="Spark local[N]")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the generated store")
    a = ap.parse_args(argv)
    root = Path(a.dir or tempfile.mkdtemp(prefix="rmqd-bench-spark-")) / "store"
    try:
        t = time.perf_counter()
        n, data = generate(root, a.size, a.file_size)
        disk = sum(p.stat().st_size for p in (root / "commitlog").iterdir())
        print(f"generated {n} messages, {data / MiB:.0f} MiB of records in {disk / MiB:.0f} MiB of files "
              f"({time.perf_counter() - t:.1f} s)")
        raw_read(root)  # warm the page cache: every rate below is from memory
        rows = []
        dt, nbytes = min((raw_read(root) for _ in range(3)), key=lambda x: x[0])
        raw = nbytes / MiB / dt
        rows.append(("raw read, page cache (8 MiB reads)", 1, dt, nbytes, n))
        direct = direct_read(root)
        if direct is not None:
            rows.append(("raw read, disk (O_DIRECT)", 1, direct[0], direct[1], n))
        for label, kw in [("reader: all columns + crc", {}),
                          ("reader: no crc", {"check_crc": False}),
                          ("reader: no body, no crc", {"read_body": False, "check_crc": False})]:
            dt, r = reader_scan(root, **kw)
            assert r == n, (r, n)
            rows.append((label, 1, dt, disk, r))
        if not a.no_spark:
            from spark.session import get_session
            spark = get_session(f"local[{a.cores}]", "rmqd-bench", driver_memory="1g")
            split = str(max(32 * MiB, disk // (a.cores * 4)))
            spark_scan(spark, root, splitSize=split, body="false", checkCrc="false")  # warm the JVM / workers
            for label, opts in [("spark: all columns + crc", {}),
                                ("spark: no body, no crc", {"body": "false", "checkCrc": "false"})]:
                dt, r = spark_scan(spark, root, splitSize=split, **opts)
                assert r == n, (r, n)
                rows.append((f"{label} local[{a.cores}]", a.cores, dt, disk, r))
            spark.stop()
        print()
        disk_rate = direct[1] / MiB / direct[0] if direct is not None else None
        print(f"| {'what':<34} | cores | {'seconds':>7} | {'MB/s':>7} | {'MB/s/core':>9} | {'x raw':>5} | "
              f"{'x disk':>6} | {'msgs/s':>9} |")
        print(f"|{'-' * 36}|-------|{'-' * 9}|{'-' * 9}|{'-' * 11}|{'-' * 7}|{'-' * 8}|{'-' * 11}|")
        for label, cores, dt, nbytes, msgs in rows:
            rate = nbytes / MiB / dt
            x_disk = f"{rate / cores / disk_rate:>6.2f}" if disk_rate else f"{'-':>6}"
            print(f"| {label:<34} | {cores:>5} | {dt:>7.2f} | {rate:>7.0f} | {rate / cores:>9.0f} | "
                  f"{rate / cores / raw:>5.2f} | {x_disk} | {msgs / dt:>9.0f} |")
        print(f"\nMB = MiB of commit-log files ({disk / MiB:.0f} MiB); every scan reads the page cache; "
              f"x raw = per-core rate / page-cache raw rate (first row); x disk = per-core rate / "
              f"O_DIRECT disk rate (second row), the limit a cold read of the store faces.")
    finally:
        if not a.keep:
            shutil.rmtree(root.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
