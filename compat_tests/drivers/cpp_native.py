"""ctypes access to the parts of librocketmq (the C++ client in PyPI `rocketmq`) that its C API hides.

The C API returns bodies as NUL-terminated C strings and has no way to list a message's
properties or to store a pull consumer's offsets on the broker, yet the library exports the
C++ methods that do exactly that.  The library was built with the pre-C++11 libstdc++ ABI
(copy-on-write std::string: one pointer to the characters, the length 24 bytes before them;
std::map as a red-black tree whose header follows an 8-byte comparator slot), which is what
the readers below rely on.  Every reader checks what it reads so that a wrong layout gives
an error instead of garbage.

Only used inside the driver subprocess: a mistake here can crash that process, never pytest.
"""

from __future__ import annotations

import ctypes
from ctypes import c_bool, c_char_p, c_int, c_longlong, c_size_t, c_void_p

from rocketmq.ffi import dll

_GET_BODY = "_ZNK8rocketmq9MQMessage7getBodyEv"
_GET_PROPERTIES = "_ZNK8rocketmq9MQMessage13getPropertiesEv"
_GET_OFFSET_MSG_ID = "_ZNK8rocketmq12MQMessageExt14getOffsetMsgIdEv"
_GET_FLAG = "_ZNK8rocketmq9MQMessage7getFlagEv"
_GET_SYS_FLAG = "_ZNK8rocketmq9MQMessage10getSysFlagEv"
_STRING_CTOR = "_ZNSsC1EPKcmRKSaIcE"  # std::string(const char*, size_t, const allocator&)
_MQ_CTOR = "_ZN8rocketmq14MQMessageQueueC1ERKSsS2_i"
_PULL_UPDATE_OFFSET = "_ZN8rocketmq21DefaultMQPullConsumer19updateConsumeOffsetERKNS_14MQMessageQueueEx"
_PULL_FETCH_OFFSET = "_ZN8rocketmq21DefaultMQPullConsumer18fetchConsumeOffsetERKNS_14MQMessageQueueEb"
_PULL_PERSIST = "_ZN8rocketmq21DefaultMQPullConsumer34persistConsumerOffset4PullConsumerERKNS_14MQMessageQueueE"


def _fn(name: str, restype, argtypes):
    f = getattr(dll, name)
    f.restype = restype
    f.argtypes = argtypes
    return f


_get_body = _fn(_GET_BODY, c_void_p, [c_void_p])
_get_properties = _fn(_GET_PROPERTIES, c_void_p, [c_void_p, c_void_p])  # (sret, this)
_get_offset_msg_id = _fn(_GET_OFFSET_MSG_ID, c_void_p, [c_void_p])
_get_flag = _fn(_GET_FLAG, c_int, [c_void_p])
_get_sys_flag = _fn(_GET_SYS_FLAG, c_int, [c_void_p])
_string_ctor = _fn(_STRING_CTOR, None, [c_void_p, c_char_p, c_size_t, c_void_p])
_mq_ctor = _fn(_MQ_CTOR, None, [c_void_p, c_void_p, c_void_p, c_int])
_pull_update_offset = _fn(_PULL_UPDATE_OFFSET, None, [c_void_p, c_void_p, c_longlong])
_pull_fetch_offset = _fn(_PULL_FETCH_OFFSET, c_longlong, [c_void_p, c_void_p, c_bool])
_pull_persist = _fn(_PULL_PERSIST, None, [c_void_p, c_void_p])

dll.SetByteMessageBody.argtypes = [c_void_p, c_char_p, c_int]

_MAX_SANE = 512 * 1024 * 1024


def read_cow_string(string_obj_addr: int) -> bytes:
    """Bytes of a copy-on-write std::string object located at `string_obj_addr`."""
    data = ctypes.c_void_p.from_address(string_obj_addr).value
    if not data:
        raise ValueError("std::string with a null data pointer")
    length = ctypes.c_size_t.from_address(data - 24).value
    capacity = ctypes.c_size_t.from_address(data - 16).value
    if length > _MAX_SANE or capacity < length:
        raise ValueError(f"implausible std::string header: length={length} capacity={capacity}")
    return ctypes.string_at(data, length)


