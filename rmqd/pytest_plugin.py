"""A pytest plugin: a real rmqd (name server + broker) for your tests, on free 127.0.0.1 ports
with a temporary store, started in well under a second and stopped cleanly afterwards.

Installed with rmqd (entry point ``pytest11``), so nothing needs configuring::

    def test_send(rmqd_broker):
        producer = Producer("pg")
        producer.set_namesrv_addr(rmqd_broker.namesrv_addr)
        ...

    @pytest.mark.rmqd(conf={"autoCreateTopicEnable": False}, mode="subprocess")
    def test_no_auto_create(rmqd_broker): ...

    def test_two(rmqd_broker_factory):
        a = rmqd_broker_factory({"brokerName": "a"})
        b = rmqd_broker_factory({"brokerName": "b"}, mode="subprocess")

``conf`` takes broker.conf keys (RocketMQ's names, rmqd's validation: a bad key or value fails
the start with the key named). ``mode`` is ``thread`` (default: the broker runs in this process,
trio in a thread of its own; its log records reach pytest's caplog) or ``subprocess`` (``rmqd
serve`` as a user runs it; its log in ``rmqd.log`` beside the store); ``--rmqd-mode`` or the ini
option ``rmqd_mode`` change the default. For one broker per module or session, use
``running_broker(dir, conf)`` in a fixture of that scope; trio code can ``async with
serving(dir, conf)`` in its own event loop.

This module imports only the standard library and pytest at load time (pytest loads it in every
session of an environment rmqd is installed in); the broker is imported when one starts, through
rmqd.broker's public classes (BrokerRole, NamesrvRole, BrokerSettings) or its CLI.
"""
from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterator, Mapping

import pytest

if TYPE_CHECKING:
    from rmqd.broker.broker import BrokerRole
    from rmqd.broker.namesrv import NamesrvRole

#: broker.conf keys the fixtures start with (each can be overridden): a small store, so a test's
#: temporary directory holds megabytes, not the 1 GiB commit-log and 420 MB index files of
#: RocketMQ's defaults; the broker on 127.0.0.1.
DEFAULT_CONF: dict[str, str] = {
    "brokerClusterName": "DefaultCluster",
    "brokerName": "rmqd-test",
    "brokerIP1": "127.0.0.1",
    "brokerIP2": "127.0.0.1",
    "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(30_000 * 20),
    "maxHashSlotNum": "50000",
    "maxIndexNum": "200000",
    # RocketMQ 5's gRPC clients: a free port (grpc_addr), not the proxy's 8081
    "grpcServerPort": "0",
}

MODES = ("thread", "subprocess")
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
_PORT_TRIES = 5

ConfValue = str | int | float | bool


@dataclass
class RmqdBroker:
    """A running rmqd: where clients connect, where its store is."""

    namesrv_addr: str | None  #: "127.0.0.1:port" for clients' setNamesrvAddr (None: no name server)
    broker_addr: str  #: "127.0.0.1:listenPort" (the fast/VIP port is listenPort - 2)
    store_dir: Path  #: storePathRootDir
    conf: dict[str, str]  #: the broker.conf keys it was started with
    mode: str  #: "thread", "subprocess" or "trio" (serving() in the caller's event loop)
    #: in-process modes: the broker and name-server roles, for tests that look inside
    broker_role: BrokerRole | None = field(default=None, repr=False)
    namesrv_role: NamesrvRole | None = field(default=None, repr=False)
    log_path: Path | None = None  #: subprocess mode: its stderr
    _stop: Callable[[], None] | None = field(default=None, repr=False)
    #: "127.0.0.1:port" for RocketMQ 5's gRPC clients (their endpoints); None with grpcServerPort=-1
    grpc_addr: str | None = None

    def stop(self) -> None:
        """Stop now (the fixtures stop it at teardown otherwise); stopping twice is a no-op."""
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()


def conf_text(conf: Mapping[str, ConfValue]) -> dict[str, str]:
    """broker.conf values as RocketMQ writes them (true/false for booleans)."""
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in conf.items()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_broker_port() -> int:
    """A port p with p, p - 2 (the fast port) and p + 1 (a master's HA port) free right now."""
    for _ in range(200):
        p = _free_port()
        if not 1030 <= p <= 65000:
            continue
        try:
            with socket.socket() as a, socket.socket() as b, socket.socket() as c:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p - 2))
                c.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("no free broker port on 127.0.0.1")


def _address_in_use(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_address_in_use(e) for e in exc.exceptions)
    return isinstance(exc, OSError) and exc.errno in (98, 48, 10048)


# --------------------------------------------------------------------------------------------
# in the caller's trio event loop


