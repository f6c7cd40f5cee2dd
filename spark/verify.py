"""``rmqd spark verify``: prove a store is consistent (and, with --against, equal to another).

Checks 1-3 run as Python tasks on Spark (spark/verify_plan.py: the consume queues and index
files first, then one task per commit-log split matching its records against their units and
index entries), so only problems and counts cross into Spark; 4 joins DataFrames of the
``rocketmq`` data source:
1. record integrity -- magic codes, sizes, inner lengths, PHYSICALOFFSET, body CRC, the BLANK
   end-of-file record and the zero tail;
2. consume queues vs the commit log -- every unit points at a record of that topic and queue
   with the same size, queue offset and tag code; queue offsets contiguous; every dispatched
   record (not PREPARED/ROLLBACK) is in its queue (unless its queue's files expired);
3. index vs the commit log -- every ``topic#UNIQ_KEY`` and ``topic#KEY`` of every record (not
   ROLLBACK) is found through its hash slot's chain;
4. with ``against``: the two stores are laid out alike and hold the same messages queue by
   queue, in the same order (topic, queue, queue offset, body, properties, flag, sysFlag,
   reconsume times); timestamps, hosts and physical offsets may differ.
Every problem names ``file:offset`` (the file relative to its store directory).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from rmqd.spark import scan
from rmqd.spark.datasource import parse_options
from rmqd.spark.session import read
from rmqd.spark.verify_plan import run_checks

CHECKS = ("records", "consumequeue", "index", "against")


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    offset: int
    check: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}: [{self.check}] {self.problem}"


@dataclass
class CheckResult:
    name: str
    checked: int
    problems: list[Problem] = field(default_factory=list)
    note: str = ""
    total: int | None = None  # problems found, when more than the listed ones

    @property
    def found(self) -> int:
        return len(self.problems) if self.total is None else self.total


@dataclass
class VerifyReport:
    store: str
    against: str | None
    checks: list[CheckResult]

    @property
    def problems(self) -> list[Problem]:
        return [p for c in self.checks for p in c.problems]

    @property
    def ok(self) -> bool:
        return all(c.found == 0 for c in self.checks)


def _listed(name: str, checked: int, rows: list[tuple[str, int, str, str]], limit: int | None,
            note: str = "") -> CheckResult:
    """The problems in file/offset order; with a limit, only the first ``limit`` are listed and
    the total is counted."""
    probs = sorted(Problem(f, int(o), c, p) for f, o, c, p in rows)
    res = CheckResult(name, checked, probs[:limit] if limit else probs, note)
    if limit and len(probs) >= limit:
        res.total = len(probs)
    return res


def _result(name: str, checked: int, df: DataFrame, limit: int | None, note: str = "") -> CheckResult:
    """The problems of ``df`` in file/offset order; with a limit, only the first ``limit`` are
    listed and the total is counted."""
    ordered = df.orderBy("file", "offset", "problem")
    rows = (ordered.limit(limit) if limit else ordered).collect()
    res = CheckResult(name, checked, [Problem(r["file"], int(r["offset"]), r["check"], r["problem"]) for r in rows], note)
    if limit and len(rows) == limit:
        res.total = df.count()
    return res


def _physical(df: DataFrame) -> DataFrame:
    """The record's real position: file start offset + position in the file."""
    return df.withColumn("pos", F.col("file").cast("long") + F.col("filePos"))


def _lit_problem(check: str, file_col, offset_col, message_col) -> list:
    return [file_col.alias("file"), offset_col.cast("long").alias("offset"), F.lit(check).alias("check"),
            message_col.alias("problem")]


# --------------------------------------------------------------------------------------------
# the store's own checks: Python tasks (spark/verify_plan.py); only problems and counts return

RECORD_CHECKS = ("record", "body-crc", "blank-tail")
QUEUE_CHECKS = ("cq-unit", "cq-order", "cq-missing", "cq-file")
INDEX_CHECKS = ("index", "index-missing")


