# Cython's view of javamap.py when it is compiled (scripts/build_ext): the ASCII hash loop in C.
import cython

@cython.locals(c=cython.uchar, mask=cython.ulonglong)
cpdef _ascii_hash(unsigned long long h, bytes data)
