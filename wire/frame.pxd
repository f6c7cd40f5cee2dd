# Cython's view of frame.py when it is compiled (scripts/build_ext): C integers for the
# positions of the header loops. frame.py itself stays plain Python and runs as it is where
# nothing was compiled.
import cython

@cython.locals(n=cython.Py_ssize_t, pos=cython.Py_ssize_t, end=cython.Py_ssize_t, kstart=cython.Py_ssize_t,
               klen=cython.Py_ssize_t, kend=cython.Py_ssize_t, vstart=cython.Py_ssize_t, vlen=cython.Py_ssize_t,
               vend=cython.Py_ssize_t, high=cython.Py_ssize_t, remark_len=cython.Py_ssize_t, ext_len=cython.Py_ssize_t, data=bytes)
cpdef decode_binary_header(data)
