"""`scripts/bench --compare`'s tables from measured sides (no brokers run here): one round gives
the plain figures and ratios, several give each broker's median and the median of the rounds'
own ratios; rounds taken under load are listed but left out; each header serialization gets a
table of its own; CPU per send is the broker's CPU after the warm-up over the sends measured (the
warm-up, Apache's JIT, would flatter rmqd), per consumed message over the consumer's messages."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)

ARGS = argparse.Namespace(threads=4, size=1024, compare_warmup=5.0, seconds=30.0, max_load=1.0, max_other=0.1,
                          consume_count=0)


def _side(bench, label: str, tps: float, consume: float, sent: int, cpu_s: float = 10.5, ready: float = 1.0,
          headers: str = "ROCKETMQ", other: float = 0.0, warmup_cpu_s: float = 0.0):
    return bench.Side(label, headers, pids=[1], ready_s=ready, rss_idle_kb=40 * 1024, rss_peak_kb=160 * 1024,
                      broker_cpu_s=cpu_s + warmup_cpu_s, broker_measured_cpu_s=cpu_s,
                      broker_consume_cpu_s=cpu_s / 10, other_cores=other,
                      producer={"tps": tps, "avgMs": 1.0, "p99Ms": 3.0, "maxMs": 300, "sent": sent,
                                "measuredSent": sent, "measuredSeconds": 30.0},
                      consumer={"tps": consume, "received": sent, "complete": True})


def _round(bench, n: int, a, r, load: float = 0.2, headers: str = "ROCKETMQ"):
    return bench.Round(n, headers, a, r, load, 2.5)


def _row(out: str, name: str, table: int = 0) -> list[str]:
    lines = [ln for ln in out.splitlines() if ln.startswith(f"| {name}")]
    return [c.strip() for c in lines[table].strip("|").split("|")]


def test_one_round_is_the_plain_table(bench) -> None:
    out = bench.compare_report(ARGS, [_round(bench, 1, _side(bench, "Apache", 4000, 40000, 120000, ready=6.0),
                                             _side(bench, "rmqd serve", 4400, 44000, 132000, ready=0.7))])
    assert _row(out, "send TPS") == ["send TPS (higher is better)", "4,000", "4,400", "1.10x"]
    assert _row(out, "start to ready") == ["start to ready, s", "6.00", "0.70", "0.12x"]
    assert _row(out, "broker CPU while sending") == ["broker CPU while sending, cores", "0.35", "0.35", "1.00x"]
    # 10.5 CPU s over 120,000 and 132,000 sends; a tenth of it over as many consumed messages
    assert _row(out, "broker CPU per send, us") == ["broker CPU per send, us", "87.5", "79.5", "0.91x"]
    assert _row(out, "broker CPU per consumed message, us")[1:] == ["8.8", "8.0", "0.91x"]
    assert "sends: Apache 120000 ok / 0 failed; rmqd 132000 ok / 0 failed; consumed: Apache 120000, rmqd 132000" in out
    assert "round 1 (Apache first): load average 0.20 before, 2.50 after" in out
    assert "consume TPS 40,000 / 44,000 = 1.10x" in out  # each round's own, beside the medians
    assert "1 of 1 rounds counted" in out


def test_several_rounds_give_medians_and_the_median_ratio(bench) -> None:
    rounds = [
        _round(bench, 1, _side(bench, "Apache", 4000, 40000, 100), _side(bench, "rmqd serve", 4400, 30000, 110)),
        _round(bench, 2, _side(bench, "Apache", 3000, 40000, 100), _side(bench, "rmqd serve", 2700, 50000, 90)),
        _round(bench, 3, _side(bench, "Apache", 5000, 40000, 100), _side(bench, "rmqd serve", 6000, 44000, 120)),
    ]
    out = bench.compare_report(ARGS, rounds)
    # medians of each column (4,000 and 4,400) and the median of 1.10 / 0.90 / 1.20, not 4,400 / 4,000 by chance
    assert _row(out, "send TPS") == ["send TPS (higher is better)", "4,000", "4,400", "1.10x"]
    assert _row(out, "consume TPS") == ["consume TPS (higher is better)", "40,000", "44,000", "1.10x"]
    assert "round 1 (Apache first)" in out and "send TPS 4,000 / 4,400 = 1.10x" in out
    assert "round 2 (rmqd first)" in out and "send TPS 3,000 / 2,700 = 0.90x" in out
    assert "sends: Apache 300 ok / 0 failed; rmqd 320 ok / 0 failed; consumed: Apache 300, rmqd 320" in out


def test_rounds_under_load_are_listed_and_left_out(bench) -> None:
    rounds = [
        _round(bench, 1, _side(bench, "A", 4000, 1, 1), _side(bench, "r", 4000, 1, 1)),
        _round(bench, 2, _side(bench, "A", 4000, 1, 1), _side(bench, "r", 8000, 1, 1), load=3.0),
        _round(bench, 3, _side(bench, "A", 4000, 1, 1), _side(bench, "r", 8000, 1, 1, other=0.5)),
    ]
    out = bench.compare_report(ARGS, rounds)
    assert _row(out, "send TPS")[2:] == ["4,000", "1.00x"]
    assert "1 of 3 rounds counted" in out
    assert "NOT COUNTED: load average 3.00 before it (> 1.0)" in out
    assert "NOT COUNTED: other processes used 0.50 cores during it (> 0.1)" in out
    none = bench.compare_report(ARGS, rounds[1:])
    assert "no round counted" in none and "| send TPS" not in none


def test_each_header_serialization_has_its_table(bench) -> None:
    rounds = [
        _round(bench, 1, _side(bench, "A", 4000, 1, 1), _side(bench, "r", 4400, 1, 1), headers="ROCKETMQ"),
        _round(bench, 1, _side(bench, "A", 3000, 1, 1, headers="JSON"), _side(bench, "r", 3600, 1, 1, headers="JSON"),
               headers="JSON"),
    ]
    out = bench.compare_report(ARGS, rounds)
    assert "### ROCKETMQ headers" in out and "### JSON headers (the Java client default)" in out
    assert _row(out, "send TPS", 0)[3] == "1.10x" and _row(out, "send TPS", 1)[3] == "1.20x"


def test_two_rounds_take_the_middle_of_both(bench) -> None:
    rounds = [_round(bench, 1, _side(bench, "A", 4000, 1, 1), _side(bench, "r", 4000, 1, 1)),
              _round(bench, 2, _side(bench, "A", 4000, 1, 1), _side(bench, "r", 4800, 1, 1))]
    assert _row(bench.compare_report(ARGS, rounds), "send TPS")[2:] == ["4,400", "1.10x"]


def test_a_missing_figure_is_a_dash_not_a_crash(bench) -> None:
    a = _side(bench, "A", 4000, 0, 1)
    r = _side(bench, "r", 4000, 0, 1)
    a.broker_cpu_s = a.broker_measured_cpu_s = None
    a.other_cores = None
    out = bench.compare_report(ARGS, [_round(bench, 1, a, r)])
    assert _row(out, "broker CPU while sending")[1:] == ["-", "0.35", "-"]
    assert _row(out, "broker CPU per send, us")[1:] == ["-", "10500000.0", "-"]
    assert _row(out, "consume TPS")[1:] == ["0", "0", "-"]


def test_cpu_per_send_leaves_the_warm_up_out(bench) -> None:
    # Apache's JIT burns CPU in the warm-up: counted, it made Apache's CPU per send look twice what it is
    a = _side(bench, "A", 4000, 1, 100_000, cpu_s=15.0, warmup_cpu_s=25.0)
    r = _side(bench, "r", 3000, 1, 100_000, cpu_s=20.0, warmup_cpu_s=5.0)
    a.producer["sent"] = r.producer["sent"] = 200_000
    out = bench.compare_report(ARGS, [_round(bench, 1, a, r)])
    assert _row(out, "broker CPU per send, us")[1:] == ["150.0", "200.0", "1.33x"]
    assert _row(out, "broker CPU per send incl. warm-up, us")[1:] == ["200.0", "125.0", "0.62x"]
    assert _row(out, "broker CPU while sending")[1:] == ["0.50", "0.67", "1.33x"]
    assert "CPU per send 150 / 200 us (incl. warm-up 200 / 125)" in out


def test_rounds_below_one_is_refused_on_the_command_line(bench) -> None:
    r = subprocess.run([sys.executable, bench.__file__, "--compare", "--rounds", "0"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--rounds must be at least 1" in r.stderr


def test_an_equal_consume_count_is_said_and_a_short_backlog_flagged(bench) -> None:
    args = argparse.Namespace(**{**vars(ARGS), "consume_count": 110_000})
    rounds = [_round(bench, 1, _side(bench, "Apache", 4000, 40000, 120000), _side(bench, "rmqd serve", 4400, 44000, 132000)),
              _round(bench, 2, _side(bench, "Apache", 3000, 40000, 100000), _side(bench, "rmqd serve", 4400, 44000, 132000))]
    out = bench.compare_report(args, rounds)
    assert "(its first 110,000 messages on both)" in out
    assert "a backlog was smaller in rounds [2]" in out
    assert "its first" not in bench.compare_report(ARGS, rounds[:1])


def test_like_positions_take_the_order_effect_out(bench) -> None:
    # 2026-11-29's five rounds: whoever ran first consumed faster; 3 Apache-first rounds to 2
    consume = [(236768, 213598), (213529, 242270), (236193, 228978), (217370, 236193), (246144, 218895)]
    rounds = [_round(bench, i + 1, _side(bench, "Apache", 17000, a, 700000), _side(bench, "rmqd serve", 23000, r, 700000))
              for i, (a, r) in enumerate(consume)]
    out = bench.compare_report(ARGS, rounds)
    assert _row(out, "consume TPS")[1:] == ["236,193", "228,978", "0.97x"]
    assert "order: 3 Apache-first and 2 rmqd-first rounds counted" in out
    # first: Apache's median of 236,768 / 236,193 / 246,144 against rmqd's of 242,270 / 236,193
    assert "- consume TPS: first 236,768 / 239,232 = 1.01x; second 215,450 / 218,895 = 1.02x" in out
    assert "- send TPS: first 17,000 / 23,000 = 1.35x; second 17,000 / 23,000 = 1.35x" in out
    balanced = bench.compare_report(ARGS, rounds[:4])
    assert "like positions (each broker's median where it ran first, and where it ran second):" in balanced
    assert "order:" not in balanced
    assert "like positions" not in bench.compare_report(ARGS, rounds[:1])  # one order only: nothing to match
