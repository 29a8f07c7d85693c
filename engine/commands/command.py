"""Server administration commands: CONFIG, INFO, COMMAND, CLIENT.

Owns these commands' argument handling and replies, shaped as Redis's (error lines from
src/config.c, src/networking.c, src/server.c): CONFIG GET/SET/RESETSTAT/REWRITE/HELP over the
settings registry (engine.config), INFO's sections, COMMAND's introspection of the command table,
and CLIENT's view of the server's connections. Must not touch: stream state, the registry's
parsing rules (engine.config), sockets: handlers run with the engine lock held on the server's
event-loop thread, so they only read the server's `Client` objects and set flags on them; a
connection is closed by scheduling `Client.abort` (`server.call_soon`), never from a handler.

On an embedded engine (`ctx.session.client` is None, `engine.server` may be None) the same
commands work on what exists: CLIENT ID is 0, CLIENT LIST/INFO describe no connection, CLIENT KILL
finds none, INFO counts no network connections.
"""

from __future__ import annotations

import functools
import os
import platform
import resource
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.engine.commands.connection import (
    BAD_NAME,
    last_save_time,
    valid_client_name,
)
from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec.config import (
    PARAMS,
    REDIS_VERSION,
    ConfigError,
    config_set,
    format_setting,
    lookup_param,
)
from streamkeep.engine.exec.config import rewrite_config_file as _rewrite_config_file
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.interfaces import persistence_fields
from streamkeep.engine.exec.table import (
    COMMANDS,
    NO_KEYS,
    Argv,
    CommandSpec,
    Flag,
    command,
    container,
    help_subcommand,
    subcommand,
)
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.argspec import Arg
from streamkeep.engine.wire.errors import SYNTAX, ReplyError, printable
from streamkeep.engine.wire.reply import RespMap, RespSet, Verbatim

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import Engine

ADMIN = "admin noscript loading stale"
RUN_ID = os.urandom(20).hex()  # this process's run_id (INFO server), as Redis draws one at start


# --- CONFIG ------------------------------------------------------------------------------------

CONFIG = container("config", "A container for server configuration commands.", group="server",
                   since="2.0.0")


@subcommand(CONFIG, "get", -3, ADMIN, keys=NO_KEYS, since="2.0.0",
            summary="Returns the effective values of configuration parameters.",
            syntax="parameter...")
def config_get(ctx: Ctx, argv: Argv) -> RespMap:
    """Each pattern a name (shown as typed) or a glob (case-insensitive); every setting once."""
    shown: dict[str, str] = {}  # setting -> the name the reply shows it under
    for arg in argv[2:]:
        if not any(c in arg for c in b"[*?"):
            param = lookup_param(arg)
            if param is not None and param.name not in shown:
                shown[param.name] = arg.decode("utf-8", "surrogateescape")
            continue
        for name in PARAMS:
            if name not in shown and stringmatchlen(arg, name.encode(), nocase=True):
                shown[name] = name
    engine = ctx.engine
    return RespMap([(label.encode("utf-8", "surrogateescape"),
                     format_setting(engine, name).encode("utf-8", "surrogateescape"))
                    for name, label in shown.items()])


@subcommand(CONFIG, "set", -4, ADMIN, keys=NO_KEYS, since="2.0.0",
            summary="Sets configuration parameters in-flight.", syntax="<parameter value>...")
def config_set_cmd(ctx: Ctx, argv: Argv) -> str:
    if len(argv) % 2:
        raise ReplyError(SYNTAX)
    pairs = [(argv[i], argv[i + 1]) for i in range(2, len(argv), 2)]
    try:
        config_set(ctx.engine, pairs)
    except ConfigError as err:
        raise ReplyError(err.reply_line().replace("\r", " ").replace("\n", " ")) from None
    return "OK"


@subcommand(CONFIG, "resetstat", 2, ADMIN, keys=NO_KEYS, since="2.0.0",
            summary="Resets the server's statistics.")
