"""broker.conf: RocketMQ's keys and 4.9.x defaults, split over the config classes.

A broker.conf (java.util.Properties syntax) is applied, as BrokerStartup does, to every
config class that has the key: BrokerConfig, NettyServerConfig (listenPort, ...),
NettyClientConfig and the store's MessageStoreConfig (store/config.py). A key no class has a
setter for is ignored by RocketMQ 4.9, so an existing broker.conf (tutorial ones carry
storePathConsumeQueue, storeCheckpoint, the old spelling mapedFileSizeCommitLog, ...) starts
rmqd too: each such key gets one warning naming the file and the key, with what 4.9 does
instead (a typo must not silently leave a default in place). A bad value of a known key is an
error naming file and key. Relative paths (storePathRootDir=./store) are relative to the
working directory, as with RocketMQ.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from rmqd.store.config import ConfigValueError, MessageStoreConfig, apply_properties
from rmqd.wire.bodies import PERM_READ, PERM_WRITE, format_properties, parse_properties

_CPUS = os.cpu_count() or 1

log = logging.getLogger("rmqd.config")


class ConfigError(ValueError):
    """A config file or value that cannot be used; the message names file, key and value."""


def local_address() -> str:
    """RemotingUtil.getLocalAddress: the first non-loopback IPv4 address, else 127.0.0.1."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing interface
            addr = s.getsockname()[0]
            if addr and not addr.startswith("0."):
                return addr
    except OSError:
        pass
    return "127.0.0.1"


@dataclass
class BrokerConfig:
    """org.apache.rocketmq.common.BrokerConfig (4.9.8) plus rmqd's enableUpdateConfig and
    nonAdminAclConfigEnable."""
    rocketmqHome: str | None = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME"))
    namesrvAddr: str | None = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    # RMQD_BROKER_IP1: the address advertised in routes when broker.conf does not say, e.g. the
    # host's address for a container whose ports are published (rmqd's own; RocketMQ has none)
    brokerIP1: str = field(default_factory=lambda: os.environ.get("RMQD_BROKER_IP1") or local_address())
    brokerIP2: str = field(default_factory=local_address)
    brokerName: str = field(default_factory=socket.gethostname)
    brokerClusterName: str = "DefaultCluster"
    brokerId: int = 0
    brokerPermission: int = PERM_READ | PERM_WRITE
    defaultTopicQueueNums: int = 8
    autoCreateTopicEnable: bool = True
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    messageStorePlugIn: str = ""
    msgTraceTopicName: str = "RMQ_SYS_TRACE_TOPIC"
    traceTopicEnable: bool = False
    sendMessageThreadPoolNums: int = min(_CPUS, 4)
    putMessageFutureThreadPoolNums: int = min(_CPUS, 4)
    pullMessageThreadPoolNums: int = 16 + _CPUS * 2
    processReplyMessageThreadPoolNums: int = 16 + _CPUS * 2
    queryMessageThreadPoolNums: int = 8 + _CPUS
    adminBrokerThreadPoolNums: int = 16
    clientManageThreadPoolNums: int = 32
    consumerManageThreadPoolNums: int = 32
    heartbeatThreadPoolNums: int = min(32, _CPUS)
    endTransactionThreadPoolNums: int = max(8 + _CPUS * 2, min(_CPUS, 4) * 4)
    flushConsumerOffsetInterval: int = 1000 * 5
    flushConsumerOffsetHistoryInterval: int = 1000 * 60
    rejectTransactionMessage: bool = False
    fetchNamesrvAddrByAddressServer: bool = False
    sendThreadPoolQueueCapacity: int = 10000
    putThreadPoolQueueCapacity: int = 10000
    pullThreadPoolQueueCapacity: int = 100000
    replyThreadPoolQueueCapacity: int = 10000
    queryThreadPoolQueueCapacity: int = 20000
    clientManagerThreadPoolQueueCapacity: int = 1000000
    consumerManagerThreadPoolQueueCapacity: int = 1000000
    heartbeatThreadPoolQueueCapacity: int = 50000
    endTransactionPoolQueueCapacity: int = 100000
    filterServerNums: int = 0
    longPollingEnable: bool = True
    shortPollingTimeMills: int = 1000
    notifyConsumerIdsChangedEnable: bool = True
    highSpeedMode: bool = False
    commercialEnable: bool = True
    commercialTimerCount: int = 1
    commercialTransCount: int = 1
    commercialBigCount: int = 1
    commercialBaseCount: int = 1
    transferMsgByHeap: bool = True
    maxDelayTime: int = 40
    regionId: str = "DefaultRegion"
    registerBrokerTimeoutMills: int = 6000
    slaveReadEnable: bool = False
    disableConsumeIfConsumerReadSlowly: bool = False
    consumerFallbehindThreshold: int = 1024 * 1024 * 1024 * 16
    brokerFastFailureEnable: bool = True
    waitTimeMillsInSendQueue: int = 200
    waitTimeMillsInPullQueue: int = 5 * 1000
    waitTimeMillsInHeartbeatQueue: int = 31 * 1000
    waitTimeMillsInTransactionQueue: int = 3 * 1000
    startAcceptSendRequestTimeStamp: int = 0
    traceOn: bool = True
    enableCalcFilterBitMap: bool = False
    expectConsumerNumUseFilter: int = 32
    maxErrorRateOfBloomFilter: int = 20
    filterDataCleanTimeSpan: int = 24 * 3600 * 1000
    filterSupportRetry: bool = False
    enablePropertyFilter: bool = False
    compressedRegister: bool = False
    forceRegister: bool = True
    registerNameServerPeriod: int = 1000 * 30
    transactionTimeOut: int = 6 * 1000
    transactionCheckMax: int = 15
    transactionCheckInterval: int = 60 * 1000
    aclEnable: bool = False
    # rmqd: true lets every signed account send the ACL administration codes 50-53, as 4.9.8
    # does (any account could then make itself admin); by default only admin accounts may
    nonAdminAclConfigEnable: bool = False
    storeReplyMessageEnable: bool = True
    enableDetailStat: bool = True
    autoDeleteUnusedStats: bool = False
    isolateLogEnable: bool = False
    configBlackList: str = "configBlackList;brokerConfigPath"
    # RocketMQ 5.x BrokerConfig's metrics keys (rmqd exports PROM: broker/metrics.py)
    metricsExporterType: str = "DISABLE"
    metricsPromExporterHost: str = ""
    metricsPromExporterPort: int = 5557
    metricsLabel: str = ""
    metricsInDelta: bool = False
    # rmqd: UPDATE_BROKER_CONFIG is refused unless this is true (CVE-2023-33246/37582)
    enableUpdateConfig: bool = False
    # RocketMQ 5.x POP consumption (BrokerConfig 5.3.3 names and defaults; docs/pop.md)
    reviveQueueNum: int = 8
    reviveInterval: int = 1000
    enableRetryTopicV2: bool = False
    retrieveMessageFromPopRetryTopicV1: bool = True
    popFromRetryProbability: int = 20
    popPollingSize: int = 1024
    initPopOffsetByCheckMsgInMem: bool = True
    popResponseReturnActualRetryTopic: bool = False

    def register_period_ms(self) -> int:
        """BrokerController clamps registerNameServerPeriod to 10..60 s."""
        return max(10000, min(self.registerNameServerPeriod, 60000))


