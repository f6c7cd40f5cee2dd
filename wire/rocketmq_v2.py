"""The apache.rocketmq.v2 protocol (rocketmq-proto 2.0.4) as protobuf descriptors built at import.

Why built here and not generated: `pip install rmqd` from a clean checkout must give a
working gRPC server without protoc or a network, and no source of Apache's is copied. The
protocol's facts (message and enum names, field names, numbers, types, labels, oneofs,
the service's methods and their streaming kinds) are written down below as a compact table
of our own; `build_files()` turns it into FileDescriptorProtos and the protobuf runtime
makes the message classes from them. tests/wire/test_rocketmq_v2_facts.py compares the
result field by field with the descriptors of the published artifact
(org.apache.rocketmq:rocketmq-proto:2.0.4 from Maven Central, the version both Apache
RocketMQ 5.3.3 and rocketmq-client-java 5.0.8 are built with), dumped at set-up.

Table notation (ours): a field is ``(name, number, type)`` or ``(name, number, type,
oneof)``; the type string starts with ``*`` for repeated, ``?`` for proto3 ``optional``;
``{K:V}`` is a map; ``Timestamp``/``Duration`` are google.protobuf's; any other capitalized
name is a message or enum of the package. An enum is a list of names numbered from 0, or a
dict of name -> number.

The message classes live in a private DescriptorPool, so a process that also imports a
client's generated code (the Python 5.x client registers the same file names in the
default pool) sees no clash.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2
from google.protobuf.message import Message

PACKAGE = "apache.rocketmq.v2"
DEFINITION_FILE = "apache/rocketmq/v2/definition.proto"
SERVICE_FILE = "apache/rocketmq/v2/service.proto"
ADMIN_FILE = "apache/rocketmq/v2/admin.proto"
MESSAGING_SERVICE = f"{PACKAGE}.MessagingService"
ADMIN_SERVICE = f"{PACKAGE}.Admin"

# -- definition.proto ---------------------------------------------------------------------------

DEFINITION_ENUMS: dict[str, list[str] | dict[str, int]] = {
    "TransactionResolution": ["TRANSACTION_RESOLUTION_UNSPECIFIED", "COMMIT", "ROLLBACK"],
    "TransactionSource": ["SOURCE_UNSPECIFIED", "SOURCE_CLIENT", "SOURCE_SERVER_CHECK"],
    "Permission": ["PERMISSION_UNSPECIFIED", "NONE", "READ", "WRITE", "READ_WRITE"],
    "FilterType": ["FILTER_TYPE_UNSPECIFIED", "TAG", "SQL"],
    "AddressScheme": ["ADDRESS_SCHEME_UNSPECIFIED", "IPv4", "IPv6", "DOMAIN_NAME"],
    "MessageType": ["MESSAGE_TYPE_UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION"],
    "DigestType": ["DIGEST_TYPE_UNSPECIFIED", "CRC32", "MD5", "SHA1"],
    "ClientType": ["CLIENT_TYPE_UNSPECIFIED", "PRODUCER", "PUSH_CONSUMER", "SIMPLE_CONSUMER", "PULL_CONSUMER"],
    "Encoding": ["ENCODING_UNSPECIFIED", "IDENTITY", "GZIP"],
    "Code": {
        "CODE_UNSPECIFIED": 0, "OK": 20000, "MULTIPLE_RESULTS": 30000,
        "BAD_REQUEST": 40000, "ILLEGAL_ACCESS_POINT": 40001, "ILLEGAL_TOPIC": 40002,
        "ILLEGAL_CONSUMER_GROUP": 40003, "ILLEGAL_MESSAGE_TAG": 40004, "ILLEGAL_MESSAGE_KEY": 40005,
        "ILLEGAL_MESSAGE_GROUP": 40006, "ILLEGAL_MESSAGE_PROPERTY_KEY": 40007, "INVALID_TRANSACTION_ID": 40008,
        "ILLEGAL_MESSAGE_ID": 40009, "ILLEGAL_FILTER_EXPRESSION": 40010, "ILLEGAL_INVISIBLE_TIME": 40011,
        "ILLEGAL_DELIVERY_TIME": 40012, "INVALID_RECEIPT_HANDLE": 40013,
        "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE": 40014, "UNRECOGNIZED_CLIENT_TYPE": 40015,
        "MESSAGE_CORRUPTED": 40016, "CLIENT_ID_REQUIRED": 40017, "ILLEGAL_POLLING_TIME": 40018,
        "ILLEGAL_OFFSET": 40019,
        "UNAUTHORIZED": 40100, "PAYMENT_REQUIRED": 40200, "FORBIDDEN": 40300,
        "NOT_FOUND": 40400, "MESSAGE_NOT_FOUND": 40401, "TOPIC_NOT_FOUND": 40402, "CONSUMER_GROUP_NOT_FOUND": 40403,
        "OFFSET_NOT_FOUND": 40404, "REQUEST_TIMEOUT": 40800,
        "PAYLOAD_TOO_LARGE": 41300, "MESSAGE_BODY_TOO_LARGE": 41301, "MESSAGE_BODY_EMPTY": 41302,
        "PRECONDITION_FAILED": 42800, "TOO_MANY_REQUESTS": 42900,
        "REQUEST_HEADER_FIELDS_TOO_LARGE": 43100, "MESSAGE_PROPERTIES_TOO_LARGE": 43101,
        "INTERNAL_ERROR": 50000, "INTERNAL_SERVER_ERROR": 50001, "HA_NOT_AVAILABLE": 50002,
        "NOT_IMPLEMENTED": 50100, "PROXY_TIMEOUT": 50400, "MASTER_PERSISTENCE_TIMEOUT": 50401,
        "SLAVE_PERSISTENCE_TIMEOUT": 50402, "UNSUPPORTED": 50500, "VERSION_UNSUPPORTED": 50501,
        "VERIFY_FIFO_MESSAGE_UNSUPPORTED": 50502, "FAILED_TO_CONSUME_MESSAGE": 60000,
    },
    "Language": ["LANGUAGE_UNSPECIFIED", "JAVA", "CPP", "DOT_NET", "GOLANG", "RUST", "PYTHON", "PHP", "NODE_JS",
                 "RUBY", "OBJECTIVE_C", "DART", "KOTLIN"],
    "QueryOffsetPolicy": ["BEGINNING", "END", "TIMESTAMP"],
}

Field = tuple[Any, ...]

DEFINITION_MESSAGES: dict[str, list[Field]] = {
    "FilterExpression": [("type", 1, "FilterType"), ("expression", 2, "string")],
    "RetryPolicy": [("max_attempts", 1, "int32"),
                    ("exponential_backoff", 2, "ExponentialBackoff", "strategy"),
                    ("customized_backoff", 3, "CustomizedBackoff", "strategy")],
    "ExponentialBackoff": [("initial", 1, "Duration"), ("max", 2, "Duration"), ("multiplier", 3, "float")],
    "CustomizedBackoff": [("next", 1, "*Duration")],
    "Resource": [("resource_namespace", 1, "string"), ("name", 2, "string")],
    "SubscriptionEntry": [("topic", 1, "Resource"), ("expression", 2, "FilterExpression")],
    "Address": [("host", 1, "string"), ("port", 2, "int32")],
    "Endpoints": [("scheme", 1, "AddressScheme"), ("addresses", 2, "*Address")],
    "Broker": [("name", 1, "string"), ("id", 2, "int32"), ("endpoints", 3, "Endpoints")],
    "MessageQueue": [("topic", 1, "Resource"), ("id", 2, "int32"), ("permission", 3, "Permission"),
                     ("broker", 4, "Broker"), ("accept_message_types", 5, "*MessageType")],
    "Digest": [("type", 1, "DigestType"), ("checksum", 2, "string")],
    "SystemProperties": [
        ("tag", 1, "?string"), ("keys", 2, "*string"), ("message_id", 3, "string"), ("body_digest", 4, "Digest"),
        ("body_encoding", 5, "Encoding"), ("message_type", 6, "MessageType"), ("born_timestamp", 7, "Timestamp"),
        ("born_host", 8, "string"), ("store_timestamp", 9, "?Timestamp"), ("store_host", 10, "string"),
        ("delivery_timestamp", 11, "?Timestamp"), ("receipt_handle", 12, "?string"), ("queue_id", 13, "int32"),
        ("queue_offset", 14, "?int64"), ("invisible_duration", 15, "?Duration"), ("delivery_attempt", 16, "?int32"),
        ("message_group", 17, "?string"), ("trace_context", 18, "?string"),
        ("orphaned_transaction_recovery_duration", 19, "?Duration"), ("dead_letter_queue", 20, "?DeadLetterQueue")],
    "DeadLetterQueue": [("topic", 1, "string"), ("message_id", 2, "string")],
    "Message": [("topic", 1, "Resource"), ("user_properties", 2, "{string:string}"),
                ("system_properties", 3, "SystemProperties"), ("body", 4, "bytes")],
    "Assignment": [("message_queue", 1, "MessageQueue")],
    "Status": [("code", 1, "Code"), ("message", 2, "string")],
    "UA": [("language", 1, "Language"), ("version", 2, "string"), ("platform", 3, "string"),
           ("hostname", 4, "string")],
    "Settings": [("client_type", 1, "?ClientType"), ("access_point", 2, "?Endpoints"),
                 ("backoff_policy", 3, "?RetryPolicy"), ("request_timeout", 4, "?Duration"),
                 ("publishing", 5, "Publishing", "pub_sub"), ("subscription", 6, "Subscription", "pub_sub"),
                 ("user_agent", 7, "UA"), ("metric", 8, "Metric")],
    "Publishing": [("topics", 1, "*Resource"), ("max_body_size", 2, "int32"), ("validate_message_type", 3, "bool")],
    "Subscription": [("group", 1, "?Resource"), ("subscriptions", 2, "*SubscriptionEntry"), ("fifo", 3, "?bool"),
                     ("receive_batch_size", 4, "?int32"), ("long_polling_timeout", 5, "?Duration")],
    "Metric": [("on", 1, "bool"), ("endpoints", 2, "?Endpoints")],
}

# -- service.proto ------------------------------------------------------------------------------

SERVICE_MESSAGES: dict[str, list[Field]] = {
    "QueryRouteRequest": [("topic", 1, "Resource"), ("endpoints", 2, "Endpoints")],
    "QueryRouteResponse": [("status", 1, "Status"), ("message_queues", 2, "*MessageQueue")],
    "SendMessageRequest": [("messages", 1, "*Message")],
    "SendResultEntry": [("status", 1, "Status"), ("message_id", 2, "string"), ("transaction_id", 3, "string"),
                        ("offset", 4, "int64"), ("recall_handle", 5, "string")],
    "SendMessageResponse": [("status", 1, "Status"), ("entries", 2, "*SendResultEntry")],
    "QueryAssignmentRequest": [("topic", 1, "Resource"), ("group", 2, "Resource"), ("endpoints", 3, "Endpoints")],
    "QueryAssignmentResponse": [("status", 1, "Status"), ("assignments", 2, "*Assignment")],
    "ReceiveMessageRequest": [("group", 1, "Resource"), ("message_queue", 2, "MessageQueue"),
                              ("filter_expression", 3, "FilterExpression"), ("batch_size", 4, "int32"),
                              ("invisible_duration", 5, "?Duration"), ("auto_renew", 6, "bool"),
                              ("long_polling_timeout", 7, "?Duration"), ("attempt_id", 8, "?string")],
    "ReceiveMessageResponse": [("status", 1, "Status", "content"), ("message", 2, "Message", "content"),
                               ("delivery_timestamp", 3, "Timestamp", "content")],
    "AckMessageEntry": [("message_id", 1, "string"), ("receipt_handle", 2, "string")],
    "AckMessageRequest": [("group", 1, "Resource"), ("topic", 2, "Resource"), ("entries", 3, "*AckMessageEntry")],
    "AckMessageResultEntry": [("message_id", 1, "string"), ("receipt_handle", 2, "string"), ("status", 3, "Status")],
    "AckMessageResponse": [("status", 1, "Status"), ("entries", 2, "*AckMessageResultEntry")],
    "ForwardMessageToDeadLetterQueueRequest": [
        ("group", 1, "Resource"), ("topic", 2, "Resource"), ("receipt_handle", 3, "string"),
        ("message_id", 4, "string"), ("delivery_attempt", 5, "int32"), ("max_delivery_attempts", 6, "int32")],
    "ForwardMessageToDeadLetterQueueResponse": [("status", 1, "Status")],
    "HeartbeatRequest": [("group", 1, "?Resource"), ("client_type", 2, "ClientType")],
    "HeartbeatResponse": [("status", 1, "Status")],
    "EndTransactionRequest": [("topic", 1, "Resource"), ("message_id", 2, "string"), ("transaction_id", 3, "string"),
                              ("resolution", 4, "TransactionResolution"), ("source", 5, "TransactionSource"),
                              ("trace_context", 6, "string")],
    "EndTransactionResponse": [("status", 1, "Status")],
    "PrintThreadStackTraceCommand": [("nonce", 1, "string")],
    "ThreadStackTrace": [("nonce", 1, "string"), ("thread_stack_trace", 2, "?string")],
    "VerifyMessageCommand": [("nonce", 1, "string"), ("message", 2, "Message")],
    "VerifyMessageResult": [("nonce", 1, "string")],
    "RecoverOrphanedTransactionCommand": [("message", 1, "Message"), ("transaction_id", 2, "string")],
    "TelemetryCommand": [
        ("status", 1, "?Status"),
        ("settings", 2, "Settings", "command"), ("thread_stack_trace", 3, "ThreadStackTrace", "command"),
        ("verify_message_result", 4, "VerifyMessageResult", "command"),
        ("recover_orphaned_transaction_command", 5, "RecoverOrphanedTransactionCommand", "command"),
        ("print_thread_stack_trace_command", 6, "PrintThreadStackTraceCommand", "command"),
        ("verify_message_command", 7, "VerifyMessageCommand", "command")],
    "NotifyClientTerminationRequest": [("group", 1, "?Resource")],
    "NotifyClientTerminationResponse": [("status", 1, "Status")],
    "ChangeInvisibleDurationRequest": [("group", 1, "Resource"), ("topic", 2, "Resource"),
                                       ("receipt_handle", 3, "string"), ("invisible_duration", 4, "Duration"),
                                       ("message_id", 5, "string")],
    "ChangeInvisibleDurationResponse": [("status", 1, "Status"), ("receipt_handle", 2, "string")],
    "PullMessageRequest": [("group", 1, "Resource"), ("message_queue", 2, "MessageQueue"), ("offset", 3, "int64"),
                           ("batch_size", 4, "int32"), ("filter_expression", 5, "FilterExpression"),
                           ("long_polling_timeout", 6, "Duration")],
    "PullMessageResponse": [("status", 1, "Status", "content"), ("message", 2, "Message", "content"),
                            ("next_offset", 3, "int64", "content")],
    "UpdateOffsetRequest": [("group", 1, "Resource"), ("message_queue", 2, "MessageQueue"), ("offset", 3, "int64")],
    "UpdateOffsetResponse": [("status", 1, "Status")],
    "GetOffsetRequest": [("group", 1, "Resource"), ("message_queue", 2, "MessageQueue")],
    "GetOffsetResponse": [("status", 1, "Status"), ("offset", 2, "int64")],
    "QueryOffsetRequest": [("message_queue", 1, "MessageQueue"), ("query_offset_policy", 2, "QueryOffsetPolicy"),
                           ("timestamp", 3, "?Timestamp")],
    "QueryOffsetResponse": [("status", 1, "Status"), ("offset", 2, "int64")],
    "RecallMessageRequest": [("topic", 1, "Resource"), ("recall_handle", 2, "string")],
    "RecallMessageResponse": [("status", 1, "Status"), ("message_id", 2, "string")],
}

#: method -> (request, response, client streams, server streams)
MESSAGING_METHODS: dict[str, tuple[str, str, bool, bool]] = {
    "QueryRoute": ("QueryRouteRequest", "QueryRouteResponse", False, False),
    "Heartbeat": ("HeartbeatRequest", "HeartbeatResponse", False, False),
    "SendMessage": ("SendMessageRequest", "SendMessageResponse", False, False),
    "QueryAssignment": ("QueryAssignmentRequest", "QueryAssignmentResponse", False, False),
    "ReceiveMessage": ("ReceiveMessageRequest", "ReceiveMessageResponse", False, True),
    "AckMessage": ("AckMessageRequest", "AckMessageResponse", False, False),
    "ForwardMessageToDeadLetterQueue": ("ForwardMessageToDeadLetterQueueRequest",
                                        "ForwardMessageToDeadLetterQueueResponse", False, False),
    "PullMessage": ("PullMessageRequest", "PullMessageResponse", False, True),
    "UpdateOffset": ("UpdateOffsetRequest", "UpdateOffsetResponse", False, False),
    "GetOffset": ("GetOffsetRequest", "GetOffsetResponse", False, False),
    "QueryOffset": ("QueryOffsetRequest", "QueryOffsetResponse", False, False),
    "EndTransaction": ("EndTransactionRequest", "EndTransactionResponse", False, False),
    "Telemetry": ("TelemetryCommand", "TelemetryCommand", True, True),
    "NotifyClientTermination": ("NotifyClientTerminationRequest", "NotifyClientTerminationResponse", False, False),
    "ChangeInvisibleDuration": ("ChangeInvisibleDurationRequest", "ChangeInvisibleDurationResponse", False, False),
    "RecallMessage": ("RecallMessageRequest", "RecallMessageResponse", False, False),
}

# -- admin.proto --------------------------------------------------------------------------------

ADMIN_MESSAGES: dict[str, list[Field]] = {
    "ChangeLogLevelRequest": [("level", 1, "ChangeLogLevelRequest.Level")],
    "ChangeLogLevelResponse": [("remark", 1, "string")],
}
ADMIN_NESTED_ENUMS: dict[str, dict[str, list[str]]] = {
    "ChangeLogLevelRequest": {"Level": ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]},
}
ADMIN_METHODS: dict[str, tuple[str, str, bool, bool]] = {
    "ChangeLogLevel": ("ChangeLogLevelRequest", "ChangeLogLevelResponse", False, False),
}

# -- building -----------------------------------------------------------------------------------

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "double": _FDP.TYPE_DOUBLE, "float": _FDP.TYPE_FLOAT, "int64": _FDP.TYPE_INT64, "uint64": _FDP.TYPE_UINT64,
    "int32": _FDP.TYPE_INT32, "uint32": _FDP.TYPE_UINT32, "bool": _FDP.TYPE_BOOL, "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES, "sint32": _FDP.TYPE_SINT32, "sint64": _FDP.TYPE_SINT64,
}
_WELL_KNOWN = {"Timestamp": ".google.protobuf.Timestamp", "Duration": ".google.protobuf.Duration"}


def _enum_items(values: list[str] | dict[str, int]) -> list[tuple[str, int]]:
    """(name, number) pairs of a table enum (a list counts from 0)."""
    return list(values.items()) if isinstance(values, dict) else [(v, i) for i, v in enumerate(values)]


def _camel(name: str) -> str:
    """protoc's json_name: lowerCamelCase of the snake_case field name."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _pascal(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _set_type(f: descriptor_pb2.FieldDescriptorProto, type_name: str, enums: set[str]) -> None:
    if type_name in _SCALARS:
        f.type = _SCALARS[type_name]
    elif type_name in _WELL_KNOWN:
        f.type = _FDP.TYPE_MESSAGE
        f.type_name = _WELL_KNOWN[type_name]
    else:
        f.type = _FDP.TYPE_ENUM if type_name in enums else _FDP.TYPE_MESSAGE
        f.type_name = f".{PACKAGE}.{type_name}"


