# Cython's view of message.py when it is compiled (scripts/build_ext): the offsetMsgId of
# every send answer formatted in C. message.py itself stays plain Python and runs as it is where
# nothing was compiled.
import cython

@cython.locals(prefixes=dict, prefix=str)
cpdef str create_offset_msg_id(object store_ip, object store_port, object offset)

@cython.locals(buf=bytearray, i=cython.int, d=cython.uchar)
cdef str _hex16(unsigned long long v)
