#!/usr/bin/env python3
"""Scale benchmarks: many topics, and restarts on many consume queues; rmqd and Apache RocketMQ
4.9.7 in the same run, with ratios. Numbers, not assertions (docs/scale.md has the tables).

    scripts/bench_scale.py topics  [--topics 10000] [--queues 8] [--how send,admin]
    scripts/bench_scale.py restart [--topics 10000] [--queues 8] [--per-queue 3] [--gib 1]
    (also: scripts/bench --scale topics|restart ...)

topics: each broker starts on an empty store; the Java 4.9.8 client creates --topics topics of
--queues queues each, by sending one message to each new topic (auto-created through TBW102)
and, on a fresh broker, by UPDATE_AND_CREATE_TOPIC (DefaultMQAdminExt, as `mqadmin
updateTopic`). Printed: seconds per 1,000 topics for the first and the last thousand, the
broker's RSS at the end, how long after the load its CPU falls below 5 % (sampled every
0.5 s), and how long until the name server lists every topic.

restart: one store is built with the store API (--topics x --queues consume queues, --per-queue
messages each, bodies sized for --gib GiB of commit log, RocketMQ's default file sizes, a
topics.json naming them) and each broker is started on it: after a clean stop and again after
a SIGKILL. Before each start the store's pages are dropped from the page cache
(posix_fadvise DONTNEED, the store's files only). Printed: seconds from spawning the broker
until the name server routes the last topic to it, its RSS then, the store's pages in the page
cache then (fincore), and the descriptors and mappings the broker holds.

Both runs raise this process's open-files limit (inherited by both brokers) when it may; the
kernel's vm.max_map_count is left as it is and printed: a broker mapping every consume-queue
file at start (Apache RocketMQ does) fails past it.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
_VENV = REPO / ".venv"
if ((_VENV / "bin" / "python").exists() and Path(sys.prefix).resolve() != _VENV.resolve()
        and not os.environ.get("RMQD_BENCH_REEXEC")):
    os.environ["RMQD_BENCH_REEXEC"] = "1"
    os.execv(str(_VENV / "bin" / "python"), [str(_VENV / "bin" / "python"), __file__, *sys.argv[1:]])
os.environ["RMQD_BENCH_REEXEC"] = "1"


def _load_bench():
    loader = importlib.machinery.SourceFileLoader("bench", str(HERE / "bench"))
    spec = importlib.util.spec_from_loader("bench", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = module
    loader.exec_module(module)
    return module


bench = _load_bench()
import trio  # noqa: E402

DRIVER = HERE / "bench_java" / "ScaleDriver.java"
PREFIX = "ScaleT"
NAN = float("nan")
GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206


# --------------------------------------------------------------------------------------------
# measuring a process


def cpu_of(pids: list[int]) -> float:
    return sum(bench.cpu_seconds(p) or 0.0 for p in pids)


def rss_mib(pids: list[int]) -> float:
    return sum(bench.rss_kb(p) or 0 for p in pids) / 1024


def seconds_to_idle(pids: list[int], since: float, limit: float = 120.0, threshold: float = 0.05) -> float:
    """Seconds from ``since`` (time.monotonic) until the processes' CPU stays below
    ``threshold`` cores over two 0.5 s samples (the start of those two)."""
    t0 = time.monotonic()
    quiet = 0
    last = cpu_of(pids)
    while time.monotonic() - t0 < limit:
        time.sleep(0.5)
        now = cpu_of(pids)
        quiet = quiet + 1 if (now - last) / 0.5 < threshold else 0
        last = now
        if quiet >= 2:
            return max(time.monotonic() - since - 1.0, 0.0)
    return float("inf")


def handles(pid: int) -> tuple[int, int]:
    """(open descriptors, memory mappings) of a process."""
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/maps") as f:
            maps = sum(1 for _ in f)
        return fds, maps
    except OSError:
        return -1, -1


def store_files(root: Path) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]


def drop_store_cache(root: Path) -> None:
    """The store's pages out of the page cache (its files only; dirty pages are written first)."""
    for path in store_files(root):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass
        finally:
            os.close(fd)


def cached_mib(root: Path) -> float | None:
    """The store's bytes in the page cache (util-linux fincore), None without fincore."""
    if shutil.which("fincore") is None:
        return None
    paths = store_files(root)
    total = 0
    for i in range(0, len(paths), 2000):
        r = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", *paths[i:i + 2000]],
                           capture_output=True, text=True)
        total += sum(int(x) for x in r.stdout.split() if x.isdigit())
    return total / (1 << 20)


