"""``rmqd spark package OUT.zip``: the zip that ``spark-submit --py-files`` ships to executors.

Executors import ``rmqd.spark``, ``rmqd.store`` and ``rmqd.wire`` (spark/ never imports
processors/ or broker/), so the zip holds those three under the ``rmqd`` package, taken from
wherever this rmqd is installed (a wheel, or an editable install mapping the repository's
folders). Only ``.py`` files go in: executors compile their own bytecode.
"""

from __future__ import annotations

import importlib
import zipfile
from pathlib import Path

#: The subpackages a Spark job needs on an executor (spark/'s own imports, ARCHITECTURE.md).
SHIPPED = ("spark", "store", "wire")


def _package_dir(name: str) -> Path:
    module = importlib.import_module(name)
    return Path(next(iter(module.__path__)))


def build_zip(out: str | Path) -> list[str]:
    """Write the zip; return the archive names in it (sorted, deterministic bytes per tree)."""
    out = Path(out)
    names: list[str] = []
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        root = _package_dir("rmqd")
        z.write(root / "__init__.py", "rmqd/__init__.py")
        names.append("rmqd/__init__.py")
        for sub in SHIPPED:
            base = _package_dir(f"rmqd.{sub}")
            for p in sorted(base.rglob("*.py")):
                if "__pycache__" in p.parts:
                    continue
                arc = f"rmqd/{sub}/{p.relative_to(base).as_posix()}"
                z.write(p, arc)
                names.append(arc)
    return names


def main_script() -> Path:
    """The primary resource for spark-submit: spark/cli.py of this installation."""
    return _package_dir("rmqd.spark") / "cli.py"


def package_main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="rmqd spark package",
                                description="Zip rmqd's Spark modules for spark-submit --py-files.")
    p.add_argument("out", metavar="OUT.zip")
    try:
        a = p.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    out = Path(a.out)
    if not out.parent.absolute().is_dir():
        print(f"rmqd spark package: directory {out.parent} does not exist", flush=True)
        return 2
    try:
        names = build_zip(out)
    except OSError as exc:
        print(f"rmqd spark package: cannot write {out}: {exc.strerror or exc}", flush=True)
        return 2
    print(f"wrote {out} ({len(names)} modules); submit with:\n"
          f"  spark-submit --py-files {out} {main_script()} verify|export ...", flush=True)
    return 0
