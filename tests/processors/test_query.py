"""QUERY_MESSAGE / VIEW_MESSAGE_BY_ID / CONSUME_MESSAGE_DIRECTLY over the fixture store's index."""

from __future__ import annotations

import gzip
import json
import shutil
from types import SimpleNamespace

import pytest
import trio

from fixtures import CLEAN, require
from rmqd.processors.query import QueryMessageProcessor
from rmqd.store.config import MessageStoreConfig
from rmqd.store.message_store import DefaultMessageStore
from rmqd.wire.codes import RequestCode, ResponseCode
from rmqd.wire.frame import RemotingCommand
from rmqd.wire.headers import ConsumeMessageDirectlyResultRequestHeader, QueryMessageRequestHeader, ViewMessageRequestHeader
from rmqd.wire.message import decode_messages, parse_offset_msg_id

pytestmark = pytest.mark.timeout(60)
FIXTURE = CLEAN
END = 4_000_000_000_000


class Consumer:
    def __init__(self, reply: RemotingCommand | Exception) -> None:
        self.reply = reply
        self.got: list[RemotingCommand] = []

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        self.got.append(cmd)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("q") / "store"
    shutil.copytree(require(FIXTURE / "store"), root)
    s = DefaultMessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1024 * 1024,
                                               mappedFileSizeConsumeQueue=6000, maxHashSlotNum=1000,
                                               maxIndexNum=4000))
    s.load()
    s.start()
    yield s
    s.shutdown()


def make(store, consumer=None) -> QueryMessageProcessor:
    consumers = {("cg", "cid"): SimpleNamespace(channel=consumer, version=409),
                 ("cg", "old"): SimpleNamespace(channel=consumer, version=10)}
    broker = SimpleNamespace(store=store, message_store_config=store.config,
                             broker_config=SimpleNamespace(brokerName="broker-fix"),
                             consumer_manager=SimpleNamespace(find_channel=lambda g, c: consumers.get((g, c))))
    return QueryMessageProcessor(broker)


def call(handler, request: RemotingCommand) -> RemotingCommand:
    async def go() -> RemotingCommand:
        return await handler(None, request)
    return trio.run(go)


def query(proc, topic: str, key: str, max_num: int = 32, unique: bool = False) -> RemotingCommand:
    ext = QueryMessageRequestHeader(topic=topic, key=key, maxNum=max_num, beginTimestamp=0,
                                    endTimestamp=END).to_ext()
    if unique:
        ext["_UNIQUE_KEY_QUERY"] = "true"
    return call(proc.query_message, RemotingCommand(code=RequestCode.QUERY_MESSAGE, opaque=7, ext_fields=ext))


def test_query_by_key(store) -> None:
    proc = make(store)
    resp = query(proc, "FixTopicA", "key-single-1")
    assert resp.code == ResponseCode.SUCCESS and resp.opaque == 7
    msgs = decode_messages(resp.body)
    assert [m.properties["KEYS"] for m in msgs] == ["key-single-1"]
    assert int(resp.ext_fields["indexLastUpdateTimestamp"]) > 0
    assert int(resp.ext_fields["indexLastUpdatePhyoffset"]) > 0
    bulk = decode_messages(query(proc, "FixBulkTopic", "bulk-7").body)
    assert [m.properties["KEYS"] for m in bulk] == ["bulk-7"]


def test_query_by_unique_key_and_not_found(store) -> None:
    proc = make(store)
    with open(require(FIXTURE / "manifest.jsonl")) as f:
        first = json.loads(f.readline())  # the first message sent, at physical offset 0
    resp = query(proc, "FixTopicA", first["msgId"], max_num=1, unique=True)
    msgs = decode_messages(resp.body)
    assert len(msgs) == 1 and msgs[0].physical_offset == 0
    miss = query(proc, "FixTopicA", "no-such-key")
    assert miss.code == ResponseCode.QUERY_NOT_FOUND
    assert miss.remark == "can not find message, maybe time range not correct"
    assert "indexLastUpdateTimestamp" in miss.ext_fields and miss.body is None


def test_view_message_by_id(store) -> None:
    proc = make(store)
    with gzip.open(require(FIXTURE / "dump" / "commitlog-dump.jsonl.gz"), "rt") as f:
        committed = next(r for r in map(json.loads, f) if r["record"] == "MESSAGE" and r["topic"] == "FixTxTopic")
    _ip, _port, offset = parse_offset_msg_id(committed["offsetMsgId"])
    ext = ViewMessageRequestHeader(offset=offset).to_ext()
    resp = call(proc.view_message_by_id, RemotingCommand(code=RequestCode.VIEW_MESSAGE_BY_ID, ext_fields=ext))
    assert resp.code == ResponseCode.SUCCESS
    (m,) = decode_messages(resp.body)
    assert m.topic == "FixTxTopic" and m.physical_offset == offset
    bad = call(proc.view_message_by_id, RemotingCommand(code=33, ext_fields={"offset": str(10 ** 12)}))
    assert bad.code == ResponseCode.SYSTEM_ERROR and bad.remark == f"can not find message by the offset, {10 ** 12}"


def test_consume_message_directly_forwards_to_the_consumer(store) -> None:
    reply = RemotingCommand(code=0, opaque=99, remark=None, body=b'{"consumeResult":"CR_SUCCESS"}', flag=1)
    consumer = Consumer(reply)
    proc = make(store, consumer)
    ext = ConsumeMessageDirectlyResultRequestHeader(consumerGroup="cg", clientId="cid",
                                                    msgId="7F00000100002AA90000000000000000").to_ext()
    resp = call(proc.consume_message_directly, RemotingCommand(code=309, opaque=4, ext_fields=ext))
    assert resp.code == 0 and resp.opaque == 4 and resp.body == reply.body
    sent = consumer.got[0]
    assert sent.code == RequestCode.CONSUME_MESSAGE_DIRECTLY and sent.ext_fields["brokerName"] == "broker-fix"
    (m,) = decode_messages(sent.body)
    assert m.physical_offset == 0 and m.topic == "FixTopicA"
    ext_off = dict(ext, clientId="gone")
    assert "not online" in call(proc.consume_message_directly, RemotingCommand(code=309, ext_fields=ext_off)).remark
    ext_old = dict(ext, clientId="old")
    assert "too low" in call(proc.consume_message_directly, RemotingCommand(code=309, ext_fields=ext_old)).remark

    class RemotingTimeoutError(Exception):
        pass

    slow = make(store, Consumer(RemotingTimeoutError("wait response timeout 10000ms")))
    resp = call(slow.consume_message_directly, RemotingCommand(code=309, ext_fields=ext))
    assert resp.code == ResponseCode.CONSUME_MSG_TIMEOUT
    broken = make(store, Consumer(OSError("reset")))
    assert call(broken.consume_message_directly, RemotingCommand(code=309, ext_fields=ext)).code == \
        ResponseCode.SYSTEM_ERROR