def config_resetstat(ctx: Ctx, argv: Argv) -> str:
    server = ctx.engine.server
    if server is not None:
        server.connections_received = 0
        server.commands_processed = 0
        server.rejected_connections = 0
    return "OK"


@subcommand(CONFIG, "rewrite", 2, ADMIN, keys=NO_KEYS, since="2.8.0",
            summary="Persists the effective configuration to file.")
def config_rewrite(ctx: Ctx, argv: Argv) -> str:
    path = ctx.engine.config_file
    if not path:
        raise ReplyError("ERR The server is running without a config file")
    try:
        _rewrite_config_file(ctx.engine, path)
    except OSError as err:
        raise ReplyError(f"ERR Rewriting config file: {os.strerror(err.errno or 5)}") from None
    return "OK"


help_subcommand(CONFIG, [
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
])


# --- INFO --------------------------------------------------------------------------------------

Fields = list[tuple[str, Any]]


@functools.cache
def streamkeep_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamkeep")
    except PackageNotFoundError:
        return "dev"


def bytes_to_human(n: int) -> str:
    """Redis's bytesToHuman: 1015.38K, 6.93M, 0B."""
    if n < 1024:
        return f"{n}B"
    for unit, size in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40),
                       ("P", 1 << 50)):
        if n < size * 1024:
            return f"{n / size:.2f}{unit}"
    return f"{n}B"


