# cython: boundscheck=False, wraparound=False, cdivision=True
"""The packed columns of the small hashes and sets, compiled: the same results and errors as
`_packed_columns_py.py` (the reference, which describes the pack), without slicing the header.

Every call checks the pack before it reads a string (`_open`: the width byte, the header within
the bytes, the lengths summing to exactly the bytes after it), so the reads below, unchecked,
stay inside the bytes; a column or index is checked against the count before it is used.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy


cdef enum:
    LONG = 255  # a length or count from which a pack's lengths take 4 bytes
    SEED_BYTES = 16  # a table's placement seed: SipHash's key
    DISTINCT_BY_PAIRS = 64  # keys of a pack compared pairwise up to this count, else by a set


cdef struct Pack:
    const unsigned char *p
    Py_ssize_t w  # 1 or 4
    Py_ssize_t count
    Py_ssize_t data  # offset of the first string


cdef inline Py_ssize_t _len_at(const Pack *k, Py_ssize_t j) noexcept nogil:
    """Length number j, all columns counted one after another (j < ncols * count)."""
    cdef const unsigned char *q
    if k.w == 1:
        return k.p[2 + j]
    q = k.p + 5 + 4 * j
    return <Py_ssize_t>q[0] | (<Py_ssize_t>q[1] << 8) | (<Py_ssize_t>q[2] << 16) | (
        <Py_ssize_t>q[3] << 24)


cdef inline Py_ssize_t _sum(const Pack *k, Py_ssize_t stop) noexcept nogil:
    """The sum of the first `stop` lengths (checked by `_open` to fit the bytes)."""
    cdef Py_ssize_t j = 0, total = 0
    cdef const unsigned char *q = k.p + 2
    cdef uint64_t x
    if k.w == 1:
        # eight one-byte lengths a step: bytes added pairwise into 16-bit lanes, the four
        # lanes added by one multiply (at most 8 * 255: no lane overflows)
        while j + 8 <= stop:
            memcpy(&x, q + j, 8)
            x = (x & 0x00FF00FF00FF00FFULL) + ((x >> 8) & 0x00FF00FF00FF00FFULL)
            total += <Py_ssize_t>((x * 0x0001000100010001ULL) >> 48)
            j += 8
        while j < stop:
            total += q[j]
            j += 1
    else:
        for j in range(stop):
            total += _len_at(k, j)
    return total


cdef int _open(Pack *k, object blob, Py_ssize_t ncols) except -1:
    cdef Py_ssize_t size, j, nlens, room, width, total = 0
    cdef const unsigned char *p
    if not PyBytes_Check(blob):  # bytes or a subclass (a hash kept bare is one)
        raise TypeError("a pack is bytes")
    size = PyBytes_GET_SIZE(blob)
    p = <const unsigned char *>PyBytes_AS_STRING(blob)
    if ncols < 1:
        raise ValueError("a pack has at least one column")
    if size < 2:
        raise ValueError("pack too short for its header")
    k.p = p
    k.w = p[0]
    if k.w == 1:
        k.count = p[1]
    elif k.w == 4:
        if size < 5:
            raise ValueError("pack too short for its header")
        k.count = <Py_ssize_t>p[1] | (<Py_ssize_t>p[2] << 8) | (<Py_ssize_t>p[3] << 16) | (
            <Py_ssize_t>p[4] << 24)
    else:
        raise ValueError("pack width byte is not 1 or 4")
    # 1 + w + ncols * count * w > size, asked by a division: no product can overflow
    width = k.count * k.w  # < 2**34
    if width > 0 and ncols > (size - 1 - k.w) // width:
        raise ValueError("pack lengths run past its end")
    k.data = 1 + k.w + ncols * k.count * k.w
    nlens = ncols * k.count
    room = size - k.data
    if k.w == 1:
        total = _sum(k, nlens)  # at most 255 * nlens: cannot overflow
    else:
        for j in range(nlens):
            total += _len_at(k, j)
            if total > room:  # stop early: keeps the sum far from overflowing
                break
    if total > room:
        raise ValueError("pack strings run past its end")
    if total < room:
        raise ValueError("pack has bytes after its strings")
    return 0


cdef int _check_place(Py_ssize_t ncols, Py_ssize_t n, Py_ssize_t col, Py_ssize_t i,
                      Py_ssize_t last) except -1:
    if col < 0 or col >= ncols:
        raise IndexError("pack column out of range")
    if i < 0 or i >= n + last:
        raise IndexError("pack index out of range")
    return 0


cdef Py_ssize_t _index(const Pack *k, object needle) except -2:
    """The first string of column 0 equal to needle: its length first, then its last byte
    (keys that share a prefix, "member:17", differ at the end), then its bytes."""
    cdef const unsigned char *s
    cdef Py_ssize_t nlen, off = k.data, j, size
    cdef unsigned char last
    if not PyBytes_Check(needle):
        raise TypeError("a needle is bytes")
    s = <const unsigned char *>PyBytes_AS_STRING(needle)
    nlen = PyBytes_GET_SIZE(needle)
    if nlen == 0:
        for j in range(k.count):
            if _len_at(k, j) == 0:
                return j
        return -1
    last = s[nlen - 1]
    if k.w == 1:  # the common width, in its own loop: no test of the width per string
        for j in range(k.count):
            size = k.p[2 + j]
            if size == nlen and _same(k.p + off, s, nlen, last):
                return j
            off += size
    else:
        for j in range(k.count):
            size = _len_at(k, j)
            if size == nlen and _same(k.p + off, s, nlen, last):
                return j
            off += size
    return -1


cdef inline bint _same(const unsigned char *at, const unsigned char *s, Py_ssize_t nlen,
                       unsigned char last) noexcept nogil:
    return at[nlen - 1] == last and memcmp(at, s, nlen) == 0


cdef bytes _item(const Pack *k, Py_ssize_t j):
    cdef Py_ssize_t at = k.data + _sum(k, j)
    return (<const char *>k.p)[at:at + _len_at(k, j)]


def pack_count(blob, Py_ssize_t ncols):
    cdef Pack k
    _open(&k, blob, ncols)
    return k.count


def pack_index(blob, Py_ssize_t ncols, needle):
    cdef Pack k
    _open(&k, blob, ncols)
    return _index(&k, needle)


def pack_offset(blob, Py_ssize_t ncols, Py_ssize_t col, Py_ssize_t i):
    cdef Pack k
    _open(&k, blob, ncols)
    _check_place(ncols, k.count, col, i, 1)
    return k.data + _sum(&k, col * k.count + i)


def pack_item(blob, Py_ssize_t ncols, Py_ssize_t col, Py_ssize_t i):
    cdef Pack k
    _open(&k, blob, ncols)
    _check_place(ncols, k.count, col, i, 0)
    return _item(&k, col * k.count + i)


def pack_get(blob, Py_ssize_t ncols, needle, Py_ssize_t col):
    cdef Pack k
    cdef Py_ssize_t i
    _open(&k, blob, ncols)
    if col < 0 or col >= ncols:
        raise IndexError("pack column out of range")
    i = _index(&k, needle)
    if i < 0:
        return None
    return _item(&k, col * k.count + i)


def pack_strings(blob, Py_ssize_t ncols):
    """Every string of the pack, column after column (HGETALL, SMEMBERS, a conversion)."""
    cdef Pack k
    cdef Py_ssize_t j, n, off, size
    cdef const char *p
    _open(&k, blob, ncols)
    n = ncols * k.count
    out = [None] * n
    off = k.data
    p = <const char *>k.p
    for j in range(n):
        size = _len_at(&k, j)
        out[j] = p[off:off + size]
        off += size
    return out


cdef struct Strings:
    Py_ssize_t *lens
    const char **ptrs


cdef int _strings(const Pack *k, Py_ssize_t ncols, Strings *out) except -1:
    """Every string's length and start, column after column (freed by `_free`)."""
    cdef Py_ssize_t j, n = ncols * k.count, off = k.data
    out.lens = <Py_ssize_t *>PyMem_Malloc((n + 2 * ncols) * sizeof(Py_ssize_t))
    out.ptrs = <const char **>PyMem_Malloc((n + 2 * ncols) * sizeof(char *))
    if out.lens == NULL or out.ptrs == NULL:
        _free(out)
        raise MemoryError()
    for j in range(n):
        out.lens[j] = _len_at(k, j)
        out.ptrs[j] = <const char *>k.p + off
        off += out.lens[j]
    return 0


