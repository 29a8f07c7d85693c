"""The libraries Redis bundles into its Lua (cjson, cmsgpack, struct, bit), the sandbox's globals
and read-only tables, the reply conversion's stack limit and redis.call's argument counts, on
the engine and on a real redis-server: every reply and error line byte for byte.

Known differences, not compared here: Redis 8's `os` (the 7.0 oracle has none), numbers whose
-0 sign is lost on their way through Python (cjson.encode(-0.0) as an argument, struct.pack's
'd' and 'f' of -0.0, redis.sha1hex(-0.0)), and the error lines of next, pairs, rawget and the
table functions when a script tail-calls them with bad arguments (they are Lua functions here:
the script's line is gone)."""

from __future__ import annotations

import socket

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock

pytest.importorskip("lupa")

CJSON = [
    "return tostring(1/cjson.decode('-0'))",
    "return {cjson.encode({k=1, j={k=2}}), cjson.encode({{a=1},{a=2}})}",
    'return cjson.encode({})',
    'return cjson.encode({1,2,3})',
    'return cjson.encode({a=1})',
    'return cjson.encode({1, nil, 3})',
    'return cjson.encode({[1]=1, [3]=3})',
    'return cjson.encode({[1]=1, [20]=3})',
    'return cjson.encode({[1]=1, [2]=2, [30]=3})',
    'return cjson.encode({[0]=1})',
    'return cjson.encode({[1.5]=1})',
    'return cjson.encode({[-1]=1})',
    'return cjson.encode(\'a"b\\\\c/d\\1\\31\\127é\')',
    "return cjson.encode('\\b\\f\\n\\r\\t')",
    'return cjson.encode(1/3)',
    'return cjson.encode(123456789012345678)',
    'return cjson.encode(1e300)',
    'return cjson.encode(1e-300)',
    'return cjson.encode(0.1)',
    'return cjson.encode(100)',
    'return cjson.encode(1e15)',
    'return cjson.encode(1e14)',
    'return cjson.encode(math.huge)',
    'return cjson.encode(-math.huge)',
    'return cjson.encode(0/0)',
    'return cjson.encode(true)',
    'return cjson.encode(nil)',
    'return cjson.encode()',
    'return cjson.encode(1, 2)',
    'return cjson.encode(cjson.null)',
    'return cjson.encode({cjson.null, false})',
    'return cjson.encode(function() end)',
    'return cjson.encode({f = function() end})',
    'return cjson.encode({[true] = 1})',
    'return cjson.encode({[{}] = 1})',
    'local t = {} t[1] = t return cjson.encode(t)',
    'local t = {} t.a = t return cjson.encode(t)',
    'return cjson.encode({[math.huge] = 1})',
    'return cjson.encode(string)',
    ('cjson.encode_invalid_numbers(true) local r = cjson.encode({0/0, math.huge, -math.huge}) '
     'cjson.encode_invalid_numbers(false) return r'),
    ("cjson.encode_invalid_numbers('null') local r = cjson.encode({0/0, math.huge}) "
     "cjson.encode_invalid_numbers('off') return r"),
    'return {cjson.encode_invalid_numbers()}',
    "return cjson.encode_invalid_numbers('x')",
    'return cjson.encode_invalid_numbers(1)',
    'return cjson.encode_invalid_numbers({})',
    'return cjson.encode_invalid_numbers(1, 2)',
    ('local r = {cjson.encode_number_precision(3)} local e = cjson.encode(math.pi) '
     'cjson.encode_number_precision(14) return {r[1], e}'),
    'return cjson.encode_number_precision(15)',
    'return cjson.encode_number_precision(0)',
    "return cjson.encode_number_precision('x')",
    "return cjson.encode_number_precision('5')",
    'return cjson.encode_number_precision()',
    'local a, b, c = cjson.encode_sparse_array() return {tostring(a), b, c}',
    ('local a, b, c = cjson.encode_sparse_array(true, 0, 5) local r = '
     'cjson.encode({[1]=1,[100]=1}) cjson.encode_sparse_array(false, 2, 10) return {tostring(a), '
     'b, c, r}'),
    ('cjson.encode_sparse_array(true) local r = cjson.encode({[1]=1,[100]=1}) '
     'cjson.encode_sparse_array(false) return r'),
    'return cjson.encode_sparse_array(1, -1)',
    "return cjson.encode_sparse_array(nil, nil, 'x')",
    'return {cjson.encode_max_depth(), cjson.decode_max_depth()}',
    ('cjson.encode_max_depth(2) local ok, e = pcall(cjson.encode, {{{1}}}) '
     'cjson.encode_max_depth(1000) return e'),
    ("cjson.decode_max_depth(2) local ok, e = pcall(cjson.decode, '[[[1]]]') "
     'cjson.decode_max_depth(1000) return e'),
    'return cjson.encode_max_depth(0)',
    'return tostring(cjson.encode_keep_buffer())',
    'return tostring(cjson.encode_keep_buffer(false))',
    'return tostring(cjson.decode_invalid_numbers())',
    "return cjson.decode('[1,2,3]')",
    'return cjson.decode(\'{"a":1}\').a',
    'return cjson.decode(\'"\\\\u00e9\\\\ud83d\\\\ude00\\\\n\\\\/"\')',
    'return cjson.decode(\'"\\\\ud83d"\')',
    'return cjson.decode(\'"\\\\udc00\\\\ud83d"\')',
    'return cjson.decode(\'"\\\\uZZZZ"\')',
    'return cjson.decode(\'"\\\\x"\')',
    'return cjson.decode(\'"abc\')',
    "return cjson.decode('')",
    "return cjson.decode(' ')",
    "return cjson.decode('[1,2')",
    "return cjson.decode('[1 2]')",
    'return cjson.decode(\'{"a" 1}\')',
    "return cjson.decode('{1:2}')",
    'return cjson.decode(\'{"a":1,}\')',
    "return cjson.decode('[1,]')",
    "return cjson.decode('nul')",
    "return cjson.decode('tru')",
    "return cjson.decode('x')",
    "return cjson.decode('1 2')",
    "return cjson.decode('-')",
    "return cjson.decode('0x1A')",
    "return cjson.decode('+5')",
    "return cjson.decode('0123')",
    "return tostring(cjson.decode('Infinity'))",
    "return tostring(cjson.decode('-inf'))",
    "return tostring(cjson.decode('nan'))",
    "return tostring(cjson.decode('NaN'))",
    "return cjson.decode('1e2')",
    "return cjson.decode('1.5e')",
    "return cjson.decode('.5')",
    "return tostring(cjson.decode('-0'))",
    "return cjson.decode('1e400')",
    "return cjson.decode('\\0a')",
    "return cjson.decode('a\\0')",
    "return cjson.decode('1\\0abc')",
    'return cjson.decode(\'"a\\0b"\')',
    'return cjson.decode(123)',
    'return cjson.decode(nil)',
    'return cjson.decode()',
    'return cjson.decode({})',
    "return cjson.decode('[]')",
    "return cjson.encode(cjson.decode('{}'))",
    "return type(cjson.decode('null'))",
    "return cjson.decode('[true,false,null]')[3] == cjson.null",
    'return cjson.encode(cjson.decode(\'{"a":[1,2,{"b":null}],"c":"d"}\'))',
    ("cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '0x10') "
     'cjson.decode_invalid_numbers(true) return e'),
    ("cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, 'inf') "
     'cjson.decode_invalid_numbers(true) return e'),
    ("cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '-x') "
     'cjson.decode_invalid_numbers(true) return e'),
    ("local s = string.rep('[', 1001) .. string.rep(']', 1001) local ok, e = pcall(cjson.decode, "
     's) return e'),
    ('local s = string.rep(\'{"a":\', 1001) .. \'1\' .. string.rep(\'}\', 1001) local ok, e = '
     'pcall(cjson.decode, s) return e'),
    'return cjson.decode(\'  [ 1 , "x" ]  \')[2]',
    "return cjson.decode('\\t\\r\\n1')",
    "return cjson.decode('\\v1')",
    "return cjson.decode('[1]x')",
    'local c = cjson.new() c.encode_number_precision(2) return {c.encode(1/3), cjson.encode(1/3)}',
    'return cjson.new().null == cjson.null',
    "local ok, e = pcall(cjson.decode, '{') return e",
    "return pcall(cjson.decode, '{')",
    "local ok, e = pcall(function() return cjson.decode('{') end) return e",
    "local x = cjson.decode('{') return x",
    'local d = cjson.decode return d({})',
    "cjson.decode('{')",
    'return cjson.encode({1,2,3,a=1})',
    'return cjson.encode({[2]=2, [1]=1})',
    "return cjson.encode({'a', {b='c'}, {1.5, -2}})",
    "local t = {} for i = 1, 100 do t['k' .. i] = i end return cjson.encode(t)",
    'local t = {} for i = 1, 50 do t[i * 3] = i end return cjson.encode(t)',
    'return cjson.decode(\'"\\\\u0000x"\')',
    'return cjson.encode(cjson.decode(\'"\\\\u0000x"\'))',
    "return cjson.encode('\\0')",
    "return cjson.decode('0.1e1')",
    "return cjson.decode('-0x10')",
    "return cjson.decode('0x')",
    "return cjson.decode('0x1p4')",
    "return tostring(cjson.decode('infinityx'))",
    "return cjson.decode('1.')",
    "return cjson.decode('1.e5')",
    'return cjson.decode(\'"\\\\u12"\')',
    'return cjson.decode(\'"\\\\\')',
]

