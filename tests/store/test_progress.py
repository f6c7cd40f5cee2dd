"""Progress of `store verify`: reported inside each file as the work goes (not per 1 GiB file),
shown as a tqdm bar on a terminal and as plain periodic lines anywhere else."""
from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from fixtures import CLEAN, require
from rmqd.store import tools
from rmqd.store.progress import ProgressReporter

FIXTURE_STORE = CLEAN / "store"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("fixture") / "store"
    shutil.copytree(require(FIXTURE_STORE), copy)
    return copy


def test_verify_reports_progress_within_each_file(store, monkeypatch):
    """Ticks every TICK_BYTES inside a commit-log file (1 MiB files here, a 64 KiB tick): the
    figures only grow, end at the total, and never jump by more than one tick plus one record
    (the fixture's largest are under 128 KiB) or one small file (an 84 KB index file)."""
    monkeypatch.setattr(tools, "TICK_BYTES", 64 * 1024)
    seen: list[tuple[int, int]] = []
    assert tools.verify(store, progress=lambda done, total: seen.append((done, total))) == []
    dones = [d for d, _ in seen]
    total = seen[-1][1]
    assert {t for _, t in seen} == {total} and dones[-1] == total
    assert dones == sorted(dones)
    commit_log_bytes = sum(p.stat().st_size for p in (store / "commitlog").iterdir())
    assert len(seen) >= commit_log_bytes // (64 * 1024)
    biggest_other = max(p.stat().st_size for p in store.rglob("*") if p.is_file() and "commitlog" not in p.parts)
    jumps = [b - a for a, b in zip([0] + dones, dones)]
    assert max(jumps) <= max(64 * 1024 + 128 * 1024, biggest_other)


def test_plain_lines_off_a_terminal_every_interval_and_a_last_one():
    out = io.StringIO()
    with ProgressReporter("verifying s", stream=out, tty=False, interval_s=0) as p:
        for done in (0, 512 * 1024, 3 * 1024 * 1024):
            p(done, 3 * 1024 * 1024)
    assert out.getvalue().splitlines() == [
        "verifying s: 0% (0 B of 3.0 MiB)",
        "verifying s: 17% (512.0 KiB of 3.0 MiB)",
        "verifying s: 100% (3.0 MiB of 3.0 MiB)",
    ]


def test_plain_lines_are_quiet_for_short_work_and_end_with_the_final_figure():
    out = io.StringIO()
    with ProgressReporter("verifying s", stream=out, tty=False, interval_s=3600) as p:
        p(1, 10)
        p(10, 10)
    assert out.getvalue() == ""  # shorter than one interval: nothing at all
    out = io.StringIO()
    p = ProgressReporter("exporting", unit="tasks", stream=out, tty=False, interval_s=0)
    p(3, 6)
    p.interval_s = 3600  # the next figure is not due ...
    p(6, 6)
    p.close()  # ... but the end shows it
    assert out.getvalue().splitlines() == ["exporting: 50% (3 tasks of 6 tasks)", "exporting: 100% (6 tasks of 6 tasks)"]


def test_a_bar_on_a_terminal():
    pytest.importorskip("tqdm")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    with ProgressReporter("verifying s", stream=out) as p:
        p.status("starting")
        p(1024 * 1024, 2 * 1024 * 1024)
        p(2 * 1024 * 1024, 2 * 1024 * 1024)
    text = out.getvalue()
    assert "\r" in text and "verifying s" in text and "100%" in text and "2.00M" in text
