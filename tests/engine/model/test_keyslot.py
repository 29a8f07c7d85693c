"""engine.model.keyslot: Redis Cluster's key-to-slot map, its compiled kernel against its
pure-Python reference.

Each known-value test runs on both twins (`keyslot_impl`); the random and hypothesis tests feed
the same input to both and require the same outcome, errors included. The CRC is also checked
against a bit-at-a-time CRC16 written here from its definition, and the hash tag rule against
a key built around a tag; redis-server's own answers are compared in
tests/differential/test_diff_keyslot.py."""

from __future__ import annotations

import random
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model import keyslot
from streamkeep.engine.model.keyslot import CROSS_SLOT, NO_KEYS, SLOTS
from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

keyslot_impl = kernel_fixture("streamkeep.engine.model", "keyslot")

MB = 1 << 20


def bitwise_crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM) one bit at a time: polynomial 0x1021, initial 0, no reflection."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = (crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def random_key(rng: random.Random) -> bytes:
    """A short key over an alphabet rich in braces, now and then any bytes."""
    if rng.random() < 0.2:
        return rng.randbytes(rng.randint(0, 24))
    return bytes(rng.choice(b"{}{}ab\x00\xff") for _ in range(rng.randint(0, 16)))


# --- known values -------------------------------------------------------------------------------


def test_the_check_value(keyslot_impl) -> None:
    assert keyslot_impl.crc16(b"123456789") == 0x31C3
    assert keyslot_impl.crc16(b"") == 0


@pytest.mark.parametrize(("key", "slot"), [(b"foo", 12182), (b"bar", 5061), (b"", 0),
                                           (b"123456789", 0x31C3 & 0x3FFF)])
def test_known_slots(keyslot_impl, key: bytes, slot: int) -> None:
    assert keyslot_impl.key_slot(key) == slot


@pytest.mark.parametrize(("key", "hashed"), [
    (b"{user1000}.following", b"user1000"),
    (b"{user1000}.followers", b"user1000"),
    (b"foo{}{bar}", b"foo{}{bar}"),  # the first tag is empty: the whole key
    (b"foo{{bar}}zap", b"{bar"),  # from the first '{' to the first '}' after it
    (b"foo{bar}{zap}", b"bar"),  # only the first tag
    (b"{", b"{"), (b"}", b"}"), (b"}{", b"}{"), (b"{}", b"{}"), (b"{}}", b"{}}"),
    (b"{{}", b"{"), (b"a{b", b"a{b"), (b"a}b{", b"a}b{"), (b"}a{b}", b"b"), (b"{a}", b"a"),
    (b"x{\x00}y", b"\x00"), (b"{{{{}}}}", b"{{{")])
def test_hash_tags(keyslot_impl, key: bytes, hashed: bytes) -> None:
    assert keyslot_impl.key_slot(key) == keyslot_impl.crc16(hashed) & (SLOTS - 1)


def test_a_tag_shares_its_slot(keyslot_impl) -> None:
    assert keyslot_impl.key_slot(b"{user1000}.following") \
        == keyslot_impl.key_slot(b"{user1000}.followers") == keyslot_impl.key_slot(b"user1000")
    assert keyslot_impl.key_slot(b"foo{bar}{zap}") == keyslot_impl.key_slot(b"bar") == 5061


def test_common_slot(keyslot_impl) -> None:
    foo = keyslot_impl.key_slot(b"foo")
    assert keyslot_impl.common_slot([]) == NO_KEYS == -2
    assert keyslot_impl.common_slot(()) == NO_KEYS
    assert keyslot_impl.common_slot([b"foo"]) == foo
    assert keyslot_impl.common_slot((b"foo", b"foo", b"{foo}x")) == foo
    assert keyslot_impl.common_slot([b"{user1000}.following", b"{user1000}.followers"]) \
        == keyslot_impl.key_slot(b"user1000")
    assert keyslot_impl.common_slot([b"foo", b"bar"]) == CROSS_SLOT == -1
    assert keyslot_impl.common_slot([b"foo", b"foo", b"bar", b"foo"]) == CROSS_SLOT
    assert keyslot_impl.common_slot(iter([b"bar", b"{bar}"])) == 5061  # any iterable


def test_common_slot_stops_at_the_first_other_slot(keyslot_impl) -> None:
    """The keys after two slots are not hashed: what follows does not matter, not even a
    value that is no key."""
    assert keyslot_impl.common_slot([b"foo", b"bar", "not bytes"]) == CROSS_SLOT
    with pytest.raises(TypeError):
        keyslot_impl.common_slot([b"foo", "not bytes", b"bar"])


# --- inputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [bytearray, memoryview, lambda b: memoryview(b"??" + b)[2:],
                                  type("Key", (bytes,), {})])
def test_bytes_like_keys(keyslot_impl, make) -> None:
    for key in (b"foo", b"{user1000}.following", b"", b"foo{{bar}}zap"):
        assert keyslot_impl.key_slot(make(key)) == keyslot_impl.key_slot(key)
        assert keyslot_impl.crc16(make(key)) == keyslot_impl.crc16(key)
    assert keyslot_impl.common_slot([make(b"{a}1"), b"{a}2"]) == keyslot_impl.key_slot(b"a")


def test_a_strided_view_is_its_bytes(keyslot_impl) -> None:
    view = memoryview(b"f-o-o")[::2]
    assert keyslot_impl.key_slot(view) == 12182


