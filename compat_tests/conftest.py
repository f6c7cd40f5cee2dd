"""Fixtures for the drop-in proof: a fresh `rmqd serve` per module, real clients per case, and
the client x case matrix printed at the end of the session (and kept in last-matrix.md).

Nothing of rmqd is imported: the server is started through its CLI like a user would.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

import harness
from harness import DriverProc, RmqdServer, msg_spec, run_driver

CLIENTS = ["cpp", "ons"]
CLIENT_TITLES = {"cpp": "C++ (PyPI rocketmq)", "ons": "Node ali-ons"}
MATRIX_FILE = harness.HERE / "last-matrix.md"

_client_problems: dict[str, str | None] = {}


def client_problem(client: str) -> str | None:
    if client not in _client_problems:
        _client_problems[client] = (
            harness.cpp_client_problem() if client == "cpp" else harness.node_client_problem()
        )
    return _client_problems[client]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "compat_case(name): the row of the client x case matrix this test fills")
    config.addinivalue_line("markers", "unsupported(**client_reason): the client's API cannot do this case")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip before any fixture (server) starts: a missing client or a missing client API."""
    client = getattr(item, "callspec", None) and item.callspec.params.get("client")
    if not client:
        return
    marker = item.get_closest_marker("unsupported")
    if marker and client in marker.kwargs:
        pytest.skip(marker.kwargs[client])
    problem = client_problem(client)
    if problem:
        pytest.skip(problem)


# --------------------------------------------------------------------------------------------
# servers


# COMPAT_NAMESRV=host:port runs the client cases against a broker that is already running (e.g. an
# Apache RocketMQ 4.9 to compare with); the cases that start their own rmqd are then skipped.
EXTERNAL_NAMESRV = os.environ.get("COMPAT_NAMESRV") or None


@dataclass
class ExternalServer:
    namesrv: str


def module_server(tmp_path_factory: pytest.TempPathFactory, name: str,
                  conf_text: str | None = None) -> Iterator[RmqdServer | ExternalServer]:
    """Body of a module-scoped server fixture: a fresh rmqd (empty store, optional broker.conf)
    stopped with SIGTERM, which must exit 0; or the external broker of COMPAT_NAMESRV."""
    if EXTERNAL_NAMESRV:
        yield ExternalServer(EXTERNAL_NAMESRV)
        return
    base = tmp_path_factory.mktemp(name)
    conf = None
    if conf_text is not None:
        conf = base / "broker.conf"
        conf.write_text(conf_text)
    server = RmqdServer(store=base / "store", log_path=base / "rmqd.log", conf=conf).start()
    try:
        yield server
    finally:
        code = server.stop()
    assert code == 0, f"rmqd exited with {code} after SIGTERM; log {server.log_path}:\n{harness.tail(server.log_path)}"


@pytest.fixture(scope="module")
def rmqd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RmqdServer | ExternalServer]:
    """One fresh rmqd with the default configuration for all tests of a module."""
    yield from module_server(tmp_path_factory, "rmqd")


@pytest.fixture
def rmqd_factory(tmp_path: Path) -> Iterator[Any]:
    """Servers a test starts, stops and restarts itself (restart and migration cases)."""
    if EXTERNAL_NAMESRV:
        pytest.skip("COMPAT_NAMESRV is set: this case starts its own rmqd")
    started: list[RmqdServer] = []

    def make(store: Path, conf: Path | None = None) -> RmqdServer:
        s = RmqdServer(store=store, log_path=tmp_path / f"rmqd-{len(started)}.log", conf=conf)
        started.append(s)
        return s

    yield make
    for s in started:
        if s.alive():
            s.kill()


# --------------------------------------------------------------------------------------------
# clients


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest) -> str:
    return request.param