cdef void _free(Strings *t) noexcept:
    PyMem_Free(t.lens)
    PyMem_Free(t.ptrs)
    t.lens = NULL
    t.ptrs = NULL


cdef bytes _build(Py_ssize_t ncols, Py_ssize_t n, const Py_ssize_t *lens,
                  const char **ptrs, const Py_ssize_t *rows):
    """The pack of the given rows (`rows[r]`: the row of `lens`/`ptrs`, which hold `n_all`
    rows column after column, `n_all` = rows[n]), in the pack's one form: one-byte lengths
    when the count and every length are under 255, else four."""
    cdef Py_ssize_t n_all = rows[n], c, r, j, w, head, total = 0, longest = 0, off, size
    cdef unsigned char *d
    for c in range(ncols):
        for r in range(n):
            size = lens[c * n_all + rows[r]]
            total += size
            if size > longest:
                longest = size
    w = 1 if n < LONG and longest < LONG else 4
    head = 1 + w + ncols * n * w
    out = PyBytes_FromStringAndSize(NULL, head + total)
    d = <unsigned char *>PyBytes_AS_STRING(out)
    d[0] = <unsigned char>w
    _put(d + 1, w, n)
    off = head
    for c in range(ncols):
        for r in range(n):
            j = c * n_all + rows[r]
            _put(d + 1 + w + (c * n + r) * w, w, lens[j])
            memcpy(d + off, ptrs[j], lens[j])
            off += lens[j]
    return out


