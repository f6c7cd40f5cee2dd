"""The suite's own clock: where its minutes go, and a loud warning before CI's limit is near.

CI gives `scripts/dev test` 90 minutes on a fresh 2-core machine; a run past that does not land.
A slow creep (one more client, one more reference broker) is only seen in time if every run says
where its time went. This plugin (loaded by the root ``conftest.py``) adds up each test's set-up,
call and tear-down by module, and at the end prints:

- the slowest modules (``RMQD_SUITE_TOP``, 25 by default) with their test counts and seconds;
- pytest's wall time and, when ``scripts/dev test`` exported ``RMQD_SUITE_START`` (epoch seconds
  at the start of its set-up), the whole run's time including set-up;
- a banner in the closing lines when the whole run passed ``RMQD_SUITE_WARN_MINUTES`` (50).

The same table is written to ``build/suite-durations.md`` for the hand-in. The numbers are
pytest's own report durations, so fixtures shared by a module (a broker per module) are counted
in the first test that set them up, as ``--durations`` counts them.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

WARN_MINUTES_DEFAULT = 50.0
TOP_DEFAULT = 25


@dataclass
class ModuleTime:
    """What one test module cost: its tests and the seconds of their set-up, call and tear-down."""

    tests: int = 0
    seconds: float = 0.0


class SuiteClock:
    """Collects report durations by module; renders the table and the over-time warning."""

    def __init__(self, started: float, suite_start: float | None, warn_minutes: float, top: int) -> None:
        self.started = started
        self.suite_start = suite_start
        self.warn_minutes = warn_minutes
        self.top = top
        self.modules: dict[str, ModuleTime] = {}

    def add(self, nodeid: str, when: str, duration: float) -> None:
        module = nodeid.split("::", 1)[0]
        entry = self.modules.setdefault(module, ModuleTime())
        entry.seconds += duration
        if when == "call":
            entry.tests += 1

    def table(self, now: float) -> list[str]:
        rows = sorted(self.modules.items(), key=lambda kv: kv[1].seconds, reverse=True)
        lines = [f"| module (slowest {min(self.top, len(rows))} of {len(rows)}) | tests | seconds |",
                 "| --- | ---: | ---: |"]
        lines += [f"| {name} | {m.tests} | {m.seconds:.1f} |" for name, m in rows[: self.top]]
        pytest_s = now - self.started
        lines.append("")
        lines.append(f"pytest: {pytest_s / 60:.1f} min ({sum(m.seconds for m in self.modules.values()):.0f} s in tests)")
        whole = self.whole_minutes(now)
        if whole is not None:
            lines.append(f"whole run including set-up: {whole:.1f} min")
        return lines

    def whole_minutes(self, now: float) -> float | None:
        return None if self.suite_start is None else (now - self.suite_start) / 60

    def warning(self, now: float) -> list[str]:
        """The banner, when the run (with set-up where known) passed the warning threshold."""
        whole = self.whole_minutes(now)
        minutes = whole if whole is not None else (now - self.started) / 60
        if minutes <= self.warn_minutes:
            return []
        bar = "!" * 78
        return [bar,
                f"!!! SLOW SUITE: this run took {minutes:.1f} min, over the {self.warn_minutes:g}-minute warning line.",
                "!!! CI stops at 90 minutes and a run past that does not land: see the module table above.",
                bar]


def _env_float(name: str, default: float | None) -> float | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise pytest.UsageError(f"{name}={raw!r} is not a number") from None


_KEY = pytest.StashKey[SuiteClock]()


def pytest_configure(config: pytest.Config) -> None:
    warn = _env_float("RMQD_SUITE_WARN_MINUTES", WARN_MINUTES_DEFAULT)
    top = _env_float("RMQD_SUITE_TOP", TOP_DEFAULT)
    assert warn is not None and top is not None
    clock = SuiteClock(time.time(), _env_float("RMQD_SUITE_START", None), warn, int(top))
    config.stash[_KEY] = clock
    config.pluginmanager.register(_Collector(clock), "rmqd-suite-clock-collector")


class _Collector:
    """The report hook (it is given no config, so it holds the clock itself)."""

    def __init__(self, clock: SuiteClock) -> None:
        self.clock = clock

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.clock.add(report.nodeid, report.when, report.duration)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    clock = config.stash.get(_KEY, None)
    if clock is None or not clock.modules:
        return
    now = time.time()
    lines = clock.table(now)
    terminalreporter.section("time by module (tests/suite_timing.py)")
    for line in lines:
        terminalreporter.write_line(line)
    out = Path(config.rootpath) / "build" / "suite-durations.md"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n")
    except OSError as e:  # a read-only checkout still gets the table on the terminal
        terminalreporter.write_line(f"(could not write {out}: {e})")


def pytest_unconfigure(config: pytest.Config) -> None:
    """After pytest's own last line: the banner is the run's closing text, where it is seen."""
    clock = config.stash.get(_KEY, None)
    if clock is None or not clock.modules:
        return
    for line in clock.warning(time.time()):
        print(line, file=sys.stderr, flush=True)
