#!/usr/bin/env python3
"""Driver for the official Apache RocketMQ C++ client (librocketmq.so from PyPI `rocketmq` 0.4.4).

Run as a subprocess (a native crash must not take pytest down):
    python cpp_client.py CASE.json
CASE.json: {"role": "produce" | "push" | "pull", "namesrv": "127.0.0.1:9876", "topic", "group",
            "deadline_s", ...role fields (see the run_* functions)}.
stdout: JSON lines (see common.py); stdin: the controller writes "stop" (or closes it) to end a
push consumer.  Exit code 0 = ran to the end, 3 = deadline hit, anything else = crashed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import arm_deadline, b64, emit, hard_exit, read_case, unb64, watch_stdin_for_stop  # noqa: E402

import cpp_native  # noqa: E402
from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, RecvMessage  # noqa: E402
from rocketmq.ffi import MessageModel, _CPullStatus, dll  # noqa: E402

# Properties the client or broker add on their own; reported but not "user" properties.
SYSTEM_PROPERTIES = {
    "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
    "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY", "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME", "CLUSTER", "TRAN_PREPARED_QUEUE_OFFSET", "TRANSACTION_CHECK_TIMES",
    "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID", "SHARDING_KEY",
}


_KEEP: list = []  # messages and callbacks the native library may still point at


def _status(status) -> str:
    """The C++ wrapper calls SEND_OK just OK; report the Java/broker name."""
    return "SEND_OK" if status.name == "OK" else status.name


def build_message(topic: str, spec: dict[str, Any]) -> Message:
    msg = Message(topic)
    cpp_native.set_byte_body(msg._handle, unb64(spec.get("body_b64", "")))
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    if spec.get("keys"):
        msg.set_keys(spec["keys"])
    for k, v in (spec.get("props") or {}).items():
        msg.set_property(k, v)
    if spec.get("delay_level"):
        msg.set_delay_time_level(int(spec["delay_level"]))
    return msg


def describe(handle: int) -> dict[str, Any]:
    """Everything the C++ client tells about a received message."""
    m = RecvMessage(handle)
    props = cpp_native.message_properties(handle)
    return {
        "topic": m.topic,
        "tags": (m.tags or b"").decode("utf-8", "surrogateescape"),
        "keys": (m.keys or b"").decode("utf-8", "surrogateescape"),
        "body_b64": b64(cpp_native.message_body(handle)),
        "msgId": m.id,
        "offsetMsgId": cpp_native.offset_msg_id(handle),
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.commit_log_offset,
        "reconsumeTimes": m.reconsume_times,
        "storeSize": m.store_size,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "flag": cpp_native.message_flag(handle),
        "sysFlag": cpp_native.message_sys_flag(handle),
        "properties": props,
        "userProperties": {k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES},
    }


def run_produce(case: dict[str, Any]) -> None:
    producer = Producer(case["group"], timeout=int(case.get("send_timeout_ms", 3000)),
                        max_message_size=case.get("max_message_size"))  # the C++ default caps bodies at 128 KiB
    producer.set_namesrv_addr(case["namesrv"])
    producer.start()
    emit("started")
    mode = case.get("mode", "sync")
    specs = case.get("messages", [])
    topic = case["topic"]
    if mode == "batch":
        msgs = [build_message(topic, s) for s in specs]
        try:
            r = producer.send_batch(msgs)
            emit("sent", index=0, count=len(msgs), status=_status(r.status), msgId=r.msg_id, queueOffset=r.offset)
        except Exception as e:  # the client's own error text is the result
            emit("send_error", index=0, error=f"{type(e).__name__}: {e}")
    else:
        pending: list[threading.Event] = []
        for i, spec in enumerate(specs):
            msg = build_message(topic, spec)
            try:
                if mode == "sync":
                    r = producer.send_sync(msg)
                    emit("sent", index=i, status=_status(r.status), msgId=r.msg_id, queueOffset=r.offset,
                         uniqKey=cpp_native.message_properties(msg._handle).get("UNIQ_KEY"))
                elif mode == "async":
                    done = threading.Event()
                    pending.append(done)

                    def ok(r, i=i, done=done, msg=msg):
                        emit("sent", index=i, status=_status(r.status), msgId=r.msg_id, queueOffset=r.offset)
                        done.set()

                    def fail(e, i=i, done=done):
                        emit("send_error", index=i, error=f"{type(e).__name__}: {e}")
                        done.set()

                    producer.send_async(msg, ok, fail)
                elif mode == "orderly":
                    # the wrapper's selector: queue = arg % number of queues (like Java's SelectMessageQueueByHash)
                    r = producer.send_orderly(msg, int(spec.get("shard", 0)))
                    emit("sent", index=i, status=_status(r.status), msgId=r.msg_id, queueOffset=r.offset,
                         shard=int(spec.get("shard", 0)))
                elif mode == "oneway":
                    producer.send_oneway(msg)
                    emit("sent", index=i, status="ONEWAY",
                         msgId=cpp_native.message_properties(msg._handle).get("UNIQ_KEY"))
                else:
                    raise ValueError(f"unknown produce mode {mode!r}")
            except Exception as e:
                emit("send_error", index=i, error=f"{type(e).__name__}: {e}")
            _KEEP.append(msg)
        for done in pending:
            done.wait(max(1.0, float(case.get("send_timeout_ms", 3000)) / 1000 * 3))
        if mode == "oneway":
            time.sleep(float(case.get("oneway_linger_s", 1.0)))  # let the bytes leave before shutdown
    producer.shutdown()
    emit("done")


def run_push(case: dict[str, Any]) -> None:
    model = MessageModel.BROADCASTING if case.get("model") == "broadcasting" else MessageModel.CLUSTERING
    orderly = bool(case.get("orderly"))
    consumer = PushConsumer(case["group"], orderly=orderly, message_model=model)
    consumer.set_namesrv_addr(case["namesrv"])
    if case.get("instance"):
        consumer.set_instance_name(case["instance"])
    if case.get("thread_count"):
        consumer.set_thread_count(int(case["thread_count"]))
    stop = threading.Event()
    watch_stdin_for_stop(stop)
    received = 0
    lock = threading.Lock()
    stop_after = case.get("stop_after")

    from rocketmq.ffi import MSG_CALLBACK_FUNC, _CConsumeStatus

    fail_prefix = unb64(case["fail_prefix_b64"]) if case.get("fail_prefix_b64") else None
    fail_times = int(case.get("fail_times", 1))
    failures: dict[bytes, int] = {}

    def on_message(_consumer, handle):
        nonlocal received
        status = _CConsumeStatus.CONSUME_SUCCESS.value
        try:
            info = describe(handle)
            body = cpp_native.message_body(handle)
            if fail_prefix is not None and body.startswith(fail_prefix):
                with lock:
                    n = failures.get(body, 0)
                    if n < fail_times:
                        failures[body] = n + 1
                        status = _CConsumeStatus.RECONSUME_LATER.value
            emit("message", acked=status == _CConsumeStatus.CONSUME_SUCCESS.value, **info)
        except Exception as e:  # report, but ack: a decoding problem here is the driver's, not the broker's
            emit("driver_error", error=f"{type(e).__name__}: {e}", tb=traceback.format_exc())
        with lock:
            received += 1
            if stop_after and received >= int(stop_after):
                threading.Timer(float(case.get("linger_s", 0.0)), stop.set).start()
        return status

    cb = MSG_CALLBACK_FUNC(on_message)
    _KEEP.append(cb)
    dll.Subscribe(consumer._handle, case["topic"].encode(), case.get("expression", "*").encode())
    if orderly:
        dll.RegisterMessageCallbackOrderly(consumer._handle, cb)
    else:
        dll.RegisterMessageCallback(consumer._handle, cb)
    consumer.start()
    emit("started")
    stop.wait()
    emit("stopping", received=received)
    consumer.shutdown()
    emit("done", received=received)


def run_pull(case: dict[str, Any]) -> None:
    """Pull every queue of the topic with the C++ DefaultMQPullConsumer.

    start="stored": begin each queue at the offset the broker stored for the group
    (RemoteBrokerOffsetStore::readOffset -> QUERY_CONSUMER_OFFSET; -1 -> 0); "zero": at 0.
    After reading up to `limit` messages in total (or everything there is), commit the next
    offsets to the broker (updateConsumeOffset + persist -> UPDATE_CONSUMER_OFFSET) if `commit`.
    """
    consumer = PullConsumer(case["group"])
    consumer.set_namesrv_addr(case["namesrv"])
    consumer.start()
    emit("started")
    handle = consumer._handle
    from ctypes import POINTER, c_int, c_longlong, pointer

    from rocketmq.ffi import _CMessageQueue

    topic = case["topic"]
    expression = case.get("expression", "*").encode()
    limit = case.get("limit")
    max_num = int(case.get("max_num", 32))
    mqs = POINTER(_CMessageQueue)()
    size = c_int()
    deadline = time.time() + float(case.get("queue_wait_s", 10))
    while True:
        rc = dll.FetchSubscriptionMessageQueues(handle, topic.encode(), pointer(mqs), pointer(size))
        if rc == 0 and size.value > 0:
            break
        if time.time() > deadline:
            emit("pull_error", error=f"FetchSubscriptionMessageQueues rc={rc} size={size.value}")
            consumer.shutdown()
            emit("done", received=0)
            return
        time.sleep(0.3)
    queues = [(mqs[i].topic.decode(), mqs[i].brokerName.decode(), mqs[i].queueId) for i in range(size.value)]
    emit("queues", queues=[{"brokerName": b, "queueId": q} for _, b, q in queues])
    received = 0
    for qi, (t, broker_name, queue_id) in enumerate(queues):
        mq_obj = cpp_native.make_message_queue(t, broker_name, queue_id)
        if case.get("start", "stored") == "stored":
            stored = cpp_native.pull_fetch_offset(handle, mq_obj, True)
            offset = max(0, stored)
        else:
            stored = None
            offset = 0
        emit("queue_start", queueId=queue_id, storedOffset=stored, offset=offset)
        while limit is None or received < int(limit):
            n = max_num if limit is None else min(max_num, int(limit) - received)
            res = dll.Pull(handle, pointer(mqs[qi]), expression, c_longlong(offset), n)
            status = _CPullStatus(res.pullStatus).name
            if res.pullStatus == _CPullStatus.FOUND:
                for i in range(int(res.size)):
                    emit("message", **describe(res.msgFoundList[i]))
                received += int(res.size)
                offset = res.nextBeginOffset
                dll.ReleasePullResult(res)
                continue
            emit("pull_status", queueId=queue_id, status=status, nextBeginOffset=res.nextBeginOffset,
                 minOffset=res.minOffset, maxOffset=res.maxOffset)
            if res.pullStatus in (_CPullStatus.NO_MATCHED_MSG, _CPullStatus.OFFSET_ILLEGAL) and \
                    res.nextBeginOffset > offset:
                offset = res.nextBeginOffset
                dll.ReleasePullResult(res)
                continue
            dll.ReleasePullResult(res)
            break
        if case.get("commit", True):
            cpp_native.pull_update_offset(handle, mq_obj, offset)
            cpp_native.pull_persist_offset(handle, mq_obj)
            emit("committed", queueId=queue_id, offset=offset)
    dll.ReleaseSubscriptionMessageQueue(mqs)
    time.sleep(0.3)
    consumer.shutdown()
    emit("done", received=received)


def main() -> None:
    case = read_case()
    arm_deadline(float(case.get("deadline_s", 60)))
    role = case["role"]
    try:
        {"produce": run_produce, "push": run_push, "pull": run_pull}[role](case)
    except Exception as e:
        emit("driver_error", error=f"{type(e).__name__}: {e}", tb=traceback.format_exc())
        hard_exit(2)
    # Skip interpreter teardown: the wrapper's __del__ would shut the native client down twice.
    hard_exit(0)


if __name__ == "__main__":
    main()
