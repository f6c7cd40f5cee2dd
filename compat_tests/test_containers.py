"""The container image and rmqd.testcontainers as a user runs them (issue 26).

One test runs against rmqd and Apache RocketMQ alike through the module; a real client (the
C++ client: no JVM to start) round-trips through host networking and through ports published on
127.0.0.1; a SIGKILLed container's store, kept in a named volume, serves every acknowledged
message to the next container; `stop()` is graceful (exit 0, no abort file); the image's
HEALTHCHECK turns healthy; ACL and TLS options work with the Go client; a broken broker.conf
mounted into the container fails with the same one line as on the host; a taken port fails at
once with a clear message.  Clients reach the containers only through 127.0.0.1.

These need a container engine: under RMQD_REQUIRE_ALL (scripts/dev test) a missing one fails;
RMQD_COMPAT_RUNNER=process (no engine on purpose) skips them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import compat_harness as harness
import compat_runner
from compat_harness import body_of, msg_spec
from compat_session import Session
from test_compat_acl import PLAIN_ACL

pytestmark = pytest.mark.timeout(300)

ROUND_TRIP_CLIENT = "cpp"
DOCS = harness.REPO / "docs" / "containers.md"


@pytest.fixture(scope="module")
def images() -> tuple[str, str]:
    if not compat_runner.containers():
        pytest.skip("RMQD_COMPAT_RUNNER=process: this run uses no container engine")
    problem = compat_runner.engine_problem()
    if problem:
        harness.missing(problem)
    return compat_runner.images()


@pytest.fixture(scope="module")
def tc() -> Any:
    import rmqd.testcontainers as tc_module  # the module users import

    return tc_module


def need(client: str) -> None:
    problem = harness.client_problem(client)
    if problem:
        harness.missing(problem)


def round_trip(namesrv: str, tmp_path: Path, case: str, client: str = ROUND_TRIP_CLIENT, n: int = 5,
               **extra: Any) -> None:
    """Send n messages, consume them with a new push group: exactly those n come back."""
    need(client)
    s = Session(client, tmp_path, namesrv, case)
    try:
        topic = s.name("t")
        bodies = [f"{case}-{i}-{s.tag}".encode() for i in range(n)]
        s.produce(topic, [msg_spec(b, tags="TagC") for b in bodies], **extra)
        c = s.push(topic, s.name("cg"), consume_from="CONSUME_FROM_FIRST_OFFSET", **extra)
        c.wait_messages(n, 60)
        c.wait_for(lambda evs: False, 0.5)
        c.stop()
    finally:
        s.close()
    assert sorted(body_of(m) for m in c.messages()) == sorted(bodies), c.diagnostics()


# --------------------------------------------------------------------------------------------
# one test, both brokers


@pytest.mark.parametrize("broker", ["rmqd", "apache"])
def test_one_test_against_rmqd_and_apache(broker: str, images: tuple[str, str], tc: Any, tmp_path: Path) -> None:
    factory: Callable[[], Any] = {
        "rmqd": lambda: tc.RmqdContainer(images[0]),
        "apache": lambda: tc.ApacheRocketMQContainer(images[1]),
    }[broker]
    t0 = time.monotonic()
    with factory() as mq:
        assert mq.namesrv_address().startswith("127.0.0.1:") and mq.broker_address().startswith("127.0.0.1:")
        round_trip(mq.namesrv_address(), tmp_path, f"both_{broker}")
        if broker == "rmqd":  # host networking: the gRPC port on the loopback too
            assert_grpc_answers(mq.grpc_address())
    assert mq.exit_code == 0, f"{broker} container exited {mq.exit_code} after the graceful stop"
    print(f"\n{broker}: start->ready {mq.startup_s:.2f} s, start+round trip+stop {time.monotonic() - t0:.2f} s")


def assert_grpc_answers(addr: str | None) -> None:
    """RocketMQ 5's gRPC port speaks HTTP/2 (h2c): a client preface gets the server's SETTINGS."""
    assert addr is not None
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
        head = s.recv(9)
    assert len(head) == 9 and head[3] == 4, head


def test_published_ports_on_loopback(images: tuple[str, str], tc: Any, tmp_path: Path) -> None:
    """network_mode="bridge": ports published on 127.0.0.1 only, inside = outside, and the route
    advertises 127.0.0.1 (RMQD_BROKER_IP1), so the client never dials a bridge address."""
    with tc.RmqdContainer(images[0], network_mode="bridge") as mq:
        bindings = mq.get_wrapped_container().attrs["HostConfig"]["PortBindings"]
        assert {b["HostIp"] for bs in bindings.values() for b in bs} == {"127.0.0.1"}, bindings
        assert {int(k.split("/")[0]) for k in bindings} == {mq.namesrv_port, mq.broker_port, mq.broker_port - 2,
                                                            mq.broker_port + 1, mq.grpc_port}
        round_trip(mq.namesrv_address(), tmp_path, "bridge")
        assert_grpc_answers(mq.grpc_address())
    assert mq.exit_code == 0


# --------------------------------------------------------------------------------------------
# the store in a volume


@pytest.fixture
def volume(images: tuple[str, str]) -> Iterator[str]:
    import docker

    name = f"rmqd-test-{uuid.uuid4().hex[:10]}"
    yield name
    client = docker.from_env()
    try:
        client.volumes.get(name).remove(force=True)
    except docker.errors.NotFound:
        pass
    client.close()


def test_sigkilled_container_store_survives_in_volume(images: tuple[str, str], tc: Any, volume: str,
                                                       tmp_path: Path) -> None:
    need(ROUND_TRIP_CLIENT)
    mq = tc.RmqdContainer(images[0], store_volume=volume).start()
    s = Session(ROUND_TRIP_CLIENT, tmp_path, mq.namesrv_address(), "volkill")
    topic = s.name("t")
    bodies = [f"acked-{i}-{s.tag}".encode() * 10 for i in range(30)]
    try:
        sent = s.produce(topic, [msg_spec(b, tags="TagK") for b in bodies]).of("sent")
        assert len(sent) == 30 and {e["status"] for e in sent} == {"SEND_OK"}
    finally:
        mq.kill()  # SIGKILL: no flush, no shutdown hook
    assert mq.exit_code == 137, mq.exit_code

    with tc.RmqdContainer(images[0], store_volume=volume) as mq2:  # new container, new ports, same store
        s2 = Session(ROUND_TRIP_CLIENT, tmp_path, mq2.namesrv_address(), "volkill")
        s2.tag = s.tag
        try:
            s2.produce(topic, [msg_spec(b"after-" + s.tag.encode(), tags="TagK")])
            c = s2.push(topic, s2.name("cg"), consume_from="CONSUME_FROM_FIRST_OFFSET")
            c.wait_messages(31, 90)
            c.wait_for(lambda evs: False, 1.0)
            c.stop()
        finally:
            s2.close()
    got = [body_of(m) for m in c.messages()]
    lost = [b for b in bodies if b not in got]
    assert not lost, f"{len(lost)} of 30 acknowledged messages lost after SIGKILL\n{c.diagnostics()}"
    assert sorted(got) == sorted(bodies + [b"after-" + s.tag.encode()]), "duplicates or strays after recovery"
    assert mq2.exit_code == 0


def test_graceful_stop_and_healthcheck(images: tuple[str, str], tc: Any, tmp_path: Path) -> None:
    """A host directory as the store volume (owned by the container's user): the HEALTHCHECK
    turns healthy, stop() is SIGTERM (exit 0, the abort file removed, the checkpoint written)."""
    data = tmp_path / "data"
    data.mkdir()
    mq = tc.RmqdContainer(images[0], store_volume=data, user=f"{os.getuid()}:{os.getgid()}")
    with mq:
        assert (data / "store" / "abort").exists(), "a running broker keeps its abort file"
        c = mq.get_wrapped_container()
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline:
            c.reload()
            status = c.attrs["State"].get("Health", {}).get("Status")
            if status == "healthy":
                break
            time.sleep(0.5)
        assert status == "healthy", c.attrs["State"].get("Health")
    assert mq.exit_code == 0
    assert not (data / "store" / "abort").exists(), "the graceful stop left the abort file"
    assert (data / "store" / "checkpoint").is_file()


# --------------------------------------------------------------------------------------------
# ACL and TLS options




def test_acl_option(images: tuple[str, str], tc: Any, tmp_path: Path) -> None:
    need("go")
    with tc.RmqdContainer(images[0], acl=PLAIN_ACL) as mq:
        signed = {"accessKey": "RocketMQ", "secretKey": "12345678"}
        round_trip(mq.namesrv_address(), tmp_path, "acl", client="go", n=2, **signed)
        d = harness.run_driver("go", {"role": "produce", "namesrv": mq.namesrv_address(), "topic": "acl_unsigned",
                                      "group": "pg_unsigned", "mode": "sync", "messages": [msg_spec(b"x")]},
                               tmp_path, "unsigned", 60)
        assert not d.of("sent") and d.of("send_error"), d.diagnostics()
    assert mq.exit_code == 0


def _self_signed(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A certificate and key for 127.0.0.1 (PEM files) and the certificate's DER bytes."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rmqd-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30)).sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file, cert.public_bytes(serialization.Encoding.DER)


def test_tls_option(images: tuple[str, str], tc: Any, tmp_path: Path) -> None:
    """tls_mode="enforcing" with the caller's certificate: the broker serves exactly that
    certificate, a TLS client round-trips, a plaintext one gets nothing."""
    import ssl

    need("go")
    cert_file, key_file, der = _self_signed(tmp_path)
    with tc.RmqdContainer(images[0], tls_mode="enforcing", tls_cert=cert_file, tls_key=key_file) as mq:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with socket.create_connection(("127.0.0.1", mq.broker_port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as tls_sock:
                assert tls_sock.getpeercert(binary_form=True) == der
        round_trip(mq.namesrv_address(), tmp_path, "tls", client="go", n=2, tls=True)
        d = harness.run_driver("go", {"role": "produce", "namesrv": mq.namesrv_address(), "topic": "tls_plain",
                                      "group": "pg_plain", "mode": "sync", "messages": [msg_spec(b"x")]},
                               tmp_path, "plain", 60)
        assert not d.of("sent"), d.diagnostics()
    assert mq.exit_code == 0


def test_docs_pytest_example(images: tuple[str, str], tmp_path: Path) -> None:
    """docs/containers.md's pytest example, run by pytest as a user would (its own process)."""
    need("cpp")
    text = DOCS.read_text()
    start = text.index("```python\nimport os\n")
    code = text[start + len("```python\n"):text.index("```", start + 3)]
    example = tmp_path / "test_rmqd_example.py"
    example.write_text(code)
    env = dict(os.environ, RMQD_IMAGE=images[0], TESTCONTAINERS_RYUK_DISABLED="true",
               TESTCONTAINERS_CONNECTION_MODE="docker_host")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        str(example)], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


