#!/usr/bin/env python3
"""Live fuzzer: mutated Remoting frames against a running `rmqd serve`, with health checks.

Starts `rmqd serve` on free 127.0.0.1 ports with a temporary store (or attaches to one with
--namesrv/--broker), builds valid seed frames (every request of the real 4.9.8 Java capture
plus synthesized requests of every code area, JSON and ROCKETMQ headers), mutates them and
sends them over several pipelined connections. Every --health-every frames a NEW connection
checks that the broker still works end to end: (re)create the health topic, send a message,
heartbeat, pull it back within a bound (a sent message that never becomes pullable is a
*wedge*: dispatch stopped), and ask the name server for the cluster. The server's log is
scanned for tracebacks; the frames sent since the last clean check are replayed one at a
time to name the frame that causes each distinct one (printed in hex).

    scripts/fuzz_live.py --frames 300000 --seed 1
    scripts/fuzz_live.py --frames 5000 --namesrv 127.0.0.1:9876 --broker 127.0.0.1:10911 [--log rmqd.log]

A started server is then run out of file descriptors (every send acknowledged meanwhile must
be pullable once they are back), SIGKILLed and started again on the fuzzed store (it must get
ready and pass a health check), stopped, and the store checked with `rmqd store verify`.

Exit status 0 only with 0 tracebacks, 0 failed health checks, 0 wedges, the server alive, no
acknowledged message lost to the descriptor exhaustion, the restart after SIGKILL healthy and
the store verified.

    scripts/fuzz_live.py --acl --frames 200000 --seed 1 [--restart-every 20000]

--acl starts the broker with aclEnable=true and a plain_acl.yml of three accounts (admin,
ordinary, read-only) plus a second acl file under conf/acl/, adds seeds of the ACL
administration codes 50-54, and puts credentials on every frame: signed by one of the three
accounts (after the mutation, so a mutated value reaches the handlers from an authorized
account), badly signed (wrong secret, unknown key, a mangled Signature), tampered (signed,
then a value, the body or the code changed), or none. The fuzzer's own accounts are never
the target of 50/51; after each health check it resets the global white lists and deletes
accounts beyond 40 that the frames created. Every --restart-every frames, and at the end,
the broker is stopped with SIGTERM, every acl file must parse as YAML and load as the broker
loads it, and the broker must start again on them (a failed restart fails the run).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import trio
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(REPO / "tests"))

from support import free_broker_port, free_port  # noqa: E402  (tests/support.py: the suite's port helpers)
from fixtures import CAPTURE as FIXTURE_CAPTURE  # noqa: E402  (tests/fixtures.py: the generated fixtures)
from rmqd.wire.acl import sign_fields  # noqa: E402
from rmqd.wire.codes import RequestCode, ResponseCode, SerializeType  # noqa: E402
from rmqd.wire.frame import FrameDecoder, RemotingCommand, decode_frame, encode_frame, make_request  # noqa: E402
from rmqd.wire.message import crc32_masked, decode_messages, encode_properties  # noqa: E402

# the Remoting capture made by Apache RocketMQ itself (scripts/fixtures; tests/fixtures.py finds it)
CAPTURE = FIXTURE_CAPTURE / "remoting-frames.jsonl"
HEALTH_TOPIC = "FuzzHealthZ9q"
HEALTH_GROUP = "FuzzHealthGroupZ9q"
PRODUCER_GROUP = "FuzzProducerZ9q"
TRACEBACK_RE = re.compile(r"^Traceback \(most recent call last\):$", re.M)
# log lines that mean a request or the process failed even when no traceback follows them
PROBLEM_LINE_RE = re.compile(r"process request exception|internal error|rmqd failed", re.I)

# values a client could put anywhere: path tricks, NULs, sizes, numbers Java cannot parse
NASTY: list[Any] = [
    "", " ", "\x00", "a\x00b", "%DLQ%\x00", "%RETRY%\x00", "../../../../tmp/x", "%RETRY%../../x", "..", "/",
    "a" * 128, "a" * 256, "a" * 70_000, "-1", "-2147483649", "2147483648", "9223372036854775808",
    "-9223372036854775809", "1e309", "NaN", "Infinity", "0x10", "1.5", "+1", "null", "true", "[]", "{}",
    "\ud800", "é", "😀" * 5, "%", "|", "TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "%RETRY%",
    "%DLQ%", "DefaultCluster", "0", "1", "16", "65536", "99999999999999999999999",
    -1, 0, 1, 2**31, 2**63, -(2**63) - 1, 1e309, 1.5, True, None, [], {}, [1, "a"], {"a": 1},
]
# message property names the broker reads back from stored records, and values worth trying
PROP_KEYS = ["DELAY", "__STARTDELIVERTIME", "TRAN_MSG", "PGROUP", "KEYS", "UNIQ_KEY", "TAGS", "REAL_TOPIC", "REAL_QID",
             "RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "TRANSACTION_CHECK_TIMES",
             "CHECK_IMMUNITY_TIME_IN_SECONDS", "MIN_OFFSET", "MAX_OFFSET", "WAIT", "INSTANCE_ID", "CLUSTER",
             "MSG_REGION", "TRACE_ON", "BUYER_ID", "CORRECTION_FLAG", "SHARDING_KEY", "__transactionId__"]
PROP_VALUES: dict[str, list[str]] = {
    "DELAY": ["1", "2", "18", "19", "0", "-1", "99", "2147483648"],
    "__STARTDELIVERTIME": ["0", "-1", "1", "99999999999999999999", str(2**63)],
    "TRAN_MSG": ["true", "TRUE", "1"], "PGROUP": ["PG", "FuzzProducerZ9q"],
    "REAL_TOPIC": ["FuzzT", "%RETRY%FuzzG", "SCHEDULE_TOPIC_XXXX"], "REAL_QID": ["0", "3", "-1", "999", "2147483648"],
    "RECONSUME_TIME": ["16", "17", "-1", "2147483648"], "MAX_RECONSUME_TIMES": ["0", "1", "-1"],
    "TRANSACTION_CHECK_TIMES": ["15", "16", "-1"], "CHECK_IMMUNITY_TIME_IN_SECONDS": ["0", "1", "-1", "9999999999"],
    "KEYS": ["k1 k2", " ", "k" * 5000], "UNIQ_KEY": ["7F00000100002A9F0000000000000000", ""],
}
# request codes worth hitting with synthesized seeds (every processor area)
SYNTH_CODES = [
    RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.PULL_MESSAGE, RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID,
    RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT, RequestCode.CONSUMER_SEND_MSG_BACK,
    RequestCode.END_TRANSACTION, RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.UPDATE_CONSUMER_OFFSET,
    RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, RequestCode.GET_EARLIEST_MSG_STORETIME, RequestCode.LOCK_BATCH_MQ,
    RequestCode.UNLOCK_BATCH_MQ, RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.DELETE_SUBSCRIPTIONGROUP, RequestCode.GET_ALL_TOPIC_CONFIG,
    RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_TOPIC_STATS_INFO, RequestCode.GET_CONSUME_STATS,
    RequestCode.CHECK_CLIENT_CONFIG, RequestCode.QUERY_CONSUME_QUEUE, RequestCode.GET_BROKER_CONFIG,
    RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.PUT_KV_CONFIG,
    RequestCode.GET_KV_CONFIG, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, RequestCode.GET_TOPICS_BY_CLUSTER,
    RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG, RequestCode.GET_BROKER_CLUSTER_ACL_INFO,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, 54,
]
NAMESRV_CODES = {RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.PUT_KV_CONFIG,
                 RequestCode.GET_KV_CONFIG, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
                 RequestCode.GET_TOPICS_BY_CLUSTER, RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER}

# --acl: the broker's accounts (names and secrets the frames are signed with)
ACL_ADMIN = ("fuzzadmin01", "fuzz-admin-secret")
ACL_USER = ("fuzzuser001", "fuzz-user-secret")
ACL_READER = ("fuzzreader1", "fuzz-reader-secret")
ACL_PROTECTED = {ACL_ADMIN[0], ACL_USER[0], ACL_READER[0]}
ACL_KEEP_EXTRA_ACCOUNTS = 40
PLAIN_ACL_YML = f"""\
globalWhiteRemoteAddresses:

accounts:
- accessKey: {ACL_ADMIN[0]}
  secretKey: {ACL_ADMIN[1]}
  admin: true
- accessKey: {ACL_USER[0]}
  secretKey: {ACL_USER[1]}
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: PUB|SUB
  topicPerms:
  - FuzzDenyT=DENY
  - FuzzT=PUB|SUB
  groupPerms:
  - FuzzDenyG=DENY
