"""The Apache reference column: the official Java 4.9.8 client runs the compat cases against
Apache RocketMQ itself (compat_tests/apache_rocketmq.py: name server + broker from Maven Central)
and against rmqd in the same run, both brokers configured alike.  Every case must come out the
same on both; a disagreement fails unless APACHE_DIFFERENCES lists it with its explanation.  A
case that fails on both fails too (it is then the case, not rmqd, that is wrong for this client).

The cases are the client cases of test_compat_clients, test_compat_semantics,
test_compat_features and test_compat_request_reply, called with a Session bound to either broker; the two runs of a case go
concurrently (different topics, groups and brokers).  Restart/SIGKILL cases are not in this
column: they start and kill their own rmqd.
"""

from __future__ import annotations

import threading
import traceback
from pathlib import Path
from typing import Callable, Iterator

import pytest

import compat_harness as harness
import test_compat_clients
import test_compat_features
import test_compat_request_reply
import test_compat_semantics
from apache_rocketmq import LABEL as APACHE_LABEL
from apache_rocketmq import ApacheRocketMQ, apache_problem
from compat_harness import RmqdServer
from compat_session import APACHE_RESULTS, EXTERNAL_NAMESRV, Session

pytestmark = pytest.mark.timeout(600)

CLIENT = "java"
# Same on both brokers: SQL92 filtering on, half messages checked every 2 s, small commit-log files.
BROKER_CONF = {
    "enablePropertyFilter": "true",
    "transactionTimeOut": "2000",
    "transactionCheckInterval": "2000",
    "mappedFileSizeCommitLog": str(4 * 1024 * 1024),
}
# case name -> why rmqd's result deliberately differs from Apache's (none today)
APACHE_DIFFERENCES: dict[str, str] = {}


def _cases() -> dict[str, Callable[[Session], None]]:
    out: dict[str, Callable[[Session], None]] = {}
    for mod in (test_compat_clients, test_compat_semantics, test_compat_features, test_compat_request_reply):
        for name in sorted(dir(mod), key=lambda n: getattr(getattr(mod, n), "__code__", None)
                           and getattr(mod, n).__code__.co_firstlineno or 0):
            fn = getattr(mod, name)
            marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "compat_case"]
            if name.startswith("test_") and marks:
                out[marks[0].args[0]] = fn
    return out


CASES = _cases()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Apache RocketMQ and rmqd, started side by side; name server address by column."""
    if EXTERNAL_NAMESRV:
        pytest.skip("COMPAT_NAMESRV is set: this module starts its own brokers")
    for problem in (apache_problem(), harness.client_problem(CLIENT)):
        if problem:
            harness.missing(problem)
    base = tmp_path_factory.mktemp("apache-vs-rmqd")
    conf = base / "rmqd-broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in BROKER_CONF.items()))
    apache = ApacheRocketMQ(base / "apache", broker_conf=dict(BROKER_CONF))
    rmqd = RmqdServer(store=base / "rmqd" / "store", log_path=base / "rmqd.log", conf=conf)
    (base / "rmqd").mkdir()
    with harness.side_by_side(apache, rmqd, join_s=120):
        yield {APACHE_LABEL: apache.namesrv_addr, "rmqd": rmqd.namesrv}
    code = rmqd.stop_code
    assert code == 0, f"rmqd exited with {code} after SIGTERM; log {rmqd.log_path}:\n{harness.tail(rmqd.log_path)}"


def _run(fn: Callable[[Session], None], namesrv: str, workdir: Path, case: str) -> str:
    """One case against one broker: 'PASS', 'SKIP: why' or 'FAIL: first line'."""
    workdir.mkdir(parents=True, exist_ok=True)
    s = Session(CLIENT, workdir, namesrv, case)
    try:
        fn(s)
        return "PASS"
    except pytest.skip.Exception as e:
        return f"SKIP: {e}"
    except BaseException as e:  # noqa: BLE001 - every failure of the case is its result
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        (workdir / "failure.txt").write_text(traceback.format_exc())
        return f"FAIL: {type(e).__name__}: {first[:200]}"
    finally:
        try:
            s.close()
        except Exception:  # noqa: BLE001 - a consumer that will not stop is killed by its deadline
            pass


@pytest.mark.parametrize("case", list(CASES))
def test_apache_agrees(case: str, brokers: dict[str, str], tmp_path: Path) -> None:
    fn = CASES[case]
    short = fn.__name__.removeprefix("test_")[:20]
    results: dict[str, str] = {}

    def run(column: str, namesrv: str) -> None:
        results[column] = _run(fn, namesrv, tmp_path / ("apache" if column != "rmqd" else "rmqd"), short)

    threads = [threading.Thread(target=run, args=item) for item in brokers.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(540)
    apache, rmqd = (results.get(c, "FAIL: did not finish") for c in brokers)
    APACHE_RESULTS[case] = (apache, rmqd)
    if apache.split(":")[0] != rmqd.split(":")[0] and case not in APACHE_DIFFERENCES:
        pytest.fail(f"rmqd and {APACHE_LABEL} disagree on {case!r}: Apache {apache!r}, rmqd {rmqd!r} "
                    f"(details in {tmp_path}/*/failure.txt)")
    if rmqd.startswith("FAIL") and apache.startswith("FAIL"):
        pytest.fail(f"{case!r} fails on both brokers with the Java client: Apache {apache!r}; rmqd {rmqd!r}")
    if rmqd.startswith("SKIP"):
        pytest.skip(rmqd.removeprefix("SKIP: "))


def apache_table() -> str:
    """The two columns, for the terminal summary and last-matrix.md."""
    if not APACHE_RESULTS:
        return ""
    label = harness.client_label(CLIENT)
    lines = [f"Reference column: {label} against {APACHE_LABEL} and against rmqd in one run", "",
             f"| case | {APACHE_LABEL} | rmqd | agree |", "| --- | --- | --- | --- |"]
    for case, (a, r) in APACHE_RESULTS.items():
        same = a.split(":")[0] == r.split(":")[0]
        note = "yes" if same else ("explained: " + APACHE_DIFFERENCES[case] if case in APACHE_DIFFERENCES else "NO")
        lines.append(f"| {case} | {a[:80]} | {r[:80]} | {note} |")
    return "\n".join(lines) + "\n"


