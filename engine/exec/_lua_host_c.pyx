# cython: language_level=3
"""The compiled Lua host: Lua 5.1 (the system's liblua5.1, the Lua Redis embeds) and the values
a script exchanges with Python, without a layer between them.

Owns `Runtime` (a Lua state with a capped heap, the standard libraries, and
`python.as_function` / `python.as_tuple_function` for the sandbox; a script's run, by the
protocol sandbox.lua describes at its RUN table), the Lua values as Python sees them
(`LuaTable`, `LuaFunction`, `LuaObject`), `lua_type`, and the errors (`LuaError`,
`LuaMemoryError`, `LuaSyntaxError`), and the heap's allocator. Its pure twin
(`_lua_host_py.py`) gives the same surface over lupa; engine.exec.lua_host picks one.

The conversions, both ways as lupa makes them (the scripting layer was written against lupa's):
a Lua string is bytes, a number an int when integral and in int64's range (else a float), a
boolean a bool, nil None, a wrapped Python object the object itself, anything else a Lua
object holding a reference. Going in, None is nil, a bool a boolean, an int or a float a number,
bytes a string, a Lua object its value, and any other Python object a userdata wrapping it
(called through `__call`, handed back as itself). A Python function's tuple result is its
results, one each. The bytes of a short string Lua hands over again are the same object as
last time (Runtime.short_bytes), so their hash is computed once.

Errors. A Python exception in a function Lua called is raised into Lua as the exception object
(a userdata; the sandbox unwraps it) only after every Python reference of that call is
released: Lua's errors are longjmps and would skip Python's cleanup. For the same reason the
heap's cap is enforced only while Lua runs: what Python pushes (arguments, results, tables) is
never refused half-way (the scripting layer keeps room for it), so no allocation failure can
unwind through this module's frames. A Lua error that reaches Python is LuaError (its message),
a heap that ran out LuaMemoryError, a Python exception that crossed Lua that exception again.

Must not touch: anything about scripts (the sandbox, the redis API, replies: engine.exec.scripting
and engine/exec/lua/), the engine's state.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLongLong, PyLong_FromLongLong
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from libc.stdio cimport fflush, fprintf, stderr
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

from streamkeep.engine.wire.errors import StreamkeepError


cdef extern from "lua.h":
    ctypedef struct lua_State
    ctypedef int (*lua_CFunction)(lua_State*) noexcept
    ctypedef void* (*lua_Alloc)(void*, void*, size_t, size_t) noexcept
    ctypedef double lua_Number
    enum:
        LUA_REGISTRYINDEX
        LUA_GLOBALSINDEX
        LUA_MULTRET
        LUA_ERRMEM
        LUA_TNIL
        LUA_TBOOLEAN
        LUA_TLIGHTUSERDATA
        LUA_TNUMBER
        LUA_TSTRING
        LUA_TTABLE
        LUA_TFUNCTION
        LUA_TUSERDATA
        LUA_TTHREAD
        LUA_NOREF
        LUA_GCCOLLECT
        LUA_GCCOUNT
    lua_State* lua_newstate(lua_Alloc f, void* ud)
    void lua_close(lua_State* L)
    lua_CFunction lua_atpanic(lua_State* L, lua_CFunction panicf)
    lua_Alloc lua_getallocf(lua_State* L, void** ud)
    int lua_gettop(lua_State* L)
    void lua_settop(lua_State* L, int idx)
    void lua_pushvalue(lua_State* L, int idx)
    int lua_checkstack(lua_State* L, int extra)
    int kind_at "lua_type"(lua_State* L, int idx)
    const char* lua_typename(lua_State* L, int tp)
    lua_Number lua_tonumber(lua_State* L, int idx)
    int lua_toboolean(lua_State* L, int idx)
    const char* lua_tolstring(lua_State* L, int idx, size_t* len)
    void* lua_touserdata(lua_State* L, int idx)
    void lua_pushnil(lua_State* L)
    void lua_pushnumber(lua_State* L, lua_Number n)
    void lua_pushlstring(lua_State* L, const char* s, size_t l)
    void lua_pushstring(lua_State* L, const char* s)
    void lua_pushcclosure(lua_State* L, lua_CFunction fn, int n)
    void lua_pushboolean(lua_State* L, int b)
    void lua_rawget(lua_State* L, int idx)
    void lua_rawgeti(lua_State* L, int idx, int n)
    void lua_createtable(lua_State* L, int narr, int nrec)
    void* lua_newuserdata(lua_State* L, size_t sz)
    int lua_getmetatable(lua_State* L, int objindex)
    void lua_setfield(lua_State* L, int idx, const char* k)
    void lua_rawset(lua_State* L, int idx)
    void lua_rawseti(lua_State* L, int idx, int n)
    int lua_setmetatable(lua_State* L, int objindex)
    int lua_pcall(lua_State* L, int nargs, int nresults, int errfunc)
    int lua_error(lua_State* L)
    int lua_next(lua_State* L, int idx)
    int lua_rawequal(lua_State* L, int idx1, int idx2)
    int lua_upvalueindex(int i)
    int lua_gc(lua_State* L, int what, int data)


cdef extern from "lauxlib.h":
    int luaL_ref(lua_State* L, int t)
    void luaL_unref(lua_State* L, int t, int ref)
    int luaL_loadbuffer(lua_State* L, const char* buff, size_t sz, const char* name)


cdef extern from "lualib.h":
    void luaL_openlibs(lua_State* L)


# What Python pushes into Lua never fails: the heap's cap holds only while Lua runs.
PUSHES_NEVER_FAIL = True


class LuaError(StreamkeepError):
    """A Lua error that reached Python (its message)."""


class LuaMemoryError(LuaError, MemoryError):
    """The Lua heap reached its cap."""


class LuaSyntaxError(LuaError):
    """A chunk that does not compile."""


# --- the heap ---------------------------------------------------------------------------------

# Lua allocates and frees a few small blocks per call (a table and its array, a string):
# blocks up to SMALL_MAX bytes come from free lists, one per 16-byte size class, each block of
# its class's full size (so any block on a list holds any size of its class); bigger ones come
# from malloc. A list keeps at most FREE_KEPT blocks (the rest go back to malloc), and the
# lists go with the state.
# sandbox.lua's RUN table, the slots `Runtime.run` reads and writes (see there).
cdef enum:
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


cdef enum:
    CACHED_MAX = 64  # the longest string whose bytes Runtime.short_bytes keeps
    CACHE_SLOTS = 256
    SMALL_MAX = 128
    CLASSES = 8  # SMALL_MAX / 16
    FREE_KEPT = 4096


cdef struct Heap:
    size_t used
    size_t limit  # 0: none
    bint strict  # the cap is enforced (only while Lua runs: see the module's docstring)
    void* runtime  # the Runtime this heap is (borrowed: the runtime owns the state)
    int wrapped_meta  # the registry's reference to the wrapped Python objects' metatable
    PyObject* refs  # the Runtime's `refs` (borrowed; NULL once the runtime goes)
    void* free[CLASSES]  # each class's free blocks, linked through their first word
    int kept[CLASSES]


cdef inline int _class_of(size_t size) noexcept:
    return <int>((size - 1) >> 4)


cdef inline void* _small(Heap* heap, int c) noexcept:
    cdef void* block = heap.free[c]
    if block != NULL:
        heap.free[c] = (<void**>block)[0]
        heap.kept[c] -= 1
        return block
    return malloc(<size_t>(c + 1) << 4)


cdef inline void _release_small(Heap* heap, void* block, int c) noexcept:
    if heap.kept[c] >= FREE_KEPT:
        free(block)
        return
    (<void**>block)[0] = heap.free[c]
    heap.free[c] = block
    heap.kept[c] += 1


cdef void _free_lists(Heap* heap) noexcept:
    cdef int c
    cdef void* block
    for c in range(CLASSES):
        while heap.free[c] != NULL:
            block = heap.free[c]
            heap.free[c] = (<void**>block)[0]
            free(block)
        heap.kept[c] = 0


cdef void* _allocate(void* ud, void* ptr, size_t old_size, size_t new_size) noexcept:
    cdef Heap* heap = <Heap*>ud
    cdef void* block
    if ptr == NULL:
        old_size = 0
    if new_size == 0:
        if ptr != NULL:
            if old_size <= SMALL_MAX:
                _release_small(heap, ptr, _class_of(old_size))
            else:
                free(ptr)
            heap.used -= old_size
        return NULL
    if (heap.strict and heap.limit and new_size > old_size
            and heap.used + new_size - old_size > heap.limit):
        return NULL  # (Lua raises its memory error; shrinking never fails)
    if new_size <= SMALL_MAX:
        if ptr != NULL and old_size <= SMALL_MAX and _class_of(old_size) == _class_of(new_size):
            block = ptr
        else:
            block = _small(heap, _class_of(new_size))
            if block == NULL:
                return NULL
            if ptr != NULL:
                memcpy(block, ptr, old_size if old_size < new_size else new_size)
                if old_size <= SMALL_MAX:
                    _release_small(heap, ptr, _class_of(old_size))
                else:
                    free(ptr)
    elif ptr == NULL:
        block = malloc(new_size)
        if block == NULL:
            return NULL
    elif old_size <= SMALL_MAX:
        block = malloc(new_size)
        if block == NULL:
            return NULL
        memcpy(block, ptr, old_size)
        _release_small(heap, ptr, _class_of(old_size))
    else:
        block = realloc(ptr, new_size)
        if block == NULL:
            return NULL
    heap.used = heap.used + new_size - old_size
    return block


cdef int _panic(lua_State* L) noexcept:
    cdef const char* message = lua_tolstring(L, -1, NULL)
    if message == NULL:
        message = "error object is not a string"
    fprintf(stderr, "PANIC: unprotected error in call to Lua API (%s)\n", message)
    fflush(stderr)
    return 0


cdef inline Runtime _runtime_of(lua_State* L):
    cdef void* ud = NULL
    lua_getallocf(L, &ud)
    return <Runtime>(<Heap*>ud).runtime


# --- Python objects in Lua --------------------------------------------------------------------

# A wrapped object's userdata holds it borrowed: the strong reference is in its runtime's
# `refs` (the object's address -> [the object, how many userdata hold it]), where Python's
# collector sees it, so a cycle through Lua (a runtime holding a Python object that holds the
# runtime: the scripting layer's bound methods) is collected like any other.

cdef struct Wrapped:
    PyObject* obj  # borrowed (see above); NULL once released


cdef int _wrapped_gc(lua_State* L) noexcept:
    cdef Wrapped* w = <Wrapped*>lua_touserdata(L, 1)
    cdef void* ud = NULL
    if w == NULL or w.obj == NULL:
        return 0
    lua_getallocf(L, &ud)
    if (<Heap*>ud).refs != NULL:
        _release(<dict>(<Heap*>ud).refs, w.obj)
    w.obj = NULL
    return 0


cdef void _release(dict refs, PyObject* obj) noexcept:
    key = <Py_ssize_t>obj
    held = refs.get(key)
    if held is None:  # (the collector emptied `refs` to break a cycle)
        return
    if held[1] <= 1:
        del refs[key]
    else:
        held[1] -= 1


cdef int _wrapped_call(lua_State* L) noexcept:
    """A wrapped Python object called from Lua (its userdata is the first argument)."""
    cdef Wrapped* w = <Wrapped*>lua_touserdata(L, 1)
    cdef int n = _call_python(L, w.obj, 2, False)
    if n < 0:
        return lua_error(L)
    return n


cdef inline int _call_upvalue(lua_State* L, bint packed) noexcept:
    """A closure of `_closure` called: the wrapped object in its upvalue gets the arguments."""
    cdef Wrapped* w = <Wrapped*>lua_touserdata(L, lua_upvalueindex(1))
    cdef int n = _call_python(L, w.obj, 1, packed)
    if n < 0:
        return lua_error(L)
    return n


cdef int _function_call(lua_State* L) noexcept:
    return _call_upvalue(L, False)


cdef int _tuple_function_call(lua_State* L) noexcept:
    return _call_upvalue(L, True)


cdef inline int _closure(lua_State* L, lua_CFunction call, const char* refusal) noexcept:
    """A C function calling the wrapped Python object that is the first argument (type()
    says 'function'), or `refusal` raised when it is not one."""
    if _unwrap(L, 1) == NULL:
        lua_pushstring(L, refusal)
        return lua_error(L)
    lua_settop(L, 1)
    lua_pushcclosure(L, call, 1)
    return 1


cdef int _as_function(lua_State* L) noexcept:
    """python.as_function: the object called with the arguments."""
    return _closure(L, _function_call, "as_function: not a Python object")


cdef int _as_tuple_function(lua_State* L) noexcept:
    """python.as_tuple_function: the object called with one tuple of the arguments (a Python
    function that takes them so is called for less)."""
    return _closure(L, _tuple_function_call, "as_tuple_function: not a Python object")


cdef PyObject* _unwrap(lua_State* L, int index) noexcept:
    """The Python object a userdata at `index` wraps, else NULL."""
    cdef Wrapped* w
    cdef bint ours
    if kind_at(L, index) != LUA_TUSERDATA or not lua_getmetatable(L, index):
        return NULL
    cdef void* ud = NULL
    lua_getallocf(L, &ud)
    lua_rawgeti(L, LUA_REGISTRYINDEX, (<Heap*>ud).wrapped_meta)
    ours = lua_rawequal(L, -1, -2)
    lua_settop(L, -3)
    if not ours:
        return NULL
    w = <Wrapped*>lua_touserdata(L, index)
    return w.obj


cdef int _call_python(lua_State* L, PyObject* fn, int first, bint packed) noexcept:
    """Call `fn` with the Lua arguments from `first` on (`packed`: as one tuple); push its
    results and return their count, or push the exception and return -1 (the caller raises
    it into Lua once this function's references are gone)."""
    cdef Runtime rt = _runtime_of(L)
    cdef bint strict = rt.heap.strict
    cdef int n, i, count
    cdef tuple args
    rt.heap.strict = False
    try:
        n = lua_gettop(L) - first + 1
        args = PyTuple_New(n)
        for i in range(n):
            value = _to_python(rt, L, first + i)
            Py_INCREF(value)
            PyTuple_SET_ITEM(args, i, value)
        lua_settop(L, 0)
        if packed:
            result = (<object>fn)(args)
        else:
            result = (<object>fn)(*args)
        if type(result) is tuple:
            count = <int>PyTuple_GET_SIZE(result)
            if not lua_checkstack(L, count):
                raise LuaError("too many results to push")
            for i in range(count):
                _push(rt, L, <object>PyTuple_GET_ITEM(result, i))
            return count
        _push(rt, L, result)
        return 1
    except BaseException as exc:
        lua_settop(L, 0)
        _push_wrapped(rt, L, exc)
        return -1
    finally:
        rt.heap.strict = strict


# --- conversions ------------------------------------------------------------------------------

cdef object _to_python(Runtime rt, lua_State* L, int index):
    cdef int kind = kind_at(L, index)
    cdef size_t size
    cdef const char* text
    cdef double number
    cdef long long integral
    cdef PyObject* obj
    if kind == LUA_TSTRING:
        text = lua_tolstring(L, index, &size)
        if size <= CACHED_MAX:
            return rt.short_bytes(text, size)
        return PyBytes_FromStringAndSize(text, size)
    if kind == LUA_TNUMBER:
        number = lua_tonumber(L, index)
        if -9223372036854775808.0 <= number < 9223372036854775808.0:
            integral = <long long>number
            if <double>integral == number:
                return PyLong_FromLongLong(integral)
        return number
    if kind == LUA_TNIL:
        return None
    if kind == LUA_TBOOLEAN:
        return lua_toboolean(L, index) != 0
    if kind == LUA_TUSERDATA:
        obj = _unwrap(L, index)
        if obj != NULL:
            return <object>obj
    return _reference(rt, L, index, kind)


cdef LuaObject _reference(Runtime rt, lua_State* L, int index, int kind):
    cdef LuaObject ref
    if kind == LUA_TTABLE:
        ref = LuaTable.__new__(LuaTable)
    elif kind == LUA_TFUNCTION:
        ref = LuaFunction.__new__(LuaFunction)
    else:
        ref = LuaObject.__new__(LuaObject)
    lua_pushvalue(L, index)
    ref.ref = luaL_ref(L, LUA_REGISTRYINDEX)
    ref.rt = rt
    ref.kind = kind
    return ref


cdef int _push(Runtime rt, lua_State* L, object value) except -1:
    t = type(value)
    if t is bytes:
        lua_pushlstring(L, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
    elif value is None:
        lua_pushnil(L)
    elif t is bool:
        lua_pushboolean(L, value is True)
    elif t is int:
        lua_pushnumber(L, <double>PyLong_AsLongLong(value))
    elif t is float:
        lua_pushnumber(L, PyFloat_AS_DOUBLE(value))
    elif isinstance(value, LuaObject):
        if (<LuaObject>value).rt is not rt:
            raise LuaError("cannot mix objects from different Lua runtimes")
        lua_rawgeti(L, LUA_REGISTRYINDEX, (<LuaObject>value).ref)
    elif isinstance(value, bytes):
        lua_pushlstring(L, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value))
    elif isinstance(value, int):
        lua_pushnumber(L, <double>PyLong_AsLongLong(value))
    elif isinstance(value, float):
        lua_pushnumber(L, <double>value)
    else:
        _push_wrapped(rt, L, value)
    return 0


cdef bint _armed_with(lua_State* L, int S, int count) noexcept:
    """Whether the run state at S says the hook is armed with `count` (the stack as it was)."""
    cdef bint armed
    lua_rawgeti(L, S, RUN_ARMED)
    armed = kind_at(L, -1) == LUA_TNUMBER and lua_tonumber(L, -1) == count
    lua_settop(L, -2)
    return armed


cdef void _script_globals(lua_State* L, int S, int keys, int argv) noexcept:
    """KEYS and ARGV in the run state's globals: the values at those stack places, or nil for
    place 0 (the stack as it was)."""
    lua_rawgeti(L, S, RUN_GLOBALS)
    _set_field(L, "KEYS", keys)
    _set_field(L, "ARGV", argv)
    lua_settop(L, -2)


cdef inline void _set_field(lua_State* L, const char* name, int place) noexcept:
    """table[name] (the table on top, a 4-letter name) = the value at `place`, nil for 0."""
    lua_pushlstring(L, name, 4)
    if place:
        lua_pushvalue(L, place)
    else:
        lua_pushnil(L)
    lua_rawset(L, -3)


cdef int _push_key(Runtime rt, lua_State* L, object key) except -1:
    """A table key: a nil or NaN key is refused here, as a Python error (Lua's own refusal
    would be a longjmp out of this module's frame)."""
    if key is None:
        raise LuaError("table index is nil")
    if type(key) is float and key != key:
        raise LuaError("table index is NaN")
    return _push(rt, L, key)


cdef int _push_table(lua_State* L, tuple items, Py_ssize_t start, Py_ssize_t end) except -1:
    """A new table of items[start:end] (bytes) from 1."""
    cdef Py_ssize_t i
    cdef object item
    lua_createtable(L, <int>(end - start), 0)
    for i in range(start, end):
        item = <object>PyTuple_GET_ITEM(items, i)
        if type(item) is not bytes:
            item = bytes(item)
        lua_pushlstring(L, PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item))
        lua_rawseti(L, -2, <int>(i - start + 1))
    return 0


