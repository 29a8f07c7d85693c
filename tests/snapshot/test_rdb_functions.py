"""snapshot.rdb_functions: the RDB record of a function library and FUNCTION DUMP's payload,
against redis-server's own bytes (a short library's record is raw in both; a long one Redis
LZF-compresses, which reads back the same), and the lines a refused payload gets."""

from __future__ import annotations

import struct

import pytest

from streamkeep.snapshot.rdb import Reader, crc64
from streamkeep.snapshot.rdb_functions import (
    RDB_OPCODE_FUNCTION2,
    FunctionPayloadError,
    dump_functions_payload,
    encode_function_record,
    load_functions_payload,
    read_function_record,
)
from tests.support.resp_client import RespClient

SHORT = b"#!lua name=a\nredis.register_function('f', function() return 1 end)"
LONG = b"#!lua name=b\n" + b"".join(
    b"redis.register_function('f%d', function() return %d end)\n" % (i, i) for i in range(40))


def with_footer(body: bytes, version: int = 10) -> bytes:
    body += struct.pack("<H", version)
    return body + struct.pack("<Q", crc64(body))


def test_the_opcode_is_redis_function2() -> None:
    assert RDB_OPCODE_FUNCTION2 == 245
    record = encode_function_record(SHORT)
    assert record[0] == 245
    r = Reader(record, 1)
    assert read_function_record(r) == SHORT and r.pos == len(record)


def test_round_trip_and_order() -> None:
    payload = dump_functions_payload([SHORT, LONG], 12)
    assert payload[-10:-8] == b"\x0c\x00"
    assert load_functions_payload(payload) == [SHORT, LONG]
    assert load_functions_payload(dump_functions_payload([], 10)) == []


@pytest.mark.parametrize(("payload", "message"), [
    (b"", "DUMP payload version or checksum are wrong"),
    (b"\xf5\x01a" + b"\x0a\x00" + b"\x00" * 8, "DUMP payload version or checksum are wrong"),
    (with_footer(b"\xf6\x01a"), "Pre-GA function format not supported"),
    (with_footer(b"\x00\x01a"), "given type is not a function"),
    (with_footer(b"\xf5\x3fab"), "Failed loading library payload"),
    (with_footer(encode_function_record(SHORT), 99), "DUMP payload version or checksum are wrong"),
])
def test_refused_payloads(payload: bytes, message: str) -> None:
    with pytest.raises(FunctionPayloadError) as err:
        load_functions_payload(payload)
    assert str(err.value) == message


def test_the_same_bytes_as_redis_server(redis_raw: RespClient) -> None:
    redis_raw.execute("FUNCTION", "FLUSH")
    try:
        redis_raw.execute("FUNCTION", "LOAD", SHORT)
        theirs = redis_raw.execute("FUNCTION", "DUMP")
        version = struct.unpack("<H", theirs[-10:-8])[0]
        assert dump_functions_payload([SHORT], version) == theirs
        redis_raw.execute("FUNCTION", "LOAD", LONG)  # LZF-compressed by Redis
        codes = load_functions_payload(redis_raw.execute("FUNCTION", "DUMP"))
        assert sorted(codes) == sorted([SHORT, LONG])
        redis_raw.execute("FUNCTION", "FLUSH")
        assert redis_raw.execute("FUNCTION", "RESTORE",
                                 dump_functions_payload([LONG, SHORT], version)) == "OK"
        assert len(redis_raw.execute("FUNCTION", "LIST")) == 2
    finally:
        redis_raw.execute("FUNCTION", "FLUSH")
