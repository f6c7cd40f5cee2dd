#!/usr/bin/env python3
"""Broker CPU per message, measured so that a busy box does not change the answer much.

    scripts/bench_cpu.py                       # rmqd serve: CPU us per send and per consumed message
    scripts/bench_cpu.py --header rocketmq     # ROCKETMQ binary headers (Apache's benchmark Producer)
    scripts/bench_cpu.py --inproc --profile /tmp/send.prof   # the broker in this process, under cProfile
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
        .venv/bin/python scripts/bench_cpu.py --inproc --sends 2000 --rounds 1   # instruction counts

Wall-clock rates on a shared 2-core box say more about the neighbours than about the broker. What
this script reports instead is the broker process's own CPU time (utime + stime from
/proc/<pid>/stat, all its threads) for a fixed number of requests, divided by that number:
CPU microseconds per 1 KiB synchronous send, and per message consumed by PULL_MESSAGE.

The load is shaped like the 4.9.8 Java client's: SEND_MESSAGE_V2 frames with the extFields it
writes (a..n in its HashMap order, properties UNIQ_KEY + WAIT), 1 KiB bodies, the queues of
BenchmarkTest in turn (1,024 write queues on rmqd and on Apache), `--per-read` frames written
together before their answers are awaited (the Java benchmark's 4 sender threads share one
connection, so a read holds ~3 requests). Headers are JSON (the client's default) or ROCKETMQ
binary (`-Drocketmq.serialize.type=ROCKETMQ`, Apache's benchmark Producer). Consumption pulls
every queue from offset 0 with 32 messages per pull, the subscription in the request. The client
writes prepared frames and only counts answers, so it adds little to the run; in --inproc mode it
runs in the broker's own process and its small share is included (use it for where, not how much).

Against any broker: `--namesrv HOST:PORT --pid PID` drives a running broker (Apache RocketMQ
included) through its name server and reads PID's CPU. `scripts/bench --compare` prints the same
per-message figures for both brokers under the real Java client.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
_VENV = _REPO / ".venv"
if ((_VENV / "bin" / "python").exists() and Path(sys.prefix).resolve() != _VENV.resolve()
        and not os.environ.get("RMQD_BENCH_REEXEC")):
    os.environ["RMQD_BENCH_REEXEC"] = "1"
    os.execv(str(_VENV / "bin" / "python"), [str(_VENV / "bin" / "python"), __file__, *sys.argv[1:]])

SEND_MESSAGE_V2, PULL_MESSAGE, GET_ROUTEINFO_BY_TOPIC = 310, 11, 105
TOPIC = "BenchmarkTest"
_LEN = struct.Struct(">I")
_LEN2 = struct.Struct(">II")
_CLK = os.sysconf("SC_CLK_TCK")


# --- frames as the 4.9.8 Java client writes them ----------------------------------------------------

def _json_frame(code: int, opaque: int, ext: dict[str, str], body: bytes) -> bytes:
    header = json.dumps({"code": code, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": opaque,
                         "serializeTypeCurrentRPC": "JSON", "version": 409},
                        separators=(",", ":"), ensure_ascii=False).encode()
    return _LEN2.pack(4 + len(header) + len(body), len(header)) + header + body


def _binary_frame(code: int, opaque: int, ext: dict[str, str], body: bytes) -> bytes:
    fields = b"".join(struct.pack(">h", len(k)) + k.encode() + struct.pack(">i", len(v.encode())) + v.encode()
                      for k, v in ext.items())
    header = struct.pack(">hbhiii", code, 0, 409, opaque, 0, 0) + struct.pack(">i", len(fields)) + fields
    return _LEN2.pack(4 + len(header) + len(body), (1 << 24) | len(header)) + header + body


def frame(kind: str, code: int, opaque: int, ext: dict[str, str], body: bytes = b"") -> bytes:
    return (_json_frame if kind == "json" else _binary_frame)(code, opaque, ext, body)


def send_frames(kind: str, n: int, queues: int, size: int, broker_name: str, first_opaque: int) -> list[bytes]:
    body = (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789" * (size // 62 + 1))[:size]
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        uniq = f"7F000001{os.getpid() & 0xFFFF:04X}{now & 0xFFFFFFFF:08X}{i & 0xFFFFFFFF:08X}"
        ext = {"a": "benchmark_producer", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % queues), "f": "0",
               "g": str(now + i // 10), "h": "0", "i": f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true", "j": "0",
               "k": "false", "m": "false", "n": broker_name}
        out.append(frame(kind, SEND_MESSAGE_V2, first_opaque + i, ext, body))
    return out


def pull_frame(kind: str, opaque: int, queue_id: int, offset: int, broker_name: str) -> bytes:
    ext = {"queueId": str(queue_id), "maxMsgNums": "32", "sysFlag": "4", "suspendTimeoutMillis": "0",
           "commitOffset": "0", "bname": broker_name, "topic": TOPIC, "queueOffset": str(offset),
           "expressionType": "TAG", "subVersion": "0", "consumerGroup": "benchmark_consumer",
           "subscription": "*"}
    return frame(kind, PULL_MESSAGE, opaque, ext)


# --- a blocking client (no event loop: its own cost stays small and steady) -----------------------------

class Client:
    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def answers(self, n: int) -> list[tuple[int, dict, bytes]]:
        """The next n frames: (code, header, body); headers are decoded (JSON or binary)."""
        out = []
        while len(out) < n:
            while len(self.buf) < 4 or len(self.buf) < 4 + _LEN.unpack_from(self.buf)[0]:
                data = self.sock.recv(1 << 20)
                if not data:
                    raise SystemExit("bench_cpu: the broker closed the connection")
                self.buf += data
            total = _LEN.unpack_from(self.buf)[0]
            f = bytes(self.buf[4:4 + total])
            del self.buf[:4 + total]
            word = _LEN.unpack_from(f)[0]
            hl = word & 0xFFFFFF
            out.append((*_header(f[4:4 + hl], word >> 24), f[4 + hl:]))
        return out

    def call(self, data: bytes) -> tuple[int, dict, bytes]:
        self.sock.sendall(data)
        return self.answers(1)[0]


def _header(h: bytes, kind: int) -> tuple[int, dict]:
    if kind == 0:
        d = json.loads(h)
        return d["code"], d.get("extFields") or {}
    code = struct.unpack_from(">h", h)[0]
    rl = struct.unpack_from(">i", h, 13)[0]
    p = 17 + rl
    el = struct.unpack_from(">i", h, p)[0]
    p += 4
    end = p + el
    ext = {}
    while p < end:
        kl = struct.unpack_from(">h", h, p)[0]
        k = h[p + 2:p + 2 + kl].decode()
        p += 2 + kl
        vl = struct.unpack_from(">i", h, p)[0]
        ext[k] = h[p + 4:p + 4 + vl].decode()
        p += 4 + vl
    return code, ext


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK


def route(namesrv: str) -> tuple[str, str, int]:
    """(broker address, broker name, write queues) of BenchmarkTest."""
    c = Client(namesrv)
    code, _, body = c.call(_json_frame(GET_ROUTEINFO_BY_TOPIC, 1, {"topic": TOPIC}, b""))
    c.sock.close()
    if code != 0:
        raise SystemExit(f"bench_cpu: no route for {TOPIC} (code {code})")
    text = re.sub(r"([{,])\s*(-?\d+)\s*:", r'\1"\2":', body.decode())
    r = json.loads(text)
    bd = r["brokerDatas"][0]
    qd = next(q for q in r["queueDatas"] if q["brokerName"] == bd["brokerName"])
    return bd["brokerAddrs"]["0"], bd["brokerName"], int(qd["writeQueueNums"])


# --- one measurement ---------------------------------------------------------------------------------

def measure(addr: str, broker_name: str, queues: int, args, cpu, label: str) -> dict:
    """Warm-up sends, then measured sends, then a measured drain of every queue: CPU us per
    send and per consumed message from cpu() before and after each phase."""
    c = Client(addr)
    opaque = 1_000_000
    per = args.per_read
    frames = send_frames(args.header, args.warmup + args.sends, queues, args.size, broker_name, opaque)
    opaque += len(frames)

    def run_sends(chunk: list[bytes]) -> int:
        bad = 0
        for i in range(0, len(chunk), per):
            part = chunk[i:i + per]
            c.sock.sendall(b"".join(part))
            for code, ext, _ in c.answers(len(part)):
                if code != 0:
                    bad += 1
                    if bad == 1:
                        print(f"bench_cpu: a send failed: code {code} {ext}", file=sys.stderr)
        return bad

    run_sends(frames[:args.warmup])
    time.sleep(0.3)  # let the warm-up's dispatch and flush settle
    t0, c0 = time.perf_counter(), cpu()
    bad = run_sends(frames[args.warmup:])
    time.sleep(0.3)  # the flush of what was sent is part of a send's cost
    c1, t1 = cpu(), time.perf_counter()
    send_cpu = c1 - c0
    # consume: every queue from 0 to its end, 32 per pull
    consumed = 0
    pulls = 0
    c2 = cpu()
    for q in range(queues):
        offset = 0
        while True:
            opaque += 1
            pulls += 1
            code, ext, body = c.call(pull_frame(args.header, opaque, q, offset, broker_name))
            if code != 0:
                break
            pos = 0
            while pos + 4 <= len(body):
                size = _LEN.unpack_from(body, pos)[0]
                if size <= 0:
                    break
                pos += size
                consumed += 1
            nxt = int(ext["nextBeginOffset"])
            if nxt <= offset:
                break
            offset = nxt
    c3 = cpu()
    c.sock.close()
    return {"label": label, "header": args.header, "sends": args.sends, "failed": bad,
            "send_cost": send_cpu / args.sends, "send_wall_s": t1 - t0,
            "consumed": consumed, "pulls": pulls,
            "consume_cost": (c3 - c2) / consumed if consumed else float("nan")}


def _bench():
    """scripts/bench as a module (its rmqd launcher and port picker)."""
    from importlib.machinery import SourceFileLoader

    return SourceFileLoader("rmqd_bench", str(_REPO / "scripts" / "bench")).load_module()


def start_rmqd(store: Path, prefix: list[str] | None = None) -> tuple[subprocess.Popen, str]:
    """`rmqd serve` on fresh ports, as scripts/bench starts it (under ``prefix``, e.g. valgrind)."""
    bench = _bench()
    cmd = bench.rmqd_cmd() if prefix is None else prefix + [sys.executable, "-m", "rmqd"]
    proc, namesrv, _ = bench.start_rmqd(store, cmd, timeout=600)
    return proc, namesrv


class Callgrind:
    """Instructions executed by a process run under ``valgrind --tool=callgrind`` (user space,
    all threads): each call zeroes the counters or dumps them, alternately; the value returned
    is the running total, so that differences between calls are the instructions in between."""

    def __init__(self, pid: int, out_dir: Path) -> None:
        self.pid = pid
        self.out_dir = out_dir
        self.calls = 0
        self.total = 0

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2:
            subprocess.run(["callgrind_control", "-z", str(self.pid)], check=True, capture_output=True)
            return float(self.total)
        before = set(self.out_dir.glob("cg.*"))
        subprocess.run(["callgrind_control", "-d", str(self.pid)], check=True, capture_output=True)
        for _ in range(600):
            new = set(self.out_dir.glob("cg.*")) - before
            if new:
                break
            time.sleep(0.1)
        text = max(new, key=lambda f: f.stat().st_mtime).read_text(errors="replace")
        m = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
        self.total += int(m.group(1)) if m else 0
        return float(self.total)


def run_subprocess(args) -> list[dict]:
    results = []
    for r in range(args.rounds):
        tmp = Path(tempfile.mkdtemp(prefix="rmqd-bench-cpu-"))
        prefix = None
        if args.callgrind:
            prefix = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/cg.%p", "--dump-instr=no"]
        proc, namesrv = start_rmqd(tmp / "store", prefix)
        try:
            for _ in range(100):
                try:
                    addr, name, queues = route(namesrv)
                    break
                except (SystemExit, OSError, KeyError, StopIteration):
                    time.sleep(0.1)
            else:
                raise SystemExit("bench_cpu: rmqd never routed BenchmarkTest")
            queues = args.queues or queues
            cpu = Callgrind(proc.pid, tmp) if args.callgrind else (lambda: cpu_seconds(proc.pid))
            results.append(measure(addr, name, queues, args, cpu, f"rmqd round {r + 1}"))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
            shutil.rmtree(tmp, ignore_errors=True)
    return results


def _broker_in_process():
    """(store dir, port, settings, BrokerRole) of a broker to run in this process (ASYNC_FLUSH,
    no name server)."""
    from rmqd.broker.broker import BrokerRole
    from rmqd.broker.config import BrokerSettings

    tmp = Path(tempfile.mkdtemp(prefix="rmqd-bench-cpu-"))
    settings = BrokerSettings()
    port = _bench().free_port(pair=True)
    settings.apply({"brokerIP1": "127.0.0.1", "listenPort": str(port), "storePathRootDir": str(tmp),
                    "flushDiskType": "ASYNC_FLUSH"}, source="bench")
    return tmp, port, settings, BrokerRole(settings, host="127.0.0.1")


def run_inproc(args) -> list[dict]:
    """The broker in this process on a trio thread; the client here, in the main thread. cProfile
    (--profile) covers the broker's thread for the measured sends only."""
    import threading

    import trio

    results = []
    for r in range(args.rounds):
        tmp, port, settings, role = _broker_in_process()
        ready = threading.Event()
        bound: dict = {}
        token_box: list = []

        async def main() -> None:
            token_box.append(trio.lowlevel.current_trio_token())
            async with trio.open_nursery() as n:
                bound.update(await n.start(role.run))
                ready.set()

        th = threading.Thread(target=trio.run, args=(main,), daemon=True)
        th.start()
        if not ready.wait(60):
            raise SystemExit("bench_cpu: the in-process broker did not start")
        addr = f"127.0.0.1:{bound['broker'][1]}"
        tc = role.topic_config_manager.select_topic_config(TOPIC)
        queues = args.queues or tc.writeQueueNums
        prof = None
        if args.profile:
            import cProfile
            prof = cProfile.Profile()

        def cpu() -> float:
            return time.process_time()

        if prof is not None:
            # profile the broker's thread: enable it there, between the warm-up and the pulls
            def enable() -> None:
                prof.enable()

            def disable() -> None:
                prof.disable()

            class Hooked:
                def __init__(self) -> None:
                    self.calls = 0

                def __call__(self) -> float:
                    self.calls += 1
                    if self.calls == 1:
                        trio.from_thread.run_sync(enable, trio_token=token_box[0])
                    elif self.calls == 2:
                        trio.from_thread.run_sync(disable, trio_token=token_box[0])
                    return time.process_time()
            cpu_fn = Hooked()
        else:
            cpu_fn = cpu
        try:
            results.append(measure(addr, settings.broker.brokerName, queues, args, cpu_fn,
                                   f"in-process round {r + 1} (client included)"))
        finally:
            trio.from_thread.run_sync(lambda: role._stop.set(), trio_token=token_box[0])
            th.join(60)
            shutil.rmtree(tmp, ignore_errors=True)
        if prof is not None:
            prof.dump_stats(args.profile)
            print(f"bench_cpu: profile of the measured sends in {args.profile}", file=sys.stderr)
    return results


