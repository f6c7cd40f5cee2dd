"""The 5.x gRPC matrix: every case's outcome per client on rmqd and on Apache RocketMQ 5.3.3,
printed at the end of the session (compat_tests/conftest.py) and kept in last-grpc5-matrix.md.

A case agrees when both brokers gave the same outcome; a disagreement is a failure unless listed
in DIFFERENCES with its reason (deliberate, documented in docs/grpc.md)."""

from __future__ import annotations

import contextlib
import datetime
import platform
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MATRIX_FILE = HERE / "last-grpc5-matrix.md"

#: (case, client) -> {"rmqd": outcome, "apache": outcome}
RESULTS: dict[tuple[str, str], dict[str, str]] = {}
CASES: list[str] = []
#: case -> why rmqd and Apache 5.3.3 answer it differently on purpose
DIFFERENCES: dict[str, str] = {}


@contextlib.contextmanager
def recording(case: str, client: str, target: str) -> Iterator[None]:
    """Record PASS / FAIL / SKIP of the body for the matrix (re-raising what it raised)."""
    if case not in CASES:
        CASES.append(case)
    cell = RESULTS.setdefault((case, client), {})
    try:
        yield
    except pytest.skip.Exception as exc:
        cell[target] = f"SKIP ({str(exc)[:80]})"
        raise
    except BaseException as exc:
        cell[target] = f"FAIL ({type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''})"
        raise
    cell[target] = "PASS"


def disagreements() -> list[str]:
    out = []
    for (case, client), cell in RESULTS.items():
        a, b = cell.get("rmqd"), cell.get("apache")
        if a is None or b is None or case in DIFFERENCES:
            continue
        if a.split(" ")[0] != b.split(" ")[0]:
            out.append(f"{case} / {client}: rmqd {a}, Apache {b}")
    return out


def table(label: Callable[[str], str]) -> str:
    if not RESULTS:
        return ""
    clients = sorted({c for _, c in RESULTS}, key=lambda c: ("java", "python", "node").index(c)
                     if c in ("java", "python", "node") else 9)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [f"RocketMQ 5.x gRPC clients: rmqd | Apache RocketMQ 5.3.3 ({now}, {platform.system()} "
            f"{platform.machine()})", "",
            "| case | " + " | ".join(f"{label(c)}: rmqd | Apache 5.3.3" for c in clients) + " | agree |",
            "| --- | " + " | ".join("--- | ---" for _ in clients) + " | --- |"]
    rows = []
    for case in CASES:
        cells, agree = [], True
        for c in clients:
            cell = RESULTS.get((case, c), {})
            a, b = cell.get("rmqd", "not run"), cell.get("apache", "not run")
            cells += [a, b]
            if a.split(" ")[0] != b.split(" ")[0] and "not run" not in (a, b):
                agree = False
        mark = "yes" if agree else ("deliberate: " + DIFFERENCES[case] if case in DIFFERENCES else "NO")
        rows.append(f"| {case} | " + " | ".join(cells) + f" | {mark} |")
    return "\n".join(head + rows) + "\n"


def write(label: Callable[[str], str]) -> str:
    text = table(label)
    if text:
        try:
            MATRIX_FILE.write_text(text)
        except OSError:
            pass
    return text


__all__ = ["CASES", "DIFFERENCES", "RESULTS", "disagreements", "recording", "table", "write"]
