"""Issue 11: a short kill loop (scripts/killloop.py): `rmqd serve` under SYNC_FLUSH with
pipelined producers, SIGKILLed three times at random moments; every acknowledged message is
there exactly once, byte-exact, at the queue offset its acknowledgement named, and every
topic and subscription group whose creation was acknowledged is still configured."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_acknowledged_messages_survive_sigkill_exactly_once(tmp_path):
    _load("fuzz_live")
    killloop = _load("killloop")
    res = killloop.run(cycles=3, seed=7, workdir=tmp_path, producers=3, window=16)
    assert res.cycles == 3 and len(res.restart_s) == 3
    assert len(res.acked) > 300, "the producers hardly got going"
    assert res.missing == [] and res.duplicates == [] and res.moved == []
    assert res.found == len(res.acked)
    assert res.topics_acked and res.groups_acked, "no topic or group creation was acknowledged"
    assert res.config_missing == []
    assert res.verify == "ok"
    assert res.ok()
