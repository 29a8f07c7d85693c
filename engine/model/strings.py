"""String values' arithmetic, as Redis computes it: INCRBYFLOAT's long double; and a value's
digest (DIGEST, SET IFDEQ/IFDNE, DELEX IFDEQ/IFDNE).

Owns the parsing of a float argument or value as Redis's `string2ld` (strtold, no spaces, no
NaN), the sum rounded to the x87 80-bit long double Redis computes in (a 64-bit significand),
and its text as `ld2string(..., LD_STR_HUMAN)` writes it (`%.17Lf`, trailing zeros cut). Python's
float is a double: `INCRBYFLOAT k 0.1` would read back `0.10000000000000001`, where Redis says
`0.1`; exact fractions rounded to 64 bits give Redis's digits; a result that prints as
`-0` prints `0`, as ld2string makes it. The digest is the XXH3 64-bit hash (seed 0) of the value's
bytes as 16 lowercase hex digits, leading zeros kept (Redis 8.4's, through the xxhash package).
Must not touch: engine state, replies (callers turn None into their error line).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from xxhash import xxh3_64_hexdigest

SIGNIFICAND_BITS = 64  # the x87 extended format's (explicit integer bit included)
EXTENDED_MAX_EXPONENT = 16384  # |x| >= 2**16384 is infinite in that format
HUMAN_DECIMALS = 17  # ld2string's "%.17Lf"
_INFINITY = Fraction(2) ** EXTENDED_MAX_EXPONENT  # stands for inf: the first value not finite
# LDBL_MAX: the largest finite long double, a 64-bit significand of ones at the top exponent
LDBL_MAX = Fraction((1 << SIGNIFICAND_BITS) - 1) * Fraction(2) ** (
    EXTENDED_MAX_EXPONENT - SIGNIFICAND_BITS)
_HEX = re.compile(r"[+-]?0[xX]")


def round_extended(x: Fraction) -> Fraction:
    """x rounded to the nearest long double (ties to even); denormals are not modelled (Redis
    values never get near 2**-16382). Integer shifts throughout: a Fraction power of two costs
    a big-number division at every step."""
    if not x.numerator:
        return x
    num, den = abs(x.numerator), x.denominator
    exponent = num.bit_length() - den.bit_length()
    # make 2**exponent <= |x| < 2**(exponent + 1)
    if (den << exponent > num) if exponent >= 0 else (den > num << -exponent):
        exponent -= 1
    shift = SIGNIFICAND_BITS - 1 - exponent
    n, d = (num << shift, den) if shift >= 0 else (num, den << -shift)
    significand, rest = divmod(n, d)
    if 2 * rest > d or (2 * rest == d and significand & 1):  # half to even
        significand += 1
    if x < 0:
        significand = -significand
    return Fraction(significand, 1 << shift) if shift >= 0 else Fraction(significand << -shift)


def parse_long_double(text: bytes) -> Fraction | None:
    """string2ld: the value of a float (an infinity allowed, NaN not: an infinity is a value
    `is_finite` refuses, of its sign), rounded to a long double; None for anything strtold
    would not take whole, with a leading space, or out of range."""
    if not text or text[:1].isspace() or text[-1:].isspace() or b"_" in text:
        return None
    try:
        source = text.decode("ascii")
        if _HEX.match(source):  # strtold's hexadecimal form (read here at double precision)
            return round_extended(Fraction(float.fromhex(source)))
        number = Decimal(source)
    except (InvalidOperation, UnicodeDecodeError, ValueError, OverflowError):
        return None
    if number.is_nan():
        return None
    if number.is_infinite():
        return _INFINITY if number > 0 else -_INFINITY
    value = round_extended(Fraction(number))
    return value if is_finite(value) else None  # ERANGE: string2ld refuses it


def is_finite(value: Fraction) -> bool:
    return abs(value) < _INFINITY


def add_long_double(a: Fraction, b: Fraction) -> Fraction | None:
    """a + b in long double arithmetic; None when it is infinite (Redis's "would produce NaN or
    Infinity")."""
    if not is_finite(a) or not is_finite(b):
        return None
    total = round_extended(a + b)
    return total if is_finite(total) else None


def format_long_double(value: Fraction) -> bytes:
    """ld2string(LD_STR_HUMAN): %.17Lf of the exact binary value, trailing zeros and a trailing
    point removed."""
    scale = 10 ** HUMAN_DECIMALS
    scaled = round(abs(value) * scale)  # printf rounds the exact value, ties to even
    whole, frac = divmod(scaled, scale)
    # The whole part's digits through Decimal: str() refuses an int of more than 4,300 digits
    # (sys.int_info), and a long double's reach 4,933.
    text = f"{Decimal(whole)}.{frac:0{HUMAN_DECIMALS}d}".rstrip("0").rstrip(".")
    if text == "0":  # a negative value too small for 17 decimals: "-0" becomes "0"
        return b"0"
    return (("-" if value < 0 else "") + text).encode()


DIGEST_LENGTH = 16  # hex digits of a 64-bit digest


def value_digest(value: bytes) -> bytes:
    """DIGEST's reply: XXH3-64 of the value, 16 lowercase hex digits."""
    return xxh3_64_hexdigest(value).encode()
