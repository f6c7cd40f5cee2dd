"""rmqd/_compiled.py's compiled_status(): the one line `rmqd --version` and the start-up log print,
and the finder's rules it reports (a build edited after, a module never built, RMQD_PURE, a wheel).

The fake package's extension files are never loaded: status and finder decide from the files.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmqd import _compiled

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]
OLD = 1_000_000_000  # an mtime long ago


@pytest.fixture
def fake_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """pkgy.built (a build newer than its source), pkgy.stale (its source edited after its build),
    pkgy.source (no build), as the only compiled modules."""
    pkg = tmp_path / "pkgy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in ("built", "stale", "source"):
        (pkg / f"{name}.py").write_text("X = 1\n")
    for name in ("built", "stale"):
        (pkg / f"{name}{SUFFIX}").write_bytes(b"not loaded")
    os.utime(pkg / "built.py", (OLD, OLD))
    os.utime(pkg / f"stale{SUFFIX}", (OLD, OLD))
    monkeypatch.setattr(_compiled, "MODULES", ("pkgy.built", "pkgy.stale", "pkgy.source"))
    monkeypatch.delenv("RMQD_PURE", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    _compiled.install()
    yield pkg
    for name in [n for n in sys.modules if n == "pkgy" or n.startswith("pkgy.")]:
        del sys.modules[name]


def test_status_counts_and_names_what_runs_as_source(fake_tree: Path) -> None:
    assert _compiled.compiled_status() == ("compiled: 1 of 3 modules; plain Python: 1 edited after its build "
                                           "(pkgy.stale); 1 not built (pkgy.source)")


def test_rmqd_pure_is_the_whole_answer(fake_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQD_PURE", "1")
    assert _compiled.compiled_status() == "plain Python: RMQD_PURE=1"


def test_nothing_built_says_plain_python(fake_tree: Path) -> None:
    for p in fake_tree.glob(f"*{SUFFIX}"):
        p.unlink()
    assert _compiled.compiled_status() == "plain Python: nothing compiled (pip install . compiles the modules)"


def test_every_module_stale_says_plain_python(fake_tree: Path) -> None:
    for name in ("built", "stale", "source"):
        (fake_tree / f"{name}{SUFFIX}").write_bytes(b"not loaded")
        os.utime(fake_tree / f"{name}{SUFFIX}", (OLD, OLD))
        os.utime(fake_tree / f"{name}.py")
    assert _compiled.compiled_status() == (
        "plain Python: 3 edited after their build (pkgy.built, pkgy.stale, pkgy.source)")


def test_in_a_wheel_the_build_runs_whatever_the_mtimes(fake_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip writes a module's .py after its build: a wheel's builds are never stale."""
    monkeypatch.setattr(_compiled, "_from_wheel", lambda: True)
    assert _compiled.compiled_status() == "compiled: 2 of 3 modules; plain Python: 1 not built (pkgy.source)"
    monkeypatch.setenv("RMQD_PURE", "1")  # still honoured there
    assert _compiled.compiled_status() == "plain Python: RMQD_PURE=1"


def test_a_pure_wheel_says_why(fake_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for p in fake_tree.glob(f"*{SUFFIX}"):
        p.unlink()
    note = tmp_path / _compiled.WHEEL_BUILD
    note.write_text("plain Python: no C compiler (cc not found)\n")
    monkeypatch.setattr(_compiled, "__file__", str(tmp_path / "_compiled.py"))
    assert _compiled.compiled_status() == "plain Python: no C compiler (cc not found)"


def test_the_checkout_status_is_a_status_line() -> None:
    """Here: every module compiled under scripts/dev test (set-up ran build_ext)."""
    line = _compiled.compiled_status()
    assert line.startswith(("compiled: ", "plain Python: ")), line
    if os.environ.get("RMQD_REQUIRE_ALL") and not _compiled.pure_forced():
        assert line == f"compiled: {len(_compiled.MODULES)} of {len(_compiled.MODULES)} modules"