def raise_open_files(want: int = 1 << 20) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for target in (want, 262144, hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, max(target, hard)))
            break
        except (ValueError, OSError):
            continue
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        maps = Path("/proc/sys/vm/max_map_count").read_text().strip()
    except OSError:
        maps = "?"
    return f"open files limit {soft}, vm.max_map_count {maps}"


# --------------------------------------------------------------------------------------------
# the brokers


@dataclass
class Broker:
    label: str
    namesrv: str
    pids: list[int]
    broker_pid: int
    broker_addr: str
    stop: Callable[[], None]
    kill: Callable[[], None]


def start_rmqd(store: Path) -> Broker:
    proc, namesrv, _ = bench.start_rmqd(store, bench.rmqd_cmd(), timeout=3600)
    route = trio.run(bench.route_of, namesrv, "TBW102")
    addr = next(iter(bench.master_addrs(route).values()))

    def stop() -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(300)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)

    def kill() -> None:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)

    return Broker("rmqd serve", namesrv, [proc.pid], proc.pid, addr, stop, kill)


def start_apache(workdir: Path, store: Path | None, ready_topic: str, t0: float,
                 timeout: float = 1800) -> tuple[Broker, float]:
    """Apache RocketMQ on ``store`` (a new one when None); (broker, seconds until the name
    server routes ``ready_topic`` to it)."""
    ar = bench._apache()
    problem = ar.apache_problem()
    if problem:
        raise bench.BenchError(problem)
    conf = {"mappedFileSizeCommitLog": str(1 << 30), "mappedFileSizeConsumeQueue": str(300_000 * 20),
            "flushDiskType": "ASYNC_FLUSH"}
    if store is not None:
        conf["storePathRootDir"] = str(store)
    broker = ar.ApacheRocketMQ(workdir, broker_conf=conf)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            broker.start(timeout=timeout)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            failure.append(e)

    starter = threading.Thread(target=run, daemon=True)
    starter.start()
    try:
        ready = wait_topic_routed(lambda: broker.namesrv_addr, ready_topic, t0, timeout,
                                  lambda: f"Apache RocketMQ did not start: {failure[0]}" if failure else None)
    except bench.BenchError as e:
        broker.kill()
        raise bench.BenchError(f"{str(e).splitlines()[0]}{_apache_cause(workdir)}\n--- Apache logs (tail) ---\n"
                               f"{broker._logs_tail()[-2000:]}") from None
    starter.join(timeout)
    if failure:
        broker.kill()
        raise bench.BenchError(f"Apache RocketMQ did not start: {failure[0]}{_apache_cause(workdir)}")
    return Broker(ar.LABEL, broker.namesrv_addr, [broker.broker.pid, broker.namesrv.pid], broker.broker.pid,
                  broker.broker_addr, broker.stop, broker.kill), ready


def _apache_cause(workdir: Path) -> str:
    """The first line of the broker's log that says why it stopped (descriptors, mappings)."""
    try:
        text = (workdir / "logs" / "broker.log").read_text(errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        if any(k in line for k in ("Too many open files", "Map failed", "OutOfMemoryError")):
            return f" ({line.strip()[:200]})"
    return ""


def wait_topic_routed(namesrv: Callable[[], str], topic: str, t0: float, timeout: float,
                      gave_up: Callable[[], str | None] = lambda: None) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        routed = False
        try:
            routed = trio.run(_routed, namesrv(), topic)
        except* (OSError, bench.BenchError, trio.BrokenResourceError):
            pass
        if routed:
            return time.perf_counter() - t0
        reason = gave_up()
        if reason:
            raise bench.BenchError(reason)
        time.sleep(0.05)
    raise bench.BenchError(f"{topic} not routed through {namesrv()} within {timeout:.0f} s")


async def _routed(namesrv: str, topic: str) -> bool:
    with trio.move_on_after(3):
        route = await bench.route_of(namesrv, topic)
        return route is not None and bool(bench.master_addrs(route))
    return False


def topics_listed(namesrv: str, prefix: str) -> int:
    async def ask() -> int:
        r = await bench.call(namesrv, GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}, timeout=60)
        if r.code != 0:
            return -1
        return sum(1 for t in json.loads(r.body)["topicList"] if t.startswith(prefix))
    return trio.run(ask)


