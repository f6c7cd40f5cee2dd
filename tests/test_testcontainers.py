"""rmqd/testcontainers.py without an engine: where testcontainers' reaper (Ryuk) cannot be had,
the module says so once and removes the containers it started at exit instead.

The engine side (a real Ryuk pull failing, containers removed) is checked by hand and in
compat_tests/test_containers.py; here Reaper and the containers are stand-ins.
"""
from __future__ import annotations

import pytest

pytest.importorskip("testcontainers")

from docker.errors import APIError  # noqa: E402

import rmqd.testcontainers as tc  # noqa: E402


class _Container:
    """What _OwnCleanup calls on a container: _remove_quietly (which discards it)."""

    def __init__(self, cleanup: tc._OwnCleanup) -> None:
        self.cleanup = cleanup
        self.removed = 0

    def _remove_quietly(self) -> None:
        self.cleanup.discard(self)  # type: ignore[arg-type]
        self.removed += 1


@pytest.fixture
def cleanup(monkeypatch: pytest.MonkeyPatch) -> tc._OwnCleanup:
    own = tc._OwnCleanup()
    registered: list[object] = []
    monkeypatch.setattr(tc.atexit, "register", registered.append)
    own.registered_with = registered  # type: ignore[attr-defined]
    monkeypatch.setattr(tc.testcontainers_config, "ryuk_disabled", False)
    return own


def test_a_reaper_that_cannot_be_pulled_falls_back_once(cleanup: tc._OwnCleanup, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    calls = []

    def no_reaper() -> None:
        calls.append(1)
        raise APIError('500 Server Error: Get "https://registry-1.docker.io/v2/": dial tcp: lookup failed')

    monkeypatch.setattr(tc.Reaper, "get_instance", staticmethod(no_reaper))
    assert cleanup.reaper_runs() is False
    assert cleanup.reaper_runs() is False
    assert calls == [1]  # decided once per process
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("rmqd.testcontainers: no Ryuk (testcontainers/ryuk") \
        and "registry-1.docker.io" in err[0] and err[0].endswith("removed at exit instead"), err
    # testcontainers' own start() must not try the reaper again for the broker's container
    assert tc.testcontainers_config.ryuk_disabled is True
    assert cleanup.registered_with == [cleanup.remove_all]  # type: ignore[attr-defined]


def test_at_exit_what_was_started_and_not_removed_is_removed(cleanup: tc._OwnCleanup,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tc.testcontainers_config, "ryuk_disabled", True)  # TESTCONTAINERS_RYUK_DISABLED=true
    assert cleanup.reaper_runs() is False
    stopped, left = _Container(cleanup), _Container(cleanup)
    for c in (stopped, left):
        cleanup.add(c)  # type: ignore[arg-type]
    stopped._remove_quietly()  # the test stopped it itself
    cleanup.remove_all()  # what atexit runs
    assert (stopped.removed, left.removed) == (1, 1)
    assert cleanup.live == {}


def test_a_running_reaper_is_left_to_do_its_job(cleanup: tc._OwnCleanup, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(tc.Reaper, "get_instance", staticmethod(lambda: object()))
    assert cleanup.reaper_runs() is True
    assert capsys.readouterr().err == ""
    assert cleanup.registered_with == []  # type: ignore[attr-defined]
    assert tc.testcontainers_config.ryuk_disabled is False
