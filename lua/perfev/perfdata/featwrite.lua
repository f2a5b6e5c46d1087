-- The feature sections of perf.data written from the values the reader
-- gives (perfev.perfdata.features parses them): one encoder per feature,
-- the inverse of its parser, in this machine's byte order. A feature the
-- reader keeps as raw bytes is written as those bytes.
--
--   local fw = require "perfev.perfdata.featwrite"
--   local bytes = fw.encode("hostname", "vm")
local core = require "perfev.core"
local features = require "perfev.perfdata.features"
local compat = require "perfev.compat"

local pack = compat.fast.pack
local M = {}

local BIT = {}                                   -- feature name -> its header bit
for bit, name in pairs(core.PERFDATA.FEATURE) do BIT[name] = bit end
M.BIT = BIT

-- Features a writer must not copy from another file: their contents point
-- into that file's data (auxtrace), describe a layout this writer does not
-- produce (dir_format, compressed), or are a placeholder the reader made
-- for bytes it did not keep (tracing_data, parsed to its size alone).
M.NOT_COPIED = { auxtrace = true, dir_format = true, compressed = true }

-- Features perf does not send as header_feature records in pipe mode (its
-- feat_ops without .synthesize): perf would read build_id's from the file
-- descriptor, not the record. tracing_data goes as its own record.
M.NOT_IN_PIPE = { tracing_data = true, build_id = true, branch_stack = true, auxtrace = true,
                  stat = true, cache = true, dir_format = true, hybrid_topology = true }

local function fail(name, fmt, ...)
  error(("perfev.perfdata: feature '%s': " .. fmt):format(name, ...), 0)
end

local function int(name, k, v)
  if compat.math_type(v) ~= "integer" then
    fail(name, "'%s' must be an integer, got %s", k, v == nil and "nothing" or type(v))
  end
  return v
end

local function tbl(name, k, v)
  if type(v) ~= "table" then fail(name, "'%s' must be a table, got %s", k, type(v)) end
  return v
end

