"""RocketMQ 4.9.8 plain ACL: what a request needs, what an account owns, and the verdict.

Why: an ``aclEnable=true`` broker must refuse exactly what Apache RocketMQ 4.9.8 refuses and
let through exactly what it lets through, with the same remark, or clients written against
it (AclClientRPCHook, Go primitive.Credentials) behave differently here. The rules follow
PlainAccessValidator.parse (which resources a request code needs) and
PlainPermissionManager.validate/checkPerm (white lists, signature, admin codes, per-resource
and default permissions) plus RemoteAddressStrategyFactory's address patterns.

The refusal is what 4.9.8 answers when its server RPC hook throws: SYSTEM_ERROR with
RemotingHelper.exceptionSimpleDesc(AclException), i.e. the Java exception class, message and
the throwing source line of 4.9.8. Pure logic: no sockets, no files (the yml is read in
broker/acl_config.py; the store is reached only through an injected MessageLookup).

Where rmqd checks more than 4.9.8, on purpose (4.9.8 lets any signed account send these; the
resources and permissions follow RocketMQ 5's DefaultAuthorizationContextBuilder and header
annotations, read in plain ACL's vocabulary: 5.x's SUB and GET on a topic or group need SUB,
PUB needs PUB, writes to the broker's own state are admin codes):

* SEND_BATCH_MESSAGE (320) like SEND_MESSAGE_V2 (310);
* SEND_REPLY_MESSAGE (324) like SEND_MESSAGE (10), SEND_REPLY_MESSAGE_V2 (325) like 310: PUB on
  the header's topic (the ``<cluster>_REPLY_TOPIC`` a reply names). 4.9.8 and 5.x check nothing
  here, yet the broker stores the reply under whatever topic the header names;
* codes that name a stored message by its commit-log offset (VIEW_MESSAGE_BY_ID 33,
  CONSUMER_SEND_MSG_BACK 36, END_TRANSACTION 37, CONSUME_MESSAGE_DIRECTLY 309) need the
  permission on the topic(s) of the record stored there (SUB; PUB for 37, which writes to
  the half message's REAL_TOPIC), and are refused when no record known to a consume queue
  starts there (a forged record inside a message body must not stand for one);
* the offset, lock, stats and reset codes need SUB on the topic and/or group they name;
* the ACL administration codes 50-54 and DELETE_EXPIRED_COMMITLOG are admin codes
  (``admin_codes(non_admin_acl_config=True)`` gives 50-53 back to every account, as 4.9.8).

The table, code by code, is in docs/security.md.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from typing import NamedTuple

from rmqd.wire.acl import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, calc_signature, combine_request_content
from rmqd.wire.bodies import HeartbeatData, LockBatchRequestBody
from rmqd.wire.codes import RequestCode
from rmqd.wire.errors import WireError
from rmqd.wire.frame import RemotingCommand
from rmqd.wire.headers import (ConsumeMessageDirectlyResultRequestHeader, ConsumerSendMsgBackRequestHeader,
                               EndTransactionRequestHeader, ViewMessageRequestHeader)
from rmqd.wire.javamap import java_hashmap_key_order
from rmqd.wire.message import parse_offset_msg_id
from rmqd.wire.pop import decode_batch_ack_body
from rmqd.wire import fastjson

# Permission (4.9.8 acl.common.Permission)
DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

#: Codes only an admin account may send (Permission.ADMIN_CODE).
ADMIN_CODES = frozenset({
    int(RequestCode.UPDATE_AND_CREATE_TOPIC),
    int(RequestCode.UPDATE_BROKER_CONFIG),
    int(RequestCode.DELETE_TOPIC_IN_BROKER),
    int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP),
    int(RequestCode.DELETE_SUBSCRIPTIONGROUP),
})
#: GET_BROKER_CLUSTER_ACL_CONFIG: a 4.9.8 client code no 4.9.8 broker serves (neither does rmqd).
GET_BROKER_CLUSTER_ACL_CONFIG = 54
#: ACL administration (UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG,
#: GET_BROKER_CLUSTER_ACL_INFO, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG): any signed account in 4.9.8,
#: so any account could make itself admin; admin codes in rmqd unless nonAdminAclConfigEnable.
ACL_CONFIG_CODES = frozenset({
    int(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG),
    int(RequestCode.DELETE_ACL_CONFIG),
    int(RequestCode.GET_BROKER_CLUSTER_ACL_INFO),
    int(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG),
})
#: rmqd's further admin codes: 54 (always, it is ACL administration too), the codes that delete
#: store files now (DELETE_EXPIRED_COMMITLOG, CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC: a
#: change to the broker's own state) and SET_MESSAGE_REQUEST_MODE (switches a group between pull
#: and POP for every client of it: mqadmin setConsumeMode), SET_COMMITLOG_READ_MODE and
#: POP_ROLLBACK (5.x's setCommitLogReadAheadMode, exportPopRecord: they change how the broker
#: reads its commit log / where it keeps POP records; 5.x checks no resource for them).
RMQD_ADMIN_CODES = frozenset({GET_BROKER_CLUSTER_ACL_CONFIG, int(RequestCode.DELETE_EXPIRED_COMMITLOG),
                              int(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE), int(RequestCode.CLEAN_UNUSED_TOPIC),
                              int(RequestCode.SET_MESSAGE_REQUEST_MODE), int(RequestCode.SET_COMMITLOG_READ_MODE),
                              int(RequestCode.POP_ROLLBACK)})


def admin_codes(non_admin_acl_config: bool = False) -> frozenset[int]:
    """The admin codes rmqd enforces; ``non_admin_acl_config`` (broker.conf
    nonAdminAclConfigEnable) restores 4.9.8's rule that any signed account may send 50-53."""
    codes = ADMIN_CODES | RMQD_ADMIN_CODES
    return codes if non_admin_acl_config else codes | ACL_CONFIG_CODES