cdef inline void _put(unsigned char *at, Py_ssize_t w, Py_ssize_t v) noexcept nogil:
    if w == 1:
        at[0] = <unsigned char>v
    else:
        at[0] = <unsigned char>(v & 255)
        at[1] = <unsigned char>((v >> 8) & 255)
        at[2] = <unsigned char>((v >> 16) & 255)
        at[3] = <unsigned char>((v >> 24) & 255)


def pack_put(blob, Py_ssize_t ncols, key, value):
    """(the pack with the row `key, value` set, the value it replaced or None): an existing
    key's value is replaced in its row, a new row goes last. Two columns only."""
    cdef Pack k
    cdef Strings t
    cdef Py_ssize_t i, n, m, r
    cdef Py_ssize_t *rows
    if ncols != 2:
        raise ValueError("pack_put sets a row of two columns")
    if not PyBytes_Check(value):
        raise TypeError("a value is bytes")
    _open(&k, blob, ncols)
    i = _index(&k, key)
    n = k.count
    m = n if i >= 0 else n + 1
    t.lens = NULL
    t.ptrs = NULL
    rows = <Py_ssize_t *>PyMem_Malloc((m + 1) * sizeof(Py_ssize_t))
    if rows == NULL:
        raise MemoryError()
    try:
        _strings(&k, ncols, &t)
        old = None
        if i >= 0:
            old = (t.ptrs[n + i])[:t.lens[n + i]]
            t.lens[n + i] = PyBytes_GET_SIZE(value)
            t.ptrs[n + i] = PyBytes_AS_STRING(value)
            for r in range(n + 1):
                rows[r] = r
            return _build(ncols, n, t.lens, t.ptrs, rows), old
        # a new last row: the columns laid out again with room for it (m rows each)
        for r in range(n - 1, -1, -1):  # the values' column moves up one place
            t.lens[m + r] = t.lens[n + r]
            t.ptrs[m + r] = t.ptrs[n + r]
        t.lens[n] = PyBytes_GET_SIZE(key)
        t.ptrs[n] = PyBytes_AS_STRING(key)
        t.lens[m + n] = PyBytes_GET_SIZE(value)
        t.ptrs[m + n] = PyBytes_AS_STRING(value)
        for r in range(m + 1):
            rows[r] = r
        return _build(ncols, m, t.lens, t.ptrs, rows), None
    finally:
        _free(&t)
        PyMem_Free(rows)


