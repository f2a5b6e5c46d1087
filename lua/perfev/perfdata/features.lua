-- The feature sections of perf.data (tools/perf/util/header.c writes
-- them; the layouts are those of perf.data-file-format.txt and of newer
-- perf): one parser per feature, each given a cursor over the section's
-- bytes and what was parsed before it. A feature without a parser is kept
-- as its raw bytes.
local core = require "perfev.core"
local cursor = require "perfev.perfdata.cursor"
local compat = require "perfev.compat"

local M = {}

local function str(c) return c:str() end
local function flag() return true end

local P = {}
M.parsers = P

-- struct perf_header_string features (featwrite writes the same list)
M.STRINGS = { "hostname", "osrelease", "version", "arch", "cpudesc", "cpuid" }
for _, k in ipairs(M.STRINGS) do P[k] = str end
P.branch_stack, P.stat = flag, flag

P.tracing_data = function(c) return { size = c:left() } end

-- build_id_event records: header, pid, a 24-byte build id union, filename
P.build_id = function(c)
  local t = {}
  while c:left() >= 8 do
    local start = c.pos
    c:u32("build_id type")
    local misc = compat.fast.unpack(c.e .. "I2", c:bytes(2, "build_id misc"))
    local size = compat.fast.unpack(c.e .. "I2", c:bytes(2, "build_id size"))
    if size < 36 then c:fail(("a build_id record of %d bytes is shorter than 36"):format(size)) end
    c:need(size - 8, "a build_id record")
    local pid = compat.fast.unpack(c.e .. "i4", c:bytes(4, "pid"))
    local id = c:bytes(24, "build_id")
    local n = compat.band(misc, 0x8000) ~= 0 and math.min(id:byte(21), 20) or 20
    local name = c:bytes(start + size - c.pos, "filename")
    t[#t + 1] = { pid = pid, build_id = id:sub(1, n), filename = (name:gsub("%z.*$", "")),
                  misc = misc }
  end
  return t
end

P.total_mem = function(c) return c:u64("total_mem") end
P.cmdline = function(c) return c:strlist("cmdline") end

-- nr, attr_size, then for each event: attr, nr_ids, name, ids
P.event_desc = function(c, ctx)
  local nr, size = c:u32("nr"), c:u32("attr_size")
  if size < 64 then c:fail(("attr_size %d is less than the 64 bytes of the first attr"):format(size)) end
  local t = {}
  for i = 1, c:count(nr, size + 4, "events") do
    local attr = core.attr_from_bytes(c:bytes(size, "attr"), ctx.swap)
    local nids = c:u32("nr_ids")
    local name = c:str("event name")
    local ids = {}
    for j = 1, c:count(nids, 8, "ids") do ids[j] = c:u64("id") end
    t[i] = { attr = attr, ids = ids, name = name }
  end
  return t
end

-- sibling lists, then per cpu core and socket ids, then (newer) dies
P.cpu_topology = function(c, ctx)
  local t = { core_siblings = c:strlist("core siblings"),
              thread_siblings = c:strlist("thread siblings"), cpus = {} }
  local nr = ctx.nrcpus and ctx.nrcpus.available or 0
  if c:left() >= nr * 8 then
    for i = 1, nr do t.cpus[i] = { core_id = c:u32("core_id"), socket_id = c:u32("socket_id") } end
    if c:left() >= 4 then
      t.die_siblings = c:strlist("die siblings")
      for i = 1, nr do if c:left() >= 4 then t.cpus[i].die_id = c:u32("die_id") end end
    end
  end
  return t
end

-- { [pmu name] = type }
P.pmu_mappings = function(c)
  local t = {}
  for _ = 1, c:count(c:u32("nr"), 8, "pmus") do
    local ty = c:u32("pmu type")
    t[c:str("pmu name")] = ty
  end
  return t
end

local function caps(c)
  local t = {}
  for _ = 1, c:count(c:u32("nr_caps"), 8, "caps") do
    local k = c:str("cap name")
    t[k] = c:str("cap value")
  end
  return t
end
P.cpu_pmu_caps = caps