def _message(name: str, fields: list[Field], enums: set[str],
             nested_enums: dict[str, list[str]] | None = None) -> descriptor_pb2.DescriptorProto:
    msg = descriptor_pb2.DescriptorProto(name=name)
    oneofs: dict[str, int] = {}
    synthetic: list[tuple[descriptor_pb2.FieldDescriptorProto, str]] = []
    for spec in fields:
        fname, number, type_name = spec[0], spec[1], spec[2]
        f = msg.field.add(name=fname, number=number, json_name=_camel(fname), label=_FDP.LABEL_OPTIONAL)
        if type_name.startswith("{"):  # map<K, V>: a nested XxxEntry message, repeated
            key, value = type_name[1:-1].split(":")
            entry = msg.nested_type.add(name=_pascal(fname) + "Entry")
            entry.options.map_entry = True
            k = entry.field.add(name="key", number=1, json_name="key", label=_FDP.LABEL_OPTIONAL)
            _set_type(k, key, enums)
            v = entry.field.add(name="value", number=2, json_name="value", label=_FDP.LABEL_OPTIONAL)
            _set_type(v, value, enums)
            f.label = _FDP.LABEL_REPEATED
            f.type = _FDP.TYPE_MESSAGE
            f.type_name = f".{PACKAGE}.{name}.{entry.name}"
            continue
        if type_name.startswith("*"):
            f.label = _FDP.LABEL_REPEATED
            type_name = type_name[1:]
        elif type_name.startswith("?"):
            f.proto3_optional = True
            type_name = type_name[1:]
            synthetic.append((f, "_" + fname))
        _set_type(f, type_name, enums)
        if len(spec) > 3:
            oneof = spec[3]
            if oneof not in oneofs:
                oneofs[oneof] = len(msg.oneof_decl)
                msg.oneof_decl.add(name=oneof)
            f.oneof_index = oneofs[oneof]
    # protoc puts the synthetic oneofs of proto3 optional fields after the real ones
    for f, oneof in synthetic:
        f.oneof_index = len(msg.oneof_decl)
        msg.oneof_decl.add(name=oneof)
    for enum_name, values in (nested_enums or {}).items():
        e = msg.enum_type.add(name=enum_name)
        for value, number in _enum_items(values):
            e.value.add(name=value, number=number)
    return msg


