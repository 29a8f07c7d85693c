"""The redis-py facade's parts (engine.runtime.clients) held to the command table.

Each facade method declares the commands it sends (`clients.base.sends`, by the table's names).
Checked here: every name declared is a command or subcommand in the table; the method is
defined in the mixin of that command's group (one mixin per group, as redis-py's
StreamCommands, HashCommands, ...); every public method declares what it sends; and the table's
commands no method sends are exactly UNSENT, so a command added to the table without its
client method (or a method dropped) fails here until one is written or the command is listed.
That each declaration is true (what a method sends is among what it names) is checked where the
argv are recorded: each mixin's test (tests/engine/runtime/clients/, a call of every method,
its argv compared with redis-py's). Also here: no class of the facade's modules is longer than
400 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import streamkeep.engine.commands  # noqa: F401  (the command table, filled)
from streamkeep.engine.exec.table import COMMANDS, CommandSpec
from streamkeep.engine.runtime.clients.base import ClientBase, commands_sent
from streamkeep.engine.runtime.clients.connection import ConnectionCommands
from streamkeep.engine.runtime.clients.hashes import HashCommands
from streamkeep.engine.runtime.clients.keyspace import KeyspaceCommands
from streamkeep.engine.runtime.clients.lists import ListCommands
from streamkeep.engine.runtime.clients.pubsub import PubSubCommands
from streamkeep.engine.runtime.clients.scripting import ScriptingCommands
from streamkeep.engine.runtime.clients.server import ServerCommands
from streamkeep.engine.runtime.clients.sets import SetCommands
from streamkeep.engine.runtime.clients.sorted_sets import SortedSetCommands
from streamkeep.engine.runtime.clients.streams import StreamCommands
from streamkeep.engine.runtime.clients.strings import StringCommands
from streamkeep.engine.runtime.redis_api import RedisAPI

ROOT = Path(__file__).resolve().parents[3]
FACADE_MODULES = [ROOT / "engine" / "runtime" / "redis_api.py",
                  ROOT / "engine" / "runtime" / "async_redis.py",
                  *sorted((ROOT / "engine" / "runtime" / "clients").glob("*.py"))]
MAX_CLASS_LINES = 400

# Redis's command groups (the table's `group`) and the mixin holding their methods.
MIXINS: dict[str, type[ClientBase]] = {
    "stream": StreamCommands,
    "string": StringCommands,
    "hash": HashCommands,
    "set": SetCommands,
    "sorted-set": SortedSetCommands,
    "list": ListCommands,
    "generic": KeyspaceCommands,
    "server": ServerCommands,
    "connection": ConnectionCommands,
    "pubsub": PubSubCommands,
    "scripting": ScriptingCommands,
}

# The public methods that send no command of their own: any command (redis-py's
# execute_command), and a Script object (its calls are evalsha's and script_load's).
DECLARE_NOTHING = {"execute_command", "register_script"}

# The table's commands (a container's subcommands, HELP aside) no facade method sends.
UNSENT = {
    # a connection's state: the in-process facade has no connection of its own
    "auth", "hello", "quit", "reset", "select", "client|getredir", "client|info",
    "client|kill", "client|no-evict", "client|no-touch", "client|reply", "client|setinfo",
    "client|unblock",
    # subscribing: Engine.subscribe, and AsyncRedis.pubsub()
    "psubscribe", "punsubscribe", "ssubscribe", "subscribe", "sunsubscribe", "unsubscribe",
    # transactions: AsyncRedis.pipeline() (redis-py's sync pipeline is not in the facade)
    "discard", "exec", "multi", "unwatch", "watch",
    # redis-py's incr and decr send INCRBY and DECRBY; INCREX has no facade method yet
    "decr", "incr", "increx",
    # streams: no redis-py method (XSETID), or the effect vocabulary's (XIDMPRECORD)
    "xidmprecord", "xsetid",
    # server administration, replication and introspection: no facade method yet
    "acl|cat", "acl|deluser", "acl|dryrun", "acl|genpass", "acl|getuser", "acl|list",
    "acl|load", "acl|log", "acl|save", "acl|setuser", "acl|users", "acl|whoami",
    "command", "command|docs", "command|getkeys", "command|getkeysandflags", "command|info",
    "command|list", "config|rewrite", "debug|digest", "latency|doctor", "latency|graph",
    "latency|histogram", "latency|history", "latency|latest", "latency|reset", "psync",
    "replconf", "replicaof", "role", "shutdown", "slaveof", "slowlog|get", "slowlog|len",
    "slowlog|reset", "sync",
    # keys moved to another server (a cluster's slot moves): no facade method yet
    "migrate", "restore-asking",
    # a cluster node's commands: redis-py's cluster client (RedisCluster) sends them, the
    # in-process engine is no cluster node
    "asking", "readonly", "readwrite", "cluster|count-failure-reports", "cluster|countkeysinslot",
    "cluster|getkeysinslot", "cluster|info", "cluster|keyslot", "cluster|links", "cluster|myid",
    "cluster|lease", "cluster|myshardid", "cluster|nodes", "cluster|relay", "cluster|replicas",
    "cluster|setslot",
    "cluster|settopology", "cluster|export", "cluster|import", "cluster|trim",
    "cluster|shards", "cluster|slots",
}


def _spec(name: str) -> CommandSpec | None:
    """The table's command or subcommand by its full name ("hset", "xgroup|create")."""
    top, _, sub = name.partition("|")
    spec = COMMANDS.get(top.encode())
    if spec is None or spec.internal or not sub:
        return spec
    return spec.subcommands.get(sub.encode())


