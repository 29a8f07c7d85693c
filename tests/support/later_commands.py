"""The commands redis-server 7.0 (the oracle) lacks, with their ACL categories and keys as
Redis's own src/commands/*.json declare them (Redis 7.2 to 8.8), for the tests of
engine.exec.categories and engine.exec.key_specs: tests/engine/exec/test_key_specs.py
checks them, tests/differential/test_command_acl_metadata.py that redis-server lacks exactly these.
"""

from __future__ import annotations

RW_ACCESS_UPDATE = {"RW", "access", "update"}

# name: (categories, each key's flags for `argv`), from Redis's command JSON (7.2 to 8.8).
SOURCE_CHECKED: dict[str, tuple[list[str], tuple[str, ...], list[tuple[str, set[str]]]]] = {
    "hexpire": (["@write", "@hash", "@fast"], ("HEXPIRE", "h", "10", "FIELDS", "1", "f"),
                [("h", {"RW", "update"})]),
    "hpexpire": (["@write", "@hash", "@fast"], ("HPEXPIRE", "h", "10", "FIELDS", "1", "f"),
                 [("h", {"RW", "update"})]),
    "hexpireat": (["@write", "@hash", "@fast"], ("HEXPIREAT", "h", "10", "FIELDS", "1", "f"),
                  [("h", {"RW", "update"})]),
    "hpexpireat": (["@write", "@hash", "@fast"], ("HPEXPIREAT", "h", "10", "FIELDS", "1", "f"),
                   [("h", {"RW", "update"})]),
    "httl": (["@read", "@hash", "@fast"], ("HTTL", "h", "FIELDS", "1", "f"),
             [("h", {"RO", "access"})]),
    "hpttl": (["@read", "@hash", "@fast"], ("HPTTL", "h", "FIELDS", "1", "f"),
              [("h", {"RO", "access"})]),
    "hexpiretime": (["@read", "@hash", "@fast"], ("HEXPIRETIME", "h", "FIELDS", "1", "f"),
                    [("h", {"RO", "access"})]),
    "hpexpiretime": (["@read", "@hash", "@fast"], ("HPEXPIRETIME", "h", "FIELDS", "1", "f"),
                     [("h", {"RO", "access"})]),
    "hpersist": (["@write", "@hash", "@fast"], ("HPERSIST", "h", "FIELDS", "1", "f"),
                 [("h", {"RW", "update"})]),
    "hgetdel": (["@write", "@hash", "@fast"], ("HGETDEL", "h", "FIELDS", "1", "f"),
                [("h", {"RW", "access", "delete"})]),
    "hgetex": (["@write", "@hash", "@fast"], ("HGETEX", "h", "FIELDS", "1", "f"),
               [("h", RW_ACCESS_UPDATE)]),
    "hsetex": (["@write", "@hash", "@fast"], ("HSETEX", "h", "FIELDS", "1", "f", "v"),
               [("h", {"RW", "update"})]),
    "xackdel": (["@write", "@stream", "@fast"], ("XACKDEL", "s", "g", "IDS", "1", "1-1"),
                [("s", {"RW", "update", "delete"})]),
    "xdelex": (["@write", "@stream", "@fast"], ("XDELEX", "s", "IDS", "1", "1-1"),
               [("s", {"RW", "delete"})]),
    "xnack": (["@write", "@stream", "@fast"],
              ("XNACK", "s", "g", "SILENT", "IDS", "1", "1-1"), [("s", {"RW", "update"})]),
    "xcfgset": (["@write", "@stream", "@fast"], ("XCFGSET", "s", "IDMP-MAXSIZE", "10"),
                [("s", {"RW", "update"})]),
    "xidmprecord": (["@write", "@stream", "@fast"], ("XIDMPRECORD", "s", "p", "i", "1-1"),
                    [("s", {"RW", "update"})]),
    "msetex": (["@write", "@string", "@slow"], ("MSETEX", "2", "a", "1", "b", "2", "EX", "5"),
               [("a", {"OW", "update"}), ("b", {"OW", "update"})]),
    "increx": (["@write", "@string", "@fast"], ("INCREX", "k", "10"), [("k", RW_ACCESS_UPDATE)]),
    "digest": (["@read", "@string", "@fast"], ("DIGEST", "k"), [("k", {"RO", "access"})]),
    "delex": (["@write", "@string", "@fast"], ("DELEX", "k", "IFEQ", "v"),
              [("k", {"RW", "delete"})]),
    "waitaof": (["@slow", "@blocking", "@connection"], ("WAITAOF", "0", "0", "0"), []),
    "client|setinfo": (["@slow", "@connection"], ("CLIENT", "SETINFO", "LIB-NAME", "x"), []),
    "client|no-touch": (["@slow", "@connection"], ("CLIENT", "NO-TOUCH", "ON"), []),
    "cluster|myshardid": (["@slow"], ("CLUSTER", "MYSHARDID"), []),
    # streamkeep's own: the topology a controller gives a cluster node (admin, as Redis's
    # other CLUSTER subcommands that change a node's configuration).
    "cluster|settopology": (["@admin", "@slow", "@dangerous"], ("CLUSTER", "SETTOPOLOGY", "1", "x"),
                            []),
    # streamkeep's own: a message published on another node, delivered here (what Redis's
    # bus carries: admin, as the topology command; pubsub, as PUBLISH).
    "cluster|relay": (["@pubsub", "@admin", "@fast", "@dangerous"],
                      ("CLUSTER", "RELAY", "c", "m"), []),
    # streamkeep's own: a controller's lease of a node it manages (admin, as the topology
    # command).
    "cluster|lease": (["@admin", "@fast", "@dangerous"], ("CLUSTER", "LEASE", "c", "1", "1"),
                      []),
    # streamkeep's own: a controller's atomic slot moves (admin, as the topology command;
    # the import and the trim write).
    "cluster|export": (["@admin", "@slow", "@dangerous"],
                       ("CLUSTER", "EXPORT", "CANCEL", "s"), []),
    "cluster|import": (["@write", "@admin", "@slow", "@dangerous"],
                       ("CLUSTER", "IMPORT", "APPLY", "1", "s", "x"), []),
    "cluster|trim": (["@write", "@admin", "@slow", "@dangerous"], ("CLUSTER", "TRIM", "1"), []),
    # streamkeep's own: DEBUG's subcommands, with Redis's DEBUG's flags (admin).
    "debug|digest": (["@admin", "@slow", "@dangerous"], ("DEBUG", "DIGEST"), []),
    "debug|help": (["@admin", "@slow", "@dangerous"], ("DEBUG", "HELP"), []),
}
