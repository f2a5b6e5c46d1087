-- perf.data with Lua frames: each Lua function gets a synthetic address in
-- an anonymous executable mapping that /tmp/perf-PID.map describes
-- (perfev.perfmap), and each stack becomes a sample whose callchain holds
-- those addresses (leaf first), weighted by its period. perf report and
-- perf script then show Lua function names.
--
-- The map stays behind in /tmp, as every perf map does: perf reads it when
-- it reports, by the pid in the file (this process's).
local perfev = require "perfev"
local pd = require "perfev.perfdata"
local perfmap = require "perfev.perfmap"
local fs = require "perfev.fs"

local M = {}

local MISC_USER = 2

local function comm_of()
  return fs.read("/proc/self/comm") or "lua"
end

-- write(profile, path[, opts]) -> true | nil, message, errno.
-- opts.map: the perf map's path (tests), default /tmp/perf-PID.map.
function M.write(p, path, opts)
  opts = opts or {}
  local pid = fs.own_pid()
  local map, msg, errno = perfmap.open(pid, { path = opts.map })
  if not map then return nil, msg, errno end
  local addr = {}
  for id, f in ipairs(p.funcs) do
    local a
    a, msg, errno = map:intern(("%s"):format(f.label))
    if not a then map:close(); return nil, msg, errno end
    addr[id] = a
  end
  local ok
  ok, msg, errno = map:close()
  if not ok then return nil, msg, errno end
  local a = perfev.attr { type = p.attr_type or 1, config = p.attr_config or 0,
                          sample_type = { "ip", "tid", "time", "period", "callchain" },
                          sample_id_all = true, sample_period = p.period or 1,
                          exclude_kernel = true, exclude_hv = true }
  if not p.period and p.freq then a.freq, a.sample_freq = true, p.freq end
  local w
  w, msg, errno = pd.create(path, a, { build_ids = false })
  if not w then return nil, msg, errno end
  local sid = { pid = pid, tid = pid, time = 0 }
  local recs = { { type = "comm", misc = 0, pid = pid, tid = pid, comm = comm_of(), sample_id = sid } }
  -- the perf map's mapping, when it has a line (a profile without a sample has none)
  if #p.funcs > 0 then recs[2] = map:mmap_record { sample_id = sid } end
  -- a record per sample (perf counts them), the stack's weight shared out
  local t = 0
  for _, s in ipairs(p.stacks) do
    local chain = {}
    for j = #s.frames, 1, -1 do
      chain[#chain + 1] = addr[p.frames[s.frames[j]].func]
    end
    local n = math.max(s.samples, 1)
    local each = math.floor(s.weight / n)
    for k = 1, n do
      t = t + 1
      recs[#recs + 1] = { type = "sample", misc = MISC_USER, ip = chain[1], pid = pid, tid = pid,
                          time = t, period = k == 1 and s.weight - each * (n - 1) or each,
                          callchain = chain, callchain_contexts = { { context = "user", first = 1 } } }
    end
  end
  for _, r in ipairs(recs) do
    ok, msg, errno = w:write(r)
    if not ok then w:close(); return nil, msg, errno end
  end
  ok, msg, errno = w:close()
  if not ok then return nil, msg, errno end
  return true
end

return M
