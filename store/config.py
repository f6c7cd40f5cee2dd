"""MessageStoreConfig: the store's settings under RocketMQ 4.9.8's own key names and defaults.

Attribute names are the broker.conf keys (camelCase on purpose), so broker/config.py can map a
broker.conf onto this class one to one and an operator's existing file keeps its meaning.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

CQ_STORE_UNIT_SIZE = 20

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
ASYNC_MASTER = "ASYNC_MASTER"
SYNC_MASTER = "SYNC_MASTER"
SLAVE = "SLAVE"

_TIME_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass
class MessageStoreConfig:
    """Fields and defaults of org.apache.rocketmq.store.config.MessageStoreConfig (4.9.8)."""

    storePathRootDir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    storePathCommitLog: str | None = None
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300_000 * CQ_STORE_UNIT_SIZE
    enableConsumeQueueExt: bool = False
    mappedFileSizeConsumeQueueExt: int = 48 * 1024 * 1024  # accepted, as consumequeue_ext is not kept
    bitMapLengthConsumeQueueExt: int = 64
    flushIntervalCommitLog: int = 500
    commitIntervalCommitLog: int = 200
    useReentrantLockWhenPutMessage: bool = True
    flushCommitLogTimed: bool = True
    flushIntervalConsumeQueue: int = 1000
    cleanResourceInterval: int = 10_000
    deleteCommitLogFilesInterval: int = 100
    deleteConsumeQueueFilesInterval: int = 100
    destroyMapedFileIntervalForcibly: int = 120_000
    redeleteHangedFileInterval: int = 120_000
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    fileReservedTime: int = 72
    putMsgIndexHightWater: int = 600_000
    maxMessageSize: int = 1024 * 1024 * 4
    checkCRCOnRecover: bool = True
    flushCommitLogLeastPages: int = 4
    commitCommitLogLeastPages: int = 4
    flushLeastPagesWhenWarmMapedFile: int = 1024 // 4 * 16
    flushConsumeQueueLeastPages: int = 2
    flushCommitLogThoroughInterval: int = 10_000
    commitCommitLogThoroughInterval: int = 200
    flushConsumeQueueThoroughInterval: int = 60_000
    maxTransferBytesOnMessageInMemory: int = 1024 * 256
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInDisk: int = 1024 * 64
    maxTransferCountOnMessageInDisk: int = 8
    accessMessageInMemoryMaxRatio: int = 40
    messageIndexEnable: bool = True
    maxHashSlotNum: int = 5_000_000
    maxIndexNum: int = 5_000_000 * 4
    maxMsgsNumBatch: int = 64
    messageIndexSafe: bool = False
    haListenPort: int = 10912
    # rmqd: the address the HA listener binds (4.9.8 binds every interface, and the port serves
    # the whole commit log to whoever connects); unset: the broker's own listen address
    haBindAddress: str | None = None
    haSendHeartbeatInterval: int = 5000
    haHousekeepingInterval: int = 20_000
    haTransferBatchSize: int = 32 * 1024
    haMasterAddress: str | None = None
    haSlaveFallbehindMax: int = 256 * 1024 * 1024
    brokerRole: str = ASYNC_MASTER
    flushDiskType: str = ASYNC_FLUSH
    syncFlushTimeout: int = 5000
    slaveTimeout: int = 3000
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flushDelayOffsetInterval: int = 10_000
    cleanFileForciblyEnable: bool = True
    warmMapedFileEnable: bool = False
    offsetCheckInSlave: bool = False
    debugLockEnable: bool = False
    duplicationEnable: bool = False
    diskFallRecorded: bool = True
    osPageCacheBusyTimeOutMills: int = 1000
    defaultQueryMaxNum: int = 32
    transientStorePoolEnable: bool = False
    transientStorePoolSize: int = 5
    fastFailIfNoBufferInStorePool: bool = False
    enableDLegerCommitLog: bool = False
    isEnableBatchPush: bool = False
    enableScheduleMessageStats: bool = True
    enableLmq: bool = False
    enableMultiDispatch: bool = False
    maxLmqConsumeQueueNum: int = 20_000
    enableScheduleAsyncDeliver: bool = False
    scheduleAsyncDeliverMaxPendingLimit: int = 2000
    scheduleAsyncDeliverMaxResendNum2Blocked: int = 3
    # In 4.9.x these two are JVM system properties (rocketmq.broker.diskSpaceWarningLevelRatio /
    # diskSpaceCleanForciblyRatio) read by DefaultMessageStore.CleanCommitLogService.
    diskSpaceWarningLevelRatio: float = 0.90
    diskSpaceCleanForciblyRatio: float = 0.85

    # ---- derived paths (StorePathConfigHelper) ----------------------------------------------
    def get_store_path_commit_log(self) -> str:
        return self.storePathCommitLog or os.path.join(self.storePathRootDir, "commitlog")

    def get_store_path_consume_queue(self) -> str:
        return os.path.join(self.storePathRootDir, "consumequeue")

    def get_store_path_index(self) -> str:
        return os.path.join(self.storePathRootDir, "index")

    def get_store_checkpoint(self) -> str:
        return os.path.join(self.storePathRootDir, "checkpoint")

    def get_abort_file(self) -> str:
        return os.path.join(self.storePathRootDir, "abort")

    def get_lock_file(self) -> str:
        return os.path.join(self.storePathRootDir, "lock")

    def get_config_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "config")

    def get_mapped_file_size_consume_queue(self) -> int:
        """Rounded up to whole 20-byte units, as MessageStoreConfig#getMappedFileSizeConsumeQueue."""
        units = -(-self.mappedFileSizeConsumeQueue // CQ_STORE_UNIT_SIZE)
        return units * CQ_STORE_UNIT_SIZE

    @property
    def is_sync_flush(self) -> bool:
        return self.flushDiskType == SYNC_FLUSH

    @property
    def is_slave(self) -> bool:
        return self.brokerRole == SLAVE

    def delay_levels_ms(self) -> list[int]:
        """messageDelayLevel parsed like ScheduleMessageService.parseDelayLevel: index 0 = level 1."""
        out = []
        for item in self.messageDelayLevel.split():
            unit = item[-1]
            if unit not in _TIME_UNITS:
                raise ValueError(f"messageDelayLevel: bad unit in {item!r}")
            out.append(int(item[:-1]) * _TIME_UNITS[unit])
        return out

    @property
    def max_delay_level(self) -> int:
        return len(self.messageDelayLevel.split())

    # ---- broker.conf mapping ---------------------------------------------------------------
    def update(self, values: Mapping[str, Any]) -> list[str]:
        """Set known keys (strings coerced to the field's type like Java's properties mapping);
        returns the keys that are not store keys, for the caller to handle or reject."""
        return apply_properties(self, values)


class ConfigValueError(ValueError):
    """A broker.conf value that does not convert to its field's type; carries key, value and
    type so broker/config.py can word its ConfigError (file, key, value) its own way."""

    def __init__(self, key: str, raw: str, typ: str) -> None:
        super().__init__(f"{key}: cannot convert {raw!r} to {typ}")
        self.key, self.raw, self.typ = key, raw, typ


@functools.cache
def field_types(cls: type) -> dict[str, str]:
    """Field name -> annotation text of a config dataclass (the keys a properties file may set)."""
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def apply_properties(target: Any, values: Mapping[str, Any]) -> list[str]:
    """Apply RocketMQ key=value strings onto a config dataclass, each converted to its field's
    type (see convert_value); returns the keys the class does not have, in order, untouched.
    A bad value raises ConfigValueError before anything after it is set."""
    unknown = []
    types = field_types(type(target))
    for key, raw in values.items():
        typ = types.get(key)
        if typ is None:
            unknown.append(key)
            continue
        setattr(target, key, convert_value(key, typ, raw))
    return unknown


def convert_value(key: str, typ: str, raw: Any) -> Any:
    """A properties string as a field of annotation ``typ``: booleans only as true/false (any
    case), whole numbers for int, "" for an optional string means None; non-strings pass as-is."""
    if not isinstance(raw, str):
        return raw
    s = raw.strip()
    try:
        if typ == "bool":
            if s.lower() not in ("true", "false"):
                raise ValueError(s)
            return s.lower() == "true"
        if typ == "int":
            return int(s)
        if typ == "float":
            return float(s)
    except ValueError:
        raise ConfigValueError(key, raw, typ) from None
    if typ == "str | None" and s == "":
        return None
    return s
