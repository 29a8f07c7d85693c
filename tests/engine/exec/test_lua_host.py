"""The Lua host (engine/exec/lua_host.py): the compiled host over liblua5.1 tested against its
reference in Python over lupa (`_lua_host_py.py`). Each twin alone: values each way, Python
functions called from Lua, tables, errors, the cap, a run by the sandbox's protocol. Both on the
same inputs, a table of cases and hypothesis properties over generated Lua values, Python values,
tables and scripts: the same results, the same errors, and the same run bookkeeping (the kill
flags, the hook's count armed and disarmed, the collector restarted, KEYS and ARGV set and
cleared, a run refused for room at the same byte). The compiled host's own parts hold under
churn: its allocator's free lists, the bytes it keeps for short strings, and a cap that
refuses Lua's allocations but never a push from Python.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire.errors import StreamkeepError
from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

pytest.importorskip("lupa")

host = kernel_fixture("streamkeep.engine.exec", "lua_host")

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A run's state as sandbox.lua's RUN table has it, with stand-ins for its functions: arm,
# disarm and restart note their calls in RUN.log; the handler finds the first frame that is not
# this chunk's as the sandbox's does (past the C function that raised) and makes {err=...} of
# the error with that frame's place; slot 10 is the globals a script reads KEYS and ARGV from
# (RUN and the standard library in reach).
RUN_STATE = b"""
local getinfo = debug.getinfo
local HERE = getinfo(1, 'S').source
local RUN = {false, false, 0, false, {}, log = {}}
local function note(what) RUN.log[#RUN.log + 1] = what end
RUN[6] = function(count) note('arm ' .. count) RUN[3] = count end
RUN[7] = function() note('disarm') RUN[3] = 0 end
RUN[8] = function() note('restart') RUN[4] = false collectgarbage('restart') end
RUN[9] = function(e)
  local level = 2
  local i = getinfo(level, 'Sl')
  if i and i.what == 'C' then level = level + 1 i = getinfo(level, 'Sl') end
  while i and i.source == HERE do level = level + 1 i = getinfo(level, 'Sl') end
  local made = {err = e}
  if i then made.source = i.source made.line = i.currentline end
  return made
end
RUN[10] = setmetatable({RUN = RUN}, {__index = _G})
return RUN
"""


def _state(rt: Any, margin: int = 0, collect_kb: int = 1 << 20) -> Any:
    state = rt.execute(RUN_STATE)
    rt.prepare(state, collect_kb, margin)
    return state


def _script(rt: Any, state: Any, code: bytes) -> Any:
    """A chunk whose globals are the run's (KEYS and ARGV are there while it runs)."""
    return rt.execute(b"local env, code = ... local f = assert(loadstring(code)) "
                      b"setfenv(f, env) return f", state[10], code)


def _callback(rt: Any, state: Any, body: bytes) -> Any:
    """A registered function's callback: `body` with KEYS and ARGV as its two arguments."""
    return _script(rt, state, b"return function(KEYS, ARGV) " + body + b"\nend")()


# --- comparing what two hosts hand over --------------------------------------------------------


def shape(twin: ModuleType, value: Any, objects: tuple = (), depth: int = 0) -> Any:
    """A value `twin` handed over, as a structure two hosts' can be compared by: Lua tables by
    their pairs in Lua's order, other Lua values by their type, Python objects by where they are
    in `objects` (the same object), an exception by its type and message."""
    t = type(value)
    if t is bytes or t is int or t is bool or value is None:
        return (t.__name__, value)
    if t is float:
        return ("float", repr(value))
    for i, known in enumerate(objects):
        if value is known:
            return ("python", i)
    if t is tuple:
        return ("tuple", [shape(twin, v, objects, depth) for v in value])
    kind = twin.lua_type(value)
    if kind == "table":
        if depth > 8:
            return ("table", "...")
        return ("table", [(shape(twin, k, objects, depth + 1), shape(twin, v, objects, depth + 1))
                          for k, v in value.items()])
    if kind is not None:
        return (kind,)
    if isinstance(value, BaseException):
        return ("exception", type(value).__name__, str(value))
    return ("python", type(value).__name__)


def twin_outcome(twin: ModuleType, function: Any, objects: tuple = ()) -> tuple[str, Any]:
    """("ok", the shape of what `function` returned) or ("error", (type name, message))."""
    kind, value = outcome(function)
    return (kind, shape(twin, value, objects)) if kind == "ok" else (kind, value)


def lua_bytes(data: bytes) -> str:
    return '"' + "".join(f"\\{byte:03d}" for byte in data) + '"'


def lua_number(number: float) -> str:
    if isinstance(number, float):
        if number != number:
            return "(0/0)"
        if math.isinf(number):
            return "(1/0)" if number > 0 else "(-1/0)"
    return f"({number!r})"


EDGE_NUMBERS = [0, -0.0, 0.5, -1.5, 2**31, 2**53, 2**53 + 1, 2**63 - 1, 2**63, -(2**63),
                2**64, 1e300, -1e-300, 5e-324, math.nan, math.inf, -math.inf]

lua_numbers = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
                        st.sampled_from(EDGE_NUMBERS)).map(lua_number)
