-- examples/profile.lua: where a small Lua program spends its time, by Lua
-- function, with perfev.profile on cpu-clock; then where it page-faults,
-- with the native (C and kernel) frames under the Lua ones (native = true).
--   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/profile.lua [out.svg]
-- Prints the text report and writes an SVG flame graph (open it in a
-- browser: click to zoom, Ctrl-F to search), folded stacks beside it.
local perfev = require "perfev"

-- The program: a producer coroutine makes records, a consumer sorts and
-- formats them.
local function make_record(i)
  return { id = i, name = ("item-%05d"):format(i * 7919 % 100000), score = (i * 31) % 997 }
end

local function producer(n)
  return coroutine.wrap(function()
    for i = 1, n do coroutine.yield(make_record(i)) end
  end)
end

local function by_score(a, b)
  if a.score ~= b.score then return a.score < b.score end
  return a.name < b.name
end

local function format_all(list)
  local out = {}
  for i, r in ipairs(list) do out[i] = ("%d\t%s\t%d"):format(r.id, r.name, r.score) end
  return table.concat(out, "\n")
end

local function checksum(s)
  local h = 0
  for i = 1, #s, 3 do h = (h * 31 + s:byte(i)) % 4294967296 end
  return h
end

local function program()
  local total = 0
  for _ = 1, 4 do
    local list = {}
    for r in producer(20000) do list[#list + 1] = r end
    table.sort(list, by_score)
    total = total + checksum(format_all(list))
  end
  return total
end

local svg = arg[1] or "/tmp/perfev-profile.svg"

-- time, by Lua function
local p = assert(perfev.profile { event = "cpu-clock", freq = 999, name = "examples/profile.lua: cpu-clock" })
p:run(program)
io.write(p:report())
assert(p:write(svg))
assert(p:write((svg:gsub("%.svg$", "") .. ".folded")))
print(("\nflame graph: %s (and .folded beside it)"):format(svg))
p:close()

-- page faults, by Lua function: who touches new memory; native = true
-- joins each fault's callchain (the C function that touched the page, as
-- libc's or the interpreter's symbols name it) under the Lua frames
local q = assert(perfev.profile { event = "page-faults", period = 1, native = true })
q:run(program)
print()
io.write((q:report():gsub("\n# Self by source line.*", "\n")))
print("\nthe heaviest mixed stacks (Lua frames, then native ones):")
local folded = q:format("folded")
local n = 0
for line in folded:gmatch("[^\n]+") do
  n = n + 1
  if n > 5 then break end
  print("  " .. line)
end
q:close()
