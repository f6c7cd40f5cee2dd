"""`rmqd`: serve | namesrv | broker | store verify | store dump | spark verify | spark export.

Contract (issue 4): once every port accepts, one line starting with `rmqd ready` on stdout,
naming each listener's bound address (`namesrv=0.0.0.0:9876 broker=... fast=... ha=... grpc=...
metrics=...`, the address each socket is bound to, not a guess at one to connect to);
SIGINT/SIGTERM stop gracefully and exit 0; any error is one line on stderr and a non-zero
exit — never a traceback (set RMQD_DEBUG=1 to get one in the log). The line names what to fix:
the file and key of a config error, the listener, address and key of a bind error, the file,
offset and `rmqd store verify` command of store damage.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import trio

from rmqd.broker.config import BrokerSettings, ConfigError, load_broker_settings
from rmqd.broker.listen import ListenError, format_host_port
from rmqd.broker.remoting_client import parse_addr
from rmqd.store.errors import StoreConfigError, StoreFileError, StoreLockError
from rmqd.wire.errors import WireError

log = logging.getLogger("rmqd")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


class CliError(Exception):
    """An error shown to the user as one line."""


# --------------------------------------------------------------------------------------------
# argument parsing


def build_parser() -> argparse.ArgumentParser:
    # --log-level is taken before or after the sub-command: the sub-commands' copy leaves the
    # value alone unless given (SUPPRESS), so the top-level default (RMQD_LOG_LEVEL) stands
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", default=argparse.SUPPRESS, help="logging level for stderr (default WARNING)")
    parser = argparse.ArgumentParser(prog="rmqd", description=DESCRIPTION)
    parser.add_argument("--log-level", default=os.environ.get("RMQD_LOG_LEVEL", "WARNING"),
                        help="logging level for stderr (default WARNING)")
    parser.add_argument("--version", action=_VersionAction, nargs=0, help="show the version, and whether the hot "
                                                                           "modules run compiled, and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", parents=[common], help="run a name server and one broker in one process")
    serve.add_argument("--store", help="store directory (storePathRootDir; default ./store)")
    serve.add_argument("--namesrv-port", type=int, default=None, help="name server port (default 9876)")
    serve.add_argument("--broker-port", type=int, default=None, help="broker listenPort (default 10911; fast port = -2)")
    serve.add_argument("--host", default=None, help="address to listen on (default 0.0.0.0); also brokerIP1")
    serve.add_argument("--grpc-port", type=int, default=None,
                       help="gRPC port for RocketMQ 5.x clients (grpcServerPort; default 8081, 0: any, -1: none)")
    serve.add_argument("-c", "--config", help="broker.conf (RocketMQ keys)")
    serve.add_argument("--kv-config", help="name server kvConfig.json (default ~/namesrv/kvConfig.json)")

    ns = sub.add_parser("namesrv", parents=[common], help="run a name server")
    ns.add_argument("--port", type=int, default=None, help="listen port (default 9876)")
    ns.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    ns.add_argument("-c", "--config", help="namesrv properties file (NamesrvConfig keys)")
    ns.add_argument("--kv-config", help="kvConfig.json (default ~/namesrv/kvConfig.json)")

    br = sub.add_parser("broker", parents=[common], help="run a broker that registers with name servers")
    br.add_argument("-n", "--namesrv-addr", help="name servers, host:port[;host:port] (namesrvAddr)")
    br.add_argument("-c", "--config", help="broker.conf (RocketMQ keys)")
    br.add_argument("--store", help="store directory (storePathRootDir)")
    br.add_argument("--port", type=int, default=None, help="listenPort (default 10911; fast port = -2)")
    br.add_argument("--host", default=None, help="address to listen on (default 0.0.0.0); also brokerIP1")
    br.add_argument("--grpc-port", type=int, default=None,
                    help="gRPC port for RocketMQ 5.x clients (grpcServerPort; default 8081, 0: any, -1: none)")

    st = sub.add_parser("store", parents=[common], help="offline store tools")
    st_sub = st.add_subparsers(dest="store_command", metavar="STORE_COMMAND")
    verify = st_sub.add_parser("verify", parents=[common],
                               help="check every record, consume-queue unit and index entry")
    verify.add_argument("store_dir", nargs="?", help="store directory (default: the store of -c, as `rmqd serve -c` "
                                                     "uses it)")
    verify.add_argument("-c", "--config", help="broker.conf the store was written with (storePathRootDir, "
                                               "storePathCommitLog, file sizes, messageDelayLevel)")
    verify.add_argument("--against", metavar="OTHER", help="also compare the commit log byte for byte with the store "
                                                          "OTHER (a replica, a copy) where both have data")
    repair = st_sub.add_parser("repair-config", parents=[common],
                               help="move damaged config/*.json aside; restore from .bak or "
                                    "rebuild topics and groups from consumequeue/; with -c "
                                    "and aclEnable=true, the acl yml files too")
    repair.add_argument("store_dir", nargs="?", help="store directory (default: storePathRootDir of -c)")
    repair.add_argument("--store", dest="store_opt", help="store directory (same as the positional argument)")
    repair.add_argument("-c", "--config", help="broker.conf of the store (storePathRootDir, brokerName, ...)")
    dump = st_sub.add_parser("dump", parents=[common], help="print the stored messages as JSON lines")
    dump.add_argument("store_dir")
    dump.add_argument("--topic")
    dump.add_argument("--queue", type=int)

    # The spark sub-commands parse their own arguments (spark/cli.py, also run by spark-submit):
    # everything after the sub-command is handed over as it is.
    sp = sub.add_parser("spark", help="verify or export a store with PySpark (needs the spark extra)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="PySpark jobs over a store (verify, export need rmqd's spark extra:\n"
                                    "pip install 'rmqd[spark]'). `rmqd spark SPARK_COMMAND --help` for each.")
    sp.add_argument("spark_command", metavar="SPARK_COMMAND", nargs="?", choices=SPARK_COMMANDS,
                    help="verify STORE [--against OTHER] [--master URL] | export STORE OUT --format parquet"
                         " | package OUT.zip (for spark-submit --py-files)")
    sp.add_argument("spark_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


SPARK_COMMANDS = ("verify", "export", "package")

DESCRIPTION = ("A drop-in broker for Apache RocketMQ clients: 4.9.x clients over Remoting (name server and "
               "broker ports) and 5.x clients over gRPC (what Apache's rocketmq-proxy serves, on grpcServerPort).")


def version_text() -> str:
    """`rmqd --version`: the version and whether the hot modules run compiled (a wheel built
    without a compiler, or RMQD_PURE=1, runs them as plain Python, several times slower)."""
    from rmqd import __version__
    from rmqd._compiled import compiled_status

    return f"rmqd {__version__} ({compiled_status()})"


class _VersionAction(argparse.Action):
    """argparse's own version action re-wraps the text to the terminal's width: this one prints
    the one line as it is (scripts read it)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version_text(), flush=True)
        parser.exit()


