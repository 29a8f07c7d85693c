"""The Lua host (engine/exec/lua_host.py), each twin: the compiled host over liblua5.1 and its
twin over lupa take and give the same values, raise the same errors and run a script by the
sandbox's protocol alike; fed the same chunks they answer alike. The compiled host's own parts
hold under churn: its allocator's free lists (blocks of every size made, grown, shrunk and
freed), the bytes it keeps for short strings (a place Lua reuses for another string), and a cap
that refuses Lua's allocations but never a push from Python.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

pytest.importorskip("lupa")

host = kernel_fixture("streamkeep.engine.exec", "lua_host")

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A run's state as sandbox.lua's RUN table has it, with stand-ins for its functions: arm and
# disarm note the count, the handler wraps the error in {err=...}; slot 10 is the globals a
# script reads KEYS and ARGV from.
RUN_STATE = b"""
local RUN = {false, false, 0, false, {}}
RUN[6] = function(count) RUN[3] = count end
RUN[7] = function() RUN[3] = 0 end
RUN[8] = function() RUN[4] = false collectgarbage('restart') end
RUN[9] = function(e) return {err = e} end
RUN[10] = {}
return RUN
"""


def _state(rt: Any, margin: int = 0) -> Any:
    state = rt.execute(RUN_STATE)
    rt.prepare(state, 1 << 20, margin)
    return state


def _script(rt: Any, state: Any, code: bytes) -> Any:
    """A chunk whose globals are the run's (KEYS and ARGV are there while it runs)."""
    return rt.execute(b"local env, code = ... local f = assert(loadstring(code)) "
                      b"setfenv(f, env) return f", state[10], code)


# --- values ---------------------------------------------------------------------------------


def test_values_from_lua_are_lupas(host: Any) -> None:
    rt = host.Runtime(0)
    got = rt.execute(b"return 'a\\0b', 1, 1.5, -0.5, 2^53, 2^63, -2^63, 1/0, true, false, nil")
    assert got == (b"a\x00b", 1, 1.5, -0.5, 2**53, 2.0**63, -(2**63), math.inf, True, False,
                   None)
    assert [type(v) for v in got[:4]] == [bytes, int, float, float]
    assert math.isnan(rt.execute(b"return 0/0"))
    assert rt.execute(b"return") is None
    assert rt.execute(b"return -0") == 0


def test_values_into_lua_come_back_as_they_were(host: Any) -> None:
    rt = host.Runtime(0)
    echo = rt.execute(b"return function(...) return ... end")
    token = object()
    values = (b"", b"x\xff", 0, -7, 2**53, 0.25, True, False, None, token)
    assert echo(*values) == values
    assert echo(token) is token
    kinds = rt.execute(b"local t = {} for i = 1, select('#', ...) do t[i] = type(select(i, ...)) "
                       b"end return table.concat(t, ',')", b"s", 1, 1.5, True, None, token)
    assert kinds == b"string,number,number,boolean,nil,userdata"


def test_python_functions_called_from_lua(host: Any) -> None:
    rt = host.Runtime(0)
    assert rt.execute(b"return python.as_function(...)(1, 'x', nil)",
                      lambda *a: repr(a).encode()) == b"(1, b'x', None)"
    assert rt.execute(b"local a, b = python.as_function(...)() return b", lambda: (1, 2)) == 2
    assert rt.execute(b"return select('#', python.as_function(...)())", lambda: ()) == 0
    assert rt.execute(b"return python.as_tuple_function(...)(1, 'x')",
                      lambda args: repr(args).encode()) == b"(1, b'x')"
    assert rt.execute(b"return type(python.as_function(...))", len) == b"function"
    # a wrapped object is called through its userdata
    assert rt.execute(b"local f = ... return f(2, 3)", lambda a, b: a * b) == 6


def test_tables(host: Any) -> None:
    rt = host.Runtime(0)
    t = rt.table_from({b"a": 1}, [b"x", b"y"])
    assert sorted(t.items(), key=repr) == [(1, b"x"), (2, b"y"), (b"a", 1)]
    assert sorted(t, key=repr) == [1, 2, b"a"]
    assert t[b"a"] == 1 and t[2] == b"y" and t[3] is None
    t[b"z"] = 2
    t[1] = None
    assert rt.execute(b"local t = ... return t.z, t[1]", t) == (2, None)
    assert host.lua_type(t) == "table"
    assert host.lua_type(rt.execute(b"return print")) == "function"
    # (lupa calls a coroutine a function; Lua, and the compiled host, a thread)
    thread = host.lua_type(rt.execute(b"return coroutine.create(function() end)"))
    assert thread == ("thread" if host.__name__.endswith("_c") else "function")
    assert host.lua_type(1) is None and host.lua_type(b"x") is None


# --- errors ---------------------------------------------------------------------------------


