"""Which of rmqd's hot modules run compiled, and the rule that keeps a stale build from running.

The modules below are plain Python, and that is what runs anywhere nothing was built (a wheel
built without a compiler, the PySpark ``--py-files`` zip). ``pip install .`` compiles them with
Cython into the wheel (setup.py), and ``scripts/build_ext`` (run by ``scripts/dev setup``) compiles
them in a checkout, next to their source, both through rmqd/_build.py and its cache; a ``.pxd``
beside a module only tells Cython the C types of some locals, it changes nothing in Python. Python's own
import system would prefer such an extension module over its ``.py`` even when the ``.py`` was
edited afterwards; the finder installed here loads the ``.py`` instead whenever it is newer than
its build (in a checkout: an installed wheel's builds always run, see WHEEL_BUILD), or whenever
``RMQD_PURE=1`` is set, so an edit never runs as stale machine code. ``compiled_status()`` sums it
up in one line.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Sequence

#: The modules ``scripts/build_ext`` compiles: the path of every send, pull and dispatch.
MODULES: tuple[str, ...] = (
    "rmqd.wire.frame",
    "rmqd.wire.message",
    "rmqd.wire.javamap",
    "rmqd.store.commitlog",
    "rmqd.store.consumequeue",
    "rmqd.store.dispatch",
    "rmqd.store.indexfile",
    "rmqd.store.mapped_file",
    "rmqd.store.message_store",
    "rmqd.broker.server",
    "rmqd.broker.dispatch_loop",
    "rmqd.processors.send",
    "rmqd.processors.pull",
    # the gRPC listener's header blocks: every request's decoded, every answer's validated
    "rmqd.wire.hpack",
    "rmqd.wire.h2_headers",
    # a unary gRPC call's frames read and answered past h2 (every send and ack)
    "rmqd.wire.h2_fast",
    # called on every send, small, no C types: compiled only to leave the interpreter
    "rmqd.store.schedule",
    "rmqd.store.stats",
    "rmqd.store.broker_stats",
    "rmqd.wire.names",
    # the gRPC messages and the 5.x consumption path (every call's conversion, POP). Not the gRPC
    # transport (broker/grpc_server.py): its read loop awaits trio's coroutines and, compiled, sent
    # 3-7 % fewer messages/s live (6,643 / 6,528 against 7,091 / 6,951, rmqd alone, 2026-11-29),
    # although a replay without sockets ran 2-3 us per call faster
    "rmqd.wire.grpc",
    "rmqd.processors.grpc_service",
    "rmqd.processors.grpc_consumer",
    "rmqd.processors.grpc_convert",
    "rmqd.processors.grpc_common",
    "rmqd.processors.grpc_clients",
    "rmqd.processors.pop",
    "rmqd.store.pop",
    "rmqd.wire.pop",
)

_ENV_PURE = "RMQD_PURE"
#: written beside this file in a wheel (setup.py): what its build compiled, or why it compiled
#: nothing (compiled_status() says it). Its presence also means the extension modules were built
#: from the .py files shipped beside them: pip writes both at install time (a .py a few microseconds
#: after its build, as the wheel lists them), so their modification times say nothing there, and
#: the stale-build rule is a checkout's only.
WHEEL_BUILD = "_wheel_build.txt"


def pure_forced() -> bool:
    return os.environ.get(_ENV_PURE, "") not in ("", "0")


def _source_of(origin: str) -> Path:
    """``frame.cpython-311-x86_64-linux-gnu.so`` -> ``frame.py`` beside it."""
    p = Path(origin)
    return p.with_name(p.name.split(".", 1)[0] + ".py")


class _FreshBuildFinder(importlib.abc.MetaPathFinder):
    """For the compiled modules only: their extension module when it is newer than the source
    (and not RMQD_PURE), else the source."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES or path is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return spec
        if pure_forced():
            return importlib.util.spec_from_file_location(fullname, _source_of(spec.origin))
        if _from_wheel():
            return spec
        source = _source_of(spec.origin)
        try:
            stale = source.stat().st_mtime > Path(spec.origin).stat().st_mtime
        except OSError:  # no source beside it: the build is all there is
            return spec
        if stale:
            return importlib.util.spec_from_file_location(fullname, source)
        return spec


def _from_wheel() -> bool:
    return Path(__file__).with_name(WHEEL_BUILD).exists()


def install() -> None:
    """Put the finder first (once)."""
    if not any(isinstance(f, _FreshBuildFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _FreshBuildFinder())


def status() -> dict[str, str]:
    """``module -> "compiled" | "pure"`` for the modules imported so far (bench reports)."""
    out = {}
    for name in MODULES:
        mod = sys.modules.get(name)
        if mod is not None:
            origin = getattr(mod, "__file__", "") or ""
            out[name] = "pure" if origin.endswith(".py") else "compiled"
    return out


def load_pure(name: str) -> ModuleType:
    """A fresh, separate copy of a compiled module's plain-Python source (tests compare the two)."""
    mod = sys.modules.get(name) or importlib.import_module(name)
    origin = mod.__file__ or ""
    source = Path(origin) if origin.endswith(".py") else _source_of(origin)
    spec = importlib.util.spec_from_file_location(name + "__pure", source)
    assert spec is not None and spec.loader is not None
    pure = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = pure  # dataclasses look their module up while the class is made
    spec.loader.exec_module(pure)
    return pure


def _why_plain(name: str) -> str:
    """Why a compiled module runs as its source: edited after its build, or never built."""
    spec = importlib.util.find_spec(name)
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    if origin is None:
        return "not found"
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return "edited after its build" if origin.with_name(origin.stem + suffix).exists() else "not built"


def compiled_status() -> str:
    """One line for ``rmqd --version`` and the start-up log: ``compiled: 29 of 29 modules``, or
    ``plain Python: <why>``, or how many are compiled and why the others are not.

    A module imported already is judged by what was loaded; the others by what an import would load
    (this finder's choice), without importing them."""
    if pure_forced():
        return f"plain Python: {_ENV_PURE}=1"
    plain: dict[str, list[str]] = {}
    compiled = 0
    for name in MODULES:
        mod = sys.modules.get(name)
        if mod is not None:
            origin = getattr(mod, "__file__", "") or ""
        else:
            spec = importlib.util.find_spec(name)
            origin = (spec.origin or "") if spec is not None else ""
        if origin and not origin.endswith(".py"):
            compiled += 1
        else:
            plain.setdefault(_why_plain(name), []).append(name)
    if not plain:
        return f"compiled: {compiled} of {len(MODULES)} modules"
    note = Path(__file__).with_name(WHEEL_BUILD)
    if compiled == 0 and list(plain) == ["not built"]:
        why = note.read_text().strip() if note.exists() else "nothing compiled (pip install . compiles the modules)"
        return why if why.startswith("plain Python") else f"plain Python: {why}"
    reasons = "; ".join(f"{len(names)} {why if len(names) == 1 else why.replace('its', 'their')} "
                        f"({', '.join(n.removeprefix('rmqd.') for n in names)})"
                        for why, names in sorted(plain.items()))
    if compiled == 0:
        return f"plain Python: {reasons}"
    return f"compiled: {compiled} of {len(MODULES)} modules; plain Python: {reasons}"
