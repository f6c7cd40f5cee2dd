"""`scripts/bench_scale.py`: its tables from measured rows (no brokers run here) and its store
builder on a small store (the restart benchmark's input: RocketMQ's layout, a topics.json
naming every topic)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

def _cells(out: str, *starts: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith("| " + " | ".join(starts)))
    return [c.strip() for c in line.strip("|").split("|")]


def test_topics_table_gives_both_thousands_and_ratios(scale) -> None:
    args = argparse.Namespace(topics=10_000, queues=8, how="send,admin")
    rows = [scale.TopicsRow("Apache RocketMQ 4.9.7", "send", 2.0, 8.0, 40.0, 0, 800.0, 30.0, 5.0, 10_000, 60.0),
            scale.TopicsRow("rmqd serve", "send", 1.0, 1.1, 11.0, 0, 80.0, 0.5, 0.2, 10_000, 9.0),
            scale.TopicsRow("Apache RocketMQ 4.9.7", "admin", error="did not start")]
    out = scale.topics_report(args, rows, "open files limit 20000", (1.0, 1.0, 1.0))
    assert "load average before 1.0 / 1.0 / 1.0" in out
    assert _cells(out, "send", "s per 1,000 topics, first thousand") == ["send", "s per 1,000 topics, first thousand",
                                                                          "2.00", "1.00", "0.50x"]
    assert _cells(out, "send", "last / first thousand")[2:] == ["4.00", "1.10", "0.28x"]
    assert _cells(out, "send", "RSS at the end, MiB")[2:] == ["800", "80", "0.10x"]
    assert "Apache RocketMQ 4.9.7 (admin): did not start" in out
    assert _cells(out, "admin", "total s")[2:] == ["-", "-", "-"]


def test_restart_table_marks_what_was_not_measured(scale) -> None:
    args = argparse.Namespace(topics=10_000, queues=8, per_queue=3, gib=1.0)
    rows = [scale.RestartRow("Apache RocketMQ 4.9.7", "clean", error="Too many open files"),
            scale.RestartRow("rmqd serve", "clean", 20.0, 300.0, 1300.0, 18, 300),
            scale.RestartRow("rmqd serve", "kill", 22.0, 290.0, 350.0, 18, 290)]
    out = scale.restart_report(args, rows, "open files limit 20000", (1.0, 1.0, 1.0))
    assert "80000 consume queues" in out and "Apache RocketMQ 4.9.7 (clean): Too many open files" in out
    assert _cells(out, "after a clean stop", "s from spawn")[2:] == ["-", "20.00", "-"]
    assert _cells(out, "after a clean stop", "broker descriptors")[2:] == ["-", "18", "-"]
    assert _cells(out, "after SIGKILL", "store in the page cache")[2:] == ["-", "350", "-"]


def test_build_store_writes_rocketmq_layout_and_topics(scale, tmp_path: Path) -> None:
    info = scale.build_store(tmp_path / "store", 3, 2, 2, 0.001)
    assert info["messages"] == 12
    cq = tmp_path / "store" / "consumequeue"
    assert sorted(p.name for p in cq.iterdir()) == ["ScaleT0", "ScaleT1", "ScaleT2"]
    assert sorted(p.name for p in (cq / "ScaleT1").iterdir()) == ["0", "1"]
    table = json.loads((tmp_path / "store" / "config" / "topics.json").read_text())["topicConfigTable"]
    assert {f"ScaleT{i}" for i in range(3)} <= set(table) and table["ScaleT2"]["writeQueueNums"] == 2
    scale.drop_store_cache(tmp_path / "store")
    cached = scale.cached_mib(tmp_path / "store")
    assert cached is None or cached >= 0
