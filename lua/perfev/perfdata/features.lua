-- The feature sections of perf.data (tools/perf/util/header.c writes
-- them; the layouts are those of perf.data-file-format.txt and of newer
-- perf): one parser per feature, each given a cursor over the section's
-- bytes and what was parsed before it. A feature without a parser is kept
-- as its raw bytes.
local core = require "perfev.core"
local cursor = require "perfev.perfdata.cursor"

local M = {}

local function str(c) return c:str() end
local function flag() return true end

local P = {}
M.parsers = P

P.hostname, P.osrelease, P.version, P.arch, P.cpudesc, P.cpuid = str, str, str, str, str, str
P.branch_stack, P.stat = flag, flag

P.tracing_data = function(c) return { size = c:left() } end

-- build_id_event records: header, pid, a 24-byte build id union, filename
P.build_id = function(c)
  local t = {}
  while c:left() >= 8 do
    local start = c.pos
    c:u32("build_id type")
    local misc = string.unpack(c.e .. "I2", c:bytes(2, "build_id misc"))
    local size = string.unpack(c.e .. "I2", c:bytes(2, "build_id size"))
    if size < 36 then c:fail(("a build_id record of %d bytes is shorter than 36"):format(size)) end
    c:need(size - 8, "a build_id record")
    local pid = string.unpack(c.e .. "i4", c:bytes(4, "pid"))
    local id = c:bytes(24, "build_id")
    local n = misc & 0x8000 ~= 0 and math.min(id:byte(21), 20) or 20
    local name = c:bytes(start + size - c.pos, "filename")
    t[#t + 1] = { pid = pid, build_id = id:sub(1, n), filename = (name:gsub("%z.*$", "")),
                  misc = misc }
  end
  return t
end

-- Two u32: perf writes the cpus present first, then those online.
P.nrcpus = function(c)
  local avail = c:u32("nr_cpus_available")
  return { available = avail, online = c:u32("nr_cpus_online") }
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

P.numa_topology = function(c)
  local t = {}
  for i = 1, c:count(c:u32("nr"), 24, "nodes") do
    t[i] = { node = c:u32("nodenr"), mem_total = c:u64("mem_total"),
             mem_free = c:u64("mem_free"), cpus = c:str("cpus") }
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

P.group_desc = function(c)
  local t = {}
  for i = 1, c:count(c:u32("nr"), 12, "groups") do
    t[i] = { name = c:str("group name"), leader_idx = c:u32("leader_idx"),
             nr_members = c:u32("nr_members") }
  end
  return t
end

P.auxtrace = function(c)
  local t = {}
  for i = 1, c:count(c:u64("nr"), 16, "index entries") do
    t[i] = { file_offset = c:u64("file_offset"), size = c:u64("sz") }
  end
  return t
end

P.cache = function(c)
  local version, t = c:u32("version"), {}
  for i = 1, c:count(c:u32("nr"), 28, "cache levels") do
    t[i] = { level = c:u32("level"), line_size = c:u32("line_size"), sets = c:u32("sets"),
             ways = c:u32("ways"), type = c:str("type"), size = c:str("size"),
             map = c:str("map") }
  end
  t.version = version
  return t
end

P.sample_time = function(c)
  return { first = c:u64("first sample time"), last = c:u64("last sample time") }
end

P.mem_topology = function(c)
  local t = { version = c:u64("version"), block_size = c:u64("block_size") }
  for i = 1, c:count(c:u64("nr"), 24, "nodes") do
    local node, size, bits = c:u64("node"), c:u64("size"), c:u64("bitmap size")
    local words = {}
    for j = 1, c:count((bits + 63) // 64, 8, "bitmap") do words[j] = c:u64("bitmap") end
    t[i] = { node = node, size = size, bits = bits, bitmap = words }
  end
  return t
end

P.clockid = function(c) return { res_ns = c:u64("clockid_res_ns") } end
P.dir_format = function(c) return { version = c:u64("version") } end

P.compressed = function(c)
  return { version = c:u32("version"), type = c:u32("type"), level = c:u32("level"),
           ratio = c:u32("ratio"), mmap_len = c:u32("mmap_len") }
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

P.clock_data = function(c)
  return { version = c:u32("version"), clockid = c:u32("clockid"), tod_ns = c:u64("tod_ns"),
           clockid_ns = c:u64("clockid_ns") }
end

P.hybrid_topology = function(c)
  local t = {}
  for i = 1, c:count(c:u32("nr"), 8, "pmus") do
    t[i] = { pmu_name = c:str("pmu_name"), cpus = c:str("cpus") }
  end
  return t
end

-- per pmu: its caps, then its name
P.pmu_caps = function(c)
  local t = {}
  for i = 1, c:count(c:u32("nr_pmu"), 8, "pmus") do
    local cp = caps(c)
    t[i] = { caps = cp, pmu_name = c:str("pmu_name") }
  end
  return t
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