DEFAULT_ADMIN_CODES = admin_codes()

RETRY_PREFIX = "%RETRY%"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"

_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
_MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"
_VALIDATOR = "org.apache.rocketmq.acl.plain.PlainAccessValidator"
#: Where 4.9.8 constructs each refusal (RemotingHelper.exceptionSimpleDesc shows stack[0]).
_AT_PARSE = f"{_VALIDATOR}.parse(PlainAccessValidator.java:134)"
_AT_NO_KEY = f"{_MANAGER}.validate(PlainPermissionManager.java:664)"
_AT_NO_CONFIG = f"{_MANAGER}.validate(PlainPermissionManager.java:668)"
_AT_SIGNATURE = f"{_MANAGER}.validate(PlainPermissionManager.java:684)"
_AT_ADMIN = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:581)"
_AT_DEFAULT_PERM = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:606)"
_AT_PERM = f"{_MANAGER}.checkPerm(PlainPermissionManager.java:611)"


class AclError(Exception):
    """An AclException: ``message`` as 4.9.8 words it, ``where`` the Java frame that threw it."""

    def __init__(self, message: str | None, where: str = "") -> None:
        super().__init__(message or "")
        self.message = message
        self.where = where

    @property
    def remark(self) -> str:
        """RemotingHelper.exceptionSimpleDesc of the AclException (Throwable.toString + frame)."""
        text = _EXCEPTION if self.message is None else f"{_EXCEPTION}: {self.message}"
        return f"{text}, {self.where}" if self.where else text


# -- permissions ----------------------------------------------------------------------------

