#!/usr/bin/env python
"""Commit-log scan rate of spark/ against the raw read speed of the same files, same run.

Generates a store of ``--size`` bytes (default 1 GiB) of messages with ``--body-size``-byte bodies
(default 1 KiB; Spark's cost is mostly per row, so larger messages scan at more MB/s) written with
wire/message.py's encoder straight into commit-log files (RocketMQ's layout: 20-digit names,
BLANK end-of-file record), then measures, on warm page cache:
  raw read        sequential reads of every file: from the page cache, and from the disk with
                  O_DIRECT (the physical limit a cold scan faces), one core
  reader          spark.scan -> Arrow batches in this process (one core), several option sets
  reader CPU      the same as the data source runs it (walk hints), best of three CPU seconds:
                  record positions only, + bodies and CRC flags (what every reader of them
                  pays), all columns
  spark local[N]  spark.read.format("rocketmq") on N cores, rows written to Spark's "noop" sink
                  (how Spark's own benchmarks time a scan: every row is produced, nothing else
                  is done); also a column selection through .schema(...) and the aggregate
                  query of earlier tables
  spark ceiling   the same Spark path fed one already-decoded batch over and over: what Spark
                  alone costs to take a Python data source's Arrow batches into rows, i.e. the
                  best any Python reader could reach on this machine
  spark verify    rmqd spark verify of the whole store, in a session (and JVM) of its own built as
                  the command builds it (a second run of this script after the scans); its session
                  start and first run are shown apart from the timed runs
and prints MB/s and MB/s per core, each per-core rate as a fraction of the raw rates, and for
the Spark scans the CPU seconds spent in the JVM and in the Python workers.

    .venv/bin/python scripts/bench_spark.py [--size BYTES] [--body-size BYTES] [--dir DIR] [--cores N] [--keep]
    .venv/bin/python scripts/bench_spark.py --store DIR/store --only verify   # a kept store, verify rows only
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqd.store.indexfile import IndexService  # noqa: E402
from rmqd.wire.javamap import java_string_hash  # noqa: E402
from rmqd.wire.message import BLANK_MAGIC_CODE, encode_record  # noqa: E402

MiB = 1024 * 1024


def generate(root: Path, total: int, file_size: int, body_size: int = 1024, queues: bool = True) -> tuple[int, int]:
    """Fill commit-log files with records until ``total`` bytes; returns (messages, bytes of data).
    With ``queues``, also the consume queues (4.9.8's default 6,000,000-byte files) and the index
    (store/'s IndexService, default geometry) that dispatch would have written, so that
    ``rmqd spark verify`` has its three checks to run."""
    cl = root / "commitlog"
    cl.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(7)
    bodies = [bytes(rnd.getrandbits(8) for _ in range(body_size)) for _ in range(16)]
    n = 0
    phys = 0
    written = 0
    dispatched: list[tuple] = []  # DispatchRequest order: topic, queue, offset, size, tags code, time, queue offset, KEYS, UNIQ_KEY, sysFlag
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
            if queues:
                dispatched.append(("BenchTopic", i % 4, phys, len(rec), java_string_hash(props["TAGS"]),
                                   1_700_000_000_005 + i, i // 4, props["KEYS"], props["UNIQ_KEY"], 0))
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
    if queues:
        write_consume_queues(root, dispatched)
        idx = IndexService(root / "index")
        idx.build_index_batch(dispatched)
        idx.shutdown()
    return n, written


def write_consume_queues(root: Path, dispatched: list[tuple], file_size: int = 300_000 * 20) -> None:
    """ConsumeQueue files as dispatch writes them: 20-byte units (offset, size, tags code)."""
    import numpy as np
    from rmqd.store.consumequeue import CQ_STORE_UNIT_SIZE
    dt = np.dtype([("off", ">i8"), ("size", ">i4"), ("tags", ">i8")])
    per_file = file_size // CQ_STORE_UNIT_SIZE
    for q in sorted({r[1] for r in dispatched}):
        rows = [r for r in dispatched if r[1] == q]
        units = np.array([(r[2], r[3], r[4]) for r in rows], dtype=dt)
        d = root / "consumequeue" / rows[0][0] / str(q)
        d.mkdir(parents=True, exist_ok=True)
        for k in range(0, len(units), per_file):
            with open(d / ("%020d" % (k * CQ_STORE_UNIT_SIZE)), "wb") as fh:
                fh.write(units[k:k + per_file].tobytes())
                fh.truncate(file_size)


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
    from rmqd.spark import scan
    rows = 0
    t = time.perf_counter()
    for sp in scan.plan_commitlog(root):
        for b in scan.scan_commitlog(sp, **kw):
            rows += b.num_rows
    return time.perf_counter() - t, rows


def reader_floor(root: Path, columns: list[str] | None) -> tuple[float, int]:
    """The reader as the data source's tasks run it (its partitions, walk hints included), in this
    process, producing only ``columns`` (None: all): with filePos alone, what locating every record
    costs (map, walk, heads); with body and crc_ok too, what any reader of every body and its CRC
    pays. Best of three, CPU s."""
    import pyarrow as pa
    from rmqd.spark.datasource import parse_options, plan_partitions, read_partition
    from rmqd.spark.schemas import ARROW_SCHEMAS
    full = ARROW_SCHEMAS["commitlog"]
    schema = full if columns is None else pa.schema([full.field(c) for c in columns])
    o = parse_options({"path": str(root)})
    best, rows = float("inf"), 0
    for _ in range(3):
        rows = 0
        c = time.process_time()
        for part in plan_partitions(o):
            for b in read_partition(o, part, schema):
                rows += b.num_rows
        best = min(best, time.process_time() - c)
    return best, rows


def _tree_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of this process's descendants: the JVM and the Python workers."""
    hz = os.sysconf("SC_CLK_TCK")
    procs = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                rest = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                exe = os.path.basename(fh.read().split(b"\0", 1)[0]).decode(errors="replace")
        except OSError:
            continue
        procs[int(pid)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / hz, exe)
    out = {"jvm": 0.0, "python": 0.0}
    me = os.getpid()
    for pid, (_ppid, cpu, exe) in procs.items():
        p, hops = pid, 0
        while p in procs and p != me and hops < 64:  # walk up: is ``pid`` below this process?
            p, hops = procs[p][0], hops + 1
        if p == me and pid != me:
            out["jvm" if exe == "java" else "python"] += cpu
    return out


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _timed(action) -> tuple[float, dict[str, float]]:
    """Wall seconds, and CPU seconds of the JVM, the Python workers and this process (the
    driver: planning, and for verify merging the tasks' results)."""
    c0 = _tree_cpu()
    d0 = _own_cpu()
    t = time.perf_counter()
    action()
    dt = time.perf_counter() - t
    c1 = _tree_cpu()
    out = {k: c1[k] - c0.get(k, 0.0) for k in c1}
    out["driver"] = _own_cpu() - d0
    return dt, out


def spark_scan(spark, root: Path, schema: str | None = None, **opts) -> tuple[float, dict[str, float]]:
    """Every row of the commit log into Spark's noop sink."""
    from rmqd.spark.session import read
    if schema is None:
        df = read(spark, root, "commitlog", **opts)
    else:
        df = spark.read.format("rocketmq").schema(schema).options(**opts).load(str(root))
    return _timed(lambda: df.write.format("noop").mode("overwrite").save())


def spark_ceiling(spark, root: Path, messages: int, parts: int) -> tuple[float, dict[str, float]]:
    """Spark's own cost of a Python data source's rows: a source whose tasks yield one decoded
    batch of this store again and again (no decoding at all), as many rows as the store has."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from rmqd.spark import scan
    from rmqd.spark.schemas import COMMITLOG_SCHEMA
    store = str(root)

    class ReplayReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(parts)]

        def read(self, partition):
            batch = next(scan.scan_commitlog(scan.plan_commitlog(store)[0]))
            rows = messages // parts + (1 if partition.value < messages % parts else 0)
            while rows > 0:
                yield batch if rows >= batch.num_rows else batch.slice(0, rows)
                rows -= batch.num_rows

    class Replay(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rmqd_bench_replay"

        def schema(self):
            return COMMITLOG_SCHEMA

        def reader(self, schema):
            return ReplayReader()

    spark.dataSource.register(Replay)
    df = spark.read.format("rmqd_bench_replay").load()
    return _timed(lambda: df.write.format("noop").mode("overwrite").save())


def spark_verify(spark, root: Path, **opts) -> tuple[float, dict[str, float]]:
    """``rmqd spark verify`` of the whole store (record integrity with CRC, queues vs commit log,
    index vs commit log), in the already started session: the store must come out clean."""
    from rmqd.spark.verify import format_report, verify_store
    out = []
    dt_cpu = _timed(lambda: out.append(verify_store(spark, str(root), options=opts)))
    report = out[0]
    assert report.ok, format_report(report)
    return dt_cpu


def spark_query(spark, root: Path, **opts) -> tuple[float, int]:
    """The aggregate of earlier tables (sort-based: it takes the max of a string column)."""
    from pyspark.sql import functions as F
    from rmqd.spark.session import read
    df = read(spark, root, "commitlog", **opts)
    t = time.perf_counter()
    r = df.agg(F.count("*").alias("n"), F.sum("bodyLength"), F.max(F.length("body")), F.max("topic"),
               F.sum(F.size("properties"))).first()
    return time.perf_counter() - t, r["n"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024 * MiB, help="bytes of commit-log data (default 1 GiB)")
    ap.add_argument("--body-size", type=int, default=1024, help="bytes of each message body (default 1 KiB)")
    ap.add_argument("--file-size", type=int, default=1024 * MiB, help="mappedFileSizeCommitLog (default 1 GiB)")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="Spark local[N]")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--verify-runs", type=int, default=2, help="timed rmqd spark verify runs (best counts)")
    ap.add_argument("--keep", action="store_true", help="keep the generated store")
    ap.add_argument("--store", default=None, help="use this store (one generated with --keep) instead of generating")
    ap.add_argument("--only", choices=("all", "verify"), default="all",
                    help="verify: the raw reads and rmqd spark verify only")
    a = ap.parse_args(argv)
    if a.store:
        a.keep = True
        root = Path(a.store)
    else:
        root = Path(a.dir or tempfile.mkdtemp(prefix="rmqd-bench-spark-")) / "store"
    try:
        t = time.perf_counter()
        if a.store:
            n = reader_scan(root, read_body=False, check_crc=False)[1]
            print(f"store {root}: {n} messages")
        else:
            n, data = generate(root, a.size, a.file_size, a.body_size)
            print(f"generated {n} messages ({a.body_size}-byte bodies), {data / MiB:.0f} MiB of records "
                  f"({time.perf_counter() - t:.1f} s)")
        disk = sum(p.stat().st_size for p in (root / "commitlog").iterdir())
        raw_read(root)  # warm the page cache: every rate below is from memory
        rows = []
        dt, nbytes = min((raw_read(root) for _ in range(3)), key=lambda x: x[0])
        raw = nbytes / MiB / dt
        rows.append(("raw read, page cache (8 MiB reads)", 1, dt, nbytes, n))
        direct = direct_read(root)
        if direct is not None:
            rows.append(("raw read, disk (O_DIRECT)", 1, direct[0], direct[1], n))
        for label, kw in [] if a.only == "verify" else [("reader: all columns + crc", {}),
                          ("reader: no crc", {"check_crc": False}),
                          ("reader: no body, no crc", {"read_body": False, "check_crc": False})]:
            dt, r = reader_scan(root, **kw)
            assert r == n, (r, n)
            rows.append((label, 1, dt, disk, r))
        for label, cols in [] if a.only == "verify" else [
                ("reader CPU, walk hints: filePos only", ["filePos"]),
                ("reader CPU, walk hints: filePos, body, crc_ok", ["filePos", "body", "crc_ok"]),
                ("reader CPU, walk hints: all columns + crc", None)]:
            dt, r = reader_floor(root, cols)
            assert r == n, (r, n)
            rows.append((label, 1, dt, disk, r))
        spark_cpu = []
        if not a.no_spark:
            from rmqd.spark.session import get_session
            split = str(max(32 * MiB, disk // (a.cores * 4)))
            parts = len(range(0, disk, int(split)))
            if a.only == "all":
                spark = get_session(f"local[{a.cores}]", "rmqd-bench", driver_memory="2g")
                for _ in range(2):  # warm the JVM (class loading, JIT) and the Python workers
                    spark_scan(spark, root, splitSize=split)
                selected = ("topic STRING, queueId INT, queueOffset BIGINT, storeTimestamp BIGINT, keys STRING, "
                            "bodyLength INT")
                for label, run in [
                    ("spark: scan, all columns + crc", lambda: spark_scan(spark, root, splitSize=split)),
                    ("spark: scan, no body, no crc",
                     lambda: spark_scan(spark, root, splitSize=split, body="false", checkCrc="false")),
                    ("spark: scan, 6 columns by .schema(...)", lambda: spark_scan(spark, root, selected, splitSize=split)),
                    ("spark ceiling: a decoded batch replayed", lambda: spark_ceiling(spark, root, n, parts)),
                ]:
                    dt, cpu = min((run() for _ in range(2)), key=lambda x: x[0])
                    rows.append((f"{label}, local[{a.cores}]", a.cores, dt, disk, n))
                    spark_cpu.append((label, cpu))
                dt, r = spark_query(spark, root, splitSize=split)
                assert r == n, (r, n)
                rows.append((f"spark: aggregate query, local[{a.cores}]", a.cores, dt, disk, r))
                spark.stop()
            if a.verify_runs > 0 and a.only == "verify":
                # verify's own session, as rmqd spark verify builds it (light_jvm: see
                # spark/session.py; JVM flags need a JVM of its own, so after the scans the verify
                # rows come from a second run of this script); its first run is what a user's
                # command costs after start-up
                label = "spark verify end to end (records+CRC, queues, index)"
                holder: list = []
                start = _timed(lambda: holder.append(get_session(f"local[{a.cores}]", "rmqd-bench-verify",
                                                                  driver_memory="2g", light_jvm=True)))
                spark = holder[0]
                first = spark_verify(spark, root, splitSize=split)
                spark_cpu.append(("spark verify: session start (light JVM)", start[1]))
                spark_cpu.append(("spark verify: first run in that session", first[1]))
                dt, cpu = min((spark_verify(spark, root, splitSize=split) for _ in range(a.verify_runs)),
                              key=lambda x: x[0])
                rows.append((f"{label}, local[{a.cores}]", a.cores, dt, disk, n))
                spark_cpu.append((label, cpu))
                spark.stop()
        print()
        disk_rate = direct[1] / MiB / direct[0] if direct is not None else None
        w = max(len(r[0]) for r in rows)
        print(f"| {'what':<{w}} | cores | {'seconds':>7} | {'MB/s':>7} | {'MB/s/core':>9} | {'x raw':>5} | "
              f"{'x disk':>6} | {'msgs/s':>9} |")
        print(f"|{'-' * (w + 2)}|-------|{'-' * 9}|{'-' * 9}|{'-' * 11}|{'-' * 7}|{'-' * 8}|{'-' * 11}|")
        for label, cores, dt, nbytes, msgs in rows:
            rate = nbytes / MiB / dt
            x_disk = f"{rate / cores / disk_rate:>6.2f}" if disk_rate else f"{'-':>6}"
            print(f"| {label:<{w}} | {cores:>5} | {dt:>7.2f} | {rate:>7.0f} | {rate / cores:>9.0f} | "
                  f"{rate / cores / raw:>5.3f} | {x_disk} | {msgs / dt:>9.0f} |")
        print(f"\nMB = MiB of commit-log files ({disk / MiB:.0f} MiB); every scan reads the page cache; "
              f"x raw = per-core rate / page-cache raw rate (first row); x disk = per-core rate / "
              f"O_DIRECT disk rate (second row), the limit a cold read of the store faces.")
        by = {r[0].split(", local[")[0]: r for r in rows}
        scan_row, ceil_row = by.get("spark: scan, all columns + crc"), by.get("spark ceiling: a decoded batch replayed")
        if scan_row and ceil_row:
            print(f"\nfull scan / ceiling (same run): {ceil_row[2] / scan_row[2]:.2f} (aim >= 0.8)")
        ver = by.get("spark verify end to end (records+CRC, queues, index)")
        if ver and disk_rate:
            print(f"verify per core / disk: {ver[3] / MiB / ver[2] / ver[1] / disk_rate:.2f} (aim >= 0.5)")
        if spark_cpu:
            print(f"\n| {'CPU seconds for the whole store':<{w}} | {'JVM':>6} | {'Python':>6} | {'driver':>6} |")
            print(f"|{'-' * (w + 2)}|{'-' * 8}|{'-' * 8}|{'-' * 8}|")
            for label, cpu in spark_cpu:
                print(f"| {label:<{w}} | {cpu['jvm']:>6.2f} | {cpu['python']:>6.2f} | {cpu['driver']:>6.2f} |")
        if not a.no_spark and a.verify_runs > 0 and a.only == "all":
            print("\nverify, in a process (and JVM) of its own:", flush=True)
            subprocess.run([sys.executable, __file__, "--store", str(root), "--only", "verify", "--cores", str(a.cores),
                            "--verify-runs", str(a.verify_runs)], check=True)
    finally:
        if not a.keep:
            shutil.rmtree(root.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