cdef int _push_wrapped(Runtime rt, lua_State* L, object value) noexcept:
    cdef Wrapped* w = <Wrapped*>lua_newuserdata(L, sizeof(Wrapped))
    key = <Py_ssize_t><PyObject*>value
    held = rt.refs.get(key)
    if held is None:
        rt.refs[key] = [value, 1]
    else:
        held[1] += 1
    w.obj = <PyObject*>value
    lua_rawgeti(L, LUA_REGISTRYINDEX, rt.heap.wrapped_meta)
    lua_setmetatable(L, -2)
    return 0


# --- Lua values as Python sees them -----------------------------------------------------------

@cython.no_gc_clear  # (its reference is dropped in __dealloc__, which needs the runtime)
cdef class LuaObject:
    """A Lua value Python holds (a reference in the registry, dropped with this object)."""

    cdef Runtime rt
    cdef int ref
    cdef int kind

    def __cinit__(self):
        self.ref = LUA_NOREF

    def __dealloc__(self):
        rt = self.rt
        if rt is not None and rt.main != NULL:
            luaL_unref(rt.main, LUA_REGISTRYINDEX, self.ref)

    def __repr__(self):
        return f"<Lua {lua_typename(NULL, self.kind).decode()}>"


cdef class LuaTable(LuaObject):
    """A Lua table: its items (a snapshot), its keys, an item read or set (raw)."""

    def items(self):
        cdef Runtime rt = self.rt
        cdef lua_State* L = rt.main
        cdef int base = lua_gettop(L)
        pairs = []
        lua_checkstack(L, 4)
        lua_rawgeti(L, LUA_REGISTRYINDEX, self.ref)
        lua_pushnil(L)
        try:
            while lua_next(L, base + 1):
                pairs.append((_to_python(rt, L, -2), _to_python(rt, L, -1)))
                lua_settop(L, -2)
        finally:
            lua_settop(L, base)
        return pairs

    def __iter__(self):
        return iter([k for k, _ in self.items()])

    def __getitem__(self, key):
        """The value at `key` (raw: no metamethod runs), None when there is none."""
        cdef Runtime rt = self.rt
        cdef lua_State* L = rt.main
        cdef int base = lua_gettop(L)
        lua_checkstack(L, 3)
        lua_rawgeti(L, LUA_REGISTRYINDEX, self.ref)
        try:
            _push(rt, L, key)
            lua_rawget(L, base + 1)
            return _to_python(rt, L, -1)
        finally:
            lua_settop(L, base)

    def __setitem__(self, key, value):
        cdef Runtime rt = self.rt
        cdef lua_State* L = rt.main
        cdef int base = lua_gettop(L)
        lua_checkstack(L, 3)
        lua_rawgeti(L, LUA_REGISTRYINDEX, self.ref)
        try:
            _push_key(rt, L, key)
            _push(rt, L, value)
            lua_rawset(L, base + 1)
        finally:
            lua_settop(L, base)


