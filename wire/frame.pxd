# Cython's view of frame.py when it is compiled (scripts/build_ext): C integers for the
# positions of the header loops. frame.py itself stays plain Python and runs as it is where
# nothing was compiled.
import cython

# An extension type when compiled (a plain dataclass where nothing is): built by Cython's
# compiled dataclass __init__ on every frame decoded and every answer, its fields struct members.
cdef class RemotingCommand:
    cdef public object code
    cdef public object language
    cdef public object version
    cdef public object opaque
    cdef public object flag
    cdef public object remark
    cdef public object ext_fields
    cdef public object body
    cdef public object serialize_type

@cython.locals(n=cython.Py_ssize_t, pos=cython.Py_ssize_t, end=cython.Py_ssize_t, kstart=cython.Py_ssize_t,
               klen=cython.Py_ssize_t, kend=cython.Py_ssize_t, vstart=cython.Py_ssize_t, vlen=cython.Py_ssize_t,
               vend=cython.Py_ssize_t, high=cython.Py_ssize_t, remark_len=cython.Py_ssize_t, ext_len=cython.Py_ssize_t, data=bytes)
cpdef decode_binary_header(data)

@cython.locals(c=cython.uchar)
cdef Py_ssize_t _plain_string_end(bytes data, Py_ssize_t pos, Py_ssize_t n)

@cython.locals(c=cython.uchar)
cdef Py_ssize_t _plain_int_end(bytes data, Py_ssize_t pos, Py_ssize_t n)

@cython.locals(n=cython.Py_ssize_t, pos=cython.Py_ssize_t, kend=cython.Py_ssize_t, vend=cython.Py_ssize_t,
               c=cython.uchar, out=dict, ext=dict, key=str, ekey=str, value=str)
cpdef scan_plain_json_header(bytes data)

@cython.locals(i=cython.Py_ssize_t, k=cython.Py_ssize_t, c=cython.uchar, h=cython.uchar, cp=cython.long)
cdef _json_string(bytes data, Py_ssize_t start, Py_ssize_t end)

cdef Py_ssize_t _backslash(bytes data, Py_ssize_t start, Py_ssize_t end)

@cython.locals(v=cython.longlong, negative=cython.bint)
cdef object _small_int(bytes data, Py_ssize_t pos, Py_ssize_t end)

@cython.locals(ch=cython.Py_UCS4, c=cython.long)
cdef bint _plain_text(str s) except -1

@cython.locals(n=cython.Py_ssize_t, sep=str)
cdef bint _plain_ext_json(object ext, list parts) except -1

@cython.locals(kend=cython.Py_ssize_t)
cdef Py_ssize_t _key_end(bytes data, Py_ssize_t pos, Py_ssize_t n)

# The stream decoder an extension type: its position a C integer, next_command a C call from
# its own iterator, the length words read as C bytes.
cdef class FrameDecoder:
    cdef public object max_frame_length
    cdef public object _buf
    cdef public Py_ssize_t _pos

    @cython.locals(pos=cython.Py_ssize_t, avail=cython.Py_ssize_t, length=cython.Py_ssize_t, end=cython.Py_ssize_t)
    cpdef next_command(self)

@cython.locals(b=bytes, b0=cython.Py_ssize_t, b1=cython.Py_ssize_t, b2=cython.Py_ssize_t, b3=cython.Py_ssize_t)
cdef Py_ssize_t _be_u32(object buf, Py_ssize_t pos) except -1

@cython.locals(word=cython.Py_ssize_t, stype=cython.Py_ssize_t, hl=cython.Py_ssize_t, hstart=cython.Py_ssize_t,
               bstart=cython.Py_ssize_t)
cpdef RemotingCommand _decode_payload(object buf, Py_ssize_t start, Py_ssize_t end)

# The encoders and the answer's constructor with the command typed: its fields are struct reads.
@cython.locals(parts=list)
cpdef bytes encode_json_header(RemotingCommand cmd)
@cython.locals(parts=list)
cpdef bytes encode_binary_header(RemotingCommand cmd)
@cython.locals(vs=str, vb=bytes, n=cython.Py_ssize_t, lengths=tuple, size=cython.Py_ssize_t, at=cython.Py_ssize_t,
               prefixes=dict, kp=bytes)
cdef Py_ssize_t _binary_header_into(RemotingCommand cmd, list out) except -1
@cython.locals(parts=list, hl=cython.Py_ssize_t)
cpdef bytes encode_frame(RemotingCommand cmd)
cpdef RemotingCommand make_response(RemotingCommand request, object code, object remark=*, object ext_fields=*,
                                    object body=*)
