"""Shared plumbing of the Python-side client drivers: JSON-lines output and a hard deadline.

A driver reads one JSON case description on stdin (or from the file named by argv[1]) and
writes JSON lines on stdout: {"event": ...}.  The last line is {"event": "done", ...} unless
the driver died (native crash) or hit its deadline ({"event": "timeout"}).  Kept apart from
the C++ driver so the same conventions are easy to mirror in the Node driver.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
from typing import Any

_out_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": round(time.time(), 3), **fields}, sort_keys=True)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def read_case() -> dict[str, Any]:
    if len(sys.argv) > 1 and sys.argv[1] != "-":
        with open(sys.argv[1], encoding="utf-8") as f:
            return json.load(f)
    return json.load(sys.stdin)


def hard_exit(code: int) -> None:
    with _out_lock:
        sys.stdout.flush()
    os._exit(code)


def arm_deadline(seconds: float) -> None:
    """Exit the process (code 3) after `seconds`, whatever the native library is doing."""

    def fire() -> None:
        emit("timeout", after_s=seconds)
        hard_exit(3)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


def watch_stdin_for_stop(stop: threading.Event) -> None:
    """Set `stop` when the controller writes a line "stop" or closes our stdin."""

    def run() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=run, daemon=True).start()
