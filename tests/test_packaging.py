"""The install puts one name into site-packages, `rmqd`, and every import says `rmqd.…`; what a
user installs is compiled.

An sdist is built from the checkout, and the wheel from that sdist (no network: the build backend
and Cython already in the venv; the compiled modules come from rmqd/_build.py's cache that
scripts/build_ext filled), as `pip install rmqd` from an sdist would. Inspected: the sdist's files
(setup.py compiles with the .pxd files), the wheel's top-level names, platform tag and extension
modules, the metadata pip shows, the mapping of the repository's folders, py.typed and the console
script; then the wheel is installed into a directory and its modules import compiled. Without a C
compiler the same sdist gives the pure-Python wheel, saying so in one line.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from rmqd import _build, _compiled
from support import REPO

pytestmark = pytest.mark.timeout(300)

PACKAGES = ("wire", "store", "processors", "broker", "spark")
BARE_IMPORT = re.compile(rf"^\s*(from|import)\s+({'|'.join(PACKAGES)})(\.|\s|$)", re.M)


def _pip_wheel(source: Path, out: Path, env: dict[str, str] | None = None) -> tuple[Path, str]:
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v",
                        "--disable-pip-version-check", "-w", str(out), str(source)],
                       capture_output=True, text=True, timeout=280, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = out.glob("rmqd-*.whl")
    return whl, r.stdout + r.stderr


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    code = "import sys; from setuptools import build_meta; build_meta.build_sdist(sys.argv[1])"
    r = subprocess.run([sys.executable, "-c", code, str(out)], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (tgz,) = out.glob("rmqd-*.tar.gz")
    return tgz


@pytest.fixture(scope="module")
def wheel(sdist, tmp_path_factory) -> Path:
    whl, _ = _pip_wheel(sdist, tmp_path_factory.mktemp("wheel"))
    return whl


def _can_compile() -> bool:
    reason = _build.why_not()
    if reason is not None and os.environ.get("RMQD_REQUIRE_ALL"):
        pytest.fail(f"the wheel cannot be compiled here: {reason}")
    return reason is None


def _extension_files() -> set[str]:
    return {"rmqd/" + "/".join(m.split(".")[1:]) + _build.SUFFIX for m in _compiled.MODULES}


def test_the_sdist_carries_what_setup_py_compiles_with(sdist):
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    assert {"setup.py", "pyproject.toml", "MANIFEST.in", "rmqd/_build.py", "rmqd/_compiled.py", "LICENSE"} <= names
    for unit in _build.units(REPO, _compiled.MODULES):
        assert unit.label in names
        if unit.pxd is not None:
            assert str(unit.pxd.relative_to(REPO)) in names
    # no build output of the checkout, no tests
    assert not [n for n in names if n.endswith((".so", ".c", ".pyc")) or n.startswith(("tests/", "compat_tests/"))]


def test_the_wheel_installs_only_rmqd(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"rmqd"}
    for pkg in PACKAGES:
        assert f"rmqd/{pkg}/__init__.py" in names, pkg
    assert "rmqd/py.typed" in names
    assert "rmqd/broker/cli.py" in names and "rmqd/spark/package.py" in names
    # the repository's folders are mapped, not copied: nothing of tests/ or compat_tests/ ships
    assert not [n for n in names if n.startswith(("rmqd/tests", "rmqd/compat_tests", "tests/"))]
    # the compiled modules ship beside their source (RMQD_PURE=1, tracebacks); no C, no .pxd
    assert not [n for n in names if n.endswith((".c", ".pxd", ".pyd"))]
    assert "rmqd/_compiled.py" in names and "rmqd/wire/frame.py" in names


def _needs_compiler() -> None:
    """Without a C compiler or Cython the compiled wheel cannot be made: a skip for an ad-hoc run,
    a failure under RMQD_REQUIRE_ALL (scripts/dev test installs Cython and needs a compiler)."""
    if not _can_compile():
        if os.environ.get("RMQD_REQUIRE_ALL"):
            pytest.fail(f"nothing can be compiled here: {_build.why_not()}")
        pytest.skip(f"nothing can be compiled here: {_build.why_not()}")


def test_the_wheel_is_compiled(wheel):
    _needs_compiler()
    z = zipfile.ZipFile(wheel)
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert wheel.name == f"rmqd-0.1.0-{py}-{py}-{plat}.whl"
    so = {n for n in z.namelist() if n.endswith(_build.SUFFIX)}
    assert so == _extension_files()
    (wheel_meta,) = [n for n in z.namelist() if n.endswith(".dist-info/WHEEL")]
    assert "Root-Is-Purelib: false" in z.read(wheel_meta).decode()
    n = len(_compiled.MODULES)
    assert z.read(f"rmqd/{_compiled.WHEEL_BUILD}").decode() == f"compiled: {n} of {n} modules\n"


def _installed_status(wheel: Path, target: Path) -> str:
    """compiled_status() and rmqd.wire.frame's file, from the wheel installed into ``target``
    (run elsewhere than the checkout, whose rmqd/ would be found first)."""
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                        "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    code = ("import pickle, rmqd.wire.frame as f; from rmqd._compiled import compiled_status; "
            "c = f.RemotingCommand(code=310); assert pickle.loads(pickle.dumps(c)) == c; "
            "print(compiled_status()); print(f.__file__)")
    r = subprocess.run([sys.executable, "-c", code], cwd=target, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(target), "RMQD_PURE": ""})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_installed_wheel_runs_compiled(wheel, tmp_path):
    """pip writes each .py after its build (newer mtime): installed, the build still runs."""
    _needs_compiler()
    status, frame = _installed_status(wheel, tmp_path / "site").splitlines()
    n = len(_compiled.MODULES)
    assert status == f"compiled: {n} of {n} modules"
    assert frame == str(tmp_path / "site" / "rmqd" / "wire" / f"frame{_build.SUFFIX}")


def test_without_a_compiler_the_wheel_is_pure_and_says_so_once(sdist, tmp_path):
    whl, output = _pip_wheel(sdist, tmp_path / "out", {"CC": "/nonexistent/cc"})
    assert whl.name == "rmqd-0.1.0-py3-none-any.whl"
    assert not [n for n in zipfile.ZipFile(whl).namelist() if n.endswith(_build.SUFFIX)]
    said = [ln for ln in output.splitlines() if "building the plain-Python wheel" in ln]
    assert len(said) == 1 and "no C compiler (/nonexistent/cc not found)" in said[0], said
    status, frame = _installed_status(whl, tmp_path / "site").splitlines()
    assert status == "plain Python: no C compiler (/nonexistent/cc not found)"
    assert frame.endswith("frame.py")


def test_the_wheel_metadata_names_license_author_and_home(wheel):
    z = zipfile.ZipFile(wheel)
    (meta_name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
    meta = Parser().parsestr(z.read(meta_name).decode())
    assert meta["Name"] == "rmqd"
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Author"] or meta["Author-email"]
    assert any(u.startswith("Homepage") for u in meta.get_all("Project-URL") or []), meta.get_all("Project-URL")
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in z.namelist())
    (ep_name,) = [n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")]
    entry_points = z.read(ep_name).decode()
    assert "rmqd = rmqd.broker.cli:main" in entry_points


def test_every_import_is_rmqd_qualified():
    """A bare `from store import …` would work from the repository root and break installed."""
    offenders = []
    for folder in (*PACKAGES, "rmqd", "tests", "compat_tests", "scripts"):
        for p in (REPO / folder).rglob("*.py"):
            if "node_modules" in p.parts:
                continue
            for m in BARE_IMPORT.finditer(p.read_text(errors="replace")):
                line = p.read_text(errors="replace").count("\n", 0, m.start()) + 1
                offenders.append(f"{p.relative_to(REPO)}:{line}")
    assert not offenders, offenders


def test_installed_modules_come_from_the_mapped_folders():
    import rmqd
    import rmqd.store.commitlog
    import rmqd.wire.frame

    # the .py, or its build beside it (scripts/build_ext) while that is current
    for mod, folder, name in ((rmqd.wire.frame, "wire", "frame"), (rmqd.store.commitlog, "store", "commitlog")):
        where = Path(mod.__file__).resolve()
        assert where.parent == (REPO / folder).resolve() and where.name.split(".")[0] == name, where
    assert rmqd.__version__ and rmqd.__version__ != "0+unknown"
