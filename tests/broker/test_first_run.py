"""What a user meets on a fresh machine (issue 41): the ready line says where every listener
really is, the Prometheus exporter answers `curl 127.0.0.1:5557/metrics`, a taken port, store
damage and a bad config value are each one line naming what to fix, and --help / --version
say which clients rmqd serves and whether its hot modules run compiled."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from rmqd.broker.listen import ListenError, format_host_port
from rmqd.broker.metrics import exporter_host
from rmqd.store.commitlog import MessageExtBrokerInner
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
from support import free_broker_port, free_port, rmqd, rmqd_command, run_once, stop, wait_ready

pytestmark = pytest.mark.timeout(90)

LISTEN = "0A"  # the TCP_LISTEN state in /proc/net/tcp


def listening() -> dict[int, set[str]]:
    """port -> the IPv4 addresses a socket listens on, from the kernel's table (Linux)."""
    out: dict[int, set[str]] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] != LISTEN:
            continue
        addr, port = fields[1].split(":")
        ip = socket.inet_ntoa(int(addr, 16).to_bytes(4, sys.byteorder))
        out.setdefault(int(port, 16), set()).add(ip)
    return out


def ready_fields(line: str) -> dict[str, str]:
    assert line.startswith("rmqd ready "), line
    return dict(part.split("=", 1) for part in line.split()[2:])


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def store_disk_bytes(root: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


# -- the ready line and the exporter -----------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads the kernel's table of listening sockets")
def test_ready_line_names_each_listener_as_bound_and_the_exporter_answers_on_loopback(tmp_path: Path) -> None:
    """Defaults (no --host, no metricsPromExporterHost): everything listens on every interface,
    the ready line says so, listener by listener, and 127.0.0.1 reaches the exporter (Apache
    binds brokerIP1 there, which 127.0.0.1 does not reach)."""
    ns_port, br_port, grpc_port, metrics_port = free_port(), free_broker_port(), free_port(), free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metricsExporterType=PROM\nmetricsPromExporterPort={metrics_port}\n")
    store = tmp_path / "store"
    proc = rmqd("--log-level", "INFO", "serve", "--store", str(store), "--namesrv-port", str(ns_port),
                "--broker-port", str(br_port), "--grpc-port", str(grpc_port), "-c", str(conf),
                "--kv-config", str(tmp_path / "kv.json"))
    try:
        line = wait_ready(proc, timeout=60)
        fields = ready_fields(line)
        assert list(fields) == ["namesrv", "broker", "fast", "ha", "grpc", "metrics", "store"]
        assert fields == {"namesrv": f"0.0.0.0:{ns_port}", "broker": f"0.0.0.0:{br_port}",
                          "fast": f"0.0.0.0:{br_port - 2}", "ha": f"0.0.0.0:{br_port + 1}",
                          "grpc": f"0.0.0.0:{grpc_port}", "metrics": f"0.0.0.0:{metrics_port}", "store": str(store)}
        bound = listening()
        for name, addr in fields.items():
            if name != "store":
                host, port = addr.rsplit(":", 1)
                assert bound.get(int(port)) == {host}, (name, addr, bound.get(int(port)))
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
            assert answer.status == 200 and b"rocketmq_broker_permission" in answer.read()
        # a new store has reserved no disk it has not written (mapped files are sparse)
        assert store_disk_bytes(store) < 4 << 20
    finally:
        code, err = stop(proc)
    assert code == 0, err
    status = subprocess.run([sys.executable, "-c", "from rmqd._compiled import compiled_status; "
                             "print(compiled_status())"], capture_output=True, text=True, check=True).stdout.strip()
    started = [x for x in err.splitlines() if "serve started; hot modules:" in x]
    assert len(started) == 1 and started[0].endswith(f"hot modules: {status}"), err


def test_metrics_prom_exporter_host_keeps_the_exporter_to_one_address(tmp_path: Path) -> None:
    metrics_port = free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
                    f"metricsPromExporterPort={metrics_port}\n")
    proc = rmqd("serve", "--store", str(tmp_path / "store"), "--namesrv-port", str(free_port()),
                "--broker-port", str(free_broker_port()), "--grpc-port", "-1", "-c", str(conf),
                "--kv-config", str(tmp_path / "kv.json"))
    try:
        fields = ready_fields(wait_ready(proc, timeout=60))
        assert fields["metrics"] == f"127.0.0.1:{metrics_port}" and fields["broker"].startswith("0.0.0.0:")
        assert "grpc" not in fields
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/health", timeout=10) as answer:
            assert answer.status in (200, 503)
    finally:
        code, err = stop(proc)
    assert code == 0, err


def test_the_exporters_host() -> None:
    assert exporter_host("", "0.0.0.0") == "0.0.0.0"  # blank: where the broker listens
    assert exporter_host("  ", "127.0.0.1") == "127.0.0.1"
    assert exporter_host("10.1.2.3", "0.0.0.0") == "10.1.2.3"


