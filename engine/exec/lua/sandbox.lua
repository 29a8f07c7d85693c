-- The scripts' world, as Redis 8 builds it (eval.c, script_lua.c): the `redis` table, the
-- libraries Redis bundles (cjson and cmsgpack from their own chunks, bit and struct Python's),
-- os.clock, the read-only globals and library tables, pcall/xpcall that see API errors as
-- Redis's, text-only loadstring/load, the error handler that finds the script's line, the
-- count hook that lets the server answer other clients while a script is busy, and the
-- run's state the host starts and ends each run with (RUN). Run once per Lua runtime by engine.exec.scripting; `...` is the table of
-- what Python hands in (see Scripting._runtime). Nothing here is reachable from a script except
-- through the views it is given.

local P = ...
local as_function = python.as_function

local dbg = debug
local getinfo, sethook = dbg.getinfo, dbg.sethook
local type, error, select, unpack, tostring, tonumber = type, error, select, unpack, tostring,
  tonumber
local rawget, rawset, rawequal, next, pairs = rawget, rawset, rawequal, next, pairs
local setmetatable, getmetatable, setfenv, loadstring, load = setmetatable, getmetatable,
  setfenv, loadstring, load
local real_pcall, xpcall, collectgarbage, newproxy = pcall, xpcall, collectgarbage, newproxy
local table_insert, table_foreach = table.insert, table.foreach

-- Our own chunks (this one, the libraries'): the error handler and the hook look past them to
-- the script, and a script's own chunks may never take one of their names.
local SANDBOX = getinfo(1, 'S').source
local OURS = {[SANDBOX] = true}

-- luaL_where(L, 1) as a C function in our place would see it: the position of the first frame
-- above our own code ("user_script:3: "), or nothing when that frame is a C function. `level`
-- is where to start looking, counted as error()'s levels (1: the function calling `where`).
local function where(level)
  level = (level or 1) + 1
  local i = getinfo(level, 'Sl')
  while i and OURS[i.source] do
    level = level + 1
    i = getinfo(level, 'Sl')
  end
  if i and i.currentline > 0 then return i.short_src .. ':' .. i.currentline .. ': ' end
  return ''
end

-- How a library function was called (luaL_argerror's name and namewhat), from inside its
-- outermost frame of our code: `level` counts as where's.
local function called_as(level)
  level = (level or 1) + 1
  local outer
  local i = getinfo(level, 'Sn')
  while i and OURS[i.source] do
    outer = i
    level = level + 1
    i = getinfo(level, 'Sn')
  end
  if outer == nil then return '?', '' end
  return outer.name or '?', outer.namewhat
end

-- luaL_argerror of our Lua functions (a plain string error, as C's). `level` counts as
-- where's: 1 is the function whose argument is bad.
local function bad_argument(level, n, msg)
  local name, namewhat = called_as(level + 1)
  if namewhat == 'method' then
    n = n - 1
    if n == 0 then
      error(where(level + 1) .. "calling '" .. name .. "' on bad self (" .. msg .. ')', 0)
    end
  end
  error(where(level + 1) .. 'bad argument #' .. n .. " to '" .. name .. "' (" .. msg .. ')', 0)
end

-- Python's functions as C functions: type() says 'function', and an error they raise has the
-- script's line right above it (a Lua wrapper could be tail-called and take that line away).
local py = {}
for name, f in pairs(P.functions) do py[name] = as_function(f) end
for name, f in pairs(P.tuple_functions) do py[name] = python.as_tuple_function(f) end
local py_unwrap, py_interrupt = py.unwrap, py.interrupt

-- What a run shares with the host (engine.exec.lua_host's `run`, which starts and ends a run
-- with no Lua call in the usual case): the run's state, in the array slots of one table.
local KILLING, KILL_DUE, ARMED, GC_STOPPED, RESUMING = 1, 2, 3, 4, 5
local RUN = {
  false,  -- killing: every line of the script raises the kill again (pcall cannot swallow it)
  false,  -- kill_due: killed while our own code ran, raised once the script's code runs again
  -- armed: the count the hook is armed with between runs (0: none), or nil once a run changed
  -- it: a run whose count it already has does not set it again, and a changed one is cleared
  -- after its run. (Between runs only our own code runs, where the hook finds no script to stop.)
  0,
  false,  -- gc_stopped: the script called collectgarbage('stop') (restarted when it ends)
  {},  -- the coroutines being resumed, innermost last (see s_coroutine.resume)
  -- [6] arm(count), [7] disarm(), [8] restart_gc(), [9] the error handler, [10] the globals
  -- a script's KEYS and ARGV go in: set below.
}

-- A Python error raised into Lua arrives as Python's exception object: what Redis raises
-- instead (the {err=...} table of an API error, or a library's message).
local function unwrap(e)
  if type(e) == 'userdata' then return py_unwrap(e) end
  return e
end

-- --- read-only tables --------------------------------------------------------------------
-- Redis marks every table reachable from the globals read-only inside its Lua VM. Here each is
-- a view: reads pass through, writes fail as Redis's do, and the functions that read a table's
-- contents (next, pairs, rawget, table.foreach) see through the view.

local real_of = setmetatable({}, {__mode = 'k'})  -- view -> the table behind it
local meta_of = setmetatable({}, {__mode = 'k'})  -- view -> what getmetatable answers
local READONLY = 'Attempt to modify a readonly table'
local function readonly_error() error(READONLY, 2) end

local function readonly(t, meta, index)
  local view = setmetatable({}, {__index = index or t, __newindex = readonly_error,
                                 __metatable = false})
  real_of[view] = t
  meta_of[view] = meta
  return view
end

local function type_error(n, expected, value, given)
  bad_argument(2, n, expected .. ' expected, got ' .. (given and type(value) or 'no value'))
end

local function s_next(...)
  local t, k = ...
  if type(t) ~= 'table' then type_error(1, 'table', t, select('#', ...) > 0) end
  return next(real_of[t] or t, k)
end
local function s_pairs(...)
  local t = ...
  if type(t) ~= 'table' then type_error(1, 'table', t, select('#', ...) > 0) end
  return s_next, t, nil
end
local function s_rawget(...)
  local t, k = ...
  if type(t) ~= 'table' then type_error(1, 'table', t, select('#', ...) > 0) end
  return rawget(real_of[t] or t, k)
end
local function s_rawset(...)
  local t = ...
  if real_of[t] then error(READONLY, 0) end
  return rawset(...)
end
local function s_setmetatable(...)
  local t = ...
  if real_of[t] then error(READONLY, 0) end
  return setmetatable(...)
end
local function s_getmetatable(o)
  if real_of[o] then return meta_of[o] end
  if type(o) == 'userdata' then return nil end  -- cjson.null and Python's: nothing to see
  return getmetatable(o)
end

-- --- redis -------------------------------------------------------------------------------

local function err_table(msg) return {err = msg} end

local redis = {}
redis.call, redis.pcall, redis.sha1hex = py.call, py.pcall, py.sha1hex
redis.error_reply = function(...)
  local e = ...
  if select('#', ...) ~= 1 or type(e) ~= 'string' then
    return err_table('ERR wrong number or type of arguments')
  end
  if e:sub(1, 1) ~= '-' then e = '-' .. e end
  local space = e:find(' ', 1, true)
  local code, msg
  if space then code, msg = e:sub(2, space - 1), e:sub(space + 1)
  else code, msg = 'ERR', e:sub(2) end
  msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return err_table(code .. ' ' .. msg)
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return err_table('ERR wrong number or type of arguments')
  end
  return {ok = s}
end
redis.log, redis.setresp, redis.set_repl = py.log, py.setresp, py.set_repl
redis.acl_check_cmd = py.acl_check_cmd
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL =
  0, 1, 2, 2, 3
redis.REDIS_VERSION_NUM, redis.REDIS_VERSION = P.REDIS_VERSION_NUM, P.REDIS_VERSION

-- --- pcall, xpcall, coroutines: errors as Redis's ------------------------------------------

-- Redis's pcall: an error raised as {err=...} comes back as its message. (No table is made on
-- the way: after a memory error, the heap is still full.)
local function pcall_result(ok, ...)
  if ok then return ok, ... end
  local e = unwrap((...))
  if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then return false, e.err end
  return false, e
end
local function s_pcall(...)
  if select('#', ...) == 0 then return false, 'attempt to call a boolean value' end
  return pcall_result(real_pcall(...))
end

-- xpcall's handler, and coroutine.resume's caller, get what Redis's would.
local function s_xpcall(f, h)
  return xpcall(f, function(e) return h(unwrap(e)) end)
end
local resume, create = coroutine.resume, coroutine.create
-- The coroutines being resumed (RUN[RESUMING]), innermost last: Python's functions look at the
-- one they run in (a Lua function Python calls runs on the main thread).
local function resumed(...)
  local resuming = RUN[RESUMING]
  resuming[#resuming] = nil
  return ...
end
local function resume_result(ok, ...)
  if ok then return ok, ... end
  return false, unwrap((...))
end
local s_coroutine = {}
for k, v in pairs(coroutine) do s_coroutine[k] = v end
s_coroutine.resume = function(co, ...)
  local resuming = RUN[RESUMING]
  resuming[#resuming + 1] = co
  return resume_result(resumed(resume(co, ...)))
end
local function wrap_result(ok, ...)
  if ok then return ... end
  local e = unwrap((...))
  if type(e) == 'string' then e = where(1) .. e end
  error(e, 0)
end
s_coroutine.wrap = function(f)
  local co = create(f)
  return function(...)
    local resuming = RUN[RESUMING]
    resuming[#resuming + 1] = co
    return wrap_result(resumed(resume(co, ...)))
  end
end

-- --- math, table, os -----------------------------------------------------------------------

-- math.random over redisLrand48 (the same sequence everywhere).
local s_math = {}
for k, v in pairs(math) do s_math[k] = v end
s_math.random, s_math.randomseed = py.random, py.randomseed

-- The table library, writing into no read-only table and reading through the views.
local s_table = {}
for k, v in pairs(table) do s_table[k] = v end
s_table.insert = function(...)
  local n, t, pos = select('#', ...), ...
  if type(t) ~= 'table' then type_error(1, 'table', t, n > 0) end
  if n ~= 2 and n ~= 3 then error(where(1) .. "wrong number of arguments to 'insert'", 0) end
  if n == 3 and tonumber(pos) == nil then type_error(2, 'number', pos, true) end
  if real_of[t] then error(READONLY, 0) end
  table_insert(...)
end
s_table.foreach = function(...)
  local n, t, f = select('#', ...), ...
  if type(t) ~= 'table' then type_error(1, 'table', t, n > 0) end
  if type(f) ~= 'function' then type_error(2, 'function', f, n > 1) end
  return table_foreach(real_of[t] or t, f)
end

-- Only os.clock, as Redis 8.
local s_os = {clock = os.clock}

-- --- the bundled libraries -----------------------------------------------------------------

local cjson_null = newproxy(true)  -- Redis's is a NULL light userdata
getmetatable(cjson_null).__tostring = function() return 'userdata: (nil)' end

-- cjson and cmsgpack are Lua here and C in Redis: each of their functions is reached through
-- Python (P.library_function makes the Python function that calls it), so that the script
-- sees a C function, its errors placed as luaL_error places them. The Lua function runs under
-- this pcall; a library raises its errors as {lib=message} or {arg=n, msg=message} for the
-- Python side to word. A -0 result would lose its sign on the way: it travels as P.negzero.
-- Thousands of results come back in their table.
local NEGZERO, MANY = P.negzero, P.many
local function results(n, r)
  for i = 2, n do
    local v = r[i]
    if v == 0 and 1 / v < 0 then r[i] = NEGZERO end
  end
  if n < 7990 then return unpack(r, 1, n) end
  return true, MANY, r, n  -- (more than unpack gives: Python reads the table)
end
local function finish(...)
  local n = select('#', ...)
  if n > 2 then return results(n, {...}) end
  local ok, v = ...
  if v == 0 and 1 / v < 0 then return ok, NEGZERO end
  return ...
end
local function call_library(f, ...)
  return finish(real_pcall(f, ...))
end

local function export(m)
  for k, v in pairs(m) do
    if type(v) == 'function' then m[k] = as_function(P.library_function(v)) end
  end
  return m
end

-- What the libraries written in Lua may use of the sandbox.
local H = {
  lib_error = function(msg) error({lib = msg}, 0) end,
  arg_error = function(n, msg) error({arg = n, msg = msg}, 0) end,
  null = cjson_null, py = py, export = export,
  unview = function(t) return real_of[t] or t end,
}
local function library(name)
  local chunk = '=streamkeep:' .. name
  OURS[chunk] = true
  return assert(loadstring(P.sources[name], chunk))(H)
end

local bit = {}
for name, f in pairs(P.bit) do bit[name] = as_function(f) end
local struct = {}
for name, f in pairs(P.struct) do struct[name] = as_function(f) end

-- --- the globals ---------------------------------------------------------------------------

-- Strings' methods come from the read-only string view; their metatable cannot be changed.
local string_view = readonly(string)
local string_meta = getmetatable('')
string_meta.__index = string_view
string_meta.__metatable = readonly({__index = string_view})

-- A script's collectgarbage, which notes a 'stop' (the collector restarts when the script
-- ends: a restart is not free, it makes the collector take a step at once).
local function s_collectgarbage(opt, ...)
  if opt == 'stop' then RUN[GC_STOPPED] = true end
  return collectgarbage(opt, ...)
end

local allowed = {
  assert = assert, collectgarbage = s_collectgarbage, error = error, gcinfo = gcinfo,
  getmetatable = s_getmetatable, ipairs = ipairs, next = s_next, pairs = s_pairs,
  pcall = s_pcall, xpcall = s_xpcall, rawequal = rawequal, rawget = s_rawget, rawset = s_rawset,
  select = select, setmetatable = s_setmetatable, tonumber = tonumber, tostring = tostring,
  type = type, unpack = unpack, _VERSION = _VERSION,
  string = string_view, table = readonly(s_table), math = readonly(s_math),
  coroutine = readonly(s_coroutine), os = readonly(s_os), redis = readonly(redis),
  bit = readonly(bit), struct = readonly(struct), cjson = readonly(library('cjson')),
  cmsgpack = readonly(library('cmsgpack')),
}

local function missing_global(_, name)
  error(where(1) .. "Script attempted to access nonexistent global variable '" ..
        tostring(name) .. "'", 0)
end
-- A script's globals are `allowed`'s, read through a table index (the VM's fast path: every
-- `redis`, `KEYS`, `ARGV` a script reads), its missing names an error.
setmetatable(allowed, {__index = missing_global})
local env = readonly(allowed, readonly({__index = missing_global}))
allowed._G = env

-- Chunks are always read as text (a leading space makes Lua's loader parse them): precompiled
-- bytecode would escape the sandbox, and Redis's Lua refuses it the same way. A chunk may not
-- be named as one of ours (the hook and the error handler would take it for the sandbox).
local function chunk_name(name, default)
  if name == nil then name = default end
  if OURS[name] then return ' ' .. name end
  return name
end
local function text_loadstring(s, name)
  if type(s) == 'string' or type(s) == 'number' then
    return loadstring(' ' .. s, chunk_name(name, s))
  end
  return loadstring(s, name)
end
allowed.loadstring = function(s, name)
  local f, e = text_loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
allowed.load = function(chunk, name)
  if type(chunk) ~= 'function' then
    error(where(1) .. "bad argument #1 to 'load' (function expected, got " .. type(chunk) ..
          ')', 0)
  end
  local first = true
  local f, e = load(function()
    if first then first = false return ' ' end
    return chunk()
  end, chunk_name(name, '=(load)'))
  if f then setfenv(f, env) end
  return f, e
end

-- --- errors and the busy-script hook -------------------------------------------------------

-- Redis's __redis__err__handler: the error as {err=..., source=..., line=...}, the place being
-- the script's line (never ours, which stands where Redis has C functions).
local function handler(e)
  local level = 2
  local i = getinfo(level, 'nSl')
  if i and i.what == 'C' then level = level + 1; i = getinfo(level, 'nSl') end
  while i and OURS[i.source] do level = level + 1; i = getinfo(level, 'nSl') end
  e = unwrap(e)
  if type(e) ~= 'table' then e = {err = 'ERR ' .. tostring(e)} end
  if i then e.source = i.source; e.line = i.currentline end
  return e
end
allowed.__redis__err__handler = handler

local COUNT = P.HOOK_INSTRUCTIONS
local KILLED = 'ERR Script killed by user with SCRIPT KILL...'
local hook
local function kill()
  RUN[KILLING] = true
  RUN[ARMED] = nil
  sethook(hook, 'l')
  error({err = KILLED})
end

-- Every COUNT instructions: let the server answer the other clients (past busy-reply-threshold)
-- and learn whether the script must stop. The stop is raised in the script's own code only:
-- never inside ours (the sandbox's metamethods, a library's loop, run() once the script ended),
-- so a kill met there waits for our code to return to the script (a return hook), then for the
-- script's next instruction.
hook = function(event)
  if event == 'tail return' then return end
  if event == 'return' then
    -- Our code returns: once what it returns to is not ours, stop at the next instruction.
    local c = getinfo(3, 'S')
    if RUN[KILL_DUE] and not (c and OURS[c.source]) then
      RUN[ARMED] = nil
      sethook(hook, '', 1)
    end
    return
  end
  local i = getinfo(2, 'S')
  local ours = i and OURS[i.source]
  if RUN[KILLING] then
    if not ours then error({err = KILLED}) end
    return
  end
  if not RUN[KILL_DUE] then
    RUN[KILL_DUE] = py_interrupt()
    if not RUN[KILL_DUE] then return end
  end
  if ours then
    RUN[ARMED] = nil
    sethook(hook, 'r', COUNT)
    return
  end
  kill()
end

-- Python's redis.call found the script killed: stop at its next line.
local function arm_kill()
  RUN[KILL_DUE] = true
  RUN[KILLING] = true
  RUN[ARMED] = nil
  sethook(hook, 'l')
end

local function compile(body, name)
  local f, e = text_loadstring(body, name or '@user_script')
  if not f then return nil, e end
  setfenv(f, env)
  return f, false
end

-- A run, as the host makes it: KILLING and KILL_DUE cleared, a killed script's coroutines
-- forgotten, the hook armed with the run's count (RUN[6], when RUN[ARMED] is not that count),
-- KEYS and ARGV set in the globals (RUN[10]) for a script or given to a registered function as
-- its two arguments (a function sees no KEYS or ARGV global, as in Redis), the function called
-- in protected mode with the error handler (RUN[9]) for its first result. Afterwards: KEYS and
-- ARGV cleared, the hook disarmed (RUN[7]) when the run changed it, the collector restarted
-- (RUN[8]) after a script's collectgarbage('stop'), and the script's garbage collected when
-- the heap holds more than the run's threshold: nothing outside a protected call may ever
-- meet a full heap.
RUN[6] = function(count)
  if count > 0 then sethook(hook, '', count) else sethook() end
  RUN[ARMED] = count
end
RUN[7] = function()
  sethook()
  RUN[ARMED] = 0
end
RUN[8] = function()
  RUN[GC_STOPPED] = false
  collectgarbage('restart')
end
RUN[9] = handler
RUN[10] = allowed

local function collect() collectgarbage() end

-- A number for each table, the same every time (the reply's conversion counts repeated tables).
local ids, last_id = setmetatable({}, {__mode = 'k'}), 0
local function identity(t)
  local id = ids[t]
  if id == nil then
    last_id = last_id + 1
    id = last_id
    ids[t] = id
  end
  return id
end

-- For Python's functions: (luaL_where(1), the name and namewhat it was called by), seen from
-- the C function Python runs in: level 2 from here, or the top of the coroutine it runs in.
local function c_where()
  local resuming = RUN[RESUMING]
  local co = resuming[#resuming]
  if co == nil then
    local i = getinfo(2, 'n')
    return where(3), i and i.name or '?', i and i.namewhat or ''
  end
  local i, above = getinfo(co, 0, 'n'), getinfo(co, 1, 'Sl')
  local place = ''
  if above and above.currentline > 0 then
    place = above.short_src .. ':' .. above.currentline .. ': '
  end
  return place, i and i.name or '?', i and i.namewhat or ''
end

-- --- Redis Functions: a library's load, a function's call ----------------------------------

-- While a library loads, its globals are only the library API (Redis's __LIBRARY_API__): a
-- `redis` holding register_function, log and the version, every other name an error.
local env_meta = dbg.getmetatable(env)
local library_redis = setmetatable({
  register_function = py.register_function, log = py.log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION_NUM = P.REDIS_VERSION_NUM, REDIS_VERSION = P.REDIS_VERSION,
}, {__index = missing_global})
local library_api = setmetatable({redis = readonly(library_redis)}, {__index = missing_global})

local LOAD_TIMEOUT = {err = 'ERR FUNCTION LOAD timeout'}
local load_hook
load_hook = function(event)
  if event == 'line' then error(LOAD_TIMEOUT) end  -- (timed out: every line raises it again)
  if py.load_timed_out() then
    sethook(load_hook, 'l')
    error(LOAD_TIMEOUT)
  end
end

-- Run a library's compiled chunk with the library API as its globals: (true) or (false, the
-- error as Redis's lua_pcall leaves it: a string, or the {err=...} table of an API error).
local function load_library(f, count)
  env_meta.__index = library_api
  RUN[ARMED] = 0
  if count > 0 then sethook(load_hook, '', count) else sethook() end
  local ok, e = real_pcall(f) sethook() RUN[ARMED] = 0
  env_meta.__index = allowed
  if RUN[GC_STOPPED] then RUN[8]() end
  if ok then return true end
  return false, unwrap(e)
end

-- Nothing else is reachable from a script: the real globals lose what a leak could use.
io, os, package, require, dofile, loadfile, module, python, print, debug = nil
return compile, RUN, rawget, collect, c_where, arm_kill, call_library, identity, load_library