def _file(name: str, deps: list[str], enums: dict[str, list[str] | dict[str, int]], messages: dict[str, list[Field]],
          known_enums: set[str], services: dict[str, dict[str, tuple[str, str, bool, bool]]],
          nested_enums: dict[str, dict[str, list[str]]] | None = None) -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name=name, package=PACKAGE, syntax="proto3", dependency=deps)
    for enum_name, values in enums.items():
        e = fdp.enum_type.add(name=enum_name)
        for value, number in _enum_items(values):
            e.value.add(name=value, number=number)
    for msg_name, fields in messages.items():
        fdp.message_type.append(_message(msg_name, fields, known_enums, (nested_enums or {}).get(msg_name)))
    for service_name, methods in services.items():
        s = fdp.service.add(name=service_name)
        for method, (req, resp, client_streaming, server_streaming) in methods.items():
            s.method.add(name=method, input_type=f".{PACKAGE}.{req}", output_type=f".{PACKAGE}.{resp}",
                         client_streaming=client_streaming, server_streaming=server_streaming)
    return fdp


def build_files() -> list[descriptor_pb2.FileDescriptorProto]:
    """definition.proto, service.proto and admin.proto as FileDescriptorProtos (from the table)."""
    enums = set(DEFINITION_ENUMS)
    wkt = ["google/protobuf/timestamp.proto", "google/protobuf/duration.proto"]
    definition = _file(DEFINITION_FILE, wkt, DEFINITION_ENUMS, DEFINITION_MESSAGES, enums, {})
    service = _file(SERVICE_FILE, ["google/protobuf/duration.proto", "google/protobuf/timestamp.proto",
                                   DEFINITION_FILE], {}, SERVICE_MESSAGES, enums,
                    {"MessagingService": MESSAGING_METHODS})
    admin_enums = enums | {"ChangeLogLevelRequest.Level"}
    admin = _file(ADMIN_FILE, [], {}, ADMIN_MESSAGES, admin_enums, {"Admin": ADMIN_METHODS}, ADMIN_NESTED_ENUMS)
    return [definition, service, admin]