def test_errors(host: Any) -> None:
    rt = host.Runtime(0)
    with pytest.raises(host.LuaError, match="boom"):
        rt.execute(b"error('boom')")
    with pytest.raises(host.LuaSyntaxError):
        rt.execute(b"return (")
    assert rt.execute(b"return 1 + 1") == 2  # (still usable)


def test_a_python_exception_crosses_lua_as_itself(host: Any) -> None:
    rt = host.Runtime(0)
    raised = ValueError("bad")

    def fail(*args: Any) -> None:
        raise raised

    with pytest.raises(ValueError) as info:
        rt.execute(b"python.as_function(...)()", fail)
    assert info.value is raised
    caught = rt.execute(b"local ok, e = pcall(python.as_function(...)) return ok, type(e), e", fail)
    assert caught == (False, b"userdata", raised)


def test_the_cap_stops_lua_and_the_runtime_goes_on(host: Any) -> None:
    rt = host.Runtime(1 << 20)
    with pytest.raises(host.LuaMemoryError):
        rt.execute(b"local t = {} for i = 1, 1e6 do t[i] = i end")
    rt.execute(b"collectgarbage()")
    assert rt.get_memory_used() < 1 << 20
    assert rt.execute(b"return #string.rep('x', 1000)") == 1000


def test_a_compiled_hosts_push_never_fails(host: Any) -> None:
    """Past the cap, what Python hands over still arrives (no allocation failure may unwind
    through the host's frames); Lua's next allocation is refused."""
    if not host.PUSHES_NEVER_FAIL:
        pytest.skip("lupa's pushes may fail: the scripting layer keeps room for them")
    rt = host.Runtime(1 << 20)
    big = b"x" * (4 << 20)
    assert rt.execute(b"return #...", big) == len(big)
    with pytest.raises(host.LuaMemoryError):
        rt.execute(b"local s = ... return #(s .. 'y')", big)
    assert rt.execute(b"return 1") == 1


# --- a run ----------------------------------------------------------------------------------


def test_a_registered_functions_run(host: Any) -> None:
    rt = host.Runtime(8 << 20)
    _state(rt)
    f = rt.execute(b"return function(k, a) return #k .. ':' .. #a .. ':' .. k[1] .. a[2] end")
    argv = [b"FCALL", b"f", b"1", b"key", b"a1", b"a2"]
    assert rt.run(f, argv, 3, 1, True, 0) == (True, b"1:2:keya2")
    assert rt.run(f, tuple(argv), 3, 1, True, 0) == (True, b"1:2:keya2")


def test_a_scripts_run_sees_keys_and_argv_as_globals_for_the_run_only(host: Any) -> None:
    rt = host.Runtime(8 << 20)
    state = _state(rt)
    f = _script(rt, state, b"return KEYS[1] .. ARGV[1] .. #ARGV")
    assert rt.run(f, (b"EVAL", b"...", b"1", b"k", b"v"), 3, 1, False, 0) == (True, b"kv1")
    assert state[10][b"KEYS"] is None and state[10][b"ARGV"] is None


def test_a_run_clears_the_kill_flags_and_arms_the_hook_only_when_its_count_changes(
        host: Any) -> None:
    rt = host.Runtime(8 << 20)
    state = _state(rt)
    state[1] = state[2] = True
    f = rt.execute(b"return function() return 1 end")
    assert rt.run(f, (), 0, 0, True, 5) == (True, 1)
    assert (state[1], state[2], state[3]) == (False, False, 5)
    # a run that changes the armed count is disarmed after it
    rearm = rt.execute(b"local RUN = ... return function() RUN[3] = nil return 2 end", state)
    assert rt.run(rearm, (), 0, 0, True, 5) == (True, 2)
    assert state[3] == 0


def test_a_failing_run_gives_the_handlers_error(host: Any) -> None:
    rt = host.Runtime(8 << 20)
    _state(rt)
    f = rt.execute(b"return function() error('nope', 0) end")
    ok, error = rt.run(f, (), 0, 0, True, 0)
    assert ok is False and error[b"err"] == b"nope"


def test_a_run_without_room_for_its_arguments_does_not_start(host: Any) -> None:
    rt = host.Runtime(2 << 20)
    _state(rt, margin=1 << 20)
    f = rt.execute(b"return function() return 1 end")
    assert rt.run(f, (b"x" * (2 << 20),), 0, 1, True, 0) == (None, None)
    assert rt.run(f, (b"x" * 100,), 0, 1, True, 0) == (True, 1)


# --- the same chunks, both twins --------------------------------------------------------------

CHUNKS = [
    b"return 1, 2.5, 'x', true, nil",
    b"return string.format('%.17g', 0.1)",
    b"return tostring(2^63), tostring(-0)",
    b"local t = {} for i = 1, 100 do t[i] = string.rep('ab', i) end return #table.concat(t)",
    b"return select('#', unpack({1, 2, nil, 4}, 1, 4))",
    b"return math.huge, -math.huge",
    b"return ({pcall(error, {code = 1})})[2].code",
    b"local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end) "
    b"return co(1), co(5)",
    b"error('x')",
    b"return nosuch.field",
]


