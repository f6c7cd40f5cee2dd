"""``rmqd spark export``: write a store's messages, consume queues and index as columnar files."""
from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from rmqd.spark.session import read


def export_store(spark: SparkSession, store: str, out: str, *, kinds=("commitlog", "consumequeue", "index"),
                 fmt: str = "parquet", overwrite: bool = False, options: dict | None = None) -> dict[str, tuple[str, int]]:
    """Each kind to ``out/<kind>`` in ``fmt``; returns {kind: (path, rows written)}.

    The rows are counted from what was written, so the numbers are the export's, not a re-read of
    the store."""
    result = {}
    for kind in kinds:
        target = str(Path(out) / kind)
        df = read(spark, store, kind, **(options or {}))
        df.write.mode("overwrite" if overwrite else "errorifexists").format(fmt).save(target)
        result[kind] = (target, spark.read.format(fmt).load(target).count())
    return result