@dataclass
class NettyServerConfig:
    """org.apache.rocketmq.remoting.netty.NettyServerConfig; listenPort as BrokerStartup sets it."""
    listenPort: int = 10911
    serverWorkerThreads: int = 8
    serverCallbackExecutorThreads: int = 0
    serverSelectorThreads: int = 3
    serverOnewaySemaphoreValue: int = 256
    serverAsyncSemaphoreValue: int = 64
    serverChannelMaxIdleTimeSeconds: int = 120
    serverSocketSndBufSize: int = 0
    serverSocketRcvBufSize: int = 0
    writeBufferHighWaterMark: int = 0
    writeBufferLowWaterMark: int = 0
    serverSocketBacklog: int = 1024
    serverPooledByteBufAllocatorEnable: bool = True
    useEpollNativeSelector: bool = False


@dataclass
class NettyClientConfig:
    """org.apache.rocketmq.remoting.netty.NettyClientConfig."""
    clientWorkerThreads: int = 4
    clientCallbackExecutorThreads: int = _CPUS
    clientOnewaySemaphoreValue: int = 65535
    clientAsyncSemaphoreValue: int = 65535
    connectTimeoutMillis: int = 3000
    channelNotActiveInterval: int = 1000 * 60
    clientChannelMaxIdleTimeSeconds: int = 120
    clientSocketSndBufSize: int = 0
    clientSocketRcvBufSize: int = 0
    clientPooledByteBufAllocatorEnable: bool = False
    clientCloseSocketIfTimeout: bool = False
    useTLS: bool = False
    writeBufferHighWaterMark: int = 0
    writeBufferLowWaterMark: int = 0


