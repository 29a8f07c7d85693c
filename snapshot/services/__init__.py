"""Services layer of snapshots: what runs a snapshot against an engine. Loading one into an
engine (load), building one in a child process (build) and compaction's steps (compactor).
The file format itself (layout, reader, writer, segments, cold nodes, RDB) is the formats
layer, one folder up.
"""
