"""mqadmin (Apache RocketMQ 4.9.8's tools) against rmqd and against Apache RocketMQ itself.

The same scenario runs on both brokers: a 4.9.8 Java producer sends 8 messages with keys to
MqaT and a push consumer of MqaCG consumes them and stays connected; then every command of
the issue's list runs against each. The answers must have the same shape: exit code 0, no
exception text, and the same lines once addresses, ids, numbers and times are normalized;
key/value answers (brokerStatus, getBrokerConfig) must have the same keys, but for the ones
listed in KNOWN_KEY_DIFFERENCES with their reason.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from apache_rocketmq import HERE, JVM_OPENS, TOOLS_CLASSPATH, ApacheRocketMQ, apache_problem, mqadmin
from compat_harness import RmqdServer, missing

pytestmark = pytest.mark.timeout(900)

TOPIC, PRODUCER_GROUP, CONSUMER_GROUP, COUNT = "MqaT", "MqaPG", "MqaCG", 8
BROKER_CONF = {"brokerClusterName": "DefaultCluster", "brokerName": "broker-a",
               "mappedFileSizeCommitLog": str(4 * 1024 * 1024)}
# keys one side prints and the other does not, and why that is deliberate
KNOWN_KEY_DIFFERENCES = {
    "configBlackList": "added in 4.9.8 (the reference broker is 4.9.7: see compat_tests/apache/README.md)",
    "enableUpdateConfig": "rmqd's own key: config-writing admin codes are off unless it is true",
    "diskSpaceWarningLevelRatio": "rmqd takes these from broker.conf; 4.9.x reads JVM system properties",
    "diskSpaceCleanForciblyRatio": "rmqd takes these from broker.conf; 4.9.x reads JVM system properties",
    "rocketmqHome": "printed only when ROCKETMQ_HOME is set (the Apache launcher sets it)",
    "storePathCommitLog": "printed only when set (the Apache launcher sets it)",
    **{key: "RocketMQ 5.x's metrics keys: rmqd exports Prometheus metrics (docs/observability.md)"
       for key in ("metricsExporterType", "metricsPromExporterHost", "metricsPromExporterPort", "metricsLabel",
                   "metricsInDelta")},
}
COMMANDS = ["clusterList", "topicList", "topicRoute", "topicStatus", "updateTopic", "deleteTopic", "updateSubGroup",
            "consumerProgress", "consumerConnection", "producerConnection", "brokerStatus", "queryMsgById",
            "queryMsgByKey", "queryMsgByUniqueKey", "resetOffsetByTime", "getBrokerConfig",
            # issue 23: the stats and inspection codes (statsAll first: see _stats_after_load)
            "statsAll", "exportMetrics", "cleanExpiredCQ", "consumerStatus", "cleanUnusedTopic", "brokerConsumeStats",
            "queryCq", "producer"]
STATS_POLL_S = 45  # 4.9 samples its stats every 10 s: the load shows in the minute window after the next tick


def _java_clients(namesrv: str, workdir: Path) -> tuple[subprocess.Popen, list[list[str]]]:
    """compat_tests/apache/clients/Clients.java: sends, consumes, stays connected until stdin ends."""
    cp = TOOLS_CLASSPATH.read_text().strip() + ":" + str(HERE / "clients" / "classes")
    proc = subprocess.Popen(
        ["java", "-Xmx256m", *JVM_OPENS, f"-Duser.home={workdir}", "-Drocketmq.client.logUseSlf4j=true",
         "-cp", cp, "Clients", namesrv, TOPIC, PRODUCER_GROUP, CONSUMER_GROUP, str(COUNT)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sent: list[list[str]] = []
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("sent "):
            sent.append(line.split()[1:])
        if line.startswith("consumed") or time.monotonic() > deadline:
            break
    if len(sent) != COUNT:
        proc.kill()
        raise AssertionError(f"the Java clients did not send {COUNT} messages: {sent}")
    return proc, sent


def stats_all_row(stdout: str, topic: str, group: str) -> list[str] | None:
    """statsAll's line of one topic and consumer group: topic, group, accumulation, in TPS, out
    TPS, in 24 h, out 24 h."""
    for line in stdout.splitlines():
        cols = line.split()
        if cols[:2] == [topic, group]:
            return cols
    return None


def _stats_after_load(namesrv: str, workdir: Path) -> subprocess.CompletedProcess:
    """statsAll once the brokers' statistics show the clients' load (COUNT in and out of the
    topic): both brokers sample every 10 s, and the minute window keeps it for a minute."""
    deadline = time.monotonic() + STATS_POLL_S
    while True:
        r = mqadmin(namesrv, "statsAll", workdir=workdir)
        row = stats_all_row(r.stdout, TOPIC, CONSUMER_GROUP)
        if (row and row[5:7] == [str(COUNT), str(COUNT)]) or time.monotonic() > deadline:
            return r
        time.sleep(1)


def _scenario(namesrv: str, broker_addr: str, workdir: Path) -> dict[str, subprocess.CompletedProcess]:
    proc, sent = _java_clients(namesrv, workdir)
    try:
        time.sleep(2)  # the consumer's offsets reach the broker (persisted every 5 s by the client)
        answers = {"statsAll": _stats_after_load(namesrv, workdir)}
        uniq, offset_id = sent[3][0], sent[3][1]
        args: dict[str, list[str]] = {
            "clusterList": [], "topicList": [], "topicRoute": ["-t", TOPIC], "topicStatus": ["-t", TOPIC],
            "updateTopic": ["-t", "MqaNewT", "-b", broker_addr, "-r", "4", "-w", "4"],
            "deleteTopic": ["-t", "MqaNewT", "-c", "DefaultCluster"],
            "updateSubGroup": ["-g", "MqaNewG", "-b", broker_addr],
            "consumerProgress": ["-g", CONSUMER_GROUP], "consumerConnection": ["-g", CONSUMER_GROUP],
            "producerConnection": ["-g", PRODUCER_GROUP, "-t", TOPIC], "brokerStatus": ["-b", broker_addr],
            "queryMsgById": ["-i", offset_id], "queryMsgByKey": ["-t", TOPIC, "-k", "key-3"],
            "queryMsgByUniqueKey": ["-t", TOPIC, "-i", uniq],
            "resetOffsetByTime": ["-g", CONSUMER_GROUP, "-t", TOPIC, "-s", "now"],
            "getBrokerConfig": ["-b", broker_addr],
            "exportMetrics": ["-c", "DefaultCluster", "-f", str(workdir / "export")],
            "cleanExpiredCQ": ["-b", broker_addr], "consumerStatus": ["-g", CONSUMER_GROUP],
            "cleanUnusedTopic": ["-b", broker_addr], "brokerConsumeStats": ["-b", broker_addr],
            "queryCq": ["-t", TOPIC, "-q", "0", "-i", "0", "-c", "4", "-g", CONSUMER_GROUP, "-b", broker_addr],
            "producer": ["-b", broker_addr],
        }
        for cmd in COMMANDS:
            if cmd not in answers:
                answers[cmd] = mqadmin(namesrv, cmd, *args[cmd], workdir=workdir)
        answers["metrics.json"] = subprocess.CompletedProcess(
            [], 0, (workdir / "export" / "metrics.json").read_text(errors="replace"), "")
        return answers
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict[str, dict[str, subprocess.CompletedProcess]]:
    problem = apache_problem()
    if problem:
        missing(problem)
    out: dict[str, Any] = {}
    wd = tmp_path_factory.mktemp("mqadmin-apache")
    apache = ApacheRocketMQ(wd, broker_conf=BROKER_CONF)
    apache.start()
    try:
        out["apache"] = _scenario(apache.namesrv_addr, apache.broker_addr, wd)
    finally:
        apache.stop()
    wd = tmp_path_factory.mktemp("mqadmin-rmqd")
    conf = wd / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in BROKER_CONF.items()))
    server = RmqdServer(store=wd / "store", log_path=wd / "rmqd.log", conf=conf).start()
    try:
        out["rmqd"] = _scenario(server.namesrv, f"127.0.0.1:{server.broker_port}", wd)
    finally:
        assert server.stop() == 0
    return out


_NORMALIZE = [
    (re.compile(r"/\S*"), "PATH"),
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(,\d{3})?"), "TIME"),
    (re.compile(r"\b\d+\.\d+\.\d+\.\d+:\d+\b"), "ADDR"),
    (re.compile(r"\b[0-9A-F]{32,}\b"), "ID"),
    (re.compile(r"\bV\d+_\d+_\d+\w*"), "VERSION"),
    (re.compile(r"-?\d+(\.\d+)?(E-?\d+)?"), "N"),
    (re.compile(r"[ \t]+"), " "),
]


def normalize(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        for pattern, repl in _NORMALIZE:
            line = pattern.sub(repl, line)
        line = line.strip()
        if line:
            lines.append(line)
    return sorted(lines)


def _keys(text: str, sep: str) -> set[str]:
    keys = set()
    for line in text.splitlines():
        if sep in line and not line.startswith("="):
            key = line.split(sep, 1)[0].strip()
            keys.add("commitLogDiskRatio_<path>" if key.startswith("commitLogDiskRatio_") else key)
    return keys


@pytest.mark.parametrize("command", COMMANDS)
def test_mqadmin_answers_rmqd_like_apache(answers, command):
    a, r = answers["apache"][command], answers["rmqd"][command]
    assert a.returncode == 0, a.stderr[-2000:]
    assert r.returncode == 0, r.stderr[-2000:]
    for res in (a, r):
        assert "Exception" not in res.stdout and "Exception" not in res.stderr, res.stdout + res.stderr[-2000:]
        assert res.stdout.strip(), f"{command}: no answer"
    if command in ("brokerStatus", "getBrokerConfig"):
        sep = ":" if command == "brokerStatus" else "="
        diff = _keys(a.stdout, sep) ^ _keys(r.stdout, sep)
        assert diff <= set(KNOWN_KEY_DIFFERENCES), sorted(diff - set(KNOWN_KEY_DIFFERENCES))
    else:
        assert normalize(r.stdout) == normalize(a.stdout)


def test_stats_all_and_export_metrics_show_the_load(answers):
    """The real counts, not only the shape: the clients' 8 messages in and out of MqaT in statsAll's
    24-hour columns (from VIEW_BROKER_STATS_DATA), on both brokers; exportMetrics' file with the
    same structure as Apache's, the same topic and group counts and rmqd's own average size."""
    for side in ("apache", "rmqd"):
        row = stats_all_row(answers[side]["statsAll"].stdout, TOPIC, CONSUMER_GROUP)
        assert row is not None and row[5:7] == [str(COUNT), str(COUNT)], (side, answers[side]["statsAll"].stdout)
        assert float(row[3]) > 0 and float(row[4]) > 0, row  # in/out TPS of the minute window
    a, r = (json.loads(answers[side]["metrics.json"].stdout) for side in ("apache", "rmqd"))
    assert _shape(r) == _shape(a)
    (qa,), (qr,) = ([b["runtimeQuota"] for b in m["evaluateReport"].values()] for m in (a, r))
    assert (qr["topicSize"], qr["groupSize"]) == (qa["topicSize"], qa["groupSize"])
    assert float(qr["messageAverageSize"]) > 0
    assert r["totalData"]["totalOneDayNum"] == a["totalData"]["totalOneDayNum"]  # the same day: all 0 on both
    (va,), (vr,) = ([b["runtimeVersion"] for b in m["evaluateReport"].values()] for m in (a, r))
    assert vr == va


def _shape(value: Any) -> Any:
    """A JSON value with every leaf replaced by its type: the structure to compare."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted(map(repr, map(_shape, value)))
    return type(value).__name__
