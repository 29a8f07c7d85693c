"""INFO: the server's sections, in Redis's order and field names (src/server.c).

Owns the built-in sections; a service that owns a section registers it on the engine instead
(`Engine.add_info_section`: the data directory's persistence section). Must not touch: stream
state, sockets (it reads the server's counters and `Client` objects only).

A field is there when it describes something streamkeep has, with Redis's meaning; fields about
mechanisms it has not (jemalloc's arenas, active defragmentation, fork copy-on-write, client-side
caching, lazy freeing, cluster links, modules) are left out rather than shown as zeros.
Memory is the process's: `used_memory` is its resident set (Python allocates through pymalloc
and the C allocator, neither of which reports its own total cheaply), the overhead is what the
engine knows it holds besides the data (its size at start, client buffers, the AOF buffer, the
Lua heap and the script cache), the dataset the rest. The figures for the Lua heap, the script
cache and each connection are measured (the Lua host's allocator; Python's sizes of the objects,
shallow, `client_memory`), not Redis's allocator's sizes of its own structures.

On an embedded engine (`engine.server` None) it counts no network connections.
"""

from __future__ import annotations

import functools
import os
import resource
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.commands.client import server_clients
from streamkeep.engine.commands.connection import (
    last_save_time,
)
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.interfaces import persistence_fields
from streamkeep.engine.exec.keys import key_count, subexpiry_count
from streamkeep.engine.exec.latency import percentiles_field
from streamkeep.engine.exec.settings import (
    REDIS_VERSION,
)
from streamkeep.engine.exec.stats import safe_info_name
from streamkeep.engine.exec.table import (
    Argv,
    command,
)
from streamkeep.engine.model.heap import physical_memory, resident_set
from streamkeep.engine.model.residency import table_cold_counts
from streamkeep.engine.model.value_types import TYPES
from streamkeep.engine.wire.reply import Verbatim

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState

RUN_ID = os.urandom(20).hex()  # this process's run_id (INFO server), as Redis draws one at start
HZ = 10  # the cron's rate: the server's loop and the embedded engine's timer, ten times a second


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


def resident_bytes() -> int:
    """The process's resident set size now (Linux /proc), else its peak."""
    return resident_set() or _peak_rss()


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _waiters(engine: EngineState) -> list[Any]:
    """Blocked commands (network clients and embedded threads), each once."""
    seen: dict[int, Any] = {}
    for queue in engine.waiters.by_key.values():
        for waiter in queue:
            seen.setdefault(id(waiter), waiter)
    return list(seen.values())


def _info_server(engine: EngineState) -> Fields:
    import platform  # (INFO server's, not every engine start's)

    server = engine.server
    uname = platform.uname()
    uptime = max(int(time.time() - engine.started_ms / 1000), 0)
    # (the kernel report imports every kernel: INFO server's, not every engine start's)
    from streamkeep.engine.exec import build_report

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
        ("streamkeep_native", "yes" if build_report.native() else "no"),
        ("streamkeep_command_path", "compiled" if build_report.command_path_layers() else "pure"),
    ]
    layers = build_report.command_path_layers()
    if layers:  # the compiled modules that run, per layer (Redis's `keys=1,expires=0` form)
        fields.append(("streamkeep_command_path_modules",
                       ",".join(f"{layer}={n}" for layer, n in layers.items())))
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
        ("hz", HZ),
        ("configured_hz", HZ),
        ("executable", sys.executable),
        ("config_file", engine.config_file or ""),
        ("io_threads_active", 0),
    ]
    return fields


