-- Every object perfev gives back prints usefully at the REPL: its class and
-- a key fact (the event's name and fd, a ring's size, a file's name), and
-- that it is closed once it is. The C classes are found by walking the
-- registry, so a class added without an entry here makes this spec fail.
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"

local function escape(s) return (s:gsub("%p", "%%%0")) end

-- The C classes perfev.core registers: metatables named "perfev.*" (not
-- the spec helpers' "perfev.spec.*", which other spec files may have loaded).
local function registered()
  local out = {}
  for k, v in pairs(debug.getregistry()) do
    if type(k) == "string" and k:match("^perfev%.") and not k:match("^perfev%.spec%.")
       and type(v) == "table" and v.__name == k then
      out[#out + 1] = k
    end
  end
  table.sort(out)
  return out
end

local function sampling_attr()
  return core.attr { type = "software", config = core.SW.CPU_CLOCK, sample_period = 1000000,
                     sample_type = "period", disabled = true }
end

-- class -> function(dir) returning the object, the facts its text must
-- show while open (plain substrings), a function closing it (nil: it
-- cannot be closed) and whether its text then says "closed" (default
-- true); or nil, the reason it cannot be made here. An attr prints as perf
-- stat -vv's dump of it (DESIGN.md): its head, not "perfev.attr(", is
-- checked.
local C_CLASSES = {
  ["perfev.attr"] = function()
    return core.attr { type = "software", config = core.SW.PAGE_FAULTS }, { "perf_event_attr:", "type", "config" }
  end,
  ["perfev.kallsyms"] = function()
    local m = assert(core.kallsyms_map("/proc/kallsyms"))
    return m, { "bytes", "read" }, function() m:close() end
  end,
  ["perfev.event"] = function()
    local ev = assert(perfev.open("page-faults"))
    return ev, { "perfev.event(page-faults", "fd " .. ev:fileno() }, function() ev:close() end
  end,
  ["perfev.ring"] = function()
    local ev = assert(core.open(sampling_attr(), 0, -1))
    local ring = assert(ev:mmap(1))
    return ring, { "4096 data bytes" }, function() ring:close(); ev:close() end
  end,
  ["perfev.aux"] = function()
    local ev = assert(core.open(sampling_attr(), 0, -1))
    local ring = assert(ev:mmap(1))
    local aux, msg = ring:aux(4)
    if not aux then
      ring:close(); ev:close()
      return nil, "no PMU of this machine has an AUX area (" .. tostring(msg) .. ")"
    end
    return aux, { "bytes" }, function() aux:close(); ring:close(); ev:close() end
  end,
  ["perfev.decoder"] = function()
    -- the decoder perfev.decode keeps for its iterator (its upvalue)
    local it = perfev.decode("", core.attr { sample_type = "ip" })
    local i, d = 1, nil
    repeat
      local _, v = debug.getupvalue(it, i)
      if type(v) == "userdata" and getmetatable(v) and getmetatable(v).__name == "perfev.decoder" then d = v end
      i = i + 1
    until d or v == nil and i > 8
    return assert(d, "perfev.decode's iterator holds its decoder"), { "0x" }
  end,
  ["perfev.perfdata.reader"] = function(dir)
    local path = dir .. "/r.data"
    local w = assert(perfev.perfdata.create(path, { core.attr { sample_type = "ip" } }))
    assert(w:close())
    local f = assert(perfev.perfdata.open(path))
    return f.r, { path }, function() f:close() end
  end,
  ["perfev.group_reader"] = function()
    local leader = assert(core.open(core.attr { type = "software", config = core.SW.PAGE_FAULTS,
      disabled = true, read_format = { "group", "id" } }, 0, -1))
    local reader = core.group_reader({ leader }, { "faults" })
    return reader, { "1 members" }, function() reader:close() end
  end,
  ["perfev.profiler_budget"] = function()
    local ev = assert(core.open(sampling_attr(), 0, -1))
    local b = core.profiler_budget(ev, 0.25)
    return b, { "bound 25%", "lowered 0 times" }, function() ev:close() end, false
  end,
  ["perfev.tracer"] = function()   -- perfev.attach's: a child of ours, traced
    local pid = tonumber(u.sh("sleep 30 > /dev/null 2>&1 & echo $!"):match("%d+"))
    local tr, msg = core.attach_tracer(pid)
    if not tr then
      u.sh("kill " .. pid)
      return nil, "cannot trace a child here: " .. tostring(msg)
    end
    return tr, { "pid " .. pid, "1 threads" }, function() tr:close() u.sh("kill " .. pid) end
  end,
  ["perfev.saved_signal"] = function()   -- the LuaJIT engine's SIGPROF, ignored while it runs
    local saved = assert(core.signal_ignore(28))   -- SIGWINCH: ignored by default anyway
    return saved, { "signal 28", "ignored" }, function() saved:restore() end, false
  end,
  ["perfev.symtab"] = function()   -- an ELF file's symbols, searched in C (perfev.elf.finish)
    local t = require("perfev.elf").finish { { 0x1000, 16, 1, "f" }, { 0x2000, 8, 1, "g" } }
    return t, { "2 symbols" }, nil, false
  end,
  ["perfev.kept_signal"] = function()   -- the LuaJIT engine's SIGINT handler, kept to send a Ctrl-C again
    local kept = assert(core.signal_keep(28))
    return kept, { "signal 28" }, function() kept:close() end, false
  end,
  ["perfev.profiler"] = function()
    local ev = assert(core.open(sampling_attr(), 0, -1))
    local ring = assert(ev:mmap(1))
    local p = core.profiler(ev, ring)
    return p, { "stopped" }, function() ring:close(); ev:close() end, false
  end,
  ["perfev.allocprof"] = function()
    local a = core.allocprof(4096, "hook")
    return a, { "open", "stopped" }, function() a:close() end
  end,
}

-- The objects of the Lua layer: name, maker (as above).
local LUA_OBJECTS = {
  { "perfev.group", function()
      local g = assert(perfev.group { "task-clock", "page-faults" })
      return g, { "task-clock, page-faults" }, function() g:close() end
    end },
  { "perfev.group.result", function()
      local g = assert(perfev.group { "task-clock", "page-faults" })
      local r = g:read()
      g:close()
      return r, { "task-clock = ", "time_enabled = " }
    end },
  { "perfev.sampler", function()
      local s = assert(perfev.sampler { period = 1000000, cpus = { 0 } })
      return s, { "1 CPUs" }, function() s:close() end
    end },
  { "perfev.tool", function()
      local t = assert(perfev.open("duration_time"))
      return t, { "duration_time" }, function() t:close() end
    end },
  { "perfev.perfmap", function(dir)
      local m = assert(require("perfev.perfmap").open(nil, { path = dir .. "/p.map" }))
      return m, { dir .. "/p.map" }, function() m:close() end
    end },
  { "perfev.perfdata.writer", function(dir)
      local w = assert(perfev.perfdata.create(dir .. "/w.data", { core.attr { sample_type = "ip" } }))
      return w, { dir .. "/w.data" }, function() w:close() end
    end },
  { "perfev.perfdata.file", function(dir)
      local path = dir .. "/f.data"
      assert(assert(perfev.perfdata.create(path, { core.attr { sample_type = "ip" } })):close())
      local f = assert(perfev.perfdata.open(path))
      return f, { path }, function() f:close() end
    end },
  { "perfev.report", function(dir)
      local path = dir .. "/rep.data"
      local r = assert(perfev.record { output = path, period = 200000, fn = function() u.burn(30) end })
      assert(r.samples > 0)
      local rep = assert(require("perfev.report").open(path))
      return rep, { path, "cpu-clock: " }
    end },
  { "perfev.stat", function()
      local r = assert(perfev.stat { function() u.burn(5) end, events = "task-clock" })
      return r, { "Performance counter stats", "task-clock" }
    end },
  { "perfev.profile", function()
      local p = perfev.profile { event = "cpu-clock", period = 1000000 }
      return p, { "cpu-clock", "stopped" }, function() p:close() end, false
    end },
  { "perfev.alloc", function()
      local a = perfev.alloc { period = 4096 }
      return a, { "period 4096", "stopped" }, function() a:close() end, false
    end },
  -- plain tables with a metatable holding only __tostring (lua/perfev/show.lua)
  { "perfev.parse.event", function()
      return perfev.parse("cycles:u"), { "cpu-cycles:u: type 0, config 0x0", "exclude_kernel", "exclude_hv" }
    end },
  { "perfev.parse.list", function()
      return perfev.parse("{cs,faults}:u"), { "2 events: context-switches:u, page-faults:u" }
    end },
  { "perfev.reading", function()
      local ev = assert(perfev.open("task-clock"))
      ev:enable()
      u.burn(2)
      local r = ev:read_raw()
      ev:close()
      return r, { ("value = %.0f, "):format(r.value), "time_enabled = ", "time_running = " }
    end },
  { "perfev.reading", function()   -- a group leader's: one {...} per member
      local g = assert(perfev.group { "task-clock", "page-faults" })
      local r = g:leader():read_raw()
      g:close()
      return r, { "nr = 2, {value = ", "}, {value = ", "time_enabled = " }
    end },
  { "perfev.reading", function()   -- a tool event's, as a kernel event's
      local t = assert(perfev.open("duration_time"))
      local r = t:read_raw()
      t:close()
      return r, { "value = 0, time_enabled = 0, time_running = 0" }
    end },
  { "perfev.resty", function()   -- outside nginx: no lua_shared_dict, this worker's own sums
      local r = assert(require("perfev.resty").new { events = { "task-clock", "page-faults" } })
      return r, { "task-clock, page-faults", "0 labels in this worker" }, function() r:close() end
    end },
}

local function check(name, obj, facts, close, shows_closed)
  local s = tostring(obj)
  -- an attr prints as perf stat -vv's dump of it, a stat result as perf stat's text
  local head = name == "perfev.attr" and "^%-+\nperf_event_attr:\n"
               or name == "perfev.stat" and "Performance counter stats"
               or "^" .. escape(name) .. " ?%("
  assert.matches(head, s, nil, false, name .. ": " .. s)
  for _, f in ipairs(facts) do assert.matches(f, s, 1, true, name .. " shows " .. f .. ": " .. s) end
  assert.is_nil(s:match(": 0x%x+$"), "not a bare address: " .. s)
  if close then
    close()
    local c = tostring(obj)
    assert.matches(head, c)
    if shows_closed ~= false then assert.matches("closed", c, 1, true, name .. " once closed: " .. c) end
  end
end

describe("tostring of every perfev object", function()
  local dir
  setup(function() dir = u.tmpdir() end)
  teardown(function() u.rmdir(dir) end)

  it("every C class has a __tostring, and an entry in this spec", function()
    local names = registered()
    assert.is_true(#names >= 8, table.concat(names, " "))
    for _, name in ipairs(names) do
      assert.is_function(debug.getregistry()[name].__tostring, name)
      assert.is_function(C_CLASSES[name], "no entry for the class " .. name)
    end
  end)

  for _, name in ipairs(registered()) do
    it("C class " .. name, function()
      local maker = C_CLASSES[name]
      if not maker then return end   -- the test above names it
      local obj, facts, close, shows_closed = maker(dir)
      if not obj then pending(facts); return end
      check(name, obj, facts, close, shows_closed)
    end)
  end

  for _, row in ipairs(LUA_OBJECTS) do
    it(row[1], function()
      local obj, facts, close, shows_closed = row[2](dir)
      check(row[1], obj, facts, close, shows_closed)
    end)
  end

  it("the module prints its version and entry points, not a bare address", function()
    local s = tostring(perfev)
    assert.matches("^perfev " .. escape(perfev.VERSION) .. ": ", s)
    assert.matches("entry points: open, group, parse, ", s, 1, true)
    assert.matches('perfev.help("open")', s, 1, true)
    -- every entry point it names is there (help and event, which are not fields, aside)
    for name in s:match("entry points: ([^\n]*)"):gmatch("[%w_]+") do
      if name ~= "event" then assert.is_not_nil(perfev[name], name) end
    end
  end)

  it("an empty perfev.list says that nothing matched, with the closest name", function()
    local none = perfev.list("nosuchthing", { probe = false })
    assert.equal(0, #none)
    assert.is_nil(next(none))   -- still an empty list
    assert.equal("perfev.list: no event matches 'nosuchthing'", tostring(none))
    assert.equal("perfev.list: no event matches 'pagefaults' (did you mean 'page-faults'?)",
                 tostring(perfev.list("pagefaults", { probe = false })))
  end)

  it("perfev.list() prints a summary when long, the rows when short", function()
    local l = perfev.list(nil, { probe = false })
    assert.is_true(#l > require("perfev.list").SHOWN)
    local s = tostring(l)
    assert.matches(("^perfev%%.list: %d events\n"):format(#l), s)
    assert.matches("Software event +%d+", s)
    assert.matches('perfev.list("sw")', s, 1, true)
    assert.matches("l:format()", s, 1, true)
    assert.is_true(select(2, s:gsub("\n", "")) < 15, s)
    -- the whole text, as `perfev list` prints it
    assert.equal(#l, select(2, l:format():gsub("\n", "")) + 1)
    local sw = perfev.list("sw", { probe = false })
    assert.is_true(#sw <= require("perfev.list").SHOWN)
    assert.equal(sw:format(), tostring(sw))
    assert.matches("task%-clock +%[Software event%]", tostring(sw))
  end)
end)
