"""`scripts/bench --compare`'s table from measured sides (no brokers run here): one round gives
the plain figures and ratios, several give each broker's median and the median of the rounds'
own ratios; every send and consume is counted over all rounds."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

ARGS = argparse.Namespace(threads=4, size=1024, compare_warmup=5.0, seconds=30.0)


def _side(bench, label: str, tps: float, consume: float, sent: int, cpu_s: float = 10.5, ready: float = 1.0):
    return bench.Side(label, pids=[1], ready_s=ready, rss_idle_kb=40 * 1024, rss_peak_kb=160 * 1024,
                      broker_cpu_s=cpu_s,
                      producer={"tps": tps, "avgMs": 1.0, "p99Ms": 3.0, "maxMs": 300, "sent": sent,
                                "measuredSeconds": 30.0},
                      consumer={"tps": consume, "received": sent, "complete": True})


def _row(out: str, name: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith(f"| {name}"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_one_round_is_the_plain_table(bench) -> None:
    out = bench.compare_report(ARGS, [(_side(bench, "Apache", 4000, 40000, 120000, ready=6.0),
                                       _side(bench, "rmqd serve", 4400, 44000, 132000, ready=0.7))])
    assert _row(out, "send TPS") == ["send TPS (higher is better)", "4,000", "4,400", "1.10x"]
    assert _row(out, "start to ready") == ["start to ready, s", "6.00", "0.70", "0.12x"]
    assert _row(out, "broker CPU while sending") == ["broker CPU while sending, cores", "0.30", "0.30", "1.00x"]
    assert "sends: Apache 120000 ok / 0 failed; rmqd 132000 ok / 0 failed; consumed: Apache 120000, rmqd 132000" in out
    assert "round 1" not in out and "rounds" not in out


def test_several_rounds_give_medians_and_the_median_ratio(bench) -> None:
    rounds = [
        (_side(bench, "Apache", 4000, 40000, 100), _side(bench, "rmqd serve", 4400, 30000, 110)),  # 1.10x
        (_side(bench, "Apache", 3000, 40000, 100), _side(bench, "rmqd serve", 2700, 50000, 90)),   # 0.90x
        (_side(bench, "Apache", 5000, 40000, 100), _side(bench, "rmqd serve", 6000, 44000, 120)),  # 1.20x
    ]
    out = bench.compare_report(ARGS, rounds)
    # medians of each column (4,000 and 4,400) and the median of 1.10 / 0.90 / 1.20, not 4,400 / 4,000 by chance
    assert _row(out, "send TPS") == ["send TPS (higher is better)", "4,000", "4,400", "1.10x"]
    assert _row(out, "consume TPS") == ["consume TPS (higher is better)", "40,000", "44,000", "1.10x"]
    assert "3 rounds, the brokers' order alternating" in out
    assert "round 1 (Apache first): send TPS 4,000 / 4,400 = 1.10x" in out
    assert "round 2 (rmqd first): send TPS 3,000 / 2,700 = 0.90x" in out
    assert "sends: Apache 300 ok / 0 failed; rmqd 320 ok / 0 failed; consumed: Apache 300, rmqd 320" in out


def test_two_rounds_take_the_middle_of_both(bench) -> None:
    rounds = [(_side(bench, "A", 4000, 1, 1), _side(bench, "r", 4000, 1, 1)),
              (_side(bench, "A", 4000, 1, 1), _side(bench, "r", 4800, 1, 1))]
    assert _row(bench.compare_report(ARGS, rounds), "send TPS")[2:] == ["4,400", "1.10x"]


def test_a_missing_figure_is_a_dash_not_a_crash(bench) -> None:
    a = _side(bench, "A", 4000, 0, 1)
    r = _side(bench, "r", 4000, 0, 1)
    a.broker_cpu_s = None
    out = bench.compare_report(ARGS, [(a, r)])
    assert _row(out, "broker CPU while sending")[1:] == ["-", "0.30", "-"]
    assert _row(out, "consume TPS")[1:] == ["0", "0", "-"]


def test_rounds_below_one_is_refused_on_the_command_line(bench) -> None:
    r = subprocess.run([sys.executable, bench.__file__, "--compare", "--rounds", "0"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--rounds must be at least 1" in r.stderr