def _info_clients(engine: EngineState) -> Fields:
    """Redis counts its replicas' links out of connected_clients and, on a replica, the link
    to its primary in (once synced)."""
    clients = server_clients(engine)
    normal = [c for c in clients if c.link is None]
    replication = engine.replication
    primary_link = replication is not None and replication.primary_link_up()
    waiters = _waiters(engine)
    watchers = {id(s) for sessions in engine.watches.by_key.values() for s in sessions}
    return [
        ("connected_clients", len(normal) + int(primary_link)),
        ("cluster_connections", 0),
        ("maxclients", engine.config["maxclients"]),
        ("client_recent_max_input_buffer",
         max((c.parser.pending_bytes() for c in clients), default=0)),
        ("client_recent_max_output_buffer",
         max((c.transport.get_write_buffer_size() for c in clients
              if c.transport is not None), default=0)),
        ("blocked_clients", len(waiters)),
        ("tracking_clients", 0),
        ("pubsub_clients", sum(1 for c in clients if c.subscriber.total())),
        ("watching_clients", len(watchers)),
        ("clients_in_timeout_table", sum(1 for w in waiters if w.timeout_ms)),
        ("total_watched_keys", len(engine.watches.by_key)),
        ("total_blocking_keys", len(engine.waiters.by_key)),
        # XREADGROUP's keys: Redis unblocks those readers when the key is deleted too
        ("total_blocking_keys_on_nokey",
         sum(1 for queue in engine.waiters.by_key.values()
             if any(w.argv[0].lower() == b"xreadgroup" for w in queue))),
    ]


def client_memory(client: Any) -> int:
    """Bytes one connection holds (Redis's getClientMemoryUsage, its CLIENT LIST tot-mem):
    the unparsed input, the output buffer as allocated (its capacity, not only what is
    queued), the bulks it keeps by reference, the replies held for an fsync, what the socket
    has not taken yet, the commands queued by MULTI (their arguments' bytes and a pointer
    each, as Redis counts them), the dicts of its subscriptions, and the connection's own
    objects (shallow sizes: sys.getsizeof)."""
    out = client.out
    size = (sys.getsizeof(client) + sys.getsizeof(client.session) + sys.getsizeof(out)
            + out.big_size + client.parser.pending_bytes())
    for _lsn, held in client.held:
        size += len(held) + getattr(held, "big_size", 0)
    transport = client.transport
    if transport is not None:
        size += transport.get_write_buffer_size()
    queued = client.session.multi
    if queued:
        size += sum(sum(len(arg) for arg in argv) + 8 * len(argv) for _spec, argv in queued)
    sub = client.subscriber
    if sub.active:
        size += (sys.getsizeof(sub.channels) + sys.getsizeof(sub.patterns)
                 + sys.getsizeof(sub.shard_channels))
    return size


def _client_memory(clients: list[Any]) -> tuple[int, int]:
    """Bytes the connections hold: (normal clients' (Pub/Sub ones included, as in Redis),
    replicas' links'), each `client_memory`."""
    normal = replicas = 0
    for c in clients:
        if c.link is None:
            normal += client_memory(c)
        else:
            replicas += client_memory(c)
    return normal, replicas


