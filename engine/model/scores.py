"""Sorted-set scores as Redis 8.x reads and writes them: a score argument's parsing, a score's
reply text, and the score and lex ranges of ZRANGEBYSCORE, ZCOUNT, ZRANGEBYLEX and their kin.

- `parse_score` is Redis's `string2d` (ZADD, ZINCRBY, ZADD INCR's score): the whole text must be
  one C `strtod` number (8.x tries a fast decimal path first and falls back to `strtod`; both give
  the correctly rounded double, so the grammar and the value are `strtod`'s): an optional sign;
  decimal digits with an optional point and `e` exponent, or `0x` hexadecimal with an optional
  `p` exponent; or `inf` / `infinity` in any case. Refused: empty text, a leading space, any
  trailing byte, NaN in any spelling, and a finite number too large for a double or non-zero but
  too small for one (strtod's ERANGE). (Redis 8.0-8.6 used the C++ fast_float instead, which took
  an overflowing number as an infinity and refused hexadecimal; 8.8 went back to strtod's rules.)
- `format_score` is Redis's `d2string`, the text of every score reply (RESP2's bulk string and
  RESP3's double alike): "0" / "-0" for zero (the sign of a zero is kept), "inf" / "-inf", an
  integral value up to 2**62 in magnitude as a plain integer, anything else as `fpconv_dtoa`
  writes it since 7.2 (Grisu2: round-trip digits, most often the shortest; no exponent when the
  value sits between 1e-7 and the digits plus seven zeros, else `d.ddde+N` / `de-N` with no
  padded exponent digits). Redis 7.0 wrote `%.17g` instead ("0.10000000000000001").
  `format_score_g17` is that `%.17g` form, which 8.x's ZSCAN still writes for a skiplist-encoded
  set.
- `parse_score_range` is `zslParseRange`: each bound is `strtod`'s prefix up to the first NUL
  byte (leading spaces skipped, an empty bound reads as 0, an overflowing one as an infinity),
  `(` before it makes it exclusive; NaN is refused. `ScoreRange` answers `contains` and
  `is_empty` as `zslIsInRange` does.
- `parse_lex_range` is `zslParseLexRange`: `[x` inclusive, `(x` exclusive, `-` and `+` the
  smallest and greatest strings; `LexRange.contains` compares bytes as `memcmp` then length.

Must not touch: engine state, replies (callers turn None into their error line: "ERR value is
not a valid float", "ERR min or max is not a float", "ERR min or max not valid string range
item").
"""

from __future__ import annotations

import math
import re
import struct
from typing import Final, final

_MASK64 = (1 << 64) - 1
_DOUBLE = struct.Struct("<d")
_BITS = struct.Struct("<Q")
_C_SPACE = b" \t\n\v\f\r"
_LLONG_HALF = float(((1 << 63) - 1) // 2)  # double2ll's bound: (double)(LLONG_MAX/2) == 2**62
# d2string prints a score within it that is a whole number as that integer (`%d`).
INTEGRAL_SCORE_MAX: Final = _LLONG_HALF

# strtod's grammar, longest prefix first: hexadecimal, decimal, infinity, NaN.
_HEX = rb"0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
_DEC = rb"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_NUMBER = re.compile(
    rb"([+-]?)(?:(" + _HEX + rb")|(" + _DEC + rb")|(inf(?:inity)?)|(nan(?:\([0-9A-Za-z_]*\))?))",
    re.IGNORECASE)
_PLAIN_DECIMAL = re.compile(rb"-?[0-9]{1,17}(?:\.[0-9]{1,17})?\Z")
_NONZERO_DIGIT = re.compile(rb"[1-9]")
# The bounds range commands are mostly given, read without the strtod grammar's expression.
_COMMON_BOUNDS: Final[dict[bytes, float]] = {
    b"-inf": -math.inf, b"+inf": math.inf, b"inf": math.inf, b"0": 0.0}
_NONZERO_HEX_MANTISSA = re.compile(rb"0[xX]0*\.?0*[1-9a-fA-F]")


