"""The Lua host's reference: the compiled host's contract (`_lua_host_c.pyx`) written out in
Python, with lupa's Lua 5.1 as the virtual machine. It runs the pure build, and where
`liblua5.1-0-dev` is missing; tests/engine/exec/test_lua_host.py runs the compiled host and this
one on the same inputs and requires the same values, errors and run bookkeeping.

The compiled host drives liblua5.1's C API; every decision it makes in C is made here in Python,
at each place a value crosses between Python and Lua. lupa runs the Lua code and carries the
values over; nothing of lupa's reaches the caller (its values, errors and Python objects are
this module's own before they are handed on).

The contract (engine.exec.scripting and engine.exec.functions rely on it):

- Lua to Python (`_to_host`): a string is bytes, a number an int when integral and in int64's
  range (else a float: NaN, the infinities, 2^63), a boolean a bool, nil None, a Python object
  put in Lua the object itself; any other value a `LuaTable`, `LuaFunction` or `LuaObject`
  holding it, whose `lua_type` is Lua's name of its type ('table', 'function', 'thread',
  'userdata'). A C function of `python.as_function` is a 'function' like any other.
- Python to Lua (`_to_lua`): None is nil, a bool a boolean, an int or a float a number (an int
  outside int64 is an OverflowError: the number is the int64's double), bytes a string, a Lua
  value Python holds that value (from this runtime only), anything else a userdata wrapping
  it, called through `__call`, handed back as itself. A table key that is nil or NaN is a
  Python error (LuaError), never Lua's.
- A Python function Lua calls gets its arguments converted, and its tuple result is its
  results, one each (at most MAXCSTACK of them); an exception it raises is raised into Lua as
  the exception object, and reaches Python again as itself if nothing in Lua catches it.
- Errors that reach Python: a chunk that does not compile is LuaSyntaxError (Lua's message), a
  heap that ran out LuaMemoryError, any other Lua error LuaError (its message).
- Tables: `items()` is a snapshot, iteration gives the keys, `t[k]` and `t[k] = v` are raw (no
  metamethod runs); `table_from(*sources)` fills a new table from dicts (their pairs) and
  other iterables (their values from 1, each source from 1 again), in order.
- The heap: `get_memory_used()` counts from what the state held once built, and the cap is
  `max_memory` bytes over that: an allocation that would take the heap past it fails.
- A run (`run`, by the protocol sandbox.lua describes at its RUN table): see `Runtime.run`.

Where lupa cannot be made to match, and what this host does instead (none of it is visible to
the scripting layer, which never meets these cases or checks for them):

- The cap holds on every allocation, lupa's own pushes of arguments, results and tables
  included, where a failure is not protected (the process would abort); the compiled host
  enforces it only while Lua runs. So PUSHES_NEVER_FAIL is False here, and the scripting layer
  keeps room in the heap before it hands values over.
- An error object that is not a string or a number, reaching Python: the compiled host's
  message names its type ("error object is a table value"); lupa passes on strings only, so
  the message is empty here.
- A Lua value Python holds goes back into Lua as itself, except a C function of
  python.as_function, which goes back as a userdata that calls the same Python function, and a
  coroutine not yet started, which goes back as its function: lupa hands Python the object
  behind the one and the function of the other. A run of such a function is made as the
  compiled host makes it (see `Runtime.run`).
- A Python object in Lua is lupa's userdata: indexing it is refused (the error object a
  Python AttributeError, not Lua's message), `tostring` gives its `str` (the compiled host's
  userdata has only `__call`).

Must not touch: anything about scripts (engine.exec.scripting owns the sandbox and the API).
"""

from __future__ import annotations

from typing import Any

try:
    from lupa import lua51 as _lupa
except ImportError:  # a lupa without its bundled Lua 5.1: its default Lua
    import lupa as _lupa  # type: ignore[no-redef]

from streamkeep.engine.wire.errors import StreamkeepError

# What Python pushes into Lua (arguments, results, tables) may fail on a full heap, outside
# Lua's protection (the caller keeps room for it).
PUSHES_NEVER_FAIL = False

# lua_checkstack's bound (Lua's LUAI_MAXCSTACK): the most values a C function's frame holds.
MAXCSTACK = 8000
_INT64 = 1 << 63