def store_checks(spark: SparkSession, store: str, options: dict, delay_levels: str | None, checks: set[str],
                 limit: int | None) -> list[CheckResult]:
    """Record integrity, consume queues vs commit log and index vs commit log, as asked."""
    opts = {**options, "path": store}
    if delay_levels:
        opts["messageDelayLevel"] = delay_levels
    found = run_checks(spark.sparkContext, parse_options(opts), checks)

    def rows(kinds: tuple[str, ...]) -> list[tuple[str, int, str, str]]:
        return [p for p in found.problems if p[2] in kinds]

    results = []
    if "records" in checks:
        results.append(_listed("record integrity", found.records, rows(RECORD_CHECKS), limit))
    if "consumequeue" in checks:
        results.append(_listed("consume queues vs commit log", found.units, rows(QUEUE_CHECKS), limit))
    if "index" in checks:
        index_rows = rows(INDEX_CHECKS)
        if found.index_entries == 0 and not index_rows:
            results.append(CheckResult("index vs commit log", 0, [], note="no index entries: skipped"))
        else:
            results.append(_listed("index vs commit log", found.index_keys, index_rows, limit))
    return results


# --------------------------------------------------------------------------------------------
# --against


def describe_layout(store: str) -> dict[str, object]:
    """What two RocketMQ stores must share to be 'laid out alike' (directory listing only)."""
    root = Path(store)
    cl = scan.commitlog_files(root)
    cq = scan.queue_files(root)
    ix = scan.index_files(root)
    cl_sizes = Counter(s for _n, _p, _b, s in cl)
    cfg = root / "config"
    return {
        "commitlog file size": cl_sizes.most_common(1)[0][0] if cl_sizes else None,
        "commitlog file names": "20-digit start offsets" if cl else None,
        "consume queues (topic/queueId)": sorted({f"{f.topic}/{f.queue_id}" for f in cq}),
        "consume queue file size": scan.infer_queue_file_size(cq) or None,
        "index file size": Counter(r.size for r in ix).most_common(1)[0][0] if ix else None,
        "checkpoint": (root / "checkpoint").stat().st_size if (root / "checkpoint").is_file() else None,
        "config files": sorted(p.name for p in cfg.iterdir() if p.suffix == ".json") if cfg.is_dir() else None,
    }


def check_layout(a: str, b: str) -> CheckResult:
    la, lb = describe_layout(a), describe_layout(b)
    probs = []
    notes = []
    for k in la:
        if k == "config files" and (la[k] is None or lb[k] is None):
            # a store written without its broker (e.g. by a tool) has no config/: nothing to compare
            if la[k] != lb[k]:
                notes.append(f"config/ absent in {'this' if la[k] is None else 'the other'} store, not compared")
            continue
        if la[k] != lb[k]:
            va, vb = la[k], lb[k]
            if isinstance(va, list) and isinstance(vb, list):
                only_a = sorted(set(va) - set(vb))
                only_b = sorted(set(vb) - set(va))
                detail = f"only in this store: {only_a[:10]}; only in the other: {only_b[:10]}"
            else:
                detail = f"{va} here, {vb} in the other store"
            probs.append(Problem(".", 0, "layout", f"{k} differ: {detail}"))
    return CheckResult("layout alike (--against)", len(la), probs, note="; ".join(notes))


def _logical(records: DataFrame, ignore: list[str]) -> DataFrame:
    props = F.col("properties")
    if ignore:
        props = F.map_filter(props, lambda k, v: ~k.isin(*ignore))
    w = Window.partitionBy("topic", "queueId", "queueOffset").orderBy("pos")
    return records.select(
        "topic", "queueId", "queueOffset", "pos", "file", "filePos", "flag", "sysFlag", "reconsumeTimes",
        F.sha2("body", 256).alias("bodySha"), F.array_sort(F.map_entries(props)).alias("props"),
    ).withColumn("dup", F.row_number().over(w))


