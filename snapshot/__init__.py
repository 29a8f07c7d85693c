"""LMDB snapshots of engine state.

Owns writing point-in-time snapshots into LMDB and a read API over a snapshot
that needs no running engine.
"""
