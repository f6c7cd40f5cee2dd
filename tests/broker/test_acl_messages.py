"""Issue 22, D5 and D7 through a live aclEnable=true broker: an account with DENY on a topic
gets nothing of it by a batch send (320), by message id (33), by sending it back to its own
group (36), by committing its half message (37), or through the offset and lock codes; and a
record forged inside a message body does not stand for a stored one (broker/acl_messages.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import trio

from broker_harness import BROKER_NAME, broker_running
from rmqd.broker.acl_messages import StoredMessageLookup
from rmqd.processors.acl import StoredMessage
from rmqd.wire.acl import sign_fields
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand, make_request
from rmqd.wire.message import (MessageSysFlag, decode_messages, encode_batch, encode_properties, encode_record,
                               parse_offset_msg_id)

AK, SK = "RocketMQ", "12345678"
ADMIN_AK, ADMIN_SK = "rocketmq2", "12345678"
EXC = "org.apache.rocketmq.acl.common.AclException"
DENIED_A = (f"{EXC}: No default permission for topic:topicA, "
            "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:611)")
PLAIN_ACL = """\
accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - topicA=DENY
  - topicB=PUB|SUB
  groupPerms:
  - groupB=PUB|SUB
- accessKey: rocketmq2
  secretKey: 12345678
  whiteRemoteAddress: 192.168.1.*
  admin: true