def _info_memory(engine: EngineState) -> Fields:
    eviction = engine.eviction
    used, rss, total = eviction.used(), resident_bytes(), physical_memory()
    peak = eviction.peak
    startup = min(engine.startup_memory, used)
    normal, replicas = _client_memory(server_clients(engine))
    journal = engine.journal
    aof_buffer = len(journal.pending) if journal is not None else 0
    lua = _scripts_memory(engine)
    overhead = min(startup + normal + replicas + aof_buffer + lua, used)
    dataset = used - overhead
    net = used - startup if used > startup else 1
    maxmemory = eviction.limit
    return [
        ("used_memory", used),
        ("used_memory_human", bytes_to_human(used)),
        ("used_memory_rss", rss),
        ("used_memory_rss_human", bytes_to_human(rss)),
        ("used_memory_peak", peak),
        ("used_memory_peak_human", bytes_to_human(peak)),
        ("used_memory_peak_perc", f"{used * 100 / peak:.2f}%" if peak else "100.00%"),
        ("used_memory_overhead", overhead),
        ("used_memory_startup", startup),
        ("used_memory_dataset", dataset),
        ("used_memory_dataset_perc", f"{dataset * 100 / net:.2f}%"),
        ("total_system_memory", total),
        ("total_system_memory_human", bytes_to_human(total)),
        *_script_fields(engine),
        ("maxmemory", maxmemory),
        ("maxmemory_human", bytes_to_human(maxmemory)),
        ("maxmemory_policy", engine.config["maxmemory-policy"]),
        ("mem_fragmentation_ratio", f"{rss / used:.2f}" if used else "1.00"),
        ("mem_fragmentation_bytes", rss - used),
        ("mem_not_counted_for_evict", aof_buffer),
        ("mem_replication_backlog", 0),  # the backlog is the AOF's segments, on disk
        ("mem_total_replication_buffers", replicas),
        ("mem_clients_slaves", replicas),
        ("mem_clients_normal", normal),
        ("mem_aof_buffer", aof_buffer),
        ("mem_allocator", "pymalloc"),
        ("lazyfree_pending_objects", 0),  # UNLINK and FLUSHALL ASYNC free at once
        ("lazyfreed_objects", 0),
        *_backlog_fields(engine),
    ]


def _scripts_memory(engine: EngineState) -> int:
    """The Lua heaps, EVAL's and FUNCTION's, and what their caches hold besides."""
    scripting = engine.scripting
    if scripting is None:
        return 0
    size = scripting.memory() + scripting.cache_memory()
    functions = getattr(scripting, "functions", None)
    if functions is not None:
        size += functions.memory() + _functions_memory(functions)
    return size


def _script_fields(engine: EngineState) -> Fields:
    """Redis 8's script fields, measured: EVAL's Lua heap (the Lua host's allocator counts it: nothing
    until a first script, where Redis's Lua state starts at about 32K) and its script cache
    (`Scripting.cache_memory`), the scripts cached; the FUNCTION libraries' own Lua heap
    (nothing until a first library), their count, their functions' and what they hold besides
    the heap (`_functions_memory`)."""
    scripting = engine.scripting
    lua = scripting.memory() if scripting is not None else 0
    cache = scripting.cache_memory() if scripting is not None else 0
    scripts = len(scripting.scripts) if scripting is not None else 0
    functions = getattr(scripting, "functions", None)  # engine.exec.functions, on first use
    if functions is not None:
        n_functions, n_libraries = len(functions.functions), len(functions.libraries)
        vm_functions, functions_cache = functions.memory(), _functions_memory(functions)
    else:
        n_functions = n_libraries = vm_functions = functions_cache = 0
    return [
        ("used_memory_lua", lua),
        ("used_memory_vm_eval", lua),
        ("used_memory_lua_human", bytes_to_human(lua)),
        ("used_memory_scripts_eval", cache),
        ("number_of_cached_scripts", scripts),
        ("number_of_functions", n_functions),
        ("number_of_libraries", n_libraries),
        ("used_memory_vm_functions", vm_functions),
        ("used_memory_vm_total", lua + vm_functions),
        ("used_memory_vm_total_human", bytes_to_human(lua + vm_functions)),
        ("used_memory_functions", functions_cache),
        ("used_memory_scripts", cache + functions_cache),
        ("used_memory_scripts_human", bytes_to_human(cache + functions_cache)),
    ]


def _functions_memory(functions: Any) -> int:
    """What the FUNCTION libraries hold outside their Lua heap (Redis's
    functionsMemoryOverhead: its dicts, each library's name and code, each function's entry),
    as Python sizes it (sys.getsizeof: shallow); 0 with no library."""
    libraries = functions.libraries
    if not libraries:
        return 0
    size = sys.getsizeof(libraries) + sys.getsizeof(functions.functions)
    for library in libraries.values():
        size += (sys.getsizeof(library) + sys.getsizeof(library.name)
                 + sys.getsizeof(library.code) + sys.getsizeof(library.functions))
        for name, function in library.functions.items():
            size += sys.getsizeof(name) + sys.getsizeof(function)
    return size


