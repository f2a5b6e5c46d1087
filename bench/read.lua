-- bench/read.lua: what a read costs from Lua against a raw read(2) of the
-- same fd in a C loop, measured side by side in one run (the ratio is the
-- claim; absolute times vary from machine to machine).
--   make bench
local perfev = require "perfev"
local raw = require "rawread"
local B = require "bench.support"

local N = tonumber(os.getenv("PERFEV_BENCH_N")) or 200000
local ROUNDS = 7
local clock = raw.now_ns

local median = B.median

-- ns per call of fn, N calls
local function time_lua(fn, arg1, arg2)
  local t0 = clock()
  for _ = 1, N do fn(arg1, arg2) end
  return (clock() - t0) / N
end

-- Alternates the two measurements so that both see the same machine state.
local function compare(label, lua_fn, a1, a2, fd, bufsize)
  local lua_ns, c_ns = {}, {}
  time_lua(lua_fn, a1, a2)                    -- warm-up
  assert(raw.ns_per_read(fd, bufsize, N))
  for r = 1, ROUNDS do
    lua_ns[r] = time_lua(lua_fn, a1, a2)
    c_ns[r] = assert(raw.ns_per_read(fd, bufsize, N))
  end
  local l, c = median(lua_ns), median(c_ns)
  print(("%-34s %8.1f ns  raw read(2) %8.1f ns  ratio %.3f"):format(label, l, c, l / c))
  return l / c
end

print(("perfev read benchmark: %d reads per round, median of %d rounds"):format(N, ROUNDS))

local ev = assert(perfev.open("task-clock"))
assert(ev:enable())
compare("ev:read() (task-clock)", ev.read, ev, nil, ev:fileno(), 64)
ev:close()

local specs = { "task-clock", "cpu-clock", "page-faults", "context-switches",
                "cpu-migrations", "minor-faults", "major-faults", "alignment-faults" }
local g = assert(perfev.group(specs))
assert(g:enable())
local t = g:read()
-- group read: nr, enabled, running, then value and id per member
local bufsize = 8 * (3 + 2 * #specs)
compare("g:read(t) (group of 8)", g.read, g, t, g:leader():fileno(), bufsize)

collectgarbage()
collectgarbage("stop")
local before = collectgarbage("count")
for _ = 1, N do g:read(t) end
local growth = collectgarbage("count") - before
collectgarbage("restart")
print(("Lua heap growth over %d g:read(t): %.1f KiB (%.4f bytes per read)"):format(
  N, growth, growth * 1024 / N))
g:close()
