"""Where the compat tests' brokers run: as containers (the default) or as host processes.

RMQD_COMPAT_RUNNER=container (default): `rmqd ARGS` and Apache RocketMQ run in their images
through rmqd.testcontainers, the module users import, with host networking on the same
127.0.0.1 ports a process would use; the host's temp directory (every store, conf and log of a
test) is mounted at the same path, so paths in arguments and broker.conf mean the same inside,
and the container runs as the calling user, so the files it writes are the test's.  Only
RMQD_*, JAVA_OPT, ROCKETMQ_HOME and NAMESRV_ADDR of the environment reach a container.
RMQD_IMAGE / RMQD_APACHE_IMAGE name the images; else `scripts/containers.sh images` builds them
(a no-op when the checkout has not changed) and names them.

RMQD_COMPAT_RUNNER=process: plain subprocesses, for a machine without a container engine.
Chosen explicitly: with the container runner a missing engine skips a developer's run and fails
`scripts/dev test` (RMQD_REQUIRE_ALL), never silently falls back.

Either way the caller gets a Popen-like handle (poll, wait, send_signal, kill, returncode,
stdout lines), so compat_harness.RmqdServer and apache_rocketmq.ApacheRocketMQ keep their API.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Protocol

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RUNNER = os.environ.get("RMQD_COMPAT_RUNNER", "container").strip().lower() or "container"
if RUNNER not in ("container", "process"):
    raise RuntimeError(f"RMQD_COMPAT_RUNNER must be 'container' or 'process', not {RUNNER!r}")

ENV_PREFIXES = ("RMQD_",)
ENV_NAMES = ("JAVA_OPT", "ROCKETMQ_HOME", "NAMESRV_ADDR")
# harness controls that mean nothing inside a broker's container
ENV_HARNESS = ("RMQD_COMPAT_RUNNER", "RMQD_IMAGE", "RMQD_APACHE_IMAGE", "RMQD_REQUIRE_ALL")


class BrokerProc(Protocol):
    """What the harness needs of a running broker: a subprocess.Popen's subset."""

    returncode: int | None
    stdout: Any

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...


def containers() -> bool:
    return RUNNER == "container"


def describe() -> str:
    """For the matrix heading: how the brokers ran."""
    if not containers():
        return "processes"
    rmqd, apache = images()
    return f"containers ({rmqd}, {apache})"


# --------------------------------------------------------------------------------------------
# the engine and the images (asked once per session)

_state: dict[str, Any] = {}


def engine_problem() -> str | None:
    """None when containers can run here, else what is missing (and what to do)."""
    if not containers():
        return None
    if "problem" not in _state:
        _state["problem"] = _find_problem()
    return _state["problem"]


def _find_problem() -> str | None:
    hint = "(scripts/dev test sets it up; or RMQD_COMPAT_RUNNER=process runs brokers as processes)"
    # Before testcontainers is imported (it reads these once): Ryuk's image cannot be pulled here, and
    # this machine is itself a container (/.dockerenv), which would send testcontainers down its
    # in-a-container address lookup; every container here is reached on 127.0.0.1 anyway.
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
    try:
        import docker  # noqa: F401 - testcontainers' client
        import rmqd.testcontainers  # noqa: F401
    except ImportError as exc:
        return f"the container runner needs testcontainers ({exc}) {hint}"
    try:
        import docker as docker_sdk

        client = docker_sdk.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine is the same answer
        return f"no container engine answers ({type(exc).__name__}: {exc}) {hint}"
    try:
        images()
    except RuntimeError as exc:
        return f"{exc} {hint}"
    return None


def images() -> tuple[str, str]:
    """(rmqd image, Apache RocketMQ image)."""
    if "images" not in _state:
        rmqd, apache = os.environ.get("RMQD_IMAGE"), os.environ.get("RMQD_APACHE_IMAGE")
        if not (rmqd and apache):
            env = dict(os.environ, PYTHON=sys.executable)
            r = subprocess.run(["bash", str(REPO / "scripts" / "containers.sh"), "images"], capture_output=True,
                               text=True, env=env, timeout=1800)
            if r.returncode != 0:
                raise RuntimeError(f"scripts/containers.sh images failed: {r.stderr.strip()[-2000:]}")
            found = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
            rmqd, apache = rmqd or found.get("RMQD_IMAGE"), apache or found.get("APACHE_IMAGE")
        if not (rmqd and apache):
            raise RuntimeError("scripts/containers.sh images named no images")
        _state["images"] = (rmqd, apache)
    return _state["images"]


def remove_leftovers() -> None:
    """Remove every container this test session started that is still there (an interrupted
    run, a test that lost its handle): Ryuk, which would do it, has no image here."""
    if not containers() or "problem" not in _state or _state["problem"]:
        return
    try:
        import docker
        from testcontainers.core.labels import LABEL_SESSION_ID, SESSION_ID

        client = docker.from_env(timeout=30)
        for c in client.containers.list(all=True, filters={"label": f"{LABEL_SESSION_ID}={SESSION_ID}"}):
            c.remove(force=True, v=True)
        client.close()
    except Exception:  # noqa: BLE001 - best effort at the end of a session
        pass


