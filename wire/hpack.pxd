# Cython's view of hpack.py when it is compiled (scripts/build_ext): the decoder an extension type,
# its position and sizes C integers, the block read as C bytes. hpack.py itself stays plain Python
# and runs as it is where nothing was compiled.
import cython

cdef class HpackDecoder:
    cdef public object max_header_list_size
    cdef public object max_allowed_table_size
    cdef public list _entries
    cdef public Py_ssize_t _size
    cdef public Py_ssize_t _max_size
    cdef public Py_ssize_t _pos

    @cython.locals(headers=list, limit=cython.Py_ssize_t, listed=cython.Py_ssize_t, n=cython.Py_ssize_t,
                   first=cython.uchar, entry=tuple, size=cython.Py_ssize_t)
    cdef list _decode(self, bytes data)

    @cython.locals(pos=cython.Py_ssize_t, n=cython.Py_ssize_t, mask=cython.Py_ssize_t, value=cython.Py_ssize_t,
                   shift=cython.Py_ssize_t, byte=cython.uchar)
    cdef Py_ssize_t _integer(self, bytes data, Py_ssize_t prefix_bits) except -1

    @cython.locals(pos=cython.Py_ssize_t, huffman=cython.uchar, length=cython.Py_ssize_t, start=cython.Py_ssize_t,
                   end=cython.Py_ssize_t)
    cdef bytes _string(self, bytes data)

    @cython.locals(index=cython.Py_ssize_t, name=bytes)
    cdef tuple _literal(self, bytes data, Py_ssize_t prefix_bits)

    @cython.locals(entries=list, k=cython.Py_ssize_t)
    cdef tuple _entry(self, Py_ssize_t index)

    @cython.locals(size=cython.Py_ssize_t)
    cdef _add(self, tuple entry)

    @cython.locals(entries=list)
    cdef _evict(self)

@cython.locals(states=bytes, flag_of=bytes, symbols=bytes, state=cython.Py_ssize_t, flags=cython.uchar,
               pos=cython.Py_ssize_t, byte=cython.uchar, index=cython.Py_ssize_t, out=bytearray,
               fail=cython.uchar, emit=cython.uchar, complete=cython.uchar)
cpdef bytes huffman_decode(bytes data, Py_ssize_t start, Py_ssize_t end)
