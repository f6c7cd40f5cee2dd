"""plain_acl.yml for an ``aclEnable=true`` broker: where it is, loading it, reloading it.

Why: 4.9.8's PlainPermissionManager reads ``<home>/conf/plain_acl.yml`` (the name relative
to home can be changed with the ``rocketmq.acl.plain.file`` system property) plus every
``*.yml``/``*.yaml`` under ``<home>/conf/acl/``, where home is ``rocketmq.home.dir`` /
``ROCKETMQ_HOME``; rmqd takes home from broker.conf's ``rocketmqHome`` (whose default is
``ROCKETMQ_HOME``, as BrokerConfig's) and the file name from ``$RMQD_ACL_PLAIN_FILE`` when
set. An access key defined in two files counts in the first one read. 4.9.8 re-reads a file
whose content changed (AclFileWatchService, every 5 s); so does `AclService.watch`. A
file that does not parse keeps the rules that were in force (and is logged), so an edit in
progress never opens the broker.

The verdict itself is processors/acl.py; here the request hook answers a refusal the way
4.9.8's NettyRemotingAbstract does when the ACL hook throws (SYSTEM_ERROR, the exception's
simple description).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import trio
import yaml

from rmqd.broker.config import ConfigError
from rmqd.processors.acl import (AclError, AclState, address_matcher, build_account, check_request,
                             check_resource_perms)
from rmqd.wire.codes import ResponseCode
from rmqd.wire.frame import RemotingCommand, make_response

log = logging.getLogger("rmqd.acl")

DEFAULT_PLAIN_FILE = "conf/plain_acl.yml"
#: AclFileWatchService.WATCH_INTERVAL
WATCH_INTERVAL_SECONDS = 5.0


class AclFileError(ValueError):
    """One acl file that cannot be used: the message names the file."""


def read_yml(path: Path) -> dict[str, Any] | None:
    """The file as a mapping; None for a missing or empty file (4.9.8 skips those)."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AclFileError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclFileError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if data is None or data == {}:
        return None
    if not isinstance(data, dict):
        raise AclFileError(f"{path}: expected a mapping at the top, found {type(data).__name__}")
    return data


def _now_ms() -> int:
    return int(time.time() * 1000)


def _as_int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _list(data: dict[str, Any], key: str, path: Path) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclFileError(f"{path}: {key} must be a list")
    return value