# -- a port that is taken -------------------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["namesrv", "broker", "fast", "ha", "grpc"])
def test_a_taken_port_is_one_line_naming_listener_address_and_key(tmp_path: Path, listener: str) -> None:
    ns_port, br_port, grpc_port = free_port(), free_broker_port(), free_port()
    taken, expected = {
        "namesrv": (ns_port, f"the name server on 127.0.0.1:{ns_port} (--namesrv-port)"),
        "broker": (br_port, f"the broker on 127.0.0.1:{br_port} (listenPort, --broker-port)"),
        "fast": (br_port - 2, f"the fast port (listenPort - 2) on 127.0.0.1:{br_port - 2} (listenPort, --broker-port)"),
        "ha": (br_port + 1, f"the HA port (listenPort + 1) on 127.0.0.1:{br_port + 1} "
                            "(listenPort, --broker-port; haBindAddress)"),
        "grpc": (grpc_port, f"the gRPC endpoint on 127.0.0.1:{grpc_port} (grpcServerPort, --grpc-port)"),
    }[listener]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", taken))
        busy.listen()
        result = run_once("serve", "--host", "127.0.0.1", "--store", str(tmp_path / "store"), "--namesrv-port",
                          str(ns_port), "--broker-port", str(br_port), "--grpc-port", str(grpc_port),
                          "--kv-config", str(tmp_path / "kv.json"), timeout=60)
    assert one_line_error(result) == f"rmqd: cannot listen: address already in use: {expected}"


def test_namesrv_and_broker_commands_name_their_own_options(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ns = run_once("namesrv", "--host", "127.0.0.1", "--port", str(port), "--kv-config", str(tmp_path / "kv.json"))
        br = run_once("broker", "--host", "127.0.0.1", "-n", "127.0.0.1:9", "--store", str(tmp_path / "store"),
                      "--port", str(port), "--grpc-port", "-1", timeout=60)
    assert one_line_error(ns) == (f"rmqd: cannot listen: address already in use: the name server on "
                                  f"127.0.0.1:{port} (listenPort of -c, --port)")
    assert one_line_error(br) == (f"rmqd: cannot listen: address already in use: the broker on "
                                  f"127.0.0.1:{port} (listenPort, --port)")


def test_a_listen_error_names_the_address_then_the_listener() -> None:
    exc = ListenError(98, "Address already in use", "::", 8081)
    assert str(exc) == "cannot listen: address already in use: a listener on [::]:8081"
    named = exc.named("the gRPC endpoint", "grpcServerPort")
    assert str(named) == "cannot listen: address already in use: the gRPC endpoint on [::]:8081 (grpcServerPort)"
    assert named.named("something else", "x") is named  # the first name given stands
    assert isinstance(named, OSError) and named.errno == 98 and named.strerror == "Address already in use"
    assert format_host_port("0.0.0.0", 1) == "0.0.0.0:1"


# -- store damage ------------------------------------------------------------------------------------------


def test_a_truncated_store_file_is_a_store_problem_with_the_command_to_inspect_it(tmp_path: Path) -> None:
    root = tmp_path / "store"
    size = 1 << 20
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeCommitLog={size}\n")
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=size))
    s.load()
    s.start()
    for i in range(20):
        assert s.put_message(MessageExtBrokerInner("T", 0, b"x" * 500, {})).is_ok()
    s.shutdown()
    damaged = root / "commitlog" / f"{0:020d}"
    os.truncate(damaged, 5000)  # cut inside the records

    result = run_once("serve", "--host", "127.0.0.1", "-c", str(conf), "--store", str(root), "--namesrv-port",
                      str(free_port()), "--broker-port", str(free_broker_port()), "--grpc-port", "-1",
                      "--kv-config", str(tmp_path / "kv.json"), timeout=60)
    line = one_line_error(result)
    verify = f"rmqd store verify {root} -c {conf}"
    assert line == (f"rmqd: store problem: {damaged}:0: file size 5000 does not match the configured size {size}; "
                    f"inspect the store with: {verify}")
    # the command given runs and lists the damage, file and offset (exit 1)
    checked = subprocess.run(rmqd_command(*verify.split()[1:]), capture_output=True, text=True, timeout=60)
    assert checked.returncode == 1 and "Traceback" not in checked.stderr, checked.stderr
    assert f"{damaged}:" in checked.stdout, checked.stdout


# -- config errors name the file and the key ----------------------------------------------------------------


def test_the_cli_line_of_an_enum_error_names_the_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("flushDiskType=SOMETIMES\n")
    line = one_line_error(run_once("serve", "-c", str(conf), "--store", str(tmp_path / "store"),
                                   "--namesrv-port", "0", "--kv-config", str(tmp_path / "kv.json"), timeout=60))
    assert line == f"rmqd: {conf}: flushDiskType='SOMETIMES' is not one of ASYNC_FLUSH, SYNC_FLUSH"


# -- --help and --version ----------------------------------------------------------------------------------------


def test_help_names_both_client_generations() -> None:
    result = run_once("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "4.9.x clients over Remoting" in text and "5.x clients over gRPC" in text and "rocketmq-proxy" in text


def test_version_says_whether_the_hot_modules_run_compiled() -> None:
    from importlib.metadata import version

    plain = subprocess.run(rmqd_command("--version"), capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, RMQD_PURE="1"))
    assert plain.returncode == 0 and plain.stdout == f"rmqd {version('rmqd')} (plain Python: RMQD_PURE=1)\n"
    result = run_once("--version")
    assert result.returncode == 0
    assert re.fullmatch(rf"rmqd {re.escape(version('rmqd'))} \((compiled: \d+ of \d+ modules.*|plain Python: .+)\)\n",
                        result.stdout), result.stdout