def _build_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for wk in (timestamp_pb2, duration_pb2):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(wk.DESCRIPTOR.serialized_pb))
    for fdp in build_files():
        pool.Add(fdp)
    return pool


POOL = _build_pool()


def message_class(name: str) -> type[Message]:
    """The class of apache.rocketmq.v2.<name> (e.g. "SendMessageRequest")."""
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


def enum_value(enum: str, name: str) -> int:
    return POOL.FindEnumTypeByName(f"{PACKAGE}.{enum}").values_by_name[name].number


class _Namespace:
    """Attribute access to the message classes: ``pb.SendMessageRequest(...)``."""

    def __getattr__(self, name: str) -> type[Message]:
        cls = message_class(name)
        setattr(self, name, cls)
        return cls


#: Typed Any: the classes are made at import from the descriptors, so no checker can see their
#: fields; tests/wire/test_rocketmq_v2_facts.py checks them against the published .proto instead.
pb: Any = _Namespace()

#: google.protobuf's classes as this pool knows them (fields of type Timestamp / Duration)
Timestamp = message_factory.GetMessageClass(POOL.FindMessageTypeByName("google.protobuf.Timestamp"))
Duration = message_factory.GetMessageClass(POOL.FindMessageTypeByName("google.protobuf.Duration"))


