"""rmqd/_build.py: the one compile recipe of setup.py and scripts/build_ext, cached by content.

A tiny module is compiled for real (a cold build, then the cache); a module Cython refuses fails
in one line and raises nothing; the cache key moves with every input that changes the bytes.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from pathlib import Path

import pytest

from rmqd import _build, _compiled

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(240)


def _tree(tmp_path: Path, body: str, pxd: str | None = None) -> list[_build.Unit]:
    """<tmp>/wire/tiny.py (+ .pxd), as the repository lays a compiled module out."""
    (tmp_path / "wire").mkdir()
    (tmp_path / "wire" / "tiny.py").write_text(body)
    if pxd is not None:
        (tmp_path / "wire" / "tiny.pxd").write_text(pxd)
    return _build.units(tmp_path, ["rmqd.wire.tiny"])


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("RMQD_EXT_CACHE", str(where))
    return where


def _needs_compiler() -> None:
    reason = _build.why_not()
    if reason is not None:
        if os.environ.get("RMQD_REQUIRE_ALL"):
            pytest.fail(f"cannot compile here: {reason}")
        pytest.skip(reason)


def test_the_repository_modules_are_where_build_looks() -> None:
    for unit in _build.units(ROOT, _compiled.MODULES):
        assert unit.source.is_file(), unit
        assert unit.label == str(unit.source.relative_to(ROOT))
        assert unit.pxd is None or unit.pxd.name == unit.source.stem + ".pxd"
    assert any(u.pxd for u in _build.units(ROOT, _compiled.MODULES))


def test_the_key_follows_every_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (unit,) = _tree(tmp_path, "X = 1\n", "cdef int y\n")
    tools = _build.toolchain()
    key = _build.key_of(unit, tools)
    assert key == _build.key_of(unit, tools)  # stable
    unit.source.write_text("X = 2\n")
    assert _build.key_of(unit, tools) != key
    unit.source.write_text("X = 1\n")
    assert unit.pxd is not None
    unit.pxd.write_text("cdef long y\n")
    assert _build.key_of(unit, tools) != key
    unit.pxd.write_text("cdef int y\n")
    assert _build.key_of(unit, tools) == key
    assert _build.key_of(unit._replace(module="rmqd.store.tiny"), tools) != key  # the module's own name
    monkeypatch.setenv("CFLAGS", "-O0")
    assert _build.key_of(unit, _build.toolchain()) != key
    assert _build.key_of(unit, tools.replace(_build.SUFFIX, ".cpython-399-x.so")) != key


def test_a_module_compiles_once_then_comes_from_the_cache(tmp_path: Path, cache: Path) -> None:
    _needs_compiler()
    units = _tree(tmp_path, "import cython\n\ndef twice(n):\n    return 2 * n\n", "cpdef long twice(long n)\n")
    lines: list[str] = []
    first = _build.build(units, progress=lines.append)
    assert first.compiled == 1 and not first.failed, first
    assert lines[-1].startswith("[1/1] wire/tiny.py ")
    so = first.built["rmqd.wire.tiny"]
    assert so.parent == cache and so.name.endswith(_build.SUFFIX)
    # the extension is rmqd.wire.tiny, with its .pxd's C signature
    spec = importlib.util.spec_from_file_location("rmqd.wire.tiny", so,
                                                  loader=importlib.machinery.ExtensionFileLoader("rmqd.wire.tiny",
                                                                                                  str(so)))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.twice(21) == 42 and mod.__name__ == "rmqd.wire.tiny"
    with pytest.raises(TypeError):
        mod.twice("x")  # a C long argument: the .pxd was used
    lines.clear()
    again = _build.build(units, progress=lines.append)
    assert again.compiled == 0 and again.built == first.built and lines == []


def test_a_failed_module_is_one_line_and_no_exception(tmp_path: Path, cache: Path) -> None:
    _needs_compiler()
    units = _tree(tmp_path, "def f(:\n    pass\n")
    lines: list[str] = []
    result = _build.build(units, progress=lines.append)
    assert result.built == {} and list(result.failed) == ["rmqd.wire.tiny"]
    assert lines[-1].startswith("[1/1] wire/tiny.py ") and lines[-1].endswith(" FAILED")
    line = _build.failure_line(result, 1)
    assert "\n" not in line and line.startswith("1 of 1 module(s) failed to compile")
    assert result.log is not None and "tiny.py" in result.log.read_text()
    assert not list(cache.glob(f"*{_build.SUFFIX}"))  # nothing half-written is cached


def test_no_compiler_is_a_reason_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert _build.why_not() == "no C compiler (/nonexistent/cc not found)"


def test_a_cache_that_cannot_be_written_is_done_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only or broken cache location (here: below a regular file) never stops a build."""
    _needs_compiler()
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RMQD_EXT_CACHE", str(blocker / "cache"))
    units = _tree(tmp_path, "def f(:\n    pass\n")  # fails fast: only the cache handling matters
    lines: list[str] = []
    result = _build.build(units, progress=lines.append)
    assert lines[0] == f"{blocker / 'cache'} cannot be written: compiling without the cache"
    assert list(result.failed) == ["rmqd.wire.tiny"] and result.log is not None and result.log.exists()
