"""`scripts/bench --grpc`: RocketMQ 5.x gRPC clients against Apache RocketMQ 5.3.3's proxy and rmqd.

The load (scripts/bench_java/GrpcBenchmark.java, the 5.x Java client rocketmq-client-java 5.0.8):
THREADS producers sending 1 KiB bodies synchronously for SECONDS after a warm-up, then a
SimpleConsumer (THREADS threads, batches of 32, an ack per message) on the backlog. One broker at
a time, on the same machine as the client; per side also the time from start to the first gRPC
answer and the idle and peak resident set size. Rounds alternate the brokers' order; each broker
runs on a synced page cache and a quiet machine, and its store goes when its run ends. The table
gives medians and rmqd / Apache ratios, with the date, the machine and the load average.

The brokers are started as a user would: Apache with compat_tests/apache5_rocketmq.py (the name
server and the proxy in local mode, -Xmx512m), rmqd as `rmqd serve` with grpcServerPort; the
benchmark topic is created on each with rocketmq-tools 5.3.3 (compat_tests/grpc5_harness.py).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "compat_tests"))
# both brokers run as plain processes (their CPU is read from /proc/<pid>); set before the harness
# modules are imported, since compat_runner reads it once at import
os.environ.setdefault("RMQD_COMPAT_RUNNER", "process")

BENCH_JAVA = REPO / "scripts" / "bench_java" / "GrpcBenchmark.java"
TOPIC = "GrpcBenchmarkTopic"
GROUP = "GrpcBenchmarkGroup"


class BenchError(Exception):
    pass


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class Side:
    label: str
    pids: list[int] = field(default_factory=list)
    ready_s: float = float("nan")
    rss_idle_kb: int = 0
    rss_peak_kb: int = 0
    broker_cpu_s: float | None = None
    producer: dict = field(default_factory=dict)
    consumer: dict = field(default_factory=dict)
    load_before: float | None = None  # 1-minute load average when this broker's run began
    busy_before: float | None = None  # cores the machine kept busy in the second before it began


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy (/proc/stat: all but idle and iowait)."""
    try:
        v = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
        return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def settle(max_wait: float = 30.0, quiet_cores: float = 0.25) -> float | None:
    """Before a broker's run: what the previous run left dirty in the page cache written out, then
    up to ``max_wait`` s for the machine to go quiet (under ``quiet_cores`` busy over a second), so
    that neither broker runs on the other's leftovers (the 1-minute load average lags far behind).
    Returns the busy cores of the last second."""
    os.sync()
    deadline = time.monotonic() + max_wait
    while True:
        b0 = _busy_seconds()
        time.sleep(1.0)
        b1 = _busy_seconds()
        busy = None if b0 is None or b1 is None else b1 - b0
        if busy is None or busy <= quiet_cores or time.monotonic() >= deadline:
            return busy


