"""`scripts/bench --compare` end to end, kept short: Apache RocketMQ (compat_tests/apache) and
then rmqd each get Apache's benchmark load for a few seconds; the side-by-side table must come
out complete, every acknowledged send must be consumed on both sides, and nothing may be left
running. The figures themselves are not asserted (a shared 2-core box); README has a 30 s run."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(420)

REPO = Path(__file__).resolve().parents[2]
ROWS = ["send TPS", "consume TPS", "broker CPU per send, us", "broker CPU per consumed message, us", "send RT avg, ms", "send RT p99, ms", "send RT max, ms", "broker RSS idle, MiB",
        "broker RSS peak under load, MiB", "start to ready, s", "broker CPU while sending, cores"]


def _missing(reason: str) -> None:
    if os.environ.get("RMQD_REQUIRE_ALL"):
        pytest.fail(f"required for the full suite: {reason}")
    pytest.skip(reason)


def test_compare_prints_both_brokers_side_by_side(tmp_path: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    # one header serialization, and every round counted whatever else the box runs (a test suite)
    cmd = [sys.executable, str(REPO / "scripts" / "bench"), "--compare", "--seconds", "3", "--compare-warmup", "1",
           "--consume-timeout", "90", "--headers", "ROCKETMQ", "--max-load", "1000", "--max-other", "1000",
           "--settle", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env, errors="replace")
    if r.returncode == 2 and ("not installed" in r.stderr or "missing" in r.stderr):
        _missing(r.stderr.strip().splitlines()[-1])
    assert r.returncode in (0, 1), f"exit {r.returncode}\n{r.stdout}\n{r.stderr[-3000:]}"
    out = r.stdout
    # exit 1 with no table is an uncaught exception: its traceback is on stderr
    assert "| measure | Apache RocketMQ 4.9." in out and "| rmqd serve | rmqd / Apache |" in out, \
        f"exit {r.returncode}\n{out}\n{r.stderr[-3000:]}"
    for row in ROWS:
        line = next((ln for ln in out.splitlines() if ln.startswith(f"| {row}")), None)
        assert line is not None, f"row {row!r} missing:\n{out}"
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 4 and all(re.fullmatch(r"[\d,.]+x?", c) for c in cells[1:]), line
    m = re.search(r"sends: Apache (\d+) ok / (\d+) failed; rmqd (\d+) ok / (\d+) failed; "
                  r"consumed: Apache (\d+), rmqd (\d+)", out)
    assert m, out
    a_ok, _a_failed, r_ok, r_failed, a_consumed, r_consumed = map(int, m.groups())
    assert a_ok > 0 and r_ok > 0
    assert r_failed == 0, r.stderr[-3000:]
    assert a_consumed == a_ok and r_consumed == r_ok, out
    # every broker and client JVM it started is gone (they ran with this test's TMPDIR in their paths)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in ps, [ln for ln in ps.splitlines() if str(tmp_path) in ln]
