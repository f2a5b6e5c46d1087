-- perf's own record types (PERF_RECORD_HEADER_ATTR and the others from 64
-- on) encoded from the tables the reader gives. Their layouts are the
-- reader's (csrc/perfdata/perf_records.c), exported as core.PERFDATA.LAYOUT: one
-- list of rows { kind, name, bytes } per type, walked by one loop here
-- with a function per kind. Kernel records go through perfev.encode.
--
--   local usrec = require "perfev.perfdata.usrec"
--   local bytes = usrec.encode({ type = "finished_round" })
--
-- A record laid out shorter than its rec.size is padded with zeros to it
-- (perf sizes some records generously), so decoded records come back with
-- their size; without rec.size the body is padded to 8 bytes, as perf
-- does, except header_feature records, which perf writes unpadded.
local core = require "perfev.core"
local compat = require "perfev.compat"

local pack = compat.fast.pack
local M = {}

local TYPE = core.PERFDATA.RECORD          -- name -> number
local NAME = {}                            -- number -> name
for k, v in pairs(TYPE) do NAME[v] = k end
M.TYPE, M.NAME = TYPE, NAME

local BUILD_ID_SIZE = 0x8000               -- PERF_RECORD_MISC_BUILD_ID_SIZE
local MISC_USER = 2

local function fail(rec, fmt, ...)
  error(("perfev.perfdata: %s record: " .. fmt):format(rec.type, ...), 0)
end

local function int(rec, k, v)
  if compat.math_type(v) ~= "integer" then
    fail(rec, "field '%s' must be an integer, got %s", k, v == nil and "nothing" or type(v))
  end
  return v
end

local function field(rec, k)
  return int(rec, k, rec[k])
end

local function list(rec, k)
  local v = rec[k]
  if type(v) ~= "table" then fail(rec, "field '%s' must be a list, got %s", k, type(v)) end
  return v
end

local function str(rec, k)
  local v = rec[k]
  if type(v) ~= "string" then fail(rec, "field '%s' must be a string, got %s", k, type(v)) end
  return v
end

