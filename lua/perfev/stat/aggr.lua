-- perfev.stat.aggr: perf stat's aggregation modes (-A/--no-aggr,
-- --per-socket, --per-die, --per-core, --per-node, --per-thread) and
-- its CPU lists (-C): the CPU topology from sysfs, the groups counts are
-- summed over, and the column perf prints before each count (perf 6.1's
-- aggr_printout, in text, CSV and JSON).
local M = {}

M.MODES = { global = true, none = true, socket = true, die = true, core = true, node = true, thread = true }

local SYS = "/sys/devices/system"

local function read_number(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local s = f:read("l")
  f:close()
  return tonumber(s)
end

-- cpulist("0-3,5") -> { 0, 1, 2, 3, 5 } | nil, message (perf's -C syntax)
function M.cpulist(s)
  if type(s) == "table" then
    local out = {}
    for i, c in ipairs(s) do
      if type(c) ~= "number" or c < 0 or c ~= math.floor(c) then
        return nil, ("CPU list entry [%d] must be a CPU number"):format(i)
      end
      out[i] = c
    end
    return out
  end
  local out, seen = {}, {}
  for part in tostring(s):gmatch("[^,]+") do
    local lo, hi = part:match("^%s*(%d+)%s*%-%s*(%d+)%s*$")
    if not lo then lo = part:match("^%s*(%d+)%s*$"); hi = lo end
    if not lo or tonumber(hi) < tonumber(lo) then
      return nil, ("'%s' is not a CPU list (e.g. 0-3,5)"):format(tostring(s))
    end
    for c = tonumber(lo), tonumber(hi) do
      if not seen[c] then seen[c] = true; out[#out + 1] = c end
    end
  end
  if #out == 0 then return nil, ("'%s' is not a CPU list (e.g. 0-3,5)"):format(tostring(s)) end
  table.sort(out)
  return out
end

-- the NUMA node of a cpu (perf's cpu__get_node: the node directory that
-- lists it), 0 when the machine has no node directories
local function node_of(cpu)
  for n = 0, 1023 do
    local dir = ("%s/node/node%d"):format(SYS, n)
    local f = io.open(dir .. "/cpulist", "r")
    if not f then
      if n > 0 then return 0 end
    else
      local list = f:read("l")
      f:close()
      for _, c in ipairs(M.cpulist(list or "") or {}) do
        if c == cpu then return n end
      end
    end
  end
  return 0
end

-- topology(cpu) -> { cpu, socket, die, core, node } as perf reads them
function M.topology(cpu)
  local dir = ("%s/cpu/cpu%d/topology/"):format(SYS, cpu)
  return { cpu = cpu, socket = read_number(dir .. "physical_package_id") or 0,
           die = read_number(dir .. "die_id") or 0, core = read_number(dir .. "core_id") or 0,
           node = node_of(cpu) }
end

-- The identity of a CPU in a mode, and the order of groups (perf sorts
-- its aggregation ids by socket, die, core, node, cpu).
local KEY = {
  none = function(t) return ("CPU%d"):format(t.cpu), { t.cpu } end,
  socket = function(t) return ("S%d"):format(t.socket), { t.socket } end,
  die = function(t) return ("S%d-D%d"):format(t.socket, t.die), { t.socket, t.die } end,
  core = function(t) return ("S%d-D%d-C%d"):format(t.socket, t.die, t.core), { t.socket, t.die, t.core } end,
  node = function(t) return ("N%d"):format(t.node), { t.node } end,
}

-- groups(mode, targets) -> { { id =, topology fields, nr =, members = { target index, ... } }, ... }
-- targets: { cpu = N } per CPU, or { tid =, comm = } per thread (mode "thread").
function M.groups(mode, targets)
  local by, list = {}, {}
  for i, t in ipairs(targets) do
    local id, order
    if mode == "thread" then
      id, order = ("%s-%d"):format(t.comm or "", t.tid), { i }
    else
      t = M.topology(t.cpu)
      id, order = KEY[mode](t)
    end
    local g = by[id]
    if not g then
      g = { id = id, order = order, nr = 0, members = {}, cpu = t.cpu, socket = t.socket, die = t.die,
            core = t.core, node = t.node, tid = t.tid, comm = t.comm }
      by[id] = g
      list[#list + 1] = g
    end
    g.nr = g.nr + 1
    g.members[#g.members + 1] = i
  end
  table.sort(list, function(a, b)
    for k = 1, #a.order do
      if a.order[k] ~= b.order[k] then return a.order[k] < b.order[k] end
    end
    return false
  end)
  return list
end

-- JSON keys of perf's aggr_printout
local JSON_KEY = { socket = "socket", die = "die", core = "core", node = "node" }

-- prefix(mode, g, fmt, sep) -> what perf prints before the count of group
-- g: fmt "text", "csv" or "json" (the JSON object's first keys, "{" included)
function M.prefix(mode, g, fmt, sep)
  local csv = fmt == "csv"
  if fmt == "json" then
    if mode == "none" then return ('{"cpu" : "%d", '):format(g.cpu) end
    if mode == "thread" then return ('{"thread" : "%s", '):format(g.id) end
    return ('{"%s" : "%s", "aggregate-number" : %d, '):format(JSON_KEY[mode], g.id, g.nr)
  end
  local function left(v, w) v = tostring(v); return csv and v or v .. (" "):rep(w - #v) end
  local function right(v, w) v = tostring(v); return csv and v or (" "):rep(w - #v) .. v end
  if mode == "none" then return "CPU" .. left(g.cpu, 7) .. sep end
  if mode == "thread" then return right(g.comm or "", 16) .. "-" .. left(g.tid, 8) .. sep end
  local head
  if mode == "socket" then head = "S" .. left(g.socket, 5)
  elseif mode == "node" then head = "N" .. left(g.node, 5)
  elseif mode == "die" then head = ("S%d-D"):format(g.socket) .. left(g.die, 8)
  else head = ("S%d-D%d-C"):format(g.socket, g.die) .. left(g.core, 8) end
  return head .. sep .. right(g.nr, 4) .. sep
end

return M