def _take_log_level(args: argparse.Namespace) -> None:
    """`rmqd spark verify STORE --log-level DEBUG`: the option is rmqd's, not the Spark job's."""
    rest: list[str] = []
    it = iter(args.spark_args or [])
    for arg in it:
        if arg == "--log-level":
            args.log_level = next(it, args.log_level)
        elif arg.startswith("--log-level="):
            args.log_level = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    args.spark_args = rest


# --------------------------------------------------------------------------------------------
# helpers


def _connect_host(host: str) -> str:
    """An address to connect to a listener bound to ``host`` (the wildcard: the loopback)."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def _fmt(addr: tuple[str, int]) -> str:
    """A bound address as the ready line shows it: what the socket is bound to (0.0.0.0 for
    every interface), so the line says where the listener really is."""
    return format_host_port(addr[0] or "0.0.0.0", addr[1])


def _check_port(port: int | None, what: str) -> None:
    if port is not None and not 0 <= port <= 65535:
        raise CliError(f"{what} {port} is out of range 0..65535")


def _prepare_store(path: str) -> str:
    """The store directory: created if missing (its parent must exist); must be a readable,
    writable directory."""
    p = Path(path).expanduser()
    if p.exists():
        if not p.is_dir():
            raise CliError(f"store {p} is not a directory")
        if not os.access(p, os.R_OK | os.W_OK | os.X_OK):
            raise CliError(f"store {p} is not readable and writable")
    else:
        parent = p.absolute().parent
        if not parent.is_dir():
            raise CliError(f"store {p}: parent directory {parent} does not exist")
        try:
            p.mkdir()
        except OSError as exc:
            raise CliError(f"store {p} cannot be created: {exc.strerror or exc}") from None
    return str(p.absolute())


def _namesrv_config(args: argparse.Namespace, port: int | None) -> Any:
    from rmqd.broker.config import read_properties_file
    from rmqd.processors.namesrv import NamesrvConfig

    config = NamesrvConfig()
    if getattr(args, "config", None) and args.command == "namesrv":
        _load_namesrv_file(config, args.config)
    if args.kv_config:
        config.kvConfigPath = args.kv_config
    if port is not None:
        config.listenPort = port
    _check_port(config.listenPort, "name server port")
    return config


def _load_namesrv_file(config: Any, path: str) -> None:
    """NamesrvStartup's -c: NamesrvConfig and NettyServerConfig keys (listenPort, ...) are set,
    a bad value is an error naming file and key, any other key gets one warning (4.9 ignores
    it)."""
    from rmqd.broker.config import NettyServerConfig, ignored_key_warning, known_keys, read_properties_file
    from rmqd.store.config import ConfigValueError, apply_properties

    props = read_properties_file(path)
    try:
        rest = apply_properties(config, props)
        ignored = apply_properties(NettyServerConfig(), {key: props[key] for key in rest})
    except ConfigValueError as exc:
        raise ConfigError(f"{path}: bad value for {exc.key}: {exc}") from None
    known = known_keys(type(config), NettyServerConfig)
    for key in ignored:
        log.warning("%s", ignored_key_warning(path, key, known=known))


def _broker_settings(args: argparse.Namespace, *, store: str | None, port: int | None, host: str | None,
                     namesrv_addr: str | None) -> Any:
    overrides: dict[str, str] = {}
    if port is not None:
        _check_port(port, "broker port")
        overrides["listenPort"] = str(port)
    if host is not None and host not in ("", "0.0.0.0", "::"):
        overrides["brokerIP1"] = host
    if namesrv_addr is not None:
        overrides["namesrvAddr"] = namesrv_addr
    grpc_port = getattr(args, "grpc_port", None)
    if grpc_port is not None:
        if grpc_port != -1:
            _check_port(grpc_port, "gRPC port")
        overrides["grpcServerPort"] = str(grpc_port)
    # the store root as an override: the warnings about keys 4.9 ignores name the paths used
    if store is not None:
        overrides["storePathRootDir"] = store
    elif args.config is None or "storePathRootDir" not in _conf_keys(args.config):
        overrides["storePathRootDir"] = "./store"
    settings = load_broker_settings(args.config, overrides)
    settings.store.storePathRootDir = _prepare_store(settings.store.storePathRootDir)
    args.store_in_use = settings.store.storePathRootDir  # (named by a store-damage error: _describe)
    return settings


def _conf_keys(path: str) -> set[str]:
    from rmqd.broker.config import read_properties_file

    return set(read_properties_file(path))


def _signals() -> Any:
    """Opened before anything binds, so a signal sent right after the ready line is never lost."""
    return trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)


async def _wait_for_signal(signals: Any, stop: Callable[[], Any]) -> None:
    async for signum in signals:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        await stop()
        return


#: the broker's listeners in the ready line's order (ha: a master's; grpc, metrics: when they run)
_BROKER_LISTENERS = ("broker", "fast", "ha", "grpc", "metrics")


def _listeners_part(bound: dict[str, tuple[str, int]]) -> str:
    """`broker=host:port fast=... [ha=...] [grpc=...] [metrics=...]` of the ready line."""
    return " ".join(f"{name}={_fmt(bound[name])}" for name in _BROKER_LISTENERS if name in bound)


#: port -> (the listener, the keys that set it): who a bind error of that port is about
ListenerNames = dict[int, tuple[str, str]]


def _broker_listener_names(settings: BrokerSettings, port_option: str) -> ListenerNames:
    """The broker's listeners by port (validate has made sure no two share one; the metrics
    exporter names itself)."""
    port = settings.listen_port
    key = f"listenPort, {port_option}"
    return {port: ("the broker", key), port - 2: ("the fast port (listenPort - 2)", key),
            port + 1: ("the HA port (listenPort + 1)", f"{key}; haBindAddress"),
            settings.proxy.grpcServerPort: ("the gRPC endpoint", "grpcServerPort, --grpc-port")}


def _naming(args: argparse.Namespace, names: ListenerNames) -> None:
    """The listeners a bind error from now on can be about (the name server's while it starts,
    then the broker's): _describe names the one whose port failed. (A bind error reaches main
    wrapped in the nurseries' exception groups, so it is named there, not where it is raised.)"""
    args.listener_names = names


def _ready(line: str) -> None:
    print(line, flush=True)


# --------------------------------------------------------------------------------------------
# commands


def _log_started(what: str) -> None:
    """The start-up line saying whether the hot modules run compiled (logged once every
    listener is up, when the broker has imported them)."""
    from rmqd import __version__
    from rmqd._compiled import compiled_status

    log.info("rmqd %s %s started; hot modules: %s", __version__, what, compiled_status())


async def _run_namesrv(args: argparse.Namespace) -> int:
    from rmqd.broker.namesrv import NamesrvRole

    config = _namesrv_config(args, args.port)
    role = NamesrvRole(config, host=args.host)
    with _signals() as signals:
        async with trio.open_nursery() as nursery:
            _naming(args, {role.port: ("the name server", "listenPort of -c, --port")})
            bound = await nursery.start(role.run)
            _log_started("namesrv")
            _ready(f"rmqd ready namesrv={_fmt(bound)}")
            await _wait_for_signal(signals, role.stop)
            nursery.cancel_scope.cancel()
    return EXIT_OK


async def _run_broker(args: argparse.Namespace) -> int:
    from rmqd.broker.broker import BrokerRole

    settings = _broker_settings(args, store=args.store, port=args.port, host=args.host, namesrv_addr=args.namesrv_addr)
    if not settings.broker.namesrvAddr:
        raise CliError("no name server: give -n HOST:PORT or namesrvAddr in broker.conf")
    _check_namesrv_addrs(settings.broker.namesrvAddr)
    role = BrokerRole(settings, host=args.host or "0.0.0.0")
    with _signals() as signals:
        async with trio.open_nursery() as nursery:
            _naming(args, _broker_listener_names(settings, "--port"))
            bound = await nursery.start(role.run)
            _log_started("broker")
            _ready(f"rmqd ready {_listeners_part(bound)} namesrv={settings.broker.namesrvAddr} "
                   f"store={settings.store.storePathRootDir}")
            await _wait_for_signal(signals, role.stop)
            nursery.cancel_scope.cancel()
    return EXIT_OK


async def _run_serve(args: argparse.Namespace) -> int:
    from rmqd.broker.broker import BrokerRole
    from rmqd.broker.namesrv import NamesrvRole

    host = args.host or "0.0.0.0"
    ns_port = args.namesrv_port if args.namesrv_port is not None else 9876
    config = _namesrv_config(args, ns_port)
    ns_role = NamesrvRole(config, host=host)
    # bind the name server first: its real port (0 = any) goes into namesrvAddr
    with _signals() as signals:
        async with trio.open_nursery() as nursery:
            _naming(args, {ns_port: ("the name server", "--namesrv-port")})
            ns_bound = await nursery.start(ns_role.run)
            ns_addr = f"{_connect_host(host)}:{ns_bound[1]}"  # where the broker registers
            settings = _broker_settings(args, store=args.store, port=args.broker_port, host=args.host,
                                        namesrv_addr=ns_addr)
            broker_role = BrokerRole(settings, host=host)
            _naming(args, _broker_listener_names(settings, "--broker-port"))
            bound = await nursery.start(broker_role.run)
            _log_started("serve")
            _ready(f"rmqd ready namesrv={_fmt(ns_bound)} {_listeners_part(bound)} "
                   f"store={settings.store.storePathRootDir}")

            async def stop_all() -> None:
                await broker_role.stop()   # drains requests, unregisters from the name server
                await ns_role.stop()

            await _wait_for_signal(signals, stop_all)
            nursery.cancel_scope.cancel()
    return EXIT_OK


def _check_namesrv_addrs(value: str) -> None:
    for addr in (a.strip() for a in value.split(";") if a.strip()):
        try:
            parse_addr(addr)
        except ValueError as exc:
            raise CliError(f"namesrvAddr: {exc}") from None


def _run_store(args: argparse.Namespace) -> int:
    if args.store_command is None:
        raise CliError("store needs a sub-command: verify, dump or repair-config")
    if args.store_command == "repair-config":
        return _run_repair_config(args)
    config = load_broker_settings(args.config).store if getattr(args, "config", None) else None
    if args.store_dir is None:
        if config is None:
            raise CliError(f"store {args.store_command} needs the store directory or -c broker.conf")
        store_dir = Path(_conf_store_root(args.config, config))
    else:
        store_dir = Path(args.store_dir)
    if not store_dir.is_dir():
        raise CliError(f"store {store_dir} does not exist or is not a directory")
    args.store_in_use = str(store_dir)
    try:
        from rmqd.store import tools
    except ImportError as exc:
        raise CliError(f"store tools are not available: {exc}") from None
    if args.store_command == "verify":
        from rmqd.store.progress import ProgressReporter

        count = 0
        with ProgressReporter(f"verifying {store_dir}") as progress:
            problems = tools.verify(str(store_dir), config, progress=progress)
        for problem in problems:
            count += 1
            print(_problem_line(problem))
        if args.against:
            if not Path(args.against).is_dir():
                raise CliError(f"store {args.against} does not exist or is not a directory")
            diffs, compared = tools.compare_commit_logs(str(store_dir), args.against, config, config)
            for problem in diffs:
                count += 1
                print(_problem_line(problem))
            if not diffs:
                print(f"commit logs of {store_dir} and {args.against} are identical over {compared}")
        if count:
            print(f"{count} problem(s) found in {store_dir}", file=sys.stderr)
            return EXIT_ERROR
        print(f"store {store_dir}: OK")
        return EXIT_OK
    out = sys.stdout
    try:
        for record in tools.dump(str(store_dir), topic=args.topic, queue=args.queue):
            out.write(json.dumps(record, ensure_ascii=False, default=_json_default) + "\n")
        out.flush()
    except BrokenPipeError:  # `rmqd store dump ... | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_OK


def _run_repair_config(args: argparse.Namespace) -> int:
    from rmqd.store.errors import StoreLockError
    from rmqd.store.repair import repair_config
    from rmqd.store.topic_config import TopicBrokerSettings

    settings = load_broker_settings(args.config) if args.config else None
    given = args.store_dir or args.store_opt
    if given is None and settings is None:
        raise CliError("repair-config needs the store directory or -c broker.conf")
    store_dir = Path(given or (settings.store.storePathRootDir if settings is not None else "")).expanduser()
    acl = settings is not None and settings.broker.aclEnable
    if not store_dir.is_dir() and not acl:
        raise CliError(f"store {store_dir} does not exist or is not a directory")
    lines: list[str] = []
    if store_dir.is_dir():
        config = None
        topic_settings = None
        if settings is not None:
            config = settings.store
            config.storePathRootDir = str(store_dir)
            topic_settings = TopicBrokerSettings.of(settings.broker)
        try:
            lines = repair_config(store_dir, config, topic_settings)
        except StoreLockError as exc:
            raise CliError(str(exc)) from None
        if not lines:
            lines.append(f"store {store_dir}: every config file is readable, nothing to repair")
    if acl:  # the acl files of an aclEnable=true broker (broker/acl_config.py keeps their last good copies)
        from rmqd.broker.acl_config import repair_acl_files
        assert settings is not None
        acl_lines = repair_acl_files(settings.broker.rocketmqHome)
        lines.extend(acl_lines or [f"acl files under {settings.broker.rocketmqHome}: every one loads, nothing to repair"])
    for line in lines:
        print(line)
    return EXIT_OK


def _conf_store_root(conf: str, config: Any) -> str:
    """The store `rmqd serve -c conf` would use: storePathRootDir, else ./store."""
    return str(config.storePathRootDir) if "storePathRootDir" in _conf_keys(conf) else "./store"


def _run_spark(args: argparse.Namespace) -> int:
    if args.spark_command is None:
        raise CliError("spark needs a sub-command: verify, export or package")
    if args.spark_command == "package":  # plain zipfile work: no Spark needed
        from rmqd.spark.package import package_main
        return package_main(list(args.spark_args))
    try:
        from rmqd.spark import cli as spark_cli
    except ImportError as exc:
        raise CliError(f"spark tools need the spark extra (pip install 'rmqd[spark]'): {exc}") from None
    entry = spark_cli.verify_main if args.spark_command == "verify" else spark_cli.export_main
    return entry(list(args.spark_args))


def _problem_line(problem: Any) -> str:
    file = getattr(problem, "file", None)
    offset = getattr(problem, "offset", None)
    message = getattr(problem, "message", None)
    if file is None and message is None:
        return str(problem)
    return f"{file}:{offset}: {message}"


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


# --------------------------------------------------------------------------------------------
# entry point


def _leaf_exceptions(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_leaf_exceptions(inner))
        return out
    return [exc]


def _verify_command(args: argparse.Namespace | None) -> str:
    """`rmqd store verify DIR [-c broker.conf]` for the store the failed command used."""
    store = getattr(args, "store_in_use", None) if args is not None else None
    if store is None:
        return "rmqd store verify <store directory>"
    conf = getattr(args, "config", None) if args is not None else None
    return f"rmqd store verify {store}" + (f" -c {conf}" if conf else "")


def _describe(exc: BaseException, args: argparse.Namespace | None = None) -> str:
    if isinstance(exc, (CliError, ConfigError)):
        return str(exc)
    if isinstance(exc, (StoreConfigError, StoreLockError)):
        return str(exc)
    if isinstance(exc, StoreFileError):
        # store damage: the file and offset (in the message), and the command that checks the
        # whole store and lists every damaged record
        return f"store problem: {exc}; inspect the store with: {_verify_command(args)}"
    if isinstance(exc, ListenError):
        names: ListenerNames = getattr(args, "listener_names", None) or {}
        listener, key = names.get(exc.port, ("", ""))
        return str(exc.named(listener, key) if listener else exc)
    if isinstance(exc, WireError):
        return f"bad data: {exc}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, OSError):
        text = exc.strerror or str(exc)
        if exc.errno in (98, 48, 10048):  # EADDRINUSE (Linux, macOS, Windows)
            return f"cannot listen: address already in use ({text})"
        if exc.filename:
            return f"{exc.filename}: {text}"
        return f"system error: {text}"
    return f"internal error: {type(exc).__name__}: {exc}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or usage error (2): argparse printed it already
        return int(exc.code or 0)
    if args.command == "spark":
        _take_log_level(args)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "store":
            return _run_store(args)
        if args.command == "spark":
            return _run_spark(args)
        runner = {"serve": _run_serve, "namesrv": _run_namesrv, "broker": _run_broker}[args.command]
        return trio.run(runner, args)
    except KeyboardInterrupt:
        return EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - the CLI contract: one line, never a traceback
        if isinstance(exc, SystemExit):
            return int(exc.code or 0)
        leaves = [e for e in _leaf_exceptions(exc) if not isinstance(e, KeyboardInterrupt)]
        if not leaves:  # Ctrl-C before the signal handler was in place
            return EXIT_OK
        if os.environ.get("RMQD_DEBUG"):
            log.error("rmqd failed", exc_info=exc)
        print(f"rmqd: {_describe(leaves[0], args)}", file=sys.stderr)
        return EXIT_ERROR


