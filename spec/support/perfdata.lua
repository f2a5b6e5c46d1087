-- Helpers of the perf.data specs (not a spec itself): run the real perf
-- tool into a temporary directory and read back what it prints, in raw
-- forms (no symbols): `perf script -D` (every record as perf delivers it,
-- with its file offset and raw callchain) and `perf script -F`.
local shell = require "spec.support.shell"
local compat = require "perfev.compat"

local M = {}

function M.have_perf()
  return select(2, shell.sh("perf version >/dev/null 2>&1"))
end

M.tmpdir, M.rmdir = shell.tmpdir, shell.rmdir

-- perf and the programs it records are not perfev: check-asan's preload
-- of the sanitizer runtimes stays out of them (a recorded program would
-- show libasan's frames, perf would run instrumented)
local PERF = "env -u LD_PRELOAD perf"

-- Runs a perf command (stdin: a file to read from); returns its stdout and stderr.
function M.perf(args, stdin)
  local err = os.tmpname()
  local cmd = ("%s %s 2>'%s'"):format(PERF, args, err)
  if stdin then cmd = cmd .. (" < '%s'"):format(stdin) end
  local out = shell.sh(cmd)
  local e = shell.read_file(err) or ""
  os.remove(err)
  return out, e
end

-- Runs `perf record ARGS` (output in path); returns path, or nil and perf's output.
function M.record(path, args)
  local out, ok = shell.sh(("%s record -o '%s' %s 2>&1"):format(PERF, path, args))
  if not ok or not shell.exists(path) then return nil, out end
  return path
end

-- A `record(name, args)` that runs perf record once per file name, into
-- the directory dir() returns (a spec's setup makes it), with prefix before
-- args; returns the path, or nil (perf's output printed) when perf failed.
function M.recorder(dir, prefix)
  local files = {}
  return function(name, args)
    if files[name] == nil then
      local path, out = M.record(dir() .. "/" .. name, (prefix or "") .. args)
      files[name] = path or false
      if not path then print("perf record " .. args .. ": " .. tostring(out)) end
    end
    return files[name] or nil
  end
end

-- `perf evlist -v -i path`: the first event's fields, as perf prints them
-- (strings: "IP|TID|CALLCHAIN", "0xff0fff", "1").
function M.evlist(path)
  local out = M.perf(("evlist -v -i '%s'"):format(path))
  local t = {}
  for k, v in (out:match("[^\n]*") .. ","):gmatch("%s*([%w_{} ,]-): ([^,]*),") do t[k] = v end
  return t
end

-- The fields of an evlist (M.evlist) that a call graph mode sets ("0" when
-- perf prints none).
function M.call_graph_fields(t)
  local out = {}
  for _, k in ipairs { "sample_type", "sample_regs_user", "sample_stack_user", "exclude_callchain_user",
                       "mmap_data" } do
    out[k] = t[k] or "0"
  end
  return out
end

-- A shell command that keeps a cpu busy for about n iterations.
function M.busy(n)
  return ("sh -c 'i=0; while [ $i -lt %d ]; do i=$((i+1)); done'"):format(n)
end

local function hex(s)
  local v = compat.tointeger(tonumber(s, 16))
  if v then return v end
  -- above 2^63: tonumber gives a float; build the integer from halves
  s = ("%016s"):format(s):gsub(" ", "0")
  return compat.bor(compat.lshift(tonumber(s:sub(1, 8), 16), 32), (tonumber(s:sub(9), 16)))
end
M.hex = hex

-- `perf script -D` of a file (or "-" with input): the records perf
-- delivers, in its order: { time, offset, size, type = "sample" | ..., and
-- for samples pid, tid, ip, period, chain (raw, with context markers) }.
function M.dump(path, input)
  local cmd = ("perf script -D -i '%s' 2>/dev/null"):format(path)
  if input then cmd = ("perf script -D -i - < '%s' 2>/dev/null"):format(input) end
  local p = assert(io.popen(cmd))
  local out, cur = {}, nil
  for line in p:lines() do
    -- cpu-wide files (perf record -a) print the cpu first
    -- (perf stat record files print -1 for both)
    local cpu, t, off, size, name = line:match("^(%-?%d+) (%-?%d+) 0x(%x+) %[0x(%x+)%]: PERF_RECORD_([%u%d_]+)")
    if not cpu then
      t, off, size, name = line:match("^(%-?%d+) 0x(%x+) %[0x(%x+)%]: PERF_RECORD_([%u%d_]+)")
    end
    -- perf prints a table header right after STAT_ROUND
    if name and name:match("^STAT_ROUND") then name = "STAT_ROUND" end
    if t then
      cur = { time = compat.tointeger(tonumber(t)), offset = hex(off), size = hex(size),
              type = name:lower(), cpu = tonumber(cpu) }
      if name == "SAMPLE" then
        local pid, tid, ip, period = line:match(": (%-?%d+)/(%-?%d+): 0x(%x+) period: (%d+)")
        cur.pid, cur.tid, cur.ip, cur.period = tonumber(pid), tonumber(tid), hex(ip), tonumber(period)
      end
      out[#out + 1] = cur
    elseif cur and line:match("^%.%.%.%.%.%s*%d+: %x+$") then
      cur.chain = cur.chain or {}
      cur.chain[#cur.chain + 1] = hex(line:match(": (%x+)$"))
    elseif cur and line:match("^%.%.%. FP chain: nr:0") then
      cur.chain = {}
    end
  end
  p:close()
  return out
end

-- `perf script -F FIELDS --ns -G`: one table per sample line, with the
-- fields that parse (tid, time, period, ip, event).
function M.script(path, fields, extra)
  local p = assert(io.popen(("perf script -F %s --ns -G -i '%s' %s 2>/dev/null")
                            :format(fields, path, extra or "")))
  local out = {}
  for line in p:lines() do
    local rec = {}
    local tid, s, ns, rest = line:match("^%s*(%d+)%s+(%d+)%.(%d+):%s*(.*)$")
    if tid then
      rec.tid, rec.time = tonumber(tid), tonumber(s) * 1000000000 + tonumber(ns)
      local period, ev, ip = rest:match("^(%d*)%s*([%w%-:_]-):?%s*(%x*)%s*$")
      rec.period = tonumber(period)
      rec.event = ev ~= "" and ev or nil
      rec.ip = ip ~= "" and hex(ip) or nil
      out[#out + 1] = rec
    end
  end
  p:close()
  return out
end

-- The chain without context markers, as rec.callchain has it.
function M.strip_markers(chain)
  local t = {}
  for _, ip in ipairs(chain or {}) do
    if not (ip < 0 and ip >= -4095) then t[#t + 1] = ip end   -- PERF_CONTEXT_MAX
  end
  return t
end

return M
