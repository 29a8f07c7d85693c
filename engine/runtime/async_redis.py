"""redis.asyncio's client over streamkeep: `AsyncRedis`, with its pipelines, scripts, scan
iterators and Pub/Sub, whether the engine runs in this process or behind a socket.

Owns the async side of the redis-py contract, written once for every backend: each method is
the synchronous facade's (engine.runtime.redis_api.RedisAPI, its command groups' mixins: the
same argv, client-side checks and reply shaping), run over a *replaying executor*
(engine.runtime.async_steps, compiled). A command the backend answers at
once (an in-process command that needs no wait) is answered inside that one synchronous run:
no thread, no extra task, the speed of `Engine.redis()`. A command that must be awaited (a
blocked read, an `appendfsync always` write waiting for its group commit, any command over a
socket) suspends the run; once its reply is awaited, the method runs again from the start
with the replies it already had given back in order, so argv building and reply shaping are
never written twice. A method's run is a pure function of its arguments and replies (the
RedisAPI's are), which is what makes the re-run exact.

Also owns `AsyncPipeline` (buffered commands, MULTI/EXEC, WATCH's immediate mode),
`AsyncScript` (register_script), `AsyncPubSub` (get_message, listen) over a backend's
subscriber, and the errors as redis-py's: where redis-py is installed, an error reply is also
a `redis.exceptions.ResponseError` (NoScriptError, ExecAbortError...), and a WATCH that failed
a `redis.exceptions.WatchError`, so frameworks that catch redis-py's exceptions work unchanged.

A backend (`AsyncBackend`) runs argv: engine.runtime.async_engine's in this process,
engine.services.async_connection's over a socket. Must not touch: command semantics, reply
shapes (RedisAPI's), engine internals; must not import redis-py at module level (a dev-only
dependency).
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from streamkeep.engine.runtime.async_steps import Raised, Steps, Suspend, Wait
from streamkeep.engine.runtime.redis_api import RedisAPI, Script, check_encodable
from streamkeep.engine.wire.errors import ReplyError, StreamkeepError

__all__ = ["AsyncBackend", "AsyncPipeline", "AsyncPubSub", "AsyncRedis", "AsyncScript",
           "AsyncSession", "Wait", "WatchError", "compatible_error"]


class AsyncSession(Protocol):
    """One client's state (a connection, or an in-process session): WATCH and MULTI live here."""

    def start(self, args: tuple[Any, ...]) -> Any:
        """Run a command: its reply now, or a Wait. An error reply raised as ReplyError."""

    def run_many(self, argvs: Sequence[tuple[Any, ...]]) -> Awaitable[list[Any]]:
        """Commands in order: their replies, a failed one's ReplyError in its place."""

    def close(self) -> None: ...


class AsyncBackend(AsyncSession, Protocol):
    def new_session(self) -> AsyncSession:
        """A session of its own (a pipeline's WATCH, a transaction)."""

    def pubsub_channel(self) -> Any:
        """A subscriber: `run(argv)` (awaitable) and `next_message(timeout)` (awaitable: the
        next push as a list of bytes, or None by the timeout; None timeout: wait)."""

    async def aclose(self) -> None: ...