lua_leaves = st.one_of(
    st.sampled_from(["nil", "true", "false", "print", "function() end", "newproxy()",
                     "coroutine.create(function() end)", "python.as_function(PY)", "PY"]),
    lua_numbers, st.binary(max_size=12).map(lua_bytes))
lua_keys = st.one_of(st.binary(max_size=6).map(lua_bytes), st.integers(-3, 12).map(lua_number),
                     st.floats(allow_nan=False).map(lua_number), st.sampled_from(["true", "false"]))


def _table_source(parts: tuple[list[str], list[tuple[str, str]]]) -> str:
    array, fields = parts
    return "{" + ", ".join(array + [f"[{k}] = {v}" for k, v in fields]) + "}"


lua_values = st.recursive(
    lua_leaves,
    lambda inner: st.tuples(st.lists(inner, max_size=5),
                            st.lists(st.tuples(lua_keys, inner), max_size=4)).map(_table_source),
    max_leaves=12)

OBJECTS = (object(), ["a", "list"], {"a": "dict"}, "text", bytearray(b"ba"), ValueError("x"))
python_values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**65), max_value=2**65), st.floats(),
    st.sampled_from([2**53 + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, -0.0]),
    st.binary(max_size=12), st.sampled_from(OBJECTS))


def both_hosts() -> tuple[ModuleType, ModuleType]:
    pure, compiled = pure_and_compiled("streamkeep.engine.exec", "lua_host")
    return compiled, pure


def _python_function(*args: Any) -> bytes:
    return b"called with %d" % len(args)


# --- values -----------------------------------------------------------------------------------


def test_values_from_lua(host: Any) -> None:
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
    with pytest.raises(OverflowError):
        echo(2**63)


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
    # a C function of python.as_function is a Lua function in Python too
    function = rt.execute(b"return python.as_function(...)", lambda *a: len(a))
    assert host.lua_type(function) == "function" and function(1, 2, 3) == 3
    with pytest.raises(host.LuaError, match="as_function: not a Python object"):
        rt.execute(b"return python.as_function(1)")


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
    assert host.lua_type(rt.execute(b"return coroutine.create(function() end)")) == "thread"
    assert host.lua_type(rt.execute(b"return newproxy()")) == "userdata"
    assert host.lua_type(1) is None and host.lua_type(b"x") is None
    # raw: no metamethod runs
    proxied = rt.execute(b"return setmetatable({}, {__index = function() return 1 end, "
                         b"__newindex = function() error('no') end})")
    assert proxied[b"x"] is None
    proxied[b"x"] = 2
    assert proxied[b"x"] == 2


def test_a_table_holding_python_functions_reads_whole(host: Any) -> None:
    """(lupa's own iteration loses its place at such a value: the reference reads the pairs
    another way.)"""
    rt = host.Runtime(0)
    t = rt.execute(b"local f = python.as_function(...) return {a = f, b = 1, c = 2, [f] = 3}",
                   len)
    assert sorted(str(host.lua_type(v) or v) for _, v in t.items()) == ["1", "2", "3", "function"]