class Session:
    """What a case needs: unique names, the driver runners, cleanup of consumers it started."""

    def __init__(self, client: str, workdir: Path, namesrv: str, case: str) -> None:
        self.client = client
        self.workdir = workdir
        self.namesrv = namesrv
        self.case = case
        self.tag = uuid.uuid4().hex[:6]
        self.running: list[DriverProc] = []
        self.n = 0

    def name(self, kind: str) -> str:
        """A topic/group name unique to this case (RocketMQ allows only [A-Za-z0-9_%|-])."""
        raw = f"{self.case}_{self.client}_{kind}_{self.tag}"
        return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "_" for ch in raw)

    def _next(self, role: str) -> str:
        self.n += 1
        return f"{self.n:02d}-{role}"

    def produce(self, topic: str, specs: list[dict[str, Any]], mode: str = "sync", client: str | None = None,
                timeout: float = 60.0, expect_ok: bool = True, **extra: Any) -> DriverProc:
        c = client or self.client
        case = {"role": "produce", "namesrv": self.namesrv, "topic": topic, "group": self.name("pg"),
                "mode": mode, "messages": specs, **extra}
        d = run_driver(c, case, self.workdir, self._next(f"{c}-produce-{mode}"), timeout)
        if expect_ok:
            errors = d.of("send_error") + d.of("driver_error") + d.of("timeout")
            assert not errors and d.first("done"), f"{c} producer did not send cleanly\n{d.diagnostics()}"
        return d

    def push(self, topic: str, group: str, model: str = "clustering", expression: str = "*",
             client: str | None = None, deadline: float = 120.0, **extra: Any) -> DriverProc:
        c = client or self.client
        case = {"role": "push", "namesrv": self.namesrv, "topic": topic, "group": group, "model": model,
                "expression": expression, "deadline_s": deadline, **extra}
        d = DriverProc(c, case, self.workdir, self._next(f"{c}-push")).start()
        self.running.append(d)
        assert d.wait_event("started", 60), f"{c} push consumer did not start\n{d.diagnostics()}"
        return d

    def pull(self, topic: str, group: str, timeout: float = 60.0, **extra: Any) -> DriverProc:
        case = {"role": "pull", "namesrv": self.namesrv, "topic": topic, "group": group, **extra}
        d = run_driver(self.client, case, self.workdir, self._next(f"{self.client}-pull"), timeout)
        assert not d.of("driver_error") and not d.of("timeout") and d.first("done"), \
            f"pull consumer failed\n{d.diagnostics()}"
        return d

    def create_topic(self, topic: str) -> None:
        """Topics come into being through a send (defaultTopic TBW102, autoCreateTopicEnable)."""
        self.produce(topic, [msg_spec(b"create", tags="Create")])

    def barrier(self, consumers: list[DriverProc], topic: str, tags: str = "Warm", rounds: int = 15) -> None:
        """Send warm-up messages until every consumer has received at least one.

        Consumers start asynchronously (route lookup, rebalance, first pull); a broadcast
        consumer starts at the queue's max offset, so anything sent before it pulls is not its.
        """
        for r in range(rounds):
            if all(any(body_prefix(m, b"warm-") for m in c.messages()) for c in consumers):
                return
            self.produce(topic, [msg_spec(f"warm-{r}-{i}".encode(), tags=tags) for i in range(4)])
            for c in consumers:
                c.wait_for(lambda evs: any(e["event"] == "message" and body_prefix(e, b"warm-") for e in evs), 2.0)
        missing = [c.name for c in consumers if not any(body_prefix(m, b"warm-") for m in c.messages())]
        raise AssertionError(f"consumers {missing} received no warm-up message in {rounds} rounds\n"
                             + "\n".join(c.diagnostics() for c in consumers))

    def settle_cluster(self, consumers: list[DriverProc], topic: str, rounds: int = 30) -> None:
        """Send rounds of warm-up messages until one round is consumed exactly once and by all.

        Consumers of one group own disjoint queues only after every one of them has rebalanced:
        the C++ client rebalances when the broker sends NOTIFY_CONSUMER_IDS_CHANGED, ali-ons
        ignores that notice and rebalances every 10 s.
        """
        for r in range(rounds):
            bodies = [f"warm-{r}-{i}".encode() for i in range(8)]
            self.produce(topic, [msg_spec(b, tags="Warm") for b in bodies])

            def seen() -> list[list[bytes]]:
                return [[harness.body_of(m) for m in c.messages() if harness.body_of(m) in bodies] for c in consumers]

            consumers[0].wait_for(lambda evs: len({b for got in seen() for b in got}) >= len(bodies), 10.0)
            for c in consumers:
                c.wait_for(lambda evs: False, 0.3)
            per = seen()
            total = [b for got in per for b in got]
            if all(per) and len(total) == len(bodies) == len(set(total)):
                return
            consumers[0].wait_for(lambda evs: False, 1.0)
        raise AssertionError(f"the group's consumers did not settle on disjoint queues in {rounds} rounds\n"
                             + "\n".join(c.diagnostics() for c in consumers))

    def close(self) -> None:
        for d in self.running:
            if d.proc is not None and d.proc.poll() is None:
                d.stop(30)