# --------------------------------------------------------------------------------------------
# the same image from Testcontainers for Java


JAVA_EXAMPLE = harness.HERE / "containers_java"


def java_snippet() -> list[str]:
    """The example's lines between its snippet markers, stripped (what docs/containers.md shows)."""
    lines = (JAVA_EXAMPLE / "src" / "RmqdGenericContainer.java").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "snippet in docs/containers.md starts" in line)
    end = next(i for i, line in enumerate(lines) if "the snippet ends here" in line)
    return [line.strip() for line in lines[start + 1:end] if line.strip()]


def test_generic_container_from_java(images: tuple[str, str]) -> None:
    """docs/containers.md's GenericContainer example, run with Testcontainers for Java: the
    image started, one message sent and pulled back by the 4.9.8 Java client, stopped cleanly."""
    classpath = JAVA_EXAMPLE / "target" / "classpath.txt"
    if not classpath.is_file():
        harness.missing("compat_tests/containers_java/setup.sh has not run (scripts/dev setup --all)")
    docs = [line.strip() for line in DOCS.read_text().splitlines()]
    assert all(line in docs for line in java_snippet()), "docs/containers.md's Java snippet differs from the example"
    env = dict(os.environ, TESTCONTAINERS_RYUK_DISABLED="true",
               # this machine is itself a container (/.dockerenv): without the override Testcontainers
               # for Java runs a helper image (which cannot be pulled here) to find the engine's address
               TESTCONTAINERS_HOST_OVERRIDE="127.0.0.1")
    cp = f"{JAVA_EXAMPLE / 'target' / 'classes'}:{classpath.read_text().strip()}"
    r = subprocess.run(["java", "-Xmx256m", "-cp", cp, "RmqdGenericContainer", images[0], str(harness.free_port()),
                        str(harness.free_broker_port())], capture_output=True, text=True, timeout=240, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "sent SEND_OK" in r.stdout and "received hello rmqd" in r.stdout, out[-3000:]


# --------------------------------------------------------------------------------------------
# Podman


@pytest.fixture(scope="module")
def podman(images: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """Podman's Docker-compatible socket with the rmqd image (scripts/containers.sh podman);
    a service this fixture started is stopped after the module."""
    script = str(harness.REPO / "scripts" / "containers.sh")
    r = subprocess.run(["bash", script, "podman"], capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, PYTHON=sys.executable))
    if r.returncode != 0:
        harness.missing(f"no Podman socket: {r.stderr.strip()[-1500:]}")
    found = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    yield found["DOCKER_HOST"], found["PODMAN_IMAGE"]
    subprocess.run(["bash", script, "podman-stop"], timeout=60)


def test_podman_socket(podman: tuple[str, str], tc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same module against Podman (DOCKER_HOST = its socket): host networking and published
    ports both round-trip, stop() exits 0, a broken broker.conf gives rmqd's one line."""
    docker_host, image = podman
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    for mode in ("host", "bridge"):
        with tc.RmqdContainer(image, network_mode=mode) as mq:
            round_trip(mq.namesrv_address(), tmp_path, f"podman_{mode}", n=2)
        assert mq.exit_code == 0, (mode, mq.exit_code)
    with pytest.raises(tc.ContainerStartError, match="exited with 1 before it was ready: rmqd: /etc/rmqd/broker.conf: "
                                                     "flushDiskType='SOMETIMES' is not one of ASYNC_FLUSH, SYNC_FLUSH"):
        bad = tc.RmqdContainer(image, broker_conf={"flushDiskType": "SOMETIMES"})
        try:
            bad.start()
        finally:  # started after all (the test fails): not left running
            bad.stop()


# --------------------------------------------------------------------------------------------
# bad input


def test_broken_conf_fails_as_on_the_host(images: tuple[str, str], tc: Any, tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\nlistenPort=not-a-number\n")
    conf.chmod(0o644)
    host = subprocess.run(harness.rmqd_command() + ["serve", "-c", str(conf), "--store", str(tmp_path / "store"),
                                                    "--namesrv-port", "0", "--broker-port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert host.returncode == 1 and len(host.stderr.strip().splitlines()) == 1, host.stderr
    want = host.stderr.strip().replace(str(conf), "/etc/rmqd/broker.conf")

    mq = tc.RmqdContainer(images[0]).with_volume_mapping(str(conf), "/etc/rmqd/broker.conf", "ro")
    t0 = time.monotonic()
    with pytest.raises(tc.ContainerStartError) as err:
        mq.start()
    assert time.monotonic() - t0 < 30
    assert mq.exit_code == 1
    lines = str(err.value).splitlines()
    assert lines[0].endswith(f"exited with 1 before it was ready: {want}"), (lines, want)
    assert len(lines) == 1, lines  # the one line, nothing more


def test_port_taken_fails_fast(images: tuple[str, str], tc: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for mode in ("host", "bridge"):
            t0 = time.monotonic()
            with pytest.raises(tc.ContainerStartError, match=f"name server port {port} on 127.0.0.1 already in use"):
                tc.RmqdContainer(images[0], namesrv_port=port, network_mode=mode).start()
            assert time.monotonic() - t0 < 5

    # taken after the module's check (by another process racing it): rmqd's own one line
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        mq = tc.RmqdContainer(images[0], args=["--namesrv-port", str(port)])
        t0 = time.monotonic()
        with pytest.raises(tc.ContainerStartError, match="cannot listen: address already in use"):
            mq.start()
        assert time.monotonic() - t0 < 30
