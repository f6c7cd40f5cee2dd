"""The gRPC compat driver for the RocketMQ 5.x Python client (rocketmq-python-client 5.1.2).

Runs in the client's own venv (compat_tests/drivers/grpc5/target/python-venv; its package
`rocketmq` would shadow the C++ client's in the project venv), so it imports nothing but the
client and the standard library. Same protocol as java/GrpcDriver.java (compat_tests/grpc5_harness.py):
a JSON case file in, JSON lines out, "stop" on stdin ends a consumer, a hard deadline exits with 3.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
import threading
import time
from typing import Any

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message, MessageListener,
                      Producer, PushConsumer, SimpleConsumer, TransactionChecker, TransactionResolution)
from rocketmq.grpc_protocol import FilterType

_lock = threading.Lock()
BIG_BODY = 64 * 1024
STOP_LINE = threading.Event()
STOP_ANY = threading.Event()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({**fields, "event": event, "t": round(time.time(), 3)}, sort_keys=True)
    with _lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def error_of(exc: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"error": f"{type(exc).__name__}: {exc}"}
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        out["code"] = code
    else:
        m = re.search(r"\b(4\d{4}|5\d{4})\b", str(exc))
        if m:
            out["code"] = int(m.group(1))
    return out


def watch_stdin() -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            STOP_LINE.set()
            break
    STOP_ANY.set()


def configuration(c: dict[str, Any]) -> ClientConfiguration:
    creds = Credentials(c["access_key"], c["secret_key"]) if c.get("access_key") else Credentials()
    return ClientConfiguration(c["endpoints"], creds, request_timeout=int(c.get("request_timeout_s", 3)))


def filter_of(c: dict[str, Any]) -> FilterExpression:
    kind = FilterType.SQL if c.get("expression_type") == "SQL92" else FilterType.TAG
    return FilterExpression(c.get("expression", "*"), kind)


def view(m: Any) -> dict[str, Any]:
    body = bytes(m.body)
    v: dict[str, Any] = {"body_len": len(body), "msgId": m.message_id,
                         "topic": m.topic, "keys": list(m.keys or []), "props": dict(m.properties or {}),
                         "deliveryAttempt": m.delivery_attempt, "bornHost": m.born_host}
    if len(body) <= BIG_BODY:
        v["body_b64"] = base64.b64encode(body).decode("ascii")
    else:  # a multi-MiB JSON line helps nobody: its length and digest
        v["body_sha256"] = hashlib.sha256(body).hexdigest()
    if m.tag is not None:
        v["tag"] = m.tag
    if m.message_group:
        v["messageGroup"] = m.message_group
    if m.delivery_timestamp:
        v["deliveryTimestamp"] = m.delivery_timestamp
    if m.born_timestamp:
        v["bornTimestamp"] = m.born_timestamp
    return v


def build(c: dict[str, Any], spec: dict[str, Any]) -> Message:
    m = Message()
    m.topic = c["topic"]
    m.body = base64.b64decode(spec["body_b64"])
    if "tag" in spec:
        m.tag = spec["tag"]
    for key in spec.get("keys") or ():
        m.keys = key  # the client's setter adds one key per assignment
    if spec.get("group"):
        m.message_group = spec["group"]
    if "delay_ms" in spec:  # this client takes whole seconds since the epoch
        m.delivery_timestamp = int(-(-(time.time() * 1000 + int(spec["delay_ms"])) // 1000))
    for k, v in (spec.get("props") or {}).items():
        m.add_property(k, v)
    return m


class Checker(TransactionChecker):
    def __init__(self, answer: str, by_body: dict[str, str]) -> None:
        self.answer = answer
        self.by_body = by_body  # a message's own answer to check-backs

    def check(self, message: Message) -> TransactionResolution:
        v = view(message)
        answer = self.by_body.get(v["body_b64"], self.answer)
        emit("check", answer=answer, **v)
        if answer == "commit":
            return TransactionResolution.COMMIT
        if answer == "rollback":
            return TransactionResolution.ROLLBACK
        return TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED


def produce(c: dict[str, Any]) -> None:
    threads = int(c.get("threads", 1))
    mode = c.get("mode", "sync")
    producers = []
    try:
        for _ in range(threads):
            by_body = {m["body_b64"]: m["check"] for m in c["messages"] if "check" in m}
            checker = Checker(c.get("check", "commit"), by_body) if mode == "transaction" else None
            p = Producer(configuration(c), (c["topic"],), checker, tls_enable=bool(c.get("tls")))
            p.startup()
            producers.append(p)
    except Exception as exc:  # noqa: BLE001 - reported as an event
        emit("start_error", **error_of(exc))
        emit("done")
        return
    emit("started")

    def work(thread: int, producer: Producer) -> None:
        pending = []
        for i, spec in enumerate(c["messages"]):
            if spec.get("thread", i % threads) != thread:
                continue
            try:
                if mode == "async":
                    pending.append((i, producer.send_async(build(c, spec))))
                elif mode == "transaction":
                    tx = producer.begin_transaction()
                    receipt = producer.send(build(c, spec), tx)
                    emit("sent", index=i, thread=thread, msgId=str(receipt.message_id))
                    what = spec.get("tx", "commit")
                    if what == "commit":
                        tx.commit()
                    elif what == "rollback":
                        tx.rollback()
                else:
                    receipt = producer.send(build(c, spec))
                    emit("sent", index=i, thread=thread, msgId=str(receipt.message_id))
            except Exception as exc:  # noqa: BLE001
                emit("send_error", index=i, **error_of(exc))
        for i, future in pending:
            try:
                receipt = future.result(timeout=30)
                emit("sent", index=i, thread=thread, msgId=str(receipt.message_id))
            except Exception as exc:  # noqa: BLE001
                emit("send_error", index=i, **error_of(exc))

    workers = [threading.Thread(target=work, args=(t, p)) for t, p in enumerate(producers)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if c.get("check_wait_s"):
        STOP_LINE.wait(float(c["check_wait_s"]))
    for p in producers:
        p.shutdown()
    emit("done")


def simple(c: dict[str, Any]) -> None:
    try:
        consumer = SimpleConsumer(configuration(c), c["group"], {c["topic"]: filter_of(c)},
                                  await_duration=int(c.get("await_s", 5)), tls_enable=bool(c.get("tls")))
        consumer.startup()
    except Exception as exc:  # noqa: BLE001
        emit("start_error", **error_of(exc))
        emit("done")
        return
    emit("started")
    ack = c.get("ack", "all")
    expect = c.get("expect", float("inf"))
    started = time.monotonic()
    min_s = float(c.get("min_s", 0))
    run_s = float(c.get("run_s", float(c.get("deadline_s", 60)) - 5))
    got = 0
    while (got < expect or time.monotonic() - started < min_s) and not STOP_LINE.is_set() \
            and time.monotonic() - started < run_s:
        if got == 0:
            emit("polling")
        try:
            messages = consumer.receive(int(c.get("max_count", 16)), int(c.get("invisible_s", 15)))
        except Exception as exc:  # noqa: BLE001
            err = error_of(exc)
            emit("receive_error", **err)
            if err.get("code") != 40401:
                time.sleep(0.2)
            continue
        for m in messages or []:
            got += 1
            emit("message", **view(m))
            try:
                if ack.startswith("change:") and m.delivery_attempt == 1:
                    consumer.change_invisible_duration(m, int(float(ack[7:])))
                    emit("changed", msgId=m.message_id)
                elif (got % 2 == 1) if ack == "half" else ack == "all" or ack.startswith("change:") or (
                        ack.startswith("after:") and m.delivery_attempt >= int(ack[6:])):
                    consumer.ack(m)
                    emit("ack", msgId=m.message_id)
            except Exception as exc:  # noqa: BLE001
                emit("ack_error", msgId=m.message_id, **error_of(exc))
    consumer.shutdown()
    emit("done")


class Listener(MessageListener):
    def __init__(self, fail_times: int) -> None:
        self.fail_times = fail_times

    def consume(self, message: Message) -> ConsumeResult:
        fail = (message.delivery_attempt or 1) <= self.fail_times
        emit("message", result="FAILURE" if fail else "SUCCESS", **view(message))
        return ConsumeResult.FAILURE if fail else ConsumeResult.SUCCESS


def push(c: dict[str, Any]) -> None:
    try:
        consumer = PushConsumer(configuration(c), c["group"], Listener(int(c.get("fail_times", 0))),
                                {c["topic"]: filter_of(c)}, tls_enable=bool(c.get("tls")))
        consumer.startup()
    except Exception as exc:  # noqa: BLE001
        emit("start_error", **error_of(exc))
        emit("done")
        return
    emit("started")
    STOP_ANY.wait()
    consumer.shutdown()
    emit("done")


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        case = json.load(f)
    deadline = float(case.get("deadline_s", 60))

    def fire() -> None:
        emit("timeout", after_s=deadline)
        os._exit(3)

    timer = threading.Timer(deadline, fire)
    timer.daemon = True
    timer.start()
    threading.Thread(target=watch_stdin, daemon=True).start()
    role = {"produce": produce, "simple": simple, "push": push}.get(case.get("role"))
    try:
        if role is None:
            raise ValueError(f"unknown role {case.get('role')}")
        role(case)
    except Exception as exc:  # noqa: BLE001
        emit("driver_error", **error_of(exc))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