CMSGPACK = [
    "return select('#', cmsgpack.unpack(''))",
    "return select('#', cmsgpack.unpack('\\192'))",
    "return tostring(1/cmsgpack.unpack('\\203\\128\\0\\0\\0\\0\\0\\0\\0'))",
    'return cmsgpack.pack({1,2,3})',
    'return cmsgpack.pack({})',
    'return cmsgpack.pack({a=1})',
    ('return cmsgpack.pack(0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, 2^53, '
     '2^62)'),
    ('return cmsgpack.pack(-1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649, '
     '-2^62, -2^63)'),
    'return cmsgpack.pack(2^63, -2^63 - 1e5, 2^64)',
    'return cmsgpack.pack(0.5, 0.1, 1.5, -2.25, 1e300, 1e-300, 3.4e38, 3.5e38)',
    'return cmsgpack.pack(math.huge, -math.huge, 0/0, -(0/0))',
    'return cmsgpack.pack(-0.0)',
    "return cmsgpack.pack(true, false, nil, 'x')",
    ("return cmsgpack.pack(string.rep('x', 31), string.rep('y', 32), string.rep('z', 255), "
     "string.rep('w', 256))"),
    ("return #cmsgpack.pack(string.rep('x', 65535)) .. ' ' .. "
     "#cmsgpack.pack(string.rep('x', 65536))"),
    'local t = {} for i = 1, 16 do t[i] = i end return cmsgpack.pack(t)',
    'local t = {} for i = 1, 70000 do t[i] = 1 end return #cmsgpack.pack(t)',
    "local t = {} for i = 1, 16 do t['k' .. i] = i end return cmsgpack.pack(t)",
    'return cmsgpack.pack({1, 2, nil, 4})',
    'return cmsgpack.pack({[1]=1, [3]=3})',
    'return cmsgpack.pack({[1.5]=1})',
    'return cmsgpack.pack({[-1]=1})',
    'return cmsgpack.pack({[2^31]=1})',
    'local t = {} t[1] = t return cmsgpack.pack(t)',
    'local t = {} t.a = t return cmsgpack.pack(t)',
    'return cmsgpack.pack(function() end, coroutine.create(function() end))',
    'return cmsgpack.pack(cjson.null)',
    'return cmsgpack.pack()',
    'local t = {} for i = 1, 4001 do t[i] = i end return cmsgpack.pack(unpack(t))',
    'local t = {} for i = 1, 4000 do t[i] = i end return #cmsgpack.pack(unpack(t))',
    "return cmsgpack.unpack(cmsgpack.pack({1, 'a', {b = 2}}))",
    'return {cmsgpack.unpack(cmsgpack.pack(1, 2, 3))}',
    "return cmsgpack.unpack('\\145\\1')",
    "return cmsgpack.unpack('\\129\\161a\\1').a",
    "return cmsgpack.unpack('')",
    "return {cmsgpack.unpack('')}",
    "return cmsgpack.unpack('\\193')",
    "return cmsgpack.unpack('\\196\\1a')",
    "return cmsgpack.unpack('\\205\\1')",
    "return cmsgpack.unpack('\\217\\5ab')",
    "return cmsgpack.unpack('\\219\\0\\0\\0\\5ab')",
    "return cmsgpack.unpack('\\220\\0\\2\\1')",
    "return cmsgpack.unpack('\\221\\255\\255\\255\\255')",
    "return tostring(cmsgpack.unpack('\\207\\255\\255\\255\\255\\255\\255\\255\\255'))",
    "return tostring(cmsgpack.unpack('\\207\\127\\255\\255\\255\\255\\255\\255\\255'))",
    "return tostring(cmsgpack.unpack('\\211\\128\\0\\0\\0\\0\\0\\0\\1'))",
    ('return '
     "{cmsgpack.unpack('\\208\\128\\209\\128\\0\\210\\128\\0\\0\\0\\204\\255'"
     " .. '\\205\\255\\255\\206\\255\\255\\255\\255')}"),
    ("return {tostring(cmsgpack.unpack('\\202\\63\\192\\0\\0')), "
     "tostring(cmsgpack.unpack('\\203\\63\\248\\0\\0\\0\\0\\0\\0'))}"),
    "return tostring(cmsgpack.unpack('\\202\\127\\192\\0\\0'))",
    "return tostring(cmsgpack.unpack('\\203\\128\\0\\0\\0\\0\\0\\0\\0'))",
    "return cmsgpack.unpack('\\129\\192\\1')",
    "return cmsgpack.unpack('\\130\\1\\1\\1\\2')[1]",
    'return cmsgpack.unpack(nil)',
    'return cmsgpack.unpack()',
    'return cmsgpack.unpack({})',
    'return cmsgpack.unpack(12)',
    'return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}',
    'return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 1)}',
    'return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 2)}',
    'return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 3)}',
    'return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 4)}',
    'return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), -1)}',
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 'x')}",
    'return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}',
    'return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 2)}',
    'return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 0)}',
    'return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 0, 1)}',
    'return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), -1)}',
    'return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3))}',
    "return {cmsgpack.unpack_limit('\\1\\2', 5, '1')}",
    ("local s = string.rep('\\1', 8000) local ok, e = pcall(cmsgpack.unpack, s) return "
     '{tostring(ok), e}'),
    "local s = string.rep('\\1', 7999) return select('#', cmsgpack.unpack(s))",
    ("local s = string.rep('\\145', 5000) .. '\\1' local ok, e = pcall(cmsgpack.unpack, s) "
     'return {tostring(ok), e}'),
    ("local s = string.rep('\\145', 3998) .. '\\1' local ok, e = pcall(cmsgpack.unpack, s) "
     "return {tostring(ok), type(e) == 'table' and 'a table' or e}"),
    ("local s = string.rep('\\145', 3997) .. '\\1' local ok, e = pcall(cmsgpack.unpack, s) "
     "return {tostring(ok), type(e) == 'table' and 'a table' or e}"),
    "return cmsgpack.unpack('\\145')",
    "local d = cmsgpack.unpack return d('\\193')",
    "local x = cmsgpack.unpack('\\193') return x",
    "return cmsgpack.pack({[1]='a', [2]='b', x = 1})",
    'return cmsgpack.pack(string)',
    'return cmsgpack.pack(1.0, 3, 1e15, 123.0)',
]

