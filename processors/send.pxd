# Cython's view of send.py when it is compiled (scripts/build_ext): the send header's numbers
# read in C. send.py itself stays plain Python and runs as it is where nothing was compiled.
import cython

@cython.locals(text=str, n=cython.Py_ssize_t, r=cython.longlong, d=cython.long, ch=cython.Py_UCS4)
cdef long long _plain_digits(object v, long long limit) except? -2

@cython.locals(d=cython.longlong, e=cython.longlong, f=cython.longlong, g=cython.longlong, h=cython.longlong,
               jv=cython.longlong, lv=cython.longlong, fields=dict)
cpdef send_header_from_v2(object ext)

@cython.locals(props=dict, stored=dict, keys=tuple, layout=tuple)
cpdef tuple properties_to_store(object client_properties, object cluster)
