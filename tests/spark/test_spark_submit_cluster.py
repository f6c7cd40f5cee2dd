"""spark/ unchanged on a cluster: a Spark standalone master and worker on 127.0.0.1, and
``spark-submit --py-files rmqd.zip spark/cli.py verify|export`` exactly as spark/__init__.py
documents it.

The driver and the executors run an interpreter that cannot import rmqd from the venv (``-S``
skips the editable install's .pth; only the third-party packages are put on PYTHONPATH), so
every rmqd module they use comes from the shipped zip, as on machines where rmqd is not
installed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from rmqd.spark import scan  # noqa: E402
from support import REPO, free_port, rmqd_command  # noqa: E402
from fixtures import facts  # noqa: E402
from tests.spark.conftest import CLEAN, require_java  # noqa: E402

pytestmark = pytest.mark.timeout(420)

START_TIMEOUT = 90.0
JOB_TIMEOUT = 240.0


class Cluster(NamedTuple):
    url: str  # spark://127.0.0.1:PORT
    env: dict[str, str]  # for spark-submit: SPARK_HOME, and PYSPARK_*PYTHON without rmqd
    workdir: Path
    rmqd_zip: Path


def _spark_home() -> Path:
    import pyspark
    return Path(pyspark.__file__).resolve().parent


def _python_without_rmqd(tmp: Path) -> Path:
    """A wrapper around this interpreter that sees numpy/pyarrow/pyspark but not rmqd."""
    site = sysconfig.get_paths()["purelib"]
    w = tmp / "python-no-rmqd"
    w.write_text("#!/bin/sh\n"
                 f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}" exec "{sys.executable}" -S "$@"\n')
    w.chmod(0o755)
    return w


def _rmqd_zip(tmp: Path) -> Path:
    """The documented ``rmqd spark package rmqd.zip``, run as a user runs it."""
    out = tmp / "rmqd.zip"
    r = subprocess.run(rmqd_command("spark", "package", str(out)), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    names = zipfile.ZipFile(out).namelist()
    assert "rmqd/__init__.py" in names and "rmqd/spark/cli.py" in names
    assert {n.split("/")[1] for n in names if n.count("/") > 1} == {"spark", "store", "wire"}
    return out


def _start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    fh = open(log, "wb")
    try:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    finally:
        fh.close()


def _wait_for(log: Path, needle: str, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if needle in text:
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"{what} did not start ({needle!r} not in its log):\n{log.read_text(errors='replace')[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One master and one 2-core worker, both stopped after; rmqd zipped once for every job."""
    require_java()
    tmp = tmp_path_factory.mktemp("cluster")
    home = _spark_home()
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp),
               SPARK_DAEMON_MEMORY="384m", SPARK_WORKER_DIR=str(tmp / "work"))
    env.pop("PYTHONPATH", None)
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(home / "bin" / "spark-class")
    master = _start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(free_port())], tmp / "master.log", env)
    worker = None
    try:
        _wait_for(tmp / "master.log", "I have been elected leader", master, "the Spark master")
        worker = _start([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--cores", "2", "--memory", "1g", "--webui-port", str(free_port()),
                         "--work-dir", str(tmp / "work"), url], tmp / "worker.log", env)
        _wait_for(tmp / "worker.log", "Successfully registered with master", worker, "the Spark worker")
        py = _python_without_rmqd(tmp)
        env = dict(env, PYSPARK_PYTHON=str(py), PYSPARK_DRIVER_PYTHON=str(py))
        yield Cluster(url, env, tmp, _rmqd_zip(tmp))
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


def _submit(cluster: Cluster, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(_spark_home() / "bin" / "spark-submit"), "--master", cluster.url, "--py-files", str(cluster.rmqd_zip),
           "--driver-memory", "512m", "--executor-memory", "512m", "--total-executor-cores", "2",
           "--conf", "spark.ui.enabled=false", str(REPO / "spark" / "cli.py"), *args]
    return subprocess.run(cmd, cwd=cluster.workdir, env=cluster.env, capture_output=True, text=True, errors="replace",
                          timeout=JOB_TIMEOUT)


def test_the_interpreter_cannot_import_rmqd_by_itself(cluster):
    r = subprocess.run([cluster.env["PYSPARK_PYTHON"], "-c", "import pyspark, pyarrow, numpy\nimport rmqd.spark.scan"],
                       cwd=cluster.workdir, env=cluster.env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "No module named 'rmqd'" in r.stderr, r.stderr


def test_verify_through_spark_submit(cluster):
    r = _submit(cluster, "verify", str(CLEAN / "store"), "--split-size", "300000")
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    # the summary table: every check with its count from the clean fixture (see test_spark_verify)
    records = facts(CLEAN)["commitlog"]["messages"]
    entries = sum(f["indexCount"] - 1 for f in facts(CLEAN)["index"])
    assert "record integrity" in r.stdout and str(records) in r.stdout, r.stdout
    assert str(entries) in r.stdout, r.stdout


def test_export_through_spark_submit(cluster, tmp_path):
    out = tmp_path / "out"
    r = _submit(cluster, "export", str(CLEAN / "store"), str(out), "--format", "parquet", "--kind", "commitlog")
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    records = facts(CLEAN)["commitlog"]["messages"]
    assert str(records) in r.stdout, r.stdout
    cols = ["physicalOffset", "topic", "queueId", "queueOffset", "body"]
    t = pq.read_table(out / "commitlog", columns=cols)
    direct = pa.Table.from_batches([b.select(cols) for sp in scan.plan_commitlog(CLEAN / "store")
                                    for b in scan.scan_commitlog(sp)])
    assert t.num_rows == direct.num_rows == records
    assert t.sort_by("physicalOffset").to_pylist() == direct.sort_by("physicalOffset").to_pylist()

