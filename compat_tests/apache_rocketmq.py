"""Apache RocketMQ itself (name server + broker, from Maven Central) as the reference broker.

compat_tests/apache/setup.sh resolves the jars into classpath files; this module starts
NamesrvStartup and BrokerStartup with `java -cp` on free 127.0.0.1 ports, a store under a
work directory and small commit-log files, waits until the broker is registered, and stops
or SIGKILLs them. `mqadmin()` runs 4.9.8's MQAdminStartup. Imports nothing of rmqd.

Version: the broker and name server are 4.9.7, the newest 4.9.x whose rocketmq-broker and
rocketmq-namesrv Maven Central serves to these machines (4.9.8's are not served); the tools
and the Java client are 4.9.8.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from compat_harness import free_port as _free_port

HERE = Path(__file__).resolve().parent / "apache"
BROKER_CLASSPATH = HERE / "broker" / "classpath.txt"
TOOLS_CLASSPATH = HERE / "tools" / "classpath.txt"
BROKER_VERSION = "4.9.7"
TOOLS_VERSION = "4.9.8"
LABEL = f"Apache RocketMQ {BROKER_VERSION}"
# Java 17: RocketMQ 4.9 unmaps files through sun.nio.ch / java.nio internals
JVM_OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in
             ("java.nio", "sun.nio.ch", "java.lang", "java.util", "java.lang.reflect", "java.io", "jdk.internal.ref")]
JVM_OPENS.append("--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED")
HEAP = ["-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=512m"]

_LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5p %c{{1}} - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def classpath_problem(classpaths: tuple[Path, ...], setup: str) -> str | None:
    """None when Java and every jar of `classpaths` are there, else what to run (`setup`)."""
    if shutil.which("java") is None:
        return "java is not installed (Java 17 is needed for Apache RocketMQ)"
    for cp in classpaths:
        if not cp.is_file():
            return f"Apache RocketMQ not installed: run {setup} ({cp.parent.name}/{cp.name} missing)"
        missing = [j for j in cp.read_text().strip().split(":") if j and not Path(j).is_file()]
        if missing:
            return f"Apache RocketMQ jars missing ({Path(missing[0]).name}): run {setup}"
    return None


def apache_problem() -> str | None:
    """None when Java and the resolved 4.9 jars are there, else what to run."""
    return classpath_problem((BROKER_CLASSPATH, TOOLS_CLASSPATH), "compat_tests/apache/setup.sh")


def _free_broker_port() -> int:
    """p with p-2 (fast port) and p+1 (HA port) free too."""
    for _ in range(200):
        p = _free_port()
        if p < 1030 or p > 65000:
            continue
        socks = []
        try:
            for q in (p - 2, p + 1):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", q))
            return p
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port triple")


def _wait_port(port: int, proc: subprocess.Popen, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {_tail(log)}")
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout} s: {_tail(log)}")


def _tail(path: Path, n: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


class ApacheRocketMQ:
    """One Apache RocketMQ name server and one broker; a context manager.

    ``broker_conf`` adds or overrides broker.conf keys (RocketMQ's names). ``store_dir`` is
    the broker's storePathRootDir; start it on an existing store by passing
    ``broker_conf={"storePathRootDir": ...}`` (and the same mappedFileSizeCommitLog it was
    written with).

    A subclass for another release overrides the class attributes (its classpath, the main
    class of the broker's process), ``_broker_args`` and, for more ports, ``_choose_ports``."""

    VERSION = BROKER_VERSION
    CLASSPATH = BROKER_CLASSPATH
    # mqadmin's classpath for the readiness check (clusterList)
    ADMIN_CLASSPATH = TOOLS_CLASSPATH
    BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
    # what the broker's process is called in errors
    BROKER_WHAT = "Apache broker"

    def __init__(self, workdir: Path, *, broker_conf: dict[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.extra = dict(broker_conf or {})
        self._choose_ports()
        self.store_dir = Path(self.extra.get("storePathRootDir", self.workdir / "store"))
        self.namesrv: subprocess.Popen | None = None
        self.broker: subprocess.Popen | None = None

    @property
    def label(self) -> str:
        return f"Apache RocketMQ {self.VERSION}"

    def problem(self) -> str | None:
        """None when this release can start here, else what to run."""
        return apache_problem()

    def _choose_ports(self) -> None:
        self.namesrv_port = _free_port()
        self.broker_port = _free_broker_port()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.broker_addr = f"127.0.0.1:{self.broker_port}"

    # -- files -----------------------------------------------------------------------------------
    def _prepare(self) -> dict[str, Any]:
        home = self.workdir / "home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name in ("namesrv", "broker", "tools"):
            (home / "conf" / f"logback_{name}.xml").write_text(_LOGBACK.format(log=logs / f"{name}.log"))
        (home / "conf" / "namesrv.properties").write_text(
            f"listenPort={self.namesrv_port}\nkvConfigPath={self.workdir / 'kvConfig.json'}\n"
            f"configStorePath={self.workdir / 'namesrv.properties'}\n")
        conf = {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "0",
            "listenPort": str(self.broker_port), "namesrvAddr": self.namesrv_addr, "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(self.store_dir), "storePathCommitLog": str(self.store_dir / "commitlog"),
            "mappedFileSizeCommitLog": str(4 * 1024 * 1024), "mappedFileSizeConsumeQueue": str(6000 * 20),
            "autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true", "flushDiskType": "ASYNC_FLUSH",
            "deleteWhen": "04", "fileReservedTime": "48", "diskMaxUsedSpaceRatio": "95",
            "enablePropertyFilter": "true", "traceTopicEnable": "false",
        }
        conf.update(self.extra)
        if "storePathCommitLog" not in self.extra:
            conf["storePathCommitLog"] = str(Path(conf["storePathRootDir"]) / "commitlog")
        self.store_dir = Path(conf["storePathRootDir"])
        (home / "conf" / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self._write_more_conf(home / "conf")
        env = dict(os.environ, ROCKETMQ_HOME=str(home), JAVA_OPT="")
        env.pop("JAVA_TOOL_OPTIONS", None)
        return {"home": home, "logs": logs, "env": env}

    def _java(self, main: str, *args: str, home: Path, classpath: Path, user_home: Path | None = None) -> list[str]:
        props = [f"-Drocketmq.home.dir={home}", f"-Duser.home={user_home or self.workdir}",
                 "-Drocketmq.client.logUseSlf4j=true", "-Djava.net.preferIPv4Stack=true"]
        return ["java", *HEAP, *JVM_OPENS, *props, "-cp", classpath.read_text().strip(), main, *args]

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, timeout: float = 90, attempts: int = 3) -> "ApacheRocketMQ":
        """Start both; a port taken between choosing it and the JVM binding it (another test's
        socket) is retried on fresh ports."""
        problem = self.problem()
        if problem:
            raise RuntimeError(problem)
        for attempt in range(attempts):
            try:
                return self._start_once(timeout)
            except RuntimeError as exc:
                if attempt == attempts - 1 or "Address already in use" not in str(exc) + self._logs_tail():
                    raise
                self._choose_ports()
        raise AssertionError("unreachable")

    def _logs_tail(self) -> str:
        return "".join(_tail(self.workdir / "logs" / f"{n}.out") + _tail(self.workdir / "logs" / f"{n}.log")
                       for n in ("namesrv", "broker"))

    def _write_more_conf(self, conf_dir: Path) -> None:
        """Configuration files beyond namesrv.properties and broker.conf (none for 4.9)."""

    def _broker_args(self, home: Path) -> list[str]:
        """The broker process's arguments after its main class."""
        return ["-c", str(home / "conf" / "broker.conf")]

    def _ports_to_wait_for(self) -> list[int]:
        """The broker process's listening ports, waited for before the registration check."""
        return [self.broker_port]

    def _start_once(self, timeout: float) -> "ApacheRocketMQ":
        p = self._prepare()
        home, logs, env = p["home"], p["logs"], p["env"]
        self.namesrv = subprocess.Popen(
            self._java("org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(home / "conf" / "namesrv.properties"),
                       home=home, classpath=self.CLASSPATH),
            env=env, stdout=open(logs / "namesrv.out", "ab"), stderr=subprocess.STDOUT, cwd=self.workdir)
        try:
            _wait_port(self.namesrv_port, self.namesrv, timeout, "Apache name server", logs / "namesrv.out")
            self.broker = subprocess.Popen(
                self._java(self.BROKER_MAIN, *self._broker_args(home), home=home, classpath=self.CLASSPATH),
                env=env, stdout=open(logs / "broker.out", "ab"), stderr=subprocess.STDOUT, cwd=self.workdir)
            for port in self._ports_to_wait_for():
                _wait_port(port, self.broker, timeout, self.BROKER_WHAT, logs / "broker.out")
            self._wait_registered(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def mqadmin(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """`mqadmin ARGS -n <this name server>` with this release's tools."""
        return run_mqadmin(self.ADMIN_CLASSPATH, self.namesrv_addr, *args, timeout=timeout, workdir=self.workdir)

    def _wait_registered(self, timeout: float) -> None:
        """Until the name server lists the broker (clusterList names its address)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.mqadmin("clusterList")
            if self.broker_addr in r.stdout:
                return
            if self.broker is not None and self.broker.poll() is not None:
                raise RuntimeError(f"{self.BROKER_WHAT} exited with {self.broker.returncode}: "
                                   f"{_tail(self.workdir / 'logs' / 'broker.out')}")
            time.sleep(0.5)
        raise RuntimeError(f"{self.BROKER_WHAT} not registered within {timeout} s")

    def _stop(self, proc: subprocess.Popen | None, sig: int, timeout: float) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def stop(self, timeout: float = 30) -> None:
        """Clean shutdown: SIGTERM runs RocketMQ's shutdown hooks (flush, checkpoint, abort file)."""
        self._stop(self.broker, signal.SIGTERM, timeout)
        self._stop(self.namesrv, signal.SIGTERM, timeout)

    def kill(self) -> None:
        self._stop(self.broker, signal.SIGKILL, 10)
        self._stop(self.namesrv, signal.SIGKILL, 10)

    def __enter__(self) -> "ApacheRocketMQ":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def mqadmin(namesrv_addr: str, *args: str, timeout: float = 60,
            workdir: Path | None = None) -> subprocess.CompletedProcess:
    """`mqadmin ARGS -n namesrv_addr` with Apache RocketMQ 4.9.8's tools."""
    problem = apache_problem()
    if problem:
        raise RuntimeError(problem)
    return run_mqadmin(TOOLS_CLASSPATH, namesrv_addr, *args, timeout=timeout, workdir=workdir)


def run_mqadmin(classpath: Path, namesrv_addr: str, *args: str, timeout: float = 60,
                workdir: Path | None = None) -> subprocess.CompletedProcess:
    """`mqadmin ARGS -n namesrv_addr` with the tools on `classpath` (MQAdminStartup)."""
    home = Path(workdir or os.environ.get("TMPDIR", "/tmp")) / "mqadmin-home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    log = home / "tools.log"
    (home / "conf" / "logback_tools.xml").write_text(_LOGBACK.format(log=log))
    cmd = ["java", "-Xms64m", "-Xmx256m", *JVM_OPENS, f"-Drocketmq.home.dir={home}", f"-Duser.home={home}",
           "-Drocketmq.client.logUseSlf4j=true", f"-Dlogback.configurationFile={home / 'conf' / 'logback_tools.xml'}",
           "-cp", classpath.read_text().strip(), "org.apache.rocketmq.tools.command.MQAdminStartup",
           *args, "-n", namesrv_addr]
    env = dict(os.environ, ROCKETMQ_HOME=str(home))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, errors="replace")


__all__ = ["ApacheRocketMQ", "BROKER_VERSION", "LABEL", "TOOLS_VERSION", "apache_problem", "classpath_problem",
           "mqadmin", "run_mqadmin"]
