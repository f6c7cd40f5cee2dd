"""Entry points behind ``rmqd spark verify`` and ``rmqd spark export``.

Both take the argument list after the sub-command and return the process exit code; they print
one clear line (never a traceback) on bad input:
  0  verified clean / exported
  1  verify found problems (each listed as file:offset)
  2  bad arguments or unreadable input (argparse's convention)
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from contextlib import contextmanager
from typing import Iterator, TextIO

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
EXPORT_KINDS = ("commitlog", "consumequeue", "index")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", default=None,
                   help="Spark master URL (default: spark-submit's, else local[*])")
    p.add_argument("--split-size", type=int, default=None, help="bytes per commit-log partition")
    p.add_argument("--max-hash-slot-num", type=int, default=None, help="index slots (default: from file size)")
    p.add_argument("--max-index-num", type=int, default=None, help="index entries (default: from file size)")


def _options(a: argparse.Namespace) -> dict[str, str]:
    o = {}
    if a.split_size:
        o["splitSize"] = str(a.split_size)
    if a.max_hash_slot_num:
        o["maxHashSlotNum"] = str(a.max_hash_slot_num)
    if a.max_index_num:
        o["maxIndexNum"] = str(a.max_index_num)
    return o


def _parse(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | int:
    try:
        return p.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return int(e.code or 0)


def _session(master: str | None, light_jvm: bool = False, jvm_log: str | None = None):
    """No --master: spark-submit's master, or spark-submit's own default (local[*]) when run
    as plain Python. ``light_jvm``: the job is Python tasks only (see spark.session)."""
    from rmqd.spark.session import get_session
    return get_session(master, light_jvm=light_jvm, jvm_log=jvm_log)


#: the modules of rmqd's spark extra that the jobs cannot run without
EXTRA_MODULES = ("pyspark", "pyarrow", "numpy")
INSTALL_HINT = "pip install 'rmqd[spark]'"


def missing_extra() -> str | None:
    """The first module of the spark extra that is not installed, or None."""
    import importlib.util
    for name in EXTRA_MODULES:
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):
            return name
    return None


def _fail(prog: str, e: Exception, jvm_log: "_JvmLog") -> int:
    """The one line for a job that failed (the Spark log kept and named when it has anything)."""
    if isinstance(e, ModuleNotFoundError):
        text = f"needs rmqd's spark extra: {INSTALL_HINT} (no module named {e.name!r})"
    else:
        text = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    kept = jvm_log.keep()
    print(f"{prog}: {text}" + (f" (Spark's log: {kept})" if kept else ""), file=sys.stderr)
    return EXIT_USAGE


class _JvmLog:
    """Where the JVM's stderr goes while a command runs: a temporary file, removed after a
    success, kept (and named in the error line) after a failure."""

    def __init__(self) -> None:
        import tempfile
        fd, self.path = tempfile.mkstemp(prefix="rmqd-spark-", suffix=".log")
        os.close(fd)

    def keep(self) -> str | None:
        try:
            return self.path if os.path.getsize(self.path) else None
        except OSError:
            return None

    def discard(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


@contextmanager
def _terminal() -> Iterator[TextIO]:
    """This process's stderr as it is now: the progress bar keeps drawing there while the JVM
    being started has file descriptor 2 pointed at its log (spark.session)."""
    try:
        stream = open(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
    except (AttributeError, OSError, ValueError):  # a stderr without a descriptor (captured in tests)
        yield sys.stderr
        return
    with stream:
        yield stream


def _check_extra(prog: str) -> bool:
    missing = missing_extra()
    if missing is not None:
        print(f"{prog}: needs rmqd's spark extra: {INSTALL_HINT} (no module named {missing!r})", file=sys.stderr)
        return False
    return True


def _is_store(path: str) -> bool:
    return (Path(path) / "commitlog").is_dir()


class ConfError(ValueError):
    """A broker.conf that cannot be used; the message names the file (and key)."""


# broker.conf keys that change what verify expects (each is also the data-source option it sets)
_CONF_OPTIONS = ("mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum")


def store_settings(conf: str) -> tuple[str, dict[str, str], str | None]:
    """What ``-c broker.conf`` means for verify, as ``rmqd store verify -c`` reads it: the store
    (storePathRootDir, else ./store as for ``rmqd serve -c``), the data-source options of the keys the file sets (consume-queue file
    size, index geometry; otherwise they are inferred from the files) and messageDelayLevel.

    Parsed with store/ and wire/ only (spark/ never imports broker/, and spark-submit ships only
    spark, store and wire): keys that are not store keys are left to the broker, a bad value of
    a store key is an error naming the file and key."""
    from rmqd.store.config import ConfigValueError, MessageStoreConfig, apply_properties
    from rmqd.wire.bodies import parse_properties
    try:
        text = Path(conf).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfError(f"config file {conf} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfError(f"cannot read config file {conf}: {e}") from None
    props = parse_properties(text)
    cfg = MessageStoreConfig()
    try:
        apply_properties(cfg, props)
    except ConfigValueError as e:
        raise ConfError(f"{conf}: bad value for {e.key}: {e}") from None
    # the store `rmqd serve -c` and `rmqd store verify -c` use: a file without the key means ./store
    root = os.path.expanduser(cfg.storePathRootDir) if "storePathRootDir" in props else "./store"
    if cfg.storePathCommitLog and Path(cfg.storePathCommitLog).expanduser().resolve() != \
            (Path(root) / "commitlog").resolve():
        raise ConfError(f"{conf}: storePathCommitLog={cfg.storePathCommitLog} is outside storePathRootDir; "
                        f"spark verify reads STORE/commitlog only")
    values = {"mappedFileSizeConsumeQueue": cfg.get_mapped_file_size_consume_queue(),  # whole units, as 4.9.8
              "maxHashSlotNum": cfg.maxHashSlotNum, "maxIndexNum": cfg.maxIndexNum}
    options = {key: str(values[key]) for key in _CONF_OPTIONS if key in props}
    return root, options, (cfg.messageDelayLevel if "messageDelayLevel" in props else None)


def verify_main(argv: list[str] | None = None) -> int:
    """``rmqd spark verify [STORE | -c broker.conf] [--against OTHER] [--master URL] ...``"""
    p = argparse.ArgumentParser(prog="rmqd spark verify", description="Check a RocketMQ store on Spark.")
    p.add_argument("store", nargs="?", default=None,
                   help="store directory (holds commitlog/, consumequeue/, index/); default: storePathRootDir of -c")
    p.add_argument("-c", "--config", default=None,
                   help="broker.conf the store was written with (storePathRootDir, mappedFileSizeConsumeQueue, "
                        "maxHashSlotNum, maxIndexNum, messageDelayLevel)")
    p.add_argument("--against", default=None, help="another store that must hold the same messages")
    p.add_argument("--max-problems", type=int, default=None, help="list at most N problems per check")
    p.add_argument("--ignore-property", action="append", default=[],
                   help="property to ignore in --against comparisons (repeatable)")
    p.add_argument("--checks", default=None,
                   help="comma-separated subset of records,consumequeue,index,against (default: all)")
    p.add_argument("--message-delay-level", default=None,
                   help="broker's messageDelayLevel (for SCHEDULE_TOPIC_XXXX tag codes)")
    _common(p)
    a = _parse(p, argv)
    if isinstance(a, int):
        return a
    if not _check_extra("rmqd spark verify"):
        return EXIT_USAGE
    conf_options: dict[str, str] = {}
    if a.config is not None:
        try:
            root, conf_options, delay = store_settings(a.config)
        except ConfError as e:
            print(f"rmqd spark verify: {e}", file=sys.stderr)
            return EXIT_USAGE
        a.store = a.store or root
        a.message_delay_level = a.message_delay_level or delay
    if a.store is None:
        print("rmqd spark verify: give the store directory or -c broker.conf", file=sys.stderr)
        return EXIT_USAGE
    for s in [a.store] + ([a.against] if a.against else []):
        if not _is_store(s):
            print(f"rmqd spark verify: {s}: not a RocketMQ store directory (no commitlog/)", file=sys.stderr)
            return EXIT_USAGE
    jvm_log = _JvmLog()
    try:
        from rmqd.spark.job_progress import SparkTaskProgress
        from rmqd.spark.verify import CHECKS, format_report, verify_store
        from rmqd.store.progress import ProgressReporter
        checks = CHECKS if a.checks is None else [c.strip() for c in a.checks.split(",") if c.strip()]
        with _terminal() as term, ProgressReporter(f"verifying {a.store}", unit="tasks", stream=term) as progress:
            progress.status("starting Spark")
            # without --against every check is a Python task: a JVM that does not JIT-compile hard
            spark = _session(a.master, light_jvm=not a.against or "against" not in checks, jvm_log=jvm_log.path)
            progress.status("")
            # absolute: the data source plans its partitions in a Python worker, whose working
            # directory is not necessarily this one (a relative storePathRootDir=./store)
            with SparkTaskProgress(spark.sparkContext, progress):
                report = verify_store(spark, os.path.abspath(a.store),
                                      against=a.against and os.path.abspath(a.against),
                                      options={**conf_options, **_options(a)}, delay_levels=a.message_delay_level,
                                      ignore_properties=a.ignore_property, limit=a.max_problems, checks=checks)
    except Exception as e:  # noqa: BLE001 -- the CLI contract is one line, no traceback
        return _fail("rmqd spark verify", e, jvm_log)
    jvm_log.discard()
    print(format_report(report))
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def export_main(argv: list[str] | None = None) -> int:
    """``rmqd spark export STORE OUT [--format parquet] [--kind all|commitlog|consumequeue|index]``"""
    p = argparse.ArgumentParser(prog="rmqd spark export", description="Export a RocketMQ store for analytics.")
    p.add_argument("store", help="store directory")
    p.add_argument("out", help="output directory (one sub-directory per kind)")
    p.add_argument("--format", default="parquet", choices=("parquet", "orc", "json"))
    p.add_argument("--kind", default="all", choices=("all",) + EXPORT_KINDS)
    p.add_argument("--overwrite", action="store_true", help="replace existing output")
    _common(p)
    a = _parse(p, argv)
    if isinstance(a, int):
        return a
    if not _check_extra("rmqd spark export"):
        return EXIT_USAGE
    if not _is_store(a.store):
        print(f"rmqd spark export: {a.store}: not a RocketMQ store directory (no commitlog/)", file=sys.stderr)
        return EXIT_USAGE
    kinds = EXPORT_KINDS if a.kind == "all" else (a.kind,)
    jvm_log = _JvmLog()
    try:
        from rmqd.spark.export import export_store
        from rmqd.spark.job_progress import SparkTaskProgress
        from rmqd.store.progress import ProgressReporter
        with _terminal() as term, ProgressReporter(f"exporting {a.store}", unit="tasks", stream=term) as progress:
            progress.status("starting Spark")
            spark = _session(a.master, jvm_log=jvm_log.path)
            progress.status("")
            with SparkTaskProgress(spark.sparkContext, progress):
                counts = export_store(spark, a.store, a.out, kinds=kinds, fmt=a.format, overwrite=a.overwrite,
                                      options=_options(a))
    except Exception as e:  # noqa: BLE001
        return _fail("rmqd spark export", e, jvm_log)
    jvm_log.discard()
    for kind, (path, n) in counts.items():
        print(f"{kind:<13} {n:>12} rows  {path}")
    return EXIT_OK


if __name__ == "__main__":  # python -m rmqd.spark.cli verify|export ...
    cmds = {"verify": verify_main, "export": export_main}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print("usage: python -m rmqd.spark.cli verify|export ...", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    sys.exit(cmds[sys.argv[1]](sys.argv[2:]))