class AclService:
    """The ACL rules in force and the request hook that applies them."""

    def __init__(self, home: str | os.PathLike[str] | None, plain_file: str | None = None,
                 *, interval: float = WATCH_INTERVAL_SECONDS) -> None:
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
        self.state = AclState()
        self.files: list[Path] = []
        self.reloads = 0
        self._started_ms = _now_ms()
        self._fingerprint: tuple[tuple[str, str], ...] = ()
        self._ensure_default_file()
        try:
            self.state, self.files, self._fingerprint = self._load()
        except AclFileError as exc:
            raise ConfigError(str(exc)) from None

    # -- files ---------------------------------------------------------------------------------
    def _ensure_default_file(self) -> None:
        """assureAclConfigFilesExist: the default file holds the global white list, so it exists."""
        try:
            if not self.default_file.exists():  # an existing file is left alone (it may be read-only to us)
                self.default_file.touch()
        except OSError as exc:
            raise ConfigError(f"{self.default_file}: cannot create the acl file: {exc.strerror}") from None

    def acl_files(self) -> list[Path]:
        """getAllAclFiles(conf/acl) recursively, then the default file if not among them."""
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
        walk(self.acl_dir)
        if self.default_file.exists() and self.default_file not in found:
            found.append(self.default_file)
        return found

    def _fingerprint_of(self, files: list[Path]) -> tuple[tuple[str, str], ...]:
        out = []
        for path in files:
            try:
                digest = hashlib.md5(path.read_bytes()).hexdigest()
            except OSError:
                digest = "unreadable"
            out.append((str(path), digest))
        return tuple(out)

    def _load(self) -> tuple[AclState, list[Path], tuple[tuple[str, str], ...]]:
        files = self.acl_files()
        fingerprint = self._fingerprint_of(files)
        state = AclState()
        for path in files:
            data = read_yml(path)
            if data is None:
                continue
            try:
                for item in _list(data, "globalWhiteRemoteAddresses", path):
                    state.global_white.append(address_matcher(None if item is None else str(item)))
                for item in _list(data, "accounts", path):
                    if not isinstance(item, dict):
                        raise AclFileError(f"{path}: each account must be a mapping")
                    account = build_account(item)
                    if account.access_key in state.accounts:
                        log.warning("The accessKey %s is repeated in multiple ACL files", account.access_key)
                        continue
                    state.accounts[account.access_key] = account
            except AclError as exc:
                raise AclFileError(f"{path}: {exc.message}") from None
        return state, files, fingerprint

    def reload_if_changed(self) -> bool:
        """Re-read the files when their list or a content changed; True when new rules apply."""
        if self._fingerprint_of(self.acl_files()) == self._fingerprint:
            return False
        try:
            state, files, fingerprint = self._load()
        except AclFileError as exc:
            log.error("acl file change not applied, the previous rules stay in force: %s", exc)
            self._fingerprint = self._fingerprint_of(self.acl_files())
            return False
        self.state, self.files, self._fingerprint = state, files, fingerprint
        self.reloads += 1
        log.info("acl rules reloaded from %s", ", ".join(str(f) for f in files))
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

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        """updateAclConfigFileVersion + writeDataObject: counter + 1, now, then the whole file."""
        versions = data.get("dataVersion")
        first = versions[0] if isinstance(versions, list) and versions and isinstance(versions[0], dict) else {}
        data["dataVersion"] = [{"counter": _as_int(first.get("counter"), 0) + 1, "timestamp": _now_ms()}]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True))
        os.replace(tmp, path)
        self.reload_if_changed()

    def _account_file(self, access_key: str) -> Path | None:
        for path in self.files:
            data = read_yml(path) or {}
            for item in data.get("accounts") or []:
                if isinstance(item, dict) and str(item.get("accessKey")) == access_key:
                    return path
        return None

    def update_account(self, config: dict[str, Any]) -> bool:
        """UPDATE_AND_CREATE_ACL_CONFIG: the account replaced in its file, or added to the
        default file. AclError (checkPlainAccessConfig / checkResourcePerms) when refused."""
        ak, sk = config.get("accessKey"), config.get("secretKey")
        if ak is None or sk is None or len(ak) <= 6 or len(sk) <= 6:
            raise AclError(f"The accessKey={ak if ak is not None else 'null'} and secretKey="
                           f"{sk if sk is not None else 'null'} cannot be null and length should longer than 6")
        for resources in (config.get("topicPerms"), config.get("groupPerms")):
            check_resource_perms(resources)
        path = self._account_file(ak) or self.default_file
        data = read_yml(path) or {}
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
        self._write(path, data)
        return True

    def delete_account(self, access_key: str) -> bool:
        """DELETE_ACL_CONFIG: False when no loaded file has the account."""
        if not access_key or access_key not in self.state.accounts:
            return False
        path = self._account_file(access_key)
        if path is None:
            return False
        data = read_yml(path) or {}
        accounts = [a for a in data.get("accounts") or []
                    if not (isinstance(a, dict) and str(a.get("accessKey")) == access_key)]
        data["accounts"] = accounts
        self._write(path, data)
        return True

    def update_global_white(self, addresses: list[str], file_name: str | None) -> bool:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: only an existing file under rocketmqHome (rmqd
        resolves the path first, so '..' cannot leave the home as a string prefix test would)."""
        path = Path(file_name) if file_name else self.default_file
        if not path.is_file():
            log.error("Parameter value %s is not exist or is a directory, please check your parameter", path)
            return False
        if not path.resolve().is_relative_to(self.home.resolve()):
            log.error("Parameter value %s is not in the directory rocketmq.home.dir %s", path, self.home)
            return False
        if not path.name.endswith(".yml") and path.name.endswith(".yaml"):  # 4.9.8's test, as written
            log.error("Parameter value %s is not a ACL configuration file", path)
            return False
        data = read_yml(path) or {}
        data["globalWhiteRemoteAddresses"] = list(addresses)
        self._write(path, data)
        return True

    # -- the request hook ------------------------------------------------------------------------
    def hook(self, ctx: Any, request: RemotingCommand) -> RemotingCommand | None:
        """Dispatcher request hook: None lets the request through, else the refusal to answer."""
        error = check_request(request, ctx.remote_addr, self.state)
        if error is None:
            return None
        log.warning("acl refused code %s from %s: %s", request.code, ctx.remote_addr, error.message)
        return make_response(request, ResponseCode.SYSTEM_ERROR, error.remark)
