-- The events this machine has, like `perf list`, and what an event string
-- means, like `perf stat -vv -e STRING` shows.
--
--   lua5.4 examples/list.lua                 -- everything (tracepoints too)
--   lua5.4 examples/list.lua sw              -- a kind: hw, sw, cache, pmu, tracepoint
--   lua5.4 examples/list.lua 'sched:*wak*'   -- a glob, or a substring
--   lua5.4 examples/list.lua -e '{cs,faults}:u'   -- parse an event string
--   lua5.4 examples/list.lua -e 'cpu-clock/period=100000,call-graph=dwarf/u'
--   lua5.4 examples/list.lua -e 'uprobe/path=/usr/bin/ls,func=main/'   -- a uprobe
--   lua5.4 examples/list.lua -e 'duration_time,user_time'             -- tool events
--
-- From the repository: LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;'
local perfev = require "perfev"
local compat = require "perfev.compat"

local HEX = { bp_addr = true, sample_type = true, sample_regs_user = true, branch_sample_type = true,
              probe_offset = true, kprobe_addr = true }

local function show(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = t[k]
    if v ~= false and not (k == "precise_ip" and v == 0) then
      if compat.math_type(v) == "integer" and (k:match("^config") or HEX[k]) then v = ("0x%x"):format(v) end
      parts[#parts + 1] = ("%s=%s"):format(k, type(v) == "table" and show(v) or tostring(v))
    end
  end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

if arg[1] == "-e" then
  local ok, res = pcall(perfev.parse, assert(arg[2], "usage: list.lua -e EVENT-STRING"))
  if not ok then
    io.stderr:write(res, "\n")
    os.exit(1)
  end
  for _, t in ipairs(res.type and { res } or res) do
    print(t.name)
    print("  " .. show(t))
  end
  return
end

local list = perfev.list(arg[1])
print(list)
local can = 0
for _, r in ipairs(list) do
  if r.can_open then can = can + 1 end
end
print(("\n%d events, %d of them can be opened here"):format(#list, can))
