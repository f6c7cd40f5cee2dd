#!/usr/bin/env python3
"""Restart benchmark: SIGKILL `rmqd serve` on a big store and time kill -> ready.

Builds a store of --gib GiB (1 KiB messages, written through the store API, then shut down
cleanly), then runs `rmqd serve` on it and kills it at several moments: right after it is
ready (before its first checkpoint of the run), after its first checkpoint (~1 s after
start, as RocketMQ's flush services), right after a burst of writes and 5 s after one (the
store idle, its files flushed). Each row says how long from SIGKILL until the restarted
broker printed its ready line, and where crash recovery started: the commit-log file the
checkpoint points into and the position in it (4.9.8 walks that file from its first byte;
rmqd starts at the last record the checkpoint covers) and how many records it re-dispatched.
Numbers, not assertions.

    scripts/bench_restart.py --gib 1
"""
from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import trio

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
import bench_store  # noqa: E402  (the store builder of the store benchmark)
import killloop  # noqa: E402
from fuzz_live import Server  # noqa: E402

RECOVERY_RE = re.compile(r"store recovery \((\w+)\): RecoveryReport\(abnormal=\w+, start_file='?(\w+)'?, "
                         r"process_offset=(\d+).*?dispatched=(\d+).*?start_position=(\d+)")


def build(root: Path, gib: float, file_size: int) -> int:
    s = bench_store._store(root, "ASYNC_FLUSH", file_size)
    target = int(gib * (1 << 30)) - (1 << 20)
    i = 0
    while s.get_max_phy_offset() < target:
        s.put_message(bench_store._msg(i))
        i += 1
    s.wait_dispatched(timeout_s=3600)
    s.shutdown()
    return i


def _recovery(server: Server) -> str:
    found = RECOVERY_RE.findall(server.new_log())
    if not found:
        return "?"
    kind, start_file, end, dispatched, start_pos = found[-1]
    return (f"{kind}, from file {start_file} + {int(start_pos):,} to offset {int(end):,}, "
            f"{int(dispatched):,} records re-dispatched")


async def _write_burst(broker: str, seconds: float) -> int:
    res = killloop.Result()
    async with trio.open_nursery() as nursery:
        for pid in range(4):
            nursery.start_soon(killloop.producer, broker, pid, 0, random.Random(pid), res, 32)
        await trio.sleep(seconds)
        nursery.cancel_scope.cancel()
    return len(res.acked)


KILL_S: list[float] = []  # how long each SIGKILL took to end the process (not part of recovery)


def kill_and_restart(server: Server) -> float:
    t0 = time.monotonic()
    server.kill()
    KILL_S.append(time.monotonic() - t0)
    server.start()
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=1.0, help="store size to build")
    ap.add_argument("--file-mib", type=int, default=1024, help="mappedFileSizeCommitLog in MiB")
    ap.add_argument("--dir", help="where to build the store (default: a temp dir)")
    a = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rmqd-restart-", dir=a.dir))
    file_size = a.file_mib << 20
    rows = []
    server = Server(base, conf=f"mappedFileSizeCommitLog={file_size}\nmappedFileSizeConsumeQueue=6000000\n",
                    log_level="INFO")
    try:
        t = time.monotonic()
        n = build(base / "store", a.gib, file_size)
        print(f"built {a.gib:g} GiB ({n:,} messages, {a.file_mib} MiB files) in {time.monotonic() - t:.0f} s",
              flush=True)
        t = time.monotonic()
        server.start()
        rows.append(("clean start (process start -> ready)", time.monotonic() - t, _recovery(server)))
        time.sleep(0.2)
        rows.append(("SIGKILL 0.2 s after ready (before this run's first checkpoint)", kill_and_restart(server),
                     _recovery(server)))
        time.sleep(3)
        rows.append(("SIGKILL 3 s after ready (after the first checkpoint)", kill_and_restart(server),
                     _recovery(server)))
        acked = trio.run(_write_burst, server.broker, 5.0)
        rows.append((f"SIGKILL right after 5 s of writes ({acked:,} msgs)", kill_and_restart(server),
                     _recovery(server)))
        acked = trio.run(_write_burst, server.broker, 5.0)
        time.sleep(5)
        rows.append((f"SIGKILL 5 s after 5 s of writes ({acked:,} msgs; idle, flushed)", kill_and_restart(server),
                     _recovery(server)))
        time.sleep(3)
        rows.append(("SIGKILL 3 s after the next start", kill_and_restart(server), _recovery(server)))
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    w = max(len(r[0]) for r in rows)
    print(f"{'moment of SIGKILL':<{w}} | {'kill -> ready':>13} | crash recovery")
    print("-" * w + "-+-" + "-" * 13 + "-+-" + "-" * 50)
    for name, secs, rec in rows:
        print(f"{name:<{w}} | {secs:>11.2f} s | {rec}")
    print("time for the killed process to exit (included above): " + ", ".join(f"{k:.2f} s" for k in KILL_S))
    return 0


if __name__ == "__main__":
    sys.exit(main())