def _backlog_fields(engine: EngineState) -> Fields:
    """streamkeep's own: the backlog-memory budget and where the stream entries and the
    elements of the values kept as nodes (a long list's) are (the loaded and evicted counts are
    of stream and value nodes both)."""
    residency = engine.residency
    budget = int(engine.config["backlog-memory"])
    entries, cold_nodes, cold_entries, cold_bytes = _entry_counts(engine.dbs)
    return [
        ("backlog_memory", budget),
        ("backlog_memory_human", bytes_to_human(budget)),
        ("backlog_resident_bytes", residency.resident),
        ("backlog_unsaved_bytes", residency.waiting_bytes),
        ("stream_entries", entries),
        ("stream_entries_resident", entries - cold_entries),
        ("stream_entries_cold", cold_entries),
        ("stream_nodes_cold", cold_nodes),
        ("stream_cold_bytes", cold_bytes),
        ("stream_nodes_loaded", residency.loads),
        ("stream_nodes_evicted", residency.evictions),
        *_value_node_fields(engine),
    ]


def _value_node_fields(engine: EngineState) -> Fields:
    """Each type that keeps big values as nodes (engine.model.residency.ValueNodes): its cold
    nodes, their elements and their bytes (`list_nodes_cold`, `list_elements_cold`,
    `list_cold_bytes`); each type with a bucket table whose runs go cold: its cold runs, their
    elements and bytes (`hash_runs_cold`, `hash_elements_cold`, `hash_cold_bytes`; `set_...`)."""
    fields: Fields = []
    for vt in TYPES:
        if vt.nodes is not None:
            nodes, elements, nbytes = vt.nodes.cold_counts(engine.keyspaces[vt.slot])
            fields += [(f"{vt.name}_nodes_cold", nodes), (f"{vt.name}_elements_cold", elements),
                       (f"{vt.name}_cold_bytes", nbytes)]
        table_of = vt.table_of
        if table_of is not None:
            runs, elements, nbytes = table_cold_counts(
                table_of(value) for space in engine.keyspaces[vt.slot] for value in space.values())
            fields += [(f"{vt.name}_runs_cold", runs), (f"{vt.name}_elements_cold", elements),
                       (f"{vt.name}_cold_bytes", nbytes)]
    return fields


def _entry_counts(dbs: list) -> tuple[int, int, int, int]:
    """Entries, cold nodes, cold entries and cold listpack bytes of every stream."""
    entries = cold_nodes = cold_entries = cold_bytes = 0
    for db in dbs:
        for s in db.values():
            entries += s.length
            nodes, cold, nbytes = s.cold_counts()
            cold_nodes += nodes
            cold_entries += cold
            cold_bytes += nbytes
    return entries, cold_nodes, cold_entries, cold_bytes


def _info_persistence(engine: EngineState) -> Fields:
    """An engine without a data directory (one with registers its own section)."""
    return persistence_fields(None, engine.clock(), last_save_time(engine))


def _kbps(stats: Any, name: str) -> str:
    return f"{stats.per_second(name) / 1024:.2f}"


