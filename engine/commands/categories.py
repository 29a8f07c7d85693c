"""ACL categories of every command in the table: what Redis's command JSON files declare, by name.

Owns `DECLARED` (each command's and subcommand's own categories, beyond those its flags imply),
`CATEGORIES` (the category names in ACL CAT's order, which is also the order COMMAND INFO lists a
command's categories in), `categories_of` (a command's full categories, as COMMAND INFO replies
them) and `commands_in` (ACL CAT <category>). Redis derives the rest from the flags, as here:
write -> @write, readonly -> @read (not for a @scripting command), admin -> @admin @dangerous,
pubsub -> @pubsub, fast -> @fast (else @slow), blocking -> @blocking.

The data follows Redis 8.x, checked against redis-server 7.0.15's COMMAND INFO for the commands
it has (tests/differential/test_command_acl_metadata.py; where 8.x differs it says why) and
against Redis's src/commands/*.json for the later ones. A command added to the table without an
entry here fails tests/engine/commands/test_key_specs.py. Must not touch: the table's
declarations (engine.exec.table), engine state.
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.exec.table import COMMANDS, CommandSpec, Flag

# ACL CAT's categories, in its order.
CATEGORIES: Final = ("keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
                     "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
                     "blocking", "dangerous", "connection", "transaction", "scripting")

# Each command's declared categories (space-separated), by full name; "" for none. DEBUG here is
# a container (its subcommands carry the admin flags): it declares what Redis's DEBUG gets from
# its flags, so COMMAND INFO DEBUG is Redis's.
DECLARED: Final[dict[str, str]] = {
    "acl": "", "acl|cat": "", "acl|deluser": "", "acl|dryrun": "", "acl|genpass": "",
    "acl|getuser": "", "acl|help": "", "acl|list": "", "acl|load": "", "acl|log": "",
    "acl|save": "", "acl|setuser": "", "acl|users": "", "acl|whoami": "",
    "append": "string", "auth": "connection", "bgrewriteaof": "", "bgsave": "", "blmove": "list",
    "blmpop": "list", "blpop": "list", "brpop": "list", "brpoplpush": "list",
    "bzmpop": "sortedset", "bzpopmax": "sortedset", "bzpopmin": "sortedset", "client": "",
    "client|getname": "connection", "client|getredir": "connection", "client|help": "connection",
    "client|id": "connection", "client|info": "connection", "client|kill": "connection",
    "client|list": "connection", "client|no-evict": "connection", "client|no-touch": "connection",
    "client|reply": "connection", "client|setinfo": "connection", "client|setname": "connection",
    "client|unblock": "connection", "command": "connection", "command|count": "connection",
    "command|docs": "connection", "command|getkeys": "connection",
    "command|getkeysandflags": "connection", "command|help": "connection",
    "command|info": "connection", "command|list": "connection", "config": "", "config|get": "",
    "config|help": "", "config|resetstat": "", "config|rewrite": "", "config|set": "",
    "copy": "keyspace", "dbsize": "keyspace", "debug": "admin dangerous", "debug|digest": "",
    "debug|help": "", "decr": "string", "decrby": "string", "del": "keyspace", "delex": "string",
    "digest": "string", "discard": "transaction", "dump": "keyspace", "echo": "connection",
    "eval": "scripting", "eval_ro": "scripting", "evalsha": "scripting",
    "evalsha_ro": "scripting", "exec": "transaction", "exists": "keyspace", "expire": "keyspace",
    "expireat": "keyspace", "expiretime": "keyspace", "fcall": "scripting",
    "fcall_ro": "scripting", "flushall": "dangerous keyspace", "flushdb": "dangerous keyspace",
    "function": "", "function|delete": "scripting", "function|dump": "scripting",
    "function|flush": "scripting", "function|help": "scripting", "function|kill": "scripting",
    "function|list": "scripting", "function|load": "scripting", "function|restore": "scripting",
    "function|stats": "scripting", "get": "string", "getdel": "string", "getex": "string",
    "getrange": "string", "getset": "string", "hdel": "hash", "hello": "connection",
    "hexists": "hash", "hexpire": "hash", "hexpireat": "hash", "hexpiretime": "hash",
    "hget": "hash", "hgetall": "hash", "hgetdel": "hash", "hgetex": "hash", "hincrby": "hash",
    "hincrbyfloat": "hash", "hkeys": "hash", "hlen": "hash", "hmget": "hash", "hmset": "hash",
    "hpersist": "hash", "hpexpire": "hash", "hpexpireat": "hash", "hpexpiretime": "hash",
    "hpttl": "hash", "hrandfield": "hash", "hscan": "hash", "hset": "hash", "hsetex": "hash",
    "hsetnx": "hash", "hstrlen": "hash", "httl": "hash", "hvals": "hash", "incr": "string",
    "incrby": "string", "incrbyfloat": "string", "increx": "string", "info": "dangerous",
    "keys": "dangerous keyspace", "lastsave": "admin dangerous", "latency": "",
    "latency|doctor": "", "latency|graph": "", "latency|help": "", "latency|histogram": "",
    "latency|history": "", "latency|latest": "", "latency|reset": "", "lcs": "string",
    "lindex": "list", "linsert": "list", "llen": "list", "lmove": "list", "lmpop": "list",
    "lpop": "list", "lpos": "list", "lpush": "list", "lpushx": "list", "lrange": "list",
    "lrem": "list", "lset": "list", "ltrim": "list", "memory": "", "memory|help": "",
    "memory|usage": "", "mget": "string", "mset": "string", "msetex": "string",
    "msetnx": "string", "multi": "transaction", "object": "", "object|encoding": "keyspace",
    "object|freq": "keyspace", "object|help": "keyspace", "object|idletime": "keyspace",
    "object|refcount": "keyspace", "persist": "keyspace", "pexpire": "keyspace",
    "pexpireat": "keyspace", "pexpiretime": "keyspace", "ping": "connection", "psetex": "string",
    "psubscribe": "", "psync": "", "pttl": "keyspace", "publish": "", "pubsub": "",
    "pubsub|channels": "", "pubsub|help": "", "pubsub|numpat": "", "pubsub|numsub": "",
    "pubsub|shardchannels": "", "pubsub|shardnumsub": "", "punsubscribe": "",
    "quit": "connection", "rename": "keyspace", "renamenx": "keyspace", "replconf": "",
    "replicaof": "", "reset": "connection", "restore": "dangerous keyspace",
    "role": "admin dangerous", "rpop": "list", "rpoplpush": "list", "rpush": "list",
    "rpushx": "list", "sadd": "set", "save": "", "scan": "keyspace", "scard": "set", "script": "",
    "script|exists": "scripting", "script|flush": "scripting", "script|help": "scripting",
    "script|kill": "scripting", "script|load": "scripting", "sdiff": "set", "sdiffstore": "set",
    "select": "connection", "set": "string", "setex": "string", "setnx": "string",
    "setrange": "string", "shutdown": "", "sinter": "set", "sintercard": "set",
    "sinterstore": "set", "sismember": "set", "slaveof": "", "slowlog": "", "slowlog|get": "",
    "slowlog|help": "", "slowlog|len": "", "slowlog|reset": "", "smembers": "set",
    "smismember": "set", "smove": "set", "spop": "set", "spublish": "", "srandmember": "set",
    "srem": "set", "sscan": "set", "ssubscribe": "", "strlen": "string", "subscribe": "",
    "substr": "string", "sunion": "set", "sunionstore": "set", "sunsubscribe": "", "sync": "",
    "time": "", "touch": "keyspace", "ttl": "keyspace", "type": "keyspace", "unlink": "keyspace",
    "unsubscribe": "", "unwatch": "transaction", "wait": "connection", "waitaof": "connection",
    "watch": "transaction", "xack": "stream", "xackdel": "stream", "xadd": "stream",
    "xautoclaim": "stream", "xcfgset": "stream", "xclaim": "stream", "xdel": "stream",
    "xdelex": "stream", "xgroup": "", "xgroup|create": "stream",
    "xgroup|createconsumer": "stream", "xgroup|delconsumer": "stream", "xgroup|destroy": "stream",
    "xgroup|help": "stream", "xgroup|setid": "stream", "xidmprecord": "stream", "xinfo": "",
    "xinfo|consumers": "stream", "xinfo|groups": "stream", "xinfo|help": "stream",
    "xinfo|stream": "stream", "xlen": "stream", "xnack": "stream", "xpending": "stream",
    "xrange": "stream", "xread": "stream", "xreadgroup": "stream", "xrevrange": "stream",
    "xsetid": "stream", "xtrim": "stream", "zadd": "sortedset", "zcard": "sortedset",
    "zcount": "sortedset", "zdiff": "sortedset", "zdiffstore": "sortedset",
    "zincrby": "sortedset", "zinter": "sortedset", "zintercard": "sortedset",
    "zinterstore": "sortedset", "zlexcount": "sortedset", "zmpop": "sortedset",
    "zmscore": "sortedset", "zpopmax": "sortedset", "zpopmin": "sortedset",
    "zrandmember": "sortedset", "zrange": "sortedset", "zrangebylex": "sortedset",
    "zrangebyscore": "sortedset", "zrangestore": "sortedset", "zrank": "sortedset",
    "zrem": "sortedset", "zremrangebylex": "sortedset", "zremrangebyrank": "sortedset",
    "zremrangebyscore": "sortedset", "zrevrange": "sortedset", "zrevrangebylex": "sortedset",
    "zrevrangebyscore": "sortedset", "zrevrank": "sortedset", "zscan": "sortedset",
    "zscore": "sortedset", "zunion": "sortedset", "zunionstore": "sortedset",
}

_FLAG_CATEGORIES: Final = ((Flag.WRITE, ("write",)), (Flag.ADMIN, ("admin", "dangerous")),
                           (Flag.PUBSUB, ("pubsub",)), (Flag.FAST, ("fast",)),
                           (Flag.BLOCKING, ("blocking",)))


def declared_of(name: str) -> frozenset[str]:
    """The categories command `name` declares itself (KeyError for a command with no entry)."""
    return frozenset(DECLARED[name].split())


def category_set(spec: CommandSpec) -> frozenset[str]:
    """Every category of `spec` (without '@'): its declared ones and its flags' (Redis's
    setImplicitACLCategories)."""
    cats = set(DECLARED.get(spec.name, "").split())
    for flag, implied in _FLAG_CATEGORIES:
        if flag in spec.flags:
            cats.update(implied)
    if Flag.READONLY in spec.flags and "scripting" not in cats:
        cats.add("read")
    if "fast" not in cats:
        cats.add("slow")
    return frozenset(cats)


def categories_of(spec: CommandSpec) -> list[str]:
    """`spec`'s categories as COMMAND INFO lists them: '@'-prefixed, in ACL CAT's order."""
    cats = category_set(spec)
    return ["@" + cat for cat in CATEGORIES if cat in cats]


def commands_in(category: str) -> list[CommandSpec]:
    """The commands and subcommands in `category` ("stream" or "@stream", any case), for ACL CAT:
    each container before its subcommands, in the table's order. ValueError for a category that
    is not one of CATEGORIES."""
    name = category.lower().removeprefix("@")
    if name not in CATEGORIES:
        raise ValueError(f"unknown ACL category {category!r}")
    found = []
    for spec in COMMANDS.values():
        if spec.internal:
            continue
        for each in (spec, *spec.subcommands.values()):
            if name in category_set(each):
                found.append(each)
    return found
