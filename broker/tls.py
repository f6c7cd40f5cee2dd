"""TLS on the remoting ports, as RocketMQ 4.9.8's TlsSystemConfig / TlsHelper / HandshakeHandler.

Why: a client started with ``-Dtls.enable=true`` (or setUseTLS(true)) opens every connection
with a TLS handshake; a 4.9.8 server looks at the first byte of each new connection (0x16 =
TLS handshake record) and, by ``tls.server.mode``:

- ``disabled``: a TLS client is disconnected, plaintext served;
- ``permissive`` (4.9.8's default, also for any unknown value): both, on the same port;
- ``enforcing``: a plaintext client is disconnected.

Settings come where 4.9.8 takes them: Java system properties (for rmqd: ``-Dkey=value``
words of the ``JAVA_OPT`` environment variable, the way runbroker.sh passes them) and the
properties file named by ``tls.config.file`` (default /etc/rocketmq/tls.properties), whose
values win for tls.test.mode.enable, tls.server.need.client.auth, tls.server.keyPath,
keyPassword, certPath, authClient and trustCertPath. ``tls.test.mode.enable`` (default true)
serves a self-signed certificate made at the first TLS connection (Netty's
SelfSignedCertificate), so no files are needed; otherwise certPath/keyPath are loaded at
start and a bad file stops the start with one line.
"""

from __future__ import annotations

import datetime
import enum
import logging
import os
import shlex
import socket
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import trio

from rmqd.broker.config import ConfigError, read_properties_file

log = logging.getLogger("rmqd.tls")

HANDSHAKE_MAGIC_CODE = 0x16
DEFAULT_CONFIG_FILE = "/etc/rocketmq/tls.properties"
#: A connection that sends nothing / never finishes its handshake is closed after this long.
HANDSHAKE_TIMEOUT_SECONDS = 10.0


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, text: str | None) -> "TlsMode":
        """TlsMode.parse: an unknown name is PERMISSIVE."""
        for mode in cls:
            if mode.value == text:
                return mode
        return cls.PERMISSIVE


def system_properties(java_opt: str | None = None) -> dict[str, str]:
    """The ``-Dkey=value`` words of JAVA_OPT (a bare ``-Dkey`` is the empty string, as Java)."""
    text = os.environ.get("JAVA_OPT", "") if java_opt is None else java_opt
    props: dict[str, str] = {}
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    for word in words:
        if word.startswith("-D") and len(word) > 2:
            key, _, value = word[2:].partition("=")
            props[key] = value
    return props


def _java_bool(text: str | None) -> bool:
    return text is not None and text.strip().lower() == "true"


@dataclass(slots=True)
class TlsConfig:
    mode: TlsMode = TlsMode.PERMISSIVE
    test_mode: bool = True
    need_client_auth: str = "none"
    key_path: str | None = None
    key_password: str | None = None
    cert_path: str | None = None
    auth_client: bool = False
    trust_cert_path: str | None = None

    @classmethod
    def load(cls, props: Mapping[str, str] | None = None) -> "TlsConfig":
        """System properties, then tls.config.file on top (TlsHelper.extractTlsConfigFromFile)."""
        p = dict(system_properties() if props is None else props)
        cfg = cls(mode=TlsMode.parse(p.get("tls.server.mode", "permissive")),
                  test_mode=_java_bool(p.get("tls.test.mode.enable", "true")),
                  need_client_auth=p.get("tls.server.need.client.auth", "none"),
                  key_path=p.get("tls.server.keyPath"), key_password=p.get("tls.server.keyPassword"),
                  cert_path=p.get("tls.server.certPath"),
                  auth_client=_java_bool(p.get("tls.server.authClient", "false")),
                  trust_cert_path=p.get("tls.server.trustCertPath"))
        path = Path(p.get("tls.config.file", DEFAULT_CONFIG_FILE))
        if path.is_file() and os.access(path, os.R_OK):
            f = read_properties_file(path)
            cfg.test_mode = _java_bool(f.get("tls.test.mode.enable", str(cfg.test_mode).lower()))
            cfg.need_client_auth = f.get("tls.server.need.client.auth", cfg.need_client_auth)
            cfg.key_path = f.get("tls.server.keyPath", cfg.key_path)
            cfg.key_password = f.get("tls.server.keyPassword", cfg.key_password)
            cfg.cert_path = f.get("tls.server.certPath", cfg.cert_path)
            cfg.auth_client = _java_bool(f.get("tls.server.authClient", str(cfg.auth_client).lower()))
            cfg.trust_cert_path = f.get("tls.server.trustCertPath", cfg.trust_cert_path)
        return cfg