def _enum_class(enum: str) -> Any:
    """A class whose attributes are the enum's numbers (``Code.OK == 20000``); Any to a checker,
    as the names come from the facts table at import."""
    return type(enum, (), dict(_enum_items(DEFINITION_ENUMS[enum])))


#: apache.rocketmq.v2.Code numbers (the RocketMQ status in every answer)
Code = _enum_class("Code")


ClientType = _enum_class("ClientType")
MessageType = _enum_class("MessageType")
FilterType = _enum_class("FilterType")
Permission = _enum_class("Permission")
AddressScheme = _enum_class("AddressScheme")
TransactionResolution = _enum_class("TransactionResolution")
TransactionSource = _enum_class("TransactionSource")
Encoding = _enum_class("Encoding")
DigestType = _enum_class("DigestType")
Language = _enum_class("Language")
QueryOffsetPolicy = _enum_class("QueryOffsetPolicy")

__all__ = [
    "ADMIN_SERVICE", "AddressScheme", "ClientType", "Code", "DigestType", "Duration", "Encoding", "FilterType",
    "Language", "MESSAGING_METHODS", "MESSAGING_SERVICE", "MessageType", "POOL", "PACKAGE", "Permission",
    "QueryOffsetPolicy", "Timestamp", "TransactionResolution", "TransactionSource", "build_files", "enum_value",
    "message_class", "pb",
]
