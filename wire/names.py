"""Topic and group names as RocketMQ 4.9.8 allows them (TopicValidator, Validators.checkGroup).

Why here, in wire/: a name is part of the protocol (it becomes a commit-log field, a
consume-queue directory, a config-file key), and every layer needs the same rule — the
processors answer a bad name with RocketMQ's code and remark, the store refuses to make a
file or table entry for one. One implementation, imported by both.

The rules, exactly as Java applies them:
* a topic (TopicValidator.validateTopic): not blank, only ``[%|a-zA-Z0-9_-]``, at most 127
  chars; checked in that order, with TopicValidator's remarks;
* a group (Validators.checkGroup): not blank, at most 255 chars, only ``[%|a-zA-Z0-9_-]``;
  checked in that order, with checkGroup's messages;
* a consumer group also names topics: ``%RETRY%<group>`` and ``%DLQ%<group>`` must be valid
  topics. 4.9.8 does not check this: it creates the too-long retry topic's config and the
  store then refuses every message for it (topic longer than Byte.MAX_VALUE: MESSAGE_ILLEGAL,
  answered as SYSTEM_ERROR "MESSAGE_ILLEGAL"). rmqd refuses up front and creates nothing.

"Blank" is Java's (UtilAll.isBlank: every char Character.isWhitespace) and lengths count
UTF-16 code units, as String.length() does. Python's ``re`` ``$`` would accept a trailing
newline, so the character check is a full match on the allowed set.
"""

from __future__ import annotations

import re
import unicodedata

TOPIC_MAX_LENGTH = 127  # TopicValidator.TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH
VALID_PATTERN = "^[%|a-zA-Z0-9_-]+$"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

_VALID = re.compile(r"[%|a-zA-Z0-9_-]+")

TOPIC_BLANK = "The specified topic is blank."
TOPIC_ILLEGAL = f"The specified topic contains illegal characters, allowing only {VALID_PATTERN}"
TOPIC_TOO_LONG = "The specified topic is longer than topic max length."
GROUP_BLANK = "the specified group is blank"
GROUP_TOO_LONG = f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."

# Character.isWhitespace: the Unicode space separators except the no-break ones, plus these.
_JAVA_WHITESPACE_CONTROLS = frozenset("\t\n\u000b\f\r\u001c\u001d\u001e\u001f")
_NO_BREAK_SPACES = frozenset("\u00a0\u2007\u202f")
_REMARK_NAME_MAX = 300


def java_is_whitespace(ch: str) -> bool:
    """Character.isWhitespace(char)."""
    if ch in _JAVA_WHITESPACE_CONTROLS:
        return True
    return ch not in _NO_BREAK_SPACES and unicodedata.category(ch) in ("Zs", "Zl", "Zp")


def java_is_blank(text: str | None) -> bool:
    """UtilAll.isBlank: null, empty, or only whitespace. In ASCII, str.isspace's whitespace is
    exactly Character.isWhitespace's (space, tab to carriage return, \x1c-\x1f): one C call
    for the names and ids every send checks."""
    if text is None:
        return True
    if text.isascii():
        return not text or text.isspace()
    return all(java_is_whitespace(ch) for ch in text)


def java_length(text: str) -> int:
    """String.length(): UTF-16 code units (a character beyond the BMP counts twice)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def is_topic_or_group_illegal(text: str) -> bool:
    """TopicValidator.isTopicOrGroupIllegal: any char outside ``[%|a-zA-Z0-9_-]``."""
    return _VALID.fullmatch(text) is None and text != ""


def _shown(name: str) -> str:
    """A name quoted in a remark: as Java prints it, cut short if huge."""
    return name if len(name) <= _REMARK_NAME_MAX else name[:_REMARK_NAME_MAX] + "..."


def topic_remark(topic: object) -> str | None:
    """TopicValidator.validateTopic: None when valid, else its remark (code SYSTEM_ERROR)."""
    if topic is None:
        return TOPIC_BLANK
    if type(topic) is not str:
        return TOPIC_ILLEGAL
    if _VALID.fullmatch(topic) is not None:  # the common case: one regex, no Unicode work
        return TOPIC_TOO_LONG if len(topic) > TOPIC_MAX_LENGTH else None
    if java_is_blank(topic):
        return TOPIC_BLANK
    return TOPIC_ILLEGAL


def group_remark(group: object) -> str | None:
    """Validators.checkGroup: None when valid, else its message (rmqd answers SYSTEM_ERROR)."""
    if group is None:
        return GROUP_BLANK
    if type(group) is not str:
        return f"the specified group[{_shown(str(group))}] contains illegal characters, allowing only {VALID_PATTERN}"
    if _VALID.fullmatch(group) is not None:
        return GROUP_TOO_LONG if len(group) > GROUP_MAX_LENGTH else None
    if java_is_blank(group):
        return GROUP_BLANK
    if java_length(group) > GROUP_MAX_LENGTH:
        return GROUP_TOO_LONG
    return f"the specified group[{_shown(group)}] contains illegal characters, allowing only {VALID_PATTERN}"


def consumer_group_remark(group: object) -> str | None:
    """checkGroup, then the group's retry and DLQ topics must be valid topics (see above)."""
    remark = group_remark(group)
    if remark is not None:
        return remark
    assert isinstance(group, str)
    retry = RETRY_GROUP_TOPIC_PREFIX + group  # the longer of %RETRY% / %DLQ%
    if len(retry) > TOPIC_MAX_LENGTH:
        return (f"The topic[{_shown(retry)}] of the specified group is longer than topic max length "
                f"{TOPIC_MAX_LENGTH}, so the group's retry and dead-letter topics cannot exist.")
    return None


def is_valid_topic(topic: object) -> bool:
    return topic_remark(topic) is None


def is_valid_group(group: object) -> bool:
    return group_remark(group) is None


__all__ = [
    "DLQ_GROUP_TOPIC_PREFIX", "GROUP_BLANK", "GROUP_MAX_LENGTH", "GROUP_TOO_LONG", "RETRY_GROUP_TOPIC_PREFIX",
    "TOPIC_BLANK", "TOPIC_ILLEGAL", "TOPIC_MAX_LENGTH", "TOPIC_TOO_LONG", "VALID_PATTERN", "consumer_group_remark",
    "group_remark", "is_topic_or_group_illegal", "is_valid_group", "is_valid_topic", "java_is_blank",
    "java_is_whitespace", "java_length", "topic_remark",
]
