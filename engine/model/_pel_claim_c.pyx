# cython: boundscheck=False, wraparound=False, cdivision=True
"""The claim step over a packed PEL, compiled: the same functions and results as
`_pel_claim_py.py` (the reference), walking and rewriting the chunks' `array` buffers directly
instead of boxing every cell.
"""

from bisect import bisect_left

from cpython cimport array

from engine.model.pel_columns cimport c_find, check_ids, check_row  # the PEL kernels' shared helpers
from cpython.long cimport PyLong_AsUnsignedLongLongMask
from cpython.pyport cimport PY_SSIZE_T_MAX
from libc.string cimport memmove

cdef extern from *:
    # The array object's own fields (CPython's arrayobject, as Cython's array header lays it
    # out): its buffer, how many items that holds, and its buffer exports.
    ctypedef struct _ArrayFields "struct arrayobject":
        char* ob_item "data.ob_item"
        Py_ssize_t allocated
        int ob_exports
    void Py_SET_SIZE(object o, Py_ssize_t n)
    void* PyMem_Realloc(void* p, size_t n)
    void PyMem_Free(void* p)


cdef int grow(array.array col, Py_ssize_t n) except -1:
    """`col`'s length raised to n, its buffer grown as CPython's array_resize grows it for
    array.append (the rows written here leave the slack the pure twin's appends leave), and
    refused as CPython refuses it while the array exports its buffer."""
    cdef _ArrayFields* a = <_ArrayFields*><void*>col
    cdef Py_ssize_t size, itemsize = col.ob_descr.itemsize
    cdef char* items
    if a.allocated >= n and a.ob_item != NULL:
        Py_SET_SIZE(col, n)
        return 0
    if a.ob_exports > 0:
        raise BufferError("cannot resize an array that is exporting buffers")
    size = (n >> 4) + (3 if len(col) < 8 else 7) + n
    if size > PY_SSIZE_T_MAX // itemsize:
        raise MemoryError()
    items = <char*>PyMem_Realloc(a.ob_item, <size_t>(size * itemsize))
    if items == NULL:
        raise MemoryError()
    a.ob_item = items
    a.allocated = size
    Py_SET_SIZE(col, n)
    return 0


cdef int drop_row(array.array col, Py_ssize_t j) except -1:
    """`del col[j]` (0 <= j < len(col)) as CPython's array does it for one item: the items
    after it moved down, the length cut by one (array_resize keeps the buffer for a shrink of
    fewer than 16 items), refused while the array exports its buffer."""
    cdef _ArrayFields* a = <_ArrayFields*><void*>col
    cdef Py_ssize_t size = len(col), itemsize = col.ob_descr.itemsize
    if a.ob_exports > 0:
        raise BufferError("cannot resize an array that is exporting buffers")
    memmove(a.ob_item + j * itemsize, a.ob_item + (j + 1) * itemsize,
            <size_t>((size - j - 1) * itemsize))
    Py_SET_SIZE(col, size - 1)
    return 0


# An emptied column keeps its buffer for the rows it will take again only up to this many items:
# a table that once held many rows gives their memory back when it empties.
cdef Py_ssize_t _KEEP_ROOM = 16


cdef void release(array.array col) noexcept:
    """An empty column's buffer freed when it has room for more than _KEEP_ROOM items (as
    CPython's array frees it when resized to nothing), unless a view of it is exported."""
    cdef _ArrayFields* a = <_ArrayFields*><void*>col
    if len(col) == 0 and a.allocated > _KEEP_ROOM and a.ob_exports == 0:
        PyMem_Free(a.ob_item)
        a.ob_item = NULL
        a.allocated = 0


cdef object _LOW = (1 << 64) - 1
cdef int NO_OWNER = -1  # pel_store.NO_OWNER
cdef unsigned long long _ULL_MAX = 0xFFFFFFFFFFFFFFFF
cdef object _LLONG_MIN = -(1 << 63)


cdef inline object make_id(unsigned long long m, unsigned long long s):
    return (<object>m) << 64 | s