def test_a_nil_or_nan_key_is_a_python_error() -> None:
    """Lua refuses them with a longjmp, which the compiled host must never let run through its
    frames (lupa's lua_settable lets it: a process abort outside a protected call)."""
    for twin in both_hosts():
        rt = twin.Runtime(0)
        t = rt.table_from()
        for key in (None, math.nan):
            with pytest.raises(twin.LuaError, match="table index is"):
                t[key] = 1
            with pytest.raises(twin.LuaError, match="table index is"):
                rt.table_from({key: 1})
        # from a Python function Lua called, the refusal is the script's error
        assert rt.execute(b"return (pcall(python.as_function(...)))",
                          lambda rt=rt: rt.table_from({None: 1})) is False


# --- errors ---------------------------------------------------------------------------------


def test_the_errors_are_streamkeeps(host: Any) -> None:
    """Each host's own classes, of the project's one exception base."""
    assert issubclass(host.LuaError, StreamkeepError)
    assert issubclass(host.LuaMemoryError, host.LuaError)
    assert issubclass(host.LuaMemoryError, MemoryError)
    assert issubclass(host.LuaSyntaxError, host.LuaError)


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


def test_an_error_object_that_is_not_a_string() -> None:
    """The compiled host names its type; lupa passes on a string's message only, so the
    reference's message is empty (the module's docstring lists this among lupa's limits)."""
    compiled, pure = both_hosts()
    for chunk, kind in ((b"error({})", "table"), (b"error()", "nil"), (b"error(true)", "boolean")):
        with pytest.raises(compiled.LuaError) as ours:
            compiled.Runtime(0).execute(chunk)
        assert str(ours.value) == f"error object is a {kind} value"
        with pytest.raises(pure.LuaError) as theirs:
            pure.Runtime(0).execute(chunk)
        assert type(theirs.value) is pure.LuaError and str(theirs.value) == ""


def test_what_lupa_hands_back_and_holds() -> None:
    """Two more of lupa's limits the module's docstring lists, pinned for both hosts: a
    coroutine not yet started and a C function of python.as_function go back into Lua as
    themselves from the compiled host, as a function and a userdata from the reference; a
    Python object in Lua is a userdata in both, which cannot be indexed (Lua's message from the
    compiled host, a Python AttributeError from the reference) and has a tostring."""
    compiled, pure = both_hosts()
    for twin, kinds, refusal in ((compiled, (b"thread", b"function"), bytes),
                                 (pure, (b"function", b"userdata"), AttributeError)):
        rt = twin.Runtime(0)
        co = rt.execute(b"return coroutine.create(function() end)")
        f = rt.execute(b"return python.as_function(...)", len)
        assert rt.execute(b"local a, b = ... return type(a), type(b)", co, f) == kinds
        assert rt.execute(b"local f = ... return f('abc')", f) == 3  # (the same function)
        token = object()
        assert rt.execute(b"local o = ... return type(o), (pcall(function() return o.x end)), "
                          b"type(tostring(o))", token) == (b"userdata", False, b"string")
        refused = rt.execute(b"local o = ... return select(2, pcall(function() return o.x end))",
                             token)
        assert isinstance(refused, refusal)


def test_the_cap_stops_lua_and_the_runtime_goes_on(host: Any) -> None:
    rt = host.Runtime(1 << 20)
    with pytest.raises(host.LuaMemoryError):
        rt.execute(b"local t = {} for i = 1, 1e6 do t[i] = i end")
    rt.execute(b"collectgarbage()")
    assert rt.get_memory_used() < 1 << 20
    assert rt.execute(b"return #string.rep('x', 1000)") == 1000


def test_the_heap_is_counted_from_the_built_state(host: Any) -> None:
    rt = host.Runtime(0)
    assert rt.get_memory_used() == 0
    rt.execute(b"KEPT = string.rep('x', 100000) collectgarbage()")
    assert 100000 < rt.get_memory_used() < 200000


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


def test_a_python_function_run_as_a_callback(host: Any) -> None:
    """A C function calling Python, run: called from C, its error handled where no Lua frame
    of the run is below it (the handler places it nowhere)."""
    rt = host.Runtime(8 << 20)
    _state(rt)
    raised = ValueError("bad")

    def callback(keys: Any, argv: Any) -> Any:
        if keys[1] == b"fail":
            raise raised
        return keys[1] + argv[1], b"dropped"

    f = rt.execute(b"return python.as_function(...)", callback)
    assert rt.run(f, (b"k", b"v"), 0, 1, True, 0) == (True, b"kv")
    ok, error = rt.run(f, (b"fail", b"v"), 0, 1, True, 0)
    assert ok is False and error[b"err"] is raised and error[b"source"] is None