STRUCT_BIT_MATH = [
    "return struct.pack('>I', 1)",
    "return struct.pack('<I', 1)",
    "return struct.pack('i', -1)",
    "return struct.pack('>bBhHlLT', -1, 255, -2, 65535, -3, 2^40, 7)",
    "return struct.pack('>i3', 65536 + 3)",
    "return struct.pack('>I16', 1)",
    "return struct.pack('>i16', -1)",
    "return struct.pack('>I33', 1)",
    "return struct.pack('>f', 1.5)",
    "return struct.pack('<d', -2.25)",
    "return struct.pack('>f', 1e300)",
    "return struct.pack('>f', -1e300)",
    "return struct.pack('>d', 0/0)",
    "return struct.pack('c5', 'hello world')",
    "return struct.pack('c0', 'abc')",
    "return struct.pack('c5', 'ab')",
    "return struct.pack('s', 'abc')",
    "return struct.pack('xx>b', 1)",
    "return struct.pack('!4 b i', 1, 2)",
    "return struct.pack('!b d', 1, 2)",
    "return struct.pack('!3 b i', 1, 2)",
    "return struct.pack('!', 1)",
    "return struct.pack('z', 1)",
    "return struct.pack('i', 'x')",
    "return struct.pack('i', '12')",
    "return struct.pack('i')",
    'return struct.pack()',
    'return struct.pack(12)',
    "return struct.pack('>I', 2^32 + 5)",
    "return struct.pack('>I', -1)",
    "return struct.pack('>L', 2^64)",
    "return struct.pack('>L', 2^63)",
    "return struct.pack('>l', -2^63)",
    "return struct.pack('>l', -2^64)",
    "return struct.pack('>L', math.huge)",
    "return struct.pack('>l', -math.huge)",
    "return struct.pack('>L', 0/0)",
    "return struct.pack('>i', 1.9)",
    "return struct.pack('>i', -1.9)",
    "return struct.pack('i99999999999', 1)",
    "return {struct.unpack('>I', '\\0\\0\\0\\1')}",
    "return {struct.unpack('<i', '\\255\\255\\255\\255')}",
    "return {struct.unpack('>bBhHlLT', struct.pack('>bBhHlLT', -1, 255, -2, 65535, -3, 2^40, 7))}",
    "return {struct.unpack('>i3', '\\255\\255\\254')}",
    "return {struct.unpack('>i9', '\\1\\255\\255\\255\\255\\255\\255\\255\\255')}",
    "return {struct.unpack('>I9', '\\1\\255\\255\\255\\255\\255\\255\\255\\255')}",
    "return {struct.unpack('>I16', string.rep('\\255', 16))}",
    "return {struct.unpack('>l', '\\255\\255\\255\\255\\255\\255\\255\\255')}",
    "return {tostring(struct.unpack('>L', '\\255\\255\\255\\255\\255\\255\\255\\255'))}",
    ("return {tostring(struct.unpack('>f', '\\63\\192\\0\\0')), tostring(struct.unpack('<d', "
     "struct.pack('<d', 0.1)))}"),
    "return {struct.unpack('c3', 'abcdef')}",
    "return {struct.unpack('bc0', '\\3abcdef')}",
    "return {struct.unpack('c0', 'abc')}",
    "return {struct.unpack('c1c0', '3abcd')}",
    "return {struct.unpack('s', 'abc\\0def')}",
    "return {struct.unpack('s', 'abc')}",
    "return {struct.unpack('i', 'ab')}",
    "return {struct.unpack('>i', 'xxxx\\0\\0\\0\\5', 5)}",
    "return {struct.unpack('>i', 'xxxx\\0\\0\\0\\5', 0)}",
    "return {struct.unpack('>i', 'xxxx\\0\\0\\0\\5', -1)}",
    "return {struct.unpack('>i', 'xxxx\\0\\0\\0\\5', 6)}",
    "return {struct.unpack('>i', 'xxxx\\0\\0\\0\\5', '5')}",
    "return {struct.unpack('>i', 'xxxx\\0\\0\\0\\5', 'x')}",
    "return {struct.unpack('!4 b i', struct.pack('!4 b i', 1, 2))}",
    "return {struct.unpack('z', 'abc')}",
    'return {struct.unpack()}',
    "return {struct.unpack('i')}",
    "return {struct.unpack('x', '')}",
    "return {struct.unpack('', '')}",
    "return {struct.size('>iI2c5xd'), struct.size('!8 b d'), struct.size('z'), struct.size('')}",
    "return struct.size('s')",
    "return struct.size('c0')",
    "return struct.size('!3')",
    "return struct.size(' <>')",
    "return struct.size('?')",
    'return struct.size()',
    "local p = struct.pack return p('q')",
    "local ok, e = pcall(struct.pack, 'q') return e",
    ('return {bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.tobit(-1), bit.tobit(1.5), '
     'bit.tobit(2.5), bit.tobit(-1.5), bit.tobit(2^52), bit.tobit(2^53 + 2), bit.tobit(1e20), '
     'bit.tobit(-1e20), bit.tobit(math.huge), bit.tobit(0/0)}'),
    "return {bit.tobit('0x10'), bit.tobit(' 12 '), bit.tobit('1e3')}",
    "return bit.tobit('x')",
    'return bit.tobit({})',
    "return bit.band(1, 'x')",
    "return bit.band(1, nil, 'x')",
    ('return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -2), '
     'bit.tohex(255, 0), bit.tohex(255, 20), bit.tohex(1, -2^31), bit.tohex(0x12345678, 3)}'),
    'return bit.tohex(1, nil)',
    'return {bit.bnot(0), bit.bor(), 1}',
    'return {bit.bor(1), bit.bxor(5, 3, 1), bit.band(0xff, 0x0f, 0x3)}',
    ('return {bit.lshift(1, 32), bit.lshift(1, 33), bit.rshift(-1, 1), bit.arshift(-1, 1), '
     'bit.rol(0x80000001, 1), bit.ror(1, 1), bit.rol(5, 0), bit.ror(5, 32)}'),
    'return {bit.bswap(0x12345678), bit.bswap(-1)}',
    'return bit.lshift(1)',
    'local ok, e = pcall(bit.band, {}) return e',
    'return {bit.band(2^31, 2^31), bit.bor(-2^31, 0)}',
    "return math.random('x')",
    'return math.random(1, 2, 3)',
    'return math.random(0)',
    'return math.random(3, 1)',
    'local ok, e = pcall(math.random, {}) return e',
    'return redis.sha1hex(1.5)',
    'return redis.sha1hex({})',
]