def body_prefix(m: dict[str, Any], prefix: bytes) -> bool:
    return harness.body_of(m).startswith(prefix)


@pytest.fixture
def session(client: str, rmqd: RmqdServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Session]:
    s = Session(client, tmp_path, rmqd.namesrv, request.node.originalname.removeprefix("test_")[:20])
    try:
        yield s
    finally:
        s.close()


# --------------------------------------------------------------------------------------------
# the matrix


_results: dict[tuple[str, str], tuple[str, str]] = {}
_case_order: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if not hasattr(item, "callspec") or "client" not in item.callspec.params:
        return
    if item.get_closest_marker("compat_case") is None:
        return
    client = item.callspec.params["client"]
    case = item.get_closest_marker("compat_case").args[0]
    if case not in _case_order:
        _case_order.append(case)
    key = (client, case)
    if rep.skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        _results.setdefault(key, ("SKIP", reason.removeprefix("Skipped: ")))
    elif rep.failed:
        msg = str(rep.longrepr.reprcrash.message if hasattr(rep.longrepr, "reprcrash") and rep.longrepr.reprcrash
                  else rep.longrepr).splitlines()[0][:160]
        # a teardown failure overrides an earlier PASS of the same case
        _results[key] = ("FAIL" if rep.when == "call" else f"ERROR ({rep.when})", msg)
    elif rep.when == "call":
        _results.setdefault(key, ("PASS", ""))


def _matrix_text() -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    versions = ", ".join(f"{CLIENT_TITLES[c]}: {harness.client_version(c)}" for c in CLIENTS)
    lines = [
        f"Compatibility matrix (compat_tests against {EXTERNAL_NAMESRV or 'rmqd serve'}, {now}, "
        f"{platform.system()} {platform.machine()}; {versions})",
        "",
        "| case | " + " | ".join(CLIENT_TITLES[c] for c in CLIENTS) + " |",
        "| --- | " + " | ".join("---" for _ in CLIENTS) + " |",
    ]
    notes: list[str] = []
    for case in _case_order:
        cells = []
        for c in CLIENTS:
            status, why = _results.get((c, case), ("not run", ""))
            if why and status != "PASS":
                notes.append(f"- {case} / {CLIENT_TITLES[c]}: {status}: {why}")
                cells.append(f"{status} [{len(notes)}]")
            else:
                cells.append(status)
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    if notes:
        lines += ["", *[f"[{i}] {n[2:]}" for i, n in enumerate(notes, 1)]]
    return "\n".join(lines) + "\n"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _results:
        return
    text = _matrix_text()
    terminalreporter.write_sep("=", "RocketMQ client x case matrix (rmqd)")
    terminalreporter.write(text)
    try:
        MATRIX_FILE.write_text(text)
    except OSError:
        pass


def copy_fixture_store(src: Path, dst: Path) -> Path:
    """A private copy of a fixture store (the fixture itself is never touched)."""
    shutil.copytree(src, dst)
    return dst
