-- bench/decode.lua: records per second the record decoder turns into Lua
-- tables, over a buffer of 100k+ samples (ip, tid, time, period, callchain)
-- that `perf record -g` captured, against a plain C loop over the same bytes
-- (bench/helper/rawdecode.c) measured in the same run, and against
-- `perf script` on the same file. The ratios are the claim; absolute rates
-- vary from machine to machine. Times are CPU times (perf script's: the
-- child process's user + system time).
--   make bench
--   PERFEV_BENCH_DATA=perf.data   decode this file instead of capturing one
--   PERFEV_BENCH_ROUNDS=5         rounds (the median is printed)
local perfev = require "perfev"
local raw = require "rawdecode"
local B = require "bench.support"
local compat = require "perfev.compat"

local ROUNDS = tonumber(os.getenv("PERFEV_BENCH_ROUNDS")) or 5
local SAMPLE = perfev.SAMPLE
local clock = raw.cpu_ns

local median, have = B.median, B.have

-- Whether a shell command succeeded.
local function sh(cmd) return (select(2, B.sh(cmd))) end

-- ---- the input: a perf.data file, captured here unless given ----

-- A CPU-bound workload with frame pointers, so that callchains are real
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

-- The command perf records: 3 s of CPU, 120k to 150k samples at 20 us.
local function workload(dir)
  local src = dir .. "/burn.c"
  local f = assert(io.open(src, "w"))
  f:write(BURN_C)
  f:close()
  if have("cc") and sh(("cc -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls -o %s/burn %s")
                       :format(dir, src)) then
    return dir .. "/burn 3"
  end
  print("(no C compiler: the workload is a Lua loop, whose callchains are frame-pointer garbage)")
  local lua = arg and arg[-1] or "lua5.4"
  return lua .. [[ -e 'local s,x=os.clock()+3,0 while os.clock()<s do for i=1,1e4 do x=x+i%7 end end']]
end

local function capture(dir)
  local path = dir .. "/perf.data"
  local cmd = ("perf record -q -e cpu-clock -c 100000 -P -g -o %s -- %s >/dev/null 2>&1")
              :format(path, workload(dir))
  if not sh(cmd) then return nil, "perf record failed: " .. cmd end
  return path
end

-- Just enough of perf.data (tools/perf/Documentation/perf.data-file-format.txt)
-- for this benchmark: the header's attrs and data sections, and the one
-- attr's sample_type, read_format and sample_id_all.
local function read_perf_data(path)
  local s = assert(B.read_file(path))
  local magic, _, attr_size, attrs_off, attrs_size, data_off, data_size =
    compat.unpack("<c8I8I8I8I8I8I8", s)
  assert(magic == "PERFILE2", path .. ": not a little-endian perf.data file")
  assert(attrs_size == attr_size, path .. ": this benchmark reads files of one event")
  local sample_type, read_format, flags = compat.unpack("<I8I8I8", s, attrs_off + 24 + 1)
  local attr = perfev.attr { type = "software", sample_type = sample_type, read_format = read_format,
                             sample_id_all = compat.band(compat.rshift(flags, 18), 1) == 1 }
  return s:sub(data_off + 1, data_off + data_size), attr, sample_type
end

-- Without perf: the same kind of samples built here (host byte order),
-- callchains of a user marker and 6 frames.
local function synthetic(n)
  local st = compat.bor(SAMPLE.IP, SAMPLE.TID, SAMPLE.TIME, SAMPLE.PERIOD, SAMPLE.CALLCHAIN)
  local out = {}
  for i = 1, n do
    out[i] = compat.pack("=I4I2I2 I8 I4I4 I8 I8 I8 I8I8I8I8I8I8I8", 9, 2, 8 * 13,
      0x401000 + i % 4096, 1000, 1000 + i % 3, 1000000 + 20000 * i, 20000,
      7, perfev.CONTEXT.USER, 0x401000, 0x401100, 0x401200, 0x401300, 0x401400, 0x401500)
  end
  return table.concat(out), perfev.attr { sample_type = st }, st
end

-- ---- the measurements ----

local function lua_rate(data, attr, opts)
  collectgarbage()
  local sum, n = 0, 0
  local t0 = clock()
  for rec in perfev.decode(data, attr, opts) do
    n = n + 1
    if rec.type == "sample" then sum = sum + rec.ip + rec.tid + rec.time end
  end
  return n, sum, clock() - t0
end

local function main()
  local dir = B.tmpdir()
  local path, why = os.getenv("PERFEV_BENCH_DATA"), nil
  if not path then
    if B.have_perf() then
      path, why = capture(dir)
    else
      why = "perf is not installed"
    end
  end
  local data, attr, st, source
  if path then
    data, attr, st = read_perf_data(path)
    source = path == dir .. "/perf.data" and "perf record -e cpu-clock -c 100000 -P -g" or path
  else
    print("(" .. why .. ": decoding synthetic samples instead; perf script is skipped)")
    data, attr, st = synthetic(120000)
    source = "synthetic"
  end

  local records, samples, csum = raw.walk(data, st)
  local frames = 0
  for rec in perfev.decode(data, attr) do
    if rec.type == "sample" and rec.callchain then frames = frames + #rec.callchain end
  end
  print(("perfev decode benchmark: %d records (%d samples, %.1f frames a callchain), %.1f MB "
         .. "from %s; median of %d rounds"):format(records, samples, frames / samples,
         #data / 1e6, source, ROUNDS))

  local reuse = { into = {} }
  local c_ns, script_ns, alloc_ns, reuse_ns = {}, {}, {}, {}
  local script = path and have("perf") and ("perf script -F ip,tid,time -i %s >/dev/null 2>&1"):format(path)
  for r = 1, ROUNDS do
    c_ns[r] = select(4, raw.walk(data, st))
    local n, sum, ns = lua_rate(data, attr)
    assert(n == records and sum == csum, "the decoder and the C loop disagree")
    alloc_ns[r] = ns
    n, sum, ns = lua_rate(data, attr, reuse)
    assert(n == records and sum == csum, "the decoder (reusing a table) and the C loop disagree")
    reuse_ns[r] = ns
    if script then
      local t0 = raw.children_cpu_ns()
      assert(sh(script), "perf script failed")
      script_ns[r] = raw.children_cpu_ns() - t0
    end
  end

  local c = median(c_ns)
  local function row(label, ns)
    local per = ns / records
    print(("%-40s %10.3f M records/s %9.1f ns/record  ratio %8.1f"):format(label,
          1e3 / per, per, ns / c))
  end
  row("C loop summing ip+tid+time (baseline)", c)
  if script then
    row("perf script -F ip,tid,time (process)", median(script_ns))
  else
    print("perf script: skipped (" .. (have("perf") and "synthetic input" or "perf is not installed") .. ")")
  end
  row("perfev.decode, a table per record", median(alloc_ns))
  row("perfev.decode, { into = t } reused", median(reuse_ns))

  for _, mode in ipairs { { "a table per record", nil }, { "{ into = t }", reuse } } do
    collectgarbage()
    collectgarbage("stop")
    local before = collectgarbage("count")
    for _ in perfev.decode(data, attr, mode[2]) do end
    local growth = collectgarbage("count") - before
    collectgarbage("restart")
    print(("Lua heap growth, GC stopped, %-20s %10.1f KiB (%.2f bytes a record)"):format(
          mode[1] .. ":", growth, growth * 1024 / records))
  end

  B.rmdir(dir)
end

main()
