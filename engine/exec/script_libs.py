"""The parts of Redis's bundled Lua libraries written in Python: `bit` (LuaBitOp 1.0.2), `struct`
(Roberto Ierusalimschy's struct 0.2, as Redis patched it) and the IEEE float codecs cmsgpack's
Lua code uses (engine/exec/lua/cmsgpack.lua), each with Redis's exact results and error lines
on a 64-bit little-endian machine (what C's conversions give there, where the C code relies on
them). Also `lua_tonumber`, Lua 5.1's reading of a string as a number.

The functions take the values the Lua host hands over (bytes, int or float, bool, None, Lua
objects); an error is raised through `LuaErrors`, which the runtime implements
(engine.exec.scripting): the message gets the script's position and the function's name as
luaL_error and luaL_argerror would give them. Must not touch: the Lua runtime, engine state.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

MAXCSTACK = 8000  # Lua's LUAI_MAXCSTACK: the stack slots a C function may use
_MASK32 = 0xFFFFFFFF
_MASK64 = (1 << 64) - 1
_BIT_MAGIC = 6755399441055744.0  # 2^52 + 2^51: LuaBitOp's rounding trick
_BIT_EXACT = 1 << 51  # integers below this in size come through the trick unchanged


class LuaErrors(Protocol):
    """How a library function raises, as a C function of Redis's Lua would."""

    def error(self, message: str) -> NoReturn:
        """luaL_error: the message after the caller's position."""

    def arg_error(self, n: int, message: str) -> NoReturn:
        """luaL_argerror: `bad argument #n to '<name>' (message)`."""


# --- Lua's view of values ------------------------------------------------------------------

_STRTOD = re.compile(
    rb"[+-]?(?:(?P<inf>inf(?:inity)?)|(?P<nan>nan(?:\([0-9A-Za-z_]*\))?)"
    rb"|(?P<hex>0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?)"
    rb"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)", re.IGNORECASE)
_SPACE = b" \t\n\v\f\r"


def lua_tonumber(value: Any) -> float | int | None:
    """lua_tonumber: a number as it is, a string that reads as one (strtod's syntax, leading
    and trailing white space allowed, up to a NUL as C sees it), else None."""
    if type(value) is bool:
        return None
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, bytes):
        return None
    text = value.split(b"\0", 1)[0].lstrip(_SPACE)
    match = _STRTOD.match(text)
    if match is None or text[match.end():].strip(_SPACE):
        return None
    number = match.group()
    sign = -1.0 if number.startswith(b"-") else 1.0
    if match.group("inf"):
        return sign * math.inf
    if match.group("nan"):
        return math.copysign(math.nan, sign)
    if match.group("hex"):
        return float.fromhex(number.decode())
    return float(number)


def lua_typename(value: Any) -> str:
    """luaL_typename of a value the Lua host handed over."""
    if value is None:
        return "nil"
    if type(value) is bool:
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, bytes):
        return "string"
    from streamkeep.engine.exec.lua_host import lua_type  # (loaded by the first script)

    kind = lua_type(value)
    return "userdata" if kind in (None, "lightuserdata") else str(kind)


def number_text(value: float) -> bytes:
    """lua_tostring of a number: "%.14g" (integral numbers come as int)."""
    return b"%.14g" % float(value)


def _truncate(value: float) -> int:
    """C's (long long) of a double on x86-64: toward zero; INT64_MIN when out of range."""
    if value != value or not -9.3e18 < value < 9.3e18:
        return -(1 << 63)
    n = int(value)
    return n if -(1 << 63) <= n < (1 << 63) else -(1 << 63)


def _to_unsigned(value: float) -> int:
    """C's (unsigned long) of a double as gcc does it on x86-64 (two truncations)."""
    if value >= 9223372036854775808.0:
        return (_truncate(value - 9223372036854775808.0) ^ (1 << 63)) & _MASK64
    return _truncate(value) & _MASK64


# --- bit ----------------------------------------------------------------------------------


def _bits32(number: float) -> int:
    """The low 32 bits of number + 2^52 + 2^51 as a double: LuaBitOp's barg()."""
    raw = struct.unpack("<Q", struct.pack("<d", float(number) + _BIT_MAGIC))[0]
    return raw & _MASK32


