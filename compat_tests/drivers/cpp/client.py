"""The Apache RocketMQ C++ client (librocketmq 1.2.x from the PyPI wheel `rocketmq`) for the
compat harness, in the registry shape of compat_tests/drivers/<name>/client.py.

The driver itself stays at drivers/cpp_client.py (with cpp_native.py and common.py next to it);
this module only tells the harness how to run it and what the wheel's API lacks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from compat_harness import api_gap

DRIVERS = Path(__file__).resolve().parent.parent
DRIVER = DRIVERS / "cpp_client.py"


def _wheel_version() -> str:
    try:
        from importlib.metadata import version

        return version("rocketmq")
    except Exception:  # the matrix header only
        return "?"


NAME = "cpp"
LABEL = f"C++ (PyPI rocketmq {_wheel_version()}, librocketmq 1.2.x)"

# Checked against the wheel's Python API (rocketmq.client) and the C API it wraps.
_NO_API = {
    "sql92": "the C++ wheel's API has no SQL92 subscription",
    "transaction": "the C++ wheel's API has no transactional producer",
    "query": "the C++ wheel's API has no queryMessage",
    "view": "the C++ wheel's API has no viewMessage",
    # librocketmq 1.2.x exports no max-reconsume-times setter: a failing message is retried 16 times
    "maxreconsumetimes": "the C++ client (librocketmq 1.2.x) cannot set maxReconsumeTimes",
}


def problem() -> str | None:
    """None if the wheel loads in this interpreter, else why not (a native import can crash, so
    it is tried in a subprocess)."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", "import rocketmq.client"],
            capture_output=True, text=True, timeout=30, env=dict(os.environ),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run {sys.executable}: {e}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return f"C++ client (PyPI rocketmq) does not load: {last} (pip install -r compat_tests/requirements.txt)"
    return None


def command(case_file: Path) -> list[str]:
    return [sys.executable, str(DRIVER), str(case_file)]


def has_api(feature: str) -> bool | str:
    return api_gap(_NO_API, feature)
