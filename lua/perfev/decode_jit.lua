-- LuaJIT's iterator of field-selected values (perfev.decode with `fields`,
-- csrc/record/iter.c's accelerate): when every field asked for is an integer
-- at a fixed offset of the samples of one attr in this byte order (a plan
-- of scalars, csrc/record/select.c), the C core hands the plan here and this
-- module returns a Lua iterator that reads those offsets through the FFI.
-- LuaJIT compiles it into the caller's loop: no C call a sample (LuaJIT's
-- C API costs more per call than Lua 5.4's).
--
-- It reads what the C shortcut reads and gives the same values, by the
-- same 64-bit rule (doc/runtimes.md: a number within +-2^53 as a signed
-- integer, else a uint64_t cdata). Records of other types are stepped
-- over, as the C iterator's values mode does. Anything else (a header cut
-- short, a size out of bounds, a sample too short for the fields) goes to
-- the C iterator, replayed from the start to the same sample, which raises
-- its own error there; the loop then goes on with it.
--
-- Loaded by perfev on LuaJIT with the FFI; M.iterator is what the core
-- calls. Interpreted (jit.off()) the FFI is slower than the C iterator:
-- the C iterator is kept then.
local ffi = require "ffi"
local core = require "perfev.core"
local compat = require "perfev.compat"

local M = {}

local SAMPLE = core.RECORD.SAMPLE
-- The kinds of a plan's scalars (csrc/record/select.h's PERFEV_SCALAR_*), as the core
-- exports them (csrc/record/iter.c).
local U64, U32, S32 = core.SCALAR.U64, core.SCALAR.U32, core.SCALAR.S32

-- Each shape of plan (its kinds) gets one generated maker, so that the
-- values are returned by straight-line code the compiler sees whole.
local makers = {}

local HEAD = [[
local ffi, normalize, SAMPLE = ...
local cast = ffi.cast
local pu8 = ffi.typeof("const uint8_t *")
local pu16 = ffi.typeof("const uint16_t *")
local pu32 = ffi.typeof("const uint32_t *")
local pi32 = ffi.typeof("const int32_t *")
local pi64 = ffi.typeof("const int64_t *")
return function(data, fallback, min_size, period, %s)
  local p, len, off, given, it = cast(pu8, data), #data, 0, 0, nil
  -- the C iterator, from the start to the sample at off: raises its error
  -- (it also keeps the bytes p points into: they are its first upvalue)
  local function replay()
    it = fallback
    for _ = 1, given do it() end
    return it()
  end
  local step
  -- records of other types stepped over, the end, and anything wrong: in
  -- a function of its own, so that the step has no inner loop (the
  -- compiler would not take it into the caller's loop); a sample that is
  -- whole goes back to the step
  local function slow()
    while true do
      if len - off < 8 then
        if off == len then return nil end
        return replay()
      end
      local size = cast(pu16, p + off)[3]
      if size < 8 or size > len - off then return replay() end
      if cast(pu32, p + off)[0] == SAMPLE then
        if size < min_size then return replay() end
        return step()
      end
      off = off + size
    end
  end
  step = function()
    if it then return it() end
    if len - off >= 8 then
      local r = p + off
      local size = cast(pu16, r)[3]
      if cast(pu32, r)[0] == SAMPLE and size >= min_size and size >= 8 and size <= len - off then
        off = off + size
        given = given + 1
        return %s
      end
    end
    return slow()
  end
  return step
end
]]

local READ = {
  [U64] = "normalize(cast(pi64, r + %s)[0])",   -- perfev.compat's 64-bit rule
  [U32] = "cast(pu32, r + %s)[0]",
  [S32] = "cast(pi32, r + %s)[0]",
}

local function maker(kinds)
  local key = table.concat(kinds, ",")
  local m = makers[key]
  if m then return m end
  local params, values = {}, {}
  for j, k in ipairs(kinds) do
    params[j] = "o" .. j
    values[j] = READ[k] and READ[k]:format(params[j]) or "period"
  end
  local src = HEAD:format(table.concat(params, ", "), table.concat(values, ", "))
  m = assert(load(src, "=perfev.decode_jit"))(ffi, compat.normalize, SAMPLE)
  makers[key] = m
  return m
end

-- iterator(bytes, c_iterator, min_size, period, n, off1, kind1, ...) -> the
-- iterator perfev.decode returns
function M.iterator(data, fallback, min_size, period, n, ...)
  local jit = rawget(_G, "jit")
  if not (jit and jit.status and jit.status()) then return fallback end
  local offs, kinds = {}, {}
  for j = 1, n do
    offs[j], kinds[j] = select(2 * j - 1, ...), select(2 * j, ...)
  end
  -- (where code cannot be loaded, in a sandbox, the C iterator does the work)
  local ok, make = pcall(maker, kinds)
  if not ok then return fallback end
  return make(data, fallback, min_size, period, (table.unpack or rawget(_G, "unpack"))(offs, 1, n))
end

return M
