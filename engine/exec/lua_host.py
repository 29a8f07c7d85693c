"""The Lua host: a Lua 5.1 state and the values a script exchanges with Python.

Owns nothing itself: it is the facade of a kernel pair. `Runtime`, `lua_type`, `LuaError`,
`LuaMemoryError` and `LuaSyntaxError` come from the compiled host (`_lua_host_c.pyx`, over the
system's liblua5.1) when it is built, else from its reference (`_lua_host_py.py`: the same
contract in Python, with lupa's Lua 5.1 as the machine that runs the Lua code); see
engine.wire.kernel_switches for the switches. Both convert values as lupa does, which the
scripting layer (engine.exec.scripting) is written against. Imported on the first script only:
nothing that does not run one pays for a Lua.

Must not touch: anything about scripts (the sandbox, the redis API, replies).
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.exec._lua_host_c import (
        PUSHES_NEVER_FAIL,
        LuaError,
        LuaMemoryError,
        LuaSyntaxError,
        Runtime,
        lua_type,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.exec._lua_host_py import (  # type: ignore[assignment]
        PUSHES_NEVER_FAIL,
        LuaError,
        LuaMemoryError,
        LuaSyntaxError,
        Runtime,
        lua_type,
    )
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["PUSHES_NEVER_FAIL", "LuaError", "LuaMemoryError", "LuaSyntaxError", "Runtime",
           "lua_type"]