def _strtod(text: bytes) -> tuple[float, int, bool]:
    """C strtod on `text` (already free of NUL bytes and leading spaces): (value, bytes
    consumed, ERANGE). Nothing consumed: (0.0, 0, False). NaN comes back as NaN."""
    match = _NUMBER.match(text)
    if match is None:
        return 0.0, 0, False
    sign, hexa, dec, inf, _nan = match.groups()
    negative = sign == b"-"
    if inf is not None:
        return (-math.inf if negative else math.inf), match.end(), False
    if hexa is None and dec is None:
        return math.nan, match.end(), False
    if hexa is not None:
        try:
            value = float.fromhex(hexa.decode("ascii"))
        except OverflowError:
            value = math.inf
        nonzero = _NONZERO_HEX_MANTISSA.match(hexa) is not None
    else:
        value = float(dec)
        mantissa = dec.split(b"e")[0].split(b"E")[0]
        nonzero = _NONZERO_DIGIT.search(mantissa) is not None
    erange = math.isinf(value) or (value == 0.0 and nonzero)
    return (-value if negative else value), match.end(), erange


def parse_score(text: bytes) -> float | None:
    """Redis's `string2d`: the double `text` spells, or None when it is not a valid float (see
    the module docstring for the rules)."""
    if text.isdigit() and len(text) <= 17 or _PLAIN_DECIMAL.match(text) is not None:
        # The common score: at most 17+17 digits cannot overflow or underflow a double, and
        # Python's float() rounds a decimal text correctly, as strtod does.
        return float(text)
    if not text or text[0] in _C_SPACE:
        return None
    value, used, erange = _strtod(text)
    if used != len(text) or erange or value != value:
        return None
    return value


def _parse_bound(text: bytes) -> float | None:
    """One bound of zslParseRange: strtod's value when it consumes everything up to the first
    NUL (C string semantics), NaN refused; overflow reads as an infinity, empty text as 0."""
    known = _COMMON_BOUNDS.get(text)
    if known is not None:
        return known
    if _PLAIN_DECIMAL.match(text) is not None:  # as in parse_score: float() is strtod here
        return float(text)
    cut = text.find(b"\x00")
    if cut >= 0:
        text = text[:cut]
    body = text.lstrip(_C_SPACE)
    value, used, _erange = _strtod(body)
    if used == 0:
        # nothing parsed: strtod leaves the end pointer at the start, whole text or not
        return 0.0 if not text else None
    if used != len(body) or value != value:
        return None
    return value


@final
class ScoreRange:
    """A score interval: `min` and `max`, each inclusive unless its `*ex` flag is set. Not
    changed once made (a plain class, not a frozen dataclass: a frozen dataclass's __init__
    runs as interpreted Python even where this module is compiled, on every range command)."""

    __slots__ = ("max", "maxex", "min", "minex")

    def __init__(self, min: float, max: float, minex: bool = False,  # noqa: A002
                 maxex: bool = False) -> None:
        self.min = min
        self.max = max
        self.minex = minex
        self.maxex = maxex

    def _key(self) -> tuple[float, float, bool, bool]:
        return self.min, self.max, self.minex, self.maxex

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ScoreRange) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"ScoreRange(min={self.min!r}, max={self.max!r}, minex={self.minex!r}, maxex={self.maxex!r})"

    def gte_min(self, x: float) -> bool:
        """x is at or past the lower bound."""
        return x > self.min if self.minex else x >= self.min

    def lte_max(self, x: float) -> bool:
        """x is at or before the upper bound."""
        return x < self.max if self.maxex else x <= self.max

    def contains(self, x: float) -> bool:
        """x is inside the interval."""
        return self.gte_min(x) and self.lte_max(x)

    def is_empty(self) -> bool:
        """The interval can hold no score (zslIsInRange's first test)."""
        return self.min > self.max or (self.min == self.max and (self.minex or self.maxex))


def parse_score_range(min_text: bytes, max_text: bytes) -> ScoreRange | None:
    """zslParseRange: the range `min_text` .. `max_text` (either may start with `(`), or None
    ("ERR min or max is not a float")."""
    minex = min_text[:1] == b"("
    maxex = max_text[:1] == b"("
    low = _parse_bound(min_text[1:] if minex else min_text)
    if low is None:
        return None
    high = _parse_bound(max_text[1:] if maxex else max_text)
    if high is None:
        return None
    return ScoreRange(low, high, minex, maxex)


# A lex bound's kind: below every string ("-"), a string, above every string ("+").
LEX_MIN = 0
LEX_VALUE = 1
LEX_MAX = 2


def _lex_cmp(member: bytes, kind: int, value: bytes) -> int:
    """sdscmplex(member, bound): -1, 0 or 1 (bytes compare as memcmp, then length)."""
    if kind == LEX_MIN:
        return 1
    if kind == LEX_MAX:
        return -1
    return (member > value) - (member < value)