SANDBOX = [
    ("return {type(redis.call), type(redis.pcall), type(redis.sha1hex), type(redis.setresp), "
     "type(redis.log), type(bit.band), type(struct.pack), type(cjson.encode), "
     "type(cmsgpack.pack), type(math.random), type(cjson.null), type(cjson.new)}"),
    ("local mt = getmetatable(_G) local t = {} for k, v in pairs(mt) do "
     "t[#t + 1] = k .. ':' .. type(v) end return t"),
    "return tostring(cjson.null)",
    ("return {cjson._NAME, cjson._VERSION, cmsgpack._NAME, cmsgpack._VERSION, "
     "cmsgpack._COPYRIGHT, cmsgpack._DESCRIPTION}"),
    ("local t = {} for k, v in pairs(cjson) do t[#t + 1] = k .. ':' .. type(v) end "
     "table.sort(t) return t"),
    "local t = {} for k in pairs(cmsgpack) do t[#t + 1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(struct) do t[#t + 1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(bit) do t[#t + 1] = k end table.sort(t) return t",
    ("local t = {} for k, v in pairs(redis) do t[#t + 1] = k .. ':' .. type(v) end "
     "table.sort(t) return t"),
    "local t = {} for k in pairs(math) do t[#t + 1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(table) do t[#t + 1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(string) do t[#t + 1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(coroutine) do t[#t + 1] = k end table.sort(t) return t",
    ("return {cjson.null == cjson.null, cjson.decode('null') == cjson.null, type(cjson.new), "
     "cjson.new() == cjson}"),
    "local c = cjson.new() c.x = 1 return c.x",
    ("local t = {} for k, v in pairs(getmetatable('')) do t[#t + 1] = k .. ':' .. type(v) end "
     "return t"),
    "return {getmetatable(cjson.null) == nil, type(getmetatable(getmetatable('')))}",
    "return __redis__err__handler({err='x'})",
    "return __redis__err__handler('x')",
    'return {pcall()}',
    'local ok, e = pcall(bit.band, nil) return {tostring(ok), type(e), e}',
    'local ok, e = pcall(function() return bit.band(nil) end) return {tostring(ok), type(e), e}',
    'return bit.band(nil)',
    'return bit.band()',
    'local b = bit.band return b({})',
    "local ok, e = pcall(math.random, 'x') return {tostring(ok), type(e), e}",
    'local ok, e = pcall(redis.sha1hex) return {tostring(ok), type(e), tostring(e)}',
    ('local co = coroutine.create(function() bit.band(nil) end) local ok, e = '
     'coroutine.resume(co) return {tostring(ok), type(e), e}'),
    ("local co = coroutine.create(function() redis.call('nosuch') end) local ok, e = "
     'coroutine.resume(co) return {tostring(ok), type(e)}'),
    'local ok, e = pcall(next, nil) return e',
    'table.insert(string, 1)',
    'table.foreach(string, function(k) end) return 1',
    'local n = 0 table.foreach(string, function(k) n = n + 1 end) return n',
    'return table.getn(string)',
    'return #string',
    'return __redis__err__handler',
    ('return {type(__redis__err__handler(1)), __redis__err__handler(1).err, '
     '__redis__err__handler(1).source, __redis__err__handler(1).line}'),
    ("return xpcall(function() error('x') end, "
     "function(e) return type(e) .. ':' .. tostring(e) end)"),
    "return {xpcall(function() redis.call('nosuch') end, function(e) return type(e) end)}",
    ("return {xpcall(function() bit.band(nil) end, function(e) return type(e) .. ':' .. "
     'tostring(e) end)}'),
    'return tostring(redis.call.__self__)',
    'redis.call.x = 1',
    'return bit.band.__globals__',
    'return {type(getfenv), type(setfenv), type(newproxy)}',
    'return getfenv',
    ("local ok, e = xpcall(function() redis.call('nosuch') end, function(e) return e end) return "
     '{type(e), e.err}'),
    ('return {bit.band(12, 10), bit.bor(1, 2, 4), bit.tohex(255, -4), bit.bnot(0), bit.lshift(1, '
     '31), bit.rshift(-1, 28)}'),
    'return math.random.x',
]


