# cython: boundscheck=False, wraparound=False, cdivision=True
"""The claim step over a packed PEL, compiled: the same functions and results as
`_pel_claim_py.py` (the reference), walking and rewriting the chunks' `array` buffers directly
instead of boxing every cell.
"""

from bisect import bisect_left

from cpython cimport array

include "_pel_columns.pxi"  # c_find, check_ids, check_row: the PEL kernels' shared helpers
from cpython.long cimport PyLong_AsUnsignedLongLongMask
from libc.string cimport memmove

cdef object _LOW = (1 << 64) - 1
cdef int NO_OWNER = -1  # pel_store.NO_OWNER
cdef unsigned long long _ULL_MAX = 0xFFFFFFFFFFFFFFFF
cdef object _LLONG_MIN = -(1 << 63)


cdef inline object make_id(unsigned long long m, unsigned long long s):
    return (<object>m) << 64 | s


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
        # The new rows, as columns of their own: a new chunk as they are (at its size, no
        # slack); else appended by array.extend, whose growth keeps the slack the pure
        # twin's extends leave (a few percent, not Cython's resize_smart's half).
        width = 2 + len(codes)
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