# --------------------------------------------------------------------------------------------
# topics


def build_driver() -> str:
    ar = bench._apache()
    tools_cp = ar.TOOLS_CLASSPATH.read_text().strip()
    digest = hashlib.sha256(DRIVER.read_bytes() + tools_cp.encode()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"rmqd-scale-java-{digest}"
    if not (out / "ScaleDriver.class").is_file():
        tmp = Path(tempfile.mkdtemp(prefix="rmqd-scale-javac-"))
        r = subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", tools_cp, str(DRIVER)],
                           capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise bench.BenchError(f"javac {DRIVER.name} failed: {r.stderr.strip()[-500:]}")
        shutil.rmtree(out, ignore_errors=True)
        shutil.move(str(tmp), str(out))
    return f"{out}:{tools_cp}"


@dataclass
class TopicsRow:
    label: str
    how: str
    first_s: float = float("nan")
    last_s: float = float("nan")
    total_s: float = float("nan")
    failed: int = 0
    rss_mib: float = float("nan")
    idle_s: float = float("nan")
    listed_s: float = float("nan")
    listed: int = 0
    cpu_s: float = float("nan")
    error: str = ""


def run_topics_once(who: str, how: str, cp: str, workdir: Path, args) -> TopicsRow:
    workdir.mkdir(parents=True, exist_ok=True)
    row = TopicsRow(who, how)
    t0 = time.perf_counter()
    try:
        if who == "rmqd":
            b = start_rmqd(workdir / "store")
        else:
            b, _ = start_apache(workdir / "apache", None, "TBW102", t0)
    except bench.BenchError as e:
        row.error = str(e).splitlines()[0]
        return row
    row.label = b.label
    try:
        cmd = ["java", "-Xms256m", "-Xmx512m", f"-Duser.home={workdir}", "-cp", cp, "ScaleDriver", how, b.namesrv,
               PREFIX, str(args.topics), str(args.queues)]
        if how == "admin":
            cmd.append(b.broker_addr)
        cpu0 = cpu_of(b.pids)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=workdir, errors="replace")
        row.cpu_s = cpu_of(b.pids) - cpu0
        after = time.monotonic()
        result = next((json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")), None)
        if result is None:
            row.error = f"driver failed (exit {r.returncode}): {r.stderr.strip()[-300:]}"
            return row
        blocks = result["blocks"]
        row.first_s, row.last_s = blocks[0], blocks[-1]
        row.total_s, row.failed = result["seconds"], result["failed"]
        while time.monotonic() - after < 120:
            row.listed = topics_listed(b.namesrv, PREFIX)
            if row.listed >= args.topics:
                break
            time.sleep(0.2)
        row.listed_s = time.monotonic() - after if row.listed >= args.topics else float("inf")
        row.idle_s = seconds_to_idle(b.pids, after)
        row.rss_mib = rss_mib(b.pids)
    except (bench.BenchError, subprocess.TimeoutExpired, OSError) as e:
        row.error = str(e).splitlines()[0]
    finally:
        b.stop()
        b.kill()
    return row


def topics(args) -> int:
    limits = raise_open_files()
    cp = build_driver()
    base = Path(tempfile.mkdtemp(prefix="rmqd-bench-scale-"))
    rows: list[TopicsRow] = []
    load0 = os.getloadavg()
    try:
        for how in args.how.split(","):
            for who in args.brokers.split(","):
                print(f"bench_scale topics: {who}, {how} ...", file=sys.stderr)
                rows.append(run_topics_once(who, how, cp, base / f"{who}-{how}", args))
                shutil.rmtree(base / f"{who}-{how}", ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(topics_report(args, rows, limits, load0))
    return 0 if all(not r.error and not r.failed for r in rows) else 1


def _f(v: float, fmt: str) -> str:
    return "-" if v != v else ("inf" if v == float("inf") else format(v, fmt))


def _ratio(a: float, b: float) -> str:
    return "-" if a != a or b != b or not a or a == float("inf") or b == float("inf") else f"{b / a:.2f}x"


def header(what: str, limits: str, load0: tuple[float, ...]) -> list[str]:
    u = platform.uname()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load1 = os.getloadavg()
    return [f"{what}; date: {now}; machine: {u.system} {u.release} {u.machine}, {os.cpu_count()} cores; "
            f"load average before {' / '.join(f'{x:.1f}' for x in load0)}, after "
            f"{' / '.join(f'{x:.1f}' for x in load1)}; {limits}"]


def topics_report(args, rows: list[TopicsRow], limits: str, load0) -> str:
    out = header(f"topics: {args.topics} topics x {args.queues} queues, Java client 4.9.8, one topic at a time",
                 limits, load0)
    for r in rows:
        if r.error:
            out.append(f"{r.label} ({r.how}): {r.error}")
    out += ["", "| how | measure | Apache | rmqd | rmqd / Apache |", "| --- | --- | --- | --- | --- |"]
    for how in args.how.split(","):
        a = next((r for r in rows if r.how == how and r.label.startswith("Apache")), TopicsRow("Apache", how))
        m = next((r for r in rows if r.how == how and not r.label.startswith("Apache")), TopicsRow("rmqd", how))
        for name, get, fmt in [("s per 1,000 topics, first thousand", lambda r: r.first_s, ".2f"),
                               ("s per 1,000 topics, last thousand", lambda r: r.last_s, ".2f"),
                               ("last / first thousand", lambda r: r.last_s / r.first_s if r.first_s else float("nan"),
                                ".2f"),
                               ("total s", lambda r: r.total_s, ".1f"),
                               ("broker CPU s during the load", lambda r: r.cpu_s, ".1f"),
                               ("RSS at the end, MiB", lambda r: r.rss_mib, ".0f"),
                               ("s until CPU < 5 % after the load", lambda r: r.idle_s, ".1f"),
                               ("s until the name server lists every topic", lambda r: r.listed_s, ".1f"),
                               ("failed creations", lambda r: float(r.failed), ".0f")]:
            x, y = get(a), get(m)
            out.append(f"| {how} | {name} | {_f(x, fmt)} | {_f(y, fmt)} | {_ratio(x, y)} |")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# restart


def build_store(root: Path, topics_n: int, queues: int, per_queue: int, gib: float) -> dict:
    """The store both brokers restart on, written with rmqd's store API (RocketMQ's format)."""
    sys.path.insert(0, str(REPO))
    from rmqd.store.commitlog import MessageExtBrokerInner
    from rmqd.store.config import MessageStoreConfig
    from rmqd.store.message_store import DefaultMessageStore
    from rmqd.store.topic_config import TopicConfigManager
    from rmqd.wire.bodies import TopicConfig

    n = topics_n * queues * per_queue
    body_size = max(int(gib * (1 << 30) * 0.97) // max(n, 1) - 200, 16)
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root)))
    s.load()
    s.start()
    body = b"b" * body_size
    t0 = time.perf_counter()
    for k in range(per_queue):
        for t in range(topics_n):
            for q in range(queues):
                r = s.put_message(MessageExtBrokerInner(f"{PREFIX}{t}", q, body, {"TAGS": "t", "KEYS": f"k{t}-{q}-{k}"}))
                if not r.is_ok():
                    raise bench.BenchError(f"building the store: {r}")
    s.wait_dispatched(timeout_s=3600)
    s.shutdown()
    m = TopicConfigManager(root)
    m.load()
    for t in range(topics_n):
        m.topic_config_table[f"{PREFIX}{t}"] = TopicConfig(f"{PREFIX}{t}", queues, queues, 6)
    m.persist()
    return {"messages": n, "body": body_size, "seconds": time.perf_counter() - t0,
            "commitlog_mib": sum(os.path.getsize(p) for p in store_files(root / "commitlog")) / (1 << 20)}


@dataclass
class RestartRow:
    label: str
    kind: str
    ready_s: float = float("nan")
    rss_mib: float = float("nan")
    cached_mib: float | None = None
    fds: int = -1
    maps: int = -1
    error: str = ""


def restart_once(who: str, store: Path, workdir: Path, kind: str, ready_topic: str) -> RestartRow:
    """Start on ``store`` (after a clean stop or, with kind 'kill', after a SIGKILL of a
    broker that had become ready on it), measure at ready, stop cleanly."""
    row = RestartRow(who, kind)
    try:
        if kind == "kill":
            b, _ = start_on(who, store, workdir, ready_topic)
            b.kill()
        drop_store_cache(store)
        b, ready = start_on(who, store, workdir, ready_topic)
    except bench.BenchError as e:
        row.error = str(e).splitlines()[0]
        return row
    row.label = b.label
    try:
        row.ready_s = ready
        row.rss_mib = rss_mib(b.pids)
        row.cached_mib = cached_mib(store)
        row.fds, row.maps = handles(b.broker_pid)
    finally:
        b.stop()
        b.kill()
    return row


def start_on(who: str, store: Path, workdir: Path, ready_topic: str) -> tuple[Broker, float]:
    t0 = time.perf_counter()
    if who == "rmqd":
        b = start_rmqd(store)
        return b, wait_topic_routed(lambda: b.namesrv, ready_topic, t0, 3600)
    return start_apache(workdir, store, ready_topic, t0)


def restart(args) -> int:
    limits = raise_open_files()
    base = Path(args.workdir or tempfile.mkdtemp(prefix="rmqd-bench-restart-"))
    store = base / "store"
    load0 = os.getloadavg()
    rows: list[RestartRow] = []
    try:
        if not (store / "config" / "topics.json").is_file():
            print(f"bench_scale restart: building {args.topics} x {args.queues} queues, {args.per_queue} messages "
                  f"each, {args.gib} GiB ...", file=sys.stderr)
            info = build_store(store, args.topics, args.queues, args.per_queue, args.gib)
            print(f"bench_scale restart: built {info}", file=sys.stderr)
        ready_topic = f"{PREFIX}{args.topics - 1}"
        for kind in ("clean", "kill"):
            for who in args.brokers.split(","):
                print(f"bench_scale restart: {who}, {kind} ...", file=sys.stderr)
                rows.append(restart_once(who, store, base / f"{who}-work", kind, ready_topic))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(restart_report(args, rows, limits, load0))
    return 0 if all(not r.error for r in rows) else 1


def restart_report(args, rows: list[RestartRow], limits: str, load0) -> str:
    out = header(f"restart: {args.topics} topics x {args.queues} queues = {args.topics * args.queues} consume "
                 f"queues, {args.per_queue} messages each, {args.gib} GiB commit log (1 GiB files, 300,000-unit "
                 f"consume-queue files)", limits, load0)
    for r in rows:
        if r.error:
            out.append(f"{r.label} ({r.kind}): {r.error}")
    out += ["", "| restart | measure | Apache | rmqd | rmqd / Apache |", "| --- | --- | --- | --- | --- |"]
    for kind in ("clean", "kill"):
        a = next((r for r in rows if r.kind == kind and r.label != "rmqd" and not r.label.startswith("rmqd")),
                 RestartRow("Apache", kind))
        m = next((r for r in rows if r.kind == kind and r.label.startswith("rmqd")), RestartRow("rmqd", kind))
        for name, get, fmt in [("s from spawn to the last topic routed", lambda r: r.ready_s, ".2f"),
                               ("broker RSS at ready, MiB (Apache: + name server)", lambda r: r.rss_mib, ".0f"),
                               ("store in the page cache at ready, MiB",
                                lambda r: float("nan") if r.cached_mib is None else r.cached_mib, ".0f"),
                               ("broker descriptors at ready", lambda r: float(r.fds) if r.fds >= 0 else NAN, ".0f"),
                               ("broker memory mappings at ready", lambda r: float(r.maps) if r.maps >= 0 else NAN,
                                ".0f")]:
            x, y = get(a), get(m)
            out.append(f"| {'after a clean stop' if kind == 'clean' else 'after SIGKILL'} | {name} | "
                       f"{_f(x, fmt)} | {_f(y, fmt)} | {_ratio(x, y)} |")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("topics", "restart"):
        s = sub.add_parser(name)
        s.add_argument("--topics", type=int, default=10_000)
        s.add_argument("--queues", type=int, default=8)
        s.add_argument("--brokers", default="apache,rmqd", help="which brokers, in this order")
        if name == "topics":
            s.add_argument("--how", default="send,admin", help="send (auto-create through TBW102), admin, or both")
            s.add_argument("--timeout", type=float, default=7200.0, help="bound on one driver run, s")
        else:
            s.add_argument("--per-queue", type=int, default=3, help="messages in each consume queue")
            s.add_argument("--gib", type=float, default=1.0, help="commit log size to reach")
            s.add_argument("--workdir", help="keep the built store here (reused when it is there)")
            s.add_argument("--keep", action="store_true", help="do not delete the work directory")
    args = p.parse_args()
    try:
        return topics(args) if args.mode == "topics" else restart(args)
    except bench.BenchError as e:
        print(f"bench_scale: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