@final
class LexRange:
    """A member interval: each bound is `-` (LEX_MIN), `+` (LEX_MAX) or a string (LEX_VALUE),
    exclusive when its `*ex` flag is set (`-` and `+` always are, as in Redis). Not changed
    once made (a plain class for the reason ScoreRange is)."""

    __slots__ = ("max", "max_kind", "maxex", "min", "min_kind", "minex")

    def __init__(self, min_kind: int, min: bytes, minex: bool,  # noqa: A002
                 max_kind: int, max: bytes, maxex: bool) -> None:  # noqa: A002
        self.min_kind = min_kind
        self.min = min
        self.minex = minex
        self.max_kind = max_kind
        self.max = max
        self.maxex = maxex

    def _key(self) -> tuple[int, bytes, bool, int, bytes, bool]:
        return self.min_kind, self.min, self.minex, self.max_kind, self.max, self.maxex

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LexRange) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return "LexRange" + repr(self._key())

    def gte_min(self, member: bytes) -> bool:
        """member is at or past the lower bound."""
        cmp = _lex_cmp(member, self.min_kind, self.min)
        return cmp > 0 if self.minex else cmp >= 0

    def lte_max(self, member: bytes) -> bool:
        """member is at or before the upper bound."""
        cmp = _lex_cmp(member, self.max_kind, self.max)
        return cmp < 0 if self.maxex else cmp <= 0

    def contains(self, member: bytes) -> bool:
        """member is inside the interval."""
        return self.gte_min(member) and self.lte_max(member)

    def is_empty(self) -> bool:
        """The interval can hold no member (zslIsInLexRange's first test: `-`/`-` and `+`/`+`
        compare equal and are exclusive)."""
        if self.min_kind != self.max_kind:
            return self.min_kind > self.max_kind
        if self.min_kind != LEX_VALUE:
            return True
        return self.min > self.max or (self.min == self.max and (self.minex or self.maxex))


def _parse_lex_item(text: bytes) -> tuple[int, bytes, bool] | None:
    """zslParseLexRangeItem: (kind, string, exclusive) or None."""
    head = text[:1]
    if head == b"+":
        return (LEX_MAX, b"", True) if len(text) == 1 else None
    if head == b"-":
        return (LEX_MIN, b"", True) if len(text) == 1 else None
    if head == b"(":
        return LEX_VALUE, text[1:], True
    if head == b"[":
        return LEX_VALUE, text[1:], False
    return None


def parse_lex_range(min_text: bytes, max_text: bytes) -> LexRange | None:
    """zslParseLexRange: the range `min_text` .. `max_text`, or None ("ERR min or max not valid
    string range item")."""
    low = _parse_lex_item(min_text)
    high = _parse_lex_item(max_text)
    if low is None or high is None:
        return None
    return LexRange(low[0], low[1], low[2], high[0], high[1], high[2])


# ---- d2string: fpconv_dtoa's Grisu2, step for step (its results are part of the protocol) ----

def _cached_powers() -> list[tuple[int, int]]:
    """Grisu's cached powers 10**k, k = -348, -340, ..., 340: a 64-bit significand with its
    top bit set, rounded to nearest, and its binary exponent."""
    table = []
    for i in range(87):
        k = -348 + 8 * i
        num, den = (10 ** k, 1) if k >= 0 else (1, 10 ** -k)
        exp = num.bit_length() - den.bit_length() - 64
        while (num << max(-exp, 0)) >= (den << max(exp, 0)) << 64:
            exp += 1
        while (num << max(-exp, 0)) < (den << max(exp, 0)) << 63:
            exp -= 1
        scaled_num, scaled_den = num << max(-exp, 0), den << max(exp, 0)
        frac, rem = divmod(scaled_num, scaled_den)
        if 2 * rem > scaled_den or (2 * rem == scaled_den and frac & 1):
            frac += 1
        if frac == 1 << 64:
            frac, exp = frac >> 1, exp + 1
        table.append((frac, exp))
    return table


_POWERS = _cached_powers()
_POW10 = [10 ** i for i in range(400)]
_HIDDEN = 1 << 52
_FRACMASK = _HIDDEN - 1


def _cached_pow10(exp: int) -> tuple[int, int, int]:
    """find_cachedpow10: the cached power bringing `exp` into [-60, -32]: (frac, exp, k)."""
    approx = int(-(exp + 87) * 0.30102999566398114)  # C's conversion truncates toward zero
    idx = _c_div(approx + 348, 8)
    while True:
        current = exp + _POWERS[idx][1] + 64
        if current < -60:
            idx += 1
        elif current > -32:
            idx -= 1
        else:
            frac, pexp = _POWERS[idx]
            return frac, pexp, -348 + idx * 8