def message_body(handle: int) -> bytes:
    """Exact body bytes (the C API stops at the first NUL byte)."""
    return read_cow_string(_get_body(handle))


def offset_msg_id(handle: int) -> str:
    return read_cow_string(_get_offset_msg_id(handle)).decode("ascii")


def message_flag(handle: int) -> int:
    return _get_flag(handle)


def message_sys_flag(handle: int) -> int:
    return _get_sys_flag(handle)


def _walk_tree(node: int, out: list[tuple[bytes, bytes]], depth: int = 0) -> None:
    if not node:
        return
    if depth > 64:
        raise ValueError("std::map tree deeper than 64: wrong layout")
    left = ctypes.c_void_p.from_address(node + 16).value
    right = ctypes.c_void_p.from_address(node + 24).value
    _walk_tree(left, out, depth + 1)
    out.append((read_cow_string(node + 32), read_cow_string(node + 40)))
    _walk_tree(right, out, depth + 1)


def message_properties(handle: int) -> dict[str, str]:
    """All properties (system and user) of a message handle, via MQMessage::getProperties()."""
    buf = ctypes.create_string_buffer(128)  # the returned std::map (48 bytes) lives here; leaked on purpose
    _KEEP.append(buf)
    base = ctypes.addressof(buf)
    _get_properties(base, handle)
    header = base + 8
    root = ctypes.c_void_p.from_address(header + 8).value
    count = ctypes.c_size_t.from_address(header + 32).value
    if count > 100000:
        raise ValueError(f"implausible std::map size {count}")
    items: list[tuple[bytes, bytes]] = []
    if root:
        parent_of_root = ctypes.c_void_p.from_address(root + 8).value
        if parent_of_root != header:
            raise ValueError("std::map root does not point back to its header: wrong layout")
        _walk_tree(root, items)
    if len(items) != count:
        raise ValueError(f"std::map walk found {len(items)} nodes, header says {count}")
    return {k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape") for k, v in items}


_KEEP: list = []


def _make_string(value: str) -> int:
    buf = ctypes.create_string_buffer(16)
    alloc = ctypes.create_string_buffer(8)
    raw = value.encode("utf-8")
    _string_ctor(ctypes.addressof(buf), raw, len(raw), ctypes.addressof(alloc))
    _KEEP.extend((buf, alloc))
    return ctypes.addressof(buf)


def make_message_queue(topic: str, broker_name: str, queue_id: int) -> int:
    """A rocketmq::MQMessageQueue object (never destroyed: the process is short-lived)."""
    buf = ctypes.create_string_buffer(64)
    _KEEP.append(buf)
    _mq_ctor(ctypes.addressof(buf), _make_string(topic), _make_string(broker_name), queue_id)
    return ctypes.addressof(buf)


def pull_update_offset(consumer_handle: int, mq: int, offset: int) -> None:
    _pull_update_offset(consumer_handle, mq, offset)


def pull_persist_offset(consumer_handle: int, mq: int) -> None:
    """RemoteBrokerOffsetStore::persist -> UPDATE_CONSUMER_OFFSET to the broker."""
    _pull_persist(consumer_handle, mq)


def pull_fetch_offset(consumer_handle: int, mq: int, from_store: bool = True) -> int:
    """RemoteBrokerOffsetStore::readOffset; from_store -> QUERY_CONSUMER_OFFSET on the broker."""
    return _pull_fetch_offset(consumer_handle, mq, from_store)


def set_byte_body(handle: int, body: bytes) -> None:
    rc = dll.SetByteMessageBody(handle, body, len(body))
    if rc != 0:
        raise RuntimeError(f"SetByteMessageBody failed: {rc}")