def _require_engine() -> None:
    problem = engine_problem()
    if problem:
        from compat_harness import missing

        missing(problem)


# --------------------------------------------------------------------------------------------
# a container as a Popen


def _container_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) and k not in ENV_HARNESS}
    env.update(extra or {})
    return env


def _mounts(paths: list[Path]) -> list[Path]:
    """The host temp directory, and the directory of any given path outside it."""
    tmp = Path(tempfile.gettempdir()).resolve()
    out = [tmp]
    for p in paths:
        p = p.resolve()
        if p == tmp or tmp in p.parents:
            continue
        d = p if p.is_dir() else p.parent
        if not any(d == m or m in d.parents for m in out):
            out.append(d)
    return out


def _absolute_paths(args: list[str]) -> list[Path]:
    return [Path(a) for a in args if a.startswith("/") and Path(a).exists()]


class ContainerProc:
    """A started rmqd.testcontainers container behaving as a subprocess.Popen: ``stdout`` yields
    its output lines (stdout and stderr), ``send_signal`` signals its PID 1, ``wait`` returns its
    exit code, and the container is removed once it has exited."""

    def __init__(self, container: Any, start_error: str | None = None) -> None:
        self.container = container
        self.returncode: int | None = None
        self._error = start_error
        self._removed = False
        self._lock = threading.Lock()
        if start_error is not None:
            self.returncode = container.exit_code if container.exit_code is not None else 1
            self._removed = True
        self.stdout = self._lines()

    def _lines(self) -> Iterator[str]:
        if self._error is not None:
            yield from (line + "\n" for line in self._error.splitlines())
            return
        try:
            stream = self.container.get_wrapped_container().logs(stdout=True, stderr=True, stream=True, follow=True)
            pending = b""
            for chunk in stream:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", errors="replace") + "\n"
            if pending:
                yield pending.decode("utf-8", errors="replace")
        except Exception:  # noqa: BLE001 - the container went away: the output ends there
            return

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        try:
            c = self.container.get_wrapped_container()
            c.reload()
            if c.status in ("exited", "dead"):
                self._finish(int(c.attrs["State"]["ExitCode"]))
        except Exception:  # noqa: BLE001 - gone: treat as exited
            self._finish(-9)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("container", timeout or 0)
            time.sleep(0.05)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is not None:
            return
        try:
            self.container.get_wrapped_container().kill(signal=int(sig))
        except Exception:  # noqa: BLE001 - it exited meanwhile
            pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
        try:
            self.wait(30)
        except subprocess.TimeoutExpired:
            pass

    def _finish(self, code: int) -> None:
        with self._lock:
            if self.returncode is None:
                self.returncode = code
            if not self._removed:
                self._removed = True
                self.container._remove_quietly()


def _user() -> str:
    return f"{os.getuid()}:{os.getgid()}"


def spawn_rmqd(args: list[str], cwd: Path, ready_timeout: float) -> tuple[BrokerProc, str]:
    """`rmqd ARGS` as a process (output lines on stdout, stderr merged) or as a container;
    returns the handle and the command line for the log."""
    if not containers():
        exe = Path(sys.executable).with_name("rmqd")
        cmd = ([str(exe)] if exe.exists() else [sys.executable, "-m", "rmqd"]) + list(args)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(cwd),
                                errors="replace")
        return proc, " ".join(cmd)
    _require_engine()
    from rmqd.testcontainers import ContainerStartError, RmqdContainer

    image, _ = images()
    c = RmqdContainer(image, rmqd_args=list(args), network_mode="host", user=_user(), working_dir=str(cwd),
                      ready_timeout=ready_timeout)
    for m in _mounts([cwd, *_absolute_paths(args)]):
        c.with_volume_mapping(str(m), str(m), "rw")
    for k, v in _container_env().items():
        c.with_env(k, v)
    line = f"[container {image}, host network] rmqd {' '.join(args)}"
    try:
        c.start()
    except ContainerStartError as exc:
        return ContainerProc(c, start_error=str(exc)), line
    return ContainerProc(c), line


def spawn_apache(home: Path, workdir: Path, store: Path, namesrv_port: int, broker_port: int,
                 ready_timeout: float) -> ContainerProc:
    """Apache RocketMQ's name server and broker in their image, on the conf files the harness
    wrote under `home` (ROCKETMQ_HOME), `workdir` as user.home; raises RuntimeError (with the
    broker's output) when it does not start."""
    _require_engine()
    from rmqd.testcontainers import ApacheRocketMQContainer, ContainerStartError

    _, image = images()
    c = ApacheRocketMQContainer(image, home=str(home), network_mode="host", user=_user(), working_dir=str(workdir),
                                namesrv_port=namesrv_port, broker_port=broker_port, ready_timeout=ready_timeout)
    for m in _mounts([home, workdir, store]):
        c.with_volume_mapping(str(m), str(m), "rw")
    for k, v in _container_env({"ROCKETMQ_USER_HOME": str(workdir), "JAVA_OPT": ""}).items():
        c.with_env(k, v)
    try:
        c.start()
    except ContainerStartError as exc:
        raise RuntimeError(str(exc)) from None
    return ContainerProc(c)
