-- cjson, as Redis bundles it (Lua CJSON 2.1.0, deps/lua/src/lua_cjson.c): encode, decode, the
-- option functions, cjson.new and cjson.null, with the same output and the same error lines.
-- Written for streamkeep in Lua 5.1; loaded by sandbox.lua, which hands in `H` (how to raise
-- errors, the null value, and `export`, which makes a module's functions what scripts call). Limits Redis's C code meets are kept: the nesting limits, and
-- the Lua stack (LUAI_MAXCSTACK, 8000 slots) the C functions would fill on deep nesting.

local H = ...
local lib_error, arg_error, null, unview, export =
  H.lib_error, H.arg_error, H.null, H.unview, H.export
local type, select, tostring, tonumber, next, rawget, rawset, floor =
  type, select, tostring, tonumber, next, rawget, rawset, math.floor
local byte, char, sub, find, format, gsub, concat =
  string.byte, string.char, string.sub, string.find, string.format, string.gsub, table.concat

local MAXCSTACK = 8000
local INT_MAX = 2147483647
local HUGE = math.huge

-- --- the options --------------------------------------------------------------------------

local function check_args(n, ...)
  if select('#', ...) > n then arg_error(n + 1, 'found too many arguments') end
end

-- luaL_checkinteger: a number or a string that reads as one, truncated toward zero; then an
-- int (the low 32 bits, as C's conversion on the targets Redis runs on).
local function check_integer(i, value)
  local n = tonumber(value)
  if n == nil then
    arg_error(i, 'number expected, got ' .. (value == nil and 'no value' or type(value)))
  end
  if n ~= n or n == HUGE or n == -HUGE then return -2147483648 end
  n = n >= 0 and floor(n) or -floor(-n)
  n = n % 4294967296
  if n >= 2147483648 then n = n - 4294967296 end
  return n
end

local function integer_option(cfg, key, i, value, min, max)
  if value ~= nil then
    local n = check_integer(i, value)
    if n < min or n > max then
      arg_error(1, 'expected integer between ' .. min .. ' and ' .. max)
    end
    cfg[key] = n
  end
  return cfg[key]
end

local BOOL_OPTIONS = {off = 0, on = 1}
local INVALID_OPTIONS = {off = 0, on = 1, null = 2}
local INVALID_NAMES = {[0] = 'off', 'on', 'null'}

-- json_enum_option: a boolean or one of the option words; answers the setting as a boolean
-- when it is off or on, else as its word.
local function enum_option(cfg, key, i, value, words)
  if value ~= nil then
    if type(value) == 'boolean' then
      cfg[key] = value and 1 or 0
    elseif type(value) == 'string' or type(value) == 'number' then
      local setting = words[tostring(value)]
      if setting == nil then arg_error(i, "invalid option '" .. tostring(value) .. "'") end
      cfg[key] = setting
    else
      arg_error(i, 'string expected, got ' .. type(value))
    end
  end
  local setting = cfg[key]
  if setting == 0 or setting == 1 then return setting == 1 end
  return INVALID_NAMES[setting]
end

-- --- encoding ---------------------------------------------------------------------------

local ESCAPES = {['"'] = '\\"', ['\\'] = '\\\\', ['/'] = '\\/', ['\b'] = '\\b', ['\t'] = '\\t',
                 ['\n'] = '\\n', ['\f'] = '\\f', ['\r'] = '\\r', ['\127'] = '\\u007f'}
for c = 0, 31 do
  local ch = char(c)
  if not ESCAPES[ch] then ESCAPES[ch] = format('\\u%04x', c) end
end

local function quote(s)
  return '"' .. gsub(s, '[%c"\\/]', ESCAPES) .. '"'
end

local function cannot(what, reason)
  lib_error('Cannot serialise ' .. what .. ': ' .. reason)
end

local function encode_number(cfg, n)
  if n ~= n or n == HUGE or n == -HUGE then
    local invalid = cfg.encode_invalid_numbers
    if invalid == 0 then cannot('number', 'must not be NaN or Inf') end
    if invalid == 2 then return 'null' end
    if n ~= n then return 'nan' end
  end
  return format(cfg.number_format, n)
end

-- lua_array_length: the highest key if every key is an integer >= 1 (as C keeps it, in an
-- int), -1 if some is not; an excessively sparse one is an error or an object.
local function array_length(cfg, t)
  local max, items = 0, 0
  for k in next, t do
    if type(k) ~= 'number' or k == 0 or floor(k) ~= k or k < 1 then return -1 end
    if k > max then max = k <= INT_MAX and k or -2147483648 end
    items = items + 1
  end
  local ratio = cfg.sparse_ratio
  if ratio > 0 and max > items * ratio and max > cfg.sparse_safe then
    if cfg.sparse_convert == 0 then cannot('table', 'excessively sparse array') end
    return -1
  end
  return max
end

-- The text being encoded, in pieces, and their count; `keys` holds the object keys already
-- quoted (an array of objects repeats them). (encode runs no script code: it reads tables raw,
-- so it is never re-entered.)
local out, n, keys

local encode_value

-- `slots`: the Lua stack slots Redis's encoder would hold here (the value on top included).
local function encode_table(cfg, t, depth, slots)
  depth = depth + 1
  if depth > cfg.encode_max_depth or slots + 3 > MAXCSTACK then
    lib_error('Cannot serialise, excessive nesting (' .. depth .. ')')
  end
  t = unview(t)
  local len = array_length(cfg, t)
  if len > 0 then
    n = n + 1; out[n] = '['
    for i = 1, len do
      if i > 1 then n = n + 1; out[n] = ',' end
      encode_value(cfg, rawget(t, i), depth, slots + 1)
    end
    n = n + 1; out[n] = ']'
    return
  end
  n = n + 1; out[n] = '{'
  local comma = false
  for k, v in next, t do
    if comma then n = n + 1; out[n] = ',' else comma = true end
    local kt = type(k)
    if kt == 'string' then
      local quoted = keys[k]
      if quoted == nil then
        quoted = quote(k) .. ':'
        keys[k] = quoted
      end
      n = n + 1; out[n] = quoted
    elseif kt == 'number' then
      n = n + 1; out[n] = '"' .. encode_number(cfg, k) .. '":'
    else
      cannot(kt, 'table key must be a number or string')
    end
    encode_value(cfg, v, depth, slots + 2)
  end
  n = n + 1; out[n] = '}'
end

encode_value = function(cfg, v, depth, slots)
  local t = type(v)
  if t == 'string' then
    n = n + 1; out[n] = quote(v)
  elseif t == 'number' then
    n = n + 1; out[n] = encode_number(cfg, v)
  elseif t == 'boolean' then
    n = n + 1; out[n] = v and 'true' or 'false'
  elseif t == 'table' then
    encode_table(cfg, v, depth, slots)
  elseif v == nil or v == null then
    n = n + 1; out[n] = 'null'
  else
    cannot(t, 'type not supported')
  end
end

-- --- decoding ---------------------------------------------------------------------------

-- Token kinds, named as the C code names them in its errors.
local T_OBJ_BEGIN, T_OBJ_END, T_ARR_BEGIN, T_ARR_END, T_STRING, T_NUMBER, T_BOOLEAN, T_NULL,
      T_COLON, T_COMMA, T_END, T_ERROR = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
local TOKEN_NAMES = {'T_OBJ_BEGIN', 'T_OBJ_END', 'T_ARR_BEGIN', 'T_ARR_END', 'T_STRING',
                     'T_NUMBER', 'T_BOOLEAN', 'T_NULL', 'T_COLON', 'T_COMMA', 'T_END'}
local SINGLE = {[123] = T_OBJ_BEGIN, [125] = T_OBJ_END, [91] = T_ARR_BEGIN, [93] = T_ARR_END,
                [44] = T_COMMA, [58] = T_COLON}
local SIMPLE_ESCAPES = {[34] = '"', [92] = '\\', [47] = '/', [98] = '\b', [116] = '\t',
                        [110] = '\n', [102] = '\f', [114] = '\r'}

local function token_error(d, pos, what)
  d.kind, d.value, d.index = T_ERROR, what, pos - 1
end

-- The longest prefix of s at pos that strtod reads (C locale), or nil.
local function strtod_prefix(s, pos)
  local _, e = find(s, '^[+-]?', pos)
  local p = e + 1
  local word = sub(s, p, p + 2):lower()
  if word == 'inf' then
    if sub(s, p, p + 7):lower() == 'infinity' then return sub(s, pos, p + 7) end
    return sub(s, pos, p + 2)
  elseif word == 'nan' then
    local _, close = find(s, '^%([%w_]*%)', p + 3)
    return sub(s, pos, close or p + 2)
  end
  local _, he = find(s, '^0[xX]%x*%.?%x*', p)
  if he and find(sub(s, p + 2, he), '%x') then
    local _, pe = find(s, '^[pP][+-]?%d+', he + 1)
    return sub(s, pos, pe or he)
  end
  local _, de = find(s, '^%d*%.?%d*', p)
  if not find(sub(s, p, de), '%d') then return nil end
  local _, ee = find(s, '^[eE][+-]?%d+', de + 1)
  return sub(s, pos, ee or de)
end

local function number_token(d, s, pos)
  local text = strtod_prefix(s, pos)
  if text == nil then return token_error(d, pos, 'invalid number') end
  d.kind, d.value, d.index, d.pos = T_NUMBER, tonumber(text), pos - 1, pos + #text
end

-- json_is_invalid_number: what strict JSON refuses but strtod reads.
local function invalid_number(s, pos)
  local b = byte(s, pos)
  if b == 43 then return true end  -- '+'
  if b == 45 then pos = pos + 1; b = byte(s, pos) end
  if b == 48 then  -- '0'
    local b2 = byte(s, pos + 1) or 0
    return b2 == 120 or b2 == 88 or (b2 >= 48 and b2 <= 57)
  elseif (b or 0) <= 57 then
    return false
  end
  local word = sub(s, pos, pos + 2):lower()
  return word == 'inf' or word == 'nan'
end

local function codepoint_utf8(c)
  if c <= 0x7F then return char(c) end
  if c <= 0x7FF then return char(0xC0 + floor(c / 64), 0x80 + c % 64) end
  if c <= 0xFFFF then
    return char(0xE0 + floor(c / 4096), 0x80 + floor(c / 64) % 64, 0x80 + c % 64)
  end
  return char(0xF0 + floor(c / 262144), 0x80 + floor(c / 4096) % 64, 0x80 + floor(c / 64) % 64,
              0x80 + c % 64)
end

local function hex4(s, pos)
  local h = sub(s, pos, pos + 3)
  if #h < 4 or find(h, '[^%x]') then return nil end
  return tonumber(h, 16)
end

-- A \u escape at pos (the backslash): its UTF-8 and the position after it, or nil.
local function unicode_escape(s, pos)
  local c = hex4(s, pos + 2)
  if c == nil then return nil end
  local len = 6
  if c >= 0xD800 and c <= 0xDFFF then
    if c >= 0xDC00 then return nil end  -- a low surrogate first
    if sub(s, pos + 6, pos + 7) ~= '\\u' then return nil end
    local low = hex4(s, pos + 8)
    if low == nil or low < 0xDC00 or low > 0xDFFF then return nil end
    c = (c - 0xD800) * 1024 + (low - 0xDC00) + 0x10000
    len = 12
  end
  return codepoint_utf8(c), pos + len
end

local function string_token(d, s, pos)
  local index = pos - 1
  local parts, n = {}, 0
  pos = pos + 1
  while true do
    local e = find(s, '["\\%z]', pos)
    if e == nil then  -- the text's end: C meets its terminating NUL
      return token_error(d, #s + 1, 'unexpected end of string')
    end
    if e > pos then n = n + 1; parts[n] = sub(s, pos, e - 1) end
    local b = byte(s, e)
    if b == 34 then
      d.kind, d.value, d.index, d.pos = T_STRING, concat(parts), index, e + 1
      return
    elseif b == 0 then
      return token_error(d, e, 'unexpected end of string')
    end
    local esc = byte(s, e + 1)
    if esc == 117 then  -- \u
      local utf8, after = unicode_escape(s, e)
      if utf8 == nil then return token_error(d, e, 'invalid unicode escape code') end
      n = n + 1; parts[n] = utf8
      pos = after
    else
      local c = SIMPLE_ESCAPES[esc]
      if c == nil then return token_error(d, e, 'invalid escape code') end
      n = n + 1; parts[n] = c
      pos = e + 2
    end
  end
end

local function next_token(d)
  local s, cfg = d.s, d.cfg
  local pos = find(s, '[^ \t\n\r]', d.pos) or #s + 1
  d.pos = pos
  local b = byte(s, pos)
  if b == nil or b == 0 then
    d.kind, d.index = T_END, pos - 1
    return
  end
  local single = SINGLE[b]
  if single then
    d.kind, d.index, d.pos = single, pos - 1, pos + 1
  elseif b == 34 then
    string_token(d, s, pos)
  elseif b == 45 or (b >= 48 and b <= 57) then
    if cfg.decode_invalid_numbers == 0 and invalid_number(s, pos) then
      return token_error(d, pos, 'invalid number')
    end
    number_token(d, s, pos)
  elseif sub(s, pos, pos + 3) == 'true' then
    d.kind, d.value, d.index, d.pos = T_BOOLEAN, true, pos - 1, pos + 4
  elseif sub(s, pos, pos + 4) == 'false' then
    d.kind, d.value, d.index, d.pos = T_BOOLEAN, false, pos - 1, pos + 5
  elseif sub(s, pos, pos + 3) == 'null' then
    d.kind, d.index, d.pos = T_NULL, pos - 1, pos + 4
  elseif cfg.decode_invalid_numbers ~= 0 and invalid_number(s, pos) then
    number_token(d, s, pos)
  else
    token_error(d, pos, 'invalid token')
  end
end

local function parse_error(d, expected)
  local found = d.kind == T_ERROR and d.value or TOKEN_NAMES[d.kind]
  lib_error('Expected ' .. expected .. ' but found ' .. found .. ' at character ' ..
            (d.index + 1))
end

-- json_decode_descend: one level deeper, within decode_max_depth and the Lua stack (`slots` in
-- use, `need` more for this level).
local function descend(d, slots, need)
  local depth = d.depth + 1
  d.depth = depth
  if depth > d.cfg.decode_max_depth or slots + need > MAXCSTACK then
    lib_error('Found too many nested data structures (' .. depth .. ') at character ' ..
              (d.pos - 1))
  end
end

local parse_value

local function parse_object(d, slots)
  descend(d, slots, 3)
  local t = {}
  next_token(d)
  if d.kind == T_OBJ_END then
    d.depth = d.depth - 1
    return t
  end
  while true do
    if d.kind ~= T_STRING then parse_error(d, 'object key string') end
    local key = d.value
    next_token(d)
    if d.kind ~= T_COLON then parse_error(d, 'colon') end
    next_token(d)
    rawset(t, key, parse_value(d, slots + 2))
    next_token(d)
    if d.kind == T_OBJ_END then
      d.depth = d.depth - 1
      return t
    end
    if d.kind ~= T_COMMA then parse_error(d, 'comma or object end') end
    next_token(d)
  end
end

local function parse_array(d, slots)
  descend(d, slots, 2)
  local t = {}
  next_token(d)
  if d.kind == T_ARR_END then
    d.depth = d.depth - 1
    return t
  end
  local i = 1
  while true do
    rawset(t, i, parse_value(d, slots + 1))
    i = i + 1
    next_token(d)
    if d.kind == T_ARR_END then
      d.depth = d.depth - 1
      return t
    end
    if d.kind ~= T_COMMA then parse_error(d, 'comma or array end') end
    next_token(d)
  end
end

-- The value the current token starts (`slots`: the stack slots in use below it).
parse_value = function(d, slots)
  local kind = d.kind
  if kind == T_STRING or kind == T_NUMBER or kind == T_BOOLEAN then return d.value end
  if kind == T_OBJ_BEGIN then return parse_object(d, slots) end
  if kind == T_ARR_BEGIN then return parse_array(d, slots) end
  if kind == T_NULL then return null end
  parse_error(d, 'value')
end

-- --- the module -------------------------------------------------------------------------

local new

local function make(cfg)
  local m = {}

  m.encode = function(...)
    if select('#', ...) ~= 1 then arg_error(1, 'expected 1 argument') end
    out, n, keys = {}, 0, {}
    encode_value(cfg, (...), 0, 1)
    local text = concat(out, '', 1, n)
    out, keys = nil, nil
    return text
  end

  m.decode = function(...)
    if select('#', ...) ~= 1 then arg_error(1, 'expected 1 argument') end
    local s = ...
    if type(s) == 'number' then
      s = tostring(s)
    elseif type(s) ~= 'string' then
      arg_error(1, 'string expected, got ' .. (s == nil and 'nil' or type(s)))
    end
    if #s >= 2 and (byte(s, 1) == 0 or byte(s, 2) == 0) then
      lib_error('JSON parser does not support UTF-16 or UTF-32')
    end
    local d = {s = s, pos = 1, depth = 0, cfg = cfg}
    next_token(d)
    local value = parse_value(d, 1)
    next_token(d)
    if d.kind ~= T_END then parse_error(d, 'the end') end
    return value
  end

  m.encode_sparse_array = function(...)
    check_args(3, ...)
    local convert, ratio, safe = ...
    local c = enum_option(cfg, 'sparse_convert', 1, convert, BOOL_OPTIONS)
    return c, integer_option(cfg, 'sparse_ratio', 2, ratio, 0, INT_MAX),
           integer_option(cfg, 'sparse_safe', 3, safe, 0, INT_MAX)
  end
  m.encode_max_depth = function(...)
    check_args(1, ...)
    return integer_option(cfg, 'encode_max_depth', 1, (...), 1, INT_MAX)
  end
  m.decode_max_depth = function(...)
    check_args(1, ...)
    return integer_option(cfg, 'decode_max_depth', 1, (...), 1, INT_MAX)
  end
  m.encode_number_precision = function(...)
    check_args(1, ...)
    local p = integer_option(cfg, 'number_precision', 1, (...), 1, 14)
    cfg.number_format = '%.' .. p .. 'g'
    return p
  end
  m.encode_keep_buffer = function(...)
    check_args(1, ...)
    return enum_option(cfg, 'keep_buffer', 1, (...), BOOL_OPTIONS)
  end
  m.encode_invalid_numbers = function(...)
    check_args(1, ...)
    return enum_option(cfg, 'encode_invalid_numbers', 1, (...), INVALID_OPTIONS)
  end
  m.decode_invalid_numbers = function(...)
    check_args(1, ...)
    return enum_option(cfg, 'decode_invalid_numbers', 1, (...), BOOL_OPTIONS)
  end
  m.new = new
  m.null = null
  m._NAME = 'cjson'
  m._VERSION = '2.1.0'
  return m
end

new = function()
  return export(make({
    sparse_convert = 0, sparse_ratio = 2, sparse_safe = 10,
    encode_max_depth = 1000, decode_max_depth = 1000,
    encode_invalid_numbers = 0, decode_invalid_numbers = 1,
    keep_buffer = 1, number_precision = 14, number_format = '%.14g',
  }))
end

return new()