_CG_SOURCE = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void cg_stop(void) { CALLGRIND_DUMP_STATS_AT("measured"); CALLGRIND_STOP_INSTRUMENTATION; }
"""


def _callgrind_hooks():
    """(start, stop): valgrind's client requests, compiled once; no-ops outside valgrind."""
    import ctypes

    lib = Path(tempfile.gettempdir()) / "rmqd-bench-cg.so"
    if not lib.exists():
        src = lib.with_suffix(".c")
        src.write_text(_CG_SOURCE)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    cg = ctypes.CDLL(str(lib))
    return cg.cg_start, cg.cg_stop


def run_loop(args) -> list[dict]:
    """The broker's request path with no sockets and no other task: frames fed to the server's
    own read-chunk dispatch `--per-read` at a time, the answers encoded and joined as the socket
    write would take them, then the after-requests hook (dispatch), all on the trio thread. CPU
    is that thread's own time (time.thread_time); under `valgrind --tool=callgrind
    --instr-atstart=no` the measured loops are the only code instrumented, so the dump's total
    is the instructions of exactly the measured requests (deterministic: use it to compare)."""
    import trio

    from rmqd.broker.server import Channel, RequestContext
    from rmqd.wire.frame import FrameDecoder

    start_cg, stop_cg = _callgrind_hooks()
    results = []

    class NullStream(trio.abc.Stream):
        async def send_all(self, data) -> None:
            pass

        async def wait_send_all_might_not_block(self) -> None:
            pass

        async def receive_some(self, max_bytes=None) -> bytes:
            await trio.sleep_forever()
            return b""

        async def aclose(self) -> None:
            pass

    for r in range(args.rounds):
        tmp, port, settings, role = _broker_in_process()
        out: dict = {}

        async def main() -> None:
            async with trio.open_nursery() as n:
                await n.start(role.run)
                server = role.server
                channel = Channel(NullStream(), local_addr=f"127.0.0.1:{port}", remote_addr="127.0.0.1:50123")
                ctx = RequestContext(channel, server)
                limiter = trio.Semaphore(1 << 20)
                queues = args.queues or role.topic_config_manager.select_topic_config(TOPIC).writeQueueNums
                name = settings.broker.brokerName
                frames = send_frames(args.header, args.warmup + args.sends, queues, args.size, name, 1)
                per = args.per_read
                chunks = [b"".join(frames[i:i + per]) for i in range(0, len(frames), per)]
                warm = (args.warmup + per - 1) // per
                written = [0]

                async def feed(chunk: bytes) -> bytes:
                    decoder = FrameDecoder()
                    decoder.feed(chunk)
                    batch: list = []
                    await server._dispatch_chunk(channel, decoder, ctx, batch, n, limiter)
                    data = b"".join(batch)  # what sendmsg would copy
                    written[0] += len(data)
                    server._run_after_requests()
                    return data

                for chunk in chunks[:warm]:
                    await feed(chunk)
                await trio.sleep(0.3)
                prof = None
                if args.profile:
                    import cProfile
                    prof = cProfile.Profile()
                    prof.enable()
                start_cg()
                c0 = time.thread_time()
                for chunk in chunks[warm:]:
                    await feed(chunk)
                c1 = time.thread_time()
                stop_cg()
                if prof is not None:
                    prof.disable()
                    prof.dump_stats(args.profile)
                # consume: every queue from 0 to its end, 32 per pull
                consumed = pulls = 0
                start_cg()
                c2 = time.thread_time()
                for q in range(queues):
                    offset = 0
                    while True:
                        pulls += 1
                        data = await feed(pull_frame(args.header, 10_000_000 + pulls, q, offset, name))
                        word = _LEN.unpack_from(data, 4)[0]
                        code, ext = _header(data[8:8 + (word & 0xFFFFFF)], word >> 24)
                        if code != 0:
                            break
                        body = data[8 + (word & 0xFFFFFF):]
                        pos = 0
                        while pos + 4 <= len(body):
                            pos += _LEN.unpack_from(body, pos)[0]
                            consumed += 1
                        nxt = int(ext["nextBeginOffset"])
                        if nxt <= offset:
                            break
                        offset = nxt
                c3 = time.thread_time()
                stop_cg()
                import rmqd.wire.frame as frame_module
                out.update({"tree": str(Path(frame_module.__file__).resolve().parent.parent),
                            "label": f"loop round {r + 1}", "header": args.header, "sends": args.sends, "failed": 0,
                            "send_cost": (c1 - c0) / args.sends, "send_wall_s": c1 - c0, "consumed": consumed,
                            "pulls": pulls, "consume_cost": (c3 - c2) / consumed if consumed else float("nan")})
                await role.stop()
                n.cancel_scope.cancel()

        try:
            trio.run(main)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        results.append(out)
    return results