async def _resume(steps: Steps, fn: Callable[..., Any], args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    """A suspended run: await the command it waits for, then run it again from the start
    with every reply it has had. Its replies are its own while it waits (`steps` is given a
    fresh list: other tasks' runs reuse that one), and are put back for each re-run."""
    replies, wait = steps.suspended()
    while True:
        try:
            reply = await wait.awaitable
        except ReplyError as err:
            reply = Raised(compatible_error(err))
        replies.append(reply)
        steps.reset(replies)
        try:
            return fn(*args, **kwargs)
        except Suspend:
            replies, wait = steps.suspended()


def _run(steps: Steps, fn: Callable[..., Any], args: tuple[Any, ...],
         kwargs: dict[str, Any]) -> Any:
    """Run `fn` over `steps`: its result, or (suspended) an awaitable of it."""
    steps.begin()
    try:
        return _Done(fn(*args, **kwargs))
    except Suspend:
        return _resume(steps, fn, args, kwargs)


class _Done:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


# --- errors as redis-py's ----------------------------------------------------------------------

_COMPAT: dict[str, type[ReplyError]] | None = None


def _compat_classes() -> dict[str, type[ReplyError]]:
    """ReplyError subclasses that are redis-py's exceptions too (by the error's first word),
    made once; empty when redis-py is not installed."""
    global _COMPAT
    if _COMPAT is None:
        _COMPAT = {}
        try:
            from redis import exceptions as rx
        except ImportError:
            return _COMPAT
        for code, base in (("", rx.ResponseError), ("NOSCRIPT", rx.NoScriptError),
                           ("EXECABORT", rx.ExecAbortError), ("READONLY", rx.ReadOnlyError),
                           ("NOPERM", rx.NoPermissionError), ("BUSY", rx.BusyLoadingError)):
            _COMPAT[code] = type(f"Redis{base.__name__}", (ReplyError, base), {})
    return _COMPAT


def compatible_error(err: ReplyError) -> ReplyError:
    """`err` as an exception that is both a ReplyError and, where redis-py is installed, the
    redis-py exception its error line maps to."""
    classes = _compat_classes()
    if not classes or type(err) is not ReplyError:
        return err
    cls = classes.get(err.line.split(" ", 1)[0]) or classes[""]
    return cls(err.line)


def _watch_error_class() -> type[StreamkeepError]:
    try:
        from redis.exceptions import WatchError as RedisWatchError
    except ImportError:
        return _WatchError
    return type("WatchError", (_WatchError, RedisWatchError), {})


class _WatchError(StreamkeepError):
    """A transaction's WATCHed key changed: EXEC ran nothing (redis-py's WatchError)."""


WatchError: type[StreamkeepError] = _WatchError


def watch_error() -> StreamkeepError:
    global WatchError
    if WatchError is _WatchError:
        WatchError = _watch_error_class()
    return WatchError("Watched variable changed.")


# --- the facade ---------------------------------------------------------------------------------

_ITERATORS = {"scan_iter", "hscan_iter", "sscan_iter", "zscan_iter"}
_OWN = {"register_script", "execute", *_ITERATORS}


def _facade_methods() -> dict[str, Callable[..., Any]]:
    """RedisAPI's public methods (functions, or method descriptors where it is compiled), from
    each of its command groups' mixins (its MRO: a class's own definition wins, as in lookup)."""
    found: dict[str, Any] = {}
    for klass in reversed(RedisAPI.__mro__):
        found.update(vars(klass))
    return {name: fn for name, fn in found.items()
            if callable(fn) and not isinstance(fn, (type, staticmethod, classmethod))
            and not name.startswith("_") and name not in _OWN}


def _async_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The coroutine method over RedisAPI's `fn`: its own signature where it can be read (the
    arguments passed straight on: no *args tuple and **kwargs dict made and copied per call,
    a tenth of an awaited XADD), else (*args, **kwargs)."""
    method = _method_with_signature(fn)
    if method is None:
        async def method(self: AsyncRedis, *args: Any, **kwargs: Any) -> Any:
            steps = self._steps
            steps.begin()
            try:
                return fn(self._api, *args, **kwargs)
            except Suspend:
                return await _resume(steps, fn, (self._api, *args), kwargs)

    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


_KINDS = inspect.Parameter


def _method_with_signature(fn: Callable[..., Any]) -> Callable[..., Any] | None:
    """`async def name(self, <fn's parameters>)` running fn as _async_method's generic one
    does, made from fn's signature; None where it has none to read."""
    try:
        params = list(inspect.signature(fn).parameters.values())[1:]  # (without self)
    except (TypeError, ValueError):
        return None
    names: dict[str, Any] = {"_sk_fn": fn, "_sk_resume": _resume, "_sk_Suspend": Suspend}
    declared: list[str] = []
    passed: list[str] = []
    keywords: list[str] = []
    for param in params:
        name = param.name
        if not name.isidentifier() or name.startswith("_sk_") or name == "self":
            return None
        default = ""
        if param.default is not _KINDS.empty:
            names[f"_sk_d_{name}"] = param.default
            default = f"=_sk_d_{name}"
        if param.kind is _KINDS.POSITIONAL_OR_KEYWORD:
            declared.append(name + default)
            passed.append(name)
        elif param.kind is _KINDS.VAR_POSITIONAL:
            declared.append("*" + name)
            passed.append("*" + name)
        elif param.kind is _KINDS.KEYWORD_ONLY:
            if not any(d.startswith("*") for d in declared):
                declared.append("*")
            declared.append(name + default)
            keywords.append(name)
        elif param.kind is _KINDS.VAR_KEYWORD:
            declared.append("**" + name)
            keywords.append("**" + name)
        else:  # positional-only: not in RedisAPI
            return None
    call = ", ".join(["self._api", *passed, *(k if k.startswith("**") else f"{k}={k}"
                                             for k in keywords)])
    as_kwargs = ", ".join(k if k.startswith("**") else f"{k!r}: {k}" for k in keywords)
    source = (
        f"async def {fn.__name__}(self, {', '.join(declared)}):\n"
        "    _sk_steps = self._steps\n"
        "    _sk_steps.begin()\n"
        "    try:\n"
        f"        return _sk_fn({call})\n"
        "    except _sk_Suspend:\n"
        f"        return await _sk_resume(_sk_steps, _sk_fn, ({', '.join(['self._api', *passed])},),"
        f" {{{as_kwargs}}})\n")
    exec(source, names)  # noqa: S102 (the source is built above from fn's own signature)
    return names[fn.__name__]  # type: ignore[no-any-return]


