"""Progress of long offline work (``rmqd store verify``, ``rmqd spark verify``) for whoever waits.

On a terminal a tqdm bar (rate, ETA, redrawn in place); anywhere else (a log file, CI, a pipe)
one plain line every ``interval_s`` seconds and a last one at the end (nothing at all for work
shorter than that), because a bar's carriage-return redraws fill a log with noise. The reporter is the ``progress(done, total)`` callable the store's tools take
(store/tools.py ``Progress``), so the tools never know how it is shown.

tqdm is imported only when a bar is drawn, and its absence falls back to the plain lines: the
zip ``rmqd spark package`` ships for spark-submit holds store/ but not rmqd's dependencies.
"""
from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import Protocol, TextIO

#: seconds between plain progress lines when the output is not a terminal
DEFAULT_INTERVAL_S = 10.0


def _interval_from_env() -> float:
    """RMQD_PROGRESS_INTERVAL (seconds; 0 = a line per update) overrides the default."""
    raw = os.environ.get("RMQD_PROGRESS_INTERVAL", "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S


class _Bar(Protocol):
    """The parts of a tqdm bar used here."""

    total: float
    n: float

    def update(self, n: float = 1) -> bool | None: ...

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None: ...

    def close(self) -> None: ...


def _human(n: float, unit: str) -> str:
    if unit != "B":
        return f"{int(n)} {unit}"
    for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or suffix == "TiB":
            return f"{n:.0f} {suffix}" if suffix == "B" else f"{n:.1f} {suffix}"
        n /= 1024
    raise AssertionError("unreachable")


class ProgressReporter:
    """``reporter(done, total)`` shows that ``done`` of ``total`` units are finished.

    ``unit``: "B" for bytes (sizes shown in KiB/MiB/GiB) or a word ("tasks"). ``tty``: draw a
    bar (default: whether ``stream`` is a terminal). Use as a context manager, or call close(),
    so the bar's line is finished before other output follows."""

    def __init__(self, desc: str, *, unit: str = "B", stream: TextIO | None = None, tty: bool | None = None,
                 interval_s: float | None = None) -> None:
        self.desc = desc
        self.unit = unit
        self.stream: TextIO = stream if stream is not None else sys.stderr
        self.interval_s = _interval_from_env() if interval_s is None else interval_s
        self._bar: _Bar | None = None
        self._last_line = time.monotonic()
        self._last: tuple[int, int] | None = None
        self._shown: tuple[int, int] | None = None
        self._closed = False
        if tty if tty is not None else _isatty(self.stream):
            self._bar = _make_bar(desc, unit, self.stream)

    def __call__(self, done: int, total: int) -> None:
        if self._closed:
            return
        self._last = (done, total)
        if self._bar is not None:
            if self._bar.total != total:
                self._bar.total = total
            self._bar.update(done - self._bar.n)
            return
        now = time.monotonic()
        if now - self._last_line >= self.interval_s:
            self._last_line = now
            self._line(done, total)

    def status(self, text: str) -> None:
        """A note beside the bar while nothing countable happens ("starting Spark"); only on a
        terminal (the plain lines carry counts only)."""
        if self._bar is not None and not self._closed:
            self._bar.set_postfix_str(text, refresh=True)

    def _line(self, done: int, total: int) -> None:
        self._shown = (done, total)
        pct = f"{100.0 * done / total:.0f}%" if total else "?%"
        self.stream.write(f"{self.desc}: {pct} ({_human(done, self.unit)} of {_human(total, self.unit)})\n")
        self.stream.flush()

    def close(self) -> None:
        """Finish the bar; without one, a last line if any was shown and it is out of date."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self._shown is not None and self._last is not None and self._last != self._shown:
            self._line(*self._last)

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _make_bar(desc: str, unit: str, stream: TextIO) -> _Bar | None:
    try:
        from tqdm import tqdm
    except ImportError:  # shipped without rmqd's dependencies (a --py-files zip): plain lines
        return None
    if unit == "B":
        return tqdm(total=0, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, file=stream,
                    dynamic_ncols=True, mininterval=0.2)
    return tqdm(total=0, desc=desc, unit=f" {unit}", file=stream, dynamic_ncols=True, mininterval=0.2)


__all__ = ["DEFAULT_INTERVAL_S", "ProgressReporter"]
