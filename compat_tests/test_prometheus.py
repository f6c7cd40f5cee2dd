"""rmqd's Prometheus exporter scraped by a real Prometheus server during a real client's load.

`rmqd serve` runs with ``metricsExporterType=PROM`` (RocketMQ 5's keys); Debian's `prometheus`
(compat_tests/prometheus/setup.sh) scrapes it every second from a free 127.0.0.1 port with a
temporary data directory. The Java 4.9.8 client sends two known batches while a push consumer
takes them; then PromQL through Prometheus' HTTP API must give the counts (messages in and out,
message sizes, requests, connections, lag back to 0) and the rate of the second batch. Imports
nothing of rmqd.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from compat_harness import RmqdServer, free_port, missing, msg_spec, tail
from compat_session import Session, client_problem

pytestmark = pytest.mark.timeout(600)

TOPIC, GROUP = "PromT", "PromG"
FIRST, SECOND = 40, 120
CLIENT = "java"
SCRAPE_S = 1


class Prometheus:
    """One Prometheus server on 127.0.0.1, scraping one target; stopped by the caller."""

    def __init__(self, workdir: Path, target: str) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n"
            f"scrape_configs:\n  - job_name: rmqd\n    static_configs:\n      - targets: ['{target}']\n")
        self.log = open(workdir / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=workdir)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: "
                                   f"{tail(self.workdir / 'prometheus.log')}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready within {timeout} s: {tail(self.workdir / 'prometheus.log')}")

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, promql: str, at: float | None = None) -> float | None:
        result = self.query(promql, at)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, promql: str, want: Callable[[float | None], bool], timeout: float = 60) -> float | None:
        deadline = time.monotonic() + timeout
        while True:
            v = self.value(promql)
            if want(v) or time.monotonic() > deadline:
                return v
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Iterator[tuple[RmqdServer, Prometheus, int]]:
    if shutil.which("prometheus") is None:
        missing("prometheus is not installed: run compat_tests/prometheus/setup.sh")
    problem = client_problem(CLIENT)
    if problem:
        missing(problem)
    base = tmp_path_factory.mktemp("prometheus")
    metrics_port = free_port()
    conf = base / "broker.conf"
    conf.write_text(f"metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
                    f"metricsPromExporterPort={metrics_port}\n")
    server = RmqdServer(store=base / "store", log_path=base / "rmqd.log", conf=conf).start()
    prom = None
    try:
        prom = Prometheus(base, f"127.0.0.1:{metrics_port}")
        prom.wait_ready()
        yield server, prom, metrics_port
    finally:
        if prom is not None:
            prom.stop()
        assert server.stop() == 0, tail(server.log_path)


def test_prometheus_scrapes_counts_and_rates_of_a_real_load(scraped, tmp_path):
    server, prom, metrics_port = scraped
    s = Session(CLIENT, tmp_path, server.namesrv, "prom")
    in_total = f'rocketmq_messages_in_total{{topic="{TOPIC}",message_type="normal",is_system="false"}}'
    assert prom.wait_value('up{job="rmqd"}', lambda v: v == 1) == 1

    s.create_topic(TOPIC)
    consumer = s.push(TOPIC, GROUP, consume_from="CONSUME_FROM_FIRST_OFFSET")
    try:
        s.barrier([consumer], TOPIC)  # the consumer has its queues: warm-up messages reach it
        base = prom.wait_value(in_total, lambda v: v is not None)
        while (again := prom.wait_value(in_total, lambda v: v != base, timeout=3 * SCRAPE_S)) != base:
            base = again  # until Prometheus has the last warm-up send
        assert base is not None and base >= 2
        # batch 1, then a pause Prometheus sees as a plateau
        s.produce(TOPIC, [msg_spec(b"a" * 100, tags="P") for _ in range(FIRST)])
        assert prom.wait_value(in_total, lambda v: v == base + FIRST) == base + FIRST
        time.sleep(3 * SCRAPE_S)
        plateau = time.time()
        time.sleep(2 * SCRAPE_S)
        # batch 2
        s.produce(TOPIC, [msg_spec(b"b" * 100, tags="P") for _ in range(SECOND)])
        total = base + FIRST + SECOND
        assert prom.wait_value(in_total, lambda v: v == total) == total
        assert len(consumer.wait_messages(int(total), 60)) >= total
        time.sleep(3 * SCRAPE_S)
        now = time.time()
        window_ms = int((now - plateau) * 1000)  # PromQL durations are whole units
        window = window_ms / 1000

        # counts
        assert prom.value(f"{in_total} - {in_total} offset {window_ms}ms", at=now) == SECOND
        out = f'sum(rocketmq_messages_out_total{{topic="{TOPIC}",consumer_group="{GROUP}"}})'
        assert prom.wait_value(out, lambda v: v == total) == total
        assert prom.value(f'rocketmq_message_size_count{{topic="{TOPIC}"}}') == total  # one send, one record
        assert prom.value(f'rocketmq_message_size_bucket{{topic="{TOPIC}",le="1024.0"}}') == total
        size = prom.value(f'rocketmq_throughput_in_total{{topic="{TOPIC}"}} / {in_total}')
        assert size is not None and 100 < size < 1024
        sends = prom.value('sum(rocketmq_rpc_latency_milliseconds_count{request_code="send_message_v2",'
                           'response_code="success"})')
        assert sends is not None and sends >= total
        p99 = prom.value('histogram_quantile(0.99, sum by (le) '
                         '(rate(rocketmq_rpc_latency_milliseconds_bucket{request_code="send_message_v2"}[1m])))')
        assert p99 is not None and 0 <= p99 <= 3000
        assert prom.value(f'sum(rocketmq_consumer_connections{{consumer_group="{GROUP}",consume_mode="push"}})') == 1
        assert prom.value('sum(rocketmq_producer_connections{language="java"})') >= 1  # the consumer's inner producer
        assert prom.value('rocketmq_topic_number') >= 1
        assert prom.value('rocketmq_storage_dispatch_behind_bytes') == 0
        # the consumer commits its offsets every 5 s: the lag goes back to 0
        lag = f'rocketmq_consumer_lag_messages{{consumer_group="{GROUP}",topic="{TOPIC}"}}'
        assert prom.wait_value(lag, lambda v: v == 0, timeout=60) == 0

        # the rate of batch 2 over the window from the plateau: Prometheus extrapolates to the
        # window's edges from samples a scrape apart, so at most a few scrapes' worth more
        rate = prom.value(f"rate({in_total}[{window_ms}ms])", at=now)
        assert SECOND / window <= rate <= SECOND / (window - 3 * SCRAPE_S), (rate, window)
        increase = prom.value(f"increase({in_total}[{window_ms}ms])", at=now)
        assert rate * window == pytest.approx(increase)

        # the same listener answers the health check
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/health", timeout=5) as r:
            assert r.status == 200 and json.load(r)["status"] == "UP"
    finally:
        consumer.stop()
