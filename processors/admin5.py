"""The RocketMQ 5.x admin codes mqadmin 5.x and the dashboard send that have no 4.9.8 counterpart
(beside GET_TOPIC_CONFIG, in processors/admin.py). Served through AdminObserveProcessor's table.

Facts from apache/rocketmq rocketmq-all-5.3.3 (AdminBrokerProcessor, DefaultHAService,
ColdDataCgCtrService; develop 8fc57f1 answers the same; no 5.5.0 tag in the snapshot):

* GET_BROKER_HA_STATUS (907, ``haStatus``): DefaultMessageStore.getHARuntimeInfo. A master
  lists every slave connection (its acked offset, the gap to the master's commit-log end, in
  sync while that gap is under haMaxGapNotInSync, the bytes sent in the last second and where
  the next transfer starts); a slave describes its link to the master (the HA address, its own
  max offset, the last read and write times, the bytes read in the last second and the master
  flush offset its checkpoint holds). No HA service: SYSTEM_ERROR.
* GET_COLD_DATA_FLOW_CTR_INFO (2003, ``getColdDataFlowCtrInfo``): the cold-read tables. rmqd has
  no cold-data flow control (5.x's coldDataFlowControlEnable defaults to false): no consumer
  group is ever counted or configured, so the tables are empty and the accumulation 0, with
  5.x's default thresholds - what a 5.x broker with the feature off answers.
* SET_COMMITLOG_READ_MODE (2004, ``setCommitLogReadAheadMode``): READ_AHEAD_MODE 0 (MADV_NORMAL)
  or 1 (MADV_RANDOM) is madvise'd on every mapped commit-log file, as CommitLog.
  scanFileAndSetReadMode does.
* POP_ROLLBACK (200056, ``exportPopRecord``): moves the POP records of 5.x's RocksDB POP store
  into the file-based one. rmqd keeps POP state in the file-based form only (revive topic and
  checkpoints, store/pop.py), so there is nothing to move: SUCCESS, as a 5.x broker without
  popConsumerKVServiceInit answers.
* CHECK_ROCKSDB_CQ_WRITE_PROGRESS (354, ``checkRocksdbCqWriteProgress``): 5.x answers at once
  with CHECK_IN_PROGRESS and runs the check in the background, logging its result; with the
  file consume queue only (rocksdbCQDoubleWriteEnable false) that result is CHECK_NOT_OK.
* EXPORT_ROCKSDB_CONFIG_TO_JSON (355, ``rocksDBConfigToJson``): exports the RocksDB-backed config
  tables; a broker whose tables are the JSON files (storeType default, as rmqd's) has none to
  export: "export done." after checking the type names.
"""
from __future__ import annotations

import logging
import mmap
import struct
from typing import Iterable, Protocol

from rmqd.processors.names import guard_names
from rmqd.processors.seams import Context, RequestHandler, StoreBroker
from rmqd.wire.admin5 import (
    CHECK_IN_PROGRESS, CHECK_NOT_OK, CheckRocksdbCqWriteResult, HAClientRuntimeInfo, HAConnectionRuntimeInfo,
    HARuntimeInfo, encode_cold_data_flow_ctr_info,
)
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.errors import HeaderFieldError
from rmqd.wire.frame import RemotingCommand, make_response
from rmqd.wire.headers import parse_java_int

log = logging.getLogger("rmqd.admin")

#: MessageStoreConfig.haMaxGapNotInSync (5.x): a slave this far behind or more is "Fall Behind".
HA_MAX_GAP_NOT_IN_SYNC = 256 * 1024 * 1024
#: BrokerConfig.cgColdReadThreshold / globalColdReadThreshold (5.x defaults).
CG_COLD_READ_THRESHOLD = 3 * 1024 * 1024
GLOBAL_COLD_READ_THRESHOLD = 100 * 1024 * 1024
#: FIleReadaheadMode.READ_AHEAD_MODE and LibC's values.
READ_AHEAD_MODE = "READ_AHEAD_MODE"
MADV_NORMAL, MADV_RANDOM = 0, 1
#: StoreCheckpoint (5.x): masterFlushedOffset is the file's fourth long (4.9 never writes it: 0).
_MASTER_FLUSHED_OFFSET_AT = 24
#: ExportRocksDBConfigToJsonRequestHeader.ConfigType names.
ROCKSDB_CONFIG_TYPES = ("topics", "subscriptionGroups", "consumerOffsets")
#: String.trim's characters (every code point up to the space).
_JAVA_TRIM = "".join(map(chr, range(0x21)))
#: An unknown type is an IllegalArgumentException out of the processor: 5.x answers SYSTEM_ERROR
#: with UtilAll.exceptionSimpleDesc, the exception and the frame that threw it (5.3.3's line).
_AT_CONFIG_TYPE = ("org.apache.rocketmq.remoting.protocol.header.ExportRocksDBConfigToJsonRequestHeader$ConfigType"
                   ".getConfigTypeByName(ExportRocksDBConfigToJsonRequestHeader.java:51)")


