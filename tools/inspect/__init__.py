"""The offline inspection CLI: `streamkeep aof ...`, `streamkeep restore`, `streamkeep snapshot ...`.

Each command is a module of its own (verify, fix, stats, dump, restore, snapshot); `cli` wires
them into the `streamkeep` parser. They read files through aof/codec.py, aof/segment_reader.py and the
snapshot read API only, never take a data directory's lock (except `fix`, which edits) and
never import the engine to read.
"""

from streamkeep.engine.wire.errors import StreamkeepError  # stdlib only behind it


class UsageError(StreamkeepError):
    """Bad input an inspection command reports with exit status 3 (never a traceback)."""