@asynccontextmanager
async def serving(store_dir: str | os.PathLike[str], conf: Mapping[str, ConfValue] | None = None, *,
                  namesrv: bool = True) -> AsyncIterator[RmqdBroker]:
    """A name server (unless ``namesrv=False``) and a broker in the running trio loop, both on
    127.0.0.1; stopped (requests drained, unregistered, store flushed) when the block ends."""
    import trio

    from rmqd.broker.broker import BrokerRole
    from rmqd.broker.config import BrokerSettings, validate
    from rmqd.broker.namesrv import NamesrvRole
    from rmqd.processors.namesrv import NamesrvConfig

    def settings_of(keys: dict[str, str]) -> BrokerSettings:
        settings = BrokerSettings()
        settings.apply(keys, source="rmqd conf")  # strict: an unknown key fails the start
        validate(settings)
        return settings

    store = Path(store_dir)
    given = {**DEFAULT_CONF, **conf_text(conf or {}), "storePathRootDir": str(store)}
    settings_of({"listenPort": "10911", **given})  # a bad key or value: a plain ConfigError, before anything runs
    async with trio.open_nursery() as nursery:
        ns_role: NamesrvRole | None = None
        overrides = dict(given)
        if namesrv:
            side = store.with_name(f"{store.name}-namesrv")
            ns_role = NamesrvRole(NamesrvConfig(kvConfigPath=str(side / "kvConfig.json"),
                                                configStorePath=str(side / "namesrv.properties")),
                                  host="127.0.0.1", port=0)
            _, ns_port = await nursery.start(ns_role.run)
            overrides["namesrvAddr"] = f"127.0.0.1:{ns_port}"
        for attempt in range(_PORT_TRIES):
            if "listenPort" not in given:
                overrides["listenPort"] = str(free_broker_port())
            role = BrokerRole(settings_of(overrides), host="127.0.0.1")
            try:
                bound = await nursery.start(role.run)
                break
            except BaseException as exc:  # a port taken since it was probed: another one
                if "listenPort" in given or attempt == _PORT_TRIES - 1 or not _address_in_use(exc):
                    raise
        grpc = bound.get("grpc")
        broker = RmqdBroker(overrides.get("namesrvAddr"), f"127.0.0.1:{bound['broker'][1]}", store, overrides,
                            "trio", broker_role=role, namesrv_role=ns_role,
                            grpc_addr=f"127.0.0.1:{grpc[1]}" if grpc else None)
        try:
            yield broker
        finally:
            with trio.CancelScope(shield=True):
                await role.stop()
                if ns_role is not None:
                    await ns_role.stop()
            nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------------------------
# from synchronous code: a thread of its own, or `rmqd serve`


@contextmanager
def running_broker(base_dir: str | os.PathLike[str], conf: Mapping[str, ConfValue] | None = None, *,
                   mode: str = "thread", timeout: float = READY_TIMEOUT_S) -> Iterator[RmqdBroker]:
    """A name server and a broker with their files under ``base_dir`` (the store in
    ``base_dir/store``), ready when the block starts, stopped when it ends. A broker that fails
    to start or to stop cleanly raises (with its log for a subprocess)."""
    if mode not in MODES:
        raise ValueError(f"rmqd mode {mode!r}: one of {', '.join(MODES)}")
    start = _start_thread if mode == "thread" else _start_subprocess
    broker = start(Path(base_dir), conf_text(conf or {}), timeout)
    try:
        yield broker
    finally:
        broker.stop()


def _start_thread(base: Path, conf: dict[str, str], timeout: float) -> RmqdBroker:
    import trio

    ready: queue.Queue[RmqdBroker | BaseException] = queue.Queue()
    state: dict[str, Any] = {}

    async def main() -> None:
        stop = trio.Event()
        state["token"], state["stop"] = trio.lowlevel.current_trio_token(), stop
        try:
            async with serving(base / "store", conf) as broker:
                broker.mode = "thread"
                ready.put(broker)
                await stop.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
            state["error"] = exc
            ready.put(exc)

    thread = threading.Thread(target=trio.run, args=(main,), name="rmqd-broker", daemon=True)
    thread.start()
    try:
        got = ready.get(timeout=timeout)
    except queue.Empty:
        raise RuntimeError(f"rmqd did not start within {timeout}s") from None
    if isinstance(got, BaseException):
        thread.join(timeout)
        while isinstance(got, BaseExceptionGroup) and len(got.exceptions) == 1:
            got = got.exceptions[0]  # trio's nursery wraps what failed the start
        raise got

    def stop() -> None:
        trio.from_thread.run_sync(state["stop"].set, trio_token=state["token"])
        thread.join(STOP_TIMEOUT_S)
        if thread.is_alive():
            raise RuntimeError(f"rmqd did not stop within {STOP_TIMEOUT_S}s")
        if "error" in state:
            raise state["error"]

    got._stop = stop
    return got