def _rss() -> int:
    """The process's resident set size now (Linux /proc), else its peak."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return _peak_rss()


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _system_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return 0


def _clients(engine: Engine) -> list[Any]:
    server = engine.server
    return list(server.clients.values()) if server is not None else []


def _waiters(engine: Engine) -> list[Any]:
    """Blocked commands (network clients and embedded threads), each once."""
    seen: dict[int, Any] = {}
    for queue in engine.waiters.by_key.values():
        for waiter in queue:
            seen.setdefault(id(waiter), waiter)
    return list(seen.values())


def _info_server(engine: Engine) -> Fields:
    server = engine.server
    uname = platform.uname()
    uptime = max(int(time.time() - engine.started_ms / 1000), 0)
    fields: Fields = [
        ("redis_version", REDIS_VERSION),
        ("streamkeep_version", streamkeep_version()),
        ("redis_git_sha1", "00000000"),
        ("redis_git_dirty", 0),
        ("redis_build_id", "0"),
        ("redis_mode", "standalone"),
        ("os", f"{uname.system} {uname.release} {uname.machine}"),
        ("arch_bits", 64 if sys.maxsize > 2 ** 32 else 32),
        ("python_version", platform.python_version()),
    ]
    loop = getattr(server, "loop", None)
    if loop is not None:
        fields.append(("multiplexing_api",
                       "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"))
    fields += [
        ("process_id", os.getpid()),
        ("process_supervised", "no"),
        ("run_id", RUN_ID),
        ("tcp_port", server.port if server is not None else 0),
        ("server_time_usec", time.time_ns() // 1000),
        ("uptime_in_seconds", uptime),
        ("uptime_in_days", uptime // 86400),
        ("executable", sys.executable),
        ("config_file", engine.config_file or ""),
        ("io_threads_active", 0),
    ]
    return fields


def _info_clients(engine: Engine) -> Fields:
    clients = _clients(engine)
    waiters = _waiters(engine)
    return [
        ("connected_clients", len(clients)),
        ("cluster_connections", 0),
        ("maxclients", engine.config["maxclients"]),
        ("client_recent_max_input_buffer",
         max((c.parser.pending_bytes() for c in clients), default=0)),
        ("client_recent_max_output_buffer",
         max((c.transport.get_write_buffer_size() for c in clients
              if c.transport is not None), default=0)),
        ("blocked_clients", len(waiters)),
        ("tracking_clients", 0),
        ("clients_in_timeout_table", sum(1 for w in waiters if w.timeout_ms)),
    ]


def _info_memory(engine: Engine) -> Fields:
    rss, peak, total = _rss(), _peak_rss(), _system_memory()
    peak = max(peak, rss)
    return [
        ("used_memory", rss),
        ("used_memory_human", bytes_to_human(rss)),
        ("used_memory_rss", rss),
        ("used_memory_rss_human", bytes_to_human(rss)),
        ("used_memory_peak", peak),
        ("used_memory_peak_human", bytes_to_human(peak)),
        ("used_memory_peak_perc", f"{rss * 100 / peak:.2f}%" if peak else "100.00%"),
        ("total_system_memory", total),
        ("total_system_memory_human", bytes_to_human(total)),
        ("maxmemory", 0),
        ("maxmemory_human", "0B"),
        ("maxmemory_policy", "noeviction"),
        ("mem_allocator", "pymalloc"),
    ]


def _info_persistence(engine: Engine) -> Fields:
    """An engine without a data directory (one with registers its own section)."""
    return persistence_fields(None, engine.clock(), last_save_time(engine))


def _info_stats(engine: Engine) -> Fields:
    server = engine.server
    return [
        ("total_connections_received", server.connections_received if server else 0),
        ("total_commands_processed", server.commands_processed if server else 0),
        ("instantaneous_ops_per_sec", 0),
        ("rejected_connections", server.rejected_connections if server else 0),
        ("expired_keys", 0),
        ("evicted_keys", 0),
        ("evicted_clients", 0),
        ("pubsub_channels", 0),
        ("pubsub_patterns", 0),
        ("total_forks", engine.datadir.status().saves if engine.datadir is not None else 0),
    ]


_REPL_IDS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _info_replication(engine: Engine) -> Fields:
    datadir = engine.datadir
    if datadir is not None:
        replid = datadir.repl_id
    else:  # in memory: a history of its own, named once
        replid = _REPL_IDS.setdefault(engine, os.urandom(20).hex())
    journal = engine.journal
    return [
        ("role", "master"),
        ("connected_slaves", 0),
        ("master_failover_state", "no-failover"),
        ("master_replid", replid),
        ("master_replid2", "0" * 40),
        ("master_repl_offset", journal.lsn if journal is not None else 0),
        ("second_repl_offset", -1),
        ("repl_backlog_active", 0),
    ]


def _info_cpu(engine: Engine) -> Fields:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return [
        ("used_cpu_sys", f"{me.ru_stime:.6f}"),
        ("used_cpu_user", f"{me.ru_utime:.6f}"),
        ("used_cpu_sys_children", f"{children.ru_stime:.6f}"),
        ("used_cpu_user_children", f"{children.ru_utime:.6f}"),
    ]


def _info_modules(engine: Engine) -> Fields:
    return []


def _info_cluster(engine: Engine) -> Fields:
    return [("cluster_enabled", 0)]


def _info_keyspace(engine: Engine) -> Fields:
    return [(f"db{i}", f"keys={len(db)},expires=0,avg_ttl=0,subexpiry=0")
            for i, db in enumerate(engine.dbs) if db]


INFO_SECTIONS: dict[str, tuple[str, Callable[[Engine], Fields]]] = {
    "server": ("Server", _info_server),
    "clients": ("Clients", _info_clients),
    "memory": ("Memory", _info_memory),
    "persistence": ("Persistence", _info_persistence),
    "stats": ("Stats", _info_stats),
    "replication": ("Replication", _info_replication),
    "cpu": ("CPU", _info_cpu),
    "modules": ("Modules", _info_modules),
    "cluster": ("Cluster", _info_cluster),
    "keyspace": ("Keyspace", _info_keyspace),
}
DEFAULT_SECTIONS = tuple(INFO_SECTIONS)


def info_text(engine: Engine, sections: Iterable[str] = ()) -> str:
    """INFO's text: the named sections (default / all / everything: every one), in Redis's
    order, "# Title" then "field:value" lines, a blank line between sections, CRLF ends."""
    wanted: set[str] = set()
    for name in (s.lower() for s in sections):
        if name in ("default", "all", "everything"):
            wanted.update(DEFAULT_SECTIONS)
        elif name in INFO_SECTIONS:
            wanted.add(name)
    if not sections:
        wanted.update(DEFAULT_SECTIONS)
    parts = []
    registered = engine.info_sections  # sections their owners serve (engine.on_... hooks)
    for name, (title, builtin) in INFO_SECTIONS.items():
        if name in wanted:
            section = registered.get(name)
            fields = section() if section is not None else builtin(engine)
            lines = [f"# {title}\r\n"] + [f"{k}:{v}\r\n" for k, v in fields]
            parts.append("".join(lines))
    return "\r\n".join(parts)


@command("info", -1, "loading stale", keys=NO_KEYS, group="server", since="1.0.0",
         summary="Returns information and statistics about the server.", syntax="[section...]")
def info(ctx: Ctx, argv: Argv) -> Verbatim:
    return Verbatim(info_text(ctx.engine, [a.decode("utf-8", "replace") for a in argv[1:]]))


# --- COMMAND -----------------------------------------------------------------------------------

# COMMAND INFO's flags, in Redis's order (Flag's own); sentinel is never reported.
REPLY_FLAGS = tuple(flag for flag in Flag if flag is not Flag.SENTINEL)
ACL_ORDER = ("keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
             "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
             "dangerous", "connection", "transaction", "scripting")
GROUP_CATEGORY = {"generic": "keyspace", "stream": "stream", "connection": "connection",
                  "transactions": "transaction", "pubsub": "pubsub"}
KEYSPACE_SERVER_COMMANDS = frozenset({"dbsize", "flushdb", "flushall"})
DANGEROUS = frozenset({"keys", "flushdb", "flushall", "info", "debug", "shutdown"})


def _stream_keys(argv: Argv | list[bytes]) -> list[int]:
    """XREAD/XREADGROUP: the keys are the first half of what follows STREAMS."""
    for i in range(1, len(argv)):
        if is_word(argv[i], b"streams"):
            rest = len(argv) - i - 1
            return list(range(i + 1, i + 1 + rest // 2))
    return []


# Commands whose keys no (first, last, step) range describes: how to find them.
MOVABLE_KEYS: dict[str, Callable[[Argv | list[bytes]], list[int]]] = {
    "xread": _stream_keys, "xreadgroup": _stream_keys,
}


def visible_commands() -> list[CommandSpec]:
    """Every command a client may run (effect-only ones are never listed)."""
    return [spec for spec in COMMANDS.values() if not spec.internal]


def find_command(name: bytes) -> CommandSpec | None:
    """By name, case-insensitively; "container|sub" names a subcommand."""
    parent, _, sub = name.lower().partition(b"|")
    spec = COMMANDS.get(parent)
    if spec is None or spec.internal:
        return None
    if sub:
        return spec.subcommands.get(sub)
    return spec


def _flags(spec: CommandSpec) -> RespSet:
    flags = set(spec.flags)
    if spec.name in MOVABLE_KEYS:
        flags.add(Flag.MOVABLEKEYS)
    return RespSet([flag.value for flag in REPLY_FLAGS if flag in flags])


def acl_categories(spec: CommandSpec) -> list[str]:
    """Redis's implicit categories from the flags, plus the group's (containers: none)."""
    cats: set[str] = set()
    flags, top = spec.flags, spec.name.split("|", 1)[0]
    if Flag.WRITE in flags:
        cats.add("write")
    if Flag.READONLY in flags:
        cats.add("read")
    if Flag.ADMIN in flags:
        cats.update(("admin", "dangerous"))
    if Flag.BLOCKING in flags:
        cats.add("blocking")
    cats.add("fast" if Flag.FAST in flags else "slow")
    if not spec.subcommands and spec.group in GROUP_CATEGORY:
        cats.add(GROUP_CATEGORY[spec.group])
    if spec.name in KEYSPACE_SERVER_COMMANDS:
        cats.add("keyspace")
    if top in DANGEROUS:
        cats.add("dangerous")
    if top == "command":
        cats.add("connection")
    return ["@" + c for c in ACL_ORDER if c in cats]


def _key_specs(spec: CommandSpec) -> RespSet:
    """Key specs from the table's key positions (Redis's own are finer-grained)."""
    if spec.name in ("xread", "xreadgroup"):
        flags = ["RW", "access"] if spec.is_write else ["RO", "access"]
        return RespSet([RespMap([
            (b"flags", RespSet(flags)),
            (b"begin_search", RespMap([(b"type", b"keyword"), (b"spec", RespMap(
                [(b"keyword", b"STREAMS"), (b"startfrom", 1)]))])),
            (b"find_keys", RespMap([(b"type", b"range"), (b"spec", RespMap(
                [(b"lastkey", -1), (b"keystep", 1), (b"limit", 2)]))])),
        ])])
    if spec.first_key <= 0:
        return RespSet([])
    flags = ["RW", "update"] if spec.is_write else ["RO", "access"]
    last = spec.last_key - spec.first_key if spec.last_key >= 0 else spec.last_key
    return RespSet([RespMap([
        (b"flags", RespSet(flags)),
        (b"begin_search", RespMap([(b"type", b"index"),
                                   (b"spec", RespMap([(b"index", spec.first_key)]))])),
        (b"find_keys", RespMap([(b"type", b"range"), (b"spec", RespMap(
            [(b"lastkey", last), (b"keystep", spec.key_step), (b"limit", 0)]))])),
    ])])


def command_info(spec: CommandSpec) -> list[Any]:
    """A COMMAND INFO entry, Redis 7's ten fields."""
    subs: Any = [command_info(s) for s in spec.subcommands.values()] if spec.subcommands \
        else RespSet([])
    return [spec.name.encode(), spec.arity, _flags(spec), spec.first_key, spec.last_key,
            spec.key_step, RespSet(acl_categories(spec)), RespSet([]), _key_specs(spec), subs]