def test_a_run_without_room_for_its_arguments_does_not_start(host: Any) -> None:
    rt = host.Runtime(2 << 20)
    _state(rt, margin=1 << 20)
    f = rt.execute(b"return function() return 1 end")
    assert rt.run(f, (b"x" * (2 << 20),), 0, 1, True, 0) == (None, None)
    assert rt.run(f, (b"x" * 100,), 0, 1, True, 0) == (True, 1)


def test_the_room_a_run_needs_is_counted_to_the_byte(host: Any) -> None:
    """A run starts when the heap's use, 64 bytes an argument and their lengths, and the
    margin come to the cap; one byte more and it does not (after a collection)."""
    cap, margin = 4 << 20, 1 << 20
    rt = host.Runtime(cap)
    _state(rt, margin=margin)
    f = rt.execute(b"return function(k, a) return #a[1] end")
    assert rt.run(f, (b"x" * cap,), 0, 0, True, 0) == (None, None)  # (collected: no garbage)
    used = rt.get_memory_used()
    fits = cap - used - margin - 64
    assert rt.run(f, (b"x" * (fits + 1),), 0, 0, True, 0) == (None, None)
    assert rt.get_memory_used() == used
    assert rt.run(f, (b"x" * fits,), 0, 0, True, 0) == (True, fits)


# --- the twins on the same inputs -------------------------------------------------------------

CHUNKS = [
    b"return 1, 2.5, 'x', true, nil",
    b"return string.format('%.17g', 0.1)",
    b"return tostring(2^63), tostring(-0)",
    b"local t = {} for i = 1, 100 do t[i] = string.rep('ab', i) end return #table.concat(t)",
    b"return select('#', unpack({1, 2, nil, 4}, 1, 4))",
    b"return math.huge, -math.huge, 0/0, 2^53 + 1, -2^63, 2^63, 1e308 * 10",
    b"return {1, 2, nil, 4, n = 'x', [2.5] = true, [-1] = {}}",
    b"return {{{{'deep'}}}, {}, {nil, nil, 3}}",
    b"local t = {} t.self = t return t",
    b"return ({pcall(error, {code = 1})})[2].code",
    b"local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1) return b * 2 end) "
    b"return co(1), co(5)",
    b"return coroutine.create(function() end), newproxy(), print, function() end",
    b"return python.as_function(...), python.as_tuple_function(...)",
    b"return (...)",
    b"local f = ... return f(1, 'two', nil, {3})",
    b"return python.as_function(...)(2^63, 0/0, -0, 'x\\0y')",
    b"error('x')",
    b"error('x', 0)",
    b"error(12)",
    b"error('not enough memory here')",
    b"error('two\\nlines')",
    b"return nosuch.field",
    b"return {[0/0] = 1}",
    b"return python.as_function(1)",
    b"return python.as_tuple_function({})",
    b"return python.as_function(python.as_function(...))",
    b"return (",
    b"x = = 1",
    b"local s = string.rep('x', 1e6) local t = {} for i = 1, 1e7 do t[i] = s .. i end",
]


@pytest.mark.parametrize("chunk", CHUNKS, ids=range(len(CHUNKS)))
def test_the_twins_answer_alike(chunk: bytes) -> None:
    answers = [twin_outcome(twin, lambda twin=twin: twin.Runtime(8 << 20).execute(
        chunk, _python_function), (_python_function,)) for twin in both_hosts()]
    assert answers[0] == answers[1]


@PROPERTY
@given(values=st.lists(lua_values, min_size=1, max_size=4))
def test_lua_values_reach_python_alike(values: list[str]) -> None:
    """Generated Lua values (numbers at every edge, binary strings, tables with holes, nested,
    keyed by strings, numbers and booleans, functions, coroutines, userdata, Python's)
    returned to Python: the same values, tables with the same pairs in the same order."""
    chunk = ("local PY = ... return " + ", ".join(values)).encode()
    answers = [twin_outcome(twin, lambda twin=twin: twin.Runtime(0).execute(chunk, _python_function),
                            (_python_function,)) for twin in both_hosts()]
    assert answers[0] == answers[1]