# sandbox.lua's RUN table, the slots `Runtime.run` reads and writes.
RUN_KILLING = 1
RUN_KILL_DUE = 2
RUN_ARMED = 3
RUN_GC_STOPPED = 4
RUN_RESUMING = 5
RUN_ARM = 6
RUN_DISARM = 7
RUN_RESTART_GC = 8
RUN_HANDLER = 9
RUN_GLOBALS = 10


class LuaError(StreamkeepError):
    """A Lua error that reached Python (its message)."""


class LuaMemoryError(LuaError, MemoryError):
    """The Lua heap reached its cap."""


class LuaSyntaxError(LuaError):
    """A chunk that does not compile."""


# --- Lua values as Python sees them -----------------------------------------------------------


class LuaObject:
    """A Lua value Python holds (lupa's reference to it, or the Python function behind a C
    function of python.as_function), and Lua's name of its type."""

    __slots__ = ("_kind", "_rt", "_value")

    def __init__(self, rt: Runtime, value: Any, kind: str) -> None:
        self._rt, self._value, self._kind = rt, value, kind

    def __repr__(self) -> str:
        return f"<Lua {self._kind}>"


class LuaTable(LuaObject):
    """A Lua table: its items (a snapshot), its keys, an item read or set (raw)."""

    __slots__ = ()

    def items(self) -> list[tuple[Any, Any]]:
        rt = self._rt
        return [(_to_host(rt, k), _to_host(rt, v)) for k, v in rt._pairs(self._value)]

    def __iter__(self) -> Any:
        return iter([k for k, _ in self.items()])

    def __getitem__(self, key: Any) -> Any:
        """The value at `key` (raw: no metamethod runs), None when there is none."""
        rt = self._rt
        return _to_host(rt, rt._lupa_call(rt._rawget, (self._value, _to_lua(rt, key))))

    def __setitem__(self, key: Any, value: Any) -> None:
        rt = self._rt
        rt._lupa_call(rt._rawset, (self._value, _key(rt, key), _to_lua(rt, value)))


class LuaFunction(LuaObject):
    """A Lua function, called in protected mode: its results (None, one value, or a tuple)."""

    __slots__ = ()

    def __call__(self, *args: Any) -> Any:
        return self._rt._call(self._value, args)


def lua_type(value: Any) -> str | None:
    """Lua's type name of a Lua value Python holds ('table', 'function', ...); None for a
    Python object."""
    return value._kind if isinstance(value, LuaObject) else None


# --- Python objects in Lua --------------------------------------------------------------------


class _Object:
    """A Python object put in Lua (lupa's userdata holds this): called from Lua through its
    `__call` with the host's conversions, handed back to Python as the object itself."""

    __slots__ = ("obj", "rt")

    def __init__(self, rt: Runtime, obj: Any) -> None:
        self.rt, self.obj = rt, obj

    def __call__(self, *args: Any) -> Any:
        return self.rt._call_python(self.obj, args, False)

    def __str__(self) -> str:
        return f"userdata: {id(self):#x}"


class _Closure:
    """What a C function of python.as_function (`packed`: python.as_tuple_function) calls:
    lupa's C closure over this object, which calls the Python object with the arguments (as one
    tuple when packed)."""

    __slots__ = ("obj", "packed", "rt")

    def __init__(self, rt: Runtime, obj: Any, packed: bool) -> None:
        self.rt, self.obj, self.packed = rt, obj, packed

    def __call__(self, *args: Any) -> Any:
        return self.rt._call_python(self.obj, args, self.packed)


def _no_attributes(obj: Any, name: Any, is_setting: bool) -> Any:
    """lupa's attribute filter: a script reaches no attribute of a Python object in Lua
    (through one it would reach the whole interpreter)."""
    raise AttributeError("attempt to index a userdata value")


def _proxy_kinds() -> dict[type, str]:
    """lupa's classes of the Lua values it hands Python, and the Lua type each holds (a
    coroutine not yet started comes as the function it will run: its class tells it apart)."""
    probe = _lupa.LuaRuntime(encoding=None)
    made = probe.execute(b"local co = coroutine.create(function() coroutine.yield() end) "
                         b"coroutine.resume(co) "
                         b"return {}, print, coroutine.create(function() end), co, newproxy()")
    return {type(value): kind for value, kind in
            zip(made, ("table", "function", "thread", "thread", "userdata"), strict=True)}