def pop_one(list maxes, list chunks, unsigned long long m, unsigned long long s,
            Py_ssize_t column):
    cdef Py_ssize_t lo = 0, hi = len(chunks), mid, size, j, k, width
    cdef tuple chunk
    cdef array.array cms, cseq, col
    cdef unsigned long long lm, ls
    if len(maxes) != hi:
        raise ValueError("pop_one wants a chunk's last ID in maxes for every chunk")
    # The first chunk whose last ID is not below (m, s), read from the chunks' own last rows
    # (maxes holds the same IDs as Python ints, which a compare would have to build).
    while lo < hi:
        mid = (lo + hi) >> 1
        chunk = chunks[mid]
        cms, cseq = chunk[0], chunk[1]
        check_ids(cms, cseq)
        size = len(cms)
        if size == 0:
            raise TypeError("a packed chunk holds at least one ID")
        lm = cms.data.as_ulonglongs[size - 1]
        ls = cseq.data.as_ulonglongs[size - 1]
        if lm < m or (lm == m and ls < s):
            lo = mid + 1
        else:
            hi = mid
    if lo == len(chunks):
        return None
    chunk = chunks[lo]
    cms, cseq = chunk[0], chunk[1]
    size = len(cms)
    width = len(chunk)
    for k in range(2, width):
        if len(chunk[k]) != size:
            raise TypeError("a packed chunk's columns are as long as its IDs")
    if not 0 <= column < width:
        raise IndexError("pop_one's column is not one of the chunk's")
    j = c_find(cms.data.as_ulonglongs, cseq.data.as_ulonglongs, size, m, s)
    if j < 0:
        return None
    value = chunk[column][j]
    for k in range(width):  # (the twin's `del col[j]`)
        drop_row(chunk[k], j)
    if size == 1:  # (emptied: it goes, its columns left empty for the caller to use again)
        del chunks[lo]
        del maxes[lo]
        for k in range(width):
            release(chunk[k])
        return value
    if j == size - 1:  # (the chunk's last ID went: a new last ID)
        maxes[lo] = make_id(cms.data.as_ulonglongs[size - 2], cseq.data.as_ulonglongs[size - 2])
    return value


def scan(list maxes, list chunks, object start, long long min_idle, long long now,
         long long count, long long attempts, unsigned long long inc, object get):
    cdef list sids = [], counts = [], got = []
    cdef Py_ssize_t c, j, k, n
    cdef array.array ms, seq, times, cnts, owners
    cdef long long oldest
    cdef unsigned long long cnt
    cdef object sid, fields
    # idle >= min_idle is time <= now - min_idle (no difference of a row's time overflows);
    # below the 64-bit range (a clock before the epoch), no row is idle enough
    cdef object bound = (<object>now) - min_idle
    cdef bint none_idle = bound < _LLONG_MIN
    oldest = _LLONG_MIN if none_idle else bound
    c = bisect_left(maxes, start)
    if c == len(chunks):
        return sids, counts, got, None
    ms, seq = chunks[c][0], chunks[c][1]
    check_ids(ms, seq)
    j = c_find(ms.data.as_ulonglongs, seq.data.as_ulonglongs, len(ms), start >> 64,
               PyLong_AsUnsignedLongLongMask(start))
    if j < 0:
        j = -1 - j
    while c < len(chunks):
        ms, seq, times, cnts, owners = chunks[c]
        check_row(ms, seq, times, cnts, owners)
        n = len(ms)
        for k in range(j, n):
            sid = make_id(ms.data.as_ulonglongs[k], seq.data.as_ulonglongs[k])
            if not (attempts and count):
                return sids, counts, got, sid
            attempts -= 1
            fields = get(sid)
            if (fields is not None and min_idle
                    and (none_idle or times.data.as_longlongs[k] > oldest)
                    and owners.data.as_ints[k] != NO_OWNER):
                continue
            sids.append(sid)
            cnt = cnts.data.as_ulonglongs[k]
            if cnt > _ULL_MAX - inc:  # as the reference: past 64 bits, the put refuses it
                counts.append((<object>cnt) + inc)
            else:
                counts.append(cnt + inc)
            got.append(fields)
            count -= 1
        c += 1
        j = 0
    return sids, counts, got, None