def command_docs(spec: CommandSpec) -> RespMap:
    """A COMMAND DOCS entry: summary, since, group, arguments, subcommands (bulk strings,
    argument flags as simple strings: redis-cli's help reader asserts those types)."""
    items: list[tuple[Any, Any]] = [(b"summary", spec.summary.encode()),
                                    (b"since", spec.since.encode()),
                                    (b"group", spec.group.encode())]
    if spec.args:
        keys = iter(range(len(spec.args)))  # each top-level key argument: its key spec
        items.append((b"arguments", [_arg_docs(a, keys) for a in spec.args]))
    if spec.subcommands:
        items.append((b"subcommands", RespMap([(s.name.encode(), command_docs(s))
                                                for s in spec.subcommands.values()])))
    return RespMap(items)


def _arg_docs(arg: Arg, key_specs: Iterator[int]) -> RespMap:
    items: list[tuple[Any, Any]] = [(b"name", arg.name.encode()), (b"type", arg.type.encode())]
    if arg.type not in ("pure-token", "oneof", "block"):
        items.append((b"display_text", arg.name.encode()))
    if arg.type == "key":
        items.append((b"key_spec_index", next(key_specs, 0)))
    if arg.token:
        items.append((b"token", arg.token.encode()))
    flags = [f for f, on in (("optional", arg.optional), ("multiple", arg.multiple)) if on]
    if flags:
        items.append((b"flags", RespSet(flags)))
    if arg.arguments:
        items.append((b"arguments", [_arg_docs(a, key_specs) for a in arg.arguments]))
    return RespMap(items)