def pack_add(blob, Py_ssize_t ncols, key):
    """The pack with `key` appended as its last string, or None when `key` is in it already (a
    set's member added). One column only. A narrow pack that stays narrow is copied around
    the new length and string, not rebuilt."""
    cdef Pack k
    cdef Strings t
    cdef Py_ssize_t n, klen, size, r
    cdef Py_ssize_t *rows
    cdef unsigned char *d
    if ncols != 1:
        raise ValueError("pack_add adds a row of one column")
    _open(&k, blob, ncols)
    if _index(&k, key) >= 0:  # (also: key is bytes)
        return None
    n = k.count
    klen = PyBytes_GET_SIZE(key)
    if k.w == 1 and n + 1 < LONG and klen < LONG:
        size = PyBytes_GET_SIZE(blob)
        out = PyBytes_FromStringAndSize(NULL, size + 1 + klen)
        d = <unsigned char *>PyBytes_AS_STRING(out)
        d[0] = 1
        d[1] = <unsigned char>(n + 1)
        memcpy(d + 2, k.p + 2, <size_t>n)
        d[2 + n] = <unsigned char>klen
        memcpy(d + 3 + n, k.p + 2 + n, <size_t>(size - 2 - n))
        memcpy(d + size + 1, PyBytes_AS_STRING(key), <size_t>klen)
        return out
    t.lens = NULL
    t.ptrs = NULL
    rows = <Py_ssize_t *>PyMem_Malloc((n + 2) * sizeof(Py_ssize_t))
    if rows == NULL:
        raise MemoryError()
    try:
        _strings(&k, ncols, &t)  # (room for n + 2 strings)
        t.lens[n] = klen
        t.ptrs[n] = PyBytes_AS_STRING(key)
        for r in range(n + 2):
            rows[r] = r
        return _build(ncols, n + 1, t.lens, t.ptrs, rows)
    finally:
        _free(&t)
        PyMem_Free(rows)


cdef tuple _delete_narrow(const Pack *k, Py_ssize_t ncols, Py_ssize_t size, Py_ssize_t i):
    """pack_delete of row i from a narrow pack (one-byte lengths, which it keeps: no count or
    length grows)."""
    cdef Py_ssize_t n = k.count, c, j, at, src, dst, pos = 2, gone = 0, rest = n - i - 1
    cdef unsigned char *d
    for c in range(ncols):
        gone += k.p[2 + c * n + i]
    out = PyBytes_FromStringAndSize(NULL, size - ncols - gone)
    d = <unsigned char *>PyBytes_AS_STRING(out)
    d[0] = 1
    d[1] = <unsigned char>(n - 1)
    for c in range(ncols):  # each column's lengths but the row's
        memcpy(d + pos, k.p + 2 + c * n, <size_t>i)
        memcpy(d + pos + i, k.p + 3 + c * n + i, <size_t>rest)
        pos += n - 1
    src = k.data
    dst = pos
    at = 0
    for c in range(ncols):  # the strings, each column's string of the row skipped
        j = c * n + i
        at = k.data + _sum(k, j)
        memcpy(d + dst, k.p + src, <size_t>(at - src))
        dst += at - src
        src = at + k.p[2 + j]
    memcpy(d + dst, k.p + src, <size_t>(size - src))
    return out, (<const char *>k.p)[at:src]


