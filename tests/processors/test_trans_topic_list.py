"""Which transaction topics a broker lists (GET_ALL_TOPIC_CONFIG, and the name server's topic list
after the registration): as Apache RocketMQ 4.9.8, RMQ_SYS_TRANS_HALF_TOPIC from the first check
round on (TransactionalMessageBridge.fetchMessageQueues creates its config: 1 queue, perm 6) and
never RMQ_SYS_TRANS_OP_HALF_TOPIC (writeOp puts the op message without a topic config). The real
4.9 store in ../shared/fixtures/rocketmq-4.9-store lists the half topic and not the op topic."""

from __future__ import annotations

import json
from pathlib import Path

from broker_harness import run_with_broker
from rmqd.wire.bodies import TopicList
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.message import parse_offset_msg_id
from support import wait_until

HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def test_the_half_topic_is_listed_and_the_op_topic_is_not(tmp_path: Path) -> None:
    async def fn(h) -> None:
        tcm = h.role.topic_config_manager
        r = await h.send_v2("TlT", b"half", queue_id=0, extra={"TRAN_MSG": "true", "PGROUP": "pg"}, sys_flag=4)
        assert r.code == ResponseCode.SUCCESS
        offset = parse_offset_msg_id(r.ext_fields["msgId"])[2]
        end = {"producerGroup": "pg", "tranStateTableOffset": r.ext_fields["queueOffset"],
               "commitLogOffset": str(offset), "commitOrRollback": "8", "fromTransactionCheck": "false",
               "msgId": r.ext_fields["msgId"]}
        assert (await h.invoke(RequestCode.END_TRANSACTION, end)).code == ResponseCode.SUCCESS
        h.wait_dispatched()
        assert h.role.store.get_max_offset_in_queue(OP, 0) == 1  # the op message is written ...
        assert tcm.select_topic_config(OP) is None  # ... with no topic config
        # the first check round (every 100 ms here) creates the half topic's config
        await wait_until(lambda: tcm.select_topic_config(HALF) is not None, 10, "the half topic's config")
        tc = tcm.select_topic_config(HALF)
        assert (tc.readQueueNums, tc.writeQueueNums, tc.perm, tc.topicSysFlag) == (1, 1, 6, 0)
        table = json.loads(bytes((await h.invoke(RequestCode.GET_ALL_TOPIC_CONFIG)).body))["topicConfigTable"]
        assert HALF in table and OP not in table

        async def listed() -> bool:
            r = await h.invoke(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, addr=h.namesrv_addr)
            return HALF in TopicList.decode(r.body).topicList
        await wait_until(listed, 10, "the name server listing the half topic")
        r = await h.invoke(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, addr=h.namesrv_addr)
        assert OP not in TopicList.decode(r.body).topicList

    run_with_broker(tmp_path, fn, transactionCheckInterval=100)
