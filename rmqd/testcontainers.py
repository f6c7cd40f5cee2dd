"""Testcontainers for rmqd and for Apache RocketMQ, so one test can run against both.

    from rmqd.testcontainers import RmqdContainer

    with RmqdContainer() as mq:                      # the image built from this repository's Dockerfile
        producer.set_namesrv_addr(mq.namesrv_address())

Why a module of our own rather than a GenericContainer recipe: a RocketMQ broker advertises
``brokerIP1:listenPort`` in every route, so the port a client dials must be the port the broker
listens on, and the address must be one the client can reach.  These classes take care of it:

- ``network_mode="host"`` (the default): the broker listens on free 127.0.0.1 ports of the host
  and advertises 127.0.0.1; nothing is published, nothing crosses the engine's bridge.
- ``network_mode="bridge"``: the same ports are published on 127.0.0.1 only (inside = outside)
  and ``brokerIP1`` is 127.0.0.1, for engines without host networking (Docker Desktop).

``start()`` returns once the broker printed its ready line (``rmqd ready`` / Apache's
``boot success``); a container that exits first, or a port already taken, raises
:class:`ContainerStartError` with the broker's own one-line error instead of waiting.  ``stop()``
asks for a graceful stop (SIGTERM: the store is flushed, the abort file removed) before the
container is removed - testcontainers' own ``stop()`` force-removes, i.e. SIGKILLs the broker.
``kill()`` is the crash (SIGKILL).  With ``store_volume`` (a named volume or a host directory) a
new container continues on the store of a killed or stopped one.

Docker and Podman both work: the engine is the one ``DOCKER_HOST`` names (Podman's socket, e.g.
``unix:///run/podman/podman.sock``), else the default Docker socket.  testcontainers removes
containers a crashed test left through its reaper, Ryuk, a container of its own; where Ryuk's
image is not there and cannot be pulled (no registry reachable) or Ryuk cannot start, these
classes say so in one line and remove their containers themselves when the interpreter exits
(``TESTCONTAINERS_RYUK_DISABLED=true`` skips the attempt).  The rmqd image comes from
``scripts/dev image`` (``rmqd:latest``).  Needs ``pip install 'rmqd[testcontainers]'``.
"""

from __future__ import annotations

import atexit
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

try:
    from docker.errors import APIError, DockerException, NotFound
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer, Reaper
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("rmqd.testcontainers needs testcontainers: pip install 'rmqd[testcontainers]'") from exc

__all__ = [
    "ApacheRocketMQContainer",
    "ContainerStartError",
    "RmqdContainer",
    "free_broker_port",
    "free_port",
]

NetworkMode = Literal["host", "bridge"]
TlsMode = Literal["disabled", "permissive", "enforcing"]

#: ``scripts/dev image`` in the repository builds it (scripts/containers.sh rmqd-image).
DEFAULT_IMAGE = "rmqd:latest"
#: scripts/containers.sh apache-image builds it from the Maven Central jars.
DEFAULT_APACHE_IMAGE = "rmqd-apache-rocketmq:4.9.7"
LOOPBACK = "127.0.0.1"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


class ContainerStartError(RuntimeError):
    """The container did not become ready: it exited (the message has its last output lines),
    a port was taken, or the ready line did not come in time."""


# --------------------------------------------------------------------------------------------
# ports