def claim(list maxes, list chunks, list sids, long long time_ms, list counts, int owner):
    cdef list out_ms = [], out_seq = [], old_owners = [], old_times = []
    cdef Py_ssize_t i, n = len(sids), c = -1, j, size = 0
    cdef unsigned long long m, s, tm = 0, ts = 0, cnt
    cdef array.array ms = None, seq = None, times = None, cnts = None, owners = None
    cdef bint have = False
    cdef object sid
    if len(counts) != n:
        raise ValueError("claim wants one count an ID")
    for i in range(n):
        sid = sids[i]
        m = sid >> 64
        s = PyLong_AsUnsignedLongLongMask(sid)
        cnt = counts[i]
        if not have or m > tm or (m == tm and s > ts):
            c = bisect_left(maxes, sid)
            if c == len(chunks):
                raise KeyError(sid)
            ms, seq, times, cnts, owners = chunks[c]
            check_row(ms, seq, times, cnts, owners)
            size = len(ms)
            tm = ms.data.as_ulonglongs[size - 1]
            ts = seq.data.as_ulonglongs[size - 1]
            have = True
        j = c_find(ms.data.as_ulonglongs, seq.data.as_ulonglongs, size, m, s)
        if j < 0:
            raise KeyError(sid)
        out_ms.append(m)
        out_seq.append(s)
        old_times.append(times.data.as_longlongs[j])
        old_owners.append(owners.data.as_ints[j])
        times.data.as_longlongs[j] = time_ms
        cnts.data.as_ulonglongs[j] = cnt
        owners.data.as_ints[j] = owner
    return out_ms, out_seq, old_owners, old_times


cdef void compact(array.array col, const unsigned char *gone, Py_ssize_t size) noexcept:
    """Close up the rows marked in `gone` (the array is then resized by the caller)."""
    cdef Py_ssize_t width = col.ob_descr.itemsize, k = 0, w = 0, run
    cdef char *base = col.data.as_chars
    while k < size:
        if gone[k]:
            k += 1
            continue
        run = k
        while run < size and not gone[run]:
            run += 1
        if w != k:
            memmove(base + w * width, base + k * width, (run - k) * width)
        w += run - k
        k = run


def remove_sorted(list maxes, list chunks, list ms, list seq):
    return c_remove_sorted(maxes, chunks, ms, seq, None, 0)


def pop_sorted(list maxes, list chunks, list ms, list seq, int column):
    cdef list out = [None] * len(ms)
    c_remove_sorted(maxes, chunks, ms, seq, out, column)
    return out


cdef Py_ssize_t c_remove_sorted(list maxes, list chunks, list ms, list seq, list out,
                                int column) except -1:
    """remove_sorted; with `out`, each removed ID's value in the chunk column `column` is
    stored at its index in `out` (absent IDs leave theirs as they are)."""
    cdef Py_ssize_t i = 0, n = len(ms), c = 0, k, size, removed = 0, gone_here
    cdef unsigned long long pm, ps, hm, hs, tm, ts
    cdef array.array cms, cseq, col
    cdef bytearray mask
    cdef unsigned char *gone
    if len(seq) != n:
        raise ValueError("remove_sorted wants ms and seq lists of one length")
    while i < n and c < len(chunks):
        c = bisect_left(maxes, (<object>ms[i]) << 64 | seq[i], c)
        if c == len(chunks):
            break
        chunk = chunks[c]
        cms, cseq = chunk[0], chunk[1]
        check_ids(cms, cseq)
        size = len(cms)
        for col in chunk[2:]:
            if len(col) != size:
                raise TypeError("a packed chunk's columns are as long as its IDs")
        tm = cms.data.as_ulonglongs[size - 1]
        ts = cseq.data.as_ulonglongs[size - 1]
        mask = bytearray(size)
        gone = mask
        gone_here = 0
        k = 0
        while i < n:
            pm = ms[i]
            ps = seq[i]
            if pm > tm or (pm == tm and ps > ts):
                break  # past this chunk
            while k < size:  # the first row not below the probe
                hm = cms.data.as_ulonglongs[k]
                hs = cseq.data.as_ulonglongs[k]
                if hm > pm or (hm == pm and hs >= ps):
                    break
                k += 1
            if k < size and cms.data.as_ulonglongs[k] == pm and cseq.data.as_ulonglongs[k] == ps:
                if out is not None:
                    out[i] = chunk[column][k]
                gone[k] = 1
                gone_here += 1
                k += 1
            i += 1
        if not gone_here:
            c += 1
            continue
        removed += gone_here
        if gone_here == size:
            del chunks[c]
            del maxes[c]
            continue
        for col in chunk:
            compact(col, gone, size)
            array.resize(col, size - gone_here)
        maxes[c] = make_id(cms.data.as_ulonglongs[size - gone_here - 1],
                           cseq.data.as_ulonglongs[size - gone_here - 1])
        c += 1
    return removed


cdef array.array _COLUMN_Q = array.array("Q")
cdef array.array _COLUMN_q = array.array("q")
cdef array.array _COLUMN_i = array.array("i")


cdef array.array empty_column(str code):
    if code == "Q":
        return _COLUMN_Q
    if code == "q":
        return _COLUMN_q
    if code == "i":
        return _COLUMN_i
    raise ValueError(f"no packed column of typecode {code!r}")