def _start_subprocess(base: Path, conf: dict[str, str], timeout: float) -> RmqdBroker:
    """`rmqd serve` as a user runs it, with the conf as a broker.conf file."""
    store = base / "store"
    given = {**DEFAULT_CONF, **conf}
    conf_file = base / "broker.conf"
    conf_file.write_text("".join(f"{k}={v}\n" for k, v in given.items()), encoding="utf-8")
    log_path = base / "rmqd.log"
    for attempt in range(_PORT_TRIES):
        port = int(given["listenPort"]) if "listenPort" in given else free_broker_port()
        cmd = [sys.executable, "-m", "rmqd", "serve", "-c", str(conf_file), "--store", str(store),
               "--namesrv-port", "0", "--broker-port", str(port), "--host", "127.0.0.1",
               "--kv-config", str(base / "namesrv" / "kvConfig.json")]
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, cwd=base,
                                    env=dict(os.environ, PYTHONUNBUFFERED="1"))
        line = _ready_line(proc, timeout)
        if line is not None:
            break
        proc.wait(timeout=STOP_TIMEOUT_S)
        text = log_path.read_text(errors="replace")
        if "listenPort" in given or attempt == _PORT_TRIES - 1 or "address already in use" not in text:
            raise RuntimeError(f"rmqd serve did not start (exit code {proc.returncode}): {text[-2000:]}")
    assert line is not None  # (the loop breaks on a ready line or raises)
    fields = dict(part.split("=", 1) for part in line.split()[2:])

    def stop() -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"rmqd serve did not stop within {STOP_TIMEOUT_S}s") from None
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
        if code != 0:
            raise RuntimeError(f"rmqd serve exited {code}: {log_path.read_text(errors='replace')[-2000:]}")

    return RmqdBroker(fields["namesrv"], fields["broker"], store, {**given, "listenPort": str(port)}, "subprocess",
                      log_path=log_path, _stop=stop, grpc_addr=fields.get("grpc"))


def _ready_line(proc: subprocess.Popen[str], timeout: float) -> str | None:
    """The `rmqd ready` line, or None when rmqd exits first; bounded by ``timeout``."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for text in proc.stdout:
            lines.put(text)
            if text.startswith("rmqd ready"):
                return
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            text = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"rmqd serve printed no ready line within {timeout}s") from None
        if text is None:
            return None
        if text.startswith("rmqd ready"):
            return text.strip()


# --------------------------------------------------------------------------------------------
# pytest hooks and fixtures


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rmqd")
    group.addoption("--rmqd-mode", choices=MODES, default=None,
                    help="how the rmqd_broker fixtures run rmqd: thread (in this process) or subprocess")
    parser.addini("rmqd_mode", "default mode of the rmqd_broker fixtures (thread or subprocess)", default="thread")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rmqd(conf=None, mode=None): broker.conf keys (a dict) and the mode "
                                       "(thread or subprocess) of the rmqd_broker fixture")


def _default_mode(config: pytest.Config) -> str:
    mode = config.getoption("--rmqd-mode") or config.getini("rmqd_mode") or "thread"
    if mode not in MODES:
        raise pytest.UsageError(f"rmqd_mode = {mode!r}: one of {', '.join(MODES)}")
    return str(mode)


BrokerFactory = Callable[..., RmqdBroker]


@pytest.fixture
def rmqd_broker_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                        ) -> Iterator[BrokerFactory]:
    """``start(conf=None, *, mode=None) -> RmqdBroker``: as many brokers as the test wants,
    each with a name server and a store of its own; all stopped at teardown."""
    default = _default_mode(request.config)
    stack: list[Any] = []

    def start(conf: Mapping[str, ConfValue] | None = None, *, mode: str | None = None) -> RmqdBroker:
        cm = running_broker(tmp_path_factory.mktemp("rmqd"), conf, mode=mode or default)
        broker = cm.__enter__()
        stack.append(cm)
        return broker

    try:
        yield start
    finally:
        errors = []
        for cm in reversed(stack):
            try:
                cm.__exit__(None, None, None)
            except Exception as exc:  # noqa: BLE001 - stop the others, then report
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def rmqd_broker(request: pytest.FixtureRequest, rmqd_broker_factory: BrokerFactory) -> RmqdBroker:
    """One rmqd for the test; ``@pytest.mark.rmqd(conf={...}, mode=...)`` sets it up."""
    marker = request.node.get_closest_marker("rmqd")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        kwargs.setdefault("conf", marker.args[0])
    return rmqd_broker_factory(kwargs.get("conf"), mode=kwargs.get("mode"))


__all__ = ["DEFAULT_CONF", "RmqdBroker", "conf_text", "free_broker_port", "running_broker", "serving"]