@pytest.mark.parametrize("bad", ["foo", 7, None, 1.5, [b"foo"], object()])
def test_what_is_no_key_is_a_type_error(bad) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "keyslot")
    for name in ("key_slot", "crc16"):
        result = outcome(getattr(pure, name), bad)
        assert result[0] == "error" and result[1][0] == "TypeError", result
        assert outcome(getattr(compiled, name), bad) == result
    assert outcome(pure.common_slot, [bad]) == outcome(compiled.common_slot, [bad])
    assert outcome(pure.common_slot, bad) == outcome(compiled.common_slot, bad)


def test_an_array_is_its_raw_bytes(keyslot_impl) -> None:
    words = array("I", [0x7B616263, 0x7D])  # the buffer, whatever the item size
    assert keyslot_impl.key_slot(words) == keyslot_impl.key_slot(words.tobytes())


# --- hostile sizes ------------------------------------------------------------------------------


HOSTILE = [b"", b"{", b"}", b"{" * MB, b"}" * MB, b"{}" * (MB // 2), b"}{" * (MB // 2),
           b"x" * MB, b"\xff" * MB, b"{" + b"t" * MB + b"}", b"a" * MB + b"{t}",
           b"{t}" + b"a" * MB, b"{" * (MB - 1) + b"}", b"{" + b"}" * MB]


def _hostile_id(key: bytes) -> str:
    return f"{key[:3]!r}x{len(key)}"


@pytest.mark.parametrize("key", HOSTILE, ids=_hostile_id)
def test_hostile_sizes(keyslot_impl, key: bytes) -> None:
    """Empty keys, megabyte keys (past the size the kernel hashes without the GIL) and keys
    made of braces: a slot in range, the same from a copy and for a list of the key."""
    slot = keyslot_impl.key_slot(key)
    assert 0 <= slot < SLOTS
    assert keyslot_impl.key_slot(bytearray(key)) == slot
    assert keyslot_impl.common_slot([key, key]) == slot


@pytest.mark.parametrize("key", HOSTILE, ids=_hostile_id)
def test_twins_agree_on_hostile_sizes(key: bytes) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "keyslot")
    assert compiled.key_slot(key) == pure.key_slot(key)
    assert compiled.crc16(key) == pure.crc16(key)


def test_a_megabyte_tag(keyslot_impl) -> None:
    tag = random.Random(3).randbytes(MB).replace(b"}", b"").replace(b"{", b"")
    assert keyslot_impl.key_slot(b"k{" + tag + b"}zz") == keyslot_impl.crc16(tag) & (SLOTS - 1) \
        == keyslot_impl.key_slot(tag)


# --- the twins, and the CRC's definition --------------------------------------------------------


def test_the_crc_is_its_definition(keyslot_impl) -> None:
    rng = random.Random(16)
    for size in [*range(0, 40), 255, 256, 257, 4096]:
        data = rng.randbytes(size)
        assert keyslot_impl.crc16(data) == bitwise_crc16(data), data


def test_twins_agree_on_random_keys() -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "keyslot")
    rng = random.Random(12182)
    for _ in range(5000):
        key = random_key(rng)
        slot = compiled.key_slot(key)
        assert slot == pure.key_slot(key), key
        assert 0 <= slot < SLOTS
        assert compiled.crc16(key) == pure.crc16(key), key


def test_twins_agree_on_random_key_lists() -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "keyslot")
    rng = random.Random(5061)
    outcomes = {CROSS_SLOT: 0, NO_KEYS: 0, "slot": 0}
    for _ in range(3000):
        tag = random_key(rng)
        keys = [random_key(rng) if rng.random() < 0.3 else
                random_key(rng).replace(b"{", b"") + b"{" + tag + b"}" + random_key(rng)
                for _ in range(rng.randint(0, 4))]
        slot = compiled.common_slot(keys)
        assert slot == pure.common_slot(keys) == compiled.common_slot(tuple(keys)), keys
        slots = {pure.key_slot(key) for key in keys}
        assert slot == (NO_KEYS if not slots else slots.pop() if len(slots) == 1
                        else CROSS_SLOT), keys
        outcomes[slot if slot < 0 else "slot"] += 1
    assert min(outcomes.values()) > 100, outcomes  # every outcome was exercised


KEYS = st.one_of(st.binary(max_size=40),
                 st.lists(st.sampled_from([b"{", b"}", b"a", b"\x00", b"{}", b"}{"]),
                          max_size=20).map(b"".join))


@settings(max_examples=500, deadline=None)
@given(prefix=st.binary(max_size=20).map(lambda b: b.replace(b"{", b"")),
       tag=st.binary(min_size=1, max_size=20).map(lambda b: b.replace(b"}", b"") or b"t"),
       rest=KEYS)
def test_a_tag_is_what_is_hashed(keyslot_impl, prefix: bytes, tag: bytes, rest: bytes) -> None:
    """A key with no '{' before its tag belongs to its tag's slot, whatever follows."""
    key = prefix + b"{" + tag + b"}" + rest
    want = bitwise_crc16(tag) & (SLOTS - 1)
    assert keyslot_impl.key_slot(key) == want
    assert keyslot_impl.common_slot([key, b"{" + tag + b"}"]) == want


@settings(max_examples=500, deadline=None)
@given(keys=st.lists(KEYS, max_size=6))
def test_twins_agree(keys: list[bytes]) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "keyslot")
    for key in keys:
        assert compiled.key_slot(key) == pure.key_slot(key)
        assert compiled.crc16(key) == pure.crc16(key) == bitwise_crc16(key)
        if b"{" not in key:
            assert pure.key_slot(key) == bitwise_crc16(key) & (SLOTS - 1)
    assert compiled.common_slot(keys) == pure.common_slot(keys)


def test_the_facade_exports_one_implementation() -> None:
    assert keyslot.SLOTS == 16384
    assert keyslot.key_slot(b"foo") == 12182
    assert keyslot.common_slot([b"foo", b"{foo}"]) == 12182