def command_all(ctx: Ctx, argv: Argv) -> list[Any]:
    return [command_info(spec) for spec in visible_commands()]


COMMAND = container("command", "Returns detailed information about all commands.",
                    group="server", since="2.8.13", handler=command_all, flags="loading stale")


@subcommand(COMMAND, "count", 2, "loading stale", keys=NO_KEYS, since="2.8.13",
            summary="Returns a count of commands.")
def command_count(ctx: Ctx, argv: Argv) -> int:
    return len(visible_commands())


@subcommand(COMMAND, "info", -2, "loading stale", keys=NO_KEYS, since="2.8.13",
            summary="Returns information about one, multiple or all commands.",
            syntax="[command-name...]")
def command_info_cmd(ctx: Ctx, argv: Argv) -> list[Any]:
    if len(argv) == 2:
        return command_all(ctx, argv)
    out: list[Any] = []
    for name in argv[2:]:
        spec = find_command(name)
        out.append(command_info(spec) if spec is not None else None)
    return out


@subcommand(COMMAND, "docs", -2, "loading stale", keys=NO_KEYS, since="7.0.0",
            summary="Returns documentary information about one, multiple or all commands.",
            syntax="[command-name...]")
def command_docs_cmd(ctx: Ctx, argv: Argv) -> RespMap:
    if len(argv) == 2:
        specs = visible_commands()
    else:
        specs = [s for s in map(find_command, argv[2:]) if s is not None]
    return RespMap([(spec.name.encode(), command_docs(spec)) for spec in specs])