def _signed32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def bit_library(errors: LuaErrors) -> dict[bytes, Callable[..., Any]]:
    """LuaBitOp's functions on 32-bit integers; results are signed."""

    def barg(args: tuple, i: int) -> int:
        value = args[i - 1] if i <= len(args) else None
        if type(value) is int and -_BIT_EXACT < value < _BIT_EXACT:
            return value & _MASK32  # (adding the magic number keeps such an integer whole)
        number = lua_tonumber(value)
        if number is None:
            got = lua_typename(value) if i <= len(args) else "no value"
            errors.arg_error(i, f"number expected, got {got}")
        return _bits32(number)

    def fold(op: Callable[[int, int], int]) -> Callable[..., int]:
        def f(*args: Any) -> int:
            b = barg(args, 1)
            for i in range(len(args), 1, -1):  # (C converts from the last argument down)
                b = op(b, barg(args, i))
            return _signed32(b)
        return f

    def shift(op: Callable[[int, int], int]) -> Callable[..., int]:
        def f(*args: Any) -> int:
            b = barg(args, 1)
            return _signed32(op(b, barg(args, 2) & 31))
        return f

    def tohex(*args: Any) -> bytes:
        b = barg(args, 1)
        n = 8 if len(args) < 2 else _signed32(barg(args, 2))
        if n == -(1 << 31):
            n += 1
        upper = n < 0
        n = min(abs(n), 8)
        digits = f"{b & ((1 << (4 * n)) - 1):0{n}x}" if n else ""
        return (digits.upper() if upper else digits).encode()

    def bswap(*args: Any) -> int:
        b = barg(args, 1)
        return _signed32(int.from_bytes(b.to_bytes(4, "little"), "big"))

    return {
        b"tobit": lambda *args: _signed32(barg(args, 1)),
        b"bnot": lambda *args: _signed32(~barg(args, 1)),
        b"band": fold(lambda a, b: a & b),
        b"bor": fold(lambda a, b: a | b),
        b"bxor": fold(lambda a, b: a ^ b),
        b"lshift": shift(lambda b, n: (b << n) & _MASK32),
        b"rshift": shift(lambda b, n: b >> n),
        b"arshift": shift(lambda b, n: _signed32(b) >> n),
        b"rol": shift(lambda b, n: ((b << n) | (b >> (32 - n))) & _MASK32),
        b"ror": shift(lambda b, n: ((b << (32 - n)) | (b >> n)) & _MASK32),
        b"bswap": bswap,
        b"tohex": tohex,
    }


# --- struct -------------------------------------------------------------------------------

_NATIVE_LITTLE = True
_MAXINTSIZE = 32
_MAXALIGN = 8  # max(offsetof(struct {char c; double d;}, d), sizeof(int))
_SIZES = {b"B": 1, b"b": 1, b"H": 2, b"h": 2, b"L": 8, b"l": 8, b"T": 8, b"f": 4, b"d": 8,
          b"x": 1}
_INTEGRAL = frozenset(b"bBhHlLTiI")