class AsyncRedis:
    """redis.asyncio.Redis's methods over a backend (`Engine.aredis()`, a shared directory's
    `aredis()`, or `aredis_from_url` for a server): every command coroutine has the
    synchronous facade's argv and replies. `decode_responses` as redis-py's."""

    def __init__(self, backend: AsyncBackend, decode_responses: bool = False) -> None:
        self.backend = backend
        self.decode_responses = decode_responses
        make_steps = getattr(backend, "make_steps", None)
        self._steps: Steps = (make_steps(compatible_error) if make_steps is not None
                              else Steps(backend.start, compatible_error))
        self._api = RedisAPI(self._steps, decode_responses)
        self._subscribers: weakref.WeakSet[AsyncPubSub] = weakref.WeakSet()

    def __getattr__(self, name: str) -> Any:  # (the commands are set on the class below)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    # --- what redis.asyncio.Redis has besides the commands -------------------------------------

    def register_script(self, script: str | bytes) -> AsyncScript:
        return AsyncScript(self, script)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> AsyncPipeline:
        return AsyncPipeline(self, transaction)

    def pubsub(self, ignore_subscribe_messages: bool = False, **kwargs: Any) -> AsyncPubSub:
        pubsub = AsyncPubSub(self, ignore_subscribe_messages)
        self._subscribers.add(pubsub)  # (closed with the client, as redis-py's connections)
        return pubsub

    def lock(self, name: Any, timeout: float | None = None, sleep: float = 0.1,
             blocking: bool = True, blocking_timeout: float | None = None,
             lock_class: Any = None, thread_local: bool = True,
             raise_on_release_error: bool = True) -> Any:
        """redis-py's asyncio Lock over this client (redis-py installed: its Lock class is
        imported here, on first use)."""
        make = lock_class
        if make is None:
            from redis.asyncio.lock import Lock

            make = Lock
        return make(self, name, timeout=timeout, sleep=sleep, blocking=blocking,
                    blocking_timeout=blocking_timeout, thread_local=thread_local,
                    raise_on_release_error=raise_on_release_error)

    def get_encoder(self) -> Encoder:
        return self.connection_pool.get_encoder()

    @property
    def connection_pool(self) -> ConnectionPool:
        """What code written for redis.asyncio reaches through a client's pool: its encoder
        and `disconnect()` (which closes this client)."""
        return ConnectionPool(self)

    async def scan_iter(self, match: Any = None, count: int | None = None,
                        _type: str | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = await self.scan(cursor=cursor, match=match, count=count,
                                           _type=_type, **kwargs)
            for item in data:
                yield item

    async def hscan_iter(self, name: Any, match: Any = None, count: int | None = None,
                         no_values: bool | None = None) -> AsyncIterator[Any]:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = await self.hscan(name, cursor=cursor, match=match, count=count,
                                            no_values=no_values)
            for item in (data if no_values else data.items()):
                yield item

    async def sscan_iter(self, name: Any, match: Any = None,
                         count: int | None = None) -> AsyncIterator[Any]:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = await self.sscan(name, cursor=cursor, match=match, count=count)
            for item in data:
                yield item

    async def zscan_iter(self, name: Any, match: Any = None, count: int | None = None,
                         score_cast_func: Any = float) -> AsyncIterator[Any]:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = await self.zscan(name, cursor=cursor, match=match, count=count,
                                            score_cast_func=score_cast_func)
            for item in data:
                yield item

    async def initialize(self) -> AsyncRedis:
        return self

    def __await__(self) -> Any:
        return self.initialize().__await__()

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        """Closed: its subscribers' subscriptions ended, its connections (if any) closed."""
        for pubsub in list(self._subscribers):
            await pubsub.aclose()
        self._subscribers.clear()
        await self.backend.aclose()

    async def close(self, close_connection_pool: bool | None = None) -> None:
        await self.aclose()

    async def __aenter__(self) -> AsyncRedis:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


for _name, _fn in _facade_methods().items():
    setattr(AsyncRedis, _name, _async_method(_fn))


class Encoder:
    """redis-py's Encoder as code written for it uses it (a Lock's token, a framework's keys):
    `encode` gives the bytes a command argument is sent as."""

    def __init__(self, decode_responses: bool) -> None:
        self.decode_responses = decode_responses
        self.encoding = "utf-8"
        self.encoding_errors = "strict"

    def encode(self, value: Any) -> bytes:
        check_encodable((value,))  # (redis-py's DataError for what its Encoder refuses)
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, (int, float)):
            return repr(value).encode()
        return bytes(value)

    def decode(self, value: Any, force: bool = False) -> Any:
        if (self.decode_responses or force) and isinstance(value, (bytes, memoryview)):
            return bytes(value).decode()
        return value


