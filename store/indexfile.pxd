# Cython's view of indexfile.py when it is compiled (scripts/build_ext): an index entry's
# arithmetic in C. indexfile.py itself stays plain Python and runs as it is where nothing was compiled.
import cython

@cython.locals(count=cython.longlong, slot_count=cython.longlong, begin_ts=cython.longlong,
               begin_phy=cython.longlong, end_phy=cython.longlong, end_ts=cython.longlong,
               n=cython.Py_ssize_t, key_hash=cython.longlong, phy=cython.longlong, ts=cython.longlong,
               abs_slot=cython.Py_ssize_t, slot_value=cython.longlong, time_diff=cython.longlong,
               d=cython.longlong, header_size=cython.Py_ssize_t, slot_size=cython.Py_ssize_t,
               entry_size=cython.Py_ssize_t, invalid=cython.longlong, int_max=cython.longlong)
cdef Py_ssize_t _put_hashes(object mm, object h, Py_ssize_t entries_base, Py_ssize_t slot_num,
                            Py_ssize_t index_num, list entries, Py_ssize_t i) except -1
