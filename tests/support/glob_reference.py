"""The glob matcher streamkeep had before issue #11: a line-by-line reading of Redis's util.c
stringmatchlen (backtracking at each '*'), kept as the reference the fast matcher in
engine/commands/keyspace.py is checked against, result for result. Test support only."""

from __future__ import annotations

GLOB_MAX_NESTING = 1000

# --- glob matching (Redis util.c stringmatchlen) ---------------------------------------------------

_FAIL, _MATCH, _STAR = 0, 1, 2


def _signed(byte: int) -> int:
    """A pattern byte as C's (signed) `char` compares it in ranges."""
    return byte - 256 if byte >= 128 else byte


def _lower(byte: int) -> int:
    return byte + 32 if 65 <= byte <= 90 else byte


def _same(a: int, b: int, nocase: bool) -> bool:
    return a == b or (nocase and _lower(a) == _lower(b))


def _bracket(p: bytes, pi: int, c: int, nocase: bool) -> tuple[bool, int]:
    """Match byte `c` against the class opening at p[pi] == '['; returns (matched, index of the
    class's last pattern byte). An unclosed class runs to the end of the pattern."""
    plen = len(p)
    pi += 1
    negate = pi < plen and p[pi] == 0x5E  # ^
    if negate:
        pi += 1
    match = False
    while True:
        left = plen - pi
        if left >= 2 and p[pi] == 0x5C:  # backslash: the next byte literally
            pi += 1
            if p[pi] == c:
                match = True
        elif left == 0:
            pi -= 1
            break
        elif p[pi] == 0x5D:  # ]
            break
        elif left >= 3 and p[pi + 1] == 0x2D:  # a-z
            start, end, ch = _signed(p[pi]), _signed(p[pi + 2]), _signed(c)
            if start > end:
                start, end = end, start
            if nocase:
                start, end, ch = _lower(start), _lower(end), _lower(ch)
            pi += 2
            if start <= ch <= end:
                match = True
        elif _same(p[pi], c, nocase):
            match = True
        pi += 1
    return match != negate, pi


def _run(p: bytes, pi: int, s: bytes, si: int, nocase: bool) -> tuple[int, int, int]:
    """The body of stringmatchlen_impl from (pi, si) up to the next '*' (reported as _STAR with
    its position) or to the verdict (_MATCH / _FAIL)."""
    plen, slen = len(p), len(s)
    while pi < plen and si < slen:
        ch = p[pi]
        if ch == 0x2A:  # *
            return _STAR, pi, si
        if ch == 0x5B:  # [
            matched, pi = _bracket(p, pi, s[si], nocase)
            if not matched:
                return _FAIL, pi, si
        elif ch != 0x3F:  # not ?: a literal, possibly escaped
            if ch == 0x5C and plen - pi >= 2:
                pi += 1
            if not _same(p[pi], s[si], nocase):
                return _FAIL, pi, si
        si += 1
        pi += 1
        if si == slen:
            while pi < plen and p[pi] == 0x2A:
                pi += 1
            break
    return (_MATCH if pi == plen and si == slen else _FAIL), pi, si


def stringmatchlen(pattern: bytes, string: bytes, nocase: bool = False) -> bool:
    """Redis's glob matcher, result for result (`*`, `?`, `[...]`, `[^...]`, ranges, `\\`).

    Redis recurses at each '*' and, once a '*' has tried every remaining position without a
    match, gives up on the whole match (skipLongerMatches). So a '*' reached is final for the
    match, and the recursion becomes a loop. Redis returns "no match" below 1000 nested '*'.
    """
    status, pi, si = _run(pattern, 0, string, 0, nocase)
    nesting = 0
    while status == _STAR:
        while len(pattern) - pi > 1 and pattern[pi + 1] == 0x2A:
            pi += 1
        if pi == len(pattern) - 1:
            return True
        if nesting + 1 > GLOB_MAX_NESTING:
            return False
        nesting += 1
        for start in range(si, len(string)):
            status, npi, nsi = _run(pattern, pi + 1, string, start, nocase)
            if status == _MATCH:
                return True
            if status == _STAR:
                pi, si = npi, nsi
                break
        else:
            return False
    return status == _MATCH