def run_loop_callgrind(args) -> list[dict]:
    """--loop under callgrind, one process per round: its two dumps are the measured sends'
    and the measured pulls' instructions."""
    rows = []
    for r in range(args.rounds):
        tmp = Path(tempfile.mkdtemp(prefix="rmqd-bench-cg-"))
        try:
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
                   f"--callgrind-out-file={tmp}/cg.out",
                   sys.executable, __file__, "--loop", "--json", "--rounds", "1", "--header", args.header,
                   "--sends", str(args.sends), "--warmup", str(args.warmup), "--size", str(args.size),
                   "--per-read", str(args.per_read), "--queues", str(args.queues)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not line:
                raise SystemExit(f"bench_cpu: the callgrind run failed: {proc.stderr[-2000:]}")
            row = json.loads(line[-1])
            # --separate-threads: the trio thread's counts (-01), not the flush threads' (time-dependent)
            totals = []
            for f in sorted(tmp.glob("cg.out.*-01"), key=lambda f: int(f.name.split(".")[2].split("-")[0])):
                m = re.search(r"^(?:summary|totals):\s*(\d+)", f.read_text(errors="replace"), re.M)
                totals.append(int(m.group(1)) if m else 0)
            if len(totals) < 2:
                raise SystemExit(f"bench_cpu: expected two callgrind dumps in {tmp}, found {len(totals)}")
            row.update({"label": f"loop round {r + 1} (callgrind, trio thread)", "send_cost": totals[0] / args.sends,
                        "consume_cost": totals[1] / row["consumed"] if row["consumed"] else float("nan")})
            row.pop("per_send", None)
            row.pop("per_consumed", None)
            rows.append(row)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--header", choices=("json", "rocketmq", "both"), default="both")
    p.add_argument("--sends", type=int, default=20000, help="measured sends per round")
    p.add_argument("--warmup", type=int, default=3000, help="sends before measuring")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--per-read", type=int, default=3, help="frames written together before their answers")
    p.add_argument("--queues", type=int, default=0, help="queues to rotate over (default: all write queues)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--inproc", action="store_true", help="the broker in this process (for --profile, callgrind)")
    p.add_argument("--loop", action="store_true",
                   help="the request path in this process with no sockets (thread CPU; deterministic under "
                        "valgrind --tool=callgrind --instr-atstart=no, which counts only the measured sends)")
    p.add_argument("--profile", help="--inproc: write a cProfile of the measured sends here")
    p.add_argument("--namesrv", help="a running broker's name server (with --pid): measure it instead")
    p.add_argument("--pid", type=int, help="the running broker's pid (its CPU is read from /proc)")
    p.add_argument("--callgrind", action="store_true",
                   help="run rmqd serve under valgrind's callgrind: instructions (user space, all threads) "
                        "per send and per consumed message instead of CPU time; load does not change them")
    p.add_argument("--json", action="store_true", help="one JSON line per round instead of the table")
    args = p.parse_args()
    kinds = ("json", "rocketmq") if args.header == "both" else (args.header,)
    rows = []
    load0 = os.getloadavg()
    for kind in kinds:
        args.header = kind
        if args.namesrv:
            if not args.pid:
                p.error("--namesrv needs --pid")
            addr, name, queues = route(args.namesrv)
            rows += [measure(addr, name, args.queues or queues, args, lambda: cpu_seconds(args.pid),
                             f"pid {args.pid} round {r + 1}") for r in range(args.rounds)]
        elif args.loop and args.callgrind:
            rows += run_loop_callgrind(args)
        elif args.loop:
            rows += run_loop(args)
        elif args.inproc:
            rows += run_inproc(args)
        else:
            rows += run_subprocess(args)
    load1 = os.getloadavg()
    unit, scale = ("k instructions", 1e-3) if args.callgrind else ("CPU us", 1e6)
    for r in rows:
        r["unit"] = unit
        r["per_send"] = r.pop("send_cost") * scale
        r["per_consumed"] = r.pop("consume_cost") * scale
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0 if not any(r["failed"] for r in rows) else 1
    how = ("instructions in user space, all threads (valgrind callgrind)" if args.callgrind
           else "the broker process's utime+stime (/proc)")
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f}; {args.sends} sends of {args.size} B per round, "
          f"{args.per_read} per read; {unit} = {how}")
    trees = sorted({r["tree"] for r in rows if "tree" in r})
    if trees:
        print(f"code measured: {', '.join(trees)} (PYTHONPATH=<dir with rmqd/ laid out as installed> picks another)")
    print(f"| header | round | {unit} / send | {unit} / consumed msg | sends failed | send wall s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['header']} | {r['label']} | {r['per_send']:.1f} | {r['per_consumed']:.2f} | {r['failed']} "
              f"| {r['send_wall_s']:.2f} |")
    for kind in kinds:
        mine = [r for r in rows if r["header"] == kind]
        print(f"median {kind}: {statistics.median(r['per_send'] for r in mine):.1f} {unit}/send, "
              f"{statistics.median(r['per_consumed'] for r in mine):.2f} {unit}/consumed message")
    return 0 if not any(r["failed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