def _c_div(a: int, b: int) -> int:
    """C's integer division (truncates toward zero)."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _round_digit(digits: int, delta: int, rem: int, kappa: int, frac: int) -> int:
    """Grisu2's last-digit adjustment toward the value (`digits` as one integer)."""
    while (rem < frac and delta - rem >= kappa
           and (rem + kappa < frac or frac - rem > rem + kappa - frac)):
        digits -= 1
        rem += kappa
    return digits


def _grisu2_interval(bits: int) -> tuple[int, int, int, int, int]:
    """Grisu2's scaled frame for a finite, positive double's bits: (w, upper, lower, shift, k):
    the value and its narrowed boundaries as integers in units of 2**-shift, times 10**-k."""
    frac, bexp = bits & _FRACMASK, bits >> 52
    if bexp:  # a normal number: the frame depends on its exponent alone
        frame = _FRAMES[bexp]
        if frame is None:
            frame = _FRAMES[bexp] = _cached_pow10(bexp - 1086)
        cfrac, cexp, k = frame
        frac += _HIDDEN
        upper = ((frac << 1) + 1) << 10
        lower = ((frac << 2) - 1) << 9 if frac == _HIDDEN else ((frac << 1) - 1) << 10
        uexp = bexp - 1086
        frac <<= 11
    else:
        exp = -1074
        upper, uexp = (frac << 1) + 1, exp - 1
        while not upper & (_HIDDEN << 1):
            upper, uexp = upper << 1, uexp - 1
        upper, uexp = upper << 10, uexp - 10
        lower = ((frac << 1) - 1) << (exp - 1 - uexp)
        while not frac & _HIDDEN:
            frac, exp = frac << 1, exp - 1
        frac <<= 11
        cfrac, cexp, k = _cached_pow10(uexp)
    # fpconv's multiply: the high 64 bits of the 128-bit product, rounded half up
    wf = (frac * cfrac + (1 << 63)) >> 64
    uf = ((upper * cfrac + (1 << 63)) >> 64) - 1
    lf = ((lower * cfrac + (1 << 63)) >> 64) + 1
    return wf, uf, lf, -(uexp + cexp + 64), k


_FRAMES: list[tuple[int, int, int] | None] = [None] * 2048


def _repr_digits(x: float) -> tuple[int, int]:
    """The shortest round-trip digits of a positive double as (R, E): x == R * 10**E, R with no
    trailing zero (Python's repr, David Gay's shortest, closest to x)."""
    text = repr(x)
    exp10 = 0
    cut = text.find("e")
    if cut >= 0:
        exp10 = int(text[cut + 1:])
        text = text[:cut]
    point = text.find(".")
    if point >= 0:
        exp10 -= len(text) - point - 1
        text = text[:point] + text[point + 1:]
    digits = int(text)
    while not digits % 10:
        digits //= 10
        exp10 += 1
    return digits, exp10


def _grisu_keeps(w: int, upper: int, lower: int, cand: int, step: int) -> bool:
    """Whether Grisu2's digit generation ends on `cand` (a lattice point of spacing `step`):
    inside [lower, upper], and where round_digit's walk down from the truncation of `upper`
    stops (the point nearest w, a tie kept on the upper side)."""
    if not lower <= cand <= upper:
        return False
    if cand > w:
        below = cand - step
        return below < lower or (below <= w and cand - w <= w - below)
    above = cand + step
    return above > upper or above - w > w - cand


def _grisu2(bits: int, x: float) -> tuple[str, int]:
    """The digits and decimal exponent K fpconv writes for a finite, positive double. Grisu2
    most often ends on the shortest, closest digits repr() finds; that is checked in Grisu's
    own frame (cheap), and the full digit generation runs only when it does not hold."""
    w, upper, lower, shift, k = _grisu2_interval(bits)
    digits, exp10 = _repr_digits(float(x))
    t = exp10 + k
    if t >= 0:
        step = _POW10[t] << shift
        if _grisu_keeps(w, upper, lower, digits * step, step):
            return str(digits), exp10
    elif -t < len(_POW10):
        scale = _POW10[-t]
        if _grisu_keeps(w * scale, upper * scale, lower * scale, digits << shift, 1 << shift):
            return str(digits), exp10
    return _generate_digits(w, upper, -shift, lower, -k)


