"""Processes the compat tests drive: an `rmqd serve` and the real-client drivers.

Imports nothing of rmqd: the broker is a black box started from its CLI, the clients are the
drivers in drivers/ (one subprocess each, so a native crash or a hang costs one case, never the
session).  Every wait here is bounded.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest

import compat_runner

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DRIVERS = HERE / "drivers"

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 20.0


# --------------------------------------------------------------------------------------------
# the client registry: one module per client, compat_tests/drivers/<name>/client.py
#
# Shape (see README.md): NAME, LABEL, problem() -> str | None, command(case_file) -> argv,
# has_api(feature) -> True | skip reason.  Adding a client adds a directory and touches no
# shared file.

# Matrix column order for the clients known today; any other registered client comes after.
COLUMN_ORDER = ("cpp", "ons", "java", "java5", "go")

_registry: dict[str, ModuleType] | None = None
_problems: dict[str, str | None] = {}


def _load_client(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"compat_client_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for attr in ("NAME", "LABEL", "problem", "command", "has_api"):
        if not hasattr(mod, attr):
            raise RuntimeError(f"{path}: a client module needs {attr} (see compat_tests/README.md)")
    return mod


def clients() -> dict[str, ModuleType]:
    """Every registered client by NAME, in matrix column order."""
    global _registry
    if _registry is None:
        found = {m.NAME: m for m in map(_load_client, sorted(DRIVERS.glob("*/client.py")))}
        order = {n: i for i, n in enumerate(COLUMN_ORDER)}
        _registry = {n: found[n] for n in sorted(found, key=lambda n: (order.get(n, len(order)), n))}
    return _registry


def client_names() -> list[str]:
    return list(clients())


def client_problem(client: str) -> str | None:
    """None if the client can run here, else why not (asked once per session)."""
    if client not in _problems:
        mod = clients().get(client)
        _problems[client] = f"no client module drivers/{client}/client.py" if mod is None else mod.problem()
    return _problems[client]


def client_label(client: str) -> str:
    """The matrix column header (client and version)."""
    mod = clients().get(client)
    return mod.LABEL if mod is not None else client


def api_gap(gaps: dict[str, str], feature: str) -> bool | str:
    """For client modules' has_api(): the reason of the first word of `gaps` found in `feature`
    (case-insensitive), else True."""
    low = feature.lower()
    return next((reason for word, reason in gaps.items() if word in low), True)


def client_has_api(client: str, feature: str) -> bool | str:
    """True, or the reason the client's API cannot do `feature` (a compat case name)."""
    return clients()[client].has_api(feature)


def client_env() -> dict[str, str]:
    env = dict(os.environ)
    # librocketmq needs nothing beyond glibc/libstdc++; its bundled zlib sits next to it in the wheel.
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


# --------------------------------------------------------------------------------------------
# ports


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_broker_port() -> int:
    """A port p with p, p-2 and p+1 free: the broker also listens on its VIP port listenPort-2
    and, as a master, on its HA port listenPort+1."""
    for _ in range(200):
        p = free_port()
        if 1026 < p < 65000 and _port_free(p - 2) and _port_free(p + 1):
            return p
    raise RuntimeError("no free broker port pair found")


# --------------------------------------------------------------------------------------------
# the server


def rmqd_command() -> list[str]:
    exe = Path(sys.executable).with_name("rmqd")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "rmqd"]


