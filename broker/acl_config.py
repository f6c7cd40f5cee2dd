"""plain_acl.yml for an ``aclEnable=true`` broker: where it is, loading it, reloading it,
changing it.

Why: 4.9.8's PlainPermissionManager reads ``<home>/conf/plain_acl.yml`` (the name relative
to home can be changed with the ``rocketmq.acl.plain.file`` system property) plus every
``*.yml``/``*.yaml`` under ``<home>/conf/acl/``, where home is ``rocketmq.home.dir`` /
``ROCKETMQ_HOME``; rmqd takes home from broker.conf's ``rocketmqHome`` (whose default is
``ROCKETMQ_HOME``, as BrokerConfig's) and the file name from ``$RMQD_ACL_PLAIN_FILE`` when
set. An access key defined in two files counts in the first one read. 4.9.8 re-reads a file
whose content changed (AclFileWatchService, every 5 s); so does `AclService.watch`. A
file that does not parse keeps the rules that were in force (and is logged), so an edit in
progress never opens the broker.

Changes by the ACL admin codes must never leave a file the broker cannot start on, nor lose
an acknowledged change (4.9.8 and rmqd before rewrote one shared ``.tmp`` from several
threads, and wrote values its own loader refuses). So every change, under one lock:
re-reads the file, applies the change, and runs the loader itself over the exact bytes to
be written together with every other acl file (a value the loader would refuse at the next
start is refused now, with RocketMQ's failure code, and nothing is written); then writes
its own temporary file, fsyncs it, renames it over the file and fsyncs the directory, and
only then puts the new rules in force and answers SUCCESS.

Every time a file loads (start, reload, change) its bytes are kept beside it as
``<file>.bak``, the last good copy. A start on a file the loader refuses stops with one line
naming the file; ``rmqd store repair-config -c broker.conf`` (``repair_acl_files``) sets the
damaged file aside and puts the last good copy back. The broker never falls back to the copy
by itself: an account deleted by hand in a broken edit must not come back unnoticed.

The verdict itself is processors/acl.py; here the request hook answers a refusal the way
4.9.8's NettyRemotingAbstract does when the ACL hook throws (SYSTEM_ERROR, the exception's
simple description).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
import yaml

from rmqd.broker.config import ConfigError
from rmqd.processors.acl import (DEFAULT_ADMIN_CODES, DENY, AclError, AclState, MessageLookup, address_matcher,
                                 build_account, check_request, check_resource_perms, parse_perm)
from rmqd.wire.codes import ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response

log = logging.getLogger("rmqd.acl")

DEFAULT_PLAIN_FILE = "conf/plain_acl.yml"
#: AclFileWatchService.WATCH_INTERVAL
WATCH_INTERVAL_SECONDS = 5.0
#: the last good copy of each acl file, beside it
GOOD_COPY_SUFFIX = ".bak"

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class AclFileError(ValueError):
    """One acl file that cannot be used: the message names the file, ``detail`` says why."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