-- per pmu: its caps, then its name
P.pmu_caps = function(c)
  local t = {}
  for i = 1, c:count(c:u32("nr_pmu"), 8, "pmus") do
    local cp = caps(c)
    t[i] = { caps = cp, pmu_name = c:str("pmu_name") }
  end
  return t
end

-- Features that are fields in a fixed order, then perhaps a count and
-- that many items of fields: each described once, read by the loop below
-- and written by featwrite from the same description. A field is
-- { key, kind, label = name in messages (default key), default = what the
-- writer puts when the value has none, of = for a bitmap, the field that
-- holds its size in bits }; kind is u32, u64, str (struct
-- perf_header_string) or bitmap (u64 words). count: the kind of the item
-- count; each: the least bytes an item takes; what: the items, in messages.
local LAYOUTS = {
  -- perf writes the cpus present first, then those online
  nrcpus = { fields = { { "available", "u32", label = "nr_cpus_available" },
                        { "online", "u32", label = "nr_cpus_online" } } },
  numa_topology = { count = "u32", each = 24, what = "nodes",
                    items = { { "node", "u32", label = "nodenr" }, { "mem_total", "u64" },
                              { "mem_free", "u64" }, { "cpus", "str" } } },
  group_desc = { count = "u32", each = 12, what = "groups",
                 items = { { "name", "str", label = "group name" }, { "leader_idx", "u32" },
                           { "nr_members", "u32" } } },
  auxtrace = { count = "u64", each = 16, what = "index entries",
               items = { { "file_offset", "u64" }, { "size", "u64", label = "sz" } } },
  cache = { fields = { { "version", "u32", default = 1 } },
            count = "u32", each = 28, what = "cache levels",
            items = { { "level", "u32" }, { "line_size", "u32" }, { "sets", "u32" }, { "ways", "u32" },
                      { "type", "str" }, { "size", "str" }, { "map", "str" } } },
  sample_time = { fields = { { "first", "u64", label = "first sample time" },
                             { "last", "u64", label = "last sample time" } } },
  mem_topology = { fields = { { "version", "u64", default = 1 }, { "block_size", "u64" } },
                   count = "u64", each = 24, what = "nodes",
                   items = { { "node", "u64" }, { "size", "u64" }, { "bits", "u64", label = "bitmap size" },
                             { "bitmap", "bitmap", of = "bits" } } },
  clockid = { fields = { { "res_ns", "u64", label = "clockid_res_ns" } } },
  dir_format = { fields = { { "version", "u64" } } },
  compressed = { fields = { { "version", "u32" }, { "type", "u32" }, { "level", "u32" },
                            { "ratio", "u32" }, { "mmap_len", "u32" } } },
  clock_data = { fields = { { "version", "u32", default = 1 }, { "clockid", "u32" },
                            { "tod_ns", "u64" }, { "clockid_ns", "u64" } } },
  hybrid_topology = { count = "u32", each = 8, what = "pmus",
                      items = { { "pmu_name", "str" }, { "cpus", "str" } } },
}
M.layouts = LAYOUTS

local function read_fields(c, fields, into)
  for _, f in ipairs(fields or {}) do
    local key, kind, label = f[1], f[2], f.label or f[1]
    if kind == "bitmap" then
      local words = {}
      for j = 1, c:count(compat.idiv(into[f.of] + 63, 64), 8, label) do words[j] = c:u64(label) end
      into[key] = words
    else
      into[key] = c[kind](c, label)   -- the cursor's u32, u64, str
    end
  end
  return into
end

for name, l in pairs(LAYOUTS) do
  P[name] = function(c)
    local t = read_fields(c, l.fields, {})
    if l.count then
      for i = 1, c:count(c[l.count](c, "nr"), l.each, l.what) do t[i] = read_fields(c, l.items, {}) end
    end
    return t
  end
end

-- Parses the section of feature `name`: its value, or nil and a message.
function M.parse(name, bytes, endian, ctx)
  local p = P[name]
  if not p then return bytes end
  local ok, v = pcall(p, cursor.new(bytes, endian, "feature '" .. name .. "'"), ctx)
  if ok then return v end
  if type(v) == "table" and v.perfdata then return nil, v.perfdata end
  error(v, 0)
end

return M