def pack_delete(blob, Py_ssize_t ncols, key):
    """(the pack without the row of `key`, that row's string in the last column: a hash's
    value, a set's member), or None when `key` is absent."""
    cdef Pack k
    cdef Strings t
    cdef Py_ssize_t i, n, r, a = 0, j
    cdef Py_ssize_t *rows
    _open(&k, blob, ncols)
    i = _index(&k, key)
    if i < 0:
        return None
    n = k.count
    if k.w == 1:  # stays narrow: copied around the row's lengths and strings
        return _delete_narrow(&k, ncols, PyBytes_GET_SIZE(blob), i)
    t.lens = NULL
    t.ptrs = NULL
    rows = <Py_ssize_t *>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
    if rows == NULL:
        raise MemoryError()
    try:
        _strings(&k, ncols, &t)
        j = (ncols - 1) * n + i
        last = PyBytes_FromStringAndSize(t.ptrs[j], t.lens[j])
        for r in range(n):
            if r != i:
                rows[a] = r
                a += 1
        rows[a] = n
        return _build(ncols, a, t.lens, t.ptrs, rows), last
    finally:
        _free(&t)
        PyMem_Free(rows)


# --- placement: SipHash-1-3 under a table's own 16-byte seed --------------------------------

cdef inline uint64_t _rotl(uint64_t x, int b) noexcept nogil:
    return (x << b) | (x >> (64 - b))


cdef inline uint64_t _le64(const unsigned char *p) noexcept nogil:
    cdef uint64_t x = 0
    cdef int i
    for i in range(8):
        x |= (<uint64_t>p[i]) << (8 * i)
    return x


cdef uint64_t _siphash13(const unsigned char *s, Py_ssize_t n, uint64_t k0,
                         uint64_t k1) noexcept nogil:
    cdef uint64_t v0 = k0 ^ 0x736f6d6570736575ULL
    cdef uint64_t v1 = k1 ^ 0x646f72616e646f6dULL
    cdef uint64_t v2 = k0 ^ 0x6c7967656e657261ULL
    cdef uint64_t v3 = k1 ^ 0x7465646279746573ULL
    cdef uint64_t m, b = (<uint64_t>n) << 56
    cdef Py_ssize_t i = 0, tail
    cdef int r
    while i + 8 <= n:
        m = _le64(s + i)
        v3 ^= m
        v0 += v1; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
        v2 += v3; v3 = _rotl(v3, 16); v3 ^= v2
        v0 += v3; v3 = _rotl(v3, 21); v3 ^= v0
        v2 += v1; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)
        v0 ^= m
        i += 8
    tail = n - i
    for r in range(tail):
        b |= (<uint64_t>s[i + r]) << (8 * r)
    v3 ^= b
    for r in range(4):  # one compression round, then three finalization rounds
        v0 += v1; v1 = _rotl(v1, 13); v1 ^= v0; v0 = _rotl(v0, 32)
        v2 += v3; v3 = _rotl(v3, 16); v3 ^= v2
        v0 += v3; v3 = _rotl(v3, 21); v3 ^= v0
        v2 += v1; v1 = _rotl(v1, 17); v1 ^= v2; v2 = _rotl(v2, 32)
        if r == 0:
            v0 ^= b
            v2 ^= 0xff
    return v0 ^ v1 ^ v2 ^ v3


cdef int _seed(object seed, uint64_t *k0, uint64_t *k1) except -1:
    if not PyBytes_Check(seed) or PyBytes_GET_SIZE(seed) != SEED_BYTES:
        raise ValueError("a table's seed is 16 bytes")
    k0[0] = _le64(<const unsigned char *>PyBytes_AS_STRING(seed))
    k1[0] = _le64(<const unsigned char *>PyBytes_AS_STRING(seed) + 8)
    return 0


cdef inline Py_ssize_t _slot(uint64_t h, Py_ssize_t size, Py_ssize_t split) noexcept nogil:
    cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>(size - 1))
    if i < split:
        i = <Py_ssize_t>(h & <uint64_t>((size << 1) - 1))
    return i