def _sendable() -> set[str]:
    """What a client may send, by full name: each plain command; a container's subcommands
    (HELP aside: redis-py has none), and the container itself where it runs alone."""
    names: set[str] = set()
    for spec in COMMANDS.values():
        if spec.internal:
            continue
        if not spec.subcommands:
            names.add(spec.name)
            continue
        names.update(sub.name for key, sub in spec.subcommands.items() if key != b"help")
        if spec.handler is not None:
            names.add(spec.name)
    return names


def _methods() -> dict[str, tuple[type, Any]]:
    """RedisAPI's methods defined in its mixins: name -> (the class defining it, function)."""
    found: dict[str, tuple[type, Any]] = {}
    for klass in reversed(RedisAPI.__mro__):
        if klass is object:
            continue
        for name, value in vars(klass).items():
            if callable(value) and not isinstance(value, type):
                found[name] = (klass, value)
    return found


def _declaring() -> dict[str, tuple[type, tuple[str, ...]]]:
    return {name: (klass, commands_sent(fn)) for name, (klass, fn) in _methods().items()
            if commands_sent(fn)}


def test_redis_api_is_the_mixins_composed() -> None:
    assert set(RedisAPI.__bases__) == set(MIXINS.values())

    class Engine:
        def execute(self, *args: Any) -> Any:
            return args

    assert not hasattr(RedisAPI(Engine()), "__dict__")  # (slots only: as one class was)


def test_every_declared_command_is_in_the_table() -> None:
    unknown = [f"{name}: {command}" for name, (_, commands) in _declaring().items()
               for command in commands if _spec(command) is None]
    assert not unknown, "declared commands not in the table:\n" + "\n".join(unknown)
    containers = [f"{name}: {command}" for name, (_, commands) in _declaring().items()
                  for command in commands if command not in _sendable()]
    assert not containers, "declare the subcommands sent:\n" + "\n".join(containers)


def test_each_method_is_in_its_commands_group_mixin() -> None:
    wrong = []
    for name, (klass, commands) in _declaring().items():
        for command in commands:
            spec = _spec(command)
            assert spec is not None
            group = spec.group
            if MIXINS.get(group) is not klass:
                wrong.append(f"{klass.__name__}.{name} sends {command} (group {spec.group!r}: "
                             f"{getattr(MIXINS.get(group), '__name__', 'no mixin')})")
    assert not wrong, "\n".join(wrong)


def test_every_public_method_declares_what_it_sends() -> None:
    silent = sorted(name for name, (klass, fn) in _methods().items()
                    if klass is not object and not name.startswith("_")
                    and name not in DECLARE_NOTHING and not commands_sent(fn))
    silent += [name for name in ("__getitem__", "__setitem__", "__delitem__", "__contains__")
               if not commands_sent(getattr(RedisAPI, name))]
    assert not silent, f"methods without @sends: {silent}"
    assert len(_declaring()) > 200


def test_the_commands_no_method_sends_are_the_listed_ones() -> None:
    sent = {command for _, commands in _declaring().values() for command in commands}
    unsent = _sendable() - sent
    assert not unsent - UNSENT, ("commands without a facade method: write one (its mixin: "
                                 f"the command's group), or list them in UNSENT: "
                                 f"{sorted(unsent - UNSENT)}")
    assert not UNSENT - unsent, f"listed in UNSENT but sent, or gone: {sorted(UNSENT - unsent)}"


def test_no_facade_class_is_longer_than_the_limit() -> None:
    sizes = {f"{path.relative_to(ROOT)}:{node.name}": node.end_lineno - node.lineno + 1
             for path in FACADE_MODULES
             for node in ast.walk(ast.parse(path.read_text(), str(path)))
             if isinstance(node, ast.ClassDef) and node.end_lineno is not None}
    assert len(sizes) > len(MIXINS)
    biggest = max(sizes, key=sizes.__getitem__)
    assert sizes[biggest] <= MAX_CLASS_LINES, f"{biggest}: {sizes[biggest]} lines"