class FlowView(Protocol):
    def per_second(self) -> int: ...


class HAConnectionView(Protocol):
    """broker.ha_master.HAConnection, read-only."""

    remote: str
    slave_ack_offset: int
    next_transfer_from: int
    connected_at: float
    flow: FlowView


class HAMasterView(Protocol):
    @property
    def connections(self) -> Iterable[HAConnectionView]: ...


class HAClientView(Protocol):
    """broker.ha_slave.HAClient, read-only."""

    master_address: str | None
    last_read_ms: int
    last_write_ms: int
    flow: FlowView


class Admin5Broker(StoreBroker, Protocol):
    @property
    def ha_service(self) -> HAMasterView | None: ...
    @property
    def ha_client(self) -> HAClientView | None: ...


#: RemotingCommand.createResponseCommand(null)'s remark, kept by the handlers that only set SUCCESS
#: (transferPopToFsStore, checkRocksdbCqWriteProgress): what 5.3.3 answers with.
UNSET_REMARK = "not set any response code"


def _ok(request: RemotingCommand, body: bytes | None = None, remark: str | None = None) -> RemotingCommand:
    return make_response(request, ResponseCode.SUCCESS, remark, body=body)


class Admin5Processor:
    def __init__(self, broker: Admin5Broker) -> None:
        self.broker = broker

    def handlers(self) -> dict[int, RequestHandler]:
        return guard_names({
            RequestCode.GET_BROKER_HA_STATUS: self.get_broker_ha_status,
            RequestCode.GET_COLD_DATA_FLOW_CTR_INFO: self.get_cold_data_flow_ctr_info,
            RequestCode.SET_COMMITLOG_READ_MODE: self.set_commit_log_read_ahead_mode,
            RequestCode.POP_ROLLBACK: self.export_pop_record,
            RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS: self.check_rocksdb_cq_write_progress,
            RequestCode.EXPORT_ROCKSDB_CONFIG_TO_JSON: self.export_rocksdb_config_to_json,
        })

    # -- HA ----------------------------------------------------------------------------------------
    def ha_runtime_info(self) -> HARuntimeInfo | None:
        """DefaultHAService.getRuntimeInfo(commitLog.getMaxOffset()); None without HA service."""
        b = self.broker
        master_put_where = b.store.get_max_phy_offset()
        info = HARuntimeInfo()
        if b.message_store_config.brokerRole == "SLAVE":
            client = b.ha_client
            if client is None:
                return None
            info.haClientRuntimeInfo = HAClientRuntimeInfo(
                lastReadTimestamp=client.last_read_ms, lastWriteTimestamp=client.last_write_ms,
                masterAddr=client.master_address, masterFlushOffset=self._master_flushed_offset(),
                maxOffset=master_put_where, transferredByteInSecond=client.flow.per_second())
            return info
        service = b.ha_service
        if service is None:
            return None
        info.master = True
        info.masterCommitLogMaxOffset = master_put_where
        gap = int(getattr(b.message_store_config, "haMaxGapNotInSync", HA_MAX_GAP_NOT_IN_SYNC))
        for conn in sorted(service.connections, key=lambda c: c.connected_at):  # connectionList order
            ack = conn.slave_ack_offset
            in_sync = master_put_where - ack < gap
            info.inSyncSlaveNums += in_sync
            info.haConnectionInfo.append(HAConnectionRuntimeInfo(
                addr=conn.remote, diff=master_put_where - ack, inSync=in_sync, slaveAckOffset=ack,
                transferFromWhere=conn.next_transfer_from, transferredByteInSecond=conn.flow.per_second()))
        return info

    def _master_flushed_offset(self) -> int:
        """DefaultMessageStore.getMasterFlushedOffset: the checkpoint's masterFlushedOffset (5.x
        keeps it there; a 4.9-format checkpoint leaves those bytes 0); -1, 5.x's value before the
        checkpoint is read, when the file cannot be read."""
        path = self.broker.message_store_config.get_store_checkpoint()
        try:
            with open(path, "rb") as f:
                f.seek(_MASTER_FLUSHED_OFFSET_AT)
                raw = f.read(8)
        except OSError as exc:
            log.warning("haStatus: cannot read the checkpoint %s: %s", path, exc)
            return -1
        return struct.unpack(">q", raw)[0] if len(raw) == 8 else -1

    async def get_broker_ha_status(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        info = self.ha_runtime_info()
        if info is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR,
                                 "Can not get HARuntimeInfo, may be duplicationEnable is true")
        return _ok(request, info.encode())

    # -- cold data and read-ahead --------------------------------------------------------------------
    async def get_cold_data_flow_ctr_info(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        log.info("getColdDataFlowCtrInfo called by %s", ctx.channel.remote_addr)
        bc = self.broker.broker_config
        return _ok(request, encode_cold_data_flow_ctr_info(
            {}, {}, int(getattr(bc, "cgColdReadThreshold", CG_COLD_READ_THRESHOLD)),
            int(getattr(bc, "globalColdReadThreshold", GLOBAL_COLD_READ_THRESHOLD)), 0))

    async def set_commit_log_read_ahead_mode(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        log.info("setCommitLogReadaheadMode called by %s", ctx.channel.remote_addr)
        ext = request.ext_fields
        if ext is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode param error")
        text = ext.get(READ_AHEAD_MODE)
        try:
            mode = parse_java_int(text if text is not None else "")
        except ValueError:  # Integer.parseInt's NumberFormatException, caught by the handler
            # WARNING, not Apache's ERROR: a malformed request is the client's fault (ERROR is for
            # the broker's own faults)
            log.warning("set commitlog readahead mode failed: READ_AHEAD_MODE=%.40r", text)
            return make_response(request, ResponseCode.SYSTEM_ERROR, "set commitlog readahead mode failed")
        if mode not in (MADV_NORMAL, MADV_RANDOM):
            return make_response(request, ResponseCode.INVALID_PARAMETER,
                                 "set commitlog readahead mode param value error")
        advised = self._advise_commit_log(mode)
        log.info("scanFileAndSetReadMode mode: %d (%d files)", mode, advised)
        return _ok(request, remark=f"set commitlog readahead mode success, mode: {mode}")

    def _advise_commit_log(self, mode: int) -> int:
        """CommitLog.scanFileAndSetReadMode: madvise every mapped commit-log file; a file that
        is gone meanwhile or refuses is logged and skipped, as 5.x does."""
        advice = mmap.MADV_NORMAL if mode == MADV_NORMAL else mmap.MADV_RANDOM
        done = 0
        for mf in list(self.broker.store.commit_log.mapped_file_queue.mapped_files):
            mm = getattr(mf, "mm", None)
            if not isinstance(mm, mmap.mmap):
                continue
            try:
                mm.madvise(advice)
                done += 1
            except (OSError, ValueError) as exc:
                log.warning("setFileReadMode %s mode %d: %s", getattr(mf, "file_name", "?"), mode, exc)
        return done

    # -- POP and RocksDB ------------------------------------------------------------------------------
    async def export_pop_record(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        """transferPopToFsStore: no RocksDB POP store, so every record is in the file store already."""
        log.info("exportPopRecord called by %s: POP records are kept in the file store only",
                 ctx.channel.remote_addr)
        return _ok(request, remark=UNSET_REMARK)

    async def check_rocksdb_cq_write_progress(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import CheckRocksdbCqWriteProgressRequestHeader

        h = CheckRocksdbCqWriteProgressRequestHeader.from_ext(request.ext_fields)
        if h.topic is None:  # @CFNotNull (declared optional so that "" passes the name guard)
            raise HeaderFieldError("topic", "is missing", "CheckRocksdbCqWriteProgressRequestHeader")
        # what 5.x's background check logs for a broker without the RocksDB double write
        done = CheckRocksdbCqWriteResult(
            checkResult="rocksdbCQWriteEnable is false, checkRocksdbCqWriteProgressCommand is invalid",
            checkStatus=CHECK_NOT_OK)
        log.info("checkRocksdbCqWriteProgress result: %s", done.encode().decode())
        return _ok(request, CheckRocksdbCqWriteResult(checkStatus=CHECK_IN_PROGRESS).encode(), UNSET_REMARK)

    async def export_rocksdb_config_to_json(self, ctx: Context, request: RemotingCommand) -> RemotingCommand:
        from rmqd.wire.headers import ExportRocksDBConfigToJsonRequestHeader

        h = ExportRocksDBConfigToJsonRequestHeader.from_ext(request.ext_fields)
        for name in (h.configType or "").split(";"):  # ConfigType.fromString: StringUtils.split, trim
            if name and not any(t.lower() == name.strip(_JAVA_TRIM).lower() for t in ROCKSDB_CONFIG_TYPES):
                remark = f"java.lang.IllegalArgumentException: Unknown config type: {name}, {_AT_CONFIG_TYPE}"
                return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
        return _ok(request, remark="export done.")


__all__ = ["Admin5Processor", "HA_MAX_GAP_NOT_IN_SYNC", "MADV_NORMAL", "MADV_RANDOM", "READ_AHEAD_MODE",
           "ROCKSDB_CONFIG_TYPES"]
