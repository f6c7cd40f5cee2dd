"""Helpers shared by tests that run servers: free loopback ports and `rmqd` as a subprocess.

Importable as ``support`` because pyproject's [tool.pytest.ini_options] puts tests/ on
sys.path (see the comment there); compat_tests/ does not use it (it imports nothing of rmqd).
"""

from __future__ import annotations

import inspect
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Awaitable, Callable

import trio

from rmqd.pytest_plugin import free_broker_port  # noqa: F401 - p, p-2 and p+1 free (re-exported for the tests)

REPO = Path(__file__).resolve().parents[1]

#: what a wait's condition may be: a plain predicate or a coroutine function returning a bool
Condition = Callable[[], "bool | Awaitable[bool]"]

#: the line `rmqd namesrv|broker|serve` prints on stdout once every port listens
READY_PREFIX = "rmqd ready"


def free_port() -> int:
    """A loopback port free right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rmqd_command(*args: str) -> list[str]:
    """`rmqd ARGS` as this interpreter runs it (python -m rmqd), without relying on PATH."""
    return [sys.executable, "-m", "rmqd", *args]


def rmqd(*args: str, cwd: Path | None = None, stderr: int = subprocess.PIPE,
         env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `rmqd ARGS` unbuffered with stdout piped, so the ready line can be read."""
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.Popen(rmqd_command(*args), cwd=cwd or REPO, env=full_env,
                            stdout=subprocess.PIPE, stderr=stderr, text=True, errors="replace")


def run_once(*args: str, cwd: Path | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """A one-shot `rmqd ARGS` (store tools, bad command lines): exit code and both streams."""
    return subprocess.run(rmqd_command(*args), cwd=cwd or REPO, capture_output=True, text=True, timeout=timeout)


def wait_ready(proc: subprocess.Popen, timeout: float = 20) -> str:
    """Read stdout up to the ready line and return it; fail with stderr if rmqd exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(READY_PREFIX):
            return line.strip()
        if not line and proc.poll() is not None:
            raise AssertionError(f"rmqd exited {proc.returncode}: {proc.stderr.read()}")
    proc.kill()
    raise AssertionError("no ready line")


def stop(proc: subprocess.Popen, timeout: float = 20) -> tuple[int, str]:
    """SIGTERM (a clean stop) and wait: the exit code and what rmqd wrote on stderr."""
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err


async def wait_until(pred: Condition, timeout: float, what: str, *, interval: float = 0.02) -> None:
    """Poll ``pred`` (sync or async) on trio's clock until it holds; fail naming ``what`` after
    ``timeout`` seconds. The wait ends as soon as the condition holds, unlike a fixed sleep, and
    under ``trio.testing.MockClock(autojump_threshold=0)`` it takes no real time at all."""
    with trio.move_on_after(timeout):
        while True:
            result = pred()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return
            await trio.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_until_blocking(pred: Callable[[], bool], timeout: float, what: str, *, interval: float = 0.02) -> None:
    """`wait_until` for code outside trio (subprocesses, threads, files on disk): poll on the
    monotonic clock, fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