def errors_as_text(reply: object) -> object:
    """Error replies nested in an array as their lines (the two clients' error types differ)."""
    if isinstance(reply, Exception):
        return ("error", str(reply))
    if isinstance(reply, list):
        return [errors_as_text(x) for x in reply]
    return reply


@pytest.fixture
def both(redis_raw) -> Both:  # type: ignore[no-untyped-def]
    b = Both(Engine(clock=WallClock()), redis_raw)
    b("SCRIPT", "FLUSH")  # the libraries' options (cjson's) live until the Lua state goes
    return b


@pytest.mark.parametrize("cases", [CJSON, CMSGPACK, STRUCT_BIT_MATH, SANDBOX],
                         ids=["cjson", "cmsgpack", "struct-bit-math", "sandbox"])
def test_library_calls_match_redis(both: Both, cases: list[str]) -> None:
    for script in cases:
        both("EVAL", script, "0", normalise=errors_as_text)


def test_the_globals_are_redis_8s(both: Both) -> None:
    """The same globals as Redis (the oracle, 7.0 with Redis 8.2's removal of getfenv, setfenv
    and newproxy) plus Redis 8's `os`, which holds os.clock alone."""
    listing = ("local t = {} for k, v in pairs(_G) do t[#t + 1] = k .. ':' .. type(v) end "
               "table.sort(t) return t")
    ours = both.engine.execute("EVAL", listing, "0")
    theirs = both.redis.execute("EVAL", listing, "0")
    assert [name for name in ours if name != b"os:table"] == theirs
    assert b"os:table" in ours
    assert both.engine.execute(
        "EVAL", "local t = {} for k, v in pairs(os) do t[#t + 1] = k .. ':' .. type(v) end "
        "return t", "0") == [b"clock:function"]