def parse_yml(path: Path, raw: bytes) -> dict[str, Any] | None:
    """The bytes of acl file ``path`` as a mapping; None when empty (4.9.8 skips those)."""
    try:
        data = yaml.load(raw, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise AclFileError(path, f"not valid YAML: {str(exc).splitlines()[0]}") from None
    if data is None or data == {}:
        return None
    if not isinstance(data, dict):
        raise AclFileError(path, f"expected a mapping at the top, found {type(data).__name__}")
    return data


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AclFileError(path, f"cannot read: {exc.strerror}") from None


def read_yml(path: Path) -> dict[str, Any] | None:
    """The file as a mapping; None for a missing or empty file (4.9.8 skips those)."""
    raw = _read_bytes(path)
    return None if raw is None else parse_yml(path, raw)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _as_int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


def _list(data: dict[str, Any], key: str, path: Path) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclFileError(path, f"{key} must be a list")
    return value


def add_file_rules(state: AclState, path: Path, data: dict[str, Any]) -> None:
    """PlainPermissionManager.load of one file's mapping into ``state``: the loader's rules."""
    try:
        for item in _list(data, "globalWhiteRemoteAddresses", path):
            state.global_white.append(address_matcher(None if item is None else str(item)))
        for item in _list(data, "accounts", path):
            if not isinstance(item, dict):
                raise AclFileError(path, "each account must be a mapping")
            account = build_account(item)
            if account.access_key in state.accounts:
                log.warning("The accessKey %s is repeated in multiple ACL files", account.access_key)
                continue
            state.accounts[account.access_key] = account
    except AclError as exc:
        raise AclFileError(path, exc.message or "refused by the acl loader") from None


def find_acl_files(home: Path, default_file: Path) -> list[Path]:
    """getAllAclFiles(<home>/conf/acl) recursively, then the default file if not among them."""
    found: list[Path] = []

    def walk(directory: Path) -> None:
        try:
            entries = sorted(directory.iterdir())
        except OSError:
            return
        for entry in entries:
            if entry.name.endswith((".yml", ".yaml")) and not entry.is_dir():
                found.append(entry)
            elif entry.is_dir():
                walk(entry)
    walk(home / "conf" / "acl")
    if default_file.exists() and default_file not in found:
        found.append(default_file)
    return found


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_durably(path: Path, raw: bytes) -> None:
    """Its own temporary file beside ``path``, fsynced, renamed over it, the directory fsynced:
    after a crash the file is the old bytes or the new ones, never a mix or nothing. The
    file's mode is kept (a new file is 0600: it holds secret keys)."""
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def good_copy(path: Path) -> Path:
    return path.with_name(path.name + GOOD_COPY_SUFFIX)


def load_one(path: Path, raw: bytes | None) -> AclState:
    """One file's rules alone (what repair needs to tell a good file from a damaged one)."""
    state = AclState()
    data = None if raw is None else parse_yml(path, raw)
    if data is not None:
        add_file_rules(state, path, data)
    return state


class AclService:
    """The ACL rules in force, the request hook that applies them, and the admin writes."""

    def __init__(self, home: str | os.PathLike[str] | None, plain_file: str | None = None,
                 *, interval: float = WATCH_INTERVAL_SECONDS, admin_only: frozenset[int] = DEFAULT_ADMIN_CODES,
                 message_lookup: MessageLookup | None = None) -> None:
        if not home:
            raise ConfigError("aclEnable=true needs rocketmqHome (or ROCKETMQ_HOME): "
                              "plain_acl.yml is read from <rocketmqHome>/conf/")
        self.home = Path(home)
        plain_file = plain_file or os.environ.get("RMQD_ACL_PLAIN_FILE") or DEFAULT_PLAIN_FILE
        self.default_file = self.home / plain_file
        self.acl_dir = self.home / "conf" / "acl"
        # RMQD_ACL_WATCH_INTERVAL_MS: a shorter poll for tests
        env_ms = os.environ.get("RMQD_ACL_WATCH_INTERVAL_MS")
        self.interval = int(env_ms) / 1000 if env_ms and env_ms.isdigit() else interval
        self.admin_only = admin_only
        self.message_lookup = message_lookup
        self.state = AclState()
        self.files: list[Path] = []
        self.reloads = 0
        self._started_ms = _now_ms()
        self._fingerprint: tuple[tuple[str, str], ...] = ()
        #: one writer: admin changes and reloads run in worker threads, one at a time
        self._lock = threading.Lock()
        self._ensure_default_file()
        try:
            loaded = self._load()
        except AclFileError as exc:
            raise ConfigError(startup_refusal(exc)) from None
        self._apply(*loaded)
        self._keep_good_copies(loaded[2])

    # -- files ---------------------------------------------------------------------------------
    def _ensure_default_file(self) -> None:
        """assureAclConfigFilesExist: the default file holds the global white list, so it exists."""
        try:
            if not self.default_file.exists():  # an existing file is left alone (it may be read-only to us)
                self.default_file.touch()
        except OSError as exc:
            raise ConfigError(f"{self.default_file}: cannot create the acl file: {exc.strerror}") from None

    def acl_files(self) -> list[Path]:
        return find_acl_files(self.home, self.default_file)

    def _read_all(self, files: list[Path]) -> dict[Path, bytes | None]:
        out: dict[Path, bytes | None] = {}
        for path in files:
            try:
                out[path] = path.read_bytes()
            except OSError:
                out[path] = None
        return out

    @staticmethod
    def _fingerprint_of(contents: dict[Path, bytes | None]) -> tuple[tuple[str, str], ...]:
        return tuple((str(path), "unreadable" if raw is None else hashlib.md5(raw).hexdigest())
                     for path, raw in contents.items())

    def _load(self, override: tuple[Path, bytes] | None = None
              ) -> tuple[AclState, list[Path], dict[Path, bytes | None]]:
        """Every acl file through the loader (``override``: one file's would-be bytes instead
        of what is on disk). AclFileError names the first file refused."""
        files = self.acl_files()
        if override is not None and override[0] not in files:
            files.append(override[0])
        contents = self._read_all(files)
        if override is not None:
            contents[override[0]] = override[1]
        state = AclState()
        for path in files:
            raw = contents[path]
            if raw is None:
                if path.exists():
                    raise AclFileError(path, "cannot read")
                continue
            data = parse_yml(path, raw)
            if data is not None:
                add_file_rules(state, path, data)
        return state, files, contents

    def _apply(self, state: AclState, files: list[Path], contents: dict[Path, bytes | None]) -> None:
        self.state, self.files, self._fingerprint = state, files, self._fingerprint_of(contents)

    @staticmethod
    def _keep_good_copies(contents: dict[Path, bytes | None]) -> None:
        """Each loaded file's bytes as <file>.bak (only when they differ: a start rewrites nothing)."""
        for path, raw in contents.items():
            if raw is None:
                continue
            copy = good_copy(path)
            try:
                if copy.exists() and copy.read_bytes() == raw:
                    continue
                write_file_durably(copy, raw)
            except OSError as exc:
                log.warning("cannot keep the last good copy of %s as %s: %s", path, copy.name, exc.strerror)

    def reload_if_changed(self) -> bool:
        """Re-read the files when their list or a content changed; True when new rules apply."""
        with self._lock:
            files = self.acl_files()
            if self._fingerprint_of(self._read_all(files)) == self._fingerprint:
                return False
            try:
                loaded = self._load()
            except AclFileError as exc:
                log.error("acl file change not applied, the previous rules stay in force: %s", exc)
                self._fingerprint = self._fingerprint_of(self._read_all(files))
                return False
            self.reloads += 1  # counted before the rules show, so whoever sees them sees the count
            self._apply(*loaded)
            log.info("acl rules reloaded from %s", ", ".join(str(f) for f in loaded[1]))
            self._keep_good_copies(loaded[2])
            return True

    async def watch(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Poll the files every `interval` seconds (disk reads in a worker thread)."""
        task_status.started()
        while True:
            await trio.sleep(self.interval)
            await trio.to_thread.run_sync(self.reload_if_changed)

    # -- admin writes (PlainPermissionManager.updateAccessConfig & co.) --------------------------
    def data_versions(self) -> dict[str, dict[str, int]]:
        """Path -> {"counter", "timestamp"} of each loaded file (its dataVersion entry, else new)."""
        out: dict[str, dict[str, int]] = {}
        for path in self.files:
            try:
                data = read_yml(path) or {}
            except AclFileError:
                data = {}
            versions = data.get("dataVersion")
            first = versions[0] if isinstance(versions, list) and versions and isinstance(versions[0], dict) else {}
            out[str(path)] = {"counter": _as_int(first.get("counter"), 0),
                              "timestamp": _as_int(first.get("timestamp"), self._started_ms)}
        return out

    def _change(self, choose: Callable[[], Path | None], change: Callable[[dict[str, Any]], None]) -> bool:
        """Under the one lock: pick the file (``choose``; None: nothing to change, False), read
        it, change it, check the result with the loader, write it durably, then apply it.
        AclError (nothing written) when the file cannot be read or the loader refuses the
        result; OSError when the disk refuses (the file is then as it was)."""
        with self._lock:
            path = choose()
            if path is None:
                return False
            try:
                data = read_yml(path) or {}
            except AclFileError as exc:
                raise AclError(f"{exc}: not changed") from None
            change(data)
            versions = data.get("dataVersion")  # updateAclConfigFileVersion: counter + 1, now
            first = versions[0] if isinstance(versions, list) and versions and isinstance(versions[0], dict) else {}
            data["dataVersion"] = [{"counter": _as_int(first.get("counter"), 0) + 1, "timestamp": _now_ms()}]
            try:
                raw = yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False,
                                allow_unicode=True).encode("utf-8")
            except (yaml.YAMLError, UnicodeEncodeError) as exc:
                raise AclError(f"the value cannot be written to {path.name}: {exc}") from None
            try:
                loaded = self._load(override=(path, raw))
            except AclFileError as exc:
                raise AclError(exc.detail if exc.path == path else str(exc)) from None
            write_file_durably(path, raw)
            self._apply(*loaded)
            self._keep_good_copies(loaded[2])
            return True

    def _account_file(self, access_key: str) -> Path | None:
        for path in self.files:
            try:
                data = read_yml(path) or {}
            except AclFileError:
                continue
            for item in data.get("accounts") or []:
                if isinstance(item, dict) and str(item.get("accessKey")) == access_key:
                    return path
        return None

    def update_account(self, config: dict[str, Any]) -> bool:
        """UPDATE_AND_CREATE_ACL_CONFIG: the account replaced in its file, or added to the
        default file. AclError (checkPlainAccessConfig / checkResourcePerms, then the loader's
        own rules over the result) when refused."""
        ak, sk = config.get("accessKey"), config.get("secretKey")
        if ak is None or sk is None or len(ak) <= 6 or len(sk) <= 6:
            raise AclError(f"The accessKey={ak if ak is not None else 'null'} and secretKey="
                           f"{sk if sk is not None else 'null'} cannot be null and length should longer than 6")
        for resources in (config.get("topicPerms"), config.get("groupPerms")):
            check_resource_perms(resources)
        for key in ("defaultTopicPerm", "defaultGroupPerm"):  # rmqd: 4.9.8 silently reads a typo as DENY
            value = config.get(key)
            if value and value.strip() != "DENY" and parse_perm(value) == DENY:
                raise AclError(f"Parse {key} error for {value}.\n"
                               "The expected permissions are 'DENY' or 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")

        def change(data: dict[str, Any]) -> None:
            accounts = data.get("accounts")
            if not isinstance(accounts, list):
                accounts = []
            entry: dict[str, Any] = {}
            for item in list(accounts):
                if isinstance(item, dict) and str(item.get("accessKey")) == ak:
                    accounts.remove(item)
                    entry = item
                    break
            entry["accessKey"] = ak
            entry["secretKey"] = sk
            if config.get("whiteRemoteAddress") is not None:
                entry["whiteRemoteAddress"] = config["whiteRemoteAddress"]
            entry["admin"] = bool(config.get("admin"))
            for key in ("defaultTopicPerm", "defaultGroupPerm"):
                if config.get(key):
                    entry[key] = config[key]
            for key in ("topicPerms", "groupPerms"):
                if config.get(key) is not None:
                    entry[key] = config[key]
            accounts.append(entry)
            data["accounts"] = accounts

        return self._change(lambda: self._account_file(ak) or self.default_file, change)

    def delete_account(self, access_key: str) -> bool:
        """DELETE_ACL_CONFIG: False when no loaded file has the account."""
        if not access_key or access_key not in self.state.accounts:
            return False

        def change(data: dict[str, Any]) -> None:
            data["accounts"] = [a for a in data.get("accounts") or []
                                if not (isinstance(a, dict) and str(a.get("accessKey")) == access_key)]
        return self._change(lambda: self._account_file(access_key), change)

    def update_global_white(self, addresses: list[str], file_name: str | None) -> bool:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: only one of the acl files the broker reads (4.9.8
        takes any existing file under rocketmqHome whose name passes a test that, as written,
        lets every name but *.yaml through: a signed request could turn broker.conf, or a
        store's topics.json under the home, into YAML the broker cannot start on)."""
        path = Path(file_name) if file_name else self.default_file
        if not path.is_file():
            log.error("Parameter value %s is not exist or is a directory, please check your parameter", path)
            return False
        if not path.resolve().is_relative_to(self.home.resolve()):
            log.error("Parameter value %s is not in the directory rocketmq.home.dir %s", path, self.home)
            return False
        known = [p for p in self.acl_files() if p.resolve() == path.resolve()]
        if not known:
            log.error("Parameter value %s is not a ACL configuration file", path)
            return False

        def change(data: dict[str, Any]) -> None:
            data["globalWhiteRemoteAddresses"] = list(addresses)
        return self._change(lambda: known[0], change)


    # -- the request hook ------------------------------------------------------------------------
    def hook(self, ctx: Any, request: RemotingCommand) -> RemotingCommand | None:
        """Dispatcher request hook: None lets the request through, else the refusal to answer."""
        error = check_request(request, ctx.remote_addr, self.state, self.admin_only, self.message_lookup)
        if error is None:
            return None
        log.warning("acl refused code %s from %s: %s", request.code, ctx.remote_addr, error.message)
        return make_response(request, ResponseCode.SYSTEM_ERROR, error.remark)


def startup_refusal(exc: AclFileError) -> str:
    """The one line a broker that will not start on an acl file prints: the file, why, and the
    way out."""
    copy = good_copy(exc.path)
    try:
        load_one(copy, copy.read_bytes())
        how = (f"fix it, or run `rmqd store repair-config -c <broker.conf>` to set it aside and put back "
               f"{copy.name}, the last version this broker loaded")
    except (OSError, AclFileError):
        how = f"fix it (there is no loadable last good copy {copy.name} to put back)"
    return f"{exc}: not starting, nothing was changed; {how}"


def repair_acl_files(home: str | os.PathLike[str] | None, plain_file: str | None = None) -> list[str]:
    """``rmqd store repair-config`` for the acl files of a stopped broker: each file the loader
    refuses is moved aside (``<name>.corrupt-<time>``, never deleted) and its last good copy
    put back; without one, the accounts and white list it held are gone (their requests are
    refused) until the file is restored by hand. One line per change."""
    if not home:
        raise ConfigError("aclEnable=true needs rocketmqHome (or ROCKETMQ_HOME) to find the acl files")
    root = Path(home)
    default_file = root / (plain_file or os.environ.get("RMQD_ACL_PLAIN_FILE") or DEFAULT_PLAIN_FILE)
    stamp = time.strftime("%Y%m%d%H%M%S")
    lines: list[str] = []
    for path in find_acl_files(root, default_file):
        try:
            load_one(path, _read_bytes(path))
            continue
        except AclFileError as exc:
            problem = exc.detail
        aside = path.with_name(f"{path.name}.corrupt-{stamp}")
        os.replace(path, aside)
        copy = good_copy(path)
        try:
            raw = copy.read_bytes()
            load_one(copy, raw)
        except (OSError, AclFileError):
            if path == default_file:
                write_file_durably(path, b"")
            lines.append(f"{path}: {problem}; no loadable {copy.name}; damaged file kept as {aside.name}; "
                         f"its accounts and white list are not in force until you restore them")
            continue
        write_file_durably(path, raw)
        lines.append(f"{path}: {problem}; restored from {copy.name} (the last version the broker loaded); "
                     f"damaged file kept as {aside.name}")
    return lines
