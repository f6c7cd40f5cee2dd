"""Where the real-RocketMQ fixtures are, for every test that compares rmqd with Apache's output.

The fixtures (a clean and a SIGKILLed store of an Apache broker, a Remoting capture) are made by
Apache RocketMQ itself on this machine: scripts/fixtures/generate.py, run by the set-up
(`scripts/dev setup --all`, or scripts/fixtures/setup.sh alone), keeps them in a cache directory
keyed by a hash of the generator's inputs. ``RMQD_FIXTURES`` names another directory holding the
same three sub-directories (e.g. a copy taken elsewhere).

Paths resolve without touching the disk; `require()` (or reading `facts()`) is where a missing
fixture is reported: a skip for a developer's ad-hoc run, a failure under `scripts/dev test`
(RMQD_REQUIRE_ALL=1), never a FileNotFoundError deep inside a test. Imports nothing of rmqd.
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "scripts" / "fixtures" / "generate.py"
SETUP_COMMAND = "scripts/fixtures/setup.sh (or scripts/dev setup --all)"

CLEAN_NAME = "rocketmq-4.9-store"
CRASHED_NAME = "rocketmq-4.9-store-crashed"
CAPTURE_NAME = "java-4.9.8-remoting-capture"


@cache
def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rmqd_fixture_generator", GENERATOR)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@cache
def fixtures_root() -> Path:
    """RMQD_FIXTURES, else the generator's cache directory for this tree."""
    if os.environ.get("RMQD_FIXTURES"):
        return Path(os.environ["RMQD_FIXTURES"])
    return Path(_generator().fixtures_dir())


FIXTURES = fixtures_root()
CLEAN = FIXTURES / CLEAN_NAME
CRASHED = FIXTURES / CRASHED_NAME
CAPTURE = FIXTURES / CAPTURE_NAME


def _problem(path: Path) -> str | None:
    if not os.environ.get("RMQD_FIXTURES") and not (FIXTURES / "COMPLETE").is_file():
        return f"the Apache RocketMQ fixtures are not made for this tree ({FIXTURES}): run {SETUP_COMMAND}"
    if not path.exists():
        return f"fixture missing: {path} (RMQD_FIXTURES={os.environ.get('RMQD_FIXTURES')})"
    return None


def require(path: Path) -> Path:
    """`path` (a fixture or a file in one) when it is there; otherwise a skip, or under
    RMQD_REQUIRE_ALL a failure, naming the set-up command. Callable at module level."""
    problem = _problem(path)
    if problem is not None:
        if os.environ.get("RMQD_REQUIRE_ALL"):
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem, allow_module_level=True)
    return path


@cache
def facts(fixture: Path) -> dict[str, Any]:
    """The fixture's facts.json: what Apache reported or left while the fixture was made."""
    result: dict[str, Any] = json.loads(require(fixture / "facts.json").read_text())
    return result


@cache
def manifest(fixture: Path, name: str = "manifest.jsonl") -> tuple[dict[str, Any], ...]:
    """What the client sent, one row per message in send order (traffic-manifest.jsonl too)."""
    with open(require(fixture / name)) as f:
        return tuple(json.loads(line) for line in f if line.strip())


def sent(fixture: Path, kind: str) -> dict[str, Any]:
    """The first manifest row of that kind (e.g. "tx-commit", "retry-fail-always")."""
    return next(m for m in manifest(fixture) if m["kind"] == kind)


@cache
def commitlog_records(fixture: Path) -> tuple[dict[str, Any], ...]:
    """Every MESSAGE of the fixture's commit log as RocketMQ's MessageDecoder read it (dump/)."""
    with gzip.open(require(fixture / "dump" / "commitlog-dump.jsonl.gz"), "rt") as f:
        return tuple(r for r in map(json.loads, f) if r["record"] == "MESSAGE")


def stored(fixture: Path, topic: str, uniq: str | None = None, **fields: Any) -> dict[str, Any]:
    """The first (lowest offset) stored record of `topic` with that UNIQ_KEY and field values."""
    for r in commitlog_records(fixture):
        if r["topic"] == topic and (uniq is None or r["properties"].get("UNIQ_KEY") == uniq) \
                and all(r.get(k) == v for k, v in fields.items()):
            return r
    raise LookupError(f"no {topic} record with UNIQ_KEY {uniq} and {fields} in {fixture}")
