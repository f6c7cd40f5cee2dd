"""Shared fixtures for the Spark tests: fixture store paths and one local Spark session per module."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fixtures import CLEAN, CRASHED, require

if os.environ.get("RMQD_REQUIRE_ALL"):
    # `scripts/dev test` installs the spark extra: missing pieces fail here instead of skipping.
    import numpy  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401

__all__ = ["CLEAN", "CRASHED", "copy_store", "require_java"]  # the fixtures: made by scripts/fixtures


def copy_store(src: Path, dst: Path) -> Path:
    """A writable copy of a fixture store (the fixtures themselves are read-only)."""
    out = dst / src.name
    shutil.copytree(require(src / "store"), out)
    for p in out.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    out.chmod(0o755)
    return out


def require_java() -> None:
    """Spark needs Java 17: under the test command its absence fails; a bare pytest skips."""
    if shutil.which("java") is None:
        if os.environ.get("RMQD_REQUIRE_ALL"):
            pytest.fail("no Java on this machine: PySpark needs Java 17")
        pytest.skip("no Java on this machine: PySpark needs Java 17")


@pytest.fixture(scope="module")
def spark():
    """local[2], small memory, quiet; stopped at the end of the module."""
    pytest.importorskip("pyspark")
    require_java()
    from rmqd.spark.session import get_session
    session = get_session("local[2]", "rmqd-tests", driver_memory="512m",
                          conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2",
                                "spark.executor.memory": "512m"})
    yield session
    session.stop()