"""
EXTRA_ACL_YML = f"""\
globalWhiteRemoteAddresses:
- 10.10.103.*
accounts:
- accessKey: {ACL_READER[0]}
  secretKey: {ACL_READER[1]}
  whiteRemoteAddress: 192.168.0.{{1,2}}
  defaultTopicPerm: SUB
  defaultGroupPerm: SUB
"""


@dataclass
class Seed:
    target: str  # "namesrv" or "broker"
    code: int
    ext: dict[str, Any]
    body: bytes = b""
    flag: int = 0
    serialize_type: int = SerializeType.JSON


@dataclass
class Stats:
    frames: int = 0
    intact_frames: int = 0  # frames whose framing and header were left decodable
    by_mutator: Counter = field(default_factory=Counter)
    responses: Counter = field(default_factory=Counter)
    server_closes: int = 0
    health_ok: int = 0
    health_failed: int = 0
    wedges: int = 0
    tracebacks: int = 0
    distinct: dict[str, str] = field(default_factory=dict)  # traceback signature -> offending frame hex
    # msgIds (offsetMsgId) of accepted sends: the "real_offset" mutator points requests at real records
    msg_ids: deque = field(default_factory=lambda: deque(maxlen=512))
    failures: list[str] = field(default_factory=list)
    server_died: bool = False
    seconds: float = 0.0
    # after the frames (started server only): SIGKILL + restart + health check, then `rmqd store verify`
    fd_exhaustion: str = "not run"  # "ok" or what failed (fd_exhaustion_check)
    restart: str = "not run"  # "ok" or what failed
    restart_s: float = 0.0
    rss_mib: list[float] = field(default_factory=list)  # the server's RSS at each progress line
    verify: str = "not run"  # "ok" or the verifier's complaint
    # --acl: how the frames were credentialed, graceful restarts (acl files checked each time)
    by_credentials: Counter = field(default_factory=Counter)
    restarts_ok: int = 0
    restarts_failed: int = 0
    acl_files: str = "not run"  # "ok" or what failed (acl_files_problem)

    def ok(self) -> bool:
        return not (self.tracebacks or self.health_failed or self.wedges or self.server_died or self.restarts_failed
                    or self.restart not in ("ok", "not run") or self.fd_exhaustion not in ("ok", "not run")
                    or self.verify not in ("ok", "not run") or self.acl_files not in ("ok", "not run"))

    def as_dict(self) -> dict[str, Any]:
        return {"frames": self.frames, "intact_frames": self.intact_frames, "tracebacks": self.tracebacks, "health_ok": self.health_ok,
                "health_failed": self.health_failed, "wedges": self.wedges, "server_closes": self.server_closes,
                "server_died": self.server_died, "seconds": round(self.seconds, 1), "fd_exhaustion": self.fd_exhaustion, "restart": self.restart, "rss_mib": self.rss_mib,
                "verify": self.verify, "by_credentials": dict(self.by_credentials), "restarts_ok": self.restarts_ok,
                "restarts_failed": self.restarts_failed, "acl_files": self.acl_files,
                "responses": {str(k): v for k, v in self.responses.most_common()},
                "by_mutator": dict(self.by_mutator), "distinct": self.distinct, "failures": self.failures}


# ------------------------------------------------------------------------------------------------
# seeds


def _now() -> str:
    return str(int(time.time() * 1000))


def capture_seeds() -> list[Seed]:
    """Every client->server request of the real 4.9.8 Java capture."""
    seeds = []
    if not CAPTURE.exists():
        return seeds
    facts = json.loads((CAPTURE.parent / "facts.json").read_text())
    servers = {facts["namesrvAddr"], facts["brokerAddr"]}  # the capture's name server and broker
    for line in CAPTURE.read_text().splitlines():
        d = json.loads(line)
        if d["dst"] not in servers:
            continue
        cmd = decode_frame(bytes.fromhex(d["rawFrameHex"]))
        if cmd.is_response:
            continue
        seeds.append(Seed("namesrv" if d["dst"] == facts["namesrvAddr"] else "broker", int(cmd.code), dict(cmd.ext_fields or {}),
                          bytes(cmd.body or b""), cmd.flag, int(cmd.serialize_type)))
    return seeds


def _send_ext(topic: str, queue_id: int = 0, props: dict[str, str] | None = None) -> dict[str, str]:
    return {"a": PRODUCER_GROUP, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0", "g": _now(),
            "h": "0", "i": encode_properties(props or {"TAGS": "TagA", "KEYS": "k1", "WAIT": "true"}), "j": "0",
            "k": "false", "m": "false", "n": "broker-a"}


def _heartbeat_body(client: str, group: str, topic: str) -> bytes:
    return json.dumps({"clientID": client, "consumerDataSet": [{
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY", "groupName": group,
        "messageModel": "CLUSTERING", "subscriptionDataSet": [{
            "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*", "subVersion": 1,
            "tagsSet": [], "topic": topic}], "unitMode": False}],
        "producerDataSet": [{"groupName": PRODUCER_GROUP}]}).encode()


def _pull_ext(topic: str, group: str, queue_id: int, offset: int, sys_flag: int = 2, suspend_ms: int = 0) -> dict:
    return {"queueId": str(queue_id), "maxMsgNums": "32", "sysFlag": str(sys_flag), "suspendTimeoutMillis":
            str(suspend_ms), "commitOffset": "0", "topic": topic, "queueOffset": str(offset),
            "expressionType": "TAG", "subVersion": "0", "consumerGroup": group, "subscription": "*"}


def synthesized_seeds() -> list[Seed]:
    t, g = "FuzzT", "FuzzG"
    mq = {"topic": t, "brokerName": "broker-a", "queueId": 0}
    seeds = [
        Seed("broker", RequestCode.SEND_MESSAGE_V2, _send_ext(t), b"hello"),
        Seed("broker", RequestCode.SEND_MESSAGE, {
            "producerGroup": PRODUCER_GROUP, "topic": t, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "1", "sysFlag": "0", "bornTimestamp": _now(), "flag": "0",
            "properties": encode_properties({"TAGS": "T", "DELAY": "2"}), "reconsumeTimes": "0",
            "unitMode": "false", "batch": "false"}, b"v1 body"),
        Seed("broker", RequestCode.SEND_BATCH_MESSAGE, _send_ext(t), bytes.fromhex(
            "0000001b000000000000000000000003616263000000000000001b00000000000000000000000364656600000000")),
        Seed("broker", RequestCode.PULL_MESSAGE, _pull_ext(t, g, 0, 0, suspend_ms=200)),
        Seed("broker", RequestCode.HEART_BEAT, {}, _heartbeat_body("fuzz@1", g, t)),
        Seed("broker", RequestCode.UNREGISTER_CLIENT, {"clientID": "fuzz@1", "producerGroup": PRODUCER_GROUP,
                                                       "consumerGroup": g}),
        Seed("broker", RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": "0", "group": g, "delayLevel": "-1", "originMsgId": "7F00000100002A9F0000000000000000",
            "originTopic": t, "unitMode": "false", "maxReconsumeTimes": "16"}),
        Seed("broker", RequestCode.END_TRANSACTION, {
            "producerGroup": PRODUCER_GROUP, "tranStateTableOffset": "0", "commitLogOffset": "0",
            "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "7F00000100002A9F0000000000000000",
            "transactionId": "abc"}),
        Seed("broker", RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": g}),
        Seed("broker", RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": g, "topic": t, "queueId": "0",
                                                            "commitOffset": "1"}),
        Seed("broker", RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": g, "topic": t, "queueId": "0"}),
        Seed("broker", RequestCode.GET_MAX_OFFSET, {"topic": t, "queueId": "0"}),
        Seed("broker", RequestCode.GET_MIN_OFFSET, {"topic": t, "queueId": "0"}),
        Seed("broker", RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": t, "queueId": "0", "timestamp": _now()}),
        Seed("broker", RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": t, "queueId": "0"}),
        Seed("broker", RequestCode.QUERY_MESSAGE, {"topic": t, "key": "k1", "maxNum": "32", "beginTimestamp": "0",
                                                   "endTimestamp": _now()}),
        Seed("broker", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}),
        Seed("broker", RequestCode.LOCK_BATCH_MQ, {}, json.dumps(
            {"consumerGroup": g, "clientId": "fuzz@1", "mqSet": [mq]}).encode()),
        Seed("broker", RequestCode.UNLOCK_BATCH_MQ, {}, json.dumps(
            {"consumerGroup": g, "clientId": "fuzz@1", "mqSet": [mq]}).encode()),
        Seed("broker", RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": t, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}),
        Seed("broker", RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(
            {"groupName": g, "consumeEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16,
             "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1}).encode()),
        Seed("broker", RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": t}),
        Seed("broker", RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": g}),
        Seed("broker", RequestCode.GET_TOPIC_STATS_INFO, {"topic": t}),
        Seed("broker", RequestCode.GET_CONSUME_STATS, {"consumerGroup": g, "topic": t}),
        Seed("broker", RequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps(
            {"group": g, "subscriptionData": {"topic": t, "subString": "a > 1", "expressionType": "SQL92",
                                              "subVersion": 1, "tagsSet": [], "codeSet": []}}).encode()),
        Seed("broker", RequestCode.QUERY_CONSUME_QUEUE, {"topic": t, "queueId": "0", "index": "0", "count": "10",
                                                         "consumerGroup": g}),
        # RocketMQ 5.x POP (processors/pop_remoting.py) and the queue assignment
        Seed("broker", RequestCode.POP_MESSAGE, {
            "consumerGroup": g, "topic": t, "queueId": "-1", "maxMsgNums": "8", "invisibleTime": "3000",
            "pollTime": "100", "bornTime": _now(), "initMode": "0", "expType": "TAG", "exp": "*", "order": "false"}),
        Seed("broker", RequestCode.POP_MESSAGE, {
            "consumerGroup": g, "topic": t, "queueId": "0", "maxMsgNums": "2", "invisibleTime": "3000",
            "pollTime": "0", "bornTime": _now(), "initMode": "1", "order": "true", "attemptId": "a1"}),
        Seed("broker", RequestCode.ACK_MESSAGE, {"consumerGroup": g, "topic": t, "queueId": "0",
                                                 "extraInfo": "0 1 3000 0 0 broker-a 0 0", "offset": "0"}),
        Seed("broker", RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
            "consumerGroup": g, "topic": t, "queueId": "0", "extraInfo": "0 1 3000 999 0 broker-a 0 0",
            "offset": "0", "invisibleTime": "1000"}),
        Seed("broker", RequestCode.BATCH_ACK_MESSAGE, {}, json.dumps({"brokerName": "broker-a", "acks": [
            {"c": g, "t": t, "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 1, "it": 3000, "b": "Aw=="}]}).encode()),
        Seed("broker", RequestCode.QUERY_ASSIGNMENT, {}, json.dumps(
            {"topic": t, "consumerGroup": g, "clientId": "fuzz@1", "strategyName": "AVG",
             "messageModel": "CLUSTERING"}).encode()),
        Seed("broker", RequestCode.SET_MESSAGE_REQUEST_MODE, {}, json.dumps(
            {"topic": t, "consumerGroup": g, "mode": "POP", "popShareQueueNum": 0}).encode()),
        Seed("namesrv", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": t}),
        Seed("namesrv", RequestCode.GET_BROKER_CLUSTER_INFO, {}),
        Seed("namesrv", RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": t,
                                                     "value": "broker-a:4"}),
        Seed("namesrv", RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": t}),
        Seed("namesrv", RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}),
    ]
    for code in (RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.GET_BROKER_RUNTIME_INFO,
                 RequestCode.GET_BROKER_CONFIG):
        seeds.append(Seed("broker", code, {}))
    seeds.append(Seed("namesrv", RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}))
    for s in list(seeds):  # the same requests with ROCKETMQ binary headers
        seeds.append(Seed(s.target, s.code, s.ext, s.body, s.flag, SerializeType.ROCKETMQ))
    return seeds


def acl_seeds(home: Path) -> list[Seed]:
    """The ACL administration codes 50-54 (and their account fields, white lists, file paths)."""
    default, extra = home / "conf" / "plain_acl.yml", home / "conf" / "acl" / "extra.yml"
    account = {"accessKey": "fuzznewacct", "secretKey": "fuzznewsecret", "whiteRemoteAddress": "10.1.1.*",
               "admin": "false", "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB",
               "topicPerms": "FuzzT=PUB|SUB,FuzzDenyT=DENY", "groupPerms": "FuzzG=SUB,FuzzDenyG=DENY"}
    seeds = [Seed("broker", RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, account),
             Seed("broker", RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                 **account, "accessKey": "fuzzadmin02", "admin": "true", "whiteRemoteAddress": "192.168.1.{1,2}"}),
             Seed("broker", RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
                 "accessKey": "fuzzshort01", "secretKey": "fuzzshortsecret", "whiteRemoteAddress": "::1"}),
             Seed("broker", RequestCode.DELETE_ACL_CONFIG, {"accessKey": "fuzznewacct"}),
             Seed("broker", RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}),
             Seed("broker", RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.10.103.*,1.2.3.4"}),
             Seed("broker", 54, {})]
    for path in (default, extra, home / "conf" / "decoy.conf", home / "conf" / "acl" / ".." / ".." / ".." / "x.yml"):
        seeds.append(Seed("broker", RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                          {"globalWhiteAddrs": "192.168.0.*,10.0.0.1-200", "aclFileFullPath": str(path)}))
    for s in list(seeds):  # the same requests with ROCKETMQ binary headers
        seeds.append(Seed(s.target, s.code, s.ext, s.body, s.flag, SerializeType.ROCKETMQ))
    return seeds


class Credentials:
    """--acl: what each frame carries, chosen per frame. ``pre`` (tampered) credentials are put
    on the seed before the mutator runs, so the mutation invalidates the signature; ``post``
    ones on the mutated fields, so mutated values reach the handlers from a valid account."""

    KINDS = [("admin", 30), ("user", 22), ("reader", 8), ("tampered", 14), ("wrong_secret", 7),
             ("unknown_key", 5), ("mangled_signature", 5), ("unsigned", 9)]

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.kind = "unsigned"

    def choose(self) -> str:
        self.kind = self.rng.choices([k for k, _ in self.KINDS], [w for _, w in self.KINDS])[0]
        return self.kind

    def _sign(self, ext: dict[str, Any], body: bytes | None, ak: str, sk: str) -> dict[str, Any]:
        fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in ext.items()}
        signed = sign_fields({k: v for k, v in fields.items() if k not in ("AccessKey", "Signature")}, body, ak, sk)
        return {**ext, "AccessKey": signed["AccessKey"], "Signature": signed["Signature"]}

    def decorate(self, code: int, ext: Any, body: bytes | None, *, pre: bool) -> Any:
        """``ext`` with this frame's credentials (a non-mapping ext is left as it is)."""
        if not isinstance(ext, dict) or pre != (self.kind == "tampered") or self.kind == "unsigned":
            return ext
        ext = dict(ext)
        if code in (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG) and \
                isinstance(ext.get("accessKey"), str) and ext["accessKey"] in ACL_PROTECTED:
            ext["accessKey"] = f"{ext['accessKey']}x"  # the fuzzer keeps its own accounts
        kind = self.kind
        if kind == "tampered":  # signed, then one field changed (the mutator may change more)
            signed = self._sign(ext, body, *(ACL_ADMIN if self.rng.random() < 0.5 else ACL_USER))
            fields = [k for k in signed if k not in ("AccessKey", "Signature")]
            key = self.rng.choice(fields) if fields else "tampered"
            signed[key] = f"{signed.get(key, '')}!"
            return signed
        if kind == "admin":
            return self._sign(ext, body, *ACL_ADMIN)
        if kind == "user":
            return self._sign(ext, body, *ACL_USER)
        if kind == "reader":
            return self._sign(ext, body, *ACL_READER)
        if kind == "wrong_secret":
            return self._sign(ext, body, ACL_ADMIN[0], "not-the-secret")
        if kind == "unknown_key":
            return self._sign(ext, body, "nobody-here", "whatever")
        signed = self._sign(ext, body, *ACL_USER)
        signed["Signature"] = self.rng.choice(["", "=", "A" * 28, signed["Signature"][:-2], "\x00" * 28,
                                               signed["Signature"].lower(), "😀", "a" * 70_000])
        return signed