def _all_names(specs: Iterable[CommandSpec]) -> Iterable[CommandSpec]:
    for spec in specs:
        yield spec
        yield from _all_names(spec.subcommands.values())


def _in_category(category: str) -> Callable[[CommandSpec], bool]:
    return lambda spec: category in acl_categories(spec)


def _matching(pattern: bytes) -> Callable[[CommandSpec], bool]:
    return lambda spec: stringmatchlen(pattern, spec.name.encode(), nocase=True)


@subcommand(COMMAND, "list", -2, "loading stale", keys=NO_KEYS, since="7.0.0",
            summary="Returns a list of command names.",
            syntax="[filterby: FILTERBY <MODULE module-name | ACLCAT category "
                   "| PATTERN pattern:pattern>]")
def command_list(ctx: Ctx, argv: Argv) -> list[bytes]:
    keep: Callable[[CommandSpec], bool] = lambda spec: True  # noqa: E731
    i = 2
    while i < len(argv):
        if is_word(argv[i], b"filterby") and len(argv) - 1 - i == 2:
            kind, arg = argv[i + 1], argv[i + 2]
            if is_word(kind, b"module"):
                keep = lambda spec: False  # noqa: E731 - no modules
            elif is_word(kind, b"aclcat"):
                keep = _in_category("@" + arg.decode("utf-8", "replace").lower())
            elif is_word(kind, b"pattern"):
                keep = _matching(arg)
            else:
                raise ReplyError(SYNTAX)
            i += 3
        else:
            raise ReplyError(SYNTAX)
    return [spec.name.encode() for spec in _all_names(visible_commands()) if keep(spec)]


def command_keys(spec: CommandSpec, argv: Argv | list[bytes]) -> list[int]:
    """Positions of the keys in argv (COMMAND GETKEYS), from the table's key range."""
    finder = MOVABLE_KEYS.get(spec.name)
    if finder is not None:
        return finder(argv)
    if spec.first_key <= 0:
        return []
    last = spec.last_key if spec.last_key >= 0 else len(argv) + spec.last_key
    return [i for i in range(spec.first_key, last + 1, max(spec.key_step, 1)) if i < len(argv)]


@subcommand(COMMAND, "getkeys", -4, "loading stale", keys=NO_KEYS, since="2.8.13",
            summary="Extracts the key names from an arbitrary command.", syntax="command [arg...]")
def command_getkeys(ctx: Ctx, argv: Argv) -> list[bytes]:
    target = argv[2:]
    spec = COMMANDS.get(target[0].lower())
    if spec is not None and spec.internal:
        spec = None
    if spec is not None and spec.subcommands and len(target) > 1:
        spec = spec.subcommands.get(target[1].lower())
    if spec is None:
        raise ReplyError("ERR Invalid command specified")
    if spec.first_key <= 0 and spec.name not in MOVABLE_KEYS:
        raise ReplyError("ERR The command has no key arguments")
    n = len(target)
    if (spec.arity > 0 and spec.arity != n) or n < -spec.arity:
        raise ReplyError("ERR Invalid number of arguments specified for command")
    positions = command_keys(spec, target)
    if not positions:
        raise ReplyError("ERR Invalid arguments specified for command")
    return [target[i] for i in positions]