@dataclass
class RmqdServer:
    store: Path
    log_path: Path
    conf: Path | None = None
    namesrv_port: int = 0
    broker_port: int = 0
    proc: compat_runner.BrokerProc | None = None
    ready_line: str = ""
    startup_s: float = 0.0
    stop_code: int | None = None  # side_by_side's rmqd.stop() exit code

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def start(self) -> "RmqdServer":
        if not self.namesrv_port:
            self.namesrv_port = free_port()
        if not self.broker_port:
            self.broker_port = free_broker_port()
        args = [
            "serve", "--store", str(self.store), "--namesrv-port", str(self.namesrv_port),
            "--broker-port", str(self.broker_port), "--host", "127.0.0.1",
        ]
        if self.conf is not None:
            args += ["-c", str(self.conf)]
        self.store.parent.mkdir(parents=True, exist_ok=True)
        self.proc, self.ready_line, self.startup_s = spawn_ready(args, self.store.parent, self.log_path)
        return self

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code (the caller asserts it is 0)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError(f"rmqd did not exit within {STOP_TIMEOUT_S}s of SIGTERM; log: {self.log_path}")
        code = self.proc.returncode
        self.proc = None
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@contextmanager
def side_by_side(apache: Any, rmqd: RmqdServer, join_s: float = 180) -> Iterator[None]:
    """Start an Apache reference broker (apache_rocketmq.ApacheRocketMQ or a subclass) and an
    rmqd at the same time (a JVM takes seconds to start), stop both at the end. The caller
    checks ``rmqd.stop()``'s exit code through ``rmqd_code`` afterwards."""
    errors: list[BaseException] = []

    def start_apache() -> None:
        try:
            apache.start()
        except BaseException as e:  # reported below, after both starts ended
            errors.append(e)

    t = threading.Thread(target=start_apache)
    t.start()
    try:
        rmqd.start()
    finally:
        t.join(join_s)
    try:
        if errors:
            raise errors[0]
        yield
    finally:
        apache.stop()
        rmqd.stop_code = rmqd.stop()


def spawn_ready(args: list[str], cwd: Path, log_path: Path,
                timeout: float = READY_TIMEOUT_S) -> tuple[compat_runner.BrokerProc, str, float]:
    """Start `rmqd ARGS` (a process or a container: compat_runner), its output appended to
    log_path as it comes; returns once it printed its `rmqd ready` line: (handle, line, seconds).
    Raises RuntimeError with the log's tail when it exits or stays silent instead."""
    t0 = time.monotonic()
    proc, cmdline = compat_runner.spawn_rmqd(args, cwd, timeout)
    log = open(log_path, "a", encoding="utf-8", errors="replace")
    log.write(f"$ {cmdline}\n")
    log.flush()
    ready = threading.Event()
    found: list[str] = []

    def pump() -> None:
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if not found and line.startswith("rmqd ready"):
                    found.append(line.strip())
                    ready.set()
        finally:
            ready.set()
            log.close()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(timeout) or not found:
        code = proc.poll()
        if code is None:
            proc.kill()
            proc.wait(10)
        raise RuntimeError(f"rmqd did not print 'rmqd ready' within {timeout}s (exit code {code}); "
                           f"log: {log_path}\n{tail(log_path)}")
    return proc, found[0], time.monotonic() - t0