-- A NUL-terminated string padded with zeros to a multiple of `align`.
local function cstr(s, align)
  local n = #s + 1
  n = n + (align - n % align) % align
  return s .. ("\0"):rep(n - #s)
end
M.cstr = cstr

-- A string in exactly n bytes (cut, or NUL-padded).
local function fixed(s, n)
  return s:sub(1, n) .. ("\0"):rep(n - math.min(#s, n))
end

-- struct perf_record_cpu_map_data as perf 6.1 and later write it: a range
-- (u16 type 2, u8 any_cpu, u8 pad, u16 first, u16 last) when the cpus
-- after an optional leading -1 ("any cpu") are consecutive, else the list
-- (u16 type 0, u16 nr, u16 cpus, -1 as 0xffff).
local function cpu_map(rec, cpus)
  for i, c in ipairs(cpus) do int(rec, "cpus[" .. i .. "]", c) end
  local any = cpus[1] == -1 and 1 or 0
  local first, last = cpus[1 + any], cpus[#cpus]
  local range = first ~= nil and last - first == #cpus - 1 - any
  for i = 2 + any, #cpus do range = range and cpus[i] == cpus[i - 1] + 1 end
  if range then return pack("=I2I1I1I2I2", 2, any, 0, first, last) end
  local t = { pack("=I2I2", 0, #cpus) }
  for _, c in ipairs(cpus) do t[#t + 1] = pack("=I2", c == -1 and 0xffff or c) end
  return table.concat(t)
end
M.cpu_map = cpu_map

local STAT_TAG = { aggr_mode = 0, interval = 1, scale = 2 }
local UPDATE = { unit = 0, scale = 1, name = 2, cpus = 3 }

-- Composite fields, each given the record and its field row.
local KIND = {}

KIND.u8 = function(rec, f) return pack("=I1", field(rec, f[2])) end
KIND.u32 = function(rec, f) return pack("=I4", compat.fast.band(field(rec, f[2]), 0xffffffff)) end
KIND.u64 = function(rec, f) return pack("=i8", field(rec, f[2])) end
KIND.pad32 = function() return "\0\0\0\0" end
KIND.cstr = function(rec, f) return fixed(str(rec, f[2]), f[3]) end
KIND.bytes = function(rec, f) return str(rec, f[2]) end

-- header_feature: the feature's bit, then its section's bytes
KIND.feature = function(rec)
  return pack("=i8", field(rec, "feat_id")) .. str(rec, "data")
end

KIND.u64s = function(rec, f)
  local t = {}
  for i, v in ipairs(list(rec, f[2])) do t[i] = pack("=i8", int(rec, f[2] .. "[" .. i .. "]", v)) end
  return table.concat(t)
end

-- the attr as its size field says (perf reads that many bytes), then ids
KIND.attr = function(rec)
  local a = rec.attr
  if type(a) ~= "userdata" or (getmetatable(a) or {}).__name ~= "perfev.attr" then
    fail(rec, "field 'attr' must be a perfev.attr, got %s", type(a))
  end
  local ids = {}
  for i, id in ipairs(list(rec, "ids")) do ids[i] = pack("=i8", int(rec, "ids[" .. i .. "]", id)) end
  local size = a.size ~= 0 and a.size or 64
  return a:bytes():sub(1, size) .. table.concat(ids)
end

-- the 20-byte id and, with misc BUILD_ID_SIZE, its length in byte 20
KIND.build_id = function(rec)
  local id = str(rec, "build_id")
  if #id > 20 then fail(rec, "field 'build_id' is %d bytes, at most 20", #id) end
  local sized = compat.band(rec.misc or BUILD_ID_SIZE, BUILD_ID_SIZE) ~= 0 or #id < 20
  return pack("=i4", field(rec, "pid")) .. fixed(id, 20) .. pack("=I1", sized and #id or 0) ..
         "\0\0\0" .. cstr(str(rec, "filename"), 64)
end

KIND.id_index = function(rec)
  local e = list(rec, "entries")
  local t, second = { pack("=i8", #e) }, e[1] and e[1].machine_pid ~= nil
  for i, x in ipairs(e) do
    local at = "entries[" .. i .. "]."
    t[#t + 1] = pack("=i8i8i8i8", int(rec, at .. "id", x.id), int(rec, at .. "idx", x.idx),
                     int(rec, at .. "cpu", x.cpu), int(rec, at .. "tid", x.tid))
  end
  if second then
    for i, x in ipairs(e) do
      local at = "entries[" .. i .. "]."
      t[#t + 1] = pack("=i8i8", int(rec, at .. "machine_pid", x.machine_pid),
                       int(rec, at .. "vcpu", x.vcpu))
    end
  end
  return table.concat(t)
end

KIND.threads = function(rec)
  local th = list(rec, "threads")
  local t = { pack("=i8", #th) }
  for i, x in ipairs(th) do
    t[#t + 1] = pack("=i8", int(rec, "threads[" .. i .. "].pid", x.pid)) .. fixed(x.comm or "", 16)
  end
  return table.concat(t)
end

KIND.cpus = function(rec) return cpu_map(rec, list(rec, "cpus")) end

KIND.stat_config = function(rec)
  local cfg, keys = list(rec, "config"), {}
  for k in pairs(cfg) do
    local tag = STAT_TAG[k] or compat.tointeger(k)
    if not tag then fail(rec, "config key '%s' is not a stat_config tag", tostring(k)) end
    keys[#keys + 1] = { tag, int(rec, "config." .. tostring(k), cfg[k]) }
  end
  table.sort(keys, function(a, b) return a[1] < b[1] end)
  local t = { pack("=i8", #keys) }
  for _, kv in ipairs(keys) do t[#t + 1] = pack("=i8i8", kv[1], kv[2]) end
  return table.concat(t)
end

KIND.event_update = function(rec)
  local kind = rec.update_type
  local n = UPDATE[kind] or compat.tointeger(kind)
  if not n then fail(rec, "field 'update_type' must be unit, scale, name, cpus or a number") end
  local head = pack("=i8i8", n, field(rec, "id"))
  if n == 0 or n == 2 then return head .. cstr(str(rec, kind), 8) end
  if n == 1 then
    if type(rec.scale) ~= "number" then fail(rec, "field 'scale' must be a number") end
    return head .. pack("=d", rec.scale)
  end
  if n == 3 then return head .. cpu_map(rec, list(rec, "cpus")) end
  return head .. str(rec, "data")
end

-- fmt 0 kept the message where fmt 1 put the time; fmt 2 added
-- machine_pid and vcpu after it
KIND.auxtrace_error = function(rec)
  local fmt = field(rec, "fmt")
  local s = pack("=I4I4I4I4I4I4i8", field(rec, "error_type"), field(rec, "code"),
                 compat.band(field(rec, "cpu"), 0xffffffff), compat.band(field(rec, "pid"), 0xffffffff),
                 compat.band(field(rec, "tid"), 0xffffffff), fmt, field(rec, "ip"))
  if fmt >= 1 then s = s .. pack("=i8", field(rec, "time")) end
  s = s .. fixed(rec.msg or "", 64)
  if fmt >= 2 then s = s .. pack("=I4I4", field(rec, "machine_pid"), field(rec, "vcpu")) end
  return s
end

-- Records whose payload follows them in the file: the reader skips it, so
-- there is nothing to write back.
local PAYLOAD = { tracing_data = true, auxtrace = true }

-- type name -> its rows, in order (tools/lib/perf/include/perf/event.h)
local LAYOUT = core.PERFDATA.LAYOUT
M.LAYOUT = LAYOUT

-- header_feature keeps its section's own length, as perf writes it
local UNPADDED = { header_feature = true, build_id = true }

-- Whether rec is one of perf's own types (by name, or a number >= 64).
function M.is_user(rec)
  local t = rec.type
  if type(t) == "string" then return TYPE[t] ~= nil end
  return compat.math_type(t) == "integer" and t >= 64
end

-- The bytes of rec: a record of one of perf's types. Raises an error
-- naming the field when one is missing or of the wrong type.
function M.encode(rec)
  local t = rec.type
  local num, body
  if type(t) == "string" then
    num = TYPE[t]
    if not num then error(("perfev.perfdata: unknown record type '%s'"):format(t), 0) end
    if PAYLOAD[t] then
      fail(rec, "the payload that follows it in the file is not kept by the reader: it cannot " ..
                "be written back")
    end
    local parts, layout = {}, LAYOUT[t]
    for i, f in ipairs(layout) do
      if f[1] == "opt" then
        local after = layout[i + 1]
        if after == nil or rec[after[2]] == nil then break end   -- what follows came with newer perf
      else
        parts[#parts + 1] = KIND[f[1]](rec, f)
      end
    end
    body = table.concat(parts)
  else
    num = t
    body = str(rec, "data")
  end
  local misc = rec.misc or 0
  if t == "build_id" and (rec.misc == nil or #rec.build_id < 20) then
    misc = compat.bor(rec.misc or MISC_USER, BUILD_ID_SIZE)
  end
  local size = 8 + #body
  if not UNPADDED[t] then size = size + (8 - size % 8) % 8 end
  if rec.size ~= nil then
    int(rec, "size", rec.size)
    if rec.size < 8 + #body then
      fail(rec, "its fields need %d bytes, more than its size field %d: leave 'size' out to " ..
                "have it computed", 8 + #body, rec.size)
    end
    size = rec.size
  end
  if size > 0xffff then fail(rec, "%d bytes do not fit header.size (16 bits)", size) end
  return pack("=I4I2I2", num, misc, size) .. body .. ("\0"):rep(size - 8 - #body)
end

return M
