"""Model layer: the data structures and their vocabulary. Stream IDs, sorted ID sets, streams
(nodes), consumer groups (PELs), the state digest and the effect vocabulary.

May import the wire layer only; knows nothing of commands, the engine or files.
"""
