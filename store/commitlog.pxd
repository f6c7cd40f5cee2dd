# Cython's view of commitlog.py when it is compiled (scripts/build_ext): the message and the
# append's results become extension types, so the append reads and writes their fields as C
# struct members (a dataclass instance's attribute goes through the type's lookup, ~190
# instructions a read). commitlog.py itself stays plain Python with plain dataclasses where
# nothing was compiled. Every field is an object: the values are whatever Python code puts
# there, as in the plain dataclasses.

import cython

cdef class AppendMessageResult:
    cdef public object status
    cdef public object wroteOffset
    cdef public object wroteBytes
    cdef public object storeTimestamp
    cdef public object logicsOffset
    cdef public object msgNum
    cdef public object pagecacheRT
    cdef public object store_host
    cdef public object store_port
    cdef public object phy_offsets

cdef class PutMessageResult:
    cdef public object putMessageStatus
    cdef public object appendMessageResult

cdef class MessageEnvelope:
    cdef public object topic
    cdef public object queue_id
    cdef public object body
    cdef public object properties
    cdef public object sys_flag
    cdef public object born_timestamp
    cdef public object born_host
    cdef public object born_port
    cdef public object store_host
    cdef public object store_port
    cdef public object reconsume_times

cdef class MessageExtBrokerInner(MessageEnvelope):
    cdef public object flag
    cdef public object prepared_transaction_offset
    cdef public object properties_string
    cdef public object store_timestamp
    cdef public object stored_properties

cdef class MessageExtBatch(MessageEnvelope):
    cdef public object items

# The append, as module functions with ``msg`` typed: its fields are read as struct members.
cpdef object _apply_delay(object cl, MessageExtBrokerInner msg)
@cython.locals(props_s=str, props_b=bytes, topic_s=str, topic_b=bytes, tn=cython.Py_ssize_t, pn=cython.Py_ssize_t)
cpdef object _encode(object cl, MessageExtBrokerInner msg)
cpdef object _put_message(object cl, MessageExtBrokerInner msg)

@cython.locals(msg=MessageExtBrokerInner)
cpdef MessageExtBrokerInner new_inner_message(object topic, object queue_id, object body, object properties,
                                              object flag, object sys_flag, object born_timestamp,
                                              object born_host, object born_port, object store_host,
                                              object store_port, object reconsume_times,
                                              object properties_string)

@cython.locals(res=AppendMessageResult, out=PutMessageResult)
cpdef PutMessageResult _put_ok(object wrote_offset, object wrote_bytes, object store_timestamp,
                               object logics_offset, object store_host, object store_port)