def self_signed_context() -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate (tls.test.mode.enable=true)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=365))
            .sign(key, hashes.SHA256()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="rmqd-tls-") as tmp:
        cert_file, key_file = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def configured_context(cfg: TlsConfig) -> ssl.SSLContext:
    """certPath/keyPath[/keyPassword], and client certificates checked against trustCertPath
    when authClient is true (tls.server.need.client.auth none/optional/require)."""
    if not cfg.cert_path or not cfg.key_path:
        raise ConfigError("tls.test.mode.enable=false needs tls.server.certPath and tls.server.keyPath")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cfg.cert_path, cfg.key_path, cfg.key_password or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"tls.server.certPath={cfg.cert_path} / keyPath={cfg.key_path}: "
                          f"cannot load the certificate and key: {exc}") from None
    if cfg.auth_client and cfg.trust_cert_path:
        try:
            ctx.load_verify_locations(cfg.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"tls.server.trustCertPath={cfg.trust_cert_path}: cannot load: {exc}") from None
        ctx.verify_mode = {"require": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL}.get(
            cfg.need_client_auth.strip().lower(), ssl.CERT_NONE)
    return ctx


def client_context(props: Mapping[str, str] | None = None) -> ssl.SSLContext | None:
    """The context of rmqd's own outgoing connections (broker -> name server), or None when
    ``tls.enable`` is not true: as a 4.9.8 process, whose NettyClientConfig.useTLS follows it.
    Test mode and tls.client.authServer=false trust any server certificate (as 4.9.8's
    InsecureTrustManagerFactory); else tls.client.trustCertPath; tls.client.certPath/keyPath
    are presented when set."""
    p = dict(system_properties() if props is None else props)
    if not _java_bool(p.get("tls.enable", "false")):
        return None
    path = Path(p.get("tls.config.file", DEFAULT_CONFIG_FILE))
    if path.is_file() and os.access(path, os.R_OK):
        p.update({k: v for k, v in read_properties_file(path).items() if k.startswith("tls.")})
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    trust = p.get("tls.client.trustCertPath")
    if _java_bool(p.get("tls.test.mode.enable", "true")) or not _java_bool(p.get("tls.client.authServer")) \
            or not trust:
        ctx.verify_mode = ssl.CERT_NONE
    else:
        try:
            ctx.load_verify_locations(trust)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"tls.client.trustCertPath={trust}: cannot load: {exc}") from None
    cert, key = p.get("tls.client.certPath"), p.get("tls.client.keyPath")
    if cert and key and not _java_bool(p.get("tls.test.mode.enable", "true")):
        try:
            ctx.load_cert_chain(cert, key, p.get("tls.client.keyPassword") or None)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"tls.client.certPath={cert} / keyPath={key}: cannot load: {exc}") from None
    return ctx


def client_stream_wrapper(props: Mapping[str, str] | None = None):  # noqa: ANN201
    """RemotingClient.stream_wrapper speaking TLS when tls.enable=true, else None."""
    ctx = client_context(props)
    if ctx is None:
        return None

    async def wrap(stream: trio.SocketStream) -> trio.abc.Stream:
        tls = trio.SSLStream(stream, ctx, server_hostname="localhost")
        await tls.do_handshake()
        return tls
    return wrap


class TlsAcceptor:
    """RemotingServer stream wrapper: what to serve on a new connection (or None: close it)."""

    def __init__(self, cfg: TlsConfig, name: str = "remoting", *, first_byte_seconds: float | None = 120.0) -> None:
        self.cfg = cfg
        self.name = name
        #: how long a new connection may stay silent (the server's idle time)
        self.first_byte_seconds = first_byte_seconds if first_byte_seconds else 120.0
        self._context: ssl.SSLContext | None = None
        if cfg.mode is not TlsMode.DISABLED and not cfg.test_mode:
            self._context = configured_context(cfg)  # bad files: refuse to start

    @property
    def context(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = self_signed_context()
        return self._context

    async def wrap(self, stream: trio.SocketStream) -> trio.abc.Stream | None:
        first = b""
        with trio.move_on_after(self.first_byte_seconds) as peek_scope:
            try:
                first = await stream.socket.recv(1, socket.MSG_PEEK)
            except OSError:
                return None
        if peek_scope.cancelled_caught:
            log.info("%s: a connection sent nothing for %.0f s, closing", self.name, self.first_byte_seconds)
            return None
        with trio.move_on_after(HANDSHAKE_TIMEOUT_SECONDS):
            if not first:
                return stream  # closed before a byte: the read loop sees it
            if first[0] == HANDSHAKE_MAGIC_CODE:
                if self.cfg.mode is TlsMode.DISABLED:
                    log.warning("Clients intend to establish an SSL connection while this server is "
                                "running in SSL disabled mode")
                    return None
                tls = trio.SSLStream(stream, self.context, server_side=True)
                try:
                    await tls.do_handshake()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                    log.warning("%s TLS handshake failed: %s", self.name, exc)
                    return None
                return tls
            if self.cfg.mode is TlsMode.ENFORCING:
                log.warning("Clients intend to establish an insecure connection while this server is "
                            "running in SSL enforcing mode")
                return None
            return stream
        log.warning("%s: TLS handshake not done within %.0f s, closing", self.name, HANDSHAKE_TIMEOUT_SECONDS)
        return None
