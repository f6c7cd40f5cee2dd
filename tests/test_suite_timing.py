"""The suite clock's table and its over-time banner (tests/suite_timing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import suite_timing
from suite_timing import SuiteClock


def test_table_orders_modules_by_seconds_and_counts_calls_only() -> None:
    clock = SuiteClock(started=1000.0, suite_start=None, warn_minutes=50, top=2)
    for when, d in (("setup", 4.0), ("call", 1.0), ("teardown", 0.5)):
        clock.add("tests/a.py::test_x", when, d)
    clock.add("tests/b.py::test_y[p]", "call", 9.0)
    clock.add("tests/c.py::test_z", "call", 0.1)
    lines = clock.table(now=1000.0 + 120)
    assert lines[0].startswith("| module (slowest 2 of 3)")
    assert lines[2] == "| tests/b.py | 1 | 9.0 |"
    assert lines[3] == "| tests/a.py | 1 | 5.5 |"
    assert not any("tests/c.py" in ln for ln in lines)
    assert "pytest: 2.0 min" in lines[-1]


def test_whole_run_counts_set_up_when_its_start_is_known() -> None:
    clock = SuiteClock(started=2000.0, suite_start=1000.0, warn_minutes=50, top=25)
    clock.add("tests/a.py::t", "call", 1.0)
    assert clock.table(now=2000.0 + 60)[-1] == "whole run including set-up: 17.7 min"


def test_banner_only_past_the_warning_line() -> None:
    clock = SuiteClock(started=0.0, suite_start=None, warn_minutes=50, top=25)
    assert clock.warning(now=50 * 60) == []
    banner = clock.warning(now=51 * 60)
    assert any("SLOW SUITE" in ln and "51.0 min" in ln for ln in banner)
    with_setup = SuiteClock(started=40 * 60, suite_start=0.0, warn_minutes=50, top=25)
    assert with_setup.warning(now=49 * 60) == []
    assert with_setup.warning(now=55 * 60) != []


def test_plugin_prints_table_then_banner_last(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    here = str(Path(suite_timing.__file__).parent)
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {here!r})\npytest_plugins = ['suite_timing']\n")
    pytester.makepyfile(test_one="def test_a():\n    pass\n")
    quiet = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert quiet.ret == 0
    quiet.stdout.fnmatch_lines(["*time by module*", "| test_one.py | 1 | *"])
    assert "SLOW SUITE" not in quiet.stderr.str()
    monkeypatch.setenv("RMQD_SUITE_WARN_MINUTES", "0")
    slow = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert slow.ret == 0
    assert "SLOW SUITE" in slow.stderr.lines[-3]
    assert (pytester.path / "build" / "suite-durations.md").read_text().startswith("| module")