"""


def _signed(code: int, ext: dict[str, str], body: bytes | None = None, ak: str = AK, sk: str = SK) -> RemotingCommand:
    return make_request(code, sign_fields(ext, body, ak, sk), body)


def _send_ext(topic: str, sys_flag: int = 0, props: dict[str, str] | None = None) -> dict[str, str]:
    return {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": str(sys_flag),
            "g": str(int(time.time() * 1000)), "h": "0", "i": encode_properties(props or {"WAIT": "true"}),
            "j": "0", "k": "false", "m": "false", "n": BROKER_NAME}


def test_denied_topic_stays_out_of_reach(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)

    async def scenario(h: Any) -> None:
        async def call(cmd: RemotingCommand) -> RemotingCommand:
            return await h.client.invoke(h.broker_addr, cmd, 10.0)

        store = h.role.store
        for topic in ("topicA", "topicB"):
            r = await call(_signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}, None, ADMIN_AK, ADMIN_SK))
            assert r.code == ResponseCode.SUCCESS, r.remark
        secret = await call(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicA"), b"secret", ADMIN_AK, ADMIN_SK))
        assert secret.code == ResponseCode.SUCCESS, secret.remark
        secret_offset = parse_offset_msg_id(secret.ext_fields["msgId"])[2]
        own = await call(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), b"mine"))
        assert own.code == ResponseCode.SUCCESS, own.remark
        own_offset = parse_offset_msg_id(own.ext_fields["msgId"])[2]
        h.wait_dispatched()

        # D5: a batch is checked as a single send is
        batch = encode_batch([(0, b"smuggled", {"WAIT": "true"})])
        r = await call(_signed(RequestCode.SEND_BATCH_MESSAGE, dict(_send_ext("topicA"), m="true"), batch))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, DENIED_A)
        r = await call(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicA"), b"smuggled"))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, DENIED_A)
        r = await call(_signed(RequestCode.SEND_BATCH_MESSAGE, dict(_send_ext("topicB"), m="true"), batch))
        assert r.code == ResponseCode.SUCCESS, r.remark
        h.wait_dispatched()
        assert store.get_max_offset_in_queue("topicA", 0) == 1

        # D7: by message id, and sent back into the caller's own group's retry topic
        r = await call(_signed(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(secret_offset)}))
        assert (r.code, r.remark, r.body) == (ResponseCode.SYSTEM_ERROR, DENIED_A, None)
        r = await call(_signed(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(own_offset)}))
        assert r.code == ResponseCode.SUCCESS and decode_messages(r.body)[0].body == b"mine"
        back = {"offset": str(secret_offset), "group": "groupB", "delayLevel": "-1", "originMsgId":
                secret.ext_fields["msgId"], "originTopic": "topicB", "unitMode": "false", "maxReconsumeTimes": "16"}
        r = await call(_signed(RequestCode.CONSUMER_SEND_MSG_BACK, back))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, DENIED_A)
        r = await call(_signed(RequestCode.CONSUMER_SEND_MSG_BACK, dict(back, offset=str(own_offset))))
        assert r.code == ResponseCode.SUCCESS, r.remark
        h.wait_dispatched()
        assert store.get_max_offset_in_queue("%DLQ%groupB", 0) == 1   # only its own message went there

        # END_TRANSACTION of another account's half message for topicA
        half = await call(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext(
            "topicA", MessageSysFlag.TRANSACTION_PREPARED_TYPE, {"WAIT": "true", "TRAN_MSG": "true", "PGROUP": "pg"}),
            b"half", ADMIN_AK, ADMIN_SK))
        assert half.code == ResponseCode.SUCCESS, half.remark
        h.wait_dispatched()
        half_offset = parse_offset_msg_id(half.ext_fields["msgId"])[2]
        end = {"producerGroup": "pg", "tranStateTableOffset": half.ext_fields["queueOffset"],
               "commitLogOffset": str(half_offset), "commitOrRollback": "8", "fromTransactionCheck": "false",
               "msgId": half.ext_fields["msgId"]}
        r = await call(_signed(RequestCode.END_TRANSACTION, end))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, DENIED_A)
        assert store.get_max_offset_in_queue("topicA", 0) == 1

        # the offset and lock codes of the topic
        for code, ext, body in [
                (RequestCode.GET_MAX_OFFSET, {"topic": "topicA", "queueId": "0"}, None),
                (RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "topicA", "queueId": "0", "timestamp": "0"}, None),
                (RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "groupB", "topic": "topicA", "queueId": "0"},
                 None),
                (RequestCode.LOCK_BATCH_MQ, {}, json.dumps({"consumerGroup": "groupB", "clientId": "c1", "mqSet": [
                    {"topic": "topicA", "brokerName": BROKER_NAME, "queueId": 0}]}).encode())]:
            r = await call(_signed(code, ext, body))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, DENIED_A), code
        r = await call(_signed(RequestCode.GET_MAX_OFFSET, {"topic": "topicB", "queueId": "0"}))
        assert r.code == ResponseCode.SUCCESS, r.remark

        # a record forged inside a body: it claims topicB and a size reaching over what follows
        forged = encode_record(queue_id=0, flag=0, queue_offset=0, physical_offset=0, sys_flag=0, born_timestamp=0,
                               born_ip=b"\x7f\x00\x00\x01", born_port=1, store_timestamp=0,
                               store_ip=b"\x7f\x00\x00\x01", store_port=1, reconsume_times=0,
                               prepared_transaction_offset=0, body=b"x", topic="topicB", properties={})
        carrier = await call(_signed(RequestCode.SEND_MESSAGE_V2, _send_ext("topicB"), forged))
        assert carrier.code == ResponseCode.SUCCESS, carrier.remark
        h.wait_dispatched()
        carrier_offset = parse_offset_msg_id(carrier.ext_fields["msgId"])[2]
        stored = bytes(store.select_one_message_by_offset(carrier_offset))
        inner = carrier_offset + stored.index(forged)
        lookup = StoredMessageLookup(store)
        assert lookup(inner) is None and lookup(carrier_offset) == StoredMessage("topicB")
        r = await call(_signed(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(inner)}))
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                      f"{EXC}: No message to check permissions on at commit log offset {inner}")

        # a record appended but not dispatched yet is found by stepping over whole records
        class Undispatched(StoredMessageLookup):
            def _in_consume_queue(self, *args: Any) -> bool:
                return False
        undispatched = Undispatched(store)
        reput = store.reput_service
        saved = reput.reput_from_offset
        reput.reput_from_offset = secret_offset
        try:
            assert undispatched(carrier_offset) == StoredMessage("topicB")
            assert undispatched(half_offset) == StoredMessage("RMQ_SYS_TRANS_HALF_TOPIC", real_topic="topicA")
            assert undispatched(inner) is None and undispatched(carrier_offset + 4) is None
        finally:
            reput.reput_from_offset = saved

    async def main() -> None:
        with trio.fail_after(60):
            async with broker_running(tmp_path / "store", with_namesrv=False, aclEnable="true",
                                      rocketmqHome=str(home), autoCreateTopicEnable="false") as h:
                await scenario(h)
    trio.run(main)
