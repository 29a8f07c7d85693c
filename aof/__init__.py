"""Append-only file (AOF) of effect records.

Owns the on-disk log: each effect record is msgpack-encoded and framed with a
length and a CRC-32C checksum, plus writing, fsync policy, replay and
truncation of torn tails.
"""