@dataclass
class ProxyConfig:
    """The keys of Apache RocketMQ 5.x's ProxyConfig that rmqd's built-in gRPC endpoint reads
    (rmqd serves RocketMQ 5.x clients itself, where Apache runs rocketmq-proxy beside the broker)."""
    grpcServerPort: int = 8081


@dataclass
class BrokerSettings:
    """Everything one broker process is configured with."""
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    netty_server: NettyServerConfig = field(default_factory=NettyServerConfig)
    netty_client: NettyClientConfig = field(default_factory=NettyClientConfig)
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    proxy: ProxyConfig = field(default_factory=ProxyConfig)
    #: the keys a broker.conf or the command line set (the others hold their defaults)
    explicit_keys: set[str] = field(default_factory=set)
    #: key -> where its value came from (the file's path, "command line"): validate's errors
    #: name it, as the errors of apply do
    key_sources: dict[str, str] = field(default_factory=dict)

    @property
    def listen_port(self) -> int:
        return self.netty_server.listenPort

    @property
    def fast_listen_port(self) -> int:
        """The VIP channel: listenPort - 2 (BrokerController: fastConfig.setListenPort(listenPort - 2))."""
        return self.netty_server.listenPort - 2

    @property
    def broker_addr(self) -> str:
        return f"{self.broker.brokerIP1}:{self.netty_server.listenPort}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker.brokerIP2}:{self.store.haListenPort}"

    def apply(self, props: Mapping[str, str], source: str = "config", *,
              unknown: Literal["error", "ignore"] = "error") -> list[str]:
        """Set every key on each class that has it; a bad value raises ConfigError. A key no class
        has raises ConfigError (``unknown="error"``: UPDATE_BROKER_CONFIG, tests) or, as
        BrokerStartup ignores it, is skipped (``unknown="ignore"``: a broker.conf, whose caller
        warns with ignored_key_warning once the paths are settled). Returns the skipped keys."""
        targets = [self.broker, self.netty_server, self.netty_client, self.store, self.proxy]
        ignored: list[str] = []
        for key, raw in props.items():
            hit = False
            for target in targets:
                try:
                    if not apply_properties(target, {key: raw}):
                        hit = True
                except ConfigValueError as exc:
                    raise ConfigError(_bad_value(source, target is self.store, exc)) from None
            if hit:
                _check_supported(source, key, self)
                self.explicit_keys.add(key)
                self.key_sources[key] = source
            elif key not in STARTUP_KEYS:
                if unknown == "error":
                    raise ConfigError(f"{source}: unknown config key {key!r}")
                ignored.append(key)
        return ignored

    def all_properties(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for obj in (self.broker, self.netty_server, self.netty_client, self.store):
            out.update(dataclasses.asdict(obj))
        return out

    def to_properties(self) -> str:
        return format_properties(self.all_properties())


#: keys BrokerStartup reads from broker.conf besides the config classes' setters
#: (properties2SystemEnv: the address-server lookup used with fetchNamesrvAddrByAddressServer)
STARTUP_KEYS = frozenset({"rmqAddressServerDomain", "rmqAddressServerSubGroup"})

#: MessageStoreConfig's MULTI_PATH_SPLITTER (system property rocketmq.broker.multiPathSplitter)
MULTI_PATH_SPLITTER = ","

#: path keys of older and tutorial broker.conf files that 4.9 has no setter for: it derives
#: each path from storePathRootDir (StorePathConfigHelper); key -> the path really used
DERIVED_PATH_KEYS: dict[str, Callable[[MessageStoreConfig], str]] = {
    "storePathConsumeQueue": MessageStoreConfig.get_store_path_consume_queue,
    "storePathIndex": MessageStoreConfig.get_store_path_index,
    "storeCheckpoint": MessageStoreConfig.get_store_checkpoint,
    "abortFile": MessageStoreConfig.get_abort_file,
}


def known_keys(*classes: type) -> list[str]:
    """Every key a properties file may set on ``classes`` (default: a broker.conf's four
    config classes): their fields and setter aliases."""
    keys: set[str] = set() if classes else set(STARTUP_KEYS)
    for cls in classes or (BrokerConfig, NettyServerConfig, NettyClientConfig, MessageStoreConfig):
        keys.update(f.name for f in dataclasses.fields(cls))
        keys.update(getattr(cls, "SETTER_KEYS", {}))
    return sorted(keys)


def ignored_key_warning(source: str, key: str, store: MessageStoreConfig | None = None,
                        known: list[str] | None = None) -> str:
    """One line for a key 4.9 ignores: the file, the key and what happens instead (``store``:
    the settings whose derived paths are really used; ``known``: the keys a near miss may mean,
    default a broker.conf's)."""
    known = known if known is not None else known_keys()
    head = f"{source}: {key} is ignored (RocketMQ 4.9 has no such setting either)"
    derived = DERIVED_PATH_KEYS.get(key)
    if derived is not None and store is not None:
        return f"{head}; it is always {derived(store)}, derived from storePathRootDir"
    respelled = key.replace("maped", "mapped").replace("Maped", "Mapped")
    if respelled != key and respelled in known:
        return f"{head}; 4.9 spells it {respelled}"
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    if close:
        return f"{head}; did you mean {close[0]}?"
    return head


def _check_supported(source: str, key: str, settings: BrokerSettings) -> None:
    """Values 4.9 acts on that rmqd cannot honour: refused rather than silently run otherwise."""
    store = settings.store
    if key == "enableDLegerCommitLog" and store.enableDLegerCommitLog:
        raise ConfigError(f"{source}: enableDLegerCommitLog=true: rmqd has no DLedger commit log "
                          "(it replicates master/slave, brokerRole and HA)")
    if key == "storePathCommitLog" and store.storePathCommitLog and MULTI_PATH_SPLITTER in store.storePathCommitLog:
        raise ConfigError(f"{source}: storePathCommitLog={store.storePathCommitLog!r}: several commit-log "
                          "directories (MultiPathMappedFileQueue) are not supported by rmqd")


def _bad_value(source: str, store_key: bool, exc: ConfigValueError) -> str:
    """The ConfigError text: broker/netty keys say what was expected, store keys wrap the store's
    own message (MessageStoreConfig.update raises it to callers without a source too)."""
    if store_key:
        return f"{source}: bad value for {exc.key}: {exc}"
    expected = {"bool": "true/false", "int": "a whole number"}.get(exc.typ, "a number")
    return f"{source}: {exc.key}={exc.raw!r} is not {expected}"


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """A broker.conf / namesrv.conf as a dict; unreadable -> ConfigError naming the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {p}: {exc}") from None
    return parse_properties(text)


def load_broker_settings(conf_path: str | os.PathLike[str] | None = None,
                         overrides: Mapping[str, str] | None = None) -> BrokerSettings:
    """Defaults, then the file, then command-line overrides (all RocketMQ key names). Each file
    key 4.9 would ignore is logged as one warning (after the overrides: a hint names the path
    really used)."""
    settings = BrokerSettings()
    ignored: list[str] = []
    if conf_path is not None:
        ignored = settings.apply(read_properties_file(conf_path), source=str(conf_path), unknown="ignore")
    if overrides:
        settings.apply(overrides, source="command line")
    validate(settings)
    for key in ignored:
        log.warning("%s", ignored_key_warning(str(conf_path), key, settings.store))
    return settings


def validate(settings: BrokerSettings) -> None:
    """BrokerStartup's own checks after loading; each error names where the key was set (the
    file, or the command line) and the key, as the errors of loading do."""
    b = settings.broker

    def fail(key: str, text: str) -> ConfigError:
        source = settings.key_sources.get(key)
        return ConfigError(f"{source}: {text}" if source else f"{text} (the default value of {key})")

    port = settings.netty_server.listenPort
    if not 3 <= port <= 65535:
        raise fail("listenPort", f"listenPort={port} is out of range (the fast port listenPort-2 must be valid too)")
    if not -1 <= settings.proxy.grpcServerPort <= 65535:
        raise fail("grpcServerPort", f"grpcServerPort={settings.proxy.grpcServerPort} is out of range "
                                     "(0: any free port, -1: no gRPC endpoint)")
    if b.brokerId < 0:
        raise fail("brokerId", f"brokerId={b.brokerId} must be >= 0")
    # enums in 4.9.8 (BrokerRole.valueOf, FlushDiskType.valueOf: case-sensitive, a bad name stops the start)
    for key, value, allowed in (("brokerRole", settings.store.brokerRole, ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")),
                                ("flushDiskType", settings.store.flushDiskType, ("ASYNC_FLUSH", "SYNC_FLUSH"))):
        if value not in allowed:
            raise fail(key, f"{key}={value!r} is not one of {', '.join(allowed)}")
    # BrokerStartup: masters are brokerId 0; a slave needs brokerId > 0 (exit -3 in 4.9.8)
    if settings.store.brokerRole == "SLAVE" and b.brokerId <= 0:
        raise fail("brokerRole", f"brokerRole=SLAVE needs brokerId > 0 (Slave's brokerId must be > 0), "
                                 f"got brokerId={b.brokerId}")
    if settings.store.brokerRole in ("ASYNC_MASTER", "SYNC_MASTER"):
        b.brokerId = 0
    if not b.brokerName:
        raise fail("brokerName", "brokerName must not be empty")
    if b.defaultTopicQueueNums <= 0:
        raise fail("defaultTopicQueueNums", f"defaultTopicQueueNums={b.defaultTopicQueueNums} must be > 0")
    try:  # (parsed again by the commit log and the delay-level service: a bad unit must stop the start here)
        settings.store.delay_levels_ms()
    except ValueError:
        raise fail("messageDelayLevel", f"messageDelayLevel={settings.store.messageDelayLevel!r} is not a list of "
                                        "delays such as 1s 5m 2h 1d") from None
    ha_bind = settings.store.haBindAddress
    if ha_bind is not None:
        try:
            ipaddress.ip_address(ha_bind)
        except ValueError:
            raise fail("haBindAddress", f"haBindAddress={ha_bind!r} is not an IP address (the interface the HA port "
                                        f"listenPort+1 binds)") from None
    try:
        b.metricsExporterType = metrics_exporter_type(b.metricsExporterType)
    except ConfigError as exc:
        raise fail("metricsExporterType", str(exc)) from None
    if not 0 <= b.metricsPromExporterPort <= 65535:
        raise fail("metricsPromExporterPort", f"metricsPromExporterPort={b.metricsPromExporterPort} is out of range")
    _check_distinct_ports(settings, fail)


def _check_distinct_ports(settings: BrokerSettings, fail: Callable[[str, str], ConfigError]) -> None:
    """Two of the broker's listeners on one port and address cannot both bind: refused here,
    naming both keys, rather than as a bind error of whichever starts second. Listeners kept to
    an address of their own (haBindAddress, metricsPromExporterHost) may share a port number;
    the default grpcServerPort is left out (taken, the gRPC endpoint is skipped with a warning,
    see BrokerRole)."""
    port = settings.netty_server.listenPort
    taken: dict[int, str] = {port: "listenPort", port - 2: "listenPort-2 (the fast port)"}
    if settings.store.brokerRole != "SLAVE" and settings.store.haBindAddress is None:
        taken[port + 1] = "listenPort+1 (the HA port)"
    others: list[tuple[str, int]] = []
    grpc = settings.proxy.grpcServerPort
    if grpc > 0 and "grpcServerPort" in settings.explicit_keys:
        others.append(("grpcServerPort", grpc))
    b = settings.broker
    if b.metricsExporterType == "PROM" and b.metricsPromExporterPort > 0 and not b.metricsPromExporterHost.strip():
        others.append(("metricsPromExporterPort", b.metricsPromExporterPort))  # (the type normalized by validate)
    for key, value in others:
        if value in taken:
            raise fail(key, f"{key}={value} is the port of {taken[value]} too: each listener needs its own port")
        taken[value] = key


#: MetricsExporterType (5.x) by ordinal.
METRICS_EXPORTER_TYPES = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")


def metrics_exporter_type(value: Any) -> str:
    """metricsExporterType by name or ordinal ("PROM" or "2"), as BrokerConfig's setters take it;
    an unknown name is an error (MetricsExporterType.valueOf), an unknown ordinal DISABLE."""
    text = str(value).strip()
    if text.upper() in METRICS_EXPORTER_TYPES:
        return text.upper()
    if text.isdigit():
        n = int(text)
        return METRICS_EXPORTER_TYPES[n] if n < len(METRICS_EXPORTER_TYPES) else "DISABLE"
    raise ConfigError(f"metricsExporterType={value!r} is not one of {', '.join(METRICS_EXPORTER_TYPES)}")


__all__ = ["BrokerConfig", "BrokerSettings", "ConfigError", "METRICS_EXPORTER_TYPES", "NettyClientConfig",
           "NettyServerConfig", "ProxyConfig", "ignored_key_warning", "known_keys", "load_broker_settings", "local_address",
           "metrics_exporter_type", "read_properties_file", "validate"]
