-- The call graphs perf report 6.1 draws under each row (its -g option,
-- tools/perf/util/callchain.c and ui/stdio/hist.c): the parameters, the
-- tree of one row's callchains, and its text.
--
-- A row's tree holds chains of entries (perfev.symbols entries: a symbol
-- of a dso, or an unresolved address). perf keeps a path-compressed tree
-- whose nodes end where a chain ends or branches; perfev's are the same
-- nodes, found from the chains when they are printed (see node below).
local symbols = require "perfev.symbols"

local M = {}

local MODES = { graph = true, fractal = true, flat = true, folded = true, none = true }
local ORDERS = { caller = true, callee = true }
local VALUES = { percent = true, period = true, count = true }

-- parse(spec) -> params | nil, message. spec: perf's -g string
-- ("graph,0.5,caller,function,percent", "none", "callee", "folded,1"), a
-- table of the same fields ({ mode =, min_percent =, order =, value =,
-- print_limit = }), or nil (perf's default). params.order is nil unless
-- given: perf's default is caller with children, callee without.
function M.parse(spec)
  local p = { mode = "graph", min_percent = 0.5, value = "percent", print_limit = 0 }
  if spec == nil or spec == true then return p end
  if spec == false then p.mode = "none"; return p end
  if type(spec) == "table" then
    for k, v in pairs(spec) do p[k] = v end
    p.threshold_set = spec.min_percent ~= nil
  else
    local nums = 0
    for tok in tostring(spec):gmatch("[^,]+") do
      local n = tonumber(tok)
      local default = tok == "function" or tok == "nobranch"   -- perf's defaults: nothing to set
      if MODES[tok] then p.mode = tok
      elseif ORDERS[tok] then p.order = tok
      elseif VALUES[tok] then p.value = tok
      elseif default then p.key = tok == "function" and "function" or p.key
      elseif n and nums == 0 then p.min_percent, nums, p.threshold_set = n, 1, true
      elseif n and nums == 1 then p.print_limit, nums = n, 2
      elseif tok == "address" or tok == "srcline" or tok == "branch" then
        return nil, ("-g: '%s' is not supported by perfev report (it needs source lines or branch stacks)"):format(tok)
      else
        return nil, ("-g: unknown option '%s' (perf's: graph, fractal, flat, folded, none, caller, callee, "
                     .. "function, percent, period, count, a threshold and a print limit)"):format(tok)
      end
    end
  end
  if not MODES[p.mode] then return nil, ("-g: unknown mode '%s'"):format(tostring(p.mode)) end
  if p.order ~= nil and not ORDERS[p.order] then return nil, ("-g: unknown order '%s'"):format(tostring(p.order)) end
  if not VALUES[p.value] then return nil, ("-g: unknown value '%s'"):format(tostring(p.value)) end
  if type(p.min_percent) ~= "number" or type(p.print_limit) ~= "number" then
    return nil, "-g: the threshold and the print limit are numbers"
  end
  return p
end

-- A row's tree is perf's: path-compressed, a node per run of frames
-- that all its chains share and where none ends but maybe at its last
-- (vals[1..], e = vals[1]), its kids in the order they came (list[1..n]),
-- the period and samples of the chains that end at the run's last frame
-- (hit, count) and of all that pass (total, tcount). The chains are kept
-- (M.add), and a node finds its kids when first asked for (expand): only
-- the nodes perf prints are ever expanded. Above the threshold a run is
-- found by comparing the chains' frames in place; below it (0.5 % of the
-- event by default) nothing is looked at. A trie of every frame of every
-- chain of every row was O(rows x frames) tables: on a file of garbage
-- chains (a program without frame pointers, 127 frames a sample), most
-- of perfev report's time.
--
-- A node holds the chains through it: I[2i - 1] the i-th chain (a table
-- with F[1..n] entries, period, samples, and stop: the index of its last
-- entry in the tree's direction), I[2i] the index in its F of the run's
-- last frame; ni chains. Every field a node ever gets is set here: LuaJIT
-- 2.1-20230119 (Debian's luajit2, nginx's) forwards a load from a table
-- built from a constructor template to the template's value after a key
-- added in the same trace rehashed it (LuaJIT issue 980, fixed upstream in
-- April 2023): nodes grown that way lost counts and kids at random.
local function node(e, step)
  return { e = e, vals = false, list = false, n = 0, hit = 0, count = 0, total = 0, tcount = 0,
           sorted = false, ordered = false, step = step, I = {}, ni = 0, expanded = false }
end

-- new([step]) -> an empty tree of chains read in the direction step (1:
-- from a chain's first entry to its last; -1: from its last to its first).
M.new = function(step) return node(nil, step or 1) end

-- add(tree, chain, from): the entries chain.F[from], chain.F[from + step],
-- ... chain.F[chain.stop] (chain.n, or 1 when the tree reads chains from
-- their last entry) as one callchain of chain.period and chain.samples.
-- The chain is kept, not copied: it must not change afterwards.
function M.add(tree, chain, from)
  local i = tree.ni + 1
  tree.ni = i
  local I = tree.I
  I[2 * i - 1], I[2 * i] = chain, from - tree.step   -- (the root's "last frame" is before the first)
  tree.total, tree.tcount = tree.total + chain.period, tree.tcount + chain.samples
end

-- The run of t, whose chains have their first frame at I[2i]: it goes on
-- while no chain ends and all have the same next frame; I[2i] is moved to
-- its last frame, and the chains that end there make the hit.
local function run(t)
  local I, m2, step = t.I, 2 * t.ni, t.step
  local vals = { t.e }
  local d = 0
  while true do
    local c = I[1]
    local k = I[2] + d
    if k == c.stop then break end
    local e = c.F[k + step]
    local same = true
    for i = 3, m2, 2 do
      c = I[i]
      k = I[i + 1] + d
      if k == c.stop or c.F[k + step] ~= e then
        same = false
        break
      end
    end
    if not same then break end
    d = d + step
    vals[#vals + 1] = e
  end
  local hit, count = 0, 0
  for i = 1, m2, 2 do
    local c = I[i]
    local k = I[i + 1] + d
    I[i + 1] = k
    if k == c.stop then hit, count = hit + c.period, count + c.samples end
  end
  t.vals, t.hit, t.count = vals, hit, count
end

-- The kids of node t, found once from the chains through it, in the
-- order of their first chains (the order a trie built by inserting the
-- chains one by one has them); each finds its run when asked (compress).
local function expand(t)
  if t.expanded then return t end
  t.expanded = true
  if not t.vals and t.e ~= nil then run(t) end
  local step, I = t.step, t.I
  local by, list, n = {}, {}, 0
  for i = 1, 2 * t.ni, 2 do
    local c = I[i]
    local k = I[i + 1]
    if k ~= c.stop then   -- (else the chain ends at t)
      k = k + step
      local e = c.F[k]
      local kid = by[e]
      if not kid then
        kid = node(e, step)
        by[e] = kid
        n = n + 1
        list[n] = kid
      end
      local j = kid.ni + 1
      kid.ni = j
      local KI = kid.I
      KI[2 * j - 1], KI[2 * j] = c, k
      kid.total, kid.tcount = kid.total + c.period, kid.tcount + c.samples
    end
  end
  t.list, t.n = list, n
  t.I = false
  return t
end

-- perf's node: a run of frames that neither end a chain nor branch.
-- Returns the entries of the run and the node (whose kids follow the
-- run's last frame).
local function compress(t)
  if not t.vals then run(t) end
  return t.vals, t
end

-- The order perf inserts siblings in: its match_chain order, descending
-- (the dso, then the symbol's start or the address); ties of value keep it.
local function before(a, b)
  local da, db = a.e.dso, b.e.dso
  if da ~= db then
    local ra, rb = da.rank or 0, db.rank or 0
    if ra ~= rb then return ra > rb end
  end
  local x = a.e.start or a.e.addr or 0
  local y = b.e.start or b.e.addr or 0
  if type(x) ~= "number" then x = tonumber(x) or 0 end
  if type(y) ~= "number" then y = tonumber(y) or 0 end
  if a.e.space ~= b.e.space then return (a.e.space or "") > (b.e.space or "") end
  return x > y
end

-- The kids of t kept (value >= min) in perf's order: larger first, equal
-- ones in insertion order.
local function sorted(t, value, min)
  expand(t)
  local list = {}
  for i = 1, t.n do list[i] = t.list[i] end
  table.sort(list, before)
  local out = {}
  for i, k in ipairs(list) do
    if value(k) >= min then out[#out + 1] = { k = k, v = value(k), i = i } end
  end
  table.sort(out, function(a, b)
    if a.v ~= b.v then return a.v > b.v end
    return a.i < b.i
  end)
  for i, x in ipairs(out) do out[i] = x.k end
  return out
end

local function name(e) return e.label or symbols.fast.callchain_name(e) end

local function value_text(p, period, count, total)
  if p.value == "period" then return ("%.0f"):format(period) end
  if p.value == "count" then return ("%.0f"):format(count) end
  return ("%.2f%%"):format(total ~= 0 and period * 100 / total or 0)
end

local function margin(m) return (" "):rep(12 + m) end

-- The start of every line of a graph's level (depth, mask): the margin
-- and the columns of the levels above, made once per level.
local function head_of(depth, mask, m)
  local s = { margin(m) }
  for i = 0, depth - 2 do s[#s + 1] = mask[i] and "|          " or "           " end
  return table.concat(s)
end

-- One entry of a level: its head, the level's own column (bar: mask's
-- bit there), the value on a node's first entry, the name.
local function graph_entry(out, p, t, e, head, bar, first, total)
  local col = bar and "|" or " "
  if first then
    out[#out + 1] = head .. col .. "--" .. value_text(p, t.total, t.tcount, total) .. "--" .. name(e) .. "\n"
  else
    out[#out + 1] = head .. col .. "          " .. name(e) .. "\n"
  end
end

local function copy(mask)
  local c = {}
  for k, v in pairs(mask) do c[k] = v end
  return c
end

-- perf's __callchain__fprintf_graph over the kept kids of trie node t.
local function graph(out, p, t, total, depth, mask, m)
  local rel = p.mode == "fractal"
  local kids = t.sorted
  local remaining = total
  local new_mask = copy(mask)
  local printed = 0
  local head = head_of(depth, mask, m)
  local line = head .. (mask[depth - 1] and "|          " or "           ") .. "\n"
  for j, kid in ipairs(kids) do
    local vals, last = compress(kid)
    remaining = remaining - kid.total
    if j == #kids and (not rel or remaining == 0) then new_mask[depth - 1] = nil end
    out[#out + 1] = line
    local bar = new_mask[depth - 1]
    for i, e in ipairs(vals) do graph_entry(out, p, kid, e, head, bar, i == 1, total) end
    local child_mask = copy(new_mask)
    child_mask[depth] = true
    graph(out, p, last, rel and (last.total - last.hit) or total, depth + 1, child_mask, m)
    printed = printed + 1
    if printed == p.print_limit then break end
  end
  -- (perf 6.1 mallocs its "[...]" symbol without clearing its `inlined`
  -- flag: it prints "[...] (inlined)" when that garbage bit is set)
  if rel and remaining ~= 0 and remaining ~= total then
    graph_entry(out, p, { total = remaining, tcount = 0 }, { label = "[...]" }, head, nil, true, total)
  end
end

-- Keeps, under every node, the kids perf keeps (t.sorted): graph mode
-- keeps what reaches min_hit of the whole event, fractal what reaches the
-- share of its parent's children.
local function cumul(k) return k.total end
local function prune(p, t, min_hit)
  local min = min_hit
  if p.mode == "fractal" then min = math.ceil((t.total - t.hit) * p.min_percent / 100) end
  t.sorted = sorted(t, cumul, min)
  -- the kids of perf's node are those of the run's last trie node
  for _, kid in ipairs(t.sorted) do
    local _, last = compress(kid)
    prune(p, last, min_hit)
  end
end

-- flat and folded: one chain per node where chains end, largest first.
local function flat_list(p, t, min_hit, path, out)
  for _, kid in ipairs(t.ordered) do
    local vals, last = compress(kid)
    local here = {}
    for i = 1, #path do here[i] = path[i] end
    for _, e in ipairs(vals) do here[#here + 1] = e end
    flat_list(p, last, min_hit, here, out)
    if last.hit > 0 and last.hit >= min_hit then out[#out + 1] = { node = last, path = here } end
  end
end

local function order_kids(t)
  expand(t)
  local list = {}
  for i = 1, t.n do list[i] = t.list[i] end
  table.sort(list, before)
  t.ordered = list
  for i = 1, t.n do
    local _, last = compress(t.list[i])
    order_kids(last)
  end
end

-- format(out, tree, p, opts): appends the lines perf prints under a row.
-- opts: total (the event's period), row_total (the row's children period
-- with children, else its period), event_callchain_total (the period of
-- the event's samples: perf's threshold base), skip_first (perf's
-- --sort sym...: the row's own symbol is not repeated).
function M.format(out, tree, p, opts)
  if p.mode == "none" or expand(tree).n == 0 then return end
  local total = opts.total
  local min_hit = math.floor(opts.event_callchain_total * (p.min_percent / 100))
  local n0 = #out
  if p.mode == "flat" or p.mode == "folded" then
    order_kids(tree)
    local chains = {}
    flat_list(p, tree, min_hit, {}, chains)
    local keyed = {}
    for i, c in ipairs(chains) do keyed[i] = { c = c, i = i } end
    table.sort(keyed, function(a, b)
      if a.c.node.hit ~= b.c.node.hit then return a.c.node.hit > b.c.node.hit end
      return a.i < b.i
    end)
    for j, k in ipairs(keyed) do
      local c = k.c
      if p.mode == "flat" then
        out[#out + 1] = "           " .. value_text(p, c.node.total, c.node.tcount, total) .. "\n"
        for i = 1, #c.path do out[#out + 1] = "                " .. name(c.path[i]) .. "\n" end
        out[#out + 1] = "\n"
      else
        local names = {}
        for i = 1, #c.path do names[i] = name(c.path[i]) end
        out[#out + 1] = value_text(p, c.node.hit, c.node.count, total) .. " " .. table.concat(names, ";") .. "\n"
      end
      if j == p.print_limit then break end
    end
    return
  end
  prune(p, tree, min_hit)
  local m = 0
  local start = tree
  local kids = tree.sorted
  if #kids == 1 and kids[1].total == opts.row_total then
    local vals, last = compress(kids[1])
    local printed, entries = false, 0
    for i, e in ipairs(vals) do
      if not (i == 1 and opts.skip_first) then
        if not printed then
          out[#out + 1] = margin(m) .. "|\n"
          out[#out + 1] = margin(m) .. "---" .. name(e) .. "\n"
          m = m + 3
          printed = true
        else
          out[#out + 1] = margin(m) .. name(e) .. "\n"
        end
        entries = entries + 1
        if entries == p.print_limit then break end
      end
    end
    start = last
  end
  graph(out, p, start, p.mode == "fractal" and opts.row_total or total, 1, { [0] = true }, m)
  if #out > n0 then out[#out + 1] = "\n" end
end

return M