def wait_until(pred: Callable[[], bool], timeout: float, what: str, *, interval: float = 0.1) -> None:
    """Poll ``pred`` until it holds; fail naming ``what`` after ``timeout`` seconds. The compat
    side's copy of tests/support.py's wait_until_blocking (compat_tests import nothing of rmqd,
    and support does); waits on a client's events use DriverProc.wait_for instead."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --------------------------------------------------------------------------------------------
# client drivers


def driver_command(client: str, case_file: Path) -> list[str]:
    """The argv that runs one case with `client` (its registry module's command())."""
    return list(clients()[client].command(case_file))


@dataclass
class DriverProc:
    """One running driver: collects its JSON-line events as they arrive."""

    client: str
    case: dict[str, Any]
    workdir: Path
    name: str
    events: list[dict[str, Any]] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _closed: bool = False

    def start(self) -> "DriverProc":
        self.workdir.mkdir(parents=True, exist_ok=True)
        case = dict(self.case)
        case_file = self.workdir / f"{self.name}.case.json"
        case_file.write_text(json.dumps(case, indent=1))
        self.stderr_path = self.workdir / f"{self.name}.stderr"
        env = client_env()
        env["HOME"] = str(self.workdir)  # client-side files (offsets, logs) stay in the test's tmp dir
        with self.stderr_path.open("w") as err:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                self.argv(case_file), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=err, text=True, cwd=str(self.workdir), env=env,
            )
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()
        return self

    def argv(self, case_file: Path) -> list[str]:
        """The driver's command line (another registry's driver overrides this)."""
        return driver_command(self.client, case_file)

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                ev = {"event": "noise", "line": line}
            with self._cond:
                self.events.append(ev)
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- waiting

    def wait_for(self, pred: Callable[[list[dict[str, Any]]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self.events):
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return pred(self.events)
                self._cond.wait(min(left, 0.5))
            return True

    def wait_event(self, name: str, timeout: float) -> dict[str, Any] | None:
        self.wait_for(lambda evs: any(e["event"] == name for e in evs), timeout)
        return self.first(name)

    def first(self, name: str) -> dict[str, Any] | None:
        with self._cond:
            return next((e for e in self.events if e["event"] == name), None)

    def of(self, name: str) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self.events if e["event"] == name]

    def messages(self) -> list[dict[str, Any]]:
        return self.of("message")

    def wait_messages(self, n: int, timeout: float, where: Callable[[dict], bool] = lambda m: True) -> list[dict]:
        self.wait_for(lambda evs: sum(1 for e in evs if e["event"] == "message" and where(e)) >= n, timeout)
        return [m for m in self.messages() if where(m)]

    # -- ending

    def finish(self, timeout: float) -> int:
        """Wait for the driver to end by itself (producers, pull consumers)."""
        assert self.proc is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = -9
        self._pump_thread.join(10)  # every line the driver printed is in self.events now
        return code

    def stop(self, timeout: float = 30.0) -> int:
        """Ask a push consumer to stop (commits offsets, unregisters) and wait for it."""
        assert self.proc is not None
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            except OSError:
                pass
        return self.finish(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def diagnostics(self) -> str:
        errs = [e for e in self.events if e["event"] in ("send_error", "driver_error", "pull_error", "timeout")]
        return (
            f"[{self.client} {self.name}] rc={self.proc.returncode if self.proc else None} "
            f"events={len(self.events)} errors={errs[:5]}\n--- stderr tail ---\n{tail(self.stderr_path, 25)}"
            + self._client_log_warnings()
        )

    def _client_log_warnings(self, lines: int = 8) -> str:
        """The last WARN/ERROR lines this process wrote to the Java client's own log (user.home is
        the test's directory), where a refused pull or a failed heartbeat shows."""
        if self.proc is None:
            return ""
        mark = f"[{self.proc.pid}]"
        log_path = self.workdir / "logs" / "rocketmqlogs" / "rocketmq_client.log"
        try:
            with log_path.open(errors="replace") as f:
                found = [ln.rstrip()[:300] for ln in f
                         if mark in ln and (" WARN " in ln or " ERROR " in ln)]
        except OSError:
            return ""
        if not found:
            return ""
        return f"\n--- {log_path.name}: last warnings ---\n" + "\n".join(found[-lines:])


def run_driver(client: str, case: dict[str, Any], workdir: Path, name: str, timeout: float) -> DriverProc:
    """Run a driver to its end (bounded) and return it with all its events."""
    case = dict(case)
    case.setdefault("deadline_s", timeout)
    d = DriverProc(client, case, workdir, name).start()
    d.finish(timeout + 10)
    return d


# --------------------------------------------------------------------------------------------
# messages


def msg_spec(body: bytes, tags: str | None = None, keys: str | None = None,
             props: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"body_b64": base64.b64encode(body).decode("ascii")}
    if tags:
        spec["tags"] = tags
    if keys:
        spec["keys"] = keys
    if props:
        spec["props"] = props
    return spec


def body_of(m: dict[str, Any]) -> bytes:
    return base64.b64decode(m["body_b64"])


def missing(reason: str) -> None:
    """Something the environment should provide (a client, a fixture) is missing: a skip for a
    developer's ad-hoc run, a failure under `scripts/dev test` (RMQD_REQUIRE_ALL=1), which installs
    everything, so a broken install can never pass as skipped cases."""
    if os.environ.get("RMQD_REQUIRE_ALL"):
        pytest.fail(f"required for the full suite: {reason}")
    pytest.skip(reason)