help_subcommand(COMMAND, [
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
])


# --- CLIENT ------------------------------------------------------------------------------------

CLIENT = container("client", "A container for client connection commands.", group="connection",
                   since="2.4.0")
CLIENT_TYPES = {b"normal": "normal", b"slave": "replica", b"replica": "replica",
                b"pubsub": "pubsub", b"master": "master"}


def _client_type(arg: bytes) -> str:
    kind = CLIENT_TYPES.get(arg.lower())
    if kind is None:
        raise ReplyError(f"ERR Unknown client type '{printable(arg)}'")
    return kind


def _kill(ctx: Ctx, client: Any) -> None:
    """Close `client`: the caller itself after its reply is sent (as Redis does); another one
    at once, dropping its unsent output, once this command has released the engine lock."""
    client.closing = True  # it runs no further command
    if client is not ctx.session.client:
        ctx.engine.server.call_soon(client.abort)


@subcommand(CLIENT, "id", 2, "noscript loading stale", keys=NO_KEYS, since="5.0.0",
            summary="Returns the unique client ID of the connection.")
def client_id(ctx: Ctx, argv: Argv) -> int:
    client = ctx.session.client
    return client.id if client is not None else 0


@subcommand(CLIENT, "getname", 2, "noscript loading stale", keys=NO_KEYS, since="2.6.9",
            summary="Returns the name of the connection.")
def client_getname(ctx: Ctx, argv: Argv) -> bytes | None:
    return ctx.session.name or None


@subcommand(CLIENT, "setname", 3, "noscript loading stale", keys=NO_KEYS, since="2.6.9",
            summary="Sets the connection name.", syntax="connection-name")
def client_setname(ctx: Ctx, argv: Argv) -> str:
    if not valid_client_name(argv[2]):
        raise ReplyError(BAD_NAME)
    ctx.session.name = argv[2]
    return "OK"


@subcommand(CLIENT, "setinfo", 4, "noscript loading stale", keys=NO_KEYS, since="7.2.0",
            summary="Sets information specific to the client or connection.",
            syntax="<attr: LIB-NAME libname | LIB-VER libver>")
def client_setinfo(ctx: Ctx, argv: Argv) -> str:
    attr = argv[2].lower()
    if attr not in (b"lib-name", b"lib-ver"):
        raise ReplyError(f"ERR Unrecognized option '{printable(argv[2])}'")
    if not valid_client_name(argv[3]):
        raise ReplyError(f"ERR {printable(argv[2])} cannot contain spaces, newlines or special "
                         "characters.")
    client = ctx.session.client
    if client is not None:
        setattr(client, "lib_name" if attr == b"lib-name" else "lib_ver", argv[3])
    return "OK"


@subcommand(CLIENT, "info", 2, "noscript loading stale", keys=NO_KEYS, since="6.2.0",
            summary="Returns information about the connection.")
def client_info(ctx: Ctx, argv: Argv) -> Verbatim:
    client = ctx.session.client
    return Verbatim(client.info_line() + "\n" if client is not None else "")


@subcommand(CLIENT, "list", -2, ADMIN, keys=NO_KEYS, since="2.4.0",
            summary="Lists open connections.",
            syntax="[client-type: TYPE <NORMAL | MASTER | REPLICA | PUBSUB>] "
                   "[ID client-id:integer...]")
