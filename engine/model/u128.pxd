# A stream ID (a non-negative Python int of at most 128 bits: ms << 64 | seq) read as its two
# 64-bit halves, for the kernels that take IDs (engine/model/_ids_c.pyx, _packed_node_c.pyx).
#
# Every XADD splits and formats IDs, so the common case reads the int's digits in place: on
# CPython 3.11 and 3.12 (30-bit digits, their two layouts) no byte array and no shifted int is
# made. Other builds take PyLong_AsNativeBytes (3.13+) or _PyLong_AsByteArray. Cimported by
# folder path as lp_helpers.pxd is (engine.model.u128): it is C code only, compiled into each
# kernel, with nothing needed at run time. Must not hold: anything that raises, or a rule about
# IDs (the kernels' references own those).
#
# u128_int(hi, lo) is the reverse: the int, its digits written in place.

cdef extern from *:
    """
    /* A non-negative int of at most 128 bits as its two 64-bit halves; 0 for anything else
       (a negative int, one of more bits), with no exception left set. */
    static inline int streamkeep_u128_halves(PyObject* v, unsigned long long* hi,
                                      unsigned long long* lo) {
    #if PY_VERSION_HEX < 0x030D0000 && PYLONG_BITS_IN_DIGIT == 30 && defined(__SIZEOF_INT128__)
        const digit* d;
        Py_ssize_t n, i;
        unsigned __int128 x = 0;
    #if PY_VERSION_HEX >= 0x030C0000
        uintptr_t tag = ((PyLongObject*)v)->long_value.lv_tag;
        if ((tag & 3) == 2) return 0;  /* negative */
        n = (Py_ssize_t)(tag >> 3);
        d = ((PyLongObject*)v)->long_value.ob_digit;
    #else
        n = Py_SIZE(v);
        if (n < 0) return 0;
        d = ((PyLongObject*)v)->ob_digit;
    #endif
        if (n > 5 || (n == 5 && d[4] >= (1u << 8))) return 0;  /* more than 128 bits */
        for (i = n - 1; i >= 0; i--) x = (x << 30) | d[i];
        *hi = (unsigned long long)(x >> 64);
        *lo = (unsigned long long)x;
        return 1;
    #else
        unsigned char b[16];
        int i;
    #if PY_VERSION_HEX >= 0x030D0000
        Py_ssize_t n = PyLong_AsNativeBytes(v, b, 16, Py_ASNATIVEBYTES_LITTLE_ENDIAN
            | Py_ASNATIVEBYTES_UNSIGNED_BUFFER | Py_ASNATIVEBYTES_REJECT_NEGATIVE);
        if (n < 0) { PyErr_Clear(); return 0; }
        if (n > 16) return 0;
    #else
        if (_PyLong_Sign(v) < 0) return 0;
        if (_PyLong_AsByteArray((PyLongObject*)v, b, 16, 1, 0) < 0) { PyErr_Clear(); return 0; }
    #endif
        *lo = 0; *hi = 0;
        for (i = 7; i >= 0; i--) { *lo = (*lo << 8) | b[i]; *hi = (*hi << 8) | b[i + 8]; }
        return 1;
    #endif
    }

    /* The int hi << 64 | lo (a new reference; NULL with MemoryError set). */
    static inline PyObject* streamkeep_u128_int(unsigned long long hi, unsigned long long lo) {
        if (hi == 0) return PyLong_FromUnsignedLongLong(lo);
    #if PY_VERSION_HEX < 0x030D0000 && PYLONG_BITS_IN_DIGIT == 30 && defined(__SIZEOF_INT128__)
        {
            unsigned __int128 x = ((unsigned __int128)hi << 64) | lo;
            Py_ssize_t n = 0, i;
            unsigned __int128 y = x;
            PyLongObject* r;
            digit* d;
            while (y) { n++; y >>= 30; }
            r = _PyLong_New(n);
            if (r == NULL) return NULL;
    #if PY_VERSION_HEX >= 0x030C0000
            d = r->long_value.ob_digit;
    #else
            d = r->ob_digit;
    #endif
            for (i = 0; i < n; i++) { d[i] = (digit)(x & 0x3FFFFFFF); x >>= 30; }
            return (PyObject*)r;
        }
    #else
        {
            unsigned char b[16];
            int i;
            for (i = 0; i < 8; i++) { b[i] = (unsigned char)(lo >> (8 * i));
                                      b[8 + i] = (unsigned char)(hi >> (8 * i)); }
            return _PyLong_FromByteArray(b, 16, 1, 0);
        }
    #endif
    }
    """
    bint u128_halves "streamkeep_u128_halves"(object v, unsigned long long* hi,
                                              unsigned long long* lo)
    object u128_int "streamkeep_u128_int"(unsigned long long hi, unsigned long long lo)
