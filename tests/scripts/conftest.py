"""`scripts/bench` and `scripts/bench_scale.py` are scripts, not modules: tests load each once
per module under a name of its own."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
BENCH = SCRIPTS / "bench"


def _load(path: Path, name: str) -> Iterator[ModuleType]:
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = mod  # its dataclasses look their module up while it runs
    try:
        loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(loader.name, None)


@pytest.fixture(scope="module")
def bench():
    yield from _load(BENCH, "rmqd_bench_script")


@pytest.fixture(scope="module")
def scale():
    yield from _load(SCRIPTS / "bench_scale.py", "rmqd_bench_scale_script")