def check_content(a: DataFrame, b: DataFrame, ignore: list[str], limit: int | None) -> CheckResult:
    la = _logical(a, ignore).alias("a")
    lb = _logical(b, ignore).alias("b")
    key = ["topic", "queueId", "queueOffset", "dup"]
    j = la.join(lb, [F.col(f"a.{k}") == F.col(f"b.{k}") for k in key], "full_outer")
    loc_a = F.concat_ws("/", F.lit(scan.COMMITLOG_DIR), F.col("a.file"))
    loc_b = F.concat_ws("", F.lit(scan.COMMITLOG_DIR + "/"), F.col("b.file"), F.lit(":"), F.col("b.filePos").cast("string"))
    only_a = j.where(F.col("b.topic").isNull()).select(*_lit_problem(
        "content", loc_a, F.col("a.filePos"),
        F.format_string("%s/%d queue offset %d is not in the other store", F.col("a.topic"), F.col("a.queueId"), F.col("a.queueOffset"))))
    only_b = j.where(F.col("a.topic").isNull()).select(*_lit_problem(
        "content", F.concat_ws("", F.lit("(other) "), F.lit(scan.COMMITLOG_DIR + "/"), F.col("b.file")), F.col("b.filePos"),
        F.format_string("%s/%d queue offset %d is only in the other store", F.col("b.topic"), F.col("b.queueId"), F.col("b.queueOffset"))))
    both = j.where(F.col("a.topic").isNotNull() & F.col("b.topic").isNotNull())
    diffs = []
    for name in ("bodySha", "props", "flag", "sysFlag", "reconsumeTimes"):
        diffs.append(F.when(~F.col(f"a.{name}").eqNullSafe(F.col(f"b.{name}")), F.lit(name.replace("bodySha", "body").replace("props", "properties"))))
    differ = both.select("*", F.concat_ws(", ", *diffs).alias("fields")).where(F.col("fields") != "")
    diff_p = differ.select(*_lit_problem(
        "content", loc_a, F.col("a.filePos"),
        F.format_string("%s/%d queue offset %d differs from the other store's record at %s in: %s",
                        F.col("a.topic"), F.col("a.queueId"), F.col("a.queueOffset"), loc_b, F.col("fields"))))
    return _result("same messages (--against)", a.count(), only_a.unionByName(only_b).unionByName(diff_p), limit)


# --------------------------------------------------------------------------------------------


# the commit-log columns --against compares (the rest are never computed: see spark/datasource.py)
_COMPARED_COLUMNS = ("file", "filePos", "topic", "queueId", "queueOffset", "sysFlag", "properties", "flag",
                     "reconsumeTimes", "body")


def _compared(spark: SparkSession, store: str, options: dict) -> DataFrame:
    opts = dict(options)
    opts.update(body="true", checkCrc="false")
    return _physical(read(spark, store, "commitlog", _COMPARED_COLUMNS, **opts))


def verify_store(spark: SparkSession, store: str, *, against: str | None = None, options: dict | None = None,
                 delay_levels: str | None = None, ignore_properties: list[str] | None = None,
                 limit: int | None = None, checks: Iterable[str] = CHECKS) -> VerifyReport:
    """Run the ``checks`` (default: all) on ``store`` (and the comparison with ``against``);
    problems are listed in file/offset order, at most ``limit`` per check (None = all)."""
    checks = set(checks)
    if checks - set(CHECKS):
        raise ValueError(f"unknown checks {sorted(checks - set(CHECKS))}; known: {', '.join(CHECKS)}")
    for s in [store] + ([against] if against else []):
        if not (Path(s) / scan.COMMITLOG_DIR).is_dir():
            raise FileNotFoundError(f"{s}: not a RocketMQ store directory (no {scan.COMMITLOG_DIR}/)")
    options = dict(options or {})
    results = store_checks(spark, store, options, delay_levels, checks, limit)
    if against and "against" in checks:
        results.append(check_layout(store, against))
        a = _compared(spark, store, options)
        b = _compared(spark, against, options)
        results.append(check_content(a, b, list(ignore_properties or []), limit))
    return VerifyReport(store, against, results)


def format_report(report: VerifyReport) -> str:
    """The summary table, then one line per problem."""
    w = max(len(c.name) for c in report.checks)
    lines = [f"rmqd spark verify {report.store}" + (f" --against {report.against}" if report.against else ""),
             f"{'check'.ljust(w)}  {'checked':>10}  {'problems':>8}  result"]
    for c in report.checks:
        res = "FAILED" if c.found else ("skipped" if c.checked == 0 else "ok")
        lines.append(f"{c.name.ljust(w)}  {c.checked:>10}  {c.found:>8}  {res}" + (f" ({c.note})" if c.note else ""))
    for c in report.checks:
        lines += [str(p) for p in c.problems]
        if c.found > len(c.problems):
            lines.append(f"... {c.found - len(c.problems)} more {c.name} problem(s) not listed")
    total = sum(c.found for c in report.checks)
    lines.append("OK" if report.ok else f"FAILED: {total} problem(s)")
    return "\n".join(lines)