cdef void fill_value(array.array col, Py_ssize_t at, Py_ssize_t take, object v) except *:
    cdef Py_ssize_t i
    cdef unsigned long long uv
    cdef long long sv
    cdef int iv
    cdef char code = col.ob_descr.typecode
    if code == b'Q':
        uv = v
        for i in range(take):
            col.data.as_ulonglongs[at + i] = uv
    elif code == b'q':
        sv = v
        for i in range(take):
            col.data.as_longlongs[at + i] = sv
    elif code == b'i':
        iv = v
        for i in range(take):
            col.data.as_ints[at + i] = iv
    else:
        raise TypeError("a packed value column is an array of q, Q or i")


def extend_above(list maxes, list chunks, list ms, list seq, tuple values, tuple codes,
                 Py_ssize_t cap):
    cdef Py_ssize_t n = len(ms), done = 0, take, at, i, k, width
    cdef array.array cms, cseq
    cdef tuple chunk, part
    if len(seq) != n or len(values) != len(codes):
        raise ValueError("extend_above wants ms and seq lists of one length, a value a column")
    while done < n:
        if not chunks or len(chunks[len(chunks) - 1][0]) >= cap:  # (no wraparound here)
            take = min(n - done, cap)
            chunk = None
            at = 0
        else:
            chunk = chunks[len(chunks) - 1]
            at = len(chunk[0])
            take = min(n - done, cap - at)
        width = 2 + len(codes)
        if chunk is not None and take <= _APPEND_AT_MOST:
            _append_rows(chunk, ms, seq, done, take, values, codes)
            done += take
            maxes[len(maxes) - 1] = make_id(ms[done - 1], seq[done - 1])
            continue
        # The new rows, as columns of their own: a new chunk as they are (at its size, no
        # slack); else appended by array.extend, whose growth keeps the slack the pure
        # twin's extends leave (a few percent, not Cython's resize_smart's half).
        part = (array.clone(_COLUMN_Q, take, False), array.clone(_COLUMN_Q, take, False),
                *[array.clone(empty_column(code), take, False) for code in codes])
        cms, cseq = part[0], part[1]
        for i in range(take):
            cms.data.as_ulonglongs[i] = ms[done + i]
            cseq.data.as_ulonglongs[i] = seq[done + i]
        for k in range(len(values)):
            fill_value(part[2 + k], 0, take, values[k])
        if chunk is None:
            chunks.append(part)
            maxes.append(0)
        else:
            if len(chunk) != width:
                raise TypeError("a packed chunk has its ID columns and one a value")
            check_ids(chunk[0], chunk[1])
            for k in range(width):
                chunk[k].extend(part[k])
        done += take
        maxes[len(maxes) - 1] = make_id(cms.data.as_ulonglongs[take - 1],
                                        cseq.data.as_ulonglongs[take - 1])


# Up to this many rows are written into a chunk's columns in place (grown as array.append grows
# them, as the twin's extends): cloning columns to extend with costs more for a few rows (a
# queue's deliveries of one message).
cdef Py_ssize_t _APPEND_AT_MOST = 4


cdef void _append_rows(tuple chunk, list ms, list seq, Py_ssize_t done, Py_ssize_t take,
                       tuple values, tuple codes) except *:
    """`take` rows from `done` appended to the chunk's columns, or none if one is refused (a
    value outside its column's type: the columns cut back to where they were)."""
    cdef Py_ssize_t width = 2 + len(codes), at, i, k
    cdef array.array col, want, cms, cseq
    if len(chunk) != width:
        raise TypeError("a packed chunk has its ID columns and one a value")
    check_ids(chunk[0], chunk[1])
    at = len(chunk[0])
    for k in range(2, width):
        col = chunk[k]
        want = empty_column(codes[k - 2])
        if len(col) != at or col.ob_descr.typecode != want.ob_descr.typecode:
            raise TypeError("a packed chunk's value columns are of its typecodes, as long "
                            "as its IDs")
    cms, cseq = chunk[0], chunk[1]
    try:
        for k in range(width):
            grow(chunk[k], at + take)
        for i in range(take):
            cms.data.as_ulonglongs[at + i] = ms[done + i]
            cseq.data.as_ulonglongs[at + i] = seq[done + i]
        for k in range(2, width):
            fill_value(chunk[k], at, take, values[k - 2])
    except BaseException:
        for k in range(width):  # (the length back; a grown buffer keeps its room)
            Py_SET_SIZE(chunk[k], at)
        raise
