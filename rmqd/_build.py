"""Compile rmqd's hot modules with Cython, cached by content: the one recipe behind both setup.py
(``pip install .``, ``pip wheel .``, an sdist built on the user's machine) and scripts/build_ext
(the in-place build of a checkout).

Why one module and a cache: a cold build of the 29 modules takes minutes on two cores, and the
same source files are compiled for a checkout, for every wheel and for the container image. A
build is keyed by everything that decides its bytes (module name, source, .pxd, Cython's version,
the interpreter's ABI, compiler and flags, the directives here), so an unchanged tree compiles once
per machine, whichever of those asked first.

Each module is compiled in a subprocess (this file run as a script, so it needs nothing of rmqd
importable) in a staging tree laid out as installed (``rmqd/wire/frame.py`` + ``frame.pxd``):
Cython then names the module ``rmqd.wire.frame`` (its classes pickle under the installed name) and
finds the .pxd by that name. The staging tree has no pyproject.toml, so an old setuptools in the
environment (the system's 65 in a fresh venv) never parses ours. Stdlib only at import time:
Cython and setuptools are imported by the worker alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

#: Bump when anything here changes what a build produces (the cache key includes it).
RECIPE = "2"
#: ``cython -3``; annotation_typing=False: Python hints stay hints (an ``x: str`` would otherwise
#: refuse a str subclass or None at run time, unlike the plain module); C types come from .pxd only.
LANGUAGE_LEVEL = 3
DIRECTIVES: dict[str, bool] = {"annotation_typing": False}
#: after Python's own CFLAGS (-g -O3 ...): no debug info, which made the 29 modules 58 MB instead of
#: ~10 (the symbol table stays: profilers still name the functions)
EXTRA_CFLAGS: list[str] = ["-g0"]
SUFFIX: str = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
#: cache entries unused for this long are removed when a build compiles something
CACHE_KEEP_S = 60 * 86400


class Unit(NamedTuple):
    """One module to compile: its installed name, its files in the repository's layout."""

    module: str  # rmqd.wire.frame
    source: Path  # <root>/wire/frame.py
    pxd: Path | None  # <root>/wire/frame.pxd, if there is one
    label: str  # wire/frame.py (progress and errors)


class Result(NamedTuple):
    built: dict[str, Path]  # module -> its cached extension file
    failed: dict[str, str]  # module -> the first error line
    compiled: int  # how many were compiled now (the rest came from the cache)
    log: Path | None  # the failed modules' compiler output


def source_of(root: Path, module: str) -> Path:
    """``rmqd.wire.frame`` -> ``<root>/wire/frame.py`` (the repository's layout: the folders at the
    root are mapped under ``rmqd`` by pyproject.toml's package-dir)."""
    return root.joinpath(*module.split(".")[1:]).with_suffix(".py")


def units(root: Path, modules: Iterable[str]) -> list[Unit]:
    out = []
    for module in modules:
        src = source_of(root, module)
        pxd = src.with_suffix(".pxd")
        out.append(Unit(module, src, pxd if pxd.exists() else None, str(src.relative_to(root))))
    return out