def _generate_digits(wf: int, uf: int, ue: int, lf: int, big_k: int) -> tuple[str, int]:
    """generate_digits: the shortest digits of the narrowed interval, the last one moved toward
    the value. fpconv emits a digit at a time until the rest fits in the interval; the rest
    only shrinks as digits are added, so the place it stops is found by bisection here."""
    wfrac = (uf - wf) & _MASK64
    delta = (uf - lf) & _MASK64
    shift = -ue
    one = 1 << shift
    part1, part2 = uf >> shift, uf & (one - 1)
    if part2 <= delta:
        # stops in the integer part: the largest kappa whose remainder fits
        lo, hi = 0, 9  # kappa 0 fits; find the largest that does
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if ((part1 % _POW10[mid]) << shift) + part2 <= delta:
                lo = mid
            else:
                hi = mid - 1
        kappa = lo
        head = part1 // _POW10[kappa]
        rem = ((part1 % _POW10[kappa]) << shift) + part2
        digits = _round_digit(head, delta, rem, (_POW10[kappa] << shift) & _MASK64, wfrac)
        return str(digits), big_k + kappa
    # the fractional part: the first j with (part2 * 10**j) mod one < delta * 10**j
    lo, hi = 1, 1
    while (part2 * _POW10[hi]) & (one - 1) >= delta * _POW10[hi]:
        lo, hi = hi + 1, hi * 2
    while lo < hi:
        mid = (lo + hi) >> 1
        if (part2 * _POW10[mid]) & (one - 1) < delta * _POW10[mid]:
            hi = mid
        else:
            lo = mid + 1
    j = lo
    scaled = part2 * _POW10[j]
    fraction = scaled >> shift
    digits = part1 * _POW10[j] + fraction
    digits = _round_digit(digits, (delta * _POW10[j]) & _MASK64, scaled & (one - 1), one,
                          (wfrac * _POW10[j]) & _MASK64)
    return str(digits), big_k - j


def _emit(text: str, big_k: int, neg: bool) -> str:
    """emit_digits: plain integer, plain decimal, or d.ddde+N."""
    ndigits = len(text)
    exp = abs(big_k + ndigits - 1)
    if big_k >= 0 and exp < ndigits + 7:
        return text + "0" * big_k
    if big_k < 0 and (big_k > -7 or exp < 4):
        offset = ndigits + big_k
        if offset <= 0:
            return "0." + "0" * -offset + text
        return text[:offset] + "." + text[offset:]
    text = text[:min(ndigits, 18 - neg)]
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{mantissa}e{'-' if big_k + ndigits - 1 < 0 else '+'}{exp}"


def fpconv_dtoa(x: float) -> bytes:
    """fpconv_dtoa itself, without d2string's integer shortcut (DEBUG DIGEST's score text):
    a sign for any negative double, zero as "0", "inf" and "nan" spelled so."""
    bits = _BITS.unpack(_DOUBLE.pack(x))[0]
    neg = bool(bits >> 63)
    sign = "-" if neg else ""
    if x == 0.0:
        return (sign + "0").encode("ascii")
    if x != x:
        return (sign + "nan").encode("ascii")
    if math.isinf(x):
        return (sign + "inf").encode("ascii")
    digits, big_k = _grisu2(bits & ~(1 << 63), abs(x))
    return (sign + _emit(digits, big_k, neg)).encode("ascii")


_FORMAT_CACHE: dict[float, bytes] = {}
_FORMAT_CACHE_MAX = 1 << 16


def format_score(x: float) -> bytes:
    """Redis's d2string: a score's reply text (see the module docstring)."""
    if x == 0.0:
        return b"-0" if math.copysign(1.0, x) < 0 else b"0"
    if -_LLONG_HALF <= x <= _LLONG_HALF:  # NaN and the infinities fail this test
        whole = int(x)
        if whole == x:
            return b"%d" % whole
    elif x != x:
        return b"nan"
    elif math.isinf(x):
        return b"inf" if x > 0 else b"-inf"
    text = _FORMAT_CACHE.get(x)
    if text is None:
        if len(_FORMAT_CACHE) >= _FORMAT_CACHE_MAX:
            _FORMAT_CACHE.clear()
        text = _FORMAT_CACHE[x] = fpconv_dtoa(x)
    return text


def format_score_g17(x: float) -> bytes:
    """C's `%.17g` of a score (Redis 7.0's score replies; 8.x's ZSCAN of a skiplist set)."""
    if math.isinf(x):
        return b"inf" if x > 0 else b"-inf"
    return (b"%.17g" % x)


__all__ = ["INTEGRAL_SCORE_MAX", "LEX_MAX", "LEX_MIN", "LEX_VALUE", "LexRange", "ScoreRange",
           "format_score", "format_score_g17", "fpconv_dtoa", "parse_lex_range", "parse_score",
           "parse_score_range"]