_KINDS = _proxy_kinds()
_CLASSES: dict[str, type[LuaObject]] = {"table": LuaTable, "function": LuaFunction}


# --- conversions ------------------------------------------------------------------------------


def _number(value: float) -> int | float:
    """A Lua number as Python sees it: an int when it is integral and in int64's range."""
    if -_INT64 <= value < _INT64 and value.is_integer():
        return int(value)
    return value


def _to_host(rt: Runtime, value: Any) -> Any:
    """A value lupa handed over from Lua, as the host hands it on."""
    t = type(value)
    if t is bytes or t is int or t is bool or value is None:
        return value  # (lupa makes an int of a number by `_number`'s rule already)
    if t is float:
        return _number(value)
    if t is _Object:
        return value.obj
    if t is _Closure:
        return LuaFunction(rt, value, "function")
    kind = _KINDS.get(t)
    if kind is None:  # a Python object lupa put in Lua itself (a Python function's exception)
        return value
    return _CLASSES.get(kind, LuaObject)(rt, value, kind)


def _double(value: int) -> float:
    """An int as the number Lua gets: the double of an int64."""
    if not -_INT64 <= value < _INT64:
        raise OverflowError("int too big to convert")  # (PyLong_AsLongLong's)
    return float(value)


def _to_lua(rt: Runtime, value: Any) -> Any:
    """A Python value as the host puts it in Lua (what lupa is handed to push)."""
    t = type(value)
    if t is bytes or value is None or t is bool or t is float:
        return value
    if t is int:
        return _double(value)
    if isinstance(value, LuaObject):
        if value._rt is not rt:
            raise LuaError("cannot mix objects from different Lua runtimes")
        return value._value
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, int):
        return _double(int(value))
    if isinstance(value, float):
        return float(value)
    return _Object(rt, value)


def _key(rt: Runtime, key: Any) -> Any:
    """A table key: a nil or NaN key is refused here, as a Python error."""
    if key is None:
        raise LuaError("table index is nil")
    if type(key) is float and key != key:
        raise LuaError("table index is NaN")
    return _to_lua(rt, key)


def _host_error(error: Exception) -> LuaError:
    """A lupa error as the host raises it: the message alone (without the traceback lupa adds
    while there is a `debug` library), a heap that ran out LuaMemoryError."""
    message = error.args[0] if error.args else ""
    if isinstance(message, bytes):  # (lupa's compile errors)
        message = message.decode("latin-1")
    message = str(message)
    head, traceback, _ = message.rpartition("\nstack traceback:")
    if traceback:
        message = head
    if isinstance(error, _lupa.LuaMemoryError) or "not enough memory" in message:
        return LuaMemoryError(message or "not enough memory")
    if isinstance(error, _lupa.LuaSyntaxError):
        return LuaSyntaxError(message)
    return LuaError(message)


def _first(results: Any) -> Any:
    """A call's first result, of what lupa hands over (None, one value or a tuple)."""
    if type(results) is tuple:
        return results[0] if results else None
    return results


def _results(results: tuple) -> Any:
    """What a Python function returned as a Lua call returns it: none as None, one as itself,
    more as a tuple."""
    if not results:
        return None
    return results[0] if len(results) == 1 else results


# Set up in each runtime before its heap's base is taken: the host's `python` table in place of
# lupa's (as_function and as_tuple_function only, refusing what is not a Python object with
# the compiled host's messages); and the functions the host calls where the compiled host
# uses the C API (raw table access, the collector, debug.getinfo). Those are C functions: a
# function of Lua code would be seen by the busy-script hook, which may raise in any code that
# is not the sandbox's.
_SETUP = b"""
local as_function, closure_of = python.as_function, ...
local error = error
local function maker(packed, refusal)
  return function(obj)
    local closure = closure_of(obj, packed)
    if closure == nil then error(refusal, 0) end
    return as_function(closure)
  end
end
python = {as_function = maker(false, 'as_function: not a Python object'),
          as_tuple_function = maker(true, 'as_tuple_function: not a Python object')}
package.loaded.python = nil
return rawget, rawset, collectgarbage, debug.getinfo, unpack
"""