def _info_stats(engine: EngineState) -> Fields:
    """Redis's order. The network figures count clients' bytes (a replica's ACKs among them)
    apart from replication's own stream; the reads and writes are the server's socket calls
    (all on the event loop's thread: none by I/O threads)."""
    server = engine.server
    stats = engine.stats
    replication = engine.replication
    repl_in, repl_out = replication.traffic() if replication is not None else (0, 0)
    return [
        ("total_connections_received", server.connections_received if server else 0),
        ("total_commands_processed", stats.total_calls()),
        ("instantaneous_ops_per_sec", int(stats.per_second("ops"))),
        ("total_net_input_bytes", server.net_input_bytes if server else 0),
        ("total_net_output_bytes", server.net_output_bytes if server else 0),
        ("total_net_repl_input_bytes", repl_in),
        ("total_net_repl_output_bytes", repl_out),
        ("instantaneous_input_kbps", _kbps(stats, "net_input")),
        ("instantaneous_output_kbps", _kbps(stats, "net_output")),
        ("instantaneous_input_repl_kbps", _kbps(stats, "net_repl_input")),
        ("instantaneous_output_repl_kbps", _kbps(stats, "net_repl_output")),
        ("rejected_connections", server.rejected_connections if server else 0),
        *(replication.stats_fields() if replication is not None else
          [("sync_full", 0), ("sync_partial_ok", 0), ("sync_partial_err", 0)]),
        ("expired_keys", stats.expired_keys),
        ("expired_stale_perc", f"{stats.expired_stale_perc:.2f}"),
        ("expired_time_cap_reached_count", stats.expired_time_cap_reached_count),
        ("expire_cycle_cpu_milliseconds", stats.expire_cycle_nanos // 1_000_000),
        ("evicted_keys", stats.evicted_keys),
        ("evicted_clients", 0),
        ("keyspace_hits", stats.keyspace_hits),
        ("keyspace_misses", stats.keyspace_misses),
        ("pubsub_channels", len(engine.pubsub.channels)),
        ("pubsub_patterns", engine.pubsub.numpat()),
        ("pubsubshard_channels", len(engine.pubsub.shard_channels)),
        ("latest_fork_usec", engine.latest_fork_usec),
        ("total_forks", engine.datadir.status().saves if engine.datadir is not None else 0),
        ("slave_expires_tracked_keys", 0),  # a replica is read-only: it sets no TTL itself
        ("unexpected_error_replies", 0),  # a record a replica cannot apply drops the link
        ("total_error_replies", stats.total_error_replies),
        ("dump_payload_sanitizations", stats.dump_payload_sanitizations),
        ("total_reads_processed", server.reads_processed if server else 0),
        ("total_writes_processed", server.writes_processed if server else 0),
        ("io_threaded_reads_processed", 0),
        ("io_threaded_writes_processed", 0),
        ("client_query_buffer_limit_disconnections",
         server.query_buffer_disconnections if server else 0),
        ("client_output_buffer_limit_disconnections",
         server.output_buffer_disconnections if server else 0),
    ]


def _info_replication(engine: EngineState) -> Fields:
    datadir = engine.datadir
    if datadir is not None:
        replid = datadir.repl_id
    else:  # in memory: a history of its own, named once
        replid = engine.memory_repl_id = engine.memory_repl_id or os.urandom(20).hex()
    journal = engine.journal
    return [
        ("role", "master"),
        ("connected_slaves", 0),
        ("master_failover_state", "no-failover"),
        ("master_replid", replid),
        ("master_replid2", "0" * 40),
        ("master_repl_offset", journal.lsn if journal is not None else 0),
        ("second_repl_offset", -1),
        ("repl_backlog_active", 0),  # in memory: no AOF, no backlog
        ("repl_backlog_size", 0),
        ("repl_backlog_first_byte_offset", 0),
        ("repl_backlog_histlen", 0),
    ]


def _info_cpu(engine: EngineState) -> Fields:
    """The process, its children (the snapshot builds), and the thread running this command
    (the server's event loop, where every command runs: Redis's main thread)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    fields = [
        ("used_cpu_sys", f"{me.ru_stime:.6f}"),
        ("used_cpu_user", f"{me.ru_utime:.6f}"),
        ("used_cpu_sys_children", f"{children.ru_stime:.6f}"),
        ("used_cpu_user_children", f"{children.ru_utime:.6f}"),
    ]
    if hasattr(resource, "RUSAGE_THREAD"):  # (Linux)
        thread = resource.getrusage(resource.RUSAGE_THREAD)
        fields += [("used_cpu_sys_main_thread", f"{thread.ru_stime:.6f}"),
                   ("used_cpu_user_main_thread", f"{thread.ru_utime:.6f}")]
    return fields


def _info_modules(engine: EngineState) -> Fields:
    return []


def _info_commandstats(engine: EngineState) -> Fields:
    return engine.stats.commandstats()


def _info_errorstats(engine: EngineState) -> Fields:
    return engine.stats.errorstats()


def _info_latencystats(engine: EngineState) -> Fields:
    """Each command's latency percentiles (latency-tracking-info-percentiles), in µs; nothing
    while latency-tracking is off."""
    stats = engine.stats
    if not stats.tracking:
        return []
    percentiles = engine.config["latency-tracking-info-percentiles"]
    return [(f"latency_percentiles_usec_{safe_info_name(name)}",
             percentiles_field(histogram, percentiles))
            for name, histogram in stats.histograms()]


def _info_cluster(engine: EngineState) -> Fields:
    return [("cluster_enabled", 0 if engine.cluster is None else 1)]


def _info_keyspace(engine: EngineState) -> Fields:
    """Each database with keys. avg_ttl is the active expiry cycle's running estimate
    (engine.runtime.expiry_cycle), as Redis's: 0 while the database has no TTL and until a
    cycle sampled one (a flush's estimate is dropped by the next cycle, where Redis drops it
    at once: TTLs set in between start from it). The line is Redis's four fields and no more,
    cold entries or not: exporters parse it strictly (prometheus redis_exporter 1.45 drops a
    line of more than four, and reports the database as holding no key); INFO memory counts
    the cold entries."""
    avg_ttl = engine.stats.avg_ttl
    counts = [key_count(engine, i) for i in range(len(engine.dbs))]
    return [(f"db{i}", f"keys={count},expires={len(expires)},"
                       f"avg_ttl={avg_ttl.get(i, 0) if expires else 0},"
                       f"subexpiry={subexpiry_count(engine, i)}")
            for i, (expires, count)
            in enumerate(zip(engine.expires, counts, strict=True))
            if count]


INFO_SECTIONS: dict[str, tuple[str, Callable[[EngineState], Fields]]] = {
    "server": ("Server", _info_server),
    "clients": ("Clients", _info_clients),
    "memory": ("Memory", _info_memory),
    "persistence": ("Persistence", _info_persistence),
    "stats": ("Stats", _info_stats),
    "replication": ("Replication", _info_replication),
    "cpu": ("CPU", _info_cpu),
    "modules": ("Modules", _info_modules),
    "commandstats": ("Commandstats", _info_commandstats),
    "errorstats": ("Errorstats", _info_errorstats),
    "latencystats": ("Latencystats", _info_latencystats),
    "cluster": ("Cluster", _info_cluster),
    "keyspace": ("Keyspace", _info_keyspace),
}
# Redis's default sections: all of them but commandstats and latencystats (only in "all",
# "everything" or by name); errorstats is a default one.
DEFAULT_SECTIONS = tuple(name for name in INFO_SECTIONS
                         if name not in ("commandstats", "latencystats"))
ALL_SECTIONS = tuple(INFO_SECTIONS)


def info_text(engine: EngineState, sections: Iterable[str] = ()) -> str:
    """INFO's text: the named sections (default: all but commandstats; all / everything: every
    one), in Redis's order, "# Title" then "field:value" lines, a blank line between sections,
    CRLF ends."""
    wanted: set[str] = set()
    for name in (s.lower() for s in sections):
        if name == "default":
            wanted.update(DEFAULT_SECTIONS)
        elif name in ("all", "everything"):
            wanted.update(ALL_SECTIONS)
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


@command("info", -1, "loading stale", group="server", since="1.0.0",
         acl="dangerous", keys="",
         summary="Returns information and statistics about the server.", syntax="[section...]")
def info(ctx: Ctx, argv: Argv) -> Verbatim:
    return Verbatim(info_text(ctx.engine, [a.decode("utf-8", "replace") for a in argv[1:]]))