def build(classpath: str) -> str:
    """GrpcBenchmark.class compiled against the 5.x Java client (cached by source hash)."""
    import hashlib

    digest = hashlib.sha256(BENCH_JAVA.read_bytes() + classpath.encode()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"rmqd-bench-grpc-{digest}"
    if not (out / "GrpcBenchmark.class").is_file():
        tmp = Path(tempfile.mkdtemp(prefix="rmqd-bench-grpc-javac-"))
        r = subprocess.run(["javac", "-nowarn", "-d", str(tmp), "-cp", classpath, str(BENCH_JAVA)],
                           capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise BenchError(f"javac {BENCH_JAVA.name} failed: {r.stderr.strip()[-500:]}")
        shutil.rmtree(out, ignore_errors=True)
        shutil.move(str(tmp), str(out))
    return f"{out}:{classpath}"


def run_java(cp: str, workdir: Path, *args: str, timeout: float) -> dict:
    cmd = ["java", "-Xms512m", "-Xmx512m", f"-Duser.home={workdir}", "-cp", cp, "GrpcBenchmark", *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace", cwd=workdir)
    except subprocess.TimeoutExpired:
        raise BenchError(f"GrpcBenchmark {args[0]} did not finish within {timeout:.0f} s") from None
    result = None
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
    if r.returncode != 0 or result is None:
        raise BenchError(f"GrpcBenchmark {args[0]} failed (exit {r.returncode}): {r.stderr.strip()[-800:]}")
    return result


def wait_grpc(port: int, t0: float, timeout: float = 180.0) -> float:
    """Seconds from t0 until the gRPC port answers a QueryRoute (any RocketMQ status)."""
    import socket

    sys.path.insert(0, str(REPO / "scripts"))
    import trio
    import fuzz_grpc

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            status, _ = trio.run(fuzz_grpc.grpc_call, port, "QueryRoute", b"\x0a\x08\x12\x06TBW102", 5.0)
            if status == "0":
                return time.perf_counter() - t0
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.05)
    raise BenchError(f"no gRPC answer on port {port} within {timeout:.0f} s")


def measure(side: Side, endpoints: str, namesrv: str, cp: str, workdir: Path, args: Any) -> None:
    from grpc5_harness import topic_admin

    topic_admin(namesrv, [f"topic:{TOPIC}:NORMAL:8"], workdir)
    time.sleep(1.0)
    side.rss_idle_kb = sum(_rss_kb(p) for p in side.pids)
    run_java(cp, workdir, "prime", endpoints, TOPIC, GROUP, timeout=90)
    peak = [side.rss_idle_kb]
    import threading

    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak.append(sum(_rss_kb(p) for p in side.pids))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu0 = [_cpu_s(p) for p in side.pids]
    try:
        side.producer = run_java(cp, workdir, "producer", endpoints, TOPIC, str(args.threads), str(args.size),
                                 str(args.seconds), str(args.compare_warmup),
                                 timeout=args.seconds + args.compare_warmup + 120)
        cpu1 = [_cpu_s(p) for p in side.pids]
        if None not in cpu0 and None not in cpu1:
            side.broker_cpu_s = sum(cpu1) - sum(cpu0)  # type: ignore[arg-type]
        side.consumer = run_java(cp, workdir, "consumer", endpoints, TOPIC, GROUP, str(args.threads),
                                 str(side.producer["sent"]), str(args.consume_timeout),
                                 timeout=args.consume_timeout + 90)
    finally:
        stop.set()
        sampler.join(5)
        side.rss_peak_kb = max(peak)


def run_apache(cp: str, base: Path, args: Any) -> Side:
    from apache5_rocketmq import ApacheRocketMQ5

    busy = settle()
    side = Side("Apache RocketMQ 5.3.3 proxy (local mode)", load_before=os.getloadavg()[0], busy_before=busy)
    broker = ApacheRocketMQ5(base / "apache5", broker_conf={
        "mappedFileSizeCommitLog": str(1 << 30), "mappedFileSizeConsumeQueue": str(300_000 * 20),
        "flushDiskType": "ASYNC_FLUSH"})
    t0 = time.perf_counter()
    try:
        broker.start()
        side.ready_s = wait_grpc(broker.grpc_port, t0)
        side.pids = [broker.broker.pid, broker.namesrv.pid]
        measure(side, broker.grpc_addr, broker.namesrv_addr, cp, base, args)
    finally:
        broker.stop()
    return side


def run_rmqd(cp: str, base: Path, args: Any) -> Side:
    from compat_harness import RmqdServer, free_port

    busy = settle()
    side = Side("rmqd serve", load_before=os.getloadavg()[0], busy_before=busy)
    grpc_port = free_port()
    conf = base / "rmqd-broker.conf"
    conf.write_text(f"grpcServerPort={grpc_port}\n")
    server = RmqdServer(store=base / "rmqd-store", log_path=base / "rmqd.log", conf=conf)
    t0 = time.perf_counter()
    try:
        server.start()
        side.ready_s = wait_grpc(grpc_port, t0)
        assert server.proc is not None
        side.pids = [server.proc.pid]
        measure(side, f"127.0.0.1:{grpc_port}", server.namesrv, cp, base, args)
    finally:
        server.stop()
    return side


def _median(vals: list[float | None]) -> float | None:
    known = [v for v in vals if v is not None and v == v]
    return statistics.median(known) if known else None


def _ratio(apache: float | None, rmqd: float | None) -> float | None:
    return rmqd / apache if apache and rmqd is not None and apache == apache and rmqd == rmqd else None


def report(args: Any, rounds: list[tuple[Side, Side]]) -> str:
    a0, r0 = rounds[0]
    uname = platform.uname()

    def f(v: float | None, fmt: str) -> str:
        return "-" if v is None or v != v else format(v, fmt)

    def cpu(s: Side) -> float | None:
        if s.broker_cpu_s is None:
            return None
        return s.broker_cpu_s / (args.seconds + args.compare_warmup)

    measures: list[tuple[str, Callable[[Side], float | None], str]] = [
        ("send TPS (higher is better)", lambda s: s.producer.get("tps"), ",.0f"),
        ("receive+ack TPS (higher is better)", lambda s: s.consumer.get("tps"), ",.0f"),
        ("send RT avg, ms", lambda s: s.producer.get("avgMs"), ".3f"),
        ("send RT p99, ms", lambda s: s.producer.get("p99Ms"), ".3f"),
        ("broker RSS idle, MiB", lambda s: s.rss_idle_kb / 1024, ".0f"),
        ("broker RSS peak under load, MiB", lambda s: s.rss_peak_kb / 1024, ".0f"),
        ("start to first gRPC answer, s", lambda s: s.ready_s, ".2f"),
        ("broker CPU while sending, cores", cpu, ".2f"),
    ]
    body = []
    for name, get, fmt in measures:
        pairs = [(get(a), get(r)) for a, r in rounds]
        ratio = _median([_ratio(x, y) for x, y in pairs])
        body.append(f"| {name} | {f(_median([x for x, _ in pairs]), fmt)} | {f(_median([y for _, y in pairs]), fmt)} "
                    f"| {'-' if ratio is None else f'{ratio:.2f}x'} |")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    head = [
        f"date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; machine: "
        f"{uname.system} {uname.release} {uname.machine}, {os.cpu_count()} cores; client and broker share them; "
        f"load average at the end {load}",
        f"load: rocketmq-client-java 5.0.8 over gRPC (h2c), {args.threads} producers with synchronous sends of "
        f"{args.size} B bodies ({args.compare_warmup:.0f} s warm-up + {args.seconds:.0f} s measured), then a "
        f"SimpleConsumer ({args.threads} threads, batches of 32, an ack each) on the backlog; one broker at a time"
        + ("" if len(rounds) == 1 else f"; {len(rounds)} rounds, order alternating (medians)"),
        f"sends: Apache {sum(a.producer.get('sent', 0) for a, _ in rounds)} ok / "
        f"{sum(a.producer.get('sendFailed', 0) for a, _ in rounds)} failed; rmqd "
        f"{sum(r.producer.get('sent', 0) for _, r in rounds)} ok / {sum(r.producer.get('sendFailed', 0) for _, r in rounds)}"
        f" failed; received: Apache {sum(a.consumer.get('received', 0) for a, _ in rounds)}, rmqd "
        f"{sum(r.consumer.get('received', 0) for _, r in rounds)}",
        "", f"| measure | {a0.label} | {r0.label} | rmqd / Apache |", "| --- | --- | --- | --- |",
    ]
    return "\n".join(head + body + _rounds(rounds, f))


def _rounds(rounds: list[tuple[Side, Side]], f: Callable[[float | None, str], str]) -> list[str]:
    """Each round's own figures and, with both orders among them, each broker's median where it ran
    first and where it ran second: the broker run second starts on a box still busy from the
    first, so like positions are the fair comparison (an odd number of rounds is not balanced)."""
    if len(rounds) < 2:
        return []
    tps = (("send TPS", lambda s: s.producer.get("tps")), ("receive+ack TPS", lambda s: s.consumer.get("tps")))
    out = [""]
    for i, (a, r) in enumerate(rounds):
        figures = "; ".join(f"{name} {f(get(a), ',.0f')} / {f(get(r), ',.0f')} = {f(_ratio(get(a), get(r)), '.2f')}x"
                            for name, get in tps)
        out.append(f"round {i + 1} ({'Apache' if i % 2 == 0 else 'rmqd'} first): load average "
                   f"{f(a.load_before, '.2f')} / {f(r.load_before, '.2f')}, busy cores {f(a.busy_before, '.2f')} / "
                   f"{f(r.busy_before, '.2f')} before each; {figures}")
    a_first, r_first = rounds[0::2], rounds[1::2]
    out.append("like positions (each broker's median where it ran first, and where it ran second"
               + (f"; {len(a_first)} Apache-first and {len(r_first)} rmqd-first rounds):"
                  if len(a_first) != len(r_first) else "):"))
    for name, get in tps:
        parts = []
        for pos, a_rounds, r_rounds in (("first", a_first, r_first), ("second", r_first, a_first)):
            x = _median([get(a) for a, _ in a_rounds])
            y = _median([get(r) for _, r in r_rounds])
            parts.append(f"{pos} {f(x, ',.0f')} / {f(y, ',.0f')} = {f(_ratio(x, y), '.2f')}x")
        out.append(f"- {name}: " + "; ".join(parts))
    return out


def compare(args: Any) -> int:
    from apache5_rocketmq import apache5_problem
    from grpc5_harness import CLIENTS, TARGET

    problem = apache5_problem() or CLIENTS["java"].problem()
    if problem is None and shutil.which("javac") is None:
        problem = "javac is not installed (a Java 17 JDK is needed)"
    if problem:
        print(f"bench --grpc: {problem}", file=sys.stderr)
        return 2
    rounds: list[tuple[Side, Side]] = []
    base = Path(tempfile.mkdtemp(prefix="rmqd-bench-grpc-"))
    try:
        cp = build((TARGET / "classpath-client.txt").read_text().strip())
        for i in range(args.rounds):
            order = ("apache", "rmqd") if i % 2 == 0 else ("rmqd", "apache")
            run_dir = base / f"round{i + 1}"
            run_dir.mkdir()
            got: dict[str, Side] = {}
            for who in order:
                print(f"bench --grpc: {'Apache RocketMQ 5.3.3' if who == 'apache' else 'rmqd'} (round {i + 1})",
                      file=sys.stderr, flush=True)
                side_dir = run_dir / who  # removed as soon as its run ends: no store outlives its broker
                side_dir.mkdir()
                got[who] = run_apache(cp, side_dir, args) if who == "apache" else run_rmqd(cp, side_dir, args)
                shutil.rmtree(side_dir, ignore_errors=True)
            rounds.append((got["apache"], got["rmqd"]))
            shutil.rmtree(run_dir, ignore_errors=True)
    except BenchError as e:
        print(f"bench --grpc: {e}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(report(args, rounds))
    clean = all(s.producer.get("sent") and not s.producer.get("sendFailed") and s.consumer.get("complete")
                for pair in rounds for s in pair)
    return 0 if clean else 1


__all__ = ["compare", "report"]
