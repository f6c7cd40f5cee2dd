#!/usr/bin/env python3
"""Frames per second of the Remoting codec on one core (issue 2's speed target: >= 100,000/s).

Cases, each in both header serializations (JSON, ROCKETMQ):
  * send-v2 request : SEND_MESSAGE_V2 as the Java 4.9.8 client sends it, 1 KiB body;
                      "decode" also builds the typed SendMessageRequestHeaderV2 (a broker's real work)
  * pull response   : PULL_MESSAGE answer carrying 32 stored messages (~1.2 KiB records);
                      "encode" uses encode_frame_parts (the records go to the socket uncopied)
                      and "encode+join" the single-buffer encode_frame.

Usage: scripts/bench_wire.py [--seconds 0.5] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqd.wire.codes import RequestCode, ResponseCode, SerializeType  # noqa: E402
from rmqd.wire.frame import RemotingCommand, decode_frame, encode_frame, encode_frame_parts, make_response  # noqa: E402
from rmqd.wire.headers import PullMessageResponseHeader, SendMessageRequestHeaderV2  # noqa: E402

RECORD_SIZE = 1_200  # a 1 KiB body plus the fixed record fields, topic and properties
RECORDS = 32


def send_v2_request(serialize_type: int) -> RemotingCommand:
    header = SendMessageRequestHeaderV2(
        a="BenchProducerGroup", b="BenchTopic", c="TBW102", d=4, e=1, f=0, g=1795316489378, h=0,
        i="KEYS\x01bench-key\x02UNIQ_KEY\x01C000020256A65FFD2B276CCBB4A10000\x02WAIT\x01true\x02TAGS\x01TagA",
        j=0, k=False, m=False, n="broker-a",
    )
    return RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=123456, ext_fields=header.to_ext(),
                           body=os.urandom(1024), serialize_type=serialize_type)


def pull_response(serialize_type: int) -> tuple[RemotingCommand, list[memoryview]]:
    request = RemotingCommand(code=RequestCode.PULL_MESSAGE, opaque=4242, serialize_type=serialize_type)
    header = PullMessageResponseHeader(suggestWhichBrokerId=0, nextBeginOffset=132, minOffset=0, maxOffset=5000)
    store = memoryview(os.urandom(RECORD_SIZE * RECORDS))
    records = [store[i * RECORD_SIZE:(i + 1) * RECORD_SIZE] for i in range(RECORDS)]
    resp = make_response(request, ResponseCode.SUCCESS, remark="FOUND",
                         ext_fields=header.to_ext(serialize_type=serialize_type))
    return resp, records


def rate(fn: Callable[[], object], seconds: float, repeat: int) -> float:
    """Best-of-`repeat` operations per second, each run lasting about `seconds`."""
    n = 1
    while True:  # calibrate a batch size that takes ~seconds
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= seconds / 4:
            break
        n *= 2
    n = max(1, int(n * seconds / dt))
    best = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = max(best, n / (time.perf_counter() - t0))
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.5, help="duration of one timed run")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per row (best is shown)")
    args = ap.parse_args(argv)

    rows: list[tuple[str, str, str, float, int]] = []
    for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
        sname = stype.name
        req = send_v2_request(stype)
        frame = encode_frame(req)
        assert decode_frame(frame) == req

        def decode_send(frame: bytes = frame) -> object:
            cmd = decode_frame(frame)
            return SendMessageRequestHeaderV2.from_ext(cmd.ext_fields)

        rows.append(("send-v2 request 1 KiB", sname, "decode+header", rate(decode_send, args.seconds, args.repeat), len(frame)))
        rows.append(("send-v2 request 1 KiB", sname, "decode", rate(lambda: decode_frame(frame), args.seconds, args.repeat), len(frame)))
        rows.append(("send-v2 request 1 KiB", sname, "encode", rate(lambda: encode_frame(req), args.seconds, args.repeat), len(frame)))

        resp, records = pull_response(stype)
        whole = b"".join(bytes(p) for p in encode_frame_parts(resp, records))
        assert decode_frame(whole).body == b"".join(bytes(r) for r in records)
        rows.append(("pull response 32 msgs", sname, "decode", rate(lambda: decode_frame(whole), args.seconds, args.repeat), len(whole)))
        rows.append(("pull response 32 msgs", sname, "encode", rate(lambda: encode_frame_parts(resp, records), args.seconds, args.repeat), len(whole)))

        def encode_joined(resp: RemotingCommand = resp, records: list[memoryview] = records) -> bytes:
            return b"".join(encode_frame_parts(resp, records))

        rows.append(("pull response 32 msgs", sname, "encode+join", rate(encode_joined, args.seconds, args.repeat), len(whole)))

    print(f"Python {sys.version.split()[0]}, one core, best of {args.repeat} x {args.seconds}s")
    print(f"| {'case':<22} | {'header':<8} | {'operation':<13} | {'frames/s':>10} | {'us/frame':>8} | {'frame bytes':>11} |")
    print(f"|{'-' * 24}|{'-' * 10}|{'-' * 15}|{'-' * 12}|{'-' * 10}|{'-' * 13}|")
    for case, sname, op, fps, size in rows:
        print(f"| {case:<22} | {sname:<8} | {op:<13} | {fps:>10,.0f} | {1e6 / fps:>8.2f} | {size:>11,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
