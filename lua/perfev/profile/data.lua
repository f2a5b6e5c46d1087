-- The profile every output is written from: what an engine read out
-- (frames with their running line, stacks of frame ids with their weight)
-- given names and labels, cut to the profiled function when there is one,
-- perfev's own frames folded into one `[perfev]` frame, and grouped by
-- function: a Lua function is named by its definition (perfev.profile.naming),
-- so that it is one row however it was called.
--
-- profile = {
--   frames = { { name, source, line, linedefined, what, func } },   -- func: index in funcs
--   funcs  = { { name, source, linedefined, what, label } },        -- one per function
--   stacks = { { frames = { ids, root first }, weight, samples[, values][, tags] } },
--            (values: a list of several figures per stack, summed as the
--            weight is: perfev.alloc's four, pprof's sample_types; tags:
--            pprof labels, "key\2value\1key\2value", perfev.resty.tags)
--   weight, samples, lost, signals, hooks, outside, unattributed, truncated,
--   event, unit ("nanoseconds" | "events"), freq, period, name, time, mode,
--   cost, cpu (the profiler's cost and the thread's CPU time, ns), signal_cost,
--   throttled (times the rate was lowered), rate_asked, rate_now, rate_unit
--   ("Hz" | "period"), max_cost (the bound, a fraction),
--   attach (perfev.attach's counts: pid, exe, runtime, samples, dropped, outside, ...),
-- }
local naming = require "perfev.profile.naming"

local unpack = table.unpack or rawget(_G, "unpack")

local M = {}

-- The frame that stands for perfev's own work in a stack (what = "perfev")
M.OWN = "[perfev]"

-- The name a frame is shown by: for a Lua function, the one it was
-- defined by (names: function key -> name or false), else debug.getinfo's
-- name, else what it is.
local function lua_key(f)
  return table.concat({ f.source or "", tostring(f.linedefined) }, "\0")
end

local function display_name(f, names)
  if f.what == "truncated" then return "[truncated]" end
  if f.what == "perfev" then return M.OWN end
  if f.what == "Lua" then return names[lua_key(f)] or "<anonymous>" end
  if f.what == "main" then return "main chunk" end
  if f.name then return f.name end
  if f.what == "C" then return "?" end
  return "<anonymous>"
end

-- "name (source:linedefined)", "name [C]", "main chunk (source)": the label
-- of a function in folded stacks, flame graphs and reports (no ';').
local function label(f, name)
  local s
  -- a VM state the engine gives as a C frame ("[GC]", "[JIT compiler]",
  -- "[trace 3]") is its name alone
  if f.what == "C" then s = name:sub(1, 1) == "[" and name or name .. " [C]"
  elseif f.what == "native" or f.what == "kernel" then
    -- native = true: "memcpy [libc.so.6]", "clear_page_erms [kernel]", "[lua5.4 (stripped)]"
    if name:sub(1, 1) == "[" then s = name
    elseif f.what == "kernel" then s = name .. " [kernel]"
    else s = ("%s [%s]"):format(name, f.source) end
  elseif f.what == "truncated" or f.what == "perfev" then s = name
  elseif f.what == "main" or (f.linedefined or -1) < 0 then s = ("%s (%s)"):format(name, f.source)
  else s = ("%s (%s:%.0f)"):format(name, f.source, f.linedefined) end
  return (s:gsub(";", ","))
end

local function func_key(f, name)
  return table.concat({ f.what, name, f.source or "", tostring(f.linedefined) }, "\0")
end

-- The name of each Lua function (by lua_key): the name on the line that
-- defines it, read from its source (f.chunk: the whole source where the
-- engine has it, else f.source); else the first name a call gave it when
-- the engine's call names are sure (raw.call_names ~= "unsure": LuaJIT's
-- debug.getinfo names a tail-called function after the call of the
-- function that made the tail call); else none.
local function lua_names(raw, namer)
  local define, sure = namer or naming.namer(), raw.call_names ~= "unsure"
  local names = {}
  for _, f in ipairs(raw.frames) do
    if f.what == "Lua" then
      local k = lua_key(f)
      if names[k] == nil then
        names[k] = define(f.chunk or f.source, f.linedefined) or (sure and f.name) or false
      end
    end
  end
  return names
end

-- Names every frame and interns its function; frames of perfev's own
-- modules are marked own.
local function name_frames(raw, namer)
  local frames, funcs, byfunc = {}, {}, {}
  local names = lua_names(raw, namer)
  for i, f in ipairs(raw.frames) do
    local name = display_name(f, names)
    local k = func_key(f, name)
    local id = byfunc[k]
    if not id then
      id = #funcs + 1
      funcs[id] = { name = name, source = f.source, linedefined = f.linedefined, what = f.what,
                    label = label(f, name) }
      byfunc[k] = id
    end
    frames[i] = { name = name, source = f.source, line = f.line, linedefined = f.linedefined,
                  what = f.what, func = id,
                  own = (f.what == "Lua" or f.what == "main") and naming.own(f.source) or nil }
  end
  return frames, funcs
