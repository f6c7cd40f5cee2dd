"""The RocketMQ 5.x gRPC clients and the two brokers their cases run against (rmqd and Apache
RocketMQ 5.3.3's proxy in local mode), for test_grpc5_*.py.

Imports nothing of rmqd: rmqd is `rmqd serve` with grpcServerPort in its broker.conf, Apache is
compat_tests/apache5_rocketmq.py's launcher. The clients are the drivers in drivers/grpc5/ (set
up by drivers/grpc5/setup.sh), one subprocess per role, speaking the JSON-case protocol of
compat_harness.DriverProc: a case file in, JSON lines out, "stop" on stdin ends a consumer.

Case fields: role (produce / simple / push), endpoints, tls, access_key / secret_key, topic,
deadline_s, request_timeout_s; produce: mode (sync / async / transaction), threads, check
(commit / rollback / unknown: the answer to check-backs), check_wait_s, messages (body_b64, tag,
keys, props, group, delay_ms, tx, thread); simple: group, expression_type, expression, invisible_s,
max_count, await_s, expect, min_s, run_s, ack (all / none / after:N / change:SECONDS); push:
group, expression_type, expression, fail_times. Events: started, start_error, sent, send_error,
check, message (body_b64 up to 64 KiB, else body_sha256; body_len always), ack, ack_error, changed, receive_error, done, timeout, driver_error.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import compat_harness as harness
from apache5_rocketmq import CLASSPATH5, ApacheRocketMQ5, apache5_problem
from compat_harness import DriverProc, RmqdServer, free_port

HERE = Path(__file__).resolve().parent
GRPC5 = HERE / "drivers" / "grpc5"
TARGET = GRPC5 / "target"
SETUP = "compat_tests/drivers/grpc5/setup.sh"
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx256m"]


# --------------------------------------------------------------------------------------------
# the clients


@dataclass(frozen=True)
class GrpcClient:
    name: str
    label: str
    #: a word of a case name -> why this client's API cannot do it
    gaps: dict[str, str]

    def problem(self) -> str | None:
        if self.name == "java":
            if shutil.which("java") is None:
                return "java is not installed (Java 17 is needed)"
            if not (TARGET / "grpc-driver.jar").is_file() or not (TARGET / "classpath-client.txt").is_file():
                return f"the 5.x Java driver is not built: run {SETUP}"
        elif self.name == "python":
            if not (TARGET / "python-venv" / ".rocketmq-python-client-5.1.2").is_file():
                return f"rocketmq-python-client 5.1.2 is not installed: run {SETUP}"
        elif self.name == "node":
            if shutil.which("node") is None:
                return "node is not installed"
            if not (GRPC5 / "node" / "node_modules" / "rocketmq-client-nodejs").is_dir():
                return f"rocketmq-client-nodejs 1.0.8 is not installed: run {SETUP}"
        return None

    def command(self, case_file: Path) -> list[str]:
        if self.name == "java":
            cp = f"{TARGET / 'grpc-driver.jar'}:{(TARGET / 'classpath-client.txt').read_text().strip()}"
            return ["java", *JVM_FLAGS, "-cp", cp, "GrpcDriver", str(case_file)]
        if self.name == "python":
            return [str(TARGET / "python-venv" / "bin" / "python"), str(GRPC5 / "python" / "driver.py"), str(case_file)]
        return ["node", str(GRPC5 / "node" / "driver.js"), str(case_file)]

    def has_api(self, case: str) -> bool | str:
        return harness.api_gap(self.gaps, case)


_SELF_SIGNED = ("TLS with the test-mode (self-signed) certificate: the client checks the server's certificate "
                "against the system's CAs and has no option to trust it")
CLIENTS: dict[str, GrpcClient] = {
    "java": GrpcClient("java", "Java rocketmq-client-java 5.0.8", {}),
    "python": GrpcClient("python", "Python rocketmq-python-client 5.1.2", {"tls": _SELF_SIGNED}),
    "node": GrpcClient("node", "Node rocketmq-client-nodejs 1.0.8", {"tls": _SELF_SIGNED}),
}


class GrpcDriverProc(DriverProc):
    def argv(self, case_file: Path) -> list[str]:
        return CLIENTS[self.client].command(case_file)


# --------------------------------------------------------------------------------------------
# the brokers


class Target(Protocol):
    kind: str  # "rmqd" or "apache"
    label: str
    endpoints: str
    namesrv: str
    workdir: Path

    def admin(self, *items: str) -> None: ...

    def stop(self) -> None: ...


def topic_admin(namesrv: str, items: list[str], workdir: Path, timeout: float = 90,
                credentials: dict[str, str] | None = None) -> str:
    """Create topics (topic:NAME:TYPE:QUEUES) and groups (group:NAME:ORDERLY:RETRY_MAX) on every
    master of the name server's cluster, with rocketmq-tools 5.3.3 (java/TopicAdmin.java);
    ``credentials`` {"TOPIC_ADMIN_AK": ..., "TOPIC_ADMIN_SK": ...} sign its requests (ACL)."""
    if not items:
        return ""
    cp = f"{TARGET / 'topic-admin.jar'}:{CLASSPATH5.read_text().strip()}"
    home = workdir / "admin-home"
    home.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["java", *JVM_FLAGS, f"-Duser.home={home}", "-Drocketmq.client.logUseSlf4j=true",
                        "-cp", cp, "TopicAdmin", namesrv, *items], capture_output=True, text=True, timeout=timeout,
                       errors="replace", env=dict(os.environ, ROCKETMQ_HOME=str(home), **(credentials or {})))
    if r.returncode != 0:
        raise RuntimeError(f"topic admin failed against {namesrv}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def message_count(target: "Target", topic: str) -> int:
    """Messages the topic's queues hold (max - min offset), -1 when the topic does not exist."""
    out = topic_admin(target.namesrv, [f"count:{topic}"], target.workdir)
    for line in out.splitlines():
        if line.startswith(f"count {topic} "):
            return int(line.rsplit(" ", 1)[1])
    raise RuntimeError(f"no count for {topic}: {out}")


