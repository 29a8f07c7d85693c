"""The Lua host over lupa (its bundled Lua 5.1): the pure build's twin of `_lua_host_c.pyx`.

Owns the same surface as the compiled host, made of lupa's: `Runtime(max_memory)` (a
`lupa.LuaRuntime` as the scripting layer wants it: bytes for strings, tuples unpacked into
results, no `python.eval` or builtins, a capped heap, and no attribute of a Python object
reachable from Lua), `lua_type`, `LuaError`, `LuaMemoryError`, `LuaSyntaxError`. lupa is
imported with this module, which engine.exec.lua_host imports on the first script only.

Must not touch: anything about scripts (engine.exec.scripting owns the sandbox and the API).
"""

from __future__ import annotations

from typing import Any

try:
    from lupa import lua51 as _lupa
except ImportError:  # a lupa without its bundled Lua 5.1: its default Lua
    import lupa as _lupa  # type: ignore[no-redef]

LuaError = _lupa.LuaError
LuaMemoryError = _lupa.LuaMemoryError
LuaSyntaxError = _lupa.LuaSyntaxError


def lua_type(value: Any) -> str | None:
    """Lua's type name of a Lua value Python holds; None for a Python object."""
    kind: str | None = _lupa.lua_type(value)
    return kind


# What Python pushes into Lua (arguments, results, tables) may fail on a full heap, outside
# Lua's protection (the caller keeps room for it).
PUSHES_NEVER_FAIL = False


def _no_attributes(obj: Any, name: Any, is_setting: bool) -> Any:
    """lupa's attribute filter: a script reaches no attribute of the Python objects behind the
    API's functions (through them it would reach the whole interpreter)."""
    raise AttributeError("attempt to index a function value")


# A run's protected call as the compiled host makes it, in Lua: the handler, the function,
# and (for a registered function) its two arguments. Named as the sandbox's chunk so that the
# error handler and the busy-script hook see it as the sandbox's own frame.
_CALL = b"""
local xpcall = xpcall
return function(handler, f, callback, keys, argv)
  local ok, r
  if callback then ok, r = xpcall(function() return f(keys, argv) end, handler)
  else ok, r = xpcall(f, handler) end
  return ok, r
end
"""


def _packing(function: Any) -> Any:
    """`function` called with its arguments as one tuple (python.as_tuple_function's)."""
    def packed(*args: Any) -> Any:
        return function(args)
    return packed


class Runtime:
    """A Lua state with the standard libraries, `python.as_function` and
    `python.as_tuple_function` (its function called with one tuple of the arguments), its heap
    capped at `max_memory` bytes over what it held once built (0: no cap)."""

    def __init__(self, max_memory: int = 0) -> None:
        self.lua = _lupa.LuaRuntime(encoding=None, unpack_returned_tuples=True,
                                    register_eval=False, register_builtins=False,
                                    max_memory=max_memory or None,
                                    attribute_filter=_no_attributes)
        self._call = self.lua.execute(_CALL, name="=streamkeep:sandbox")
        self.lua.execute(b"local as_function, pack = python.as_function, ... "
                         b"python.as_tuple_function = function(f) return as_function(pack(f)) end",
                         _packing)
        self._collect = self.lua.execute(
            b"local c = collectgarbage return function(kb) if c('count') > kb then c() end end")

    def get_memory_used(self) -> int:
        return int(self.lua.get_memory_used() or 0)

    def execute(self, code: bytes, *args: Any, name: str | bytes | None = None) -> Any:
        return self.lua.execute(code, *args, name=name)

    def table_from(self, *sources: Any) -> Any:
        return self.lua.table_from(*sources)

    def prepare(self, state: Any, collect_kb: int, margin: int) -> None:
        """The compiled host's `prepare` (see there)."""
        self._state, self._collect_kb, self._margin = state, collect_kb, margin

    def run(self, function: Any, argv: Any, first: int, nkeys: int, callback: bool,
            count: int) -> tuple[bool | None, Any]:
        """The compiled host's `run` (see there), over lupa."""
        lua, state = self.lua, self._state
        keys, args = tuple(argv[first:first + nkeys]), tuple(argv[first + nkeys:])
        need = 64 * (len(keys) + len(args)) + sum(map(len, keys)) + sum(map(len, args))
        limit = lua.get_max_memory()
        if limit and self.get_memory_used() + need + self._margin > limit:
            self._collect(0)
            if self.get_memory_used() + need + self._margin > limit:
                return None, None
        state[1] = state[2] = False
        if state[5][1] is not None:  # (a killed script's coroutines)
            state[5] = lua.table_from()
        if state[3] != count:
            state[6](count)
        keys_table, argv_table = lua.table_from(keys), lua.table_from(args)
        globals_ = state[10]
        if not callback:
            globals_[b"KEYS"], globals_[b"ARGV"] = keys_table, argv_table
        try:
            ok, result = self._call(state[9], function, callback, keys_table, argv_table)
        finally:
            if not callback:
                globals_[b"KEYS"] = globals_[b"ARGV"] = None
        if state[3] != count:
            state[7]()
        if state[4]:
            state[8]()
        self._collect(self._collect_kb)
        return ok, result


__all__ = ["PUSHES_NEVER_FAIL", "LuaError", "LuaMemoryError", "LuaSyntaxError", "Runtime",
           "lua_type"]
