-- What the benchmarks share (in a directory, so that `make bench`, which
-- runs every bench/*.lua, does not run it): the shell and perf-tool
-- helpers of the specs (spec/support/shell.lua and spec/support/perfdata.lua,
-- plain Lua), re-exported here, and the one recording set-up of the
-- perf.data benchmarks (decode, perfdata, report): the workloads, `perf
-- record` until a file holds enough samples, timing a child process, and
-- reading a file's data section.
--   local B = require "bench.support"
local shell = require "spec.support.shell"
local P = require "spec.support.perfdata"
local compat = require "perfev.compat"

local M = {}

M.sh, M.have, M.quote, M.read_file = shell.sh, shell.have, shell.quote, shell.read_file
M.have_perf, M.tmpdir, M.rmdir = P.have_perf, P.tmpdir, P.rmdir

-- The median of a list of numbers (the list is left as it was).
function M.median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  return s[compat.idiv(#s + 1, 2)]
end

-- The Lua interpreter running this benchmark (for child processes).
M.LUA = os.getenv("LUA") or (arg and arg[-1]) or "lua5.4"

-- ---- workloads ----

-- A CPU-bound C program with frame pointers, so that callchains are real
-- (a few frames deep) rather than a frame-pointer walk through garbage.
local BURN_C = [[
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
static unsigned long leaf(unsigned long x)
{ for (int i = 0; i < 200; i++) x = x * 6364136223846793005ul + 1442695040888963407ul; return x; }
static unsigned long rec(int depth, unsigned long x)
{ return depth ? rec(depth - 1, x + 1) + 1 : leaf(x); }
int main(int argc, char **argv)
{
  double secs = argc > 1 ? atof(argv[1]) : 2.5;
  unsigned long x = 1;
  while ((double)clock() / CLOCKS_PER_SEC < secs)
    for (int i = 0; i < 1000; i++) x += rec((int)(x % 12), x);
  sink = x;
  return 0;
}
]]

-- burn(dir) -> a function(secs) giving the command that keeps one CPU
-- busy for secs seconds of CPU time: the C program above when a compiler
-- is there, else a Lua loop (whose callchains are frame-pointer garbage).
function M.burn(dir)
  local src, exe = dir .. "/burn.c", dir .. "/burn"
  local f = assert(io.open(src, "w"))
  f:write(BURN_C)
  f:close()
  if M.have("cc") and select(2, M.sh(("cc -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls -o %s %s")
                                     :format(M.quote(exe), M.quote(src)))) then
    return function(secs) return ("%s %g"):format(M.quote(exe), secs) end
  end
  print("(no C compiler: the workload is a Lua loop, whose callchains are frame-pointer garbage)")
  return M.lua_burn
end

-- A Lua loop of secs seconds of CPU time.
function M.lua_burn(secs)
  local busy = ("local t = os.clock() local x = 0 while os.clock() - t < %g do " ..
                "for i = 1, 1000 do x = x + i end end"):format(secs)
  return M.LUA .. " -e " .. M.quote(busy)
end

-- ---- perf record ----

-- Samples in a perf.data file.
function M.count_samples(path)
  local pd = require "perfev.perfdata"
  local f = assert(pd.open(path))
  local n = 0
  for _ in f:samples("type") do n = n + 1 end
  f:close()
  return n
end

-- record{ file =, perf = "-e cpu-clock -c 20000 -g", workload = function(secs), secs = 3,
-- samples = 100000 } -> file, samples: `perf record PERF -o FILE -- WORKLOAD(secs)`,
-- secs scaled by the samples missing (up to 64 s) until the file holds at
-- least `samples` samples.
function M.record(o)
  local secs, n = o.secs or 3
  while true do
    local cmd = ("perf record -q %s -o %s -- %s >/dev/null 2>&1"):format(o.perf, M.quote(o.file), o.workload(secs))
    local out, ok = M.sh(cmd)
    assert(ok, "perf record failed: " .. cmd .. "\n" .. out)
    n = M.count_samples(o.file)
    if n >= (o.samples or 0) or secs >= 64 then break end
    secs = secs * math.max(1.5, math.min(16, 1.15 * (o.samples or 0) / math.max(n, 1)))
  end
  return o.file, n
end

-- Bytes in a file.
function M.size(path)
  return tonumber((M.sh("stat -c %s " .. M.quote(path)):gsub("%s+$", "")))
end

-- ---- timing child processes ----

-- run(cmd) -> wall and CPU (user + system) nanoseconds of a shell command,
-- its output discarded.
function M.run(cmd)
  local core = require "perfev.core"
  local u0, s0 = core.rusage("children")
  local t0 = core.clock_ns()
  M.sh(cmd .. " >/dev/null 2>&1")
  local t1 = core.clock_ns()
  local u1, s1 = core.rusage("children")
  return t1 - t0, (u1 - u0) + (s1 - s0)
end

-- A shell command running `body` in this interpreter with perfev's paths.
function M.lua_cmd(body)
  local code = ("package.path = %q; package.cpath = %q; %s"):format(package.path, package.cpath, body)
  return M.LUA .. " -e " .. M.quote(code)
end

-- ---- a perf.data file's records as bytes ----

-- data(path) -> the data section's bytes, an attr decoding them, the
-- attr's sample_type, sample period and sample_id_all: just enough of
-- perf.data (tools/perf/Documentation/perf.data-file-format.txt) for the
-- decoder benchmarks, which decode the bytes with perfev.decode and walk
-- them in C; files of one event, little-endian.
function M.data(path)
  local perfev = require "perfev"
  local s = assert(M.read_file(path))
  local magic, _, attr_size, attrs_off, attrs_size, data_off, data_size =
    compat.unpack("<c8I8I8I8I8I8I8", s)
  assert(magic == "PERFILE2", path .. ": not a little-endian perf.data file")
  assert(attrs_size == attr_size, path .. ": this benchmark reads files of one event")
  local period, sample_type, read_format, flags = compat.unpack("<I8I8I8I8", s, attrs_off + 16 + 1)
  local attr = perfev.attr { type = "software", sample_type = sample_type, read_format = read_format,
                             sample_period = period,
                             sample_id_all = compat.band(compat.rshift(flags, 18), 1) == 1 }
  return s:sub(data_off + 1, data_off + data_size), attr, sample_type
end

return M