class ConnectionPool:
    """A client's `connection_pool` as redis.asyncio code reaches for it: `get_encoder()`,
    `disconnect()` (closes the client: its subscribers and connections)."""

    def __init__(self, redis: AsyncRedis) -> None:
        self.redis = redis

    def get_encoder(self) -> Encoder:
        return Encoder(self.redis.decode_responses)

    async def disconnect(self, inuse_connections: bool = True) -> None:
        await self.redis.aclose()

    async def aclose(self) -> None:
        await self.redis.aclose()


# --- scripts ------------------------------------------------------------------------------------


class AsyncScript:
    """redis.asyncio's Script: `await script(keys, args)` runs EVALSHA, loading the script on
    NOSCRIPT (the synchronous Script's rule, replayed); in a pipeline it is loaded first."""

    def __init__(self, registered_client: AsyncRedis, script: str | bytes) -> None:
        self.registered_client = registered_client
        self._script = Script(registered_client._api, script)
        self.script = script

    @property
    def sha(self) -> str:
        return self._script.sha

    async def __call__(self, keys: Sequence[Any] | None = None,
                       args: Iterable[Any] | None = None, client: Any = None) -> Any:
        if isinstance(client, AsyncPipeline):
            await client.redis.script_load(self.script)
            return client.evalsha(self.sha, len(keys or ()), *(keys or ()), *(args or ()))
        owner = self.registered_client if client is None else client
        if not isinstance(owner, AsyncRedis):  # another redis.asyncio client: its own calls
            return await self._on_foreign(owner, list(keys or ()), list(args or ()))
        result = _run(owner._steps, Script.__call__, (self._script, keys, args, owner._api), {})
        return result.value if type(result) is _Done else await result

    async def _on_foreign(self, client: Any, keys: list[Any], args: list[Any]) -> Any:
        """redis-py's Script rule on a client that is not one of ours (a script registered
        once and shared, as redis-py's Lock registers its scripts): EVALSHA, and on NOSCRIPT
        SCRIPT LOAD and EVALSHA again."""
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except Exception as err:  # (redis-py's NoScriptError, or ours)
            if not str(err).startswith(("NOSCRIPT", "No matching script")):
                raise
        await client.script_load(self.script)
        return await client.evalsha(self.sha, len(keys), *keys, *args)