def key_hash(key, seed):
    """SipHash-1-3 of `key` under the 16-byte `seed` (its two little-endian halves)."""
    cdef uint64_t k0, k1
    if not PyBytes_Check(key):
        raise TypeError("a key is bytes")
    _seed(seed, &k0, &k1)
    return _siphash13(<const unsigned char *>PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key),
                      k0, k1)


def bucket_of(key, seed, Py_ssize_t size, Py_ssize_t split):
    """The bucket of `key` in a table of `size` buckets (a power of two) of which the first
    `split` are split: its hash's low bits, one more for a split bucket."""
    cdef uint64_t k0, k1
    if not PyBytes_Check(key):
        raise TypeError("a key is bytes")
    _seed(seed, &k0, &k1)
    return _slot(_siphash13(<const unsigned char *>PyBytes_AS_STRING(key),
                            PyBytes_GET_SIZE(key), k0, k1), size, split)


cdef Py_ssize_t _open_seeded(Pack *k, Strings *t, object blob, Py_ssize_t ncols, object seed,
                             uint64_t *k0, uint64_t *k1) except -1:
    """The pack opened (its count returned), the seed's keys read, no strings listed yet."""
    _seed(seed, k0, k1)
    _open(k, blob, ncols)
    t.lens = NULL
    t.ptrs = NULL
    return k.count


def pack_split(blob, Py_ssize_t ncols, seed, Py_ssize_t mask, Py_ssize_t keep):
    """(the rows whose key's hash & mask is `keep`, the others): a bucket split in two."""
    cdef Pack k
    cdef Strings t
    cdef Py_ssize_t n, r, a = 0, b = 0
    cdef Py_ssize_t *kept
    cdef Py_ssize_t *moved
    cdef uint64_t k0, k1
    n = _open_seeded(&k, &t, blob, ncols, seed, &k0, &k1)
    kept = <Py_ssize_t *>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
    moved = <Py_ssize_t *>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
    try:
        if kept == NULL or moved == NULL:
            raise MemoryError()
        _strings(&k, ncols, &t)
        for r in range(n):
            if <Py_ssize_t>(_siphash13(<const unsigned char *>t.ptrs[r], t.lens[r], k0, k1)
                            & <uint64_t>mask) == keep:
                kept[a] = r
                a += 1
            else:
                moved[b] = r
                b += 1
        kept[a] = n
        moved[b] = n
        return (_build(ncols, a, t.lens, t.ptrs, kept),
                _build(ncols, b, t.lens, t.ptrs, moved))
    finally:
        _free(&t)
        PyMem_Free(kept)
        PyMem_Free(moved)


def pack_placed(blob, Py_ssize_t ncols, seed, Py_ssize_t size, Py_ssize_t split,
                Py_ssize_t index):
    """The pack's count, once it is checked to be bucket `index` of such a table: every key
    placed there, none twice (ValueError if not: a pack read from a file)."""
    cdef Pack k
    cdef Strings t
    cdef Py_ssize_t n, r, q
    cdef uint64_t k0, k1
    n = _open_seeded(&k, &t, blob, ncols, seed, &k0, &k1)
    try:
        _strings(&k, ncols, &t)
        for r in range(n):
            if _slot(_siphash13(<const unsigned char *>t.ptrs[r], t.lens[r], k0, k1),
                     size, split) != index:
                raise ValueError(f"a key of bucket {index} belongs to another bucket")
        if n <= DISTINCT_BY_PAIRS:
            for r in range(n):
                for q in range(r):
                    if t.lens[q] == t.lens[r] and memcmp(t.ptrs[q], t.ptrs[r], t.lens[r]) == 0:
                        raise ValueError(f"a key twice in bucket {index}")
        elif len(set(pack_strings(blob, ncols)[:n])) != n:
            raise ValueError(f"a key twice in bucket {index}")
        return n
    finally:
        _free(&t)