# ------------------------------------------------------------------------------------------------
# frames and mutators


def json_frame(code: int, ext: Any, body: bytes, *, flag: int = 0, opaque: int = 0,
               extra: dict[str, Any] | None = None, raw_header: bytes | None = None) -> bytes:
    """A JSON-header frame built by hand, so values of any JSON type (or none) can go in."""
    if raw_header is None:
        header: dict[str, Any] = {"code": code, "extFields": ext, "flag": flag, "language": "JAVA",
                                  "opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": 395}
        if extra:
            header.update(extra)
        raw_header = json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return struct.pack(">iI", 4 + len(raw_header) + len(body), len(raw_header)) + raw_header + body


def seed_frame(s: Seed, opaque: int) -> bytes:
    if s.serialize_type == SerializeType.ROCKETMQ:
        cmd = make_request(s.code, {k: str(v) for k, v in s.ext.items()}, s.body or None, opaque=opaque,
                           serialize_type=SerializeType.ROCKETMQ)
        cmd.flag = s.flag
        return encode_frame(cmd)
    return json_frame(s.code, s.ext, s.body, flag=s.flag, opaque=opaque)


class Mutator:
    """Each mutator returns (frame bytes, framing_intact). Intact frames go on the pipelined
    connections; broken framing goes on a raw connection the server may close."""

    def __init__(self, rng: random.Random, seeds: list[Seed], msg_ids: deque | None = None,
                 credentials: Credentials | None = None):
        self.rng = rng
        self.seeds = seeds
        self.msg_ids = msg_ids if msg_ids is not None else deque(maxlen=512)
        self.credentials = credentials
        self.ops: list[tuple[str, Callable[[Seed, int], tuple[bytes, bool]]]] = [
            ("valid", self.valid), ("ext_value", self.ext_value), ("ext_drop", self.ext_drop),
            ("ext_add", self.ext_add), ("code", self.code), ("body_junk", self.body_junk),
            ("body_json", self.body_json), ("header_fields", self.header_fields),
            ("non_utf8_header", self.non_utf8_header), ("binary_ext", self.binary_ext),
            ("byte_flip", self.byte_flip), ("truncate", self.truncate), ("length_lie", self.length_lie),
            ("header_length_lie", self.header_length_lie), ("serialize_type", self.serialize_type),
            ("garbage", self.garbage), ("props", self.props), ("real_offset", self.real_offset),
        ]
        self.weights = [4, 10, 4, 3, 3, 5, 6, 4, 3, 3, 4, 2, 2, 2, 2, 1, 5, 4]

    def pick(self) -> tuple[str, Seed]:
        return self.rng.choices(self.ops, self.weights)[0][0], self.rng.choice(self.seeds)

    def apply(self, name: str, seed: Seed, opaque: int) -> tuple[bytes, bool]:
        creds = self.credentials
        if creds is not None:  # --acl: this frame's credentials, before (tampered) or after the mutation
            creds.choose()
            seed = Seed(seed.target, seed.code, creds.decorate(seed.code, seed.ext, seed.body or None, pre=True),
                        seed.body, seed.flag, seed.serialize_type)
            if name in ("valid", "byte_flip", "truncate", "length_lie", "header_length_lie", "serialize_type",
                        "non_utf8_header", "binary_ext", "code"):  # no _json: credentials go on the seed
                seed = Seed(seed.target, seed.code, creds.decorate(seed.code, seed.ext, seed.body or None, pre=False),
                            seed.body, seed.flag, seed.serialize_type)
        return dict(self.ops)[name](seed, opaque)

    def nasty(self) -> Any:
        r = self.rng.random()
        if r < 0.7:
            return self.rng.choice(NASTY)
        if r < 0.85:
            return "".join(chr(self.rng.randrange(0x20, 0x2FF)) for _ in range(self.rng.randrange(1, 40)))
        return str(self.rng.randrange(-2**64, 2**64))

    def valid(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        return seed_frame(s, opaque), True

    def _json(self, s: Seed, ext: Any, body: bytes | None = None, **kw: Any) -> tuple[bytes, bool]:
        body = s.body if body is None else body
        if isinstance(ext, dict) and "bodyCrc32" in ext and self.rng.random() < 0.8:
            # REGISTER_BROKER: a matching CRC (of the compressed body when compressed=true, as
            # BrokerOuterAPI computes it) so the mutated body gets past the CRC check to its decoder
            if self.rng.random() < 0.3:
                ext, body = {**ext, "compressed": "true"}, zlib.compress(body)
            ext = {**ext, "bodyCrc32": str(crc32_masked(body))}
        if self.credentials is not None:
            ext = self.credentials.decorate(s.code, ext, body or None, pre=False)
        return json_frame(s.code, ext, body, flag=s.flag, opaque=kw.pop("opaque", 0), **kw), True

    def ext_value(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        ext = dict(s.ext)
        for _ in range(self.rng.randrange(1, 3)):
            if ext:
                ext[self.rng.choice(list(ext))] = self.nasty()
        return self._json(s, ext, opaque=opaque)

    def ext_drop(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        ext = dict(s.ext)
        for k in self.rng.sample(list(ext), k=min(len(ext), self.rng.randrange(1, 4))):
            del ext[k]
        return self._json(s, ext if self.rng.random() < 0.8 else self.rng.choice([None, [], "x", 5]), opaque=opaque)

    def ext_add(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        ext = dict(s.ext)
        for k in ("topic", "group", "consumerGroup", "queueId", "offset", "a", "b", "e", "sysFlag", "key",
                  "namespace", "brokerName", "clusterName", "perm", "msgId", "commitLogOffset"):
            if self.rng.random() < 0.2:
                ext[k] = self.nasty()
        return self._json(s, ext, opaque=opaque)

    def code(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        code = self.rng.choice([self.rng.randrange(-5, 400), self.rng.choice(SYNTH_CODES), 2**31 - 1, -2**31,
                                self.rng.randrange(0, 70000)])
        return json_frame(code, s.ext, s.body, flag=s.flag, opaque=opaque), True

    def body_junk(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        kind = self.rng.randrange(6)
        if kind == 0:
            body = bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(0, 300)))
        elif kind == 1:
            body = b"\xff\xfe\x80" + s.body[3:]
        elif kind == 2:
            body = b"[" * self.rng.choice([100, 5000, 100_000])
        elif kind == 3:
            body = s.body[: self.rng.randrange(0, len(s.body) + 1)]
        elif kind == 4:
            body = b"x" * self.rng.choice([0, 4096, 1 << 20, 5 << 20])
        else:
            body = bytes([0x78, 0x9C]) + bytes(self.rng.randrange(256) for _ in range(64))  # zlib-ish junk
        return self._json(s, s.ext, body, opaque=opaque)

    def _mutate_tree(self, v: Any, depth: int = 0) -> Any:
        if isinstance(v, dict) and v:
            v = dict(v)
            k = self.rng.choice(list(v))
            if self.rng.random() < 0.3 and depth < 6:
                v[k] = self._mutate_tree(v[k], depth + 1)
            elif self.rng.random() < 0.5:
                v[k] = self.nasty()
            else:
                del v[k]
            return v
        if isinstance(v, list) and v:
            v = list(v)
            i = self.rng.randrange(len(v))
            v[i] = self._mutate_tree(v[i], depth + 1) if self.rng.random() < 0.5 else self.nasty()
            return v
        return self.nasty()

    def body_json(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        try:
            tree = json.loads(s.body)
        except (ValueError, UnicodeDecodeError):
            tree = {"groupName": "x"}
        for _ in range(self.rng.randrange(1, 4)):
            tree = self._mutate_tree(tree)
        body = json.dumps(tree, ensure_ascii=False).encode("utf-8", "surrogatepass")
        return self._json(s, s.ext, body, opaque=opaque)

    def header_fields(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        extra = {}
        for k in ("code", "flag", "language", "opaque", "version", "remark", "serializeTypeCurrentRPC"):
            if self.rng.random() < 0.3:
                extra[k] = self.nasty()
        if self.rng.random() < 0.3:
            extra["flag"] = self.rng.choice([1, 2, 3, -1])  # responses and oneways the client did not expect
        return self._json(s, s.ext, opaque=opaque, extra=extra)[0], not extra

    def non_utf8_header(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        frame = seed_frame(Seed(s.target, s.code, s.ext, s.body, s.flag), opaque)
        hl = struct.unpack_from(">I", frame, 4)[0]
        header = bytearray(frame[8:8 + hl])
        for _ in range(self.rng.randrange(1, 4)):
            quote = [i for i, c in enumerate(header) if c == 0x22]
            if quote:
                header.insert(self.rng.choice(quote) + 1, self.rng.choice([0xFF, 0xC0, 0x80, 0xED]))
        return json_frame(s.code, None, s.body, raw_header=bytes(header)), False

    def binary_ext(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        ext = {k: str(self.nasty()) if self.rng.random() < 0.3 else str(v) for k, v in s.ext.items()}
        ext = {k: v.encode("utf-8", "replace").decode("utf-8") for k, v in ext.items()}
        cmd = make_request(s.code, ext, s.body or None, opaque=opaque, serialize_type=SerializeType.ROCKETMQ)
        frame = bytearray(encode_frame(cmd))
        for _ in range(self.rng.randrange(0, 3)):  # lengths inside the binary header
            i = self.rng.randrange(8, min(len(frame), 40))
            frame[i] = self.rng.randrange(256)
        return bytes(frame), False

    def props(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        """Message properties and sysFlag of a send: what the store, the schedule service
        (DELAY, __STARTDELIVERTIME), transactions (TRAN_MSG, PGROUP), the index (KEYS,
        UNIQ_KEY) and retries (RETRY_TOPIC, REAL_TOPIC) read back later from stored records."""
        field_name = {RequestCode.SEND_MESSAGE: "properties"}.get(s.code, "i")
        flag_name = {RequestCode.SEND_MESSAGE: "sysFlag"}.get(s.code, "f")
        if s.code not in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            s = self.rng.choice([x for x in self.seeds if x.code == RequestCode.SEND_MESSAGE_V2])
            field_name, flag_name = "i", "f"
        ext = dict(s.ext)
        props = {"TAGS": "T", "WAIT": "true"}
        for _ in range(self.rng.randrange(1, 5)):
            key = self.rng.choice(PROP_KEYS)
            props[key] = self.rng.choice(PROP_VALUES.get(key, []) + [str(self.nasty())])
        if self.rng.random() < 0.15:  # a properties string that breaks the name/value grammar
            ext[field_name] = self.rng.choice(["\x01\x02", "a", "a\x01", "\x02\x02", "TAGS\x01a\x01b\x02",
                                              "\x00\x01\x00\x02", "DELAY\x013", "x" * 40_000 + "\x01y\x02"])
        else:
            ext[field_name] = encode_properties({k: str(v) for k, v in props.items()})
        if self.rng.random() < 0.4:
            ext[flag_name] = str(self.rng.choice([0, 1, 2, 3, 4, 8, 12, 0x10, 0x20, 0xFF, -1, 2**31 - 1]))
        if self.rng.random() < 0.2:
            ext["b" if field_name == "i" else "topic"] = self.rng.choice(
                ["%RETRY%FuzzG", "%DLQ%FuzzG", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC",
                 "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TBW102", "OFFSET_MOVED_EVENT", "DefaultCluster", "broker-a"])
        return self._json(s, ext, opaque=opaque)

    def real_offset(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        """Offsets and message ids of records the broker really wrote (seen in its send
        responses), exact or a few bytes off: END_TRANSACTION of a message that is not a half
        message, send-back and view of any record, reads that start inside a record."""
        fields = ("commitLogOffset", "offset", "tranStateTableOffset", "msgId", "originMsgId")
        pool = [x for x in self.seeds if any(f in x.ext for f in fields)] if not any(f in s.ext for f in fields) else [s]
        s = self.rng.choice(pool)
        ext = dict(s.ext)
        msg_id = self.rng.choice(self.msg_ids) if self.msg_ids else "7F00000100002A9F0000000000000000"
        base = int(msg_id[16:], 16)
        for f in fields:
            if f in ext:
                off = max(0, base + self.rng.choice([0, 0, 0, 1, -1, 4, 8, 16, 20, 100, -4]))
                ext[f] = (msg_id[:16] + f"{off:016X}") if f.endswith("sgId") else str(off)
        if "commitOrRollback" in ext and self.rng.random() < 0.7:
            ext["commitOrRollback"] = self.rng.choice(["8", "12", "4"])
        if "producerGroup" in ext and self.rng.random() < 0.3:
            ext["producerGroup"] = "PG"
        return self._json(s, ext, opaque=opaque)

    # framing-breaking mutators: raw connection
    def byte_flip(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        frame = bytearray(seed_frame(s, opaque))
        for _ in range(self.rng.randrange(1, 8)):
            i = self.rng.randrange(len(frame))
            frame[i] ^= 1 << self.rng.randrange(8)
        return bytes(frame), False

    def truncate(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        frame = seed_frame(s, opaque)
        return frame[: self.rng.randrange(0, len(frame))], False

    def length_lie(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        frame = bytearray(seed_frame(s, opaque))
        lie = self.rng.choice([0, 1, 3, 4, -1, -2**31, 2**31 - 1, 16 * 1024 * 1024 + 1, len(frame) - 4 + 10,
                               len(frame) - 20])
        struct.pack_into(">i", frame, 0, lie)
        return bytes(frame), False

    def header_length_lie(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        frame = bytearray(seed_frame(s, opaque))
        hl = self.rng.choice([0, 1, 0xFFFFFF, len(frame), len(frame) - 9, self.rng.randrange(0, 0x1000000)])
        struct.pack_into(">I", frame, 4, (frame[4] << 24) | hl)
        return bytes(frame), False

    def serialize_type(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        frame = bytearray(seed_frame(s, opaque))
        frame[4] = self.rng.choice([0, 1, 2, 3, 0x7F, 0x80, 0xFF])
        return bytes(frame), False

    def garbage(self, s: Seed, opaque: int) -> tuple[bytes, bool]:
        n = self.rng.randrange(1, 200)
        return bytes(self.rng.randrange(256) for _ in range(n)), False


# ------------------------------------------------------------------------------------------------
# the server


class Server:
    """`rmqd serve` in a subprocess with its log in a file (or an attached one: no log)."""

    def __init__(self, workdir: Path, namesrv: str | None = None, broker: str | None = None, conf: str = "",
                 log_level: str = "WARNING", acl: bool = False):
        self.workdir = workdir
        self.log_level = log_level
        self.conf = conf  # broker.conf lines added to the fuzzer's own
        self.acl = acl
        self.home = workdir / "home"  # --acl: rocketmqHome, with conf/plain_acl.yml and conf/acl/extra.yml
        self.ports: tuple[int, int] | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.namesrv, self.broker = namesrv, broker
        self.attached = bool(namesrv and broker)
        self._log_pos = 0

    def start(self, timeout: float = 60) -> None:
        if self.attached:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "broker.conf"
        acl_conf = ""
        if self.acl:
            acl_conf = f"aclEnable=true\nrocketmqHome={self.home}\n"
            if not (self.home / "conf" / "plain_acl.yml").exists():  # a restart keeps what the frames made
                (self.home / "conf" / "acl").mkdir(parents=True, exist_ok=True)
                (self.home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL_YML)
                (self.home / "conf" / "acl" / "extra.yml").write_text(EXTRA_ACL_YML)
                (self.home / "conf" / "decoy.conf").write_text("brokerName=decoy\n")
        # short delay levels and transaction check times: the schedule service and the
        # transaction checker work on the fuzzed messages while the run lasts
        conf.write_text("mappedFileSizeCommitLog=16777216\nmappedFileSizeConsumeQueue=120000\n"
                        "autoCreateTopicEnable=true\nbrokerName=broker-a\nflushIntervalCommitLog=200\n"
                        f"messageDelayLevel={' '.join(['1s', '2s'] * 9)}\ntransactionTimeOut=1000\n"
                        "transactionCheckInterval=2000\n" + acl_conf + self.conf)
        if self.ports is None:  # a restart keeps its ports and store
            self.ports = free_port(), free_broker_port()
        ns_port, br_port = self.ports
        self.log_path = self.workdir / "rmqd.log"
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rmqd", "--log-level", self.log_level, "serve", "--store", str(self.workdir / "store"),
             "--namesrv-port", str(ns_port), "--broker-port", str(br_port), "--host", "127.0.0.1", "-c", str(conf),
             "--kv-config", str(self.workdir / "kvConfig.json")],
            cwd=REPO, stdout=subprocess.PIPE, stderr=log, env=dict(os.environ, PYTHONUNBUFFERED="1"), text=True, errors="replace")
        log.close()
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = self.proc.stdout.readline() if ready else ""
            if line.startswith("rmqd ready"):
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"rmqd did not get ready (exit {self.proc.returncode}): "
                                   f"{self.log_path.read_text()[-2000:]}")
        self.namesrv, self.broker = f"127.0.0.1:{ns_port}", f"127.0.0.1:{br_port}"

    @property
    def creds(self) -> tuple[str, str] | None:
        """What the fuzzer's own requests (health checks) are signed with."""
        return ACL_ADMIN if self.acl else None

    def acl_files(self) -> list[Path]:
        return sorted(p for p in (self.home / "conf").rglob("*") if p.name.endswith((".yml", ".yaml")))

    def restart(self) -> str | None:
        """SIGTERM, the acl files checked, start again: None, or what failed."""
        self.stop()
        problem = acl_files_problem(self) if self.acl else None
        if problem is not None:
            return problem
        try:
            self.start(timeout=120)
        except RuntimeError as exc:
            return f"start after SIGTERM failed: {exc}"[:2000]
        return None

    def kill(self) -> None:
        """SIGKILL, as a crash: no flush, no shutdown hook."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def rss_mib(self) -> float | None:
        """The server's anonymous resident memory (RssAnon: heap, not the mapped store files,
        which grow with the store): a leak per request shows over a long run."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024
        except (OSError, ValueError):
            return None
        return None

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def new_log(self) -> str:
        if self.log_path is None:
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_pos)
            data = f.read()
        self._log_pos += len(data)
        return data.decode("utf-8", "replace")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def traceback_signatures(log_text: str) -> list[str]:
    """One signature per traceback in ``log_text`` (innermost frame + exception line), and one
    per failure line logged without a traceback ("process request exception", "internal error")."""
    sigs = []
    for m in TRACEBACK_RE.finditer(log_text):
        lines = log_text[m.end():].splitlines()
        where, what = "", ""
        for ln in lines[1:200]:
            if ln.startswith("  File "):
                where = ln.strip()
            elif ln and not ln.startswith(" "):
                what = ln.strip()
                break
        sigs.append(f"{where} | {what}")
    lines = log_text.splitlines()
    for n, ln in enumerate(lines):
        if PROBLEM_LINE_RE.search(ln) and not (n + 1 < len(lines) and TRACEBACK_RE.match(lines[n + 1])):
            # no traceback to name the place: the message itself, timestamps and numbers dropped
            sigs.append("log: " + re.sub(r"\d+", "N", ln.split(" ", 2)[-1])[:200])
    return sigs


def acl_files_problem(server: Server) -> str | None:
    """Every acl file parses as YAML and loads as the broker loads it (rmqd's own loader), or
    what does not."""
    from rmqd.broker.acl_config import AclService
    from rmqd.broker.config import ConfigError
    for path in server.acl_files():
        try:
            yaml.safe_load(path.read_bytes())
        except (OSError, yaml.YAMLError) as exc:
            return f"{path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    try:
        AclService(server.home)
    except ConfigError as exc:
        return str(exc)
    return None


# ------------------------------------------------------------------------------------------------
# connections


def _addr(hostport: str) -> tuple[str, int]:
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


class Conn:
    """A connection the fuzzer writes to without waiting; a reader task counts responses."""

    def __init__(self, addr: str, stats: Stats):
        self.addr = addr
        self.stats = stats
        self.stream: trio.SocketStream | None = None
        self.closed = trio.Event()

    async def open(self, nursery: trio.Nursery) -> None:
        self.stream = await trio.open_tcp_stream(*_addr(self.addr))
        self.closed = trio.Event()
        nursery.start_soon(self._reader, self.stream, self.closed)

    async def _reader(self, stream: trio.SocketStream, closed: trio.Event) -> None:
        dec = FrameDecoder()
        try:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    break
                dec.feed(data)
                for cmd in dec:
                    self.stats.responses[int(cmd.code)] += 1
                    msg_id = (cmd.ext_fields or {}).get("msgId") if cmd.code == ResponseCode.SUCCESS else None
                    if isinstance(msg_id, str) and len(msg_id) == 32:
                        self.stats.msg_ids.append(msg_id)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except Exception as exc:  # a response the codec refuses: the server sent a bad frame
            self.stats.failures.append(f"undecodable response from {self.addr}: {type(exc).__name__}: {exc}")
        finally:
            if not closed.is_set():
                closed.set()

    async def send(self, data: bytes, nursery: trio.Nursery) -> None:
        if self.stream is None or self.closed.is_set():
            if self.stream is not None:
                self.stats.server_closes += 1
                await self.stream.aclose()
            await self.open(nursery)
        assert self.stream is not None
        try:
            with trio.fail_after(10):
                await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.closed.set()
            self.stats.server_closes += 1
            await self.stream.aclose()
            await self.open(nursery)  # the frame again on a new connection, once
            with trio.move_on_after(10):
                try:
                    await self.stream.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    self.closed.set()
        except trio.TooSlowError:
            self.stats.failures.append(f"send to {self.addr} blocked 10 s (server stopped reading)")
            self.closed.set()

    async def close(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
            self.stream = None


class Client:
    """Requests one at a time on ONE new connection (a heartbeat's consumer lives as long as it)."""

    def __init__(self, addr: str, creds: tuple[str, str] | None = None):
        self.addr = addr
        self.creds = creds  # (accessKey, secretKey): every request signed as AclClientRPCHook does
        self.stream: trio.SocketStream | None = None
        self.dec = FrameDecoder()
        self.opaque = 0

    async def __aenter__(self) -> "Client":
        self.stream = await trio.open_tcp_stream(*_addr(self.addr))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.stream is not None:
            await self.stream.aclose()

    async def invoke(self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None,
                     timeout: float = 5.0) -> RemotingCommand:
        assert self.stream is not None
        self.opaque += 1
        if self.creds is not None:
            ext = sign_fields(ext or {}, body, *self.creds)
        cmd = make_request(code, ext, body, opaque=self.opaque)
        with trio.fail_after(timeout):
            await self.stream.send_all(encode_frame(cmd))
            while True:
                for resp in self.dec:
                    if resp.is_response and resp.opaque == cmd.opaque:
                        return resp
                data = await self.stream.receive_some(65536)
                if not data:
                    raise ConnectionError(f"{self.addr} closed the connection before the response")
                self.dec.feed(data)


async def health_check(namesrv: str, broker: str, n: int, wedge_bound_s: float = 5.0,
                       creds: tuple[str, str] | None = None) -> str | None:
    """None when healthy; else what failed (prefixed 'wedge:' when a sent message never
    became pullable). Every check uses new connections (signed with ``creds``)."""
    try:
        async with Client(broker, creds) as c:
            r = await c.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": HEALTH_TOPIC, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
            if r.code != ResponseCode.SUCCESS:
                return f"create health topic: code {r.code} {r.remark}"
            body = f"health-{n}-{time.time()}".encode()
            r = await c.invoke(RequestCode.SEND_MESSAGE_V2, _send_ext(HEALTH_TOPIC), body)
            if r.code != ResponseCode.SUCCESS:
                return f"send: code {r.code} {r.remark}"
            offset = int((r.ext_fields or {})["queueOffset"])
            r = await c.invoke(RequestCode.HEART_BEAT, {}, _heartbeat_body("fuzz-health@1", HEALTH_GROUP, HEALTH_TOPIC))
            if r.code != ResponseCode.SUCCESS:
                return f"heartbeat: code {r.code} {r.remark}"
            deadline = trio.current_time() + wedge_bound_s
            while True:
                r = await c.invoke(RequestCode.PULL_MESSAGE, _pull_ext(HEALTH_TOPIC, HEALTH_GROUP, 0, offset))
                if r.code == ResponseCode.SUCCESS and body in [m.body for m in decode_messages(bytes(r.body or b""))]:
                    break
                if trio.current_time() > deadline:
                    return (f"wedge: message at queue offset {offset} not pullable after {wedge_bound_s} s "
                            f"(last pull code {r.code} {r.remark})")
                await trio.sleep(0.05)
        async with Client(namesrv) as c:
            r = await c.invoke(RequestCode.GET_BROKER_CLUSTER_INFO)
            if r.code != ResponseCode.SUCCESS:
                return f"name server: code {r.code} {r.remark}"
    except (OSError, ConnectionError, trio.TooSlowError, KeyError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# ------------------------------------------------------------------------------------------------
# the run


async def replay_one(addr: str, frame: bytes) -> None:
    try:
        with trio.move_on_after(0.3):
            stream = await trio.open_tcp_stream(*_addr(addr))
            try:
                await stream.send_all(frame)
                await trio.sleep(0.05)
            finally:
                await stream.aclose()
    except OSError:
        pass


async def find_offender(server: Server, recent: list[tuple[str, bytes]], sig: str) -> str | None:
    """Replay recent frames one at a time until the server logs ``sig`` again."""
    for target, frame in recent:
        await replay_one(server.namesrv if target == "namesrv" else server.broker, frame)
        await trio.sleep(0.02)
        if sig in traceback_signatures(server.new_log()):
            return frame.hex()
    return None


async def drain(stats: Stats, quiet_s: float = 0.1, bound_s: float = 3.0) -> None:
    """Let the server answer what was sent: wait until responses stop coming (bounded)."""
    deadline = trio.current_time() + bound_s
    last = -1
    while trio.current_time() < deadline:
        now = sum(stats.responses.values())
        if now == last:
            return
        last = now
        await trio.sleep(quiet_s)


async def acl_housekeeping(server: Server) -> str | None:
    """--acl, after a health check: the global white lists back to none (a frame may have
    opened the broker with '*') and the accounts the frames created cut back to
    ACL_KEEP_EXTRA_ACCOUNTS, by signed admin requests. Reads the acl files as it goes: a
    file that does not parse is a failure (None when all went well)."""
    async with Client(server.broker, server.creds) as c:
        for path in server.acl_files():
            try:
                data = yaml.safe_load(path.read_bytes()) or {}
            except (OSError, yaml.YAMLError) as exc:
                return f"acl file {path} does not parse: {str(exc).splitlines()[0] if str(exc) else exc}"
            if not isinstance(data, dict):
                return f"acl file {path}: not a mapping"
            if data.get("globalWhiteRemoteAddresses") and path.name in ("plain_acl.yml", "extra.yml"):
                r = await c.invoke(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                                   {"globalWhiteAddrs": "", "aclFileFullPath": str(path)})
                if r.code != ResponseCode.SUCCESS:
                    return f"resetting the white list of {path}: code {r.code} {r.remark}"
            extra = [a.get("accessKey") for a in data.get("accounts") or []
                     if isinstance(a, dict) and a.get("accessKey") not in ACL_PROTECTED]
            for ak in extra[:max(0, len(extra) - ACL_KEEP_EXTRA_ACCOUNTS)]:
                r = await c.invoke(RequestCode.DELETE_ACL_CONFIG, {"accessKey": str(ak)})
                if r.code not in (ResponseCode.SUCCESS, ResponseCode.DELETE_ACL_CONFIG_FAILED):
                    return f"deleting account {ak!r}: code {r.code} {r.remark}"
    return None


async def fuzz(server: Server, frames: int, seed: int, connections: int = 4, health_every: int = 300,
               print_every: int = 0, out: Callable[[str], None] = print, restart_every: int = 0) -> Stats:
    rng = random.Random(seed)
    stats = Stats()
    seeds = capture_seeds() + synthesized_seeds() + (acl_seeds(server.home) if server.acl else [])
    creds = Credentials(random.Random(seed + 1)) if server.acl else None
    mut = Mutator(rng, seeds, stats.msg_ids, creds)
    recent: deque[tuple[str, bytes]] = deque(maxlen=health_every + 50)
    started = time.monotonic()
    next_restart = restart_every
    async with trio.open_nursery() as nursery:
        pools = {t: [Conn(server.namesrv if t == "namesrv" else server.broker, stats) for _ in range(connections)]
                 for t in ("namesrv", "broker")}
        raw = {t: Conn(server.namesrv if t == "namesrv" else server.broker, stats) for t in ("namesrv", "broker")}
        checks = 0
        for i in range(1, frames + 1):
            name, s = mut.pick()
            target = s.target if rng.random() < 0.9 else rng.choice(["namesrv", "broker"])
            frame, intact = mut.apply(name, s, i)
            conn = rng.choice(pools[target]) if intact else raw[target]
            await conn.send(frame, nursery)
            if not intact and rng.random() < 0.5:  # start the next raw frames on a clean stream
                await conn.close()
            stats.frames += 1
            stats.intact_frames += intact
            stats.by_mutator[name] += 1
            if creds is not None:
                stats.by_credentials[creds.kind] += 1
            recent.append((target, frame))
            if i % 2000 == 0:  # fresh connections: held pulls and per-channel state go away
                await drain(stats)
                for c in [*pools["namesrv"], *pools["broker"], *raw.values()]:
                    await c.close()
            if i % health_every == 0 or i == frames:
                checks += 1
                await drain(stats)
                problem = await health_check(server.namesrv, server.broker, checks, creds=server.creds)
                if problem is None and server.acl:
                    problem = await acl_housekeeping(server)
                if problem is None:
                    stats.health_ok += 1
                else:
                    stats.health_failed += 1
                    if problem.startswith("wedge"):
                        stats.wedges += 1
                    stats.failures.append(f"health check after frame {i}: {problem}")
                    out(f"HEALTH CHECK FAILED after frame {i}: {problem}")
                sigs = traceback_signatures(server.new_log())
                stats.tracebacks += len(sigs)
                for sig in set(sigs):
                    if sig not in stats.distinct:
                        offender = await find_offender(server, list(recent), sig)
                        stats.distinct[sig] = offender or "(not reproduced by a single frame)"
                        out(f"TRACEBACK {sig}\n  frame: {stats.distinct[sig]}")
                recent.clear()
                if not server.alive():
                    stats.server_died = True
                    stats.failures.append(f"server exited with {server.proc.returncode if server.proc else '?'}")
                    break
                if restart_every and i >= next_restart and i < frames and not server.attached:
                    next_restart += restart_every
                    for c in [*pools["namesrv"], *pools["broker"], *raw.values()]:
                        await c.close()
                    failed = await trio.to_thread.run_sync(server.restart)
                    if failed is None:
                        stats.restarts_ok += 1
                    else:
                        stats.restarts_failed += 1
                        stats.failures.append(f"restart after frame {i}: {failed}")
                        out(f"RESTART FAILED after frame {i}: {failed}")
                        stats.server_died = not server.alive()
                        break
                if print_every and checks % print_every == 0:
                    rss = server.rss_mib()
                    if rss is not None:
                        stats.rss_mib.append(round(rss, 1))
                    out(f"{i} frames, {stats.health_ok} health checks ok, {stats.tracebacks} tracebacks, "
                        f"{time.monotonic() - started:.0f} s" + (f", server RssAnon {rss:.0f} MiB" if rss else ""))
        for c in [*pools["namesrv"], *pools["broker"], *raw.values()]:
            await c.close()
        nursery.cancel_scope.cancel()
    stats.seconds = time.monotonic() - started
    return stats


async def fd_exhaustion_check(server: Server, topics: int = 4, headroom: int = 40) -> str:
    """The broker out of file descriptors (its limit lowered to what it uses + ``headroom``,
    then held connections take the rest): sends on a connection opened before may fail, but
    every ACKNOWLEDGED one must be pullable once descriptors are back (a transient OSError in
    dispatch must not make a record be passed over), and the broker must recover. "ok" or what failed."""
    import resource
    import socket

    if server.proc is None or not server.alive():
        return "not run"
    pid = server.proc.pid
    old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    names = [f"FuzzFdT{i}" for i in range(topics)]
    acked: dict[str, list[bytes]] = {n: [] for n in names}
    held: list[socket.socket] = []
    try:
        async with Client(server.broker, server.creds) as c:
            for n in names:  # consume-queue files are made on a topic's first dispatch: during the exhaustion
                r = await c.invoke(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                    "topic": n, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
                    "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
                if r.code != ResponseCode.SUCCESS:
                    return f"create {n}: code {r.code} {r.remark}"
            used = len(os.listdir(f"/proc/{pid}/fd"))
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (used + headroom, old[1]))
            host, port = _addr(server.broker)
            try:
                for _ in range(headroom + 20):
                    held.append(socket.create_connection((host, port), timeout=1))
            except OSError:
                pass
            await trio.sleep(0.5)
            for i in range(3):
                for n in names:
                    body = f"{n}-during-fd-exhaustion-{i}".encode()
                    r = await c.invoke(RequestCode.SEND_MESSAGE_V2, _send_ext(n), body)
                    if r.code == ResponseCode.SUCCESS:
                        acked[n].append(body)
                await trio.sleep(0.3)
            for sock in held:
                sock.close()
            held.clear()
            resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
            await trio.sleep(1.0)
            for n in names:  # one more after: it makes the topic dispatchable again in any case
                body = f"{n}-after".encode()
                r = await c.invoke(RequestCode.SEND_MESSAGE_V2, _send_ext(n), body)
                if r.code == ResponseCode.SUCCESS:
                    acked[n].append(body)
        deadline = trio.current_time() + 10
        async with Client(server.broker, server.creds) as c:
            for n in names:  # the pull (no subscription flag) reads the group's subscription of n
                await c.invoke(RequestCode.HEART_BEAT, {}, _heartbeat_body("fuzz-fd@1", HEALTH_GROUP, n))
                while True:
                    r = await c.invoke(RequestCode.PULL_MESSAGE, _pull_ext(n, HEALTH_GROUP, 0, 0))
                    got = [m.body for m in decode_messages(bytes(r.body or b""))] if r.code == ResponseCode.SUCCESS else []
                    lost = [b for b in acked[n] if b not in got]
                    if not lost:
                        break
                    if trio.current_time() > deadline:
                        return (f"{len(lost)} acknowledged message(s) of {n} not pullable after the descriptors came "
                                f"back (pull from 0: code {r.code} {r.remark}): {lost[0]!r}")
                    await trio.sleep(0.2)
        problem = await health_check(server.namesrv, server.broker, -2, creds=server.creds)
        return "ok" if problem is None else f"health check after the exhaustion: {problem}"
    except (OSError, ConnectionError, trio.TooSlowError, KeyError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        for sock in held:
            sock.close()
        if server.alive():
            resource.prlimit(pid, resource.RLIMIT_NOFILE, old)


def crash_restart_and_verify(server: Server, stats: Stats) -> None:
    """What the fuzzed store must survive: a crash (SIGKILL, then start and a health check
    on a new connection: startup never dies on a record) and `rmqd store verify` after a
    clean stop (every record, unit and index entry readable)."""
    if server.attached or not server.alive():
        return
    if server.acl:  # a graceful restart: the acl files as the frames left them must load
        failed = server.restart()
        stats.acl_files = "ok" if failed is None else failed
        if failed is None:
            stats.restarts_ok += 1
        else:
            stats.restarts_failed += 1
            return
    server.kill()
    t0 = time.monotonic()
    try:
        server.start(timeout=120)
    except RuntimeError as exc:
        stats.restart = f"start after SIGKILL failed: {exc}"[:2000]
        return
    problem = trio.run(functools.partial(health_check, server.namesrv, server.broker, -1, creds=server.creds))
    stats.restart = "ok" if problem is None else f"health check after SIGKILL restart: {problem}"
    stats.restart_s = time.monotonic() - t0
    sigs = traceback_signatures(server.new_log())
    stats.tracebacks += len(sigs)
    for sig in sigs:
        stats.distinct.setdefault(sig, "(logged during the restart after SIGKILL)")
    server.stop()
    if server.acl:
        problem = acl_files_problem(server)
        if problem is not None:
            stats.acl_files = problem
    stats.verify = store_verify(server)


def store_verify(server: Server) -> str:
    """`rmqd store verify` of a stopped server's store: "ok" or its exit status and last lines."""
    proc = subprocess.run([sys.executable, "-m", "rmqd", "store", "verify", "-c", str(server.workdir / "broker.conf"),
                           str(server.workdir / "store")], cwd=REPO, capture_output=True, text=True, errors="replace",
                          timeout=600)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
    return "ok" if proc.returncode == 0 else f"exit {proc.returncode}: " + " / ".join(tail)


def report(stats: Stats, out: Callable[[str], None] = print) -> None:
    out(f"frames sent         {stats.frames}")
    out(f"duration            {stats.seconds:.1f} s ({stats.frames / max(stats.seconds, 1e-9):.0f} frames/s)")
    out(f"tracebacks          {stats.tracebacks} ({len(stats.distinct)} distinct)")
    out(f"health checks       {stats.health_ok} ok, {stats.health_failed} failed")
    out(f"wedges              {stats.wedges}")
    out(f"server closes       {stats.server_closes}")
    out(f"responses           {sum(stats.responses.values())} to {stats.intact_frames} frames with a decodable header")
    out(f"server alive        {not stats.server_died}")
    if stats.rss_mib:
        out(f"server RssAnon      {stats.rss_mib[0]:.0f} MiB at the first progress line, {stats.rss_mib[-1]:.0f} MiB "
            f"at the last, max {max(stats.rss_mib):.0f} MiB")
    out(f"fd exhaustion       {stats.fd_exhaustion}")
    out(f"SIGKILL + restart   {stats.restart}" + (f" (ready in {stats.restart_s:.2f} s)" if stats.restart == "ok" else ""))
    out(f"store verify        {stats.verify}")
    if stats.by_credentials:
        out(f"acl files           {stats.acl_files}")
        out(f"graceful restarts   {stats.restarts_ok} ok, {stats.restarts_failed} failed")
        out("frames by creds     " + ", ".join(f"{k}:{v}" for k, v in sorted(stats.by_credentials.items())))
    out("responses by code   " + ", ".join(f"{k}:{v}" for k, v in stats.responses.most_common(12)))
    out("frames by mutator   " + ", ".join(f"{k}:{v}" for k, v in sorted(stats.by_mutator.items())))
    for f in stats.failures[:20]:
        out(f"FAILURE {f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--connections", type=int, default=4, help="pipelined connections per server")
    ap.add_argument("--health-every", type=int, default=300)
    ap.add_argument("--namesrv", help="attach to this name server (host:port) instead of starting rmqd")
    ap.add_argument("--broker", help="attach to this broker (host:port)")
    ap.add_argument("--log", help="with --namesrv/--broker: the attached server's log file, scanned for "
                                   "tracebacks from its current end on")
    ap.add_argument("--workdir", help="where the started rmqd keeps its store and log (default: a temp dir)")
    ap.add_argument("--no-restart", action="store_true",
                    help="skip the final checks: descriptor exhaustion, SIGKILL + restart + health check, "
                         "`rmqd store verify`")
    ap.add_argument("--json", help="also write the summary as JSON to this file")
    ap.add_argument("--acl", action="store_true", help="aclEnable=true: signed, badly signed, tampered and "
                                                      "unsigned frames, ACL codes 50-54, acl files checked on restarts")
    ap.add_argument("--restart-every", type=int, default=None,
                    help="stop (SIGTERM) and start the broker every N frames (default: 20000 with --acl, else never)")
    ap.add_argument("--grpc", action="store_true",
                    help="fuzz the gRPC port (RocketMQ 5.x clients) instead: malformed HTTP/2 and gRPC "
                         "(scripts/fuzz_grpc.py), with gRPC and Remoting health checks")
    args = ap.parse_args(argv)
    if args.grpc:
        return grpc_mode(args)
    if bool(args.namesrv) != bool(args.broker):
        ap.error("--namesrv and --broker go together")
    tmp = None
    if args.workdir:
        workdir = Path(args.workdir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="rmqd-fuzz-")
        workdir = Path(tmp.name)
    server = Server(workdir, args.namesrv, args.broker, acl=args.acl)
    restart_every = args.restart_every if args.restart_every is not None else (20_000 if args.acl else 0)
    if args.log and server.attached:
        server.log_path = Path(args.log)
        server._log_pos = server.log_path.stat().st_size
    try:
        server.start()
        print(f"fuzzing name server {server.namesrv} and broker {server.broker}, seed {args.seed}, "
              f"{args.frames} frames" + (", ACL on" if args.acl else ""), flush=True)
        stats = trio.run(functools.partial(fuzz, server, args.frames, args.seed, args.connections, args.health_every,
                                           20, restart_every=restart_every))
        if not args.no_restart:
            if not server.attached:
                stats.fd_exhaustion = trio.run(fd_exhaustion_check, server)
                server.new_log()  # config saves failing with EMFILE log their traceback there: expected, not counted
            crash_restart_and_verify(server, stats)
    finally:
        server.stop()
    report(stats)
    if args.json:
        Path(args.json).write_text(json.dumps(stats.as_dict(), indent=1))
    if tmp is not None and stats.ok():
        tmp.cleanup()
    elif tmp is not None:
        print(f"store and log kept in {workdir}")
    return 0 if stats.ok() else 1


def grpc_mode(args: argparse.Namespace) -> int:
    """--grpc: a started rmqd with its gRPC port, fuzzed by scripts/fuzz_grpc.py; then SIGKILL,
    restart and a health check on both ports, and `rmqd store verify`."""
    import fuzz_grpc

    tmp = tempfile.TemporaryDirectory(prefix="rmqd-fuzz-grpc-") if not args.workdir else None
    workdir = Path(args.workdir) if args.workdir else Path(tmp.name)  # type: ignore[union-attr]
    grpc_port = free_port()
    server = Server(workdir, conf=f"grpcServerPort={grpc_port}\n")
    stats = Stats()
    try:
        server.start()
        print(f"fuzzing the gRPC port {grpc_port} of rmqd (broker {server.broker}), seed {args.seed}, "
              f"{args.frames} frames", flush=True)
        first = trio.run(health_check, server.namesrv, server.broker, 0)  # also creates the health topic
        if first is not None:
            raise RuntimeError(f"the server is not healthy before fuzzing: {first}")

        def log_problems() -> list[str]:
            sigs = traceback_signatures(server.new_log())
            stats.tracebacks += len(sigs)
            for sig in sigs:
                stats.distinct.setdefault(sig, "")
            return sigs

        async def remote(n: int) -> str | None:
            return await health_check(server.namesrv, server.broker, n)

        gstats = trio.run(lambda: fuzz_grpc.fuzz(grpc_port, args.frames, args.seed, HEALTH_TOPIC, HEALTH_GROUP,
                                                 connections=args.connections, health_every=max(args.health_every, 500),
                                                 remote_health=remote, check_log=log_problems))
        log_problems()
        stats.frames, stats.seconds = gstats.frames, gstats.seconds
        stats.health_ok, stats.health_failed = gstats.health_ok, gstats.health_failed
        stats.failures += gstats.failures
        stats.server_died = not server.alive()
        if not args.no_restart and server.alive():
            server.kill()
            try:
                server.start(timeout=120)
                problem = (trio.run(health_check, server.namesrv, server.broker, -1)
                           or trio.run(fuzz_grpc.grpc_health, grpc_port, HEALTH_TOPIC))
                stats.restart = "ok" if problem is None else f"health check after SIGKILL restart: {problem}"
            except RuntimeError as exc:
                stats.restart = f"start after SIGKILL failed: {exc}"[:2000]
            log_problems()
            server.stop()
            stats.verify = store_verify(server)
    finally:
        server.stop()
    fuzz_grpc.report(gstats)
    print(f"tracebacks          {stats.tracebacks} ({len(stats.distinct)} distinct)")
    for sig in stats.distinct:
        print(f"TRACEBACK {sig}")
    print(f"server alive        {not stats.server_died}")
    print(f"SIGKILL + restart   {stats.restart}")
    print(f"store verify        {stats.verify}")
    if args.json:
        Path(args.json).write_text(json.dumps({**stats.as_dict(), "grpc": {
            "connections": gstats.connections, "goaways": gstats.goaways, "by_mutator": dict(gstats.by_mutator)}},
            indent=1))
    if tmp is not None and stats.ok():
        tmp.cleanup()
    return 0 if stats.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