def cache_dir() -> Path:
    """``$RMQD_EXT_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/rmqd/ext``."""
    explicit = os.environ.get("RMQD_EXT_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmqd" / "ext"


def _compiler() -> str:
    return (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]


def why_not() -> str | None:
    """Why nothing can be compiled here (no Cython, no C compiler, no Python headers), or None."""
    try:
        metadata.version("Cython")
    except metadata.PackageNotFoundError:
        return "Cython is not installed"
    cc = _compiler()
    if shutil.which(cc) is None:
        return f"no C compiler ({cc} not found)"
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").exists():
        return f"no Python headers ({include}/Python.h: install python3-dev)"
    return None


def toolchain() -> str:
    """What besides the files decides a build's bytes, as one text for the cache key."""
    return json.dumps({
        "recipe": RECIPE, "language_level": LANGUAGE_LEVEL, "directives": DIRECTIVES, "extra_cflags": EXTRA_CFLAGS,
        "cython": metadata.version("Cython"), "ext_suffix": SUFFIX, "soabi": sysconfig.get_config_var("SOABI"),
        "platform": sysconfig.get_platform(), "cache_tag": sys.implementation.cache_tag,
        "cc": os.environ.get("CC") or sysconfig.get_config_var("CC"),
        "cflags": sysconfig.get_config_var("CFLAGS"), "ldshared": sysconfig.get_config_var("LDSHARED"),
        "env": {k: os.environ.get(k, "") for k in ("CFLAGS", "CPPFLAGS", "LDFLAGS", "LDSHARED")},
    }, sort_keys=True)


def key_of(unit: Unit, tools: str) -> str:
    h = hashlib.sha256()
    for part in (unit.module.encode(), unit.source.read_bytes(), unit.pxd.read_bytes() if unit.pxd else b"",
                 tools.encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:32]


def _first_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower():
            return ln[:300]
    return lines[-1][:300] if lines else "(no output)"


def _compile(unit: Unit, out: Path) -> tuple[bool, str]:
    """Compile one module into ``out`` (atomically); (ok, compiler output)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{time.monotonic_ns()}")
    args = [unit.module, str(unit.source), str(unit.pxd or ""), str(tmp)]
    # -P: rmqd/ (this file's folder, with its testcontainers.py) is not put on sys.path
    r = subprocess.run([sys.executable, "-P", str(Path(__file__).resolve()), "--worker", *args],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    text = r.stdout + r.stderr
    if r.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        return False, text
    os.replace(tmp, out)
    return True, text


def _prune(cache: Path) -> None:
    cutoff = time.time() - CACHE_KEEP_S
    for p in cache.glob(f"*{SUFFIX}"):
        try:
            if p.stat().st_mtime < cutoff:
                p.unlink()
        except OSError:
            pass


def build(todo: Sequence[Unit], jobs: int | None = None,
          progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)) -> Result:
    """Every unit's extension file in the cache: taken from it when there, else compiled (``jobs``
    at a time, a progress line per module as it ends). Failures are reported, never raised."""
    cache = cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        writable = os.access(cache, os.W_OK)
    except OSError:
        writable = False
    if not writable:  # e.g. a read-only HOME: compile all the same, only for this run
        progress(f"{cache} cannot be written: compiling without the cache")
        cache = Path(tempfile.mkdtemp(prefix="rmqd-ext-cache-"))
    tools = toolchain()
    built: dict[str, Path] = {}
    missing: list[tuple[Unit, Path]] = []
    for unit in todo:
        target = cache / f"{key_of(unit, tools)}{SUFFIX}"
        if target.exists():
            os.utime(target)  # used: kept by _prune
            built[unit.module] = target
        else:
            missing.append((unit, target))
    failed: dict[str, str] = {}
    log: Path | None = None
    if missing:
        jobs = max(1, jobs or os.cpu_count() or 1)
        progress(f"compiling {len(missing)} module(s) with Cython, {jobs} at a time "
                 f"(cached in {cache}: an unchanged module is never compiled again)")
        outputs: dict[str, str] = {}
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            started = {pool.submit(_timed_compile, unit, target): (unit, target) for unit, target in missing}
            for n, fut in enumerate(as_completed(started), 1):
                unit, target = started[fut]
                ok, text, secs = fut.result()
                if ok:
                    built[unit.module] = target
                else:
                    failed[unit.module] = _first_error(text)
                    outputs[unit.label] = text
                progress(f"[{n}/{len(missing)}] {unit.label} {secs:.0f} s" + ("" if ok else " FAILED"))
        if outputs:
            log = cache / "logs" / f"failed-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("".join(f"==== {label}\n{text}\n" for label, text in outputs.items()))
        _prune(cache)
    return Result(built, failed, len(missing) - len(failed), log)


def _timed_compile(unit: Unit, target: Path) -> tuple[bool, str, float]:
    t0 = time.monotonic()
    ok, text = _compile(unit, target)
    return ok, text, time.monotonic() - t0


def failure_line(result: Result, total: int) -> str:
    """The one line a failed build prints: how many, the first error, where the whole output is."""
    first_module, first_error = next(iter(result.failed.items()))
    return (f"{len(result.failed)} of {total} module(s) failed to compile and run as plain Python "
            f"({first_module}: {first_error}; full output: {result.log})")


# --------------------------------------------------------------------------------------------
# the worker: one module, in a staging tree laid out as installed


def _worker(module: str, source: str, pxd: str, out: str) -> None:
    parts = module.split(".")
    with tempfile.TemporaryDirectory(prefix="rmqd-ext-") as tmp:
        stage = Path(tmp) / "src"
        pkg = stage.joinpath(*parts[:-1])
        pkg.mkdir(parents=True)
        for i in range(1, len(parts)):
            stage.joinpath(*parts[:i], "__init__.py").write_text("")
        shutil.copyfile(source, pkg / f"{parts[-1]}.py")
        if pxd:
            shutil.copyfile(pxd, pkg / f"{parts[-1]}.pxd")
        os.chdir(stage)  # relative paths: the build's tracebacks name rmqd/wire/frame.py
        from Cython.Build import cythonize
        from setuptools import Distribution, Extension
        from setuptools.command.build_ext import build_ext

        rel = "/".join(parts) + ".py"
        exts = cythonize([Extension(module, [rel], extra_compile_args=EXTRA_CFLAGS)], compiler_directives=DIRECTIVES,
                         language_level=LANGUAGE_LEVEL, quiet=True, force=True)
        cmd = build_ext(Distribution({"name": "rmqd-ext", "ext_modules": exts}))
        cmd.build_lib = str(Path(tmp) / "lib")
        cmd.build_temp = str(Path(tmp) / "temp")
        cmd.ensure_finalized()
        cmd.run()
        shutil.copyfile(cmd.get_ext_fullpath(module), out)


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    _worker(*sys.argv[2:6])