# The host's own steps in Lua, which the compiled host makes in C. The run's protected call: the
# compiled host's lua_pcall of the function with the handler (lupa has no protected call with a
# handler), its first result only. A table's pairs in Lua's order, flat in one array (lupa's
# own iteration breaks on a value it converts to a Python function: its stack is left one
# value off). Compiled under the handler's chunk name once there is one (`prepare`), so that
# the handler and the busy-script hook take their frames for the sandbox's own, where they
# never stop a script: the compiled host has no Lua frames.
_HOST_CODE = b"""
local xpcall, next = xpcall, next
local F, K, A
local function call() return F(K, A) end
local function finish(ok, result) F, K, A = nil, nil, nil return ok, result end
local function protected_call(handler, f, callback, keys, argv)
  if not callback then return finish(xpcall(f, handler)) end
  F, K, A = f, keys, argv
  return finish(xpcall(call, handler))
end
local function pairs_of(t)
  local flat, n = {}, 0
  for k, v in next, t do flat[n + 1] = k flat[n + 2] = v n = n + 2 end
  return flat, n
end
return protected_call, pairs_of
"""
# The most values one call of `unpack` hands over (an even number: keys and values).
_UNPACKED = 4000


def _strings(items: tuple, start: int, end: int) -> list[bytes]:
    """items[start:end] as bytes (KEYS and ARGV)."""
    return [item if type(item) is bytes else bytes(item) for item in items[start:end]]


def _armed_with(state: LuaTable, count: int) -> bool:
    """Whether the run state says the hook is armed with `count`."""
    armed = state[RUN_ARMED]
    return (type(armed) is int or type(armed) is float) and armed == count


# --- the runtime ------------------------------------------------------------------------------