cdef class LuaFunction(LuaObject):
    """A Lua function, called in protected mode: its results (None, one value, or a tuple)."""

    def __call__(self, *args):
        cdef Runtime rt = self.rt
        cdef lua_State* L = rt.main
        cdef int base = lua_gettop(L)
        cdef Py_ssize_t n = PyTuple_GET_SIZE(args), i
        if not lua_checkstack(L, <int>n + 2):
            raise LuaError("stack overflow (too many arguments)")
        lua_rawgeti(L, LUA_REGISTRYINDEX, self.ref)
        try:
            for i in range(n):
                _push(rt, L, <object>PyTuple_GET_ITEM(args, i))
        except BaseException:
            lua_settop(L, base)
            raise
        return rt.call(L, base, <int>n)


def lua_type(value):
    """Lua's type name of a Lua value Python holds ('table', 'function', ...); None for a
    Python object."""
    if isinstance(value, LuaObject):
        return lua_typename(NULL, (<LuaObject>value).kind).decode()
    return None


# --- the runtime ------------------------------------------------------------------------------

@cython.no_gc_clear  # (__dealloc__ closes the state, whose userdata know `refs`)
cdef class Runtime:
    """One Lua state: the standard libraries, `python.as_function`, the heap capped at
    `max_memory` bytes over what the state held once built (0: no cap)."""

    # Python's calls and tables run on the main thread, also while a coroutine runs the
    # Python function that makes them (as lupa's do; a coroutine may be gone by the next call).
    cdef lua_State* main
    cdef Heap heap
    cdef size_t base
    cdef dict refs  # the wrapped Python objects (see Wrapped)
    cdef LuaTable state  # sandbox.lua's RUN table (`prepare`)
    # Short Lua strings' bytes, by where Lua keeps the string (see short_bytes).
    cdef const char* cached_text[CACHE_SLOTS]
    cdef PyObject* cached_bytes[CACHE_SLOTS]
    cdef int collect_kb
    cdef size_t margin

    def __cinit__(self, size_t max_memory=0):
        cdef lua_State* L
        cdef int c
        self.heap.used = 0
        self.heap.limit = 0
        self.heap.strict = False
        self.heap.runtime = <void*>self
        self.refs = {}
        self.heap.refs = <PyObject*>self.refs
        for c in range(CACHE_SLOTS):
            self.cached_text[c] = NULL
            self.cached_bytes[c] = NULL
        for c in range(CLASSES):
            self.heap.free[c] = NULL
            self.heap.kept[c] = 0
        L = lua_newstate(_allocate, &self.heap)
        if L == NULL:
            raise MemoryError("the Lua state could not be made")
        self.main = L
        lua_atpanic(L, _panic)
        luaL_openlibs(L)
        lua_createtable(L, 0, 2)
        lua_pushcclosure(L, _wrapped_gc, 0)
        lua_setfield(L, -2, "__gc")
        lua_pushcclosure(L, _wrapped_call, 0)
        lua_setfield(L, -2, "__call")
        self.heap.wrapped_meta = luaL_ref(L, LUA_REGISTRYINDEX)
        lua_createtable(L, 0, 2)
        lua_pushcclosure(L, _as_function, 0)
        lua_setfield(L, -2, "as_function")
        lua_pushcclosure(L, _as_tuple_function, 0)
        lua_setfield(L, -2, "as_tuple_function")
        lua_setfield(L, LUA_GLOBALSINDEX, "python")
        lua_settop(L, 0)
        self.base = self.heap.used
        if max_memory:
            self.heap.limit = self.base + max_memory

    def __dealloc__(self):
        cdef int c
        self.heap.refs = NULL  # (the state's userdata let go of nothing: `refs` goes whole)
        if self.main != NULL:
            lua_close(self.main)
            self.main = NULL
        _free_lists(&self.heap)
        for c in range(CACHE_SLOTS):
            if self.cached_bytes[c] != NULL:
                Py_DECREF(<object>self.cached_bytes[c])
                self.cached_bytes[c] = NULL

    def get_memory_used(self):
        """Bytes the heap holds over what the state held once built."""
        return self.heap.used - self.base

    def execute(self, bytes code not None, *args, name=None):
        """Compile `code` (bytes) under the chunk name `name` and run it with `args`: its
        results."""
        cdef lua_State* L = self.main
        cdef int base = lua_gettop(L)
        cdef Py_ssize_t n = len(args), i
        cdef bytes chunk = name.encode() if isinstance(name, str) else (name or b"<python>")
        if not lua_checkstack(L, <int>n + 2):
            raise LuaError("stack overflow (too many arguments)")
        if luaL_loadbuffer(L, PyBytes_AS_STRING(code), PyBytes_GET_SIZE(code), chunk) != 0:
            message = _message(L, -1)
            lua_settop(L, base)
            raise LuaSyntaxError(message)
        try:
            for i in range(n):
                _push(self, L, args[i])
        except BaseException:
            lua_settop(L, base)
            raise
        return self.call(L, base, <int>n)

    def table_from(self, *sources):
        """A new table with each source's items: a dict's pairs, a sequence's values from 1."""
        cdef lua_State* L = self.main
        cdef int base = lua_gettop(L)
        cdef int i
        lua_checkstack(L, 4)
        lua_createtable(L, 0, 0)
        try:
            for source in sources:
                if isinstance(source, dict):
                    for key, value in (<dict>source).items():
                        _push_key(self, L, key)
                        _push(self, L, value)
                        lua_rawset(L, base + 1)
                else:
                    i = 0
                    for value in source:
                        i += 1
                        _push(self, L, value)
                        lua_rawseti(L, base + 1, i)
            return _reference(self, L, base + 1, LUA_TTABLE)
        finally:
            lua_settop(L, base)

    def prepare(self, LuaTable state, int collect_kb, size_t margin):
        """What every `run` uses: sandbox.lua's RUN table, the heap size (KiB) past which a
        run's garbage is collected after it, and the room (bytes) a run's arguments must
        leave free in the heap."""
        self.state = state
        self.collect_kb = collect_kb
        self.margin = margin

    def run(self, LuaFunction function, argv, Py_ssize_t first, Py_ssize_t nkeys,
            bint callback, int count):
        """One run of a script (`callback` false: KEYS and ARGV are globals) or of a registered
        function (`callback`: they are its two arguments), by the protocol sandbox.lua
        describes at its RUN table (see `prepare`): KEYS are argv[first:first + nkeys], ARGV
        the rest. (True, the first result), (False, the error the handler made of it), or
        (None, None) when the arguments do not fit in the heap with the margin, even after a
        collection. The run's state is cleared and its hook armed before; the hook disarmed,
        the collector restarted and the garbage collected after, calling Lua only when one of
        those has something to do."""
        cdef lua_State* L = self.main
        cdef int base = lua_gettop(L)
        cdef int S = base + 1
        cdef int status, nargs
        cdef bint strict = self.heap.strict
        cdef tuple items = argv if type(argv) is tuple else tuple(argv)
        cdef Py_ssize_t n = PyTuple_GET_SIZE(items), i
        cdef size_t need = 64 * <size_t>(n - first)
        for i in range(first, n):
            need += len(<object>PyTuple_GET_ITEM(items, i))
        if self.heap.limit and self.heap.used + need + self.margin > self.heap.limit:
            lua_gc(L, LUA_GCCOLLECT, 0)
            if self.heap.used + need + self.margin > self.heap.limit:
                return None, None
        if not lua_checkstack(L, 8):
            raise LuaError("stack overflow")
        lua_rawgeti(L, LUA_REGISTRYINDEX, self.state.ref)
        try:
            lua_pushboolean(L, 0)
            lua_rawseti(L, S, RUN_KILLING)
            lua_pushboolean(L, 0)
            lua_rawseti(L, S, RUN_KILL_DUE)
            lua_rawgeti(L, S, RUN_RESUMING)
            lua_rawgeti(L, -1, 1)
            if kind_at(L, -1) != LUA_TNIL:  # (a killed script's coroutines)
                lua_createtable(L, 0, 0)
                lua_rawseti(L, S, RUN_RESUMING)
            lua_settop(L, S)
            if not _armed_with(L, S, count):
                self._state_call(L, S, RUN_ARM, count)
            lua_rawgeti(L, S, RUN_HANDLER)  # at S + 1
            lua_rawgeti(L, LUA_REGISTRYINDEX, function.ref)
            _push_table(L, items, first, first + nkeys)  # at S + 3
            _push_table(L, items, first + nkeys, n)
            if callback:
                nargs = 2
            else:
                _script_globals(L, S, S + 3, S + 4)
                lua_settop(L, S + 2)
                nargs = 0
            self.heap.strict = True
            status = lua_pcall(L, nargs, 1, S + 1)
            self.heap.strict = strict
            result = (status == 0, _to_python(self, L, -1))
            lua_settop(L, S)
            if not callback:
                _script_globals(L, S, 0, 0)
            if not _armed_with(L, S, count):
                self._state_call(L, S, RUN_DISARM, -1)
            lua_rawgeti(L, S, RUN_GC_STOPPED)
            if lua_toboolean(L, -1):
                lua_settop(L, S)
                self._state_call(L, S, RUN_RESTART_GC, -1)
            if lua_gc(L, LUA_GCCOUNT, 0) > self.collect_kb:
                lua_gc(L, LUA_GCCOLLECT, 0)
            return result
        finally:
            self.heap.strict = strict
            lua_settop(L, base)

    cdef object short_bytes(self, const char* text, size_t size):
        """The bytes of a short Lua string. A script's strings come back again and again (a
        command's name, its keys): the bytes made last time for a string where Lua keeps this
        one are handed out again when they are equal, so they are not made again and their
        hash is known (the command table's and the keyspace's lookups). Lua interns its
        strings: an equal string is at the same place while it lives; a string found at a
        place that held another is made, and takes the place."""
        cdef size_t where = <size_t>text
        cdef int slot = <int>(((where >> 4) ^ (where >> 12)) & (CACHE_SLOTS - 1))
        cdef PyObject* cached = self.cached_bytes[slot]
        if (cached != NULL and self.cached_text[slot] == text
                and <size_t>PyBytes_GET_SIZE(<object>cached) == size
                and memcmp(PyBytes_AS_STRING(<object>cached), text, size) == 0):
            return <object>cached
        made = PyBytes_FromStringAndSize(text, size)
        Py_INCREF(made)
        if cached != NULL:
            Py_DECREF(<object>cached)
        self.cached_bytes[slot] = <PyObject*>made
        self.cached_text[slot] = text
        return made

    cdef int _state_call(self, lua_State* L, int S, int slot, int argument) except -1:
        """Call the function in the run state's `slot` (with `argument` when it is not -1)."""
        cdef bint strict = self.heap.strict
        cdef int status
        lua_rawgeti(L, S, slot)
        if argument != -1:
            lua_pushnumber(L, argument)
        self.heap.strict = True
        status = lua_pcall(L, 0 if argument == -1 else 1, 0, 0)
        self.heap.strict = strict
        if status != 0:
            self._raise(L, status)
        return 0

    cdef object call(self, lua_State* L, int base, int nargs):
        """lua_pcall of the function at base + 1 with its `nargs` arguments above it (the heap's
        cap enforced while it runs): its results as Python values, the stack back at `base`."""
        cdef int status, count, i
        cdef bint strict = self.heap.strict
        cdef tuple results
        self.heap.strict = True
        status = lua_pcall(L, nargs, LUA_MULTRET, 0)
        self.heap.strict = strict
        try:
            if status != 0:
                self._raise(L, status)
            count = lua_gettop(L) - base
            if count == 1:
                return _to_python(self, L, base + 1)
            if count == 0:
                return None
            results = PyTuple_New(count)
            for i in range(count):
                value = _to_python(self, L, base + 1 + i)
                Py_INCREF(value)
                PyTuple_SET_ITEM(results, i, value)
            return results
        finally:
            lua_settop(L, base)

    cdef int _raise(self, lua_State* L, int status) except -1:
        cdef PyObject* obj
        if status == LUA_ERRMEM:
            raise LuaMemoryError("not enough memory")
        obj = _unwrap(L, -1)
        if obj != NULL and isinstance(<object>obj, BaseException):
            raise <object>obj
        message = _message(L, -1)
        if "not enough memory" in message:
            raise LuaMemoryError(message)
        raise LuaError(message)


cdef str _message(lua_State* L, int index):
    cdef size_t size = 0
    cdef const char* text
    if kind_at(L, index) in (LUA_TSTRING, LUA_TNUMBER):
        text = lua_tolstring(L, index, &size)
        return text[:size].decode("latin-1")
    return f"error object is a {lua_typename(L, kind_at(L, index)).decode()} value"


__all__ = ["PUSHES_NEVER_FAIL", "LuaError", "LuaFunction", "LuaMemoryError", "LuaObject",
           "LuaSyntaxError",
           "LuaTable", "Runtime", "lua_type"]
