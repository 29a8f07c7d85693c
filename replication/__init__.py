"""Asynchronous replication.

Owns the replica side: following the primary's effect-record stream from a
given LSN and applying it locally.
"""
