"""Redis's RDB records of function libraries, and FUNCTION DUMP's payload built of them: pure
functions over bytes.

Owns the payload FUNCTION DUMP replies and FUNCTION RESTORE reads (the records, the RDB version
as u16 LE, the CRC-64 of everything before it, as a DUMP payload ends) with Redis's error lines
for a payload it refuses, and the payload a snapshot keeps as its `functions` record. The
library record itself (opcode RDB_OPCODE_FUNCTION2, 245, then the library's whole code as an RDB
string: Redis's rdbSaveFunctions and rdbFunctionLoad), the RDB strings, the CRC-64 and the
footer check are snapshot.rdb's, whose RDB file reader and writer carry the records too. Must
not touch: the libraries themselves (engine.exec.functions compiles and registers them), files,
the engine.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from streamkeep.snapshot.rdb import (
    FUNCTIONS_VERSION,  # the first RDB version with function records (Redis 7.0)
    MAX_VERSION,
    RDB_OPCODE_FUNCTION2,
    RDB_OPCODE_FUNCTION_PRE_GA,  # Redis 7.0's release candidates: refused, as by Redis
    RdbError,
    Reader,
    check_payload,
    crc64,
    encode_function_record,
)

# The RDB version a snapshot's payload is written with (any version reads it back).
PAYLOAD_VERSION: Final = 12


class FunctionPayloadError(RdbError):
    """A FUNCTION RESTORE payload refused; the message is Redis's line without its ERR."""


def read_function_record(r: Reader) -> bytes:
    """The library code of a record whose opcode byte `r` has just read (RdbError if it is
    not a string)."""
    return r.string()


def dump_functions_payload(codes: Iterable[bytes], version: int) -> bytes:
    """FUNCTION DUMP's reply: the libraries' records, the RDB version, the CRC-64."""
    body = b"".join(encode_function_record(code) for code in codes) + struct.pack("<H", version)
    return body + struct.pack("<Q", crc64(body))


def load_functions_payload(payload: bytes, max_version: int = MAX_VERSION) -> list[bytes]:
    """The library codes in a FUNCTION DUMP payload (functionRestoreCommand's reading):
    FunctionPayloadError with Redis's message for a bad footer or a record that is not a
    library."""
    try:
        check_payload(payload, max_version)
    except RdbError:
        raise FunctionPayloadError("DUMP payload version or checksum are wrong") from None
    r = Reader(payload)
    codes = []
    while len(payload) - r.pos > 10:
        opcode = r.byte()
        if opcode == RDB_OPCODE_FUNCTION_PRE_GA:
            raise FunctionPayloadError("Pre-GA function format not supported")
        if opcode != RDB_OPCODE_FUNCTION2:
            raise FunctionPayloadError("given type is not a function")
        try:
            codes.append(read_function_record(r))
        except RdbError:
            raise FunctionPayloadError("Failed loading library payload") from None
    return codes


__all__ = ["FUNCTIONS_VERSION", "PAYLOAD_VERSION", "RDB_OPCODE_FUNCTION2", "RDB_OPCODE_FUNCTION_PRE_GA",
           "FunctionPayloadError", "dump_functions_payload", "encode_function_record",
           "load_functions_payload", "read_function_record"]