def test_redis_call_takes_what_unpack_gives(both: Both) -> None:
    """Redis's limit is unpack's (LUAI_MAXCSTACK): 7,999 values. Ours is lupa's, 7,997
    arguments; below both, and past unpack's, the two answer alike."""
    script = ("local t = {} for i = 1, tonumber(ARGV[1]) do t[i] = 'k' .. i end "
              "return redis.call('del', unpack(t))")
    for n in (7000, 7996, 8000, 10_000):
        both("EVAL", script, "0", str(n), normalise=errors_as_text)
    both("EVAL", "return {#KEYS, #ARGV, ARGV[10000]}", "2", *(str(i) for i in range(10_000)))


# Tables a script returns that hold themselves: Redis converts each value where its C code
# holds it on the Lua stack and replies an error once LUAI_MAXCSTACK is near.
SELF_REFERENCES = [
    "local t = {} t[1] = t return t",
    "local t = {} t[1] = t t[2] = 'x' return t",
    "local t = {} t[1] = 'a' t[2] = t return t",
    "local t = {} t[1] = {err = 'x'} t[2] = t return t",
    "local t = {} t[1] = t return {t}",
    "local t = {} for i = 1, 7996 do t = {t} end return t",
    "redis.setresp(3) local t = {} t.map = {} t.map['k'] = t return t",
    "redis.setresp(3) local t = {} t.map = {} t.map[t] = 1 return t",
    "redis.setresp(3) local t = {} t.set = {} t.set[t] = true return t",
]


@pytest.mark.parametrize("protocol", ["2", "3"])
def test_a_table_that_holds_itself_is_cut_where_redis_cuts_it(redis_server,  # type: ignore[no-untyped-def]
                                                               protocol: str) -> None:
    from tests.support.resp_client import encode_command, read_raw_reply
    from tests.support.server_util import start_server

    def replies(port: int) -> list[bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            f = sock.makefile("rb")
            out = []
            for argv in [("HELLO", protocol)] + [("EVAL", s, "0") for s in SELF_REFERENCES]:
                sock.sendall(encode_command(*argv))
                out.append(read_raw_reply(f))
            return out[1:]

    handle = start_server(Engine(clock=WallClock()))
    try:
        ours = replies(handle.port)
        assert ours == replies(redis_server.port)
        assert ours[0] == b"*1\r\n" * 7995 + b"-ERR reached lua stack limit\r\n"
    finally:
        handle.stop()