def client_list(ctx: Ctx, argv: Argv) -> Verbatim:
    clients = _clients(ctx.engine)
    if len(argv) == 4 and is_word(argv[2], b"type"):
        if _client_type(argv[3]) != "normal":
            clients = []
    elif len(argv) > 3 and is_word(argv[2], b"id"):
        by_id = {c.id: c for c in clients}
        ids = [parse_int(arg, "Invalid client ID") for arg in argv[3:]]
        clients = [by_id[i] for i in ids if i in by_id]
    elif len(argv) != 2:
        raise ReplyError(SYNTAX)
    return Verbatim("".join(c.info_line() + "\n" for c in clients))


@subcommand(CLIENT, "kill", -3, ADMIN, keys=NO_KEYS, since="2.4.0",
            summary="Terminates open connections.",
            syntax="<filter: old-format | <new-format: [ID client-id:integer] "
                   "| [client-type: TYPE <NORMAL | MASTER | SLAVE | REPLICA | PUBSUB>] "
                   "| [USER username] | [ADDR addr] | [LADDR laddr] | [SKIPME <YES | NO>] "
                   "| [MAXAGE maxage:integer]>...>")
def client_kill(ctx: Ctx, argv: Argv) -> Any:
    clients = _clients(ctx.engine)
    if len(argv) == 3:  # the old form: CLIENT KILL addr:port
        for client in clients:
            if client.addr.encode() == argv[2]:
                _kill(ctx, client)
                return "OK"
        raise ReplyError("ERR No such client")
    want_id: int | None = None
    want_type: str | None = None
    addr = laddr = None
    skipme = True
    max_age = 0
    i = 2
    while i < len(argv):
        opt, more = argv[i], len(argv) > i + 1
        value = argv[i + 1] if more else b""
        if is_word(opt, b"id") and more:
            want_id = parse_int(value, "client-id should be greater than 0")
            if want_id < 1:
                raise ReplyError("ERR client-id should be greater than 0")
        elif is_word(opt, b"type") and more:
            want_type = _client_type(value)
        elif is_word(opt, b"addr") and more:
            addr = value
        elif is_word(opt, b"laddr") and more:
            laddr = value
        elif is_word(opt, b"user") and more:
            if value != b"default":
                raise ReplyError(f"ERR No such user '{printable(value)}'")
        elif is_word(opt, b"skipme") and more:
            if is_word(value, b"yes"):
                skipme = True
            elif is_word(value, b"no"):
                skipme = False
            else:
                raise ReplyError(SYNTAX)
        elif is_word(opt, b"maxage") and more:
            max_age = parse_int(value, "maxage is not an integer or out of range")
        else:
            raise ReplyError(SYNTAX)
        i += 2
    me = ctx.session.client
    now = time.monotonic()
    killed = 0
    for client in clients:
        if (want_id is not None and client.id != want_id) \
                or (want_type is not None and want_type != "normal") \
                or (addr is not None and client.addr.encode() != addr) \
                or (laddr is not None and client.laddr.encode() != laddr) \
                or (skipme and client is me) \
                or (max_age > 0 and now - client.created <= max_age):
            continue
        _kill(ctx, client)
        killed += 1
    return killed


def _on_off(argv: Argv) -> str:
    if not (is_word(argv[2], b"on") or is_word(argv[2], b"off")):
        raise ReplyError(SYNTAX)
    return "OK"


@subcommand(CLIENT, "no-evict", 3, ADMIN, keys=NO_KEYS, since="7.0.0",
            summary="Sets the client eviction mode of the connection.",
            syntax="<enabled: ON | OFF>")
def client_no_evict(ctx: Ctx, argv: Argv) -> str:
    return _on_off(argv)  # nothing is ever evicted


@subcommand(CLIENT, "no-touch", 3, "noscript loading stale", keys=NO_KEYS, since="7.2.0",
            summary="Controls whether commands sent by the client affect the LRU/LFU of "
                    "accessed keys.", syntax="<enabled: ON | OFF>")
def client_no_touch(ctx: Ctx, argv: Argv) -> str:
    return _on_off(argv)  # no LRU/LFU is kept


help_subcommand(CLIENT, [
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "    * ID <client-id> [<client-id> ...]",
    "      Return clients of specified IDs only.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
])
