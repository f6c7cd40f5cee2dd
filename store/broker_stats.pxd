# Cython's view of broker_stats.py when it is compiled (scripts/build_ext): a topic's put
# counters are extension types, so the count kept on every send is a struct update.
import cython

cdef class Histogram:
    cdef public object bounds
    cdef public object counts
    cdef public object sum

cdef class TopicPut:
    cdef public object topic
    cdef public object msgs
    cdef public object bytes
    cdef public object size
    cdef public object queues

@cython.locals(rec=TopicPut, size=Histogram, table=dict, average=object)
cpdef _count_put(object stats, object table, object topic, object queue_id, object msg_num, object wrote_bytes)
