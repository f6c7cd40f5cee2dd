"""Apache RocketMQ 5.3.3 (from Maven Central) as the reference for the 5.x features.

compat_tests/apache/setup5.sh resolves rocketmq-namesrv and rocketmq-proxy 5.3.3 into
apache/broker5/classpath.txt. This module starts NamesrvStartup and the proxy in local mode
(ProxyStartup -pm local: one JVM hosting the broker, its Remoting port, the proxy's own Remoting
port and its gRPC port) with `java -cp`, heap capped at 512 MiB, on free 127.0.0.1 ports, waits
until the broker is registered and the gRPC port listens, and stops or SIGKILLs it. The process
handling is apache_rocketmq.ApacheRocketMQ's; only the 5.x differences live here. Imports
nothing of rmqd.

Ports: the broker's listenPort (Remoting, what a 5.x Remoting client reaches through the name
server's route) with listenPort-2 (the fast channel) and listenPort+1 (HA) free, the proxy's
``remotingListenPort`` (Apache's default 8080) and ``grpcServerPort`` (default 8081; the gRPC
clients' endpoint). Logs go to <workdir>/logs (namesrv.out, broker.out: the proxy's stdout) and
<workdir>/logs/rocketmqlogs/ (RocketMQ's own logback files under user.home = workdir).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from apache_rocketmq import HERE, ApacheRocketMQ, _free_port, classpath_problem, run_mqadmin

CLASSPATH5 = HERE / "broker5" / "classpath.txt"
VERSION5 = "5.3.3"
LABEL5 = f"Apache RocketMQ {VERSION5}"
SETUP5 = "compat_tests/apache/setup5.sh"


def apache5_problem() -> str | None:
    """None when Java and the resolved 5.3.3 jars are there, else what to run."""
    return classpath_problem((CLASSPATH5,), SETUP5)


class ApacheRocketMQ5(ApacheRocketMQ):
    """One Apache RocketMQ 5.3.3 name server and one proxy in local mode hosting the broker.

    ``broker_conf`` as for ApacheRocketMQ (broker.conf keys, e.g. storePathRootDir to serve an
    existing store); ``proxy_conf`` adds or overrides rmq-proxy.json keys (ProxyConfig's names).
    ``grpc_addr`` is the endpoint for the 5.x gRPC clients, ``proxy_remoting_addr`` the proxy's
    Remoting port; ``broker_addr`` the hosted broker's own Remoting address."""

    VERSION = VERSION5
    CLASSPATH = CLASSPATH5
    ADMIN_CLASSPATH = CLASSPATH5  # rocketmq-tools 5.3.3 comes with the proxy
    BROKER_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
    BROKER_WHAT = "Apache proxy (local mode)"

    def __init__(self, workdir: Path, *, broker_conf: dict[str, str] | None = None,
                 proxy_conf: dict[str, object] | None = None) -> None:
        self.proxy_extra = dict(proxy_conf or {})
        super().__init__(workdir, broker_conf=broker_conf)

    def problem(self) -> str | None:
        return apache5_problem()

    def _choose_ports(self) -> None:
        super()._choose_ports()
        self.grpc_port = _free_port()
        self.proxy_remoting_port = _free_port()
        self.grpc_addr = f"127.0.0.1:{self.grpc_port}"
        self.proxy_remoting_addr = f"127.0.0.1:{self.proxy_remoting_port}"

    def _write_more_conf(self, conf_dir: Path) -> None:
        conf: dict[str, object] = {
            "rocketMQClusterName": self.extra.get("brokerClusterName", "DefaultCluster"),
            "namesrvAddr": self.namesrv_addr,
            "grpcServerPort": self.grpc_port,
            "remotingListenPort": self.proxy_remoting_port,
            "proxyMode": "local",
        }
        conf.update(self.proxy_extra)
        (conf_dir / "rmq-proxy.json").write_text(json.dumps(conf, indent=1))

    def _broker_args(self, home: Path) -> list[str]:
        conf = home / "conf"
        return ["-pm", "local", "-bc", str(conf / "broker.conf"), "-pc", str(conf / "rmq-proxy.json"),
                "-n", self.namesrv_addr]

    def _ports_to_wait_for(self) -> list[int]:
        return [self.broker_port, self.proxy_remoting_port, self.grpc_port]


def mqadmin5(namesrv_addr: str, *args: str, timeout: float = 60,
             workdir: Path | None = None) -> subprocess.CompletedProcess:
    """`mqadmin ARGS -n namesrv_addr` with Apache RocketMQ 5.3.3's tools (e.g. setConsumeMode)."""
    problem = apache5_problem()
    if problem:
        raise RuntimeError(problem)
    return run_mqadmin(CLASSPATH5, namesrv_addr, *args, timeout=timeout, workdir=workdir)


__all__ = ["ApacheRocketMQ5", "CLASSPATH5", "LABEL5", "VERSION5", "apache5_problem", "mqadmin5"]