@PROPERTY
@given(values=st.lists(python_values, max_size=6))
def test_python_values_reach_lua_alike(values: list[Any]) -> None:
    """Generated Python values handed to Lua: Lua sees the same types and numbers, and gets
    back the same values (the same objects), or both refuse them alike."""
    chunk = (b"local out = {} for i = 1, select('#', ...) do local v = select(i, ...) "
             b"out[i] = type(v) == 'number' and string.format('%.17g', v) or type(v) end "
             b"return out, ...")
    objects = tuple(values)
    answers = [twin_outcome(twin, lambda twin=twin: twin.Runtime(0).execute(chunk, *values),
                            objects) for twin in both_hosts()]
    assert answers[0] == answers[1]


@PROPERTY
@given(arguments=st.lists(lua_values, max_size=4),
       results=st.one_of(python_values, st.lists(python_values, max_size=4).map(tuple)))
def test_python_functions_called_from_lua_alike(arguments: list[str], results: Any) -> None:
    """A Python function called from Lua with generated values gets the same arguments, and
    what it returns (one value, or a tuple of them) reaches Lua alike."""
    chunk = ("local f, PY = ... return select('#', f(" + ", ".join(arguments) + ")), f()").encode()
    answers = []
    for twin in both_hosts():
        seen: list[Any] = []

        def function(*args: Any, twin: ModuleType = twin, seen: list[Any] = seen) -> Any:
            seen.append([shape(twin, a, (_python_function,)) for a in args])
            return results

        got = twin_outcome(twin, lambda twin=twin, function=function: twin.Runtime(0).execute(
            chunk, function, _python_function), OBJECTS)
        answers.append((got, seen))
    assert answers[0] == answers[1]


keys_py = st.one_of(st.binary(max_size=6), st.integers(-3, 12), st.booleans(),
                    st.floats(allow_nan=False), st.sampled_from([None, math.nan, 2**63]))
sources = st.lists(st.one_of(st.dictionaries(keys_py, python_values, max_size=5),
                             st.lists(python_values, max_size=5)), max_size=3)


@PROPERTY
@given(sources=sources, reads=st.lists(keys_py, max_size=4),
       writes=st.lists(st.tuples(keys_py, python_values), max_size=4))
def test_tables_made_read_and_written_alike(sources: list[Any], reads: list[Any],
                                             writes: list[Any]) -> None:
    """table_from over generated dicts and lists, raw reads and writes of generated keys
    (nil and NaN refused, 2^63 out of range): the same pairs in the same order, the same
    values, the same errors."""
    objects = tuple(v for s in sources for v in (s.values() if isinstance(s, dict) else s))
    answers = []
    for twin in both_hosts():
        rt = twin.Runtime(0)
        steps: list[Any] = [twin_outcome(twin, lambda rt=rt: rt.table_from(*sources), objects)]
        table = rt.table_from()
        for key, value in writes:
            steps.append(outcome(table.__setitem__, key, value))
        steps.extend(twin_outcome(twin, lambda key=key, table=table: table[key],
                                  objects) for key in reads)
        steps.append(shape(twin, table, objects))
        answers.append(steps)
    assert answers[0] == answers[1]


# Generated scripts: what a run does to the run's state before it ends, and how it ends.
ACTIONS = [
    "RUN[3] = nil",  # the run changed the hook's count
    "RUN[4] = true collectgarbage('stop')",  # collectgarbage('stop')
    "RUN[5][#RUN[5] + 1] = coroutine.create(function() end)",  # a coroutine left resuming
    "RUN[1] = true", "RUN[2] = true",
    "local t = {} for i = 1, 300 do t[i] = {i} end",
]
ENDINGS = st.one_of(
    lua_values.map(lambda v: "return " + v),
    lua_values.map(lambda v: f"error({v}, 0)"),
    st.sampled_from([
        "return KEYS, ARGV", "return #KEYS, #ARGV", "return KEYS[1]", "error('boom')",
        "FAIL('bad')", "local x return x.y", "return PY(KEYS[1], ARGV)",
        "return coroutine.wrap(function() error('in a coroutine') end)()",
        "return pcall(FAIL, 'caught')", "error(RUN)", "return RUN",
    ]))
