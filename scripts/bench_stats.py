#!/usr/bin/env python3
"""CPU cost of the broker's statistics on the send and pull paths, measured in one process.

    .venv/bin/python scripts/bench_stats.py                  # CPU µs per send and per pull, and per stats call
    .venv/bin/python scripts/bench_stats.py --sends 2000 --only-sends   # a fixed workload (for valgrind)

Why in one process and in CPU time: on a shared 2-core machine wall-clock throughput moves
with the neighbours' load; the CPU time one send takes in the processor (process_time over
many sends, the best of several rounds) and the instructions it executes (run this under
``valgrind --tool=callgrind`` with two --sends counts and take the difference) do not. The
broker is a real BrokerRole on a temporary store, driven through SendMessageProcessor and
PullMessageProcessor the way the server's read loop calls them, without sockets and without
the store's threads (nothing runs but the measured calls).

Another tree (e.g. the commit before the statistics) is measured with ``--rmqd-from DIR``, DIR
holding an ``rmqd`` package laid out as installed (the editable install's finder is set aside):

    git archive 3c88de4 | tar -x -C /tmp/base && mkdir -p /tmp/base-pkg && cp -r /tmp/base/rmqd /tmp/base-pkg/
    for d in wire store processors broker spark; do ln -s /tmp/base/$d /tmp/base-pkg/rmqd/$d; done
    .venv/bin/python scripts/bench_stats.py --rmqd-from /tmp/base-pkg
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import timeit
from types import SimpleNamespace
from typing import Any


def make_role(root: str) -> Any:
    from rmqd.broker.broker import BrokerRole
    from rmqd.broker.config import BrokerSettings

    settings = BrokerSettings()
    settings.apply({"brokerIP1": "127.0.0.1", "brokerName": "bench", "storePathRootDir": root,
                    "mappedFileSizeCommitLog": str(256 * 1024 * 1024), "listenPort": "10911"}, source="bench")
    role = BrokerRole(settings, host="127.0.0.1")
    for manager in (role.topic_config_manager, role.consumer_offset_manager, role.subscription_group_manager):
        manager.load()
    role.store.load()
    return role


def send_request(topic: str, body: bytes) -> Any:
    from rmqd.wire.codes import RequestCode
    from rmqd.wire.frame import make_request
    from rmqd.wire.message import encode_properties

    props = encode_properties({"UNIQ_KEY": "7F00000100002A9F0000000000000000", "WAIT": "true", "TAGS": "TagA"})
    ext = {"a": "bench-pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false",
           "n": "bench"}
    return make_request(RequestCode.SEND_MESSAGE_V2, ext, body)


def pull_request(topic: str, offset: int) -> Any:
    from rmqd.wire.codes import RequestCode
    from rmqd.wire.frame import make_request

    ext = {"queueId": "0", "maxMsgNums": "32", "sysFlag": "4", "suspendTimeoutMillis": "0", "commitOffset": "0",
           "topic": topic, "queueOffset": str(offset), "expressionType": "TAG", "subVersion": "0",
           "consumerGroup": "bench-cg", "subscription": "*"}
    return make_request(RequestCode.PULL_MESSAGE, ext)


def cpu_us_per_call(fn: Any, calls: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time_ns()
        for _ in range(calls):
            fn()
        best = min(best, (time.process_time_ns() - t0) / calls / 1000)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sends", type=int, default=20000, help="sends per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only-sends", action="store_true", help="just run --sends sends once (for valgrind)")
    ap.add_argument("--rmqd-from", metavar="DIR", help="import rmqd from DIR (another tree) instead of the install")
    args = ap.parse_args()
    if args.rmqd_from:
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, args.rmqd_from)
    with tempfile.TemporaryDirectory(prefix="rmqd-bench-stats-") as root:
        role = make_role(root)
        send = role.processors[0]
        ctx = SimpleNamespace(channel=SimpleNamespace(remote_addr="127.0.0.1:40000"))
        request = send_request("BenchT", b"x" * 1024)
        if args.only_sends:
            for _ in range(args.sends):
                send.send_message_now(ctx, request)
            role.store.shutdown()
            return
        per_send = cpu_us_per_call(lambda: send.send_message_now(ctx, request), args.sends, args.rounds)
        reput = role.store.reput_service
        while reput.behind() > 0:  # dispatch, as the broker's loop would
            reput.do_reput()
        pull = role.processors[1]
        offsets = iter(range(0, 10 ** 9, 32))
        span = max(role.store.get_max_offset_in_queue("BenchT", 0) - 32, 1)
        per_pull = cpu_us_per_call(lambda: pull.pull_message_now(ctx, pull_request("BenchT", next(offsets) % span)),
                                   2000, args.rounds)
        stats = role.stats
        on_put = getattr(stats, "on_put")
        try:
            on_put("BenchT", 0, 1, 1100)
            call = (lambda: on_put("BenchT", 0, 1, 1100))
        except TypeError:  # the statistics before issue 23 took the append result
            append = SimpleNamespace(msgNum=1, wroteBytes=1100)
            call = (lambda: on_put(append))
        timer = timeit.Timer(call, timer=time.process_time)
        put_ns = min(timer.repeat(number=100000, repeat=args.rounds)) * 1e4
        empty = timeit.Timer(lambda: None, timer=time.process_time)
        put_ns -= min(empty.repeat(number=100000, repeat=args.rounds)) * 1e4  # the lambda's own call
        role.store.shutdown()
    import rmqd

    print(f"rmqd from {rmqd.__path__[0]}")
    print(f"CPU per send (processor, 1 KiB): {per_send:.2f} us (best of {args.rounds} x {args.sends})")
    print(f"CPU per pull (32 messages):      {per_pull:.2f} us")
    print(f"broker stats.on_put alone:        {put_ns:.0f} ns ({put_ns / 10 / per_send:.2f} % of a send)")
    print(f"(load average {open('/proc/loadavg').read().split()[0]}; CPU time, so little affected by it)")


if __name__ == "__main__":
    main()
