-- cmsgpack, as Redis bundles it (lua-cmsgpack 0.4.0, deps/lua/src/lua_cmsgpack.c): pack,
-- unpack, unpack_one and unpack_limit, byte for byte, with the same error lines. Written for
-- streamkeep in Lua 5.1; loaded by sandbox.lua, which hands in `H` (how to raise errors,
-- Python's float codecs, and `export`, which makes the functions what scripts call).
-- The C code's Lua stack (LUAI_MAXCSTACK, 8000 slots) is counted where it limits the input.

local H = ...
local lib_error, arg_error, unview, py = H.lib_error, H.arg_error, H.unview, H.py
local pack_float, unpack_float, unpack_double = py.pack_float, py.unpack_float, py.unpack_double
local type, select, tostring, tonumber, next, rawset, floor, unpack =
  type, select, tostring, tonumber, next, rawset, math.floor, unpack
local byte, char, sub, concat = string.byte, string.char, string.sub, table.concat

local MAXCSTACK = 8000
local MAX_NESTING = 16
local TWO32, TWO63 = 4294967296, 9223372036854775808
local HUGE = math.huge

local function stack_check(slots, need, what)
  if slots + need > MAXCSTACK then lib_error('stack overflow (' .. what .. ')') end
end

-- --- packing ------------------------------------------------------------------------------

-- The n low bytes of an integral number, big-endian (two's complement when negative; every
-- step is exact on doubles).
local function int_bytes(n, count)
  local b = {}
  for i = count, 1, -1 do
    local low = n % 256
    b[i] = low
    n = (n - low) / 256
  end
  return char(unpack(b))
end

local function encode_int(n)
  if n >= 0 then
    if n <= 127 then return char(n) end
    if n <= 0xff then return '\204' .. char(n) end
    if n <= 0xffff then return '\205' .. int_bytes(n, 2) end
    if n <= 0xffffffff then return '\206' .. int_bytes(n, 4) end
    return '\207' .. int_bytes(n, 8)
  end
  if n >= -32 then return char(n + 256) end
  if n >= -128 then return '\208' .. char(n + 256) end
  if n >= -32768 then return '\209' .. int_bytes(n, 2) end
  if n >= -2147483648 then return '\210' .. int_bytes(n, 4) end
  return '\211' .. int_bytes(n, 8)
end

local function encode_length(n, fix, fixmax, b16, b32)
  if n <= fixmax then return char(fix + n) end
  if n <= 0xffff then return b16 .. int_bytes(n, 2) end
  return b32 .. int_bytes(n, 4)
end

local function encode_string(s)
  local len = #s
  if len < 32 then return char(0xa0 + len) .. s end
  if len <= 0xff then return '\217' .. char(len) .. s end
  if len <= 0xffff then return '\218' .. int_bytes(len, 2) .. s end
  return '\219' .. int_bytes(len, 4) .. s
end

-- IS_INT64_EQUIVALENT: an integer that (int64_t) keeps.
local function is_int64(n)
  return n == floor(n) and n >= -TWO63 and n < TWO63
end

-- table_is_an_array: every key an int from 1 up, none missing (an empty table is one).
local function is_array(t)
  local count, max = 0, 0
  for k in next, t do
    if type(k) ~= 'number' or k <= 0 or k ~= floor(k) or k > 2147483647 then return false end
    if k > max then max = k end
    count = count + 1
  end
  return max == count
end

local encode

-- `slots`: the Lua stack slots Redis's encoder would hold here (the value on top included).
local function encode_table(t, level, slots, out)
  t = unview(t)
  stack_check(slots, 2, 'in function table_is_an_array')
  if is_array(t) then
    local len = #t
    out[#out + 1] = encode_length(len, 0x90, 15, '\220', '\221')
    stack_check(slots, 1, 'in function mp_encode_lua_table_as_array')
    for j = 1, len do
      encode(t[j], level + 1, slots + 1, out)
    end
    return
  end
  local len = 0
  stack_check(slots, 3, 'in function mp_encode_lua_table_as_map')
  for _ in next, t do len = len + 1 end
  out[#out + 1] = encode_length(len, 0x80, 15, '\222', '\223')
  for k, v in next, t do
    encode(k, level + 1, slots + 3, out)
    encode(v, level + 1, slots + 2, out)
  end
end

encode = function(v, level, slots, out)
  local t = type(v)
  if t == 'string' then
    out[#out + 1] = encode_string(v)
  elseif t == 'boolean' then
    out[#out + 1] = v and '\195' or '\194'
  elseif t == 'number' then
    if v == v and v ~= HUGE and v ~= -HUGE and is_int64(v) then
      out[#out + 1] = encode_int(v)
    else
      out[#out + 1] = pack_float(v)
    end
  elseif t == 'table' and level < MAX_NESTING then
    encode_table(v, level, slots, out)
  else
    out[#out + 1] = '\192'
  end
end

local function pack(...)
  local n = select('#', ...)
  if n == 0 then arg_error(0, 'MessagePack pack needs input.') end
  if n + n > MAXCSTACK then arg_error(0, 'Too many arguments for MessagePack pack.') end
  local args, out = {...}, {}
  for i = 1, n do
    encode(args[i], 0, n + i, out)
  end
  return concat(out)
end

-- --- unpacking ----------------------------------------------------------------------------

local MISSING, BAD = 'Missing bytes in input.', 'Bad data format in input.'

-- The decoder's state: the input, the next byte's position (1-based), the error met.
local function need(c, n)
  if c.len - c.pos + 1 < n then
    c.err = MISSING
    return false
  end
  return true
end

local function uint(s, pos, n)
  local v = 0
  for i = pos, pos + n - 1 do v = v * 256 + byte(s, i) end
  return v
end

-- A 64-bit integer as C converts it to a double: one rounding of its exact value.
local function int64(s, pos, signed)
  local hi, lo = uint(s, pos, 4), uint(s, pos + 4, 4)
  if signed and hi >= 2147483648 then hi = hi - TWO32 end
  return hi * TWO32 + lo
end

local function signed(v, bits)
  local half = 2 ^ (bits - 1)
  if v >= half then return v - 2 * half end
  return v
end

local decode

local function decode_array(c, n, slots)
  local t = {}
  stack_check(slots + 1, 1, 'in function mp_decode_to_lua_array')
  for i = 1, n do
    local v = decode(c, slots + 2)
    if c.err then return end
    rawset(t, i, v)
  end
  return t
end

local function decode_map(c, n, slots)
  local t = {}
  for _ = 1, n do
    local k = decode(c, slots + 1)
    if c.err then return end
    local v = decode(c, slots + 2)
    if c.err then return end
    if k == nil then error('table index is nil', 0) end
    if k ~= k then error('table index is NaN', 0) end
    rawset(t, k, v)
  end
  return t
end

local function decode_string(c, header, len)
  if not need(c, header + len) then return end
  local start = c.pos + header
  c.pos = start + len
  return sub(c.s, start, start + len - 1)
end

-- One value at c.pos (`slots`: the stack slots in use below it); nil with c.err on a failure.
decode = function(c, slots)
  if not need(c, 1) then return end
  stack_check(slots, 1, 'too many return values at once; use unpack_one or unpack_limit ' ..
                        'instead.')
  local s, pos = c.s, c.pos
  local b = byte(s, pos)
  if b < 0x80 then c.pos = pos + 1 return b end
  if b >= 0xe0 then c.pos = pos + 1 return b - 256 end
  if b >= 0xa0 and b <= 0xbf then return decode_string(c, 1, b - 0xa0) end
  if b >= 0x90 and b <= 0x9f then c.pos = pos + 1 return decode_array(c, b - 0x90, slots) end
  if b <= 0x8f then c.pos = pos + 1 return decode_map(c, b - 0x80, slots) end
  if b == 0xc0 then c.pos = pos + 1 return nil end
  if b == 0xc2 then c.pos = pos + 1 return false end
  if b == 0xc3 then c.pos = pos + 1 return true end
  if b == 0xcc or b == 0xd0 then
    if not need(c, 2) then return end
    c.pos = pos + 2
    local v = byte(s, pos + 1)
    return b == 0xd0 and signed(v, 8) or v
  end
  if b == 0xcd or b == 0xd1 then
    if not need(c, 3) then return end
    c.pos = pos + 3
    local v = uint(s, pos + 1, 2)
    return b == 0xd1 and signed(v, 16) or v
  end
  if b == 0xce or b == 0xd2 then
    if not need(c, 5) then return end
    c.pos = pos + 5
    local v = uint(s, pos + 1, 4)
    return b == 0xd2 and signed(v, 32) or v
  end
  if b == 0xcf or b == 0xd3 then  -- (a uint64 past 2^63 reads as negative, as in C)
    if not need(c, 9) then return end
    c.pos = pos + 9
    return int64(s, pos + 1, true)
  end
  if b == 0xca then
    if not need(c, 5) then return end
    c.pos = pos + 5
    return unpack_float(sub(s, pos + 1, pos + 4))
  end
  if b == 0xcb then
    if not need(c, 9) then return end
    c.pos = pos + 9
    return unpack_double(sub(s, pos + 1, pos + 8))
  end
  if b == 0xd9 then
    if not need(c, 2) then return end
    return decode_string(c, 2, byte(s, pos + 1))
  end
  if b == 0xda then
    if not need(c, 3) then return end
    return decode_string(c, 3, uint(s, pos + 1, 2))
  end
  if b == 0xdb then
    if not need(c, 5) then return end
    c.pos = pos + 5
    return decode_string(c, 0, uint(s, pos + 1, 4))
  end
  if b == 0xdc or b == 0xde then
    if not need(c, 3) then return end
    c.pos = pos + 3
    local n = uint(s, pos + 1, 2)
    if b == 0xdc then return decode_array(c, n, slots) end
    return decode_map(c, n, slots)
  end
  if b == 0xdd or b == 0xdf then
    if not need(c, 5) then return end
    c.pos = pos + 5
    local n = uint(s, pos + 1, 4)
    if b == 0xdd then return decode_array(c, n, slots) end
    return decode_map(c, n, slots)
  end
  c.err = BAD
end

-- luaL_checkinteger / luaL_optinteger: truncated toward zero.
local function integer_arg(i, value, default)
  if value == nil and default ~= nil then return default end
  local n = tonumber(value)
  if n == nil then
    arg_error(i, 'number expected, got ' .. (value == nil and 'no value' or type(value)))
  end
  if n ~= n or n == HUGE or n == -HUGE then return -TWO63 end
  return n >= 0 and floor(n) or -floor(-n)
end

local function string_arg(value, given)
  if type(value) == 'string' then return value end
  if type(value) == 'number' then return tostring(value) end
  arg_error(1, 'string expected, got ' .. (given and type(value) or 'no value'))
end

-- C's (int) of a 64-bit value in a message.
local function as_int(n)
  n = n % TWO32
  if n >= 2147483648 then n = n - TWO32 end
  return tostring(n)
end

-- The decoded values as results (unpack takes fewer than 7,998 when given a length).
local function results(values, count)
  if count < 7990 then return unpack(values, 1, count) end
  return unpack(values)
end

-- mp_unpack_full: `slots` is what the arguments leave on the C function's stack.
local function unpack_full(s, limit, offset, slots)
  local len = #s
  if offset < 0 or limit < 0 then
    lib_error('Invalid request to unpack with offset of ' .. as_int(offset) ..
              ' and limit of ' .. as_int(len) .. '.')
  elseif offset > len then
    lib_error('Start offset ' .. as_int(offset) .. ' greater than input length ' ..
              as_int(len) .. '.')
  end
  local all = limit == 0 and offset == 0
  if all then limit = 2147483647 end
  local c = {s = s, pos = offset + 1, len = len}
  local values, count = {}, 0
  while c.pos <= len and count < limit do
    local v = decode(c, slots + count)
    if c.err then lib_error(c.err) end
    count = count + 1
    values[count] = v
  end
  if all then return results(values, count) end
  return c.pos > len and -1 or c.pos - 1, results(values, count)
end

local m = {}
m.pack = pack
m.unpack = function(...)
  local s = string_arg((...), select('#', ...) > 0)
  return unpack_full(s, 0, 0, select('#', ...))
end
m.unpack_one = function(...)
  local s, offset = ...
  offset = integer_arg(2, offset, 0)
  s = string_arg(s, select('#', ...) > 0)
  return unpack_full(s, 1, offset, 1)
end
m.unpack_limit = function(...)
  local s, limit, offset = ...
  limit = integer_arg(2, limit)
  offset = integer_arg(3, offset, 0)
  s = string_arg(s, select('#', ...) > 0)
  return unpack_full(s, limit, offset, 1)
end
m._NAME = 'cmsgpack'
m._VERSION = 'lua-cmsgpack 0.4.0'
m._COPYRIGHT = 'Copyright (C) 2012, Salvatore Sanfilippo'
m._DESCRIPTION = 'MessagePack C implementation for Lua'
return H.export(m)