runs = st.lists(st.tuples(
    st.lists(st.sampled_from(ACTIONS), max_size=3), ENDINGS,
    st.lists(st.one_of(st.binary(max_size=8), st.just(b"fail")), max_size=5),  # argv
    st.integers(0, 5), st.integers(0, 5),  # first, nkeys (clamped to argv)
    st.sampled_from(["script", "callback", "python"]),
    st.sampled_from([0, 5, 100000]),  # count
    st.lists(st.sampled_from(["1", "2", "3", "4", "5"]), max_size=2)),  # slots set before
    min_size=1, max_size=4)


def _fail(message: bytes) -> None:
    raise ValueError(message)


@PROPERTY
@given(runs=runs, collect=st.booleans())
def test_runs_alike(runs: list[Any], collect: bool) -> None:
    """Generated scripts, registered functions and Python callbacks run one after another in a
    runtime, with generated KEYS and ARGV, hook counts and run states left by the run before:
    the same outcomes (results, the handler's errors with their places) and the same
    bookkeeping after each run (the run state's slots, the calls to arm, disarm and restart,
    KEYS and ARGV gone from the globals)."""
    answers = []
    for twin in both_hosts():
        rt = twin.Runtime(32 << 20)
        state = _state(rt, collect_kb=0 if collect else 1 << 20)
        state[10][b"FAIL"] = _fail
        state[10][b"PY"] = _python_function

        def callback(keys: Any, argv: Any, twin: ModuleType = twin) -> Any:
            if keys[1] == b"fail":
                raise ValueError("from Python")
            return keys[1], keys

        steps = []
        for actions, ending, argv, first, nkeys, kind, count, preset in runs:
            first = min(first, len(argv))
            nkeys = min(nkeys, len(argv) - first)
            body = "\n".join([*actions, ending]).encode()
            if kind == "script":
                function = _script(rt, state, body)
            elif kind == "callback":
                function = _callback(rt, state, body)
            else:
                function = rt.execute(b"return python.as_function(...)", callback)
            for slot in preset:
                rt.execute(b"local RUN, slot = ... if slot == 5 then RUN[5][1] = 1 "
                           b"else RUN[slot] = true end", state, int(slot))
            got = twin_outcome(twin, lambda f=function, a=argv, fi=first, n=nkeys, k=kind,
                               c=count, rt=rt: rt.run(f, a, fi, n, k != "script", c),
                               (_fail, state))
            after = [shape(twin, state[i], (state,)) for i in range(1, 5)]
            after.append(shape(twin, rt.execute(b"local r = ... return #r", state[5])))
            after.append(shape(twin, state[b"log"]))
            after.append((state[10][b"KEYS"], state[10][b"ARGV"]))
            rt.execute(b"local RUN = ... RUN.log = {} collectgarbage('restart')", state)
            steps.append((got, after))
        answers.append(steps)
    assert answers[0] == answers[1]


def test_a_run_out_of_memory_alike() -> None:
    answers = []
    for twin in both_hosts():
        rt = twin.Runtime(2 << 20)
        state = _state(rt)
        f = _script(rt, state, b"local t = {} for i = 1, 1e7 do t[i] = i end")
        answers.append([rt.run(f, (), 0, 0, False, 0), rt.get_memory_used() <= 2 << 20,
                        (state[10][b"KEYS"], state[10][b"ARGV"]),
                        rt.run(_script(rt, state, b"return 'after'"), (), 0, 0, False, 0)])
    assert answers[0] == answers[1] == [(False, b"not enough memory"), True, (None, None),
                                        (True, b"after")]


# --- the compiled host's own parts ------------------------------------------------------------


@PROPERTY
@given(sizes=st.lists(st.integers(min_value=0, max_value=600), min_size=1, max_size=300),
       drop=st.integers(min_value=1, max_value=5))
def test_blocks_of_every_size_made_grown_and_freed(sizes: list[int], drop: int) -> None:
    """Strings and tables of the sizes drawn, some dropped and collected, others grown: both
    twins hold exactly what was put in (the compiled allocator's free lists reuse blocks across
    classes and into malloc's sizes)."""
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
    for twin in both_hosts():
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
    compiled, _ = both_hosts()
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