-- struct perf_header_string: u32 len, then the string with its NUL,
-- padded with zeros to 64 bytes (perf's NAME_ALIGN).
local function hstr(name, k, s)
  if type(s) ~= "string" then fail(name, "'%s' must be a string, got %s", k, type(s)) end
  local n = #s + 1
  n = n + (64 - n % 64) % 64
  return pack("=I4", n) .. s .. ("\0"):rep(n - #s)
end
M.hstr = hstr

-- struct perf_header_string_list: u32 nr, then nr strings.
local function hstrlist(name, k, l)
  tbl(name, k, l)
  local t = { pack("=I4", #l) }
  for i, s in ipairs(l) do t[#t + 1] = hstr(name, ("%s[%d]"):format(k, i), s) end
  return table.concat(t)
end

local function u32(name, k, v) return pack("=I4", compat.band(int(name, k, v), 0xffffffff)) end
local function u64(name, k, v) return pack("=i8", int(name, k, v)) end

-- The keys of t, sorted (the reader gives these features as maps).
local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local function caps(name, c)
  tbl(name, "caps", c)
  local keys = sorted_keys(c)
  local t = { pack("=I4", #keys) }
  for _, k in ipairs(keys) do
    t[#t + 1] = hstr(name, "cap name", k) .. hstr(name, "cap " .. k, tostring(c[k]))
  end
  return table.concat(t)
end

local E = {}
M.encoders = E

local function string_feature(name, v) return hstr(name, name, v) end
for _, k in ipairs(features.STRINGS) do E[k] = string_feature end
E.branch_stack = function() return "" end
E.stat = E.branch_stack

E.total_mem = function(name, v) return u64(name, "total_mem", v) end
E.cmdline = function(name, v) return hstrlist(name, "cmdline", v) end

-- nr, attr_size, then for each event: attr, nr_ids, name, ids. Every attr
-- is written with the largest size among them (perf reads attr_size bytes
-- per event).
E.event_desc = function(name, v)
  tbl(name, "event_desc", v)
  local size = 64
  for _, e in ipairs(v) do size = math.max(size, e.attr.size) end
  local t = { pack("=I4I4", #v, size) }
  for i, e in ipairs(v) do
    local at = ("event_desc[%d]"):format(i)
    local a = e.attr:bytes()
    a = a:sub(1, 4) .. pack("=I4", size) .. a:sub(9, size) .. ("\0"):rep(size - #a)
    local ids = tbl(name, at .. ".ids", e.ids)
    t[#t + 1] = a .. pack("=I4", #ids) .. hstr(name, at .. ".name", e.name or "")
    for j, id in ipairs(ids) do t[#t + 1] = u64(name, ("%s.ids[%d]"):format(at, j), id) end
  end
  return table.concat(t)
end

-- build_id_event records: header (type 0), pid, the id in 20 bytes and its
-- length, the file name padded to 64 bytes
E.build_id = function(name, v)
  tbl(name, "build_id", v)
  local t = {}
  for i, b in ipairs(v) do
    local at = ("build_id[%d]"):format(i)
    local id = b.build_id
    if type(id) ~= "string" or #id > 20 then fail(name, "'%s.build_id' must be at most 20 bytes", at) end
    local fname = b.filename
    if type(fname) ~= "string" then fail(name, "'%s.filename' must be a string", at) end
    local n = #fname + 1
    n = n + (64 - n % 64) % 64
    t[#t + 1] = pack("=I4I2I2i4", 0, compat.bor(b.misc or 2, 0x8000), 36 + n, int(name, at .. ".pid", b.pid or -1))
                .. id .. ("\0"):rep(20 - #id) .. pack("=I1", #id) .. "\0\0\0"
                .. fname .. ("\0"):rep(n - #fname)
  end
  return table.concat(t)
end

-- sibling lists, per cpu core and socket ids, then die siblings and ids
E.cpu_topology = function(name, v)
  tbl(name, "cpu_topology", v)
  local t = { hstrlist(name, "core_siblings", v.core_siblings),
              hstrlist(name, "thread_siblings", v.thread_siblings) }
  local cpus = v.cpus or {}
  for i, c in ipairs(cpus) do
    t[#t + 1] = u32(name, ("cpus[%d].core_id"):format(i), c.core_id) ..
                u32(name, ("cpus[%d].socket_id"):format(i), c.socket_id)
  end
  if v.die_siblings then
    t[#t + 1] = hstrlist(name, "die_siblings", v.die_siblings)
    for i, c in ipairs(cpus) do
      if c.die_id then t[#t + 1] = u32(name, ("cpus[%d].die_id"):format(i), c.die_id) end
    end
  end
  return table.concat(t)
end

-- { [pmu name] = type }: written by type (the reader does not keep perf's
-- order, which is the order of the PMUs' sysfs directory)
E.pmu_mappings = function(name, v)
  tbl(name, "pmu_mappings", v)
  local keys = sorted_keys(v)
  table.sort(keys, function(a, b)
    if v[a] ~= v[b] then return v[a] < v[b] end
    return a < b
  end)
  local t = { pack("=I4", #keys) }
  for _, k in ipairs(keys) do t[#t + 1] = u32(name, k, v[k]) .. hstr(name, "pmu name", k) end
  return table.concat(t)
end

E.cpu_pmu_caps = function(name, v) return caps(name, v) end

E.pmu_caps = function(name, v)
  tbl(name, "pmu_caps", v)
  local t = { pack("=I4", #v) }
  for i, p in ipairs(v) do
    t[#t + 1] = caps(name, p.caps) .. hstr(name, ("pmu_caps[%d].pmu_name"):format(i), p.pmu_name)
  end
  return table.concat(t)
end

-- The features the reader parses by a layout (features.layouts) are
-- written from the same layout; those never copied get no encoder.
local WRITE = { u32 = u32, u64 = u64, str = hstr }

local function write_fields(name, fields, v, at, out)
  for _, f in ipairs(fields or {}) do
    local key, kind, x = f[1], f[2], v[f[1]]
    if x == nil then x = f.default end
    if kind == "bitmap" then
      for j, w in ipairs(tbl(name, at .. key, x)) do out[#out + 1] = u64(name, ("%s%s[%d]"):format(at, key, j), w) end
    else
      out[#out + 1] = WRITE[kind](name, at .. key, x)
    end
  end
end

for name, l in pairs(features.layouts) do
  if not M.NOT_COPIED[name] then
    E[name] = function(_, v)
      tbl(name, name, v)
      local out = {}
      write_fields(name, l.fields, v, "", out)
      if l.count then
        out[#out + 1] = pack(l.count == "u32" and "=I4" or "=i8", #v)
        for i, item in ipairs(v) do write_fields(name, l.items, item, ("%s[%d]."):format(name, i), out) end
      end
      return table.concat(out)
    end
  end
end

-- The bytes of feature `name` from its value as the reader gives it.
-- A feature the reader keeps raw (no parser) is a byte string.
function M.encode(name, v)
  if not BIT[name] then error(("perfev.perfdata: unknown feature '%s'"):format(tostring(name)), 0) end
  local e = E[name]
  if e then return e(name, v) end
  if features.parsers[name] then
    fail(name, "the reader does not keep its contents (%s): it cannot be written back", type(v))
  end
  if type(v) ~= "string" then fail(name, "raw bytes expected, got %s", type(v)) end
  return v
end

-- Whether a value of feature `name` can be written (an encoder, or raw).
function M.writable(name)
  return BIT[name] ~= nil and not M.NOT_COPIED[name] and
         (E[name] ~= nil or features.parsers[name] == nil)
end

return M
