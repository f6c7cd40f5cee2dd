"""`scripts/bench` is a script, not a module: tests load it once per module under a name of its own."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"


@pytest.fixture(scope="module")
def bench():
    loader = importlib.machinery.SourceFileLoader("rmqd_bench_script", str(BENCH))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = mod  # its dataclasses look their module up while it runs
    try:
        loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(loader.name, None)