class Runtime:
    """One Lua state: the standard libraries, `python.as_function` and
    `python.as_tuple_function`, the heap capped at `max_memory` bytes over what the state held
    once built (0: no cap)."""

    def __init__(self, max_memory: int = 0) -> None:
        if max_memory < 0:
            raise OverflowError("can't convert negative value to size_t")
        lua = self._lua = _lupa.LuaRuntime(encoding=None, unpack_returned_tuples=True,
                                           register_eval=False, register_builtins=False,
                                           max_memory=0, attribute_filter=_no_attributes)
        (self._rawget, self._rawset, self._collectgarbage, self._getinfo,
         self._unpack) = lua.execute(_SETUP, self._closure_of)
        self._host_code(b"=streamkeep:lua_host")
        self._max_memory = max_memory
        self._state: LuaTable | None = None
        self._collect_kb = 0
        self._margin = 0
        self._lupa_call(self._collectgarbage, ())  # (lupa's garbage and ours: not the base)
        self._base = int(lua.get_memory_used())
        if max_memory:  # (lupa refuses an allocation that reaches its limit: one byte more)
            lua.set_max_memory(self._base + max_memory + 1)

    def get_memory_used(self) -> int:
        """Bytes the heap holds over what the state held once built."""
        return int(self._lua.get_memory_used()) - self._base

    def execute(self, code: bytes, *args: Any, name: str | bytes | None = None) -> Any:
        """Compile `code` (bytes) under the chunk name `name` and run it with `args`: its
        results."""
        if type(code) is not bytes:
            raise TypeError(f"Argument 'code' has incorrect type (expected bytes, got "
                            f"{type(code).__name__})")
        chunk = name.encode() if isinstance(name, str) else (name or b"<python>")
        if len(args) + 2 > MAXCSTACK:
            raise LuaError("stack overflow (too many arguments)")
        try:
            function = self._lua.compile(code, name=chunk)
        except _lupa.LuaError as error:
            raise _host_error(error) from None
        return self._call(function, args)

    def table_from(self, *sources: Any) -> LuaTable:
        """A new table with each source's items: a dict's pairs, any other iterable's values
        from 1."""
        table = None
        for source in sources:
            if isinstance(source, dict):
                entries: Any = {_key(self, k): _to_lua(self, v) for k, v in source.items()}
            else:
                entries = [_to_lua(self, value) for value in source]
            if table is None:  # (lupa fills a new table in the same order)
                table = self._lua.table_from(entries)
                continue
            pairs = entries.items() if isinstance(entries, dict) else enumerate(entries, 1)
            for key, value in pairs:
                self._lupa_call(self._rawset, (table, key, value))
        return LuaTable(self, table if table is not None else self._lua.table_from(), "table")

    def prepare(self, state: LuaTable, collect_kb: int, margin: int) -> None:
        """What every `run` uses: sandbox.lua's RUN table, the heap size (KiB) past which a
        run's garbage is collected after it, and the room (bytes) a run's arguments must
        leave free in the heap."""
        if not isinstance(state, LuaTable):
            raise TypeError("prepare() needs the run state's table")
        self._state, self._collect_kb, self._margin = state, collect_kb, margin
        handler = state[RUN_HANDLER]
        source = b"=?"
        if lua_type(handler) == "function" and type(handler._value) is not _Closure:
            source = self._lupa_call(self._getinfo, (handler._value, b"S"))[b"source"]
        self._host_code(source)

    def run(self, function: LuaFunction, argv: Any, first: int, nkeys: int, callback: bool,
            count: int) -> tuple[bool | None, Any]:
        """One run of a script (`callback` false: KEYS and ARGV are globals) or of a registered
        function (`callback`: they are its two arguments), by the protocol sandbox.lua
        describes at its RUN table (see `prepare`): KEYS are argv[first:first + nkeys], ARGV
        the rest. (True, the first result), (False, the error the handler made of it), or
        (None, None) when the arguments do not fit in the heap with the margin, even after a
        collection.

        Before: the kill flags cleared, a killed script's coroutines forgotten, the hook armed
        (RUN[6](count)) unless the state says it is armed with this count, KEYS and ARGV set
        in the globals (RUN[10]) for a script. The function is called in protected mode with
        the handler (RUN[9]) as the error handler. After: KEYS and ARGV cleared, the hook
        disarmed (RUN[7]) when the run changed its count, the collector restarted (RUN[8])
        after a script's collectgarbage('stop'), and the garbage collected when the heap holds
        more than `collect_kb`."""
        if not isinstance(function, LuaFunction):
            raise TypeError("run() needs a Lua function")
        state = self._state
        assert state is not None, "prepare() first"
        items = argv if type(argv) is tuple else tuple(argv)
        n = len(items)
        need = 64 * (n - first) + sum(len(items[i]) for i in range(first, n))
        if self._max_memory and not self._room(need + self._margin):
            return None, None
        state[RUN_KILLING] = False
        state[RUN_KILL_DUE] = False
        if state[RUN_RESUMING][1] is not None:  # (a killed script's coroutines)
            state[RUN_RESUMING] = self.table_from()
        if not _armed_with(state, count):
            state[RUN_ARM](count)
        handler = state[RUN_HANDLER]
        # (KEYS and ARGV are strings: lupa makes their tables as the compiled host does)
        keys = LuaTable(self, self._lua.table_from(_strings(items, first, first + nkeys)), "table")
        args = LuaTable(self, self._lua.table_from(_strings(items, first + nkeys, n)), "table")
        globals_ = None if callback else state[RUN_GLOBALS]
        if globals_ is not None:
            globals_[b"KEYS"], globals_[b"ARGV"] = keys, args
        try:
            result = self._protected(function, handler, callback, keys, args)
        finally:
            if globals_ is not None:
                globals_[b"KEYS"] = globals_[b"ARGV"] = None
        if not _armed_with(state, count):
            state[RUN_DISARM]()
        if state[RUN_GC_STOPPED] not in (None, False):
            state[RUN_RESTART_GC]()
        if int(self._lupa_call(self._collectgarbage, (b"count",))) > self._collect_kb:
            self._lupa_call(self._collectgarbage, ())
        return result

    # --- the host's own steps ---------------------------------------------------------------

    def _room(self, need: int) -> bool:
        """Whether `need` more bytes fit under the cap, after a full collection if they do
        not at first."""
        if self.get_memory_used() + need <= self._max_memory:
            return True
        self._lupa_call(self._collectgarbage, ())
        return self.get_memory_used() + need <= self._max_memory

    def _protected(self, function: LuaFunction, handler: Any, callback: bool, keys: LuaTable,
                   args: LuaTable) -> tuple[bool, Any]:
        """The run's protected call of `function` with `handler` as its error handler: (True,
        its first result) or (False, what the handler made of the error)."""
        target = function._value
        if type(target) is _Closure:
            # A C function calling Python: the compiled host's lua_pcall calls it from C, and
            # the handler, called where it fails, finds no Lua frame of the run below it. Here
            # the same: the Python function called, then the handler called from Python.
            try:
                return True, _to_host(self, _first(
                    target(keys._value, args._value) if callback else target()))
            except BaseException as exc:  # (what Lua catches: any exception crossing it)
                try:
                    return False, handler(exc)
                except LuaMemoryError:
                    return False, b"not enough memory"
                except LuaError:
                    return False, b"error in error handling"
        ok, result = self._lupa_call(self._protected_call, (_to_lua(self, handler), target,
                                                            callback, keys._value, args._value))
        return ok, _to_host(self, result)

    def _host_code(self, name: bytes) -> None:
        """The host's steps in Lua (`_HOST_CODE`), compiled under the chunk name `name`."""
        self._protected_call, self._pairs_of = self._lupa_call(
            self._lua.compile(_HOST_CODE, name=name), ())

    def _pairs(self, table: Any) -> list[tuple[Any, Any]]:
        """A lupa table's pairs, in Lua's order."""
        flat, n = self._lupa_call(self._pairs_of, (table,))
        values: list[Any] = []
        for start in range(1, n + 1, _UNPACKED):
            got = self._lupa_call(self._unpack, (flat, start, min(n, start + _UNPACKED - 1)))
            values.extend(got)  # (always a tuple: an even number of values)
        return list(zip(values[0::2], values[1::2], strict=True))

    def _closure_of(self, obj: Any, packed: bool) -> _Closure | None:
        """What python.as_function makes its C function over (None when `obj` is not a Python
        object in Lua: the Lua side refuses it)."""
        if type(obj) is _Object:
            return _Closure(self, obj.obj, packed)
        if _KINDS.get(type(obj)) is not None or type(obj) in (bytes, int, float, bool) \
                or obj is None or type(obj) is _Closure:
            return None
        return _Closure(self, obj, packed)  # (an object lupa put in Lua itself)

    def _call_python(self, function: Any, args: tuple, packed: bool) -> Any:
        """A Python function called from Lua: its arguments as the host hands them on, its
        results as lupa is to push them (a tuple: one each)."""
        values = tuple([_to_host(self, a) for a in args])
        result = function(values) if packed else function(*values)
        if type(result) is tuple:
            if len(result) > MAXCSTACK:
                raise LuaError("too many results to push")
            return tuple([_to_lua(self, r) for r in result])
        return _to_lua(self, result)

    def _call(self, function: Any, args: tuple) -> Any:
        """A Lua function (lupa's, or a C function of python.as_function) called in protected
        mode with `args`: its results as Python values."""
        if len(args) + 2 > MAXCSTACK:
            raise LuaError("stack overflow (too many arguments)")
        pushed = [_to_lua(self, a) for a in args]
        if type(function) is _Closure:  # (its Python function, called as Lua would call it)
            values = function(*pushed)
            return _to_host(self, values) if type(values) is not tuple \
                else _results(tuple([_to_host(self, v) for v in values]))
        results = self._lupa_call(function, pushed)
        if type(results) is tuple:
            return tuple([_to_host(self, r) for r in results])
        return _to_host(self, results)

    def _lupa_call(self, function: Any, args: Any) -> Any:
        """A lupa function called with lupa's values; its errors as the host's."""
        try:
            return function(*args)
        except _lupa.LuaError as error:
            raise _host_error(error) from None


__all__ = ["MAXCSTACK", "PUSHES_NEVER_FAIL", "LuaError", "LuaFunction", "LuaMemoryError",
           "LuaObject", "LuaSyntaxError", "LuaTable", "Runtime", "lua_type"]
