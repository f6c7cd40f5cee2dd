"""Issue-5 semantics through a running BrokerRole on loopback, driven by raw Remoting requests shaped
like the Java 4.9.8 client's (the C++ wheel and ali-ons cannot do transactions, queries or
send-back the same way). The processors are wired here exactly as the integration should do it
(see ``wire_semantics``): transactions (half -> oneway END_TRANSACTION -> visible once; unresolved
half -> CHECK_TRANSACTION_STATE to the producer's connection -> commit from the check), retry via
CONSUMER_SEND_MSG_BACK + the schedule service, delayed delivery, queue locks and key queries."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import trio

from broker_harness import broker_running, decode_pull_body
from rmqd.processors.lock import LockProcessor
from rmqd.processors.query import QueryMessageProcessor
from rmqd.processors.retry import ConsumerSendMsgBackProcessor
from rmqd.processors.transaction import (
    EndTransactionProcessor, TransactionalMessageCheckService, TransactionalMessageService,
)
from rmqd.store.delay_offset import DelayOffsetManager
from rmqd.store.schedule import ScheduleMessageService, TimerProgress
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand
from rmqd.wire.message import decode_messages, parse_offset_msg_id


def wire_semantics(role: Any) -> dict[str, Any]:
    """What broker/broker.py should do (in __init__ / run); returns the services for the test."""
    store_cfg = role.message_store_config
    root = store_cfg.storePathRootDir
    tx = TransactionalMessageService(role.store, role.consumer_offset_manager, store_host=role.store_host,
                                     store_port=role.store_port,
                                     create_topic=role.create_topic_in_send_message_back_method,
                                     file_reserved_time_hours=store_cfg.fileReservedTime)
    tx.load()
    schedule = ScheduleMessageService(role.store, DelayOffsetManager(root), store_cfg.messageDelayLevel,
                                      timer_progress=TimerProgress(root))
    schedule.load()
    for processor in (EndTransactionProcessor(role, tx), ConsumerSendMsgBackProcessor(role), LockProcessor(),
                      QueryMessageProcessor(role)):
        role.server.register_many(processor.handlers())
    return {"tx": tx, "checker": TransactionalMessageCheckService(role, tx), "schedule": schedule}


def test_transactions_retry_delay_lock_query_over_the_wire(tmp_path: Path) -> None:
    checks: list[RemotingCommand] = []

    async def main() -> None:
        with trio.fail_after(60):
            async with broker_running(tmp_path / "store", with_namesrv=False, transactionTimeOut=0) as h:
                services = wire_semantics(h.role)

                async def on_check(ctx: Any, request: RemotingCommand) -> None:
                    checks.append(request)

                h.client.register(RequestCode.CHECK_TRANSACTION_STATE, on_check)
                assert (await h.heartbeat("127.0.0.1@tx", "", "", producer_groups=("pg",))).code == 0

                # -- a committed transaction is visible exactly once ------------------------------
                r = await h.send_v2("TxT", b"t1", queue_id=1, extra={"TRAN_MSG": "true", "PGROUP": "pg",
                                                                       "UNIQ_KEY": "TX1"}, sys_flag=4)
                assert r.code == ResponseCode.SUCCESS
                _ip, _port, phy = parse_offset_msg_id(r.ext_fields["msgId"])
                end = {"producerGroup": "pg", "tranStateTableOffset": r.ext_fields["queueOffset"],
                       "commitLogOffset": str(phy), "commitOrRollback": "8", "fromTransactionCheck": "false",
                       "msgId": "TX1", "transactionId": "TX1"}
                await h.invoke(RequestCode.END_TRANSACTION, end, oneway=True)  # Java sends it oneway
                await h.invoke(RequestCode.END_TRANSACTION, end, oneway=True)  # ... and a duplicate
                with trio.fail_after(5):
                    while True:
                        h.wait_dispatched()
                        if h.role.store.get_max_offset_in_queue("TxT", 1) >= 1:
                            break
                        await trio.sleep(0.02)
                await trio.sleep(0.2)
                h.wait_dispatched()
                assert h.role.store.get_max_offset_in_queue("TxT", 1) == 1
                assert (await h.heartbeat("127.0.0.1@c", "cg", "TxT")).code == 0
                pulled = decode_pull_body(await h.pull("TxT", "cg", 1, 0, sys_flag=2, sub_version=1))
                assert [m.body for m in pulled] == [b"t1"] and pulled[0].sys_flag & 0xC == 0x8

                # -- an unresolved half is checked back on the producer's own connection ----------
                r = await h.send_v2("TxT", b"t2", queue_id=2, extra={"TRAN_MSG": "true", "PGROUP": "pg",
                                                                       "UNIQ_KEY": "TX2"}, sys_flag=4)
                h.wait_dispatched()
                await trio.sleep(0.01)
                assert await services["checker"].run_once() == 1
                with trio.fail_after(5):
                    while not checks:
                        await trio.sleep(0.02)
                check = checks[0]
                assert check.ext_fields["transactionId"] == "TX2" and check.is_oneway
                (msg,) = decode_messages(check.body)
                assert msg.topic == "TxT" and msg.queue_id == 2 and msg.body == b"t2"
                answer = {"producerGroup": "pg", "tranStateTableOffset": check.ext_fields["tranStateTableOffset"],
                          "commitLogOffset": check.ext_fields["commitLogOffset"], "commitOrRollback": "8",
                          "fromTransactionCheck": "true", "msgId": "TX2", "transactionId": "TX2"}
                resp = await h.invoke(RequestCode.END_TRANSACTION, answer)  # Go waits for an answer
                assert resp.code == ResponseCode.SUCCESS
                h.wait_dispatched()
                assert h.role.store.get_max_offset_in_queue("TxT", 2) == 1

                # -- retry: send back, schedule delivers to %RETRY%cg with reconsumeTimes 1 -------
                r = await h.send_v2("RT", b"r1", queue_id=0, keys="rk1", extra={"UNIQ_KEY": "R1"})
                h.wait_dispatched()
                assert (await h.heartbeat("127.0.0.1@c", "cg", "RT")).code == 0
                (m,) = decode_pull_body(await h.pull("RT", "cg", 0, 0, sys_flag=2, sub_version=1))
                back = await h.invoke(RequestCode.CONSUMER_SEND_MSG_BACK, {
                    "offset": str(m.physical_offset), "group": "cg", "delayLevel": "0", "originMsgId":
                    m.properties["UNIQ_KEY"], "originTopic": "RT", "unitMode": "false", "maxReconsumeTimes": "16"})
                assert back.code == ResponseCode.SUCCESS
                h.wait_dispatched()
                await trio.to_thread.run_sync(services["schedule"].tick, int(time.time() * 1000) + 11_000)
                h.wait_dispatched()
                pulled_retry = await h.pull("%RETRY%cg", "cg", 0, 0, sys_flag=6, sub_version=1, subscription="*")
                retry = decode_pull_body(pulled_retry)
                assert len(retry) == 1 and retry[0].reconsume_times == 1
                assert retry[0].properties["RETRY_TOPIC"] == "RT"

                # -- delayed message (DELAY=2) ------------------------------------------------------
                await h.send_v2("DT", b"d1", queue_id=3, extra={"DELAY": "2"})
                h.wait_dispatched()
                await trio.to_thread.run_sync(services["schedule"].tick, int(time.time() * 1000) + 6_000)
                h.wait_dispatched()
                assert h.role.store.get_max_offset_in_queue("DT", 3) == 1

                # -- orderly locks and a key query -------------------------------------------------
                body = json.dumps({"consumerGroup": "og", "clientId": "c1", "onlyThisBroker": False,
                                   "mqSet": [{"topic": "RT", "brokerName": "x", "queueId": 0}]}).encode()
                lock = await h.invoke(RequestCode.LOCK_BATCH_MQ, None, body)
                assert json.loads(lock.body)["lockOKMQSet"][0]["queueId"] == 0
                q = await h.invoke(RequestCode.QUERY_MESSAGE, {"topic": "RT", "key": "rk1", "maxNum": "32",
                                                                "beginTimestamp": "0",
                                                                "endTimestamp": str(int(time.time() * 1000) + 1000)})
                assert q.code == ResponseCode.SUCCESS
                assert [x.body for x in decode_messages(q.body)] == [b"r1"]
                services["schedule"].shutdown()

    trio.run(main)
