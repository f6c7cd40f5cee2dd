"""The official Go client (github.com/apache/rocketmq-client-go/v2) for the compat harness.

The harness discovers clients as compat_tests/drivers/<name>/client.py.  The driver is a Go
program (main.go, produce.go, consume.go) built by setup.sh into bin/rmqd-go-driver; it speaks
the JSON-case protocol of drivers/cpp_client.py.  Imports nothing of rmqd.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
BINARY = HERE / "bin" / "rmqd-go-driver"
MODULE = "github.com/apache/rocketmq-client-go/v2"


def _module_version() -> str:
    """The client version pinned in go.mod (what the matrix header shows)."""
    try:
        text = (HERE / "go.mod").read_text(encoding="utf-8")
    except OSError:
        return "?"
    m = re.search(re.escape(MODULE) + r"\s+(\S+)", text)
    return m.group(1) if m else "?"


NAME = "go"
LABEL = f"Go rocketmq-client-go {_module_version()}"

# What the Go client's public API lacks (checked in the pinned version's source): its admin
# package has topic/group administration only; the QUERY_MESSAGE / VIEW_MESSAGE_BY_ID request
# headers exist in its internal package, which Go forbids importing from outside the module.
_NO_API = (
    (re.compile(r"query", re.I), "rocketmq-client-go v2 has no queryMessage API"),
    (re.compile(r"view", re.I), "rocketmq-client-go v2 has no viewMessage API"),
)


def _sources() -> list[Path]:
    return [*HERE.glob("*.go"), HERE / "go.mod", HERE / "go.sum"]


def problem() -> str | None:
    """None if the built driver is there and current, else what to run."""
    if not BINARY.is_file():
        return f"Go driver not built: run compat_tests/drivers/go/setup.sh (needs go and {MODULE})"
    built = BINARY.stat().st_mtime
    stale = [p.name for p in _sources() if p.exists() and p.stat().st_mtime > built]
    if stale:
        return f"Go driver older than {', '.join(sorted(stale))}: run compat_tests/drivers/go/setup.sh"
    return None


def command(case_file: Path) -> list[str]:
    return [str(BINARY), str(case_file)]


def has_api(feature: str) -> bool | str:
    """True, or why the Go client cannot do `feature` (the case's SKIP reason)."""
    for pattern, reason in _NO_API:
        if pattern.search(feature):
            return reason
    return True
