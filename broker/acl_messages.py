"""The ACL's view of the store: which topics the record at a commit-log offset belongs to.

Why: VIEW_MESSAGE_BY_ID (33), CONSUMER_SEND_MSG_BACK (36), END_TRANSACTION (37) and
CONSUME_MESSAGE_DIRECTLY (309) name a stored message by its commit-log offset, and their
handlers read whatever record starts there; the permission must be checked on that record's
topic (processors/acl.py). A message body is client bytes, so a record forged inside one
could claim any topic and a size reaching over the next, real record. The lookup therefore
answers only for a record the store itself placed at the offset: one its consume queue
points at (the unit at the record's queue offset has this offset and size), or, for a record
appended but not yet dispatched, one reached by stepping over whole records from the
dispatch position. Anything else is None, which the ACL refuses.

This is processors.acl.MessageLookup; it runs on the event loop in the request hook (a few
reads of mapped memory, as the handlers themselves do).
"""

from __future__ import annotations

from rmqd.processors.acl import StoredMessage
from rmqd.store.message_store import DefaultMessageStore
from rmqd.wire.errors import WireError
from rmqd.wire.message import MessageConst

#: records stepped over at most from the dispatch position (dispatch is seldom further behind)
MAX_UNDISPATCHED_RECORDS = 4096


class StoredMessageLookup:
    """``lookup(offset)`` -> StoredMessage of the record the store placed at ``offset``, or None."""

    def __init__(self, store: DefaultMessageStore) -> None:
        self.store = store

    def __call__(self, offset: int) -> StoredMessage | None:
        if offset < 0 or offset >= self.store.commit_log.get_max_offset():
            return None
        try:
            record = self.store.look_message_by_offset(offset)
        except (WireError, ValueError, OverflowError):
            return None
        if record is None:
            return None
        if not (self._in_consume_queue(offset, record.topic, record.queue_id, record.queue_offset,
                                       record.total_size) or self._not_yet_dispatched(offset)):
            return None
        props = record.properties
        return StoredMessage(record.topic, props.get(MessageConst.PROPERTY_REAL_TOPIC),
                             props.get(MessageConst.PROPERTY_RETRY_TOPIC))

    def _in_consume_queue(self, offset: int, topic: str, queue_id: int, queue_offset: int, size: int) -> bool:
        cq = self.store.get_consume_queue(topic, queue_id)
        if cq is None or queue_offset < 0:
            return False
        try:
            unit = cq.get_unit(queue_offset)
        except (ValueError, OverflowError, IndexError):
            return False
        return unit is not None and unit[0] == offset and unit[1] == size

    def _not_yet_dispatched(self, offset: int) -> bool:
        """``offset`` is a record boundary at or after the dispatch position."""
        pos = self.store.reput_service.reput_from_offset
        commit_log = self.store.commit_log
        for _ in range(MAX_UNDISPATCHED_RECORDS):
            if pos == offset:
                return True
            if pos > offset:
                return False
            head = commit_log.get_message(pos, 4)
            if head is None or len(head) < 4:
                return False
            size = int.from_bytes(head, "big", signed=True)
            if size <= 0:
                return False
            pos += size  # an end-of-file BLANK record's size reaches the next file's start
        return False


__all__ = ["MAX_UNDISPATCHED_RECORDS", "StoredMessageLookup"]