def port_free(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_broker_port(host: str = LOOPBACK) -> int:
    """A port p with p-2 (the fast/VIP port) and p+1 (a master's HA port) free too."""
    for _ in range(200):
        p = free_port(host)
        if 1026 < p < 65000 and port_free(p - 2, host) and port_free(p + 1, host):
            return p
    raise ContainerStartError("no free broker port (p, p-2 and p+1) found on 127.0.0.1")


def broker_ports(listen_port: int) -> dict[str, int]:
    return {"broker": listen_port, "fast": listen_port - 2, "ha": listen_port + 1}


def _properties(keys: Mapping[str, object]) -> bytes:
    """java.util.Properties text; values are written as given (RocketMQ's keys and spellings)."""
    return "".join(f"{k}={v}\n" for k, v in keys.items()).encode("utf-8")


# --------------------------------------------------------------------------------------------
# clean-up: testcontainers' reaper (Ryuk) where it can run, else ours at exit


class _OwnCleanup:
    """The containers these classes started and have not removed yet, removed at exit when Ryuk
    does not run. Ryuk also covers a killed interpreter; this covers an ordinary exit (a test
    session ending, an exception out of ``with``), which is what leaves containers behind in practice."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.decided: bool | None = None  # None: not asked yet; True: Ryuk runs; False: we clean up
        self.live: dict[int, "_BrokerContainer"] = {}
        self.registered = False

    def reaper_runs(self) -> bool:
        """Whether Ryuk runs for this session: started here (testcontainers would start it in
        ``start()`` anyway) so that its failure can be told from the broker's. Decided once."""
        with self.lock:
            if self.decided is None:
                self.decided = self._start_reaper()
            if not self.decided and not self.registered:
                atexit.register(self.remove_all)
                self.registered = True
            return self.decided

    @staticmethod
    def _start_reaper() -> bool:
        if testcontainers_config.ryuk_disabled:
            return False
        try:
            Reaper.get_instance()  # pulls testcontainers_config.ryuk_image when it is not there
        except (DockerException, OSError, RuntimeError) as exc:
            # the engine's own words (APIError.explanation: 'Get "https://registry-1.docker.io/v2/": ...')
            reason = " ".join(str(getattr(exc, "explanation", None) or exc).split())[:200]
            print(f"rmqd.testcontainers: no Ryuk ({testcontainers_config.ryuk_image}: {reason}); "
                  "the containers started here are removed at exit instead", file=sys.stderr, flush=True)
            testcontainers_config.ryuk_disabled = True  # testcontainers' start() would try again
            return False
        return True

    def add(self, container: "_BrokerContainer") -> None:
        with self.lock:
            self.live[id(container)] = container

    def discard(self, container: "_BrokerContainer") -> None:
        with self.lock:
            self.live.pop(id(container), None)

    def remove_all(self) -> None:
        with self.lock:
            left = list(self.live.values())
            self.live.clear()
        for container in left:
            container._remove_quietly()


_CLEANUP = _OwnCleanup()


# --------------------------------------------------------------------------------------------
# the shared part: ports, start with a bounded wait, graceful stop, kill


class _BrokerContainer(DockerContainer):
    """A name server + broker in one container, reachable at 127.0.0.1."""

    #: a line of the container's output that says the broker is serving
    READY = re.compile(r"$^")

    def __init__(self, image: str, *, network_mode: NetworkMode = "host", namesrv_port: int | None = None,
                 broker_port: int | None = None, user: str | None = None, working_dir: str | None = None,
                 ready_timeout: float = READY_TIMEOUT_S, stop_timeout: float = STOP_TIMEOUT_S,
                 **kwargs: Any) -> None:
        super().__init__(image, **kwargs)
        if network_mode not in ("host", "bridge"):
            raise ValueError(f"network_mode must be 'host' or 'bridge', not {network_mode!r}")
        self.network_mode: NetworkMode = network_mode
        self._fixed_ports = (namesrv_port, broker_port)
        self.namesrv_port = namesrv_port or 0
        self.broker_port = broker_port or 0
        self.grpc_port = 0  #: RmqdContainer: RocketMQ 5's gRPC clients (0: none)
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.ready_line = ""
        self.startup_s = 0.0
        self.exit_code: int | None = None
        self._create_kwargs: dict[str, Any] = {}
        if user is not None:
            self._create_kwargs["user"] = user
        if working_dir is not None:
            self._create_kwargs["working_dir"] = working_dir

    # -- addresses

    def namesrv_address(self) -> str:
        """host:port of the name server, for a client's setNamesrvAddr / set_namesrv_addr."""
        return f"{LOOPBACK}:{self.namesrv_port}"

    def broker_address(self) -> str:
        """host:port of the broker (what routes advertise: brokerIP1:listenPort)."""
        return f"{LOOPBACK}:{self.broker_port}"

    def grpc_address(self) -> str | None:
        """host:port for RocketMQ 5's gRPC clients (their endpoints), None where there is none."""
        return f"{LOOPBACK}:{self.grpc_port}" if self.grpc_port else None

    # -- start

    def _pick_ports(self) -> None:
        namesrv_port, broker_port = self._fixed_ports
        wanted = {}
        if namesrv_port:
            wanted[f"name server port {namesrv_port}"] = namesrv_port
        if broker_port:
            wanted.update({f"broker {what} port {p}": p for what, p in broker_ports(broker_port).items()})
        taken = [what for what, p in wanted.items() if not port_free(p)]
        if taken:
            raise ContainerStartError(f"cannot start {self.image}: {', '.join(taken)} on {LOOPBACK} already in use")
        self.namesrv_port = namesrv_port or free_port()
        self.broker_port = broker_port or free_broker_port()

    def _network_kwargs(self) -> dict[str, Any]:
        if self.network_mode == "host":
            return {"network_mode": "host"}
        grpc = [self.grpc_port] if self.grpc_port else []
        for p in (self.namesrv_port, *broker_ports(self.broker_port).values(), *grpc):
            # published on the loopback only, the same number inside and out (brokerIP1:listenPort)
            self.ports[f"{p}/tcp"] = (LOOPBACK, p)  # type: ignore[assignment]
        return {}

    def _prepare(self) -> None:
        """Subclasses: command, environment and files, once the ports are known."""

    def start(self) -> "_BrokerContainer":
        self._pick_ports()
        self._prepare()
        self._kwargs = {**self._kwargs, **self._create_kwargs, **self._network_kwargs()}
        own_cleanup = not _CLEANUP.reaper_runs()
        t0 = time.monotonic()
        try:
            super().start()
            if own_cleanup:
                _CLEANUP.add(self)
        except APIError as exc:
            self._remove_quietly()
            text = str(exc.explanation or exc)
            if "already allocated" in text or "address already in use" in text:
                raise ContainerStartError(f"cannot start {self.image}: a port is already in use ({text})") from None
            raise ContainerStartError(f"cannot start {self.image}: {text}") from None
        self._wait_ready(t0)
        return self

    def _output(self) -> str:
        container = self.get_wrapped_container()
        return container.logs(stdout=True, stderr=True).decode("utf-8", errors="replace")

    def _wait_ready(self, t0: float) -> None:
        container = self.get_wrapped_container()
        deadline = t0 + self.ready_timeout
        delay = 0.02
        while True:
            text = self._output()
            match = self.READY.search(text)
            if match:
                self.ready_line = match.group(0).strip()
                self.startup_s = time.monotonic() - t0
                return
            container.reload()
            if container.status in ("exited", "dead"):
                self.exit_code = int(container.attrs["State"]["ExitCode"])
                lines = [ln for ln in text.splitlines() if ln.strip()]
                self._remove_quietly()
                last = lines[-1] if lines else "(no output)"
                raise ContainerStartError(f"{self.image} exited with {self.exit_code} before it was ready: {last}"
                                          + ("\n" + "\n".join(lines[-20:]) if len(lines) > 1 else ""))
            if time.monotonic() > deadline:
                self._remove_quietly()
                raise ContainerStartError(f"{self.image} printed no ready line within {self.ready_timeout:.0f} s:\n"
                                          + "\n".join(text.splitlines()[-20:]))
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    # -- stop

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:  # noqa: ARG002 - testcontainers' signature
        """Graceful: SIGTERM, wait up to ``stop_timeout`` (then the engine SIGKILLs), remove.
        The exit code is in ``exit_code`` (0 after a clean stop)."""
        self.terminate(self.stop_timeout)
        self._remove_quietly(delete_volume)
        self.get_docker_client().client.close()

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait for the exit, keeping the container (its output stays readable)."""
        if self._container is None:
            return self.exit_code
        try:
            self._container.stop(timeout=max(1, int(timeout)))
            self.exit_code = int(self._container.wait(timeout=timeout + 10)["StatusCode"])
        except NotFound:
            pass
        return self.exit_code

    def kill(self) -> None:
        """SIGKILL, as a crash: no flush, no shutdown hook; the container is removed."""
        if self._container is None:
            return
        try:
            self._container.kill()
            self.exit_code = int(self._container.wait(timeout=30)["StatusCode"])
        except (NotFound, APIError):
            pass
        self._remove_quietly()

    def _remove_quietly(self, delete_volume: bool = True) -> None:
        _CLEANUP.discard(self)
        if self._container is None:
            return
        try:
            self._container.remove(force=True, v=delete_volume)
        except (NotFound, APIError):
            pass
        self._container = None


# --------------------------------------------------------------------------------------------
# rmqd


class RmqdContainer(_BrokerContainer):
    """``rmqd serve`` (name server + broker) from the rmqd image.

    ``broker_conf``: broker.conf keys (RocketMQ's names), written to /etc/rmqd/broker.conf.
    ``acl``: the text of a plain_acl.yml; sets aclEnable=true (rocketmqHome=/etc/rmqd).
    ``tls_mode``: tls.server.mode (disabled / permissive / enforcing); with ``tls_cert`` and
    ``tls_key`` (PEM files on the host) those are served, else a self-signed certificate
    (tls.test.mode.enable, as RocketMQ).  ``store_volume``: a named volume or a host directory
    for /var/lib/rmqd (the store and the name server's kvConfig.json), kept after the container;
    without it the store lives in an anonymous volume removed with the container.
    ``args``: more ``rmqd serve`` arguments.  ``rmqd_args``: run exactly ``rmqd RMQD_ARGS``
    instead (any command, the caller's own ports, paths and files; used by the project's
    compatibility harness), still waiting for its ready line.
    """

    READY = re.compile(r"^rmqd ready .*$", re.MULTILINE)
    CONF_DIR = "/etc/rmqd"

    def __init__(self, image: str = DEFAULT_IMAGE, *, broker_conf: Mapping[str, object] | None = None,
                 acl: str | None = None, tls_mode: TlsMode | None = None, tls_cert: str | os.PathLike[str] | None = None,
                 tls_key: str | os.PathLike[str] | None = None, store_volume: str | os.PathLike[str] | None = None,
                 args: Sequence[str] = (), rmqd_args: Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(image, **kwargs)
        self.rmqd_args = None if rmqd_args is None else list(rmqd_args)
        self.broker_conf = dict(broker_conf or {})
        self.acl = acl
        self.tls_mode = tls_mode
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        self.tls_files = (Path(tls_cert), Path(tls_key)) if tls_cert is not None and tls_key is not None else None
        self.args = list(args)
        if store_volume is not None:
            source = str(Path(store_volume).absolute()) if os.sep in str(store_volume) else str(store_volume)
            self.with_volume_mapping(source, "/var/lib/rmqd", "rw")

    def _pick_ports(self) -> None:
        if self.rmqd_args is None:
            super()._pick_ports()
            self.grpc_port = free_port()

    def _prepare(self) -> None:
        if self.rmqd_args is not None:
            self.with_command(self.rmqd_args)
            # the image's HEALTHCHECK probes RMQD_*_PORT, which these arguments need not use
            self._create_kwargs["healthcheck"] = {"test": ["NONE"]}
            return
        conf = dict(self.broker_conf)
        self.with_env("RMQD_NAMESRV_PORT", str(self.namesrv_port))
        self.with_env("RMQD_BROKER_PORT", str(self.broker_port))
        self.with_env("RMQD_GRPC_PORT", str(self.grpc_port))
        command = ["serve"]
        if self.network_mode == "host":
            command += ["--host", LOOPBACK]  # listen on, and advertise, the loopback only
        else:
            self.with_env("RMQD_BROKER_IP1", LOOPBACK)  # advertised; broker.conf's brokerIP1 still wins
        if self.acl is not None:
            conf.setdefault("aclEnable", "true")
            conf.setdefault("rocketmqHome", self.CONF_DIR)
            self.with_copy_into_container(self.acl.encode("utf-8"), f"{self.CONF_DIR}/conf/plain_acl.yml")
        if self.tls_mode is not None or self.tls_files is not None:
            tls = {"tls.test.mode.enable": "true"}
            if self.tls_files is not None:
                cert, key = self.tls_files
                self.with_copy_into_container(cert.read_bytes(), f"{self.CONF_DIR}/tls/cert.pem")
                self.with_copy_into_container(key.read_bytes(), f"{self.CONF_DIR}/tls/key.pem")
                tls = {"tls.test.mode.enable": "false", "tls.server.certPath": f"{self.CONF_DIR}/tls/cert.pem",
                       "tls.server.keyPath": f"{self.CONF_DIR}/tls/key.pem"}
            self.with_copy_into_container(_properties(tls), f"{self.CONF_DIR}/tls.properties")
            java_opt = f"-Dtls.config.file={self.CONF_DIR}/tls.properties"
            if self.tls_mode is not None:
                java_opt += f" -Dtls.server.mode={self.tls_mode}"
                if self.tls_mode == "enforcing":
                    java_opt += " -Dtls.enable=true"  # the broker's own name-server connection too
            self.with_env("JAVA_OPT", java_opt)
        if conf:
            self.with_copy_into_container(_properties(conf), f"{self.CONF_DIR}/broker.conf")
        self.with_command(command + self.args)

    def start(self) -> "RmqdContainer":
        super().start()
        return self


# --------------------------------------------------------------------------------------------
# Apache RocketMQ


class ApacheRocketMQContainer(_BrokerContainer):
    """Apache RocketMQ 4.9.7's name server and broker in one container (the image of
    compat_tests/apache/image, built from the Maven Central jars), for running the same test
    against the reference broker.  ``broker_conf`` adds or overrides broker.conf keys; ``acl``
    is a plain_acl.yml text (aclEnable=true).  ``home``: a directory inside the container (e.g.
    a mounted one) that already holds conf/namesrv.properties and conf/broker.conf; the
    container then uses it as is and writes nothing."""

    READY = re.compile(r"^The broker\[.*boot success.*$", re.MULTILINE)
    HOME = "/opt/rocketmq"

    def __init__(self, image: str = DEFAULT_APACHE_IMAGE, *, broker_conf: Mapping[str, object] | None = None,
                 acl: str | None = None, home: str | None = None, **kwargs: Any) -> None:
        super().__init__(image, **kwargs)
        self.broker_conf = dict(broker_conf or {})
        self.acl = acl
        self.home = home

    def _prepare(self) -> None:
        if self.home is not None:
            self.with_env("ROCKETMQ_HOME", self.home)
            return
        conf: dict[str, object] = {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0,
            "listenPort": self.broker_port, "namesrvAddr": self.namesrv_address(), "brokerIP1": LOOPBACK,
            "storePathRootDir": "/home/rocketmq/store", "storePathCommitLog": "/home/rocketmq/store/commitlog",
            "autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true", "flushDiskType": "ASYNC_FLUSH",
            "mappedFileSizeCommitLog": 64 * 1024 * 1024,
        }
        conf.update(self.broker_conf)
        if self.acl is not None:
            conf.setdefault("aclEnable", "true")
            self.with_copy_into_container(self.acl.encode("utf-8"), f"{self.HOME}/conf/plain_acl.yml")
        self.with_copy_into_container(_properties(conf), f"{self.HOME}/conf/broker.conf")
        self.with_copy_into_container(_properties({"listenPort": self.namesrv_port}),
                                      f"{self.HOME}/conf/namesrv.properties")

    def start(self) -> "ApacheRocketMQContainer":
        super().start()
        return self
