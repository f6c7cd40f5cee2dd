"""The official Apache RocketMQ Java client 4.9.8 (org.apache.rocketmq:rocketmq-client, with
rocketmq-acl's AclClientRPCHook) for the compat harness, in the registry shape of
compat_tests/drivers/<name>/client.py.  Built by setup.sh (see flavour.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _flavour_module():
    spec = importlib.util.spec_from_file_location("compat_java_flavour", Path(__file__).with_name("flavour.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_F = _flavour_module()
FLAVOUR = "4"

NAME = "java"
LABEL = f"Java rocketmq-client {_F.client_version(FLAVOUR)}"


def problem() -> str | None:
    return _F.problem(FLAVOUR)


def command(case_file: Path) -> list[str]:
    return _F.command(FLAVOUR, case_file)


def has_api(feature: str) -> bool | str:
    """The Java client has every API the cases use (it is the reference client)."""
    return True
