"""GET_TOPIC_CONFIG (351) as rocketmq-tools 5.3.3 uses it, against rmqd and Apache RocketMQ 5.3.3.

rocketmq-tools 5.x's examineTopicStats (mqadmin topicStatus, consumerProgress -g, the dashboard's
topic page, and harnesses that wait for a created topic) asks every broker of the route for the
topic's config (MQAdminUtils.examineTopicConfigFromRoute) and gives up on any answer but SUCCESS or
TOPIC_NOT_EXIST. On both brokers: mqadmin 5.3.3 creates a topic and a FIFO topic and topicStatus
lists their queues; then the raw GET_TOPIC_CONFIG answers (the bodies byte for byte, the unknown
topic's code and remark) must be the same from rmqd as from Apache.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Iterator

import pytest
import trio

from apache5_rocketmq import mqadmin5
from pair5 import rmqd_and_apache5

pytestmark = pytest.mark.timeout(420)

CLUSTER = "DefaultCluster"
TOPICS = {"Tc5T": ("2", "3", []), "Tc5Fifo": ("1", "1", ["-a", "+message.type=FIFO"])}
QUEUE_LINE = re.compile(r"^\S+\s+\d+\s+\d+\s+\d+\s", re.M)  # "#Broker Name #QID #Min Offset #Max Offset ..."


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, str]]]:
    """side -> (name server, broker Remoting address)."""
    with rmqd_and_apache5(tmp_path_factory.mktemp("topic_config5")) as sides:
        yield sides


def _topic_status(namesrv: str, topic: str, workdir: Path, queues: int) -> str:
    """mqadmin topicStatus until the route is there (the name server learns a new topic at the
    broker's next registration): its output, with one line per write queue."""
    deadline = time.monotonic() + 60
    while True:
        r = mqadmin5(namesrv, "topicStatus", "-t", topic, workdir=workdir)
        lines = QUEUE_LINE.findall(r.stdout)
        if r.returncode == 0 and len(lines) == queues and "Exception" not in r.stdout + r.stderr:
            return r.stdout
        if time.monotonic() > deadline:
            raise AssertionError(f"topicStatus {topic} on {namesrv}: rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        time.sleep(1)


async def _get_topic_config(addr: str, topic: str) -> tuple[int, str | None, bytes | None]:
    from rmqd.broker.remoting_client import RemotingClient
    from rmqd.wire.codes import RequestCode
    from rmqd.wire.frame import make_request

    async with RemotingClient("topic-config5") as client:
        r = await client.invoke(addr, make_request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic, "lo": "true"}),
                                timeout=10)
    return r.code, r.remark, None if r.body is None else bytes(r.body)


def test_topic_status_and_the_topic_config_answers(brokers: dict[str, tuple[str, str]], tmp_path: Path) -> None:
    answers: dict[str, dict[str, tuple[int, str | None, bytes | None]]] = {}
    for side, (namesrv, broker) in brokers.items():
        for topic, (read, write, extra) in TOPICS.items():
            r = mqadmin5(namesrv, "updateTopic", "-c", CLUSTER, "-t", topic, "-r", read, "-w", write, *extra,
                         workdir=tmp_path)
            assert r.returncode == 0 and "success" in r.stdout, (side, r.stdout, r.stderr)
            _topic_status(namesrv, topic, tmp_path, int(write))
        answers[side] = {t: trio.run(_get_topic_config, broker, t) for t in [*TOPICS, "Tc5NoSuchTopic"]}
    assert answers["rmqd"] == answers["apache"], answers
    code, remark, body = answers["rmqd"]["Tc5Fifo"]
    assert code == 0 and body is not None and b'"attributes":{"message.type":"FIFO"}' in body
    assert answers["rmqd"]["Tc5NoSuchTopic"] == (17, "No topic in this broker. topic: Tc5NoSuchTopic", None)
