-- Writes the perf.data fuzz target's seed corpus (fuzz/corpus/perfdata):
-- real recordings made by the perf tool here, one of each kind the reader
-- handles (callchains, dwarf stacks, a tracepoint, several events, zstd
-- compression, pipe mode), and two files built byte by byte (little and
-- big endian) for what perf cannot write here. Every seed is read whole by
-- perfev.perfdata before it is kept: a seed the reader refuses teaches the
-- fuzzer nothing about the paths past the first error.
--   make fuzz-seed    (lua5.4 fuzz/seed_perfdata.lua DIR, from the repo root, as root)
local compat = require "perfev.compat"
package.path = "spec/?.lua;" .. package.path   -- spec.support.* lives under the repo root
local pd = require "perfev.perfdata"
local core = require "perfev.core"
local B = require "spec.support.perfdata_build"

local dir = assert(arg[1], "usage: seed_perfdata.lua DIR [MAX_BYTES]")
local MAX = tonumber(arg[2]) or 1048576   -- the fuzz target's -max_len

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

-- Reads every record in file and in time order; returns the count, or nil
-- and the reader's error.
local function readable(path)
  local ok, n = pcall(function()
    local f = assert(pd.open(path))
    local count = 0
    for _, order in ipairs { "file", "time" } do
      for _ in f:records { order = order } do count = count + 1 end
    end
    f:close()
    return count
  end)
  if ok then return n end
  return nil, n
end

local size = require("spec.support.shell").size

local kept = 0
local function keep(name, path)
  local n, err = readable(path)
  local bytes = size(path)
  if not n then
    io.stderr:write(("seed_perfdata: %s: the reader refuses it (%s), not kept\n"):format(name, err))
  elseif bytes > MAX then
    io.stderr:write(("seed_perfdata: %s: %d bytes, over the %d-byte max_len, not kept\n"):format(name, bytes, MAX))
  else
    assert(sh(("cp %s %s/%s.data && chmod 644 %s/%s.data"):format(path, dir, name, dir, name)))
    kept = kept + 1
    print(("seed_perfdata: %-16s %7d bytes, %5d records"):format(name, bytes, n))
  end
  os.remove(path)
end

-- ---- recordings by the perf tool ----
-- A short Lua workload: allocation (page faults, mmaps), a few writes (the
-- tracepoint) and a fork (task records).
local WORK = "lua5.4 -e 'local t = {} for i = 1, 5e4 do t[i] = { i } end "
  .. "for i = 1, 20 do io.stdout:write(\"x\") io.stdout:flush() end os.execute(\"true\")' > /dev/null"

local function quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end
local RECORDINGS = {
  { "callchain", "-e cpu-clock -c 250000 -g" },
  { "dwarf", "-e cpu-clock -c 1000000 --call-graph dwarf,1024" },
  { "tracepoint", "-e syscalls:sys_enter_write -e sched:sched_process_fork" },
  { "multi-event", "-e cpu-clock/period=200000/ -e page-faults/period=50/ -e context-switches/period=1/" },
  { "zstd", "-z -e cpu-clock -c 250000 -g" },
  { "group-read", "-e {cpu-clock/period=200000/,page-faults}:S" },
}

local function record(name, opts, pipe)
  local out = os.tmpname()
  local cmd = pipe
    and ("perf record -q %s -o - -- sh -c %s > %s 2>/dev/null"):format(opts, quote(WORK), out)
    or ("perf record -q %s -o %s -- sh -c %s > /dev/null 2>&1"):format(opts, out, quote(WORK))
  if not sh(cmd) then
    io.stderr:write(("seed_perfdata: %s: perf record failed, skipped (%s)\n"):format(name, opts))
    os.remove(out)
    return
  end
  keep(name, out)
end

if not sh("command -v perf > /dev/null") then
  io.stderr:write("seed_perfdata: no perf tool: the recorded seeds are skipped\n")
else
  os.execute("mount -t tracefs nodev /sys/kernel/tracing > /dev/null 2>&1")
  for _, r in ipairs(RECORDINGS) do record(r[1], r[2]) end
  record("pipe", "-e cpu-clock -c 250000 -g", true)
end

-- ---- built byte by byte: both byte orders ----
local pack = compat.pack
local S, R, U = core.SAMPLE, core.RECORD, core.PERFDATA.RECORD
local ID = 0x1234
local SAMPLE_TYPE = compat.bor(S.IDENTIFIER, S.IP, S.TID, S.TIME, S.CPU, S.PERIOD, S.CALLCHAIN)
local FLAGS = compat.bor(compat.lshift(1, 0), compat.lshift(1, 9), compat.lshift(1, 18), compat.lshift(1,
    23))   -- disabled, comm, sample_id_all, mmap2

local function trailer(e, time)
  return B.trailer(e, SAMPLE_TYPE, { pid = 10, tid = 11, time = time, cpu = 1, id = ID })
end

local function sample(e, time, ip, chain)
  return B.sample(e, SAMPLE_TYPE, { id = ID, ip = ip, pid = 10, tid = 11, time = time, cpu = 1,
                                    period = 100003, callchain = chain })
end

local function synthetic(e)
  local attr = B.attr(e, { type = 1, config = 0, sample_period = 100003, sample_type = SAMPLE_TYPE,
                           flags = FLAGS })
  local data = B.record(e, R.COMM, 0, pack(e .. "I4I4", 10, 11) .. B.cstr("lua5.4") .. trailer(e, 500))
    .. B.record(e, R.MMAP2, 2, pack(e .. "I4I4i8i8i8I4I4i8i8I4I4", 10, 11, 0x400000, 0x10000, 0, 8, 1,
                                    424242, 0, 5, 2) .. B.cstr("/usr/bin/lua5.4") .. trailer(e, 600))
    .. sample(e, 1000, 0x401000, { 0x401000, 0x402000 })
    .. sample(e, 900, 0x401100, { 0x401100 })
    .. B.record(e, U.finished_round, 0, "")
    .. sample(e, 1100, 0x402000, { 0x402000, 0x401000, 0x400100 })
    .. B.record(e, U.finished_round, 0, "")
  local feats = { { 3, B.hstr(e, "seedbox") }, { 7, pack(e .. "I4I4", 8, 4) }, { 21, pack(e .. "i8i8", 900, 1100) } }
  return (B.file(e, { attrs = { { attr = attr, ids = { ID } } }, data = data, features = feats }))
end

for _, e in ipairs { "<", ">" } do
  local path = B.write(os.tmpname(), synthetic(e))
  keep(e == "<" and "synthetic-le" or "synthetic-be", path)
end

print(("seed_perfdata: %d seeds in %s"):format(kept, dir))
