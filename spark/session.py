"""A SparkSession with the ``rocketmq`` data source registered.

Local mode by default (``local[2]``); ``master`` may be any Spark master URL (for a cluster,
run through spark-submit so the rmqd packages reach the executors, see spark/datasource.py).
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterable, Iterator

from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from rmqd.spark.datasource import RocketMQDataSource
from rmqd.spark.schemas import SCHEMAS


# Driver JVM flags for sessions whose work is all in Python tasks (rmqd spark verify without
# --against): there the JVM only schedules a few tasks and moves pickled bytes, and most of its
# CPU went to C2 compiling (and G1's threads). C1 only and the serial collector: on 2026-11-25
# (1 GiB store, local[2]) session start 9.6 -> 4.9 JVM CPU s, the first verify 2.1 -> 1.0, later
# ones 0.5-0.9 -> 0.25-0.3. Not for DataFrame work: a full scan's JVM took 2.6-3.1 -> 4.2-4.6 s.
LIGHT_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@contextmanager
def _stderr_to(path: str | None) -> Iterator[None]:
    """While the block runs, file descriptor 2 is ``path`` (appended): a JVM started inside
    keeps it as its stderr, and so do the Python workers it forks."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        os.close(fd)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def get_session(master: str | None = None, app_name: str = "rmqd-spark", *,
                driver_memory: str | None = None, conf: dict[str, str] | None = None,
                light_jvm: bool = False, jvm_log: str | None = None) -> SparkSession:
    """Build (or reuse) the session. Python workers run the interpreter running this code, so
    they import the same rmqd packages. ``light_jvm``: the driver JVM starts with
    LIGHT_JVM_OPTIONS (only when this call starts it), for jobs of Python tasks only.
    ``jvm_log``: a JVM this call starts writes its stderr there (Spark's WARN lines, the JVM's
    own notices, the workers' tracebacks) instead of on the terminal."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup warnings in local mode
    b = SparkSession.builder.appName(app_name)
    if master:
        b = b.master(master)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.session.timeZone": "UTC",
        "spark.python.worker.reuse": "true",
        # Python workers talk to their JVM over a Unix domain socket (Spark >= 4.1; an unknown
        # key, so ignored, on 4.0): over loopback TCP each task also waited ~30 ms with both
        # ends idle; on 2026-11-25 (local[2]) a trivial task took 55 ms per core, 23 with it.
        "spark.python.unix.domain.socket.enabled": "true",
    }
    if driver_memory:
        settings["spark.driver.memory"] = driver_memory
    conf = dict(conf or {})
    if light_jvm:
        own = conf.pop("spark.driver.extraJavaOptions", "")
        settings["spark.driver.extraJavaOptions"] = f"{LIGHT_JVM_OPTIONS} {own}".strip()
    settings.update(conf)
    for k, v in settings.items():
        b = b.config(k, v)
    launching = SparkContext._active_spark_context is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    with _stderr_to(jvm_log if launching else None):
        spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(RocketMQDataSource)
    return spark


def read(spark: SparkSession, store: str, kind: str, columns: Iterable[str] | None = None, **options: str):
    """``spark.read.format("rocketmq")`` with ``kind`` and string options; ``columns`` names the
    only columns to produce (passed as a schema: the rest are never computed)."""
    r = spark.read.format("rocketmq").option("kind", kind)
    if columns is not None:
        full = SCHEMAS[kind]
        r = r.schema(StructType([full[c] for c in columns]))
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(str(store))