# --- pipelines ----------------------------------------------------------------------------------


class _Queued:
    __slots__ = ("fn", "args", "kwargs", "argv")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 argv: tuple[Any, ...]) -> None:
        self.fn, self.args, self.kwargs, self.argv = fn, args, kwargs, argv


def _pipeline_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: AsyncPipeline, *args: Any, **kwargs: Any) -> Any:
        if self.watching and not self.explicit_transaction:
            return self._immediate(fn, args, kwargs)
        self._stack(fn, args, kwargs)
        return self

    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


class AsyncPipeline:
    """redis.asyncio's Pipeline: commands are buffered (each call returns the pipeline) and
    sent by `await execute()`, in one MULTI/EXEC when `transaction`; `await watch(*keys)`
    puts it in immediate mode (commands awaited one by one) until `multi()`, and EXEC then
    raises WatchError if a watched key changed."""

    def __init__(self, redis: AsyncRedis, transaction: bool) -> None:
        self.redis = redis
        self.transaction = transaction
        self.command_stack: list[_Queued] = []
        self.watching = False
        self.explicit_transaction = False
        self._session: AsyncSession | None = None
        self._collected: list[tuple[Any, ...]] = []
        self._collector = RedisAPI(Steps(self._collect, compatible_error),
                                   redis.decode_responses)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __len__(self) -> int:
        return len(self.command_stack)

    def __bool__(self) -> bool:
        return True

    async def __aenter__(self) -> AsyncPipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.reset()

    def __await__(self) -> Any:
        async def itself() -> AsyncPipeline:
            return self
        return itself().__await__()

    def _collect(self, args: tuple[Any, ...]) -> Any:
        self._collected.append(args)
        return _QUEUED

    def _stack(self, fn: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> None:
        """Queue a call: its argv, taken by running the method until it sends (its client-side
        checks raise here, as redis-py's do at the call)."""
        collector = self._collector
        steps: Steps = collector.execute.__self__  # type: ignore[attr-defined]
        steps.begin()
        self._collected = []
        with contextlib.suppress(Suspend):  # (the run stops at its command: queued)
            fn(collector, *args, **kwargs)
        if not self._collected:
            raise StreamkeepError(f"{fn.__name__} sends no command a pipeline can queue")
        self.command_stack.append(_Queued(fn, args, kwargs, self._collected[0]))

    def _own_session(self) -> AsyncSession:
        if self._session is None:
            self._session = self.redis.backend.new_session()
        return self._session

    async def _immediate(self, fn: Callable[..., Any], args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
        api = RedisAPI(Steps(self._own_session().start, compatible_error),
                       self.redis.decode_responses)
        steps: Steps = api.execute.__self__  # type: ignore[attr-defined]
        result = _run(steps, fn, (api, *args), kwargs)
        return result.value if type(result) is _Done else await result

    async def watch(self, *names: Any) -> bool:
        if self.explicit_transaction:
            raise StreamkeepError("Cannot issue a WATCH after a MULTI")
        self.watching = True
        reply = await self._immediate(RedisAPI.execute_command, ("WATCH", *names), {})
        return reply in (b"OK", "OK")  # (redis-py's bool_ok)

    async def unwatch(self) -> bool:
        self.watching = False
        if self._session is None:
            return True
        return await self._immediate(RedisAPI.execute_command, ("UNWATCH",), {})

    def multi(self) -> None:
        if self.explicit_transaction:
            raise StreamkeepError("Cannot issue nested calls to MULTI")
        if self.command_stack:
            raise StreamkeepError("Commands without an initial WATCH have already been issued")
        self.explicit_transaction = True

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack = self.command_stack
        if not stack:
            if self.watching:
                await self.reset()
            return []
        argvs = [queued.argv for queued in stack]
        session = self._session or self.redis.backend
        try:
            if self.transaction or self.explicit_transaction:
                replies = await session.run_many([("MULTI",), *argvs, ("EXEC",)])
                exec_reply = replies[-1]
                if isinstance(exec_reply, ReplyError):
                    for number, reply in enumerate(replies[1:-1], 1):
                        if isinstance(reply, ReplyError):  # EXECABORT: as redis-py raises it
                            raise _annotated(reply, number, argvs[number - 1]) \
                                from compatible_error(exec_reply)
                    raise compatible_error(exec_reply)
                if exec_reply is None:
                    raise watch_error()
                replies = exec_reply
            else:
                replies = await session.run_many(argvs)
        finally:
            await self.reset()
        return self._shaped(stack, replies, raise_on_error)

    def _shaped(self, stack: list[_Queued], replies: list[Any],
                raise_on_error: bool) -> list[Any]:
        """Each reply shaped by its method, replayed over it."""
        out: list[Any] = []
        api = RedisAPI(Steps(_never_start, compatible_error), self.redis.decode_responses)
        steps: Steps = api.execute.__self__  # type: ignore[attr-defined]
        if raise_on_error:  # the first error, as redis-py raises it (before any shaping)
            for number, reply in enumerate(replies, 1):
                if isinstance(reply, ReplyError):
                    raise _annotated(reply, number, stack[number - 1].argv)
        for queued, reply in zip(stack, replies, strict=True):
            steps.reset([Raised(compatible_error(reply)) if isinstance(reply, ReplyError)
                         else reply])
            try:
                out.append(queued.fn(api, *queued.args, **queued.kwargs))
            except ReplyError as err:
                if raise_on_error:
                    raise
                out.append(err)
        return out

    async def reset(self) -> None:
        self.command_stack = []
        self.explicit_transaction = False
        session, self._session = self._session, None
        if session is not None:
            if self.watching:
                with contextlib.suppress(ReplyError, OSError, StreamkeepError):
                    await _awaited(session.start(("UNWATCH",)))
            session.close()
        self.watching = False

    aclose = reset


def _annotated(err: ReplyError, number: int, argv: tuple[Any, ...]) -> ReplyError:
    """A pipeline's failed command's error as redis-py raises it: "Command # N (argv) of
    pipeline caused error: (the error's args)" (redis-py's annotate_exception)."""
    import textwrap

    words = " ".join(a.decode(errors="replace") if isinstance(a, bytes) else str(a)
                     for a in argv)
    shown = textwrap.shorten(words, width=100, placeholder="...", break_long_words=True)
    error = compatible_error(err)
    code, _, rest = err.line.partition(" ")
    args = (rest if code in _REDIS_PY_STRIPS else err.line,)  # (its parser's message)
    return type(error)(f"Command # {number} ({shown}) of pipeline caused error: {args}")


# The error codes whose word redis-py's parser drops from an exception's message.
_REDIS_PY_STRIPS = {"ERR", "OOM", "WRONGPASS", "EXECABORT", "LOADING", "NOSCRIPT", "READONLY",
                    "NOAUTH", "NOPERM", "ASK", "TRYAGAIN", "MOVED", "CLUSTERDOWN", "CROSSSLOT",
                    "MASTERDOWN"}


def _never_start(args: tuple[Any, ...]) -> Any:
    raise StreamkeepError("a pipeline's reply was shaped from a command it did not send")


_QUEUED = Wait(None)  # type: ignore[arg-type]  # (a queued command: never awaited)


async def _awaited(reply: Any) -> Any:
    if type(reply) is Wait:
        return await reply.awaitable
    return reply


for _name, _fn in _facade_methods().items():
    setattr(AsyncPipeline, _name, _pipeline_method(_fn))


# --- Pub/Sub ------------------------------------------------------------------------------------

_SUBSCRIBE_KINDS = {b"subscribe", b"psubscribe", b"ssubscribe", b"unsubscribe",
                    b"punsubscribe", b"sunsubscribe"}


class AsyncPubSub:
    """redis.asyncio's PubSub: `await subscribe(...)`, `await get_message(timeout=...)`,
    `async for message in listen()`, `await aclose()`. Messages are redis-py's dicts (type,
    pattern, channel, data), decoded when the client decodes; handlers given as keyword
    arguments are called instead of returning their messages."""

    def __init__(self, redis: AsyncRedis, ignore_subscribe_messages: bool = False) -> None:
        self.redis = redis
        self.ignore_subscribe_messages = ignore_subscribe_messages
        self.channels: dict[Any, Any] = {}
        self.patterns: dict[Any, Any] = {}
        self._channel: Any = None

    def _subscriber(self) -> Any:
        if self._channel is None:
            self._channel = self.redis.backend.pubsub_channel()
        return self._channel

    @property
    def subscribed(self) -> bool:
        return bool(self.channels or self.patterns)

    async def _command(self, name: bytes, args: tuple[Any, ...], kwargs: dict[str, Any],
                       registry: dict[Any, Any] | None) -> None:
        names = [*args, *kwargs]
        if registry is not None:
            for channel in args:
                registry[self._key(channel)] = None
            for channel, handler in kwargs.items():
                registry[self._key(channel)] = handler
        await self._subscriber().run((name, *names))

    def _key(self, name: Any) -> Any:
        if isinstance(name, str) and not self.redis.decode_responses:
            return name.encode()
        if isinstance(name, bytes) and self.redis.decode_responses:
            return name.decode()
        return name

    async def subscribe(self, *args: Any, **kwargs: Any) -> None:
        await self._command(b"SUBSCRIBE", args, kwargs, self.channels)

    async def psubscribe(self, *args: Any, **kwargs: Any) -> None:
        await self._command(b"PSUBSCRIBE", args, kwargs, self.patterns)

    async def unsubscribe(self, *args: Any) -> None:
        for channel in args or list(self.channels):
            self.channels.pop(self._key(channel), None)
        await self._command(b"UNSUBSCRIBE", args, {}, None)

    async def punsubscribe(self, *args: Any) -> None:
        for pattern in args or list(self.patterns):
            self.patterns.pop(self._key(pattern), None)
        await self._command(b"PUNSUBSCRIBE", args, {}, None)

    async def get_message(self, ignore_subscribe_messages: bool = False,
                          timeout: float | None = 0.0) -> dict[str, Any] | None:
        """The next message (None: none within `timeout` seconds; None timeout: wait)."""
        if self._channel is None:
            return None
        push = await self._channel.next_message(timeout)
        if push is None:
            return None
        message = self._message(push)
        kind = push[0]
        if kind in _SUBSCRIBE_KINDS:
            if ignore_subscribe_messages or self.ignore_subscribe_messages:
                return None
            return message
        registry = self.patterns if kind == b"pmessage" else self.channels
        handler = registry.get(message["pattern"] if kind == b"pmessage"
                               else message["channel"])
        if handler is not None:
            result = handler(message)
            if inspect.isawaitable(result):
                await result
            return None
        return message

    def _message(self, push: list[Any]) -> dict[str, Any]:
        decode = self.redis.decode_responses
        items = [x.decode() if decode and isinstance(x, bytes) else x for x in push]
        kind = push[0].decode()
        if kind == "pmessage":
            return {"type": kind, "pattern": items[1], "channel": items[2], "data": items[3]}
        return {"type": kind, "pattern": None, "channel": items[1], "data": items[2]}

    async def listen(self) -> AsyncIterator[dict[str, Any]]:
        while self.subscribed or self._channel is not None:
            message = await self.get_message(timeout=None)
            if message is not None:
                yield message

    async def aclose(self) -> None:
        channel, self._channel = self._channel, None
        self.channels.clear()
        self.patterns.clear()
        if channel is not None:
            await channel.aclose()

    reset = aclose

    async def __aenter__(self) -> AsyncPubSub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
