"""String values' arithmetic, as Redis computes it: INCRBYFLOAT's long double; and a value's
digest (DIGEST, SET IFDEQ/IFDNE, DELEX IFDEQ/IFDNE).

Owns the parsing of a float argument or value as Redis's `string2ld` (strtold, no spaces, no
NaN), the sum rounded to the x87 80-bit long double Redis computes in (a 64-bit significand),
and its text as `ld2string(..., LD_STR_HUMAN)` writes it (`%.17Lf`, trailing zeros cut). Python's
float is a double: `INCRBYFLOAT k 0.1` would read back `0.10000000000000001`, where Redis says
`0.1`; exact fractions rounded to 64 bits give Redis's digits; a result that prints as
`-0` prints `0`, as ld2string makes it. A long double is a Fraction whose denominator is a power
of two; the common cases (a plain decimal read, a sum, the text) are worked with integers
alone (HINCRBYFLOAT runs per job in RQ), Decimal reading the rest. The digest is the XXH3 64-bit hash (seed 0) of the value's
bytes as 16 lowercase hex digits, leading zeros kept (Redis 8.4's, through the xxhash package).
Must not touch: engine state, replies (callers turn None into their error line).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Final

from xxhash import xxh3_64_hexdigest

SIGNIFICAND_BITS = 64  # the x87 extended format's (explicit integer bit included)
EXTENDED_MAX_EXPONENT = 16384  # |x| >= 2**16384 is infinite in that format
HUMAN_DECIMALS = 17  # ld2string's "%.17Lf"
_INFINITY = Fraction(2) ** EXTENDED_MAX_EXPONENT  # stands for inf: the first value not finite
# LDBL_MAX: the largest finite long double, a 64-bit significand of ones at the top exponent
LDBL_MAX = Fraction((1 << SIGNIFICAND_BITS) - 1) * Fraction(2) ** (
    EXTENDED_MAX_EXPONENT - SIGNIFICAND_BITS)
_HEX = re.compile(r"[+-]?0[xX]")


def _rounded(negative: bool, num: int, den: int) -> Fraction:
    """num / den (both positive) rounded to the nearest long double (ties to even), signed."""
    exponent = num.bit_length() - den.bit_length()
    # make 2**exponent <= num / den < 2**(exponent + 1)
    if (den << exponent > num) if exponent >= 0 else (den > num << -exponent):
        exponent -= 1
    shift = SIGNIFICAND_BITS - 1 - exponent
    n, d = (num << shift, den) if shift >= 0 else (num, den << -shift)
    significand, rest = divmod(n, d)
    if 2 * rest > d or (2 * rest == d and significand & 1):  # half to even
        significand += 1
    if negative:
        significand = -significand
    return Fraction(significand, 1 << shift) if shift >= 0 else Fraction(significand << -shift)


def round_extended(x: Fraction) -> Fraction:
    """x rounded to the nearest long double (ties to even); denormals are not modelled (Redis
    values never get near 2**-16382). Integer shifts throughout: a Fraction power of two costs
    a big-number division at every step."""
    num = x.numerator
    if not num:
        return x
    return _rounded(num < 0, abs(num), x.denominator)


# A plain decimal (what clients send and what this module prints): read with integers alone.
_PLAIN_DIGITS = 4000  # beyond, int() refuses the digits (sys.int_info): read by Decimal
_PLAIN = re.compile(rb"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,4}))?")


def parse_long_double(text: bytes) -> Fraction | None:
    """string2ld: the value of a float (an infinity allowed, NaN not: an infinity is a value
    `is_finite` refuses, of its sign), rounded to a long double; None for anything strtold
    would not take whole, with a leading space, or out of range."""
    plain = _PLAIN.fullmatch(text)
    if plain is not None:
        sign, whole, fraction, exponent = plain.groups()
        if (whole or fraction) and len(text) <= _PLAIN_DIGITS:
            digits = int(whole + fraction) if fraction else int(whole)
            if not digits:
                return Fraction(0)
            scale = (int(exponent) if exponent else 0) - (len(fraction) if fraction else 0)
            value = (_rounded(sign == b"-", digits * 10 ** scale, 1) if scale >= 0
                     else _rounded(sign == b"-", digits, 10 ** -scale))
            return value if is_finite(value) else None  # ERANGE: string2ld refuses it
    return _parse_other(text)


def _parse_other(text: bytes) -> Fraction | None:
    """parse_long_double of what is not a plain decimal: infinities, hexadecimal, refusals."""
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
    """|value| < 2**16384 (integers only: Fraction's own comparison costs microseconds)."""
    num, den = abs(value.numerator), value.denominator
    spread = num.bit_length() - den.bit_length()
    if spread != EXTENDED_MAX_EXPONENT and spread != EXTENDED_MAX_EXPONENT - 1:
        return spread < EXTENDED_MAX_EXPONENT
    return num < den << EXTENDED_MAX_EXPONENT


def add_long_double(a: Fraction, b: Fraction) -> Fraction | None:
    """a + b in long double arithmetic; None when it is infinite (Redis's "would produce NaN or
    Infinity"). (Long doubles' denominators are powers of two: the sum is one of integers.)"""
    if not is_finite(a) or not is_finite(b):
        return None
    an, ad, bn, bd = a.numerator, a.denominator, b.numerator, b.denominator
    if ad < bd:
        an *= bd // ad
        ad = bd
    elif bd < ad:
        bn *= ad // bd
    total = an + bn
    if not total:
        return Fraction(0)
    rounded = _rounded(total < 0, abs(total), ad)
    return rounded if is_finite(rounded) else None


_SCALE = 10 ** HUMAN_DECIMALS
_STR_BITS = 12000  # str() of an int refuses more than 4,300 digits (sys.int_info): ~12,900 bits


def format_long_double(value: Fraction) -> bytes:
    """ld2string(LD_STR_HUMAN): %.17Lf of the exact binary value, trailing zeros and a trailing
    point removed."""
    num, den = value.numerator, value.denominator
    # printf rounds the exact value, ties to even
    scaled, rest = divmod(abs(num) * _SCALE, den)
    if 2 * rest > den or (2 * rest == den and scaled & 1):
        scaled += 1
    whole, frac = divmod(scaled, _SCALE)
    # The whole part's digits through Decimal when long: a long double's reach 4,933.
    digits = str(whole) if whole.bit_length() < _STR_BITS else str(Decimal(whole))
    text = f"{digits}.{frac:0{HUMAN_DECIMALS}d}".rstrip("0") if frac else digits
    if text == "0":  # a negative value too small for 17 decimals: "-0" becomes "0"
        return b"0"
    return (("-" if num < 0 else "") + text).encode()


DIGEST_LENGTH = 16  # hex digits of a 64-bit digest


def value_digest(value: bytes) -> bytes:
    """DIGEST's reply: XXH3-64 of the value, 16 lowercase hex digits."""
    return xxh3_64_hexdigest(value).encode()


# --- the type as the registry sees it (engine.model.value_types: TypeModel) ---------------------

# OBJECT ENCODING of a string: Redis keeps an integer that fits a long as a number, a short
# string in one allocation with its header ("embstr", up to 44 bytes), a longer one apart.
EMBSTR_SIZE_LIMIT: Final = 44
_LONG_DIGITS: Final = 20  # "-9223372036854775808"

VALUE_CLASS: Final = bytes
STORED_AS: Final[tuple[type, ...]] = ()
LIMITS: Final = None
to_bytes: Final = bytes
from_bytes: Final = bytes
copy_value: Final = bytes
digest: Final = None  # (its bytes: `to_bytes`)
min_subexpiry: Final = None
NODES: Final = None  # (no nodes: bare bytes)
table_of: Final = None  # (no bucket table whose runs go cold)


def encoding(value: bytes) -> str:
    """OBJECT ENCODING of a string as Redis stores a value SET made: "int" for a canonical
    integer that fits 64 bits, "embstr" up to 44 bytes, "raw" beyond. (Redis also makes a
    short string "raw" once APPEND or SETRANGE changed it in place; streamkeep keeps the bytes,
    not how they were made, so such a value reads as "embstr" here.)"""
    if 0 < len(value) <= _LONG_DIGITS and _is_canonical_long(value):
        return "int"
    return "embstr" if len(value) <= EMBSTR_SIZE_LIMIT else "raw"


def _is_canonical_long(value: bytes) -> bool:
    """string2ll's test: digits with an optional minus, no leading zero, no '+', in range."""
    digits = value[1:] if value[:1] == b"-" else value
    if not digits.isdigit() or (digits[:1] == b"0" and (len(digits) > 1 or value[:1] == b"-")):
        return False
    number = int(value)
    return -(1 << 63) <= number < (1 << 63)


def memory_usage(value: bytes) -> int:
    """A string's allocation as Redis sizes it: the object header (16), the sds header and the
    bytes with their terminator, rounded to jemalloc's 8-byte classes; an int costs the header."""
    if encoding(value) == "int":
        return 16
    return 16 + ((len(value) + 4 + 7) & ~7)


def opened(value: bytes) -> bytes:
    return value
