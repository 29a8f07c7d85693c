"""Redis Cluster's key-to-slot map (its keyHashSlot: the CRC16 of the key, or of its hash tag,
modulo `SLOTS`): the facade that picks the compiled kernel (`_keyslot_c.pyx`) or its
pure-Python reference (`_keyslot_py.py`), which says how a slot is found. See
`engine.wire.kernel_switches` for the switches.

`key_slot(key)` is one key's slot, `crc16(data)` the checksum it is made of, and
`common_slot(keys)` the one slot a command's keys share (-1 when they span more than one, the
CROSSSLOT case; -2 for a command with no key), one call per command.

Owns: the number of slots. Must not touch: anything but choosing the implementation (which
slots a node serves, the CROSSSLOT and MOVED replies: the cluster commands' own).
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._keyslot_c import common_slot, crc16, key_slot
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._keyslot_py import common_slot, crc16, key_slot
else:
    kernel_switches.loaded(__name__, True)

SLOTS: Final = 16384  # a key's slot is below this (the kernels keep its low 14 bits)
CROSS_SLOT: Final = -1  # common_slot: the keys belong to more than one slot
NO_KEYS: Final = -2  # common_slot: there is no key

__all__ = ["CROSS_SLOT", "NO_KEYS", "SLOTS", "common_slot", "crc16", "key_slot"]