class RmqdTarget:
    """`rmqd serve` on free ports, its gRPC port in broker.conf (grpcServerPort)."""

    kind = "rmqd"
    label = "rmqd"

    def __init__(self, workdir: Path, conf: dict[str, str] | None = None,
                 admin_credentials: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.conf_extra = dict(conf or {})
        self.admin_credentials = admin_credentials
        self.grpc_port = free_port()
        self.server: RmqdServer | None = None

    def start(self, attempts: int = 3) -> "RmqdTarget":
        """Free ports are only free until someone binds them: on "address already in use" the
        start is tried again on new ones."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(attempts):
            conf = {"grpcServerPort": str(self.grpc_port), **self.conf_extra}
            conf_path = self.workdir / "broker.conf"
            conf_path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
            self.server = RmqdServer(store=self.workdir / "store", log_path=self.workdir / "rmqd.log", conf=conf_path)
            try:
                self.server.start()
                return self
            except RuntimeError as exc:
                if "already in use" not in str(exc) or attempt == attempts - 1:
                    raise
                self.grpc_port = free_port()
        return self

    @property
    def endpoints(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def namesrv(self) -> str:
        assert self.server is not None
        return self.server.namesrv

    def admin(self, *items: str) -> None:
        topic_admin(self.namesrv, list(items), self.workdir, credentials=self.admin_credentials)

    def restart(self, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL) and start again on the same ports and store."""
        assert self.server is not None
        if kill:
            self.server.kill()
        else:
            assert self.server.stop() == 0
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            code = self.server.stop()
            assert code == 0, f"rmqd exited with {code}; log {self.server.log_path}:\n{harness.tail(self.server.log_path)}"


class ApacheTarget:
    """Apache RocketMQ 5.3.3: the name server and the proxy in local mode (apache5_rocketmq.py)."""

    kind = "apache"
    label = "Apache RocketMQ 5.3.3"

    def __init__(self, workdir: Path, broker_conf: dict[str, str] | None = None,
                 proxy_conf: dict[str, object] | None = None) -> None:
        self.workdir = workdir
        self.apache = ApacheRocketMQ5(workdir, broker_conf=broker_conf, proxy_conf=proxy_conf)

    def start(self) -> "ApacheTarget":
        problem = apache5_problem()
        if problem:
            harness.missing(problem)
        self.apache.start()
        return self

    @property
    def endpoints(self) -> str:
        return self.apache.grpc_addr

    @property
    def namesrv(self) -> str:
        return self.apache.namesrv_addr

    def admin(self, *items: str) -> None:
        topic_admin(self.namesrv, list(items), self.workdir)

    def stop(self) -> None:
        self.apache.stop()


# --------------------------------------------------------------------------------------------
# one case


def spec(body: bytes, **fields: Any) -> dict[str, Any]:
    return {"body_b64": base64.b64encode(body).decode("ascii"), **fields}


def body_of(m: dict[str, Any]) -> bytes:
    return base64.b64decode(m["body_b64"])


class GrpcSession:
    """What a case needs on one broker: unique names, topics of a type, the driver runners."""

    def __init__(self, client: str, target: Target, workdir: Path, case: str) -> None:
        self.client = client
        self.target = target
        self.workdir = workdir
        self.case = case
        self.tag = uuid.uuid4().hex[:6]
        self.running: list[GrpcDriverProc] = []
        self.n = 0

    def name(self, kind: str) -> str:
        raw = f"{self.case}_{self.client}_{kind}_{self.tag}"
        return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "_" for ch in raw)[:120]

    def topics(self, **kinds: str) -> dict[str, str]:
        """Create a topic per keyword (value: NORMAL / FIFO / DELAY / TRANSACTION); names by keyword."""
        names = {key: self.name(key) for key in kinds}
        self.target.admin(*(f"topic:{names[k]}:{t}:4" for k, t in kinds.items()))
        return names

    def groups(self, *items: tuple[str, bool, int]) -> None:
        """(group, consumeMessageOrderly, retryMaxTimes) for each."""
        self.target.admin(*(f"group:{g}:{'true' if o else 'false'}:{r}" for g, o, r in items))

    def _case(self, role: str, **fields: Any) -> dict[str, Any]:
        return {"role": role, "endpoints": self.target.endpoints, **fields}

    def _proc(self, role: str, fields: dict[str, Any], client: str | None) -> GrpcDriverProc:
        c = client or self.client
        self.n += 1
        return GrpcDriverProc(c, self._case(role, **fields), self.workdir, f"{self.n:02d}-{c}-{role}")

    def produce(self, topic: str, messages: list[dict[str, Any]], *, client: str | None = None,
                timeout: float = 90, **fields: Any) -> GrpcDriverProc:
        d = self._proc("produce", {"topic": topic, "messages": messages, "deadline_s": timeout, **fields}, client)
        d.start()
        d.finish(timeout + 15)
        return d

    def simple(self, topic: str, group: str, *, client: str | None = None, timeout: float = 90,
               **fields: Any) -> GrpcDriverProc:
        """A SimpleConsumer run to its end (expect / min_s / run_s)."""
        d = self._proc("simple", {"topic": topic, "group": group, "deadline_s": timeout, **fields}, client)
        d.start()
        self.running.append(d)
        return d

    def push(self, topic: str, group: str, *, client: str | None = None, timeout: float = 180,
             **fields: Any) -> GrpcDriverProc:
        d = self._proc("push", {"topic": topic, "group": group, "deadline_s": timeout, **fields}, client)
        d.start()
        self.running.append(d)
        return d

    def close(self) -> None:
        for d in self.running:
            if d.proc is not None and d.proc.poll() is None:
                try:
                    d.stop(20)
                except Exception:  # noqa: BLE001 - a hung driver: kill it
                    d.kill()


def wait_done(d: DriverProc, timeout: float) -> None:
    """A consumer that ends by itself (expect / run_s): wait for its last line."""
    d.wait_event("done", timeout)
    d.finish(15)


def now() -> float:
    return time.time()


__all__ = ["CLIENTS", "ApacheTarget", "GrpcDriverProc", "GrpcSession", "RmqdTarget", "body_of", "message_count", "spec",
           "topic_admin", "wait_done"]
