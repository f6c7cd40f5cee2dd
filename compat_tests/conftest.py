"""Fixtures for the drop-in proof: a fresh `rmqd serve` per module, real clients per case, and
the client x case matrix printed at the end of the session (and kept in last-matrix.md).

Nothing of rmqd is imported: the server is started through its CLI like a user would.
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import compat_harness as harness
import compat_runner
from compat_harness import RmqdServer
from compat_session import EXTERNAL_NAMESRV, ExternalServer, Session, client_problem, module_server

# Every client registered as drivers/<name>/client.py, in matrix column order.
CLIENTS = harness.client_names()
MATRIX_FILE = harness.HERE / "last-matrix.md"

def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "compat_case(name): the row of the client x case matrix this test fills")
    config.addinivalue_line("markers", "unsupported(**client_reason): the client's API cannot do this case")


# A broken broker makes every case wait for its timeouts; past this many seconds of compat
# cases the rest fail at once instead, so the whole test run stays inside CI's time. A healthy
# clean-clone run reaches its last client case about 1,500 s after its first (2026-11-28), so the
# budget leaves ~600 s of slack; a whole run stays under ~80 minutes even when it is used up.
BUDGET_S = float(os.environ.get("COMPAT_BUDGET_S", "2100"))
_first_start: list[float] = []


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip before any fixture (server) starts: a missing client or a missing client API."""
    client = getattr(item, "callspec", None) and item.callspec.params.get("client")
    if not client:
        return
    if not _first_start:
        _first_start.append(time.monotonic())
    elif time.monotonic() - _first_start[0] > BUDGET_S:
        pytest.fail(f"not run: the compat cases already used their {BUDGET_S:.0f} s budget (COMPAT_BUDGET_S)")
    marker = item.get_closest_marker("unsupported")
    if marker and client in marker.kwargs:
        pytest.skip(marker.kwargs[client])
    case = item.get_closest_marker("compat_case")
    if case is not None:
        api = harness.client_has_api(client, case.args[0])
        if api is not True:
            pytest.skip(str(api))
    problem = client_problem(client)
    if problem:
        harness.missing(problem)


# --------------------------------------------------------------------------------------------
# servers


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


@pytest.fixture
def session(client: str, rmqd: RmqdServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Session]:
    if isinstance(rmqd, RmqdServer) and not rmqd.alive():
        pytest.fail(f"the module's rmqd is no longer running; log {rmqd.log_path}:\n{harness.tail(rmqd.log_path)}")
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


def _runner_text() -> str:
    if not compat_runner.containers():
        return "processes"
    if compat_runner.engine_problem():
        return "containers (no engine)"
    return "containers of " + ", ".join(compat_runner.images())


def _matrix_text() -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"Compatibility matrix (compat_tests against {EXTERNAL_NAMESRV or 'rmqd serve'} as {_runner_text()}, "
        f"{now}, {platform.system()} {platform.machine()})",
        "",
        "| case | " + " | ".join(harness.client_label(c) for c in CLIENTS) + " |",
        "| --- | " + " | ".join("---" for _ in CLIENTS) + " |",
    ]
    notes: list[str] = []
    for case in _case_order:
        cells = []
        for c in CLIENTS:
            status, why = _results.get((c, case), ("not run", ""))
            if why and status != "PASS":
                notes.append(f"- {case} / {harness.client_label(c)}: {status}: {why}")
                cells.append(f"{status} [{len(notes)}]")
            else:
                cells.append(status)
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    if notes:
        lines += ["", *[f"[{i}] {n[2:]}" for i, n in enumerate(notes, 1)]]
    return "\n".join(lines) + "\n"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    compat_runner.remove_leftovers()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from compat_session import APACHE_RESULTS

    _grpc5_summary(terminalreporter)
    if not _results and not APACHE_RESULTS:
        return
    text = _matrix_text() if _results else ""
    if APACHE_RESULTS:
        import test_compat_apache

        text += ("\n" if text else "") + test_compat_apache.apache_table()
    terminalreporter.write_sep("=", "RocketMQ client x case matrix (rmqd)")
    terminalreporter.write(text)
    try:
        MATRIX_FILE.write_text(text)
    except OSError:
        pass


def _grpc5_summary(terminalreporter: Any) -> None:
    """The 5.x gRPC clients' matrix, rmqd beside Apache RocketMQ 5.3.3 (test_grpc5_*.py)."""
    import grpc5_results
    from grpc5_harness import CLIENTS as GRPC5_CLIENTS

    text = grpc5_results.write(lambda c: GRPC5_CLIENTS[c].label if c in GRPC5_CLIENTS else c)
    if text:
        terminalreporter.write_sep("=", "RocketMQ 5.x gRPC clients: rmqd | Apache RocketMQ 5.3.3")
        terminalreporter.write(text)
