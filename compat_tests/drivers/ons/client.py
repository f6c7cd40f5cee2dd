"""Node ali-ons (npm) for the compat harness, in the registry shape of
compat_tests/drivers/<name>/client.py.

The driver itself stays at drivers/ons_client.js; ali-ons is installed by `npm install` in
compat_tests/ (package.json, package-lock.json).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from compat_harness import api_gap

DRIVERS = Path(__file__).resolve().parent.parent
DRIVER = DRIVERS / "ons_client.js"
PACKAGE = DRIVERS.parent / "node_modules" / "ali-ons" / "package.json"


def _version() -> str:
    try:
        return json.loads(PACKAGE.read_text())["version"]
    except Exception:  # the matrix header only
        return "?"


NAME = "ons"
LABEL = f"Node ali-ons {_version()}"

# ali-ons' public API: Producer.send (sync, one message) and a push Consumer with tag
# subscriptions; checked in its lib/ (producer, consumer).
_NO_API = {
    "oneway": "ali-ons has no oneway send API (only Producer.send)",
    "batch": "ali-ons has no batch send API",
    "pull": "ali-ons has no pull consumer API",
    "orderly": "ali-ons has no orderly send/consume API",
    "transaction": "ali-ons has no transactional producer",
    "query": "ali-ons has no queryMessage API",
    "view": "ali-ons has no viewMessage API",
}


def problem() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not PACKAGE.is_file():
        return "ali-ons is not installed (cd compat_tests && npm install)"
    return None


def command(case_file: Path) -> list[str]:
    return ["node", str(DRIVER), str(case_file)]


def has_api(feature: str) -> bool | str:
    return api_gap(_NO_API, feature)
