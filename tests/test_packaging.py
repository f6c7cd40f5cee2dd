"""The install puts one name into site-packages, `rmqd`, and every import says `rmqd.…`.

The wheel is built from the checkout (no network: the build backend already in the venv) and
inspected: its top-level names, the metadata pip shows, the mapping of the repository's folders,
py.typed and the console script.
"""
from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from support import REPO

pytestmark = pytest.mark.timeout(300)

PACKAGES = ("wire", "store", "processors", "broker", "spark")
BARE_IMPORT = re.compile(rf"^\s*(from|import)\s+({'|'.join(PACKAGES)})(\.|\s|$)", re.M)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(out), str(REPO)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("rmqd-*.whl")
    return whl


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
    # scripts/build_ext's builds stay in the checkout: the wheel is plain Python, runs anywhere
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c"))]
    assert "rmqd/_compiled.py" in names


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
