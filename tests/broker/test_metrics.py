"""The Prometheus exporter and /health (metricsExporterType=PROM) of a real broker: RocketMQ 5's
metric names and labels with the counts of a known load, the HTTP side (keep-alive, HEAD,
methods, bad requests), and the health answer following the store and the registration."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from broker_harness import BROKER_NAME, CLUSTER, run_with_broker
from rmqd.broker.config import ConfigError, load_broker_settings, metrics_exporter_type
from rmqd.broker.metrics_http import HEALTH_PATH
from rmqd.wire.codes import RequestCode, ResponseCode
from support import free_broker_port, free_port, run_once


async def http(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request on a new connection the server closes after its answer; (status, headers, body)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(raw)
        data = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def get(port: int, path: str, *, method: str = "GET", close: bool = True) -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n".encode()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def find(table: dict, name: str, **labels: str) -> float:
    hits = [v for (n, ls), v in table.items() if n == name and set(labels.items()) <= ls]
    assert len(hits) == 1, (name, labels, [k for k in table if k[0] == name])
    return hits[0]


def test_exporter_shows_rocketmq5_metrics_after_a_known_load(tmp_path: Path) -> None:
    port = free_port()

    async def fn(h) -> None:
        assert h.role.bound["metrics"] == ("127.0.0.1", port)
        for i in range(6):
            assert (await h.send_v2("PromT", b"y" * 200, queue_id=0)).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        await h.heartbeat("prom@1", "PromG", "PromT", producer_groups=("PromPG",))
        r = await h.pull("PromT", "PromG", 0, 0, sys_flag=6, subscription="*", max_msgs=4)
        assert r.code == ResponseCode.SUCCESS
        await h.invoke(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "PromG", "topic": "PromT",
                                                            "queueId": "0", "commitOffset": "1"})
        status, headers, body = await http(port, get(port, "/metrics"))
        assert status == 200 and headers["content-type"].startswith("text/plain")
        t = samples(body.decode())
        base = {"cluster": CLUSTER, "node_id": BROKER_NAME, "node_type": "broker", "otel_scope_name": "broker-meter"}
        labels = dict(base, topic="PromT", message_type="normal", is_system="false")
        assert find(t, "rocketmq_messages_in_total", **labels) == 6
        size = h.role.store.get_consume_queue("PromT", 0).get_unit(0)[1]
        assert find(t, "rocketmq_throughput_in_total", **labels) == 6 * size
        assert find(t, "rocketmq_message_size_count", **labels) == 6
        assert find(t, "rocketmq_message_size_bucket", le="1024.0", **labels) == 6
        assert find(t, "rocketmq_message_size_bucket", le="+Inf", **labels) == 6
        out = dict(base, topic="PromT", consumer_group="PromG", is_system="false")
        assert find(t, "rocketmq_messages_out_total", **out) == 4
        assert find(t, "rocketmq_throughput_out_total", **out) == 4 * size
        lag = dict(base, consumer_group="PromG", topic="PromT", is_retry="false", is_system="false")
        assert find(t, "rocketmq_consumer_lag_messages", **lag) == 5  # 6 stored, committed 1
        assert find(t, "rocketmq_consumer_inflight_messages", **lag) == 3  # pulled to 4, committed 1
        assert find(t, "rocketmq_consumer_ready_messages", **lag) == 2  # stored 6, pulled to 4
        assert find(t, "rocketmq_consumer_lag_latency_milliseconds", **lag) >= 0
        assert find(t, "rocketmq_producer_connections", language="java", version="v4_9_8",
                    protocol_type="remoting") == 1
        assert find(t, "rocketmq_consumer_connections", consumer_group="PromG", consume_mode="push",
                    language="java", is_system="false") == 1
        assert find(t, "rocketmq_topic_number", **base) == len(h.role.topic_config_manager.topic_config_table)
        assert find(t, "rocketmq_consumer_group_number", **base) >= 1
        assert find(t, "rocketmq_broker_permission", **base) == 6
        store = dict(base, storage_type="local", storage_medium="disk")
        assert find(t, "rocketmq_storage_dispatch_behind_bytes", **store) == 0
        assert find(t, "rocketmq_storage_size_bytes", **store) > 0
        assert find(t, "rocketmq_storage_message_reserve_time_milliseconds", **store) >= 0
        assert find(t, "rocketmq_storage_flush_behind_bytes", **store) >= 0
        rpc = dict(base, protocol_type="remoting", request_code="send_message_v2", response_code="success",
                   is_long_polling="false", result="success")
        assert find(t, "rocketmq_rpc_latency_milliseconds_count", **rpc) == 6
        assert find(t, "rocketmq_rpc_latency_milliseconds_bucket", le="+Inf", **rpc) == 6
        assert find(t, "rocketmq_rpc_latency_milliseconds_count", request_code="pull_message") == 1

        # a pull held for long polling is labelled so once answered
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.pull, "PromT", "PromG", 1, 0)  # queue 1 is empty: held up to 1 s
        t = samples((await http(port, get(port, "/"))) [2].decode())  # any path, as Apache's exporter
        assert find(t, "rocketmq_rpc_latency_milliseconds_count", request_code="pull_message",
                    is_long_polling="true", response_code="pull_not_found") == 1

    run_with_broker(tmp_path, fn, metricsExporterType="PROM", metricsPromExporterHost="127.0.0.1",
                    metricsPromExporterPort=str(port), metricsLabel="instance_id:i-1,bad")


def test_dlq_sends_and_labels(tmp_path: Path) -> None:
    port = free_port()

    async def fn(h) -> None:
        r = await h.invoke(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                           b'{"groupName":"DlqG","retryMaxTimes":0,"retryQueueNums":1}')
        assert r.code == ResponseCode.SUCCESS
        # a consumer's retry send past the group's retryMaxTimes goes to %DLQ%DlqG
        r = await h.send_v2("%RETRY%DlqG", b"z", queue_id=0, group="DlqG")
        assert r.code == ResponseCode.SUCCESS and h.role.store.get_max_offset_in_queue("%DLQ%DlqG", 0) == 1
        t = samples((await http(port, get(port, "/metrics")))[2].decode())
        assert find(t, "rocketmq_send_to_dlq_messages_total", consumer_group="DlqG", topic="%RETRY%DlqG",
                    is_system="false", instance_id="i-1") == 1
        # retry and DLQ topics are not part of messages_in (isRetryOrDlqTopic)
        assert not [k for k in t if k[0] == "rocketmq_messages_in_total" and ("topic", "%DLQ%DlqG") in k[1]]
        assert h.role.stats.topic_put["%DLQ%DlqG"].msgs == 1  # but 4.9's TOPIC_PUT_NUMS has them

    run_with_broker(tmp_path, fn, metricsExporterType="PROM", metricsPromExporterHost="127.0.0.1",
                    metricsPromExporterPort=str(port), metricsLabel="instance_id:i-1", enableUpdateConfig="true")


def test_health_and_http_edges(tmp_path: Path) -> None:
    port = free_port()

    async def fn(h) -> None:
        status, headers, body = await http(port, get(port, HEALTH_PATH))
        assert status == 200 and headers["content-type"] == "application/json"
        assert json.loads(body) == {"status": "UP", "storeRecovered": True, "nameServerRegistered": True}
        h.role.last_registered = None  # no name server took a registration
        status, _, body = await http(port, get(port, HEALTH_PATH))
        assert status == 503 and json.loads(body)["nameServerRegistered"] is False
        status, headers, body = await http(port, get(port, HEALTH_PATH, method="HEAD"))
        assert status == 503 and body == b""
        status, headers, _ = await http(port, get(port, "/metrics", method="POST"))
        assert status == 405 and headers["allow"] == "GET, HEAD"
        status, _, _ = await http(port, b"NONSENSE\r\n\r\n")
        assert status == 400
        # keep-alive: two scrapes on one connection
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            for _ in range(2):
                await stream.send_all(get(port, "/metrics", close=False))
                data = b""
                with trio.fail_after(10):
                    while b"rocketmq_topic_number" not in data or not data.endswith(b"\n"):
                        data += await stream.receive_some(65536)
                assert data.startswith(b"HTTP/1.1 200")

    run_with_broker(tmp_path, fn, metricsExporterType="2", metricsPromExporterHost="127.0.0.1",
                    metricsPromExporterPort=str(port))


def test_no_listener_and_no_timing_unless_prom(tmp_path: Path) -> None:
    async def fn(h) -> None:
        assert "metrics" not in h.role.bound and h.role.observability.exporter is None
        await h.send_v2("PlainT", b"x")
        assert not h.role.stats.rpc_latency.table  # requests are not timed
        assert h.role.stats.topic_put["PlainT"].msgs == 1  # the 4.9 statistics always count

    run_with_broker(tmp_path, fn)


def test_exporter_type_keys(tmp_path: Path) -> None:
    assert [metrics_exporter_type(v) for v in ("prom", "2", "0", "9", "LOG")] == ["PROM", "PROM", "DISABLE", "DISABLE",
                                                                                 "LOG"]
    with pytest.raises(ConfigError, match="metricsExporterType"):
        metrics_exporter_type("PROMETHEUS")
    conf = tmp_path / "broker.conf"
    conf.write_text("metricsExporterType=PROM\nmetricsPromExporterPort=70000\n")
    with pytest.raises(ConfigError, match="metricsPromExporterPort"):
        load_broker_settings(conf)
    conf.write_text("metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n")
    b = load_broker_settings(conf).broker
    assert (b.metricsExporterType, b.metricsPromExporterHost, b.metricsPromExporterPort) == ("PROM", "127.0.0.1", 5557)


def test_a_busy_exporter_port_is_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        conf = tmp_path / "broker.conf"
        conf.write_text(f"metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\nmetricsPromExporterPort={port}\n")
        r = run_once("serve", "--store", str(tmp_path / "store"), "--namesrv-port", str(free_port()),
                     "--broker-port", str(free_broker_port()), "--host", "127.0.0.1", "-c", str(conf), timeout=60)
    assert r.returncode == 1
    assert r.stderr.strip() == (f"rmqd: cannot listen: address already in use: the metrics exporter on "
                                f"127.0.0.1:{port} (metricsPromExporterHost, metricsPromExporterPort)")
