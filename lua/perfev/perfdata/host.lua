-- This machine's feature values for a perf.data header, read the way perf
-- reads them (tools/perf/util/header.c): from /proc and /sys. Each value is
-- what perfev.perfdata's reader gives for the feature; one that cannot be
-- read here is left out.
--
--   local host = require "perfev.perfdata.host"
--   local t = host.features()     -- { hostname =, osrelease =, arch =, nrcpus = {...}, ... }
local core = require "perfev.core"
local fs = require "perfev.fs"
local compat = require "perfev.compat"

local M = {}

local function first_line(path)
  local s = fs.read(path)
  return s and s:match("^[^\n]*")
end

-- "0-3,5" -> the highest cpu + 1, and how many
local function cpulist(s)
  local max, n = -1, 0
  for _, r in ipairs(fs.ranges(s or "") or {}) do
    max = math.max(max, r[2])
    n = n + r[2] - r[1] + 1
  end
  return max + 1, n
end

-- The first value of each /proc/cpuinfo key (they repeat per cpu).
local function cpuinfo()
  local t = {}
  for line in ((fs.read("/proc/cpuinfo") or "") .. "\n"):gmatch("([^\n]*)\n") do
    local k, v = line:match("^([^:]-)%s*:%s*(.-)%s*$")
    if k and t[k] == nil then t[k] = v end
  end
  return t
end

-- The machine name as uname -m gives it.
local function arch()
  local a = first_line("/proc/sys/kernel/arch")   -- Linux 6.1 and later
  if a and a ~= "" then return a end
  local p = io.popen("uname -m 2>/dev/null", "r")
  if not p then return nil end
  a = p:read("l")
  p:close()
  return a
end

-- The command line of this process (perf writes its own argv).
local function cmdline()
  local s = fs.read("/proc/self/cmdline")
  if not s then return nil end
  local t = {}
  for arg in (s:gsub("%z$", "") .. "\0"):gmatch("([^%z]*)%z") do t[#t + 1] = arg end
  return t
end

-- { [pmu name] = type } from /sys/bus/event_source/devices/*/type
function M.pmu_mappings()
  local dir = "/sys/bus/event_source/devices"
  local names = fs.dir(dir)
  if not names then return nil end
  local t = {}
  for _, n in ipairs(names) do
    local ty = tonumber(first_line(dir .. "/" .. n .. "/type") or "")
    if ty then t[n] = compat.tointeger(ty) end
  end
  return next(t) and t or nil
end

-- The features perf writes about the machine: hostname, osrelease,
-- version (perfev's), arch, nrcpus, cpudesc, cpuid (x86), total_mem,
-- cmdline, pmu_mappings.
function M.features()
  local t = {}
  t.hostname = first_line("/proc/sys/kernel/hostname")
  t.osrelease = first_line("/proc/sys/kernel/osrelease")
  t.version = (core._VERSION:gsub("^perfev%.core ", "perfev "))
  t.arch = arch()
  local avail = cpulist(first_line("/sys/devices/system/cpu/present"))
  local _, online = cpulist(first_line("/sys/devices/system/cpu/online"))
  if avail > 0 and online > 0 then t.nrcpus = { available = avail, online = online } end
  local ci = cpuinfo()
  local desc = ci["model name"] or ci["cpu model"] or ci["Processor"]
  if desc then t.cpudesc = (desc:gsub("%s+", " ")) end
  -- x86's cpuid: vendor,family,model,stepping (perf's arch/x86/util/header.c)
  if ci.vendor_id and ci["cpu family"] and ci.model and ci.stepping then
    t.cpuid = ("%s,%s,%s,%s"):format(ci.vendor_id, ci["cpu family"], ci.model, ci.stepping)
  end
  local mem = (fs.read("/proc/meminfo") or ""):match("MemTotal:%s*(%d+)")
  t.total_mem = mem and compat.tointeger(tonumber(mem))
  t.cmdline = cmdline()
  t.pmu_mappings = M.pmu_mappings()
  return t
end

return M
