"""`scripts/bench --grpc`'s report from measured sides (no brokers run here): each round's own
send and receive+ack figures with the load average before each broker's run, and each broker's
median where it ran first and where it ran second (the broker run second starts on a busier box)."""
from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

ARGS = argparse.Namespace(threads=4, size=1024, compare_warmup=20.0, seconds=20.0)


@pytest.fixture(scope="module")
def grpc_bench():
    # the script defaults RMQD_COMPAT_RUNNER for its own brokers and puts compat_tests on the
    # path: neither may leak into the rest of the session
    had_runner, path = os.environ.get("RMQD_COMPAT_RUNNER"), list(sys.path)
    try:
        path_ = Path(__file__).resolve().parents[2] / "scripts" / "bench_grpc.py"
        loader = importlib.machinery.SourceFileLoader("rmqd_bench_grpc_script", str(path_))
        spec = importlib.util.spec_from_loader(loader.name, loader)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[loader.name] = mod  # its dataclasses look their module up while it runs
        loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("rmqd_bench_grpc_script", None)
        sys.path[:] = path
        if had_runner is None:
            os.environ.pop("RMQD_COMPAT_RUNNER", None)


def _side(mod, label: str, send: float, receive: float, load: float):
    return mod.Side(label, pids=[1], ready_s=1.0, rss_idle_kb=1024, rss_peak_kb=2048, broker_cpu_s=20.0,
                    producer={"tps": send, "sent": int(send * 20)}, consumer={"tps": receive, "received": 1000,
                                                                         "complete": True},
                    load_before=load, busy_before=load / 10)


def test_rounds_and_like_positions(grpc_bench) -> None:
    figures = [(6395, 5422, 6776, 5036), (7611, 5342, 6444, 4594), (7000, 5400, 7100, 5300)]
    rounds = [(_side(grpc_bench, "Apache", a_s, a_r, 0.5), _side(grpc_bench, "rmqd serve", r_s, r_r, 2.1))
              for a_s, a_r, r_s, r_r in figures]
    out = grpc_bench.report(ARGS, rounds)
    assert ("round 1 (Apache first): load average 0.50 / 2.10, busy cores 0.05 / 0.21 before each; "
            "send TPS 6,395 / 6,776 = 1.06x; "
            "receive+ack TPS 5,422 / 5,036 = 0.93x") in out
    assert "round 2 (rmqd first)" in out and "send TPS 7,611 / 6,444 = 0.85x" in out
    assert "2 Apache-first and 1 rmqd-first rounds" in out
    # first: Apache's median of rounds 1 and 3 (6,698) against rmqd's of round 2 (6,444)
    assert "- send TPS: first 6,698 / 6,444 = 0.96x; second 7,611 / 6,938 = 0.91x" in out
    assert "- receive+ack TPS: first 5,411 / 4,594 = 0.85x; second 5,342 / 5,168 = 0.97x" in out


def test_settle_syncs_and_waits_for_a_quiet_second(grpc_bench, monkeypatch) -> None:
    busy = iter([0.0, 1.5, 1.5, 1.6, 1.6, 1.7])  # the machine's busy seconds: 1.5 cores, then 0.1
    synced: list[bool] = []
    monkeypatch.setattr(grpc_bench.os, "sync", lambda: synced.append(True))
    monkeypatch.setattr(grpc_bench, "_busy_seconds", lambda: next(busy))
    monkeypatch.setattr(grpc_bench.time, "sleep", lambda s: None)
    assert grpc_bench.settle(max_wait=30.0) == pytest.approx(0.1)
    assert synced == [True]


def test_one_round_has_no_round_lines(grpc_bench) -> None:
    out = grpc_bench.report(ARGS, [(_side(grpc_bench, "Apache", 7000, 5000, 0.3),
                                    _side(grpc_bench, "rmqd serve", 7000, 5000, 0.3))])
    assert "round 1" not in out and "like positions" not in out
    assert "| send TPS (higher is better) | 7,000 | 7,000 | 1.00x |" in out
