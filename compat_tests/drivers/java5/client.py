"""The 5.x Remoting Java client (org.apache.rocketmq:rocketmq-client 5.3.x, which carries
AclClientRPCHook itself) for the compat harness, in the registry shape of
compat_tests/drivers/<name>/client.py.  Same driver source as drivers/java/ (see its flavour.py),
compiled by drivers/java/setup.sh against pom-5.xml."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _flavour_module():
    spec = importlib.util.spec_from_file_location("compat_java_flavour", Path(__file__).resolve().parent.parent / "java" / "flavour.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_F = _flavour_module()
FLAVOUR = "5"

NAME = "java5"
LABEL = f"Java 5.x Remoting rocketmq-client {_F.client_version(FLAVOUR)}"


def problem() -> str | None:
    return _F.problem(FLAVOUR)


def command(case_file: Path) -> list[str]:
    return _F.command(FLAVOUR, case_file)


def has_api(feature: str) -> bool | str:
    """The Java client has every API the cases use (it is the reference client)."""
    return True
