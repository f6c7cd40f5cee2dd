"""What `rmqd spark verify` shows a user off a terminal: its progress as plain lines, the report on
stdout, and none of Spark's own console output (the JVM's WARN lines and log4j notices go to a
temporary log, removed after a success)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.spark.conftest import CLEAN, require_java

pytest.importorskip("pyspark")
pytestmark = pytest.mark.timeout(300)


def test_spark_verify_shows_progress_and_keeps_spark_output_off_the_terminal(tmp_path):
    require_java()
    store = (CLEAN / "store").resolve()
    env = dict(os.environ, RMQD_PROGRESS_INTERVAL="0", TMPDIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-m", "rmqd", "spark", "verify", str(store), "--master", "local[2]"],
                            capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"rmqd spark verify {store}") and result.stdout.rstrip().endswith("OK")
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith(f"verifying {store}: ") and line.endswith(" tasks)") for line in lines), \
        result.stderr
    assert lines[-1].startswith(f"verifying {store}: 100% (")
    assert "WARN" not in result.stderr and "log4j" not in result.stderr
    assert not list(tmp_path.glob("rmqd-spark-*.log"))  # the JVM's log, removed after a success
