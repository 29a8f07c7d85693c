"""Redis Cluster's key-to-slot map, pure Python: the reference the compiled kernel
(`_keyslot_c.pyx`) is tested against.

A key's slot is the CRC16 of the key (CCITT/XMODEM: polynomial 0x1021, initial value 0, bits
not reflected, no final xor) modulo 16384, taken as its low 14 bits. A hash tag narrows what is
hashed: when the key holds a '{' and, after the first '{', a '}' with at least one byte between
them, only the bytes between that first '{' and the first '}' after it are hashed, so
"{user1000}.following" and "{user1000}.followers" share a slot. Otherwise ("foo{}{bar}", "{",
"}{") the whole key is hashed.

A key may be any bytes-like object (bytes, bytearray, memoryview): its bytes, in order, are
hashed; anything else is refused with memoryview's TypeError.
Must not touch: replies, engine state, the cluster's own tables.
"""

from __future__ import annotations

from collections.abc import Sequence

_POLY = 0x1021
_SLOT_MASK = 0x3FFF  # 16384 slots (keyslot.SLOTS)


def _table() -> tuple[int, ...]:
    """The CRC of each byte value shifted in at the top of a zero register: the 256 entries of
    the byte-at-a-time CRC16."""
    entries = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ _POLY if crc & 0x8000 else crc << 1) & 0xFFFF
        entries.append(crc)
    return tuple(entries)


_TABLE = _table()


def _key_bytes(key: bytes) -> bytes:
    """The key's bytes: bytes as they are, another bytes-like object copied."""
    return key if type(key) is bytes else memoryview(key).tobytes()


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM) of `data`: crc16(b"123456789") == 0x31C3."""
    crc = 0
    for byte in _key_bytes(data):
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[(crc >> 8) ^ byte]
    return crc


def key_slot(key: bytes) -> int:
    """The slot, 0 to 16383, that `key` belongs to (its hash tag's, when it has one)."""
    data = _key_bytes(key)
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            return crc16(data[start + 1:end]) & _SLOT_MASK
    return crc16(data) & _SLOT_MASK


def common_slot(keys: Sequence[bytes]) -> int:
    """The one slot all `keys` belong to; -1 once two of them belong to different slots (the
    keys after that are not hashed), -2 when there is no key."""
    slot = -2
    for key in keys:
        this = key_slot(key)
        if slot == -2:
            slot = this
        elif this != slot:
            return -1
    return slot