class _Format:
    """A struct format being read: its bytes, the position in them, and the header options."""

    __slots__ = ("text", "pos", "little", "align")

    def __init__(self, text: bytes) -> None:
        self.text = text.split(b"\0", 1)[0]  # C reads up to a NUL
        self.pos = 0
        self.little = _NATIVE_LITTLE
        self.align = 1

    def next(self) -> int | None:
        if self.pos >= len(self.text):
            return None
        opt = self.text[self.pos]
        self.pos += 1
        return opt

    def number(self, errors: LuaErrors, default: int) -> int:
        """getnum: the digits that follow, or the default."""
        text, start = self.text, self.pos
        if start >= len(text) or not 48 <= text[start] <= 57:
            return default
        a = 0
        while self.pos < len(text) and 48 <= text[self.pos] <= 57:
            digit = text[self.pos] - 48
            if a > 2147483647 // 10 or a * 10 > 2147483647 - digit:
                errors.error("integral size overflow")
            a = a * 10 + digit
            self.pos += 1
        return a

    def size(self, errors: LuaErrors, opt: int) -> int:
        """optsize: the bytes an option takes (0 for the others)."""
        char = bytes((opt,))
        fixed = _SIZES.get(char)
        if fixed is not None:
            return fixed
        if char == b"c":
            return self.number(errors, 1)
        if char in (b"i", b"I"):
            size = self.number(errors, 4)
            if size > _MAXINTSIZE:
                errors.error(f"integral size {size} is larger than limit of {_MAXINTSIZE}")
            return size
        return 0

    def to_align(self, length: int, opt: int, size: int) -> int:
        """gettoalign (its arithmetic as C's, sizes that are not powers of 2 included)."""
        if size == 0 or opt == ord("c"):
            return 0
        size = min(size, self.align)
        return (size - (length & (size - 1))) & (size - 1)

    def control(self, errors: LuaErrors, opt: int) -> None:
        """controloptions: endianness, alignment, white space; anything else is an error."""
        if opt == 32:  # ' '
            return
        if opt == ord(">"):
            self.little = False
        elif opt == ord("<"):
            self.little = True
        elif opt == ord("!"):
            align = self.number(errors, _MAXALIGN)
            if align <= 0 or align & (align - 1):
                errors.error(f"alignment {align} is not a power of 2")
            self.align = align
        else:
            errors.arg_error(1, f"invalid format option '{chr(opt)}'")


def _string_arg(errors: LuaErrors, args: tuple, i: int, present: int = 0) -> bytes:
    """luaL_checklstring: a string, or a number as its text. `present`: how many stack slots
    the C function has (its arguments, and what it pushed since), if more than them."""
    value = args[i - 1] if i <= len(args) else None
    if isinstance(value, bytes):
        return value
    if isinstance(value, (int, float)) and type(value) is not bool:
        return number_text(value)
    got = lua_typename(value) if i <= max(len(args), present) else "no value"
    errors.arg_error(i, f"string expected, got {got}")


def _number_arg(errors: LuaErrors, args: tuple, i: int, present: int = 0) -> float | int:
    value = args[i - 1] if i <= len(args) else None
    number = lua_tonumber(value)
    if number is None:
        got = lua_typename(value) if i <= max(len(args), present) else "no value"
        errors.arg_error(i, f"number expected, got {got}")
    return number


def _int_bytes(value: float, size: int, little: bool) -> bytes:
    """putinteger: the number as C's (unsigned long) of it, `size` bytes (past 8, zeros)."""
    number = float(value)
    unsigned = _truncate(number) & _MASK64 if number < 0 else _to_unsigned(number)
    data = unsigned.to_bytes(8, "little")[:size].ljust(size, b"\0")
    return data if little else data[::-1]


def _float_bytes(value: float, code: str, little: bool) -> bytes:
    order = "<" if little else ">"
    try:
        return struct.pack(order + code, float(value))
    except OverflowError:  # C's (float) of a double out of range: an infinity
        return struct.pack(order + code, math.copysign(math.inf, float(value)))


def _read_int(data: bytes, little: bool, signed: bool) -> float:
    """getinteger: the bytes in a 64-bit accumulator (the high ones of a longer field shift
    out), sign-extended as C's shift does on x86-64 (its count taken mod 64)."""
    value = 0
    for byte in data if not little else reversed(data):
        value = ((value << 8) | byte) & _MASK64
    if not signed:
        return float(value)
    mask = (_MASK64 << ((len(data) * 8 - 1) & 63)) & _MASK64
    if value & mask:
        value |= mask
    return float(value - (1 << 64) if value >> 63 else value)


