"""Imports every command module so that each registers its commands in engine.table.

Must not hold any command itself.
"""

from engine import (  # noqa: F401
    cmd_admin,
    cmd_connection,
    cmd_groups,
    cmd_info,
    cmd_keyspace,
    cmd_read,
    cmd_streams,
    transactions,
)
