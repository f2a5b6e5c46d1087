-- Attributes: build a struct perf_event_attr field by field, print it the
-- way `perf stat -vv` does, and open it.
local perfev = require "perfev"

local a = perfev.attr {
  type = "software", config = "cpu-clock",   -- a name gives type and config
  sample_period = 100000,
  sample_type = { "ip", "tid", "time", "callchain" },
  read_format = "id|lost",
  disabled = true,
}
a.exclude_kernel = true           -- any field by its kernel name
a.clockid = "monotonic"
a.use_clockid = true
print(a)

-- union members answer to every alias
a.config1 = 0x1000
print(("config1 = %#x, bp_addr = %#x"):format(a.config1, a.bp_addr))
a.config1 = 0

-- the non-default fields, as a plain table
local t = a:table()
local keys = {}
for k in pairs(t) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do print(("  %-16s %s"):format(k, tostring(t[k]))) end

-- mistakes name the field
print(select(2, pcall(function() a.precise_ip = 4 end)))
print(select(2, pcall(function() a.sample_tpye = { "ip" } end)))

local ev = assert(perfev.open(a))
print(ev, "id " .. ev:id())
ev:close()
