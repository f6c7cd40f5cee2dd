"""broker.tls: tls.server.mode disabled / permissive / enforcing on a live RemotingServer,
with Python ssl clients and plaintext clients; settings from JAVA_OPT and tls.config.file."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import pytest
import trio

from rmqd.broker.config import ConfigError
from rmqd.broker.server import RemotingServer
from rmqd.broker.tls import TlsAcceptor, TlsConfig, TlsMode, system_properties
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import FrameDecoder, encode_frame, make_request, make_response


def _client_ctx() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE   # 4.9.8's client in test mode trusts any certificate
    return ctx


async def _ask(stream: trio.abc.Stream) -> object:
    """One GET_BROKER_RUNTIME_INFO-shaped request; the answer, or None when the server closed."""
    await stream.send_all(encode_frame(make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})))
    decoder = FrameDecoder()
    while True:
        try:
            data = await stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None
        if not data:
            return None
        decoder.feed(data)
        for cmd in decoder:
            return cmd


_left_open: list[trio.abc.Stream] = []


async def _with_server(mode: str, fn, cfg: TlsConfig | None = None) -> None:  # type: ignore[no-untyped-def]
    server = RemotingServer("tls-test", idle_seconds=30)

    async def answer(ctx, request):  # type: ignore[no-untyped-def]
        return make_response(request, ResponseCode.SUCCESS, "ok")
    server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, answer)
    server.stream_wrapper = TlsAcceptor(cfg or TlsConfig(mode=TlsMode.parse(mode)), "tls-test").wrap
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            (addr,) = await nursery.start(server.serve, [("127.0.0.1", 0)])
            try:
                await fn(addr[1])
            finally:
                await server.stop()   # bounded by fail_after: a silent connection must not hold it
                for stream in _left_open:
                    await stream.aclose()
                _left_open.clear()


async def _plain(port: int) -> object:
    async with await trio.open_tcp_stream("127.0.0.1", port) as s:
        return await _ask(s)


async def _tls(port: int) -> object:
    tcp = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(tcp, _client_ctx(), server_hostname="localhost")
    try:
        await stream.do_handshake()
    except (trio.BrokenResourceError, ssl.SSLError, OSError):
        await trio.aclose_forcefully(stream)
        return None
    try:
        return await _ask(stream)
    finally:
        await trio.aclose_forcefully(stream)


@pytest.mark.parametrize("mode,plain_ok,tls_ok", [
    ("disabled", True, False), ("permissive", True, True), ("enforcing", False, True), ("bogus", True, True),
])
def test_modes(mode: str, plain_ok: bool, tls_ok: bool) -> None:
    async def check(port: int) -> None:
        plain, tls = await _plain(port), await _tls(port)
        assert (plain is not None and plain.remark == "ok") == plain_ok
        assert (tls is not None and tls.remark == "ok") == tls_ok
    trio.run(_with_server, mode, check)


def test_properties_from_java_opt_and_file(tmp_path: Path) -> None:
    assert system_properties('-Xmx1g -Dtls.server.mode=enforcing -Dflag "-Dx=a b"') == \
        {"tls.server.mode": "enforcing", "flag": "", "x": "a b"}
    conf = tmp_path / "tls.properties"
    conf.write_text("tls.test.mode.enable=false\ntls.server.certPath=/nope/cert.pem\ntls.server.keyPath=/nope/key.pem\n")
    cfg = TlsConfig.load({"tls.server.mode": "enforcing", "tls.config.file": str(conf)})
    assert cfg.mode is TlsMode.ENFORCING and not cfg.test_mode and cfg.cert_path == "/nope/cert.pem"
    with pytest.raises(ConfigError, match="cannot load the certificate"):
        TlsAcceptor(cfg)
    assert TlsConfig.load({"tls.config.file": str(tmp_path / "absent")}) == TlsConfig()


def _self_signed(tmp_path: Path, name: str, password: bytes | None = None) -> tuple[Path, Path]:
    """A self-signed certificate and its key as PEM files (the key encrypted with password)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(7).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    return cert_path, key_path


def test_configured_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "rmqd-test", b"pw")
    cfg = TlsConfig(mode=TlsMode.ENFORCING, test_mode=False, cert_path=str(cert), key_path=str(key), key_password="pw")

    async def check(port: int) -> None:
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        stream = trio.SSLStream(tcp, ctx, server_hostname="rmqd-test")
        try:
            answer = await _ask(stream)   # verified against the configured certificate
        finally:
            await trio.aclose_forcefully(stream)
        assert answer is not None and answer.remark == "ok"
        assert await _plain(port) is None
    trio.run(_with_server, "enforcing", check, cfg)


def test_client_certificate_required(tmp_path: Path) -> None:
    """tls.server.authClient=true with need.client.auth=require and a trust file: a client
    presenting a trusted certificate is served; one with none, or an untrusted one, is not."""
    cert, key = _self_signed(tmp_path, "rmqd-server")
    trusted_cert, trusted_key = _self_signed(tmp_path, "client-ok")
    other_cert, other_key = _self_signed(tmp_path, "client-other")
    cfg = TlsConfig(mode=TlsMode.ENFORCING, test_mode=False, cert_path=str(cert), key_path=str(key),
                    auth_client=True, need_client_auth="require", trust_cert_path=str(trusted_cert))

    async def with_client_cert(port: int, pair: tuple[Path, Path] | None) -> object:
        ctx = _client_ctx()
        if pair:
            ctx.load_cert_chain(str(pair[0]), str(pair[1]))
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        stream = trio.SSLStream(tcp, ctx, server_hostname="localhost")
        try:
            await stream.do_handshake()
            return await _ask(stream)   # TLS 1.3: a refused certificate shows on the first read
        except (trio.BrokenResourceError, ssl.SSLError, OSError):
            return None
        finally:
            await trio.aclose_forcefully(stream)

    async def check(port: int) -> None:
        answer = await with_client_cert(port, (trusted_cert, trusted_key))
        assert answer is not None and answer.remark == "ok"
        assert await with_client_cert(port, None) is None
        assert await with_client_cert(port, (other_cert, other_key)) is None
        assert await _plain(port) is None
    trio.run(_with_server, "enforcing", check, cfg)


def test_silent_connection_does_not_hold_stop() -> None:
    async def check(port: int) -> None:
        silent = await trio.open_tcp_stream("127.0.0.1", port)   # never sends: stop() must not wait 30 s
        await trio.sleep(0.05)
        assert (await _plain(port)).remark == "ok"
        _left_open.append(silent)   # still open and silent while the server stops
    trio.run(_with_server, "permissive", check)


def test_outgoing_client_speaks_tls_when_enabled() -> None:
    from rmqd.broker.remoting_client import RemotingClient
    from rmqd.broker.tls import client_context, client_stream_wrapper

    assert client_stream_wrapper({}) is None and client_context({"tls.enable": "false"}) is None

    async def check(port: int) -> None:
        async with RemotingClient("tls-client") as client:
            client.stream_wrapper = client_stream_wrapper({"tls.enable": "true"})
            answer = await client.invoke(f"127.0.0.1:{port}", make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                          {"topic": "T"}), 5.0)
            assert answer.remark == "ok"
        async with RemotingClient("plain-client") as client:   # enforcing: plaintext is hung up on
            with pytest.raises(Exception):
                await client.invoke(f"127.0.0.1:{port}", make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                     {"topic": "T"}), 2.0)
    trio.run(_with_server, "enforcing", check)