def struct_library(errors: LuaErrors) -> dict[bytes, Callable[..., Any]]:
    """struct.pack, struct.unpack and struct.size."""

    def pack(*args: Any) -> bytes:
        fmt = _Format(_string_arg(errors, args, 1))
        out = bytearray()
        arg = 2
        total = 0
        mark = len(args) + 1  # (b_pack pushes a nil after its arguments)
        while (opt := fmt.next()) is not None:
            size = fmt.size(errors, opt)
            align = fmt.to_align(total, opt, size)
            total += align
            out += b"\0" * align
            if opt in _INTEGRAL:
                out += _int_bytes(_number_arg(errors, args, arg, mark), size, fmt.little)
                arg += 1
            elif opt == ord("x"):
                out += b"\0"
            elif opt == ord("f") or opt == ord("d"):
                out += _float_bytes(_number_arg(errors, args, arg, mark), chr(opt), fmt.little)
                arg += 1
            elif opt == ord("c") or opt == ord("s"):
                text = _string_arg(errors, args, arg, mark)
                arg += 1
                if size == 0:
                    size = len(text)
                if len(text) < size:
                    errors.arg_error(arg, "string too short")  # (C names the next argument)
                out += text[:size]
                if opt == ord("s"):
                    out += b"\0"
                    size += 1
            else:
                fmt.control(errors, opt)
            total += size
        return bytes(out)

    def unpack(*args: Any) -> tuple:
        fmt = _Format(_string_arg(errors, args, 1))
        data = _string_arg(errors, args, 2)
        start = 1
        if len(args) >= 3 and args[2] is not None:
            start = _truncate(_number_arg(errors, args, 3))
        pos = start & _MASK64  # (size_t: a negative start wraps around)
        if pos == 0:
            errors.arg_error(3, "offset must be 1 or greater")
        pos -= 1
        length = len(data)
        results: list[Any] = []
        while (opt := fmt.next()) is not None:
            size = fmt.size(errors, opt)
            pos += fmt.to_align(pos, opt, size)
            if size > length or pos > length - size:
                errors.arg_error(2, "data string too short")
            if len(args) + len(results) + 2 > MAXCSTACK:
                errors.error("stack overflow (too many results)")
            if opt in _INTEGRAL:
                results.append(_read_int(data[pos:pos + size], fmt.little, opt >= ord("a")))
            elif opt == ord("f") or opt == ord("d"):
                code = ("<" if fmt.little else ">") + chr(opt)
                results.append(struct.unpack(code, data[pos:pos + size])[0])
            elif opt == ord("c"):
                if size == 0:
                    previous = lua_tonumber(results[-1]) if results else None
                    if previous is None:
                        errors.error("format 'c0' needs a previous size")
                    size = _to_unsigned(previous)
                    results.pop()
                    if size > length or pos > length - size:
                        errors.arg_error(2, "data string too short")
                results.append(data[pos:pos + size])
            elif opt == ord("s"):
                end = data.find(b"\0", pos)
                if end < 0:
                    errors.error("unfinished string in data")
                size = end - pos + 1
                results.append(data[pos:end])
            elif opt != ord("x"):
                fmt.control(errors, opt)
            pos += size
        results.append(pos + 1)
        return tuple(results)

    def size(*args: Any) -> int:
        fmt = _Format(_string_arg(errors, args, 1))
        pos = 0
        while (opt := fmt.next()) is not None:
            size = fmt.size(errors, opt)
            pos += fmt.to_align(pos, opt, size)
            if opt == ord("s"):
                errors.arg_error(1, "option 's' has no fixed size")
            elif opt == ord("c") and size == 0:
                errors.arg_error(1, "option 'c0' has no fixed size")
            if not chr(opt).isalnum() or opt > 127:
                fmt.control(errors, opt)
            pos += size
        return pos

    return {b"pack": pack, b"unpack": unpack, b"size": size}


# --- cmsgpack's floats --------------------------------------------------------------------


def pack_float(value: float) -> bytes:
    """mp_encode_double: a float32 (0xca) when the number is exactly one, else a float64."""
    number = float(value)
    try:
        single = struct.pack(">f", number)
        if struct.unpack(">f", single)[0] == number:
            return b"\xca" + single
    except OverflowError:
        pass
    return b"\xcb" + struct.pack(">d", number)


def unpack_float(data: bytes) -> float:
    return float(struct.unpack(">f", data)[0])


def unpack_double(data: bytes) -> float:
    return float(struct.unpack(">d", data)[0])


__all__ = ["LuaErrors", "bit_library", "lua_tonumber", "lua_typename", "number_text",
           "pack_float", "struct_library", "unpack_double", "unpack_float"]