def parse_perm(text: Any) -> int:
    """Permission.parsePermFromString: PUB, SUB, PUB|SUB, SUB|PUB; anything else is DENY."""
    if text is None:
        return DENY
    return {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}.get(str(text).strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    """Permission.checkPermission."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & PUB or owned & SUB)
    return bool(needed & owned)


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_PREFIX + group


def is_retry_topic(topic: str | None) -> bool:
    return topic is not None and topic.startswith(RETRY_PREFIX)


def _print_resource(resource: str, is_group: bool) -> str:
    return f"group:{resource[len(RETRY_PREFIX):]}" if is_group else f"topic:{resource}"


def _java_split(text: str, sep: str) -> list[str]:
    """StringUtils.split(text, separatorChars): any of the chars separates; empty tokens dropped."""
    return [t for t in re.split("[" + re.escape(sep) + "]", text) if t]


# -- remote address patterns (RemoteAddressStrategyFactory) ---------------------------------

AddressMatcher = Callable[[str | None], bool]


def _is_ipv4(text: str | None) -> bool:
    # commons-validator's isValidInet4Address: four dotted decimals 0..255, no leading zeros
    # beyond a single digit ("01" is refused)
    if text is None:
        return False
    parts = text.split(".")
    if len(parts) != 4:
        return False
    for p in parts:
        if not p.isdigit() or not p.isascii() or (len(p) > 1 and p[0] == "0") or int(p) > 255:
            return False
    return True


def _is_ipv6(text: str | None) -> bool:
    if text is None or ":" not in text:
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def expand_ipv6(address: str, parts: int) -> str:
    """AclUtils.expandIP: upper case, '::' expanded to `parts` groups, each group 4 hex digits."""
    address = address.upper()
    pad = parts - address.count(":")
    if pad > 0:
        address = address.replace("::", ":" * (pad + 1))
    return ":".join(g.rjust(4, "0") if len(g) < 4 else g for g in address.split(":"))


def _addr_error(message: str) -> AclError:
    return AclError(message)


def _int_in(text: str, base: int = 10) -> int:
    try:
        return int(text.strip(), base)
    except ValueError:
        raise _addr_error(f'For input string: "{text}"') from None


def address_matcher(pattern: str | None) -> AddressMatcher:
    """RemoteAddressStrategyFactory.getRemoteAddressStrategy: a predicate on the client's IP.

    Blank matches nothing; ``*`` (and the all-star forms) everything; ``a.b.c.{1,2}`` and
    ``a,b`` a set; ``*``/``x-y`` in a position a range; else one exact address. A pattern
    4.9.8 refuses raises AclError with its words.
    """
    if pattern is None or not pattern.strip():
        return lambda addr: False
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda addr: True
    if pattern.endswith("}"):
        sep = ":" if ":" in pattern else "."
        items = _java_split(pattern, sep)
        if sep == "." and len(items) < 4:
            raise _addr_error("MultipleRemoteAddressStrategy has got a/some wrong format IP(s) ")
        last = items[-1]
        if not last.startswith("{"):
            raise _addr_error("MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress")
        head = pattern[:pattern.index("{")]
        return _multiple([head + p for p in _java_split(last[1:-1], ",")])
    if "," in pattern:
        return _multiple(_java_split(pattern, ","))
    if "*" in pattern or "-" in pattern:
        return _range(pattern)
    if not (_is_ipv4(pattern) or _is_ipv6(pattern)):
        raise _addr_error(f"Netaddress examine Exception netaddress is {pattern}")
    want = expand_ipv6(pattern, 8).upper()
    return lambda addr: addr is not None and expand_ipv6(addr, 8).upper() == want


def _multiple(addresses: Iterable[str]) -> AddressMatcher:
    allowed: set[str] = set()
    for a in addresses:
        if _is_ipv4(a):
            allowed.add(a)
        elif _is_ipv6(a):
            allowed.add(expand_ipv6(a, 8))
        else:
            raise _addr_error(f"Netaddress examine Exception netaddress is {a}")

    def match(addr: str | None) -> bool:
        if addr is not None and _is_ipv6(addr):
            addr = expand_ipv6(addr, 8)
        return addr in allowed
    return match


def _range(pattern: str) -> AddressMatcher:
    """RangeRemoteAddressStrategy: the first position holding '*' or 'x-y' bounds that part."""
    state = {"start": 0, "end": 0, "index": 0}

    def analysis(items: list[str], index: int, base: int, top: int) -> bool:
        value = items[index].strip() if index < len(items) else ""
        state["index"] = index
        if value == "*":
            state["start"], state["end"] = 0, top
        elif "-" in value:
            if value.startswith("-"):
                raise _addr_error(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value} ")
            lo_hi = _java_split(value, "-")
            start, end = _int_in(lo_hi[0], base), _int_in(lo_hi[1] if len(lo_hi) > 1 else "", base)
            state["start"], state["end"] = start, end
            if not (0 <= start <= top and 0 <= end <= top and start <= end):
                raise _addr_error("RangeRemoteAddressStrategy netaddress examine scope Exception "
                                  f"start is {start} , end is {end}")
        return state["end"] > 0

    head = ""
    if ":" in pattern:
        _ipv6_range_check(pattern)
        items = _java_split(pattern, ":")
        for i in range(1, len(items)):
            if analysis(items, i, 16, 0xFFFF):
                pre = _v6_prefix(pattern)
                state["index"] = len(_java_split(pre, ":"))
                head = pre
                break
        index = state["index"]

        def match6(addr: str | None) -> bool:
            if addr is None or not _is_ipv6(addr):
                return False
            full = expand_ipv6(addr, 8).upper()
            if not head or not full.startswith(head):
                return False
            return state["start"] <= int(full[5 * index:5 * index + 4], 16) <= state["end"]
        return match6
    items = _java_split(pattern, ".")
    if len(items) < 4:
        raise _addr_error(f"Netaddress examine scope Exception netaddress is {pattern}")
    if analysis(items, 1, 10, 255) or analysis(items, 2, 10, 255) or analysis(items, 3, 10, 255):
        index = state["index"]
        for j in range(index - 1):  # AclUtils.verify(remoteAddr, index - 1)
            if not (items[j].strip().isdigit() and 0 <= int(items[j].strip()) <= 255):
                raise _addr_error(f"Netaddress examine scope Exception netaddress is {pattern}")
        head = "".join(items[j].strip() + "." for j in range(index))
    index = state["index"]

    def match4(addr: str | None) -> bool:
        if not head or addr is None or not _is_ipv4(addr) or not addr.startswith(head):
            return False
        if index == 3:
            value = addr[len(head):]
        elif index == 2:
            value = addr[len(head):addr.rindex(".")]
        else:
            value = addr[len(head):addr.rindex(".", 0, addr.rindex("."))]
        return value.isdigit() and state["start"] <= int(value) <= state["end"]
    return match4


def _ipv6_range_check(pattern: str) -> None:
    """AclUtils.IPv6AddressCheck: '*' only last; a range in the last (or, before '*', the
    second-last) group."""
    error = _addr_error(f"Netaddress examine scope Exception netaddress is {pattern}")
    star, minus = pattern.find("*"), pattern.find("-")
    if star > -1 and star != len(pattern) - 1:
        raise error
    if minus > -1:
        last = pattern.rfind(":")
        limit = last if star == -1 else pattern.rfind(":", 0, last)
        if minus <= limit:
            raise error


def _v6_prefix(pattern: str) -> str:
    """AclUtils.v6ipProcess: the expanded address part before the range position."""
    star, minus = "*" in pattern, "-" in pattern
    if star and minus:
        last = pattern.rindex(":")
        sub, parts = pattern[:pattern[:last].rindex(":")], 6
    elif not star and not minus:
        sub, parts = pattern, 8
    else:
        sub, parts = pattern[:pattern.rindex(":")], 7
    return expand_ipv6(sub, parts)


# -- accounts -------------------------------------------------------------------------------

@dataclass(slots=True)
class Account:
    """PlainAccessResource built from one plain_acl.yml account (buildPlainAccessResource)."""

    access_key: str
    secret_key: str
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    #: topic -> perm and %RETRY%group -> perm
    resource_perms: dict[str, int] | None = None
    matcher: AddressMatcher = field(default=lambda addr: False, repr=False)


def _java_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() == "true" if value is not None else False


def build_account(config: Mapping[str, Any]) -> Account:
    """buildPlainAccessResource (checkPlainAccessConfig first): AclError on a bad account."""
    ak, sk = config.get("accessKey"), config.get("secretKey")
    ak = None if ak is None else str(ak)
    sk = None if sk is None else str(sk)
    if ak is None or sk is None or len(ak) <= 6 or len(sk) <= 6:
        raise AclError(f"The accessKey={_jstr(ak)} and secretKey={_jstr(sk)} cannot be null "
                       "and length should longer than 6")
    white = config.get("whiteRemoteAddress")
    white = None if white is None else str(white)
    account = Account(access_key=ak, secret_key=sk, white_remote_address=white,
                      admin=_java_bool(config.get("admin")),
                      default_topic_perm=parse_perm(config.get("defaultTopicPerm")),
                      default_group_perm=parse_perm(config.get("defaultGroupPerm")))
    for is_topic, key in ((False, "groupPerms"), (True, "topicPerms")):
        for item in config.get(key) or []:
            parts = _java_split(str(item), "=")
            if len(parts) != 2:
                raise AclError(f"Parse resource permission failed for {'topic' if is_topic else 'group'}:{item}")
            name = parts[0].strip() if is_topic else RETRY_PREFIX + parts[0].strip()
            if account.resource_perms is None:
                account.resource_perms = {}
            account.resource_perms[name] = parse_perm(parts[1].strip())
    account.matcher = address_matcher(white)
    return account


def check_resource_perms(resources: Iterable[str] | None) -> None:
    """Permission.checkResourcePerms: each item 'Res=Perm' with a known permission."""
    for item in resources or []:
        parts = _java_split(item, "=")
        if len(parts) != 2:
            raise AclError(f"Parse Resource format error for {item}.\n"
                           "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
        if parts[1].strip() != "DENY" and parse_perm(parts[1].strip()) == DENY:
            raise AclError(f"Parse resource permission error for {item}.\n"
                           "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")


def _jstr(value: str | None) -> str:
    return "null" if value is None else value


@dataclass(slots=True)
class AclState:
    """What the broker enforces: global white list matchers and accounts by access key."""

    global_white: list[AddressMatcher] = field(default_factory=list)
    accounts: dict[str, Account] = field(default_factory=dict)


# -- what a request needs (PlainAccessValidator.parse) --------------------------------------

class StoredMessage(NamedTuple):
    """The topics a stored record belongs to: its own, and the REAL_TOPIC / RETRY_TOPIC it
    carries (a delayed, half, retry or dead-letter message holds another topic's content)."""

    topic: str
    real_topic: str | None = None
    retry_topic: str | None = None


#: commit-log offset -> the record starting there (known to a consume queue), or None.
MessageLookup = Callable[[int], StoredMessage | None]


@dataclass(slots=True)
class NeededAccess:
    remote_ip: str | None
    code: int
    access_key: str | None = None
    signature: str | None = None
    security_token: str | None = None
    resources: dict[str, int] | None = None
    content: bytes | None = None
    #: why the resources a code needs could not be told (refused unless the account is an
    #: admin without per-resource permissions, who may access everything anyway)
    unresolved: str | None = None

    def add(self, resource: str | None, perm: int) -> None:
        if resource is None:
            return
        if self.resources is None:
            self.resources = {}
        self.resources[resource] = perm

    def add_group(self, group: str | None, perm: int = SUB) -> None:
        self.add(retry_topic(group), perm)

    def add_topic(self, topic: str | None, perm: int = SUB) -> None:
        self.add(topic, perm)

    def add_message(self, offset: int | None, lookup: MessageLookup | None, perm: int,
                    *, only_real_topic: bool = False) -> None:
        """The topic(s) of the record at commit-log ``offset``: what the handler will read
        (or, with ``only_real_topic``, the topic END_TRANSACTION writes it to)."""
        if offset is None:
            return
        found = lookup(offset) if lookup is not None else None
        if found is None:
            self.unresolved = f"No message to check permissions on at commit log offset {offset}"
            return
        if only_real_topic:
            self.add(found.real_topic or found.topic, perm)
            return
        for topic in (found.topic, found.real_topic, found.retry_topic):
            self.add(topic, perm)


def _header_value(header_cls: Any, fields: Mapping[str, str], name: str) -> Any:
    """A field as the handler decodes it (same decoder): None when the header does not decode,
    in which case the handler refuses the request too."""
    try:
        return getattr(header_cls.from_ext(fields), name)
    except (WireError, ValueError, TypeError):
        return None


_V1_SEND_CODES = frozenset({int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_REPLY_MESSAGE)})


def _send(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand, lookup: MessageLookup | None) -> None:
    topic_key, group_key = ("topic", "group") if need.code in _V1_SEND_CODES else ("b", "a")
    topic = f.get(topic_key)
    if is_retry_topic(topic):
        need.add_group(f.get(group_key))
    else:
        need.add_topic(topic, PUB)


def _send_back(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
               lookup: MessageLookup | None) -> None:
    need.add_group(f.get("group"))
    need.add_message(_header_value(ConsumerSendMsgBackRequestHeader, f, "offset"), lookup, SUB)


def _pull(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand, lookup: MessageLookup | None) -> None:
    need.add_topic(f.get("topic"))
    need.add_group(f.get("consumerGroup"))


def _topic(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand, lookup: MessageLookup | None) -> None:
    need.add_topic(f.get("topic"))


def _heartbeat(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
               lookup: MessageLookup | None) -> None:
    if not request.body:  # 4.9.8 on Java 17: the helpful NullPointerException's words
        raise AclError('Cannot read the array length because "bytes" is null', _AT_PARSE)
    try:
        hb = HeartbeatData.decode(request.body)
    except WireError as exc:
        raise AclError(str(exc), _AT_PARSE) from None
    for consumer in hb.consumerDataSet:
        need.add_group(consumer.groupName)
        for sub in consumer.subscriptionDataSet:
            need.add_topic(sub.topic)


def _consumer_group(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
                    lookup: MessageLookup | None) -> None:
    # decodeCommandCustomHeader of 4.9.8 logs and skips a missing or unparsable field
    need.add_group(f.get("consumerGroup"))


def _group_and_topic(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
                     lookup: MessageLookup | None) -> None:
    need.add_group(f.get("consumerGroup"))
    need.add_topic(f.get("topic"))


def _reset_offset(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
                  lookup: MessageLookup | None) -> None:
    need.add_group(f.get("group"))
    need.add_topic(f.get("topic"))


def _lock_batch(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
                lookup: MessageLookup | None) -> None:
    try:
        body = LockBatchRequestBody.decode(request.body)
    except WireError:
        need.unresolved = "No consumer group and queues to check permissions on: the body does not decode"
        return
    need.add_group(body.consumerGroup)
    for mq in body.mqSet:
        need.add_topic(mq.topic)


def _view_message(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
                  lookup: MessageLookup | None) -> None:
    need.add_message(_header_value(ViewMessageRequestHeader, f, "offset"), lookup, SUB)


def _end_transaction(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
                     lookup: MessageLookup | None) -> None:
    need.add_message(_header_value(EndTransactionRequestHeader, f, "commitLogOffset"), lookup, PUB,
                     only_real_topic=True)


def _consume_directly(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
                      lookup: MessageLookup | None) -> None:
    need.add_group(f.get("consumerGroup"))
    msg_id = _header_value(ConsumeMessageDirectlyResultRequestHeader, f, "msgId")
    try:
        offset = parse_offset_msg_id(msg_id)[2] if msg_id else None
    except (WireError, ValueError):  # not an offsetMsgId: the handler forwards no stored message
        offset = None
    need.add_message(offset, lookup, SUB)


def _batch_ack(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
               lookup: MessageLookup | None) -> None:
    """BATCH_ACK_MESSAGE: the group and topic of every ack in the body (5.x's ACL checks each)."""
    try:
        _, acks = decode_batch_ack_body(request.body)
    except WireError as exc:  # the handler refuses the body the same way; no resource to name
        raise AclError(f"BatchAckMessageRequestBody cannot be parsed: {exc}", _AT_PARSE) from None
    for ack in acks:
        need.add_group(ack.consumer_group)
        need.add_topic(ack.topic)


def _query_assignment(need: NeededAccess, f: Mapping[str, str], request: RemotingCommand,
                      lookup: MessageLookup | None) -> None:
    """QUERY_ASSIGNMENT: the body's topic and consumerGroup."""
    try:
        obj = fastjson.loads(bytes(request.body or b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AclError(f"QueryAssignmentRequestBody cannot be parsed: {exc}", _AT_PARSE) from None
    if isinstance(obj, dict):
        need.add_group(str(obj.get("consumerGroup") or "") or None)
        need.add_topic(str(obj.get("topic") or "") or None)


_Parser = Callable[[NeededAccess, Mapping[str, str], RemotingCommand, "MessageLookup | None"], None]

#: PlainAccessValidator.parse's cases (10, 310, 36, 11, 12, 34, 35, 38, 15) and rmqd's further
#: ones (docs/security.md has the table); a code not listed needs no topic or group.
RESOURCE_PARSERS: dict[int, _Parser] = {
    int(RequestCode.SEND_MESSAGE): _send,
    int(RequestCode.SEND_MESSAGE_V2): _send,
    int(RequestCode.SEND_BATCH_MESSAGE): _send,
    int(RequestCode.SEND_REPLY_MESSAGE): _send,  # rmqd: the send's check (4.9.8: nothing)
    int(RequestCode.SEND_REPLY_MESSAGE_V2): _send,
    int(RequestCode.CONSUMER_SEND_MSG_BACK): _send_back,
    int(RequestCode.PULL_MESSAGE): _pull,
    int(RequestCode.QUERY_MESSAGE): _topic,
    int(RequestCode.HEART_BEAT): _heartbeat,
    int(RequestCode.UNREGISTER_CLIENT): _consumer_group,
    int(RequestCode.GET_CONSUMER_LIST_BY_GROUP): _consumer_group,
    int(RequestCode.UPDATE_CONSUMER_OFFSET): _group_and_topic,
    # rmqd: as RocketMQ 5's ACL
    int(RequestCode.VIEW_MESSAGE_BY_ID): _view_message,
    int(RequestCode.END_TRANSACTION): _end_transaction,
    int(RequestCode.CONSUME_MESSAGE_DIRECTLY): _consume_directly,
    int(RequestCode.QUERY_CONSUMER_OFFSET): _group_and_topic,
    int(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP): _topic,
    int(RequestCode.GET_MAX_OFFSET): _topic,
    int(RequestCode.GET_MIN_OFFSET): _topic,
    int(RequestCode.GET_EARLIEST_MSG_STORETIME): _topic,
    int(RequestCode.LOCK_BATCH_MQ): _lock_batch,
    int(RequestCode.UNLOCK_BATCH_MQ): _lock_batch,
    int(RequestCode.GET_TOPIC_STATS_INFO): _topic,
    int(RequestCode.GET_TOPIC_CONFIG): _topic,  # 5.x: @RocketMQAction GET, @RocketMQResource TOPIC
    int(RequestCode.CHECK_ROCKSDB_CQ_WRITE_PROGRESS): _topic,  # 5.x: the same annotations
    int(RequestCode.GET_CONSUMER_CONNECTION_LIST): _consumer_group,
    int(RequestCode.GET_CONSUME_STATS): _group_and_topic,
    int(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO): _topic,
    int(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET): _reset_offset,
    int(RequestCode.GET_CONSUMER_RUNNING_INFO): _consumer_group,
    int(RequestCode.QUERY_CONSUME_QUEUE): _group_and_topic,
    # RocketMQ 5's POP consumption (SUB on the topic and the group, as its ACL checks them)
    int(RequestCode.POP_MESSAGE): _group_and_topic,
    int(RequestCode.ACK_MESSAGE): _group_and_topic,
    int(RequestCode.CHANGE_MESSAGE_INVISIBLETIME): _group_and_topic,
    int(RequestCode.BATCH_ACK_MESSAGE): _batch_ack,
    int(RequestCode.QUERY_ASSIGNMENT): _query_assignment,
}


def parse_request(request: RemotingCommand, remote_addr: str | None,
                  lookup: MessageLookup | None = None) -> NeededAccess:
    """PlainAccessValidator.parse: the client's IP, its credentials and the resources the code
    needs. ``lookup`` finds the record a code names by commit-log offset (without one, such a
    code's resources cannot be told and only an admin passes)."""
    ip = remote_addr[:remote_addr.rindex(":")] if remote_addr and ":" in remote_addr else remote_addr
    if ip and ip.startswith("[") and ip.endswith("]"):
        ip = ip[1:-1]
    need = NeededAccess(remote_ip=ip, code=int(request.code))
    f = request.ext_fields
    if f is None:
        return need
    need.access_key = f.get(ACCESS_KEY)
    need.signature = f.get(SIGNATURE)
    need.security_token = f.get(SECURITY_TOKEN)
    parser = RESOURCE_PARSERS.get(need.code)
    if parser is not None:
        parser(need, f, request, lookup)
    signed = {k: v for k, v in f.items() if k != SIGNATURE and k != UNIQUE_MSG_QUERY_FLAG}
    need.content = combine_request_content(signed, bytes(request.body) if request.body else None)
    return need


# -- the verdict (PlainPermissionManager.validate / checkPerm) ------------------------------

def _check_perm(need: NeededAccess, owned: Account, admin_only: frozenset[int]) -> None:
    if need.code in admin_only and not owned.admin:
        raise AclError(f"Need admin permission for request code={need.code}, "
                       f"but accessKey={owned.access_key} is not", _AT_ADMIN)
    owned_perms = owned.resource_perms
    if owned_perms is None and owned.admin:
        return
    if need.unresolved is not None:
        raise AclError(need.unresolved)
    if need.resources is None:
        return
    # which failing resource is reported: the needed map is a java.util.HashMap
    for resource in java_hashmap_key_order(need.resources):
        needed = need.resources[resource]
        is_group = is_retry_topic(resource)
        if owned_perms is None or resource not in owned_perms:
            have = owned.default_group_perm if is_group else owned.default_topic_perm
            if not check_permission(needed, have):
                raise AclError(f"No default permission for {_print_resource(resource, is_group)}", _AT_DEFAULT_PERM)
            continue
        if not check_permission(needed, owned_perms[resource]):
            raise AclError(f"No default permission for {_print_resource(resource, is_group)}", _AT_PERM)


def validate(need: NeededAccess, state: AclState, admin_only: frozenset[int] = DEFAULT_ADMIN_CODES) -> None:
    """PlainPermissionManager.validate: returns when allowed, raises AclError when refused."""
    for matcher in state.global_white:
        if matcher(need.remote_ip):
            return
    if need.access_key is None:
        raise AclError("No accessKey is configured", _AT_NO_KEY)
    owned = state.accounts.get(need.access_key)
    if owned is None:
        raise AclError(f"No acl config for {need.access_key}", _AT_NO_CONFIG)
    if owned.matcher(need.remote_ip):
        return
    expected = calc_signature(need.content or b"", owned.secret_key)
    given = need.signature
    if given is None or not hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogatepass")):
        raise AclError(f"Check signature failed for accessKey={need.access_key}", _AT_SIGNATURE)
    if need.resources is not None and need.resources.get(TRACE_TOPIC) == PUB:
        return
    _check_perm(need, owned, admin_only)


def check_request(request: RemotingCommand, remote_addr: str | None, state: AclState,
                  admin_only: frozenset[int] = DEFAULT_ADMIN_CODES,
                  lookup: MessageLookup | None = None) -> AclError | None:
    """parse + validate: None when the request may proceed, else the AclError to answer."""
    try:
        validate(parse_request(request, remote_addr, lookup), state, admin_only)
    except AclError as exc:
        return exc
    return None