@pytest.mark.parametrize("chunk", CHUNKS, ids=range(len(CHUNKS)))
def test_the_twins_answer_alike(chunk: bytes) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.exec", "lua_host")
    ours, theirs = (outcome(twin.Runtime(8 << 20).execute, chunk) for twin in (compiled, pure))
    if ours[0] == "error":  # (lupa adds Lua's traceback to the message: the first line counts)
        ours = ("error", (ours[1][0], ours[1][1].splitlines()[0]))
        theirs = ("error", (theirs[1][0], theirs[1][1].splitlines()[0]))
    assert ours == theirs


@PROPERTY
@given(sizes=st.lists(st.integers(min_value=0, max_value=600), min_size=1, max_size=300),
       drop=st.integers(min_value=1, max_value=5))
def test_blocks_of_every_size_made_grown_and_freed(sizes: list[int], drop: int) -> None:
    """Strings and tables of the sizes drawn, some dropped and collected, others grown: both
    twins hold exactly what was put in (the compiled allocator's free lists reuse blocks across
    classes and into malloc's sizes)."""
    pure, compiled = pure_and_compiled("streamkeep.engine.exec", "lua_host")
    chunk = (b"local sizes, drop = ... local s, t = {}, {} "
             b"for i = 1, #sizes do s[i] = string.rep('x', sizes[i]) .. i "
             b"local row = {} for j = 1, sizes[i] % 40 do row[j] = j end t[i] = row end "
             b"for i = 1, #sizes, drop do s[i], t[i] = nil, nil end collectgarbage() "
             b"for i = 2, #sizes, drop do local row = t[i] if row then "
             b"for j = #row + 1, #row + 30 do row[j] = j end end end "
             b"local total, rows = 0, 0 for i = 1, #sizes do "
             b"if s[i] then total = total + #s[i] end if t[i] then rows = rows + #t[i] end end "
             b"return total, rows")
    answers = []
    for twin in (compiled, pure):
        rt = twin.Runtime(64 << 20)
        answers.append(rt.execute(chunk, rt.table_from(sizes), drop))
    kept = [i for i in range(len(sizes)) if i % drop]
    grown = {i for i in range(1, len(sizes), drop)}
    total = sum(sizes[i] + len(str(i + 1)) for i in kept)
    rows = sum(sizes[i] % 40 + (30 if i in grown else 0) for i in kept)
    assert answers == [(total, rows), (total, rows)]


def test_short_strings_handed_over_again_are_right_when_lua_reuses_their_place(
        host: Any) -> None:
    rt = host.Runtime(64 << 20)
    seen: list[bytes] = []
    rt.execute(b"local f = python.as_function(...) for i = 1, 20000 do f('k' .. i % 3000 .. "
               b"string.rep('z', i % 50)) if i % 97 == 0 then collectgarbage() end end",
               seen.append)
    assert seen == [b"k%d" % (i % 3000) + b"z" * (i % 50) for i in range(1, 20001)]


def test_the_compiled_host_hands_out_one_bytes_for_a_short_string() -> None:
    _, compiled = pure_and_compiled("streamkeep.engine.exec", "lua_host")
    rt = compiled.Runtime(0)
    name = rt.execute(b"return function() return 'HGET' end")
    assert name() is name()
    long = rt.execute(b"local s = string.rep('y', 100) return function() return s end")
    assert long() == long() == b"y" * 100


def test_a_cycle_through_lua_is_collected(host: Any) -> None:
    """A runtime holding a Python object that holds the runtime (the scripting layer's bound
    methods in Lua) goes when nothing else holds either."""
    import gc
    import weakref

    class Holder:
        pass

    holder = Holder()
    holder.rt = host.Runtime(0)  # type: ignore[attr-defined]
    holder.rt.execute(b"HELD = python.as_function(...)", holder.rt.execute)  # type: ignore
    holder.rt.execute(b"ALSO = ...", holder)  # type: ignore[attr-defined]
    gone = weakref.ref(holder)
    del holder
    gc.collect()
    assert gone() is None


def test_a_nil_or_nan_key_is_a_python_error_for_the_compiled_host() -> None:
    """Lua refuses them with a longjmp, which the host must never let run through its frames
    (lupa's lua_settable lets it: a process abort outside a protected call)."""
    _, compiled = pure_and_compiled("streamkeep.engine.exec", "lua_host")
    rt = compiled.Runtime(0)
    t = rt.table_from()
    for key in (None, math.nan):
        with pytest.raises(compiled.LuaError, match="table index is"):
            t[key] = 1
        with pytest.raises(compiled.LuaError, match="table index is"):
            rt.table_from({key: 1})
    # from a Python function Lua called, the refusal is the script's error
    assert rt.execute(b"return (pcall(python.as_function(...)))",
                      lambda: rt.table_from({None: 1})) is False
