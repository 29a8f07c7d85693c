"""The Python halves of the Lua libraries (engine.exec.script_libs): Lua's reading of strings as
numbers, LuaBitOp's rounding and signedness, struct's formats (alignment, sizes past 8 bytes,
C's conversions at the edges) and cmsgpack's float codecs, with the error lines raised through
a stand-in for the runtime. Scripts compare them with a real redis-server in
tests/differential/test_scripting_libraries.py."""

from __future__ import annotations

import math
import struct
from typing import NoReturn

import pytest

from streamkeep.engine.exec.script_libs import (
    bit_library,
    lua_tonumber,
    pack_float,
    struct_library,
    unpack_double,
    unpack_float,
)


class Raised(Exception):
    pass


class Errors:
    """LuaErrors as a test sees them: the message, and the argument it names."""

    def error(self, message: str) -> NoReturn:
        raise Raised(message)

    def arg_error(self, n: int, message: str) -> NoReturn:
        raise Raised(f"#{n} {message}")


def raised(f, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(Raised) as caught:
        f(*args)
    return str(caught.value)


def test_lua_tonumber_reads_as_strtod_does() -> None:
    assert lua_tonumber(b"12") == 12.0
    assert lua_tonumber(b"  -1.5e3 \t") == -1500.0
    assert lua_tonumber(b"0x1A") == 26.0
    assert lua_tonumber(b"0x1p4") == 16.0
    assert lua_tonumber(b"12\0junk") == 12.0  # (C stops at the NUL)
    assert lua_tonumber(b"inf") == math.inf and lua_tonumber(b"-Infinity") == -math.inf
    assert math.isnan(lua_tonumber(b"nan"))  # type: ignore[arg-type]
    for text in (b"", b"x", b"0x", b"1e", b"1 2", b"--1"):
        assert lua_tonumber(text) is None, text
    assert lua_tonumber(True) is None and lua_tonumber(None) is None
    assert lua_tonumber(7) == 7


def test_bit_rounds_and_wraps_as_luabitop() -> None:
    bit = bit_library(Errors())
    tobit = bit[b"tobit"]
    assert [tobit(x) for x in (0xFFFFFFFF, 2 ** 32 + 5, 1.5, 2.5, -1.5, 2 ** 53 + 2)] == \
        [-1, 5, 2, 2, -2, 1]
    assert tobit(1e20) == 2025163840 and tobit(math.inf) == 0 and tobit(math.nan) == 0
    assert tobit(b" 0x10 ") == 16
    assert bit[b"band"](0xFF, 0x0F, 0x3) == 3 and bit[b"bor"](1, 2, 4) == 7
    assert bit[b"lshift"](1, 31) == -2 ** 31 and bit[b"rshift"](-1, 28) == 15
    assert bit[b"arshift"](-256, 4) == -16 and bit[b"rol"](0x80000001, 1) == 3
    assert bit[b"bswap"](0x12345678) == 0x78563412
    assert [bit[b"tohex"](*a) for a in ((255,), (255, -2), (255, 0), (1, -2 ** 31))] == \
        [b"000000ff", b"FF", b"", b"00000001"]


def test_bit_errors_name_the_argument() -> None:
    bit = bit_library(Errors())
    assert raised(bit[b"tobit"], b"x") == "#1 number expected, got string"
    assert raised(bit[b"band"]) == "#1 number expected, got no value"
    # C converts the arguments from the last one down.
    assert raised(bit[b"band"], 1, None, b"x") == "#3 number expected, got string"
    assert raised(bit[b"tohex"], 1, None) == "#2 number expected, got nil"


def test_struct_pack_and_unpack() -> None:
    s = struct_library(Errors())
    pack, unpack, size = s[b"pack"], s[b"unpack"], s[b"size"]
    assert pack(b">I", 1) == b"\0\0\0\1" and pack(b"<i", -1) == b"\xff" * 4
    assert pack(b">i3", 65539) == b"\x01\x00\x03"
    assert pack(b">I16", 1) == b"\0" * 15 + b"\1"
    assert pack(b">i16", -1) == b"\0" * 8 + b"\xff" * 8  # (a long's 8 bytes, then zeros)
    assert pack(b"!4 b i", 1, 2) == b"\x01\0\0\0\x02\0\0\0"
    assert pack(b"c5", b"hello world") == b"hello" and pack(b"s", b"ab") == b"ab\0"
    assert pack(b">f", 1e300) == b"\x7f\x80\0\0"  # (float)1e300: infinity
    assert pack(b">L", 2.0 ** 64) == b"\0" * 8 and pack(b">L", math.nan) == b"\x80" + b"\0" * 7
    assert unpack(b">bBhH", pack(b">bBhH", -1, 255, -2, 65535)) == (-1, 255, -2, 65535, 7)
    assert unpack(b">i9", b"\x01" + b"\xff" * 8) == (-1.0, 10)
    assert unpack(b"bc0", b"\x03abcdef") == (b"abc", 5)
    assert unpack(b"s", b"abc\0def") == (b"abc", 5)
    assert unpack(b">i", b"xxxx\0\0\0\5", 5) == (5, 9)
    assert size(b">iI2c5xd") == 20 and size(b"!8 b d") == 16 and size(b"z") == 0


def test_struct_errors() -> None:
    s = struct_library(Errors())
    pack, unpack, size = s[b"pack"], s[b"unpack"], s[b"size"]
    assert raised(pack, b"q") == "#1 invalid format option 'q'"
    assert raised(pack, b"i") == "#2 number expected, got nil"  # (the nil pack pushes)
    assert raised(pack, b"c5", b"ab") == "#3 string too short"  # (C names the next one)
    assert raised(pack, b"i99999999999", 1) == "integral size overflow"
    assert raised(pack, b"I33", 1) == "integral size 33 is larger than limit of 32"
    assert raised(pack, b"!3", 1) == "alignment 3 is not a power of 2"
    assert raised(unpack, b"i", b"ab") == "#2 data string too short"
    assert raised(unpack, b">i", b"xxxx", 0) == "#3 offset must be 1 or greater"
    assert raised(unpack, b">i", b"xxxx", -1) == "#2 data string too short"
    assert raised(unpack, b"c0", b"abc") == "format 'c0' needs a previous size"
    assert raised(unpack, b"s", b"abc") == "unfinished string in data"
    assert raised(size, b"s") == "#1 option 's' has no fixed size"


def test_cmsgpack_floats() -> None:
    assert pack_float(0.5) == b"\xca" + struct.pack(">f", 0.5)
    assert pack_float(0.1) == b"\xcb" + struct.pack(">d", 0.1)
    assert pack_float(math.inf) == b"\xca\x7f\x80\0\0"
    assert pack_float(3.5e38)[:1] == b"\xcb"  # past a float's range
    assert pack_float(math.nan)[:1] == b"\xcb"  # (NaN is never equal to its float)
    assert unpack_float(b"\x3f\xc0\0\0") == 1.5
    assert math.copysign(1, unpack_double(b"\x80" + b"\0" * 7)) == -1