end

-- own_frame(frames, funcs) -> a function giving the id of the [perfev]
-- frame, added to frames and funcs the first time.
local function own_frame(frames, funcs)
  local id
  return function()
    if not id then
      funcs[#funcs + 1] = { name = M.OWN, source = "", linedefined = -1, what = "perfev", label = M.OWN }
      frames[#frames + 1] = { name = M.OWN, source = "", line = -1, linedefined = -1, what = "perfev",
                              func = #funcs }
      id = #frames
    end
    return id
  end
end

local function is_lua(f) return f.what == "Lua" or f.what == "main" end

-- ids (root first) with perfev's own frames folded: each run of them into
-- one [perfev] frame, never one of perfev's frames between the user's; at
-- the leaf end, with the C frames it called ([perfev] is the leaf: the
-- sample was taken in perfev's work, one of its C functions, its garbage
-- collection).
local function fold_own(ids, frames, own_id)
  local last = #ids
  while last >= 1 and not is_lua(frames[ids[last]]) do last = last - 1 end
  if last < 1 or not frames[ids[last]].own then last = #ids end
  local out, prev = {}, false
  for i = 1, last do
    local own = frames[ids[i]].own
    if not own then out[#out + 1] = ids[i]
    elseif not prev then out[#out + 1] = own_id() end
    prev = own
  end
  return out
end

-- Where the profiled function's frames start in ids (root first): after
-- the frame of the function that ran it (root: Profiler.run) and the pcall
-- it made. nil when the sample holds none (taken in start or stop: then
-- the frame above the root's is not its pcall, a C function, but the
-- profiler's own stop or start).
local function root_at(ids, frames, root)
  for i, id in ipairs(ids) do
    local f = frames[id]
    if f.source == root.source and f.linedefined == root.linedefined and f.what ~= "C" then
      local call = ids[i + 1] and frames[ids[i + 1]]
      if call and call.what == "C" and ids[i + 2] then return i + 2 end
      return nil
    end
  end
end

-- The stacks, cut at the root function (frames below it are the caller's
-- and the profiler's), perfev's frames folded, equal ones merged. Returns stacks, and the weight
-- and samples left out, and each raw stack's stack (into[i], nil when cut out).
local function cut(raw, frames, funcs, root)
  local out, byids, outside, outside_samples, into = {}, {}, 0, 0, {}
  local own_id = own_frame(frames, funcs)
  for si, s in ipairs(raw.stacks) do
    local from = 1
    if root then
      from = root_at(s, frames, root)
      -- a stack cut short (deeper than the engine records: its root end
      -- is the [truncated] mark, the leaf frames kept) may not show the
      -- root: it is kept whole, the mark at its root, as perf keeps a
      -- callchain cut at sample_max_stack (such samples were counted
      -- outside: all of a recursion 1,000 deep)
      if not from and s[1] and frames[s[1]].what == "truncated" then from = 1 end
    end
    if from then
      local ids = {}
      for i = from, #s do ids[#ids + 1] = s[i] end
      ids = fold_own(ids, frames, own_id)
      local k = table.concat(ids, ",")
      if s.tags then k = k .. "\3" .. s.tags end     -- pprof labels: a stack of their own
      local t = byids[k]
      if t then
        t.weight, t.samples = t.weight + s.weight, t.samples + s.samples
        for i, v in ipairs(s.values or {}) do t.values[i] = t.values[i] + v end
      else
        t = { frames = ids, weight = s.weight, samples = s.samples, tags = s.tags,
              values = s.values and { unpack(s.values) } }
        out[#out + 1] = t
        byids[k] = t
      end
      into[si] = t
    else
      outside = outside + s.weight
      outside_samples = outside_samples + s.samples
    end
  end
  table.sort(out, function(a, b) return a.weight > b.weight end)
  return out, outside, outside_samples, into
end

-- The frames and functions the stacks use, renumbered (a profile lists
-- no function that no sample holds: the frames cut below the root, those
-- folded into [perfev]).
local function used_only(frames, funcs, stacks)
  local fmap, umap, nframes, nfuncs = {}, {}, {}, {}
  for _, s in ipairs(stacks) do
    for i, id in ipairs(s.frames) do
      local n = fmap[id]
      if not n then
        local f = frames[id]
        local u = umap[f.func]
        if not u then
          nfuncs[#nfuncs + 1] = funcs[f.func]
          u = #nfuncs
          umap[f.func] = u
        end
        nframes[#nframes + 1] = { name = f.name, source = f.source, line = f.line, linedefined = f.linedefined,
                                  what = f.what, func = u }
        n = #nframes
        fmap[id] = n
      end
      s.frames[i] = n
    end
  end
  return nframes, nfuncs
end

-- build(raw, opts) -> profile. opts: root ({ source, linedefined }: the
-- function whose pcall ran the profiled function), event, unit, freq, period, name, time;
-- namer: a perfev.profile.naming namer kept from one build to the next
-- (a continuous profiler's takes: its sources read once, not every take).
function M.build(raw, opts)
  local p = M.build_mapped(raw, opts)
  return p
end

-- build_mapped(raw, opts) -> profile, into: as build, and into[i] the
-- profile's stack of raw.stacks[i] (nil for one cut out): the timeline's
-- samples name their stacks so (perfev.timeline).
function M.build_mapped(raw, opts)
  local frames, funcs = name_frames(raw, opts.namer)
  local stacks, outside, outside_samples, into = cut(raw, frames, funcs, opts.root)
  frames, funcs = used_only(frames, funcs, stacks)
  local p = { frames = frames, funcs = funcs, stacks = stacks, outside = outside,
              outside_samples = outside_samples,
              weight = 0, samples = 0 }
  for _, s in ipairs(stacks) do
    p.weight, p.samples = p.weight + s.weight, p.samples + s.samples
  end
  for _, k in ipairs { "lost", "signals", "hooks", "unattributed", "truncated", "mode", "signal",
                       "cost", "cpu", "signal_cost", "throttled", "rate_asked", "rate_now", "rate_unit",
                       "max_cost", "throttle_error", "attach" } do
    p[k] = raw[k]
  end
  for _, k in ipairs { "event", "unit", "freq", "period", "name", "time", "duration",
                       "attr_type", "attr_config", "sample_types", "period_type", "default_sample" } do
    p[k] = opts[k]
  end
  p.event = p.event or "?"
  p.unit = p.unit or "events"
  return p, into
end

-- throttle_note(profile or raw) -> the sentence that says how the rate was
-- lowered to keep the profiler's cost within its bound, or nil when it
-- was not (the warning, the text report, the command's summary).
function M.throttle_note(p)
  if (p.throttled or 0) == 0 then return nil end
  local change
  -- (numbers: on LuaJIT a 64-bit period from the core is a cdata, which %.0f refuses)
  local asked, now = tonumber(p.rate_asked), tonumber(p.rate_now)
  if p.rate_unit == "Hz" then
    change = ("the rate was lowered from %.0f Hz to %.0f Hz"):format(asked, now)
  else
    change = ("the period was raised from %.0f to %.0f"):format(asked, now)
  end
  return ("sampling cost more than %.0f%% of the thread's CPU time: %s (%.0f times; the profiler's "
          .. "share of the run: %.0f%%)"):format(100 * p.max_cost, change, tonumber(p.throttled),
                                                 p.cpu > 0 and 100 * p.cost / p.cpu or 0)
end

-- by_function(profile) -> { { func, label, self, total, lines = { [line] = self } } },
-- sorted by self weight, then total. total counts a function once per stack.
function M.by_function(p)
  local rows, byid = {}, {}
  local function row(id)
    local r = byid[id]
    if not r then
      r = { func = p.funcs[id], label = p.funcs[id].label, self = 0, total = 0, lines = {} }
      byid[id] = r
      rows[#rows + 1] = r
    end
    return r
  end
  for _, s in ipairs(p.stacks) do
    local seen = {}
    for _, fid in ipairs(s.frames) do
      local id = p.frames[fid].func
      if not seen[id] then
        seen[id] = true
        local r = row(id)
        r.total = r.total + s.weight
      end
    end
    local leaf = p.frames[s.frames[#s.frames]]
    if leaf then
      local r = row(leaf.func)
      r.self = r.self + s.weight
      r.lines[leaf.line] = (r.lines[leaf.line] or 0) + s.weight
    end
  end
  table.sort(rows, function(a, b)
    if a.self ~= b.self then return a.self > b.self end
    if a.total ~= b.total then return a.total > b.total end
    return a.label < b.label
  end)
  return rows
end

-- share(profile, label) -> the fraction of the weight whose leaf function
-- has this label (or name), and the fraction of stacks through it (total).
function M.share(p, name)
  if p.weight == 0 then return 0, 0 end
  for _, r in ipairs(M.by_function(p)) do
    if r.label == name or r.func.name == name then
      return r.self / p.weight, r.total / p.weight
    end
  end
  return 0, 0
end

-- The stack's labels, root first, function by function.
function M.labels(p, s)
  local t = {}
  for i, fid in ipairs(s.frames) do t[i] = p.funcs[p.frames[fid].func].label end
  return t
end

return M
