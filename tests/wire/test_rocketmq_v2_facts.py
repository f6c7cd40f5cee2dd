"""wire/rocketmq_v2.py's facts table against the published protocol.

The reference is the descriptors of org.apache.rocketmq:rocketmq-proto:2.0.4 (Maven Central), the
artifact Apache RocketMQ 5.3.3 and rocketmq-client-java 5.0.8 are built with, dumped at set-up by
compat_tests/drivers/grpc5/setup.sh (java/DumpProto.java). Every message, field (name, number,
type, label, type name, proto3 optional, oneof), enum value and service method must match."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from rmqd.wire.rocketmq_v2 import PACKAGE, build_files, message_class, pb

DESC = Path(__file__).resolve().parents[2] / "compat_tests" / "drivers" / "grpc5" / "target" / "rocketmq-proto-2.0.4.desc"


def _published() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    if not DESC.is_file():
        reason = f"{DESC} is missing: run compat_tests/drivers/grpc5/setup.sh (scripts/dev setup --all)"
        if os.environ.get("RMQD_REQUIRE_ALL"):
            pytest.fail(reason)
        pytest.skip(reason)
    fds = descriptor_pb2.FileDescriptorSet.FromString(DESC.read_bytes())
    return {f.name: f for f in fds.file if f.package == PACKAGE}


def _field_facts(msg: descriptor_pb2.DescriptorProto) -> dict[int, tuple]:
    out = {}
    for f in msg.field:
        oneof = msg.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
        out[f.number] = (f.name, f.type, f.label, f.type_name, f.proto3_optional, oneof)  # json_name is derived
    return out


def _messages(fdp: descriptor_pb2.FileDescriptorProto) -> dict[str, descriptor_pb2.DescriptorProto]:
    out = {}

    def walk(prefix: str, msgs: list) -> None:
        for m in msgs:
            out[prefix + m.name] = m
            walk(prefix + m.name + ".", list(m.nested_type))
    walk("", list(fdp.message_type))
    return out


def _enums(fdp: descriptor_pb2.FileDescriptorProto) -> dict[str, list[tuple[str, int]]]:
    out = {e.name: [(v.name, v.number) for v in e.value] for e in fdp.enum_type}
    for name, m in _messages(fdp).items():
        for e in m.enum_type:
            out[f"{name}.{e.name}"] = [(v.name, v.number) for v in e.value]
    return out


def test_files_match_the_published_protocol_field_by_field() -> None:
    published = _published()
    ours = {f.name: f for f in build_files()}
    assert set(ours) == set(published)
    for name, theirs in published.items():
        mine = ours[name]
        assert list(mine.dependency) == list(theirs.dependency), name
        their_msgs, my_msgs = _messages(theirs), _messages(mine)
        assert sorted(my_msgs) == sorted(their_msgs), name
        for msg_name, their_msg in their_msgs.items():
            my_msg = my_msgs[msg_name]
            assert _field_facts(my_msg) == _field_facts(their_msg), f"{name}: {msg_name}"
            assert my_msg.options.map_entry == their_msg.options.map_entry, msg_name
            assert [o.name for o in my_msg.oneof_decl] == [o.name for o in their_msg.oneof_decl], msg_name
        assert _enums(mine) == _enums(theirs), name
        their_services = {s.name: s for s in theirs.service}
        assert sorted(s.name for s in mine.service) == sorted(their_services), name
        for service in mine.service:
            their_methods = {m.name: (m.input_type, m.output_type, m.client_streaming, m.server_streaming)
                             for m in their_services[service.name].method}
            my_methods = {m.name: (m.input_type, m.output_type, m.client_streaming, m.server_streaming)
                          for m in service.method}
            assert my_methods == their_methods, service.name


def test_bytes_interoperate_with_the_published_descriptors() -> None:
    """A message serialized by classes built from the published descriptors parses with ours and
    back, unknown fields included (a newer client's additions survive)."""
    from google.protobuf import descriptor_pool, message_factory

    published = _published()
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import duration_pb2, timestamp_pb2
    for wk in (timestamp_pb2, duration_pb2):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(wk.DESCRIPTOR.serialized_pb))
    for name in ("apache/rocketmq/v2/definition.proto", "apache/rocketmq/v2/service.proto"):
        pool.Add(published[name])
    Theirs = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.SendMessageRequest"))
    theirs = Theirs()
    m = theirs.messages.add()
    m.topic.name = "T"
    m.user_properties["k"] = "v"
    m.system_properties.tag = "A"
    m.system_properties.keys.extend(["x", "y"])
    m.system_properties.message_group = "g"
    m.system_properties.delivery_timestamp.seconds = 5
    m.body = b"\x00\x01"
    data = theirs.SerializeToString()
    ours = pb.SendMessageRequest.FromString(data)
    assert ours.messages[0].system_properties.message_group == "g"
    assert ours.messages[0].system_properties.HasField("delivery_timestamp")
    assert not ours.messages[0].system_properties.HasField("receipt_handle")
    assert Theirs.FromString(ours.SerializeToString()) == theirs
    assert message_class("SendMessageRequest") is type(ours)
