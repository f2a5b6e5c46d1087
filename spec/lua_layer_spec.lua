-- require "perfev": the core re-exported, perfev.open with names, tables
-- and attrs, ev:measure, enable_all/disable_all.
local perfev = require "perfev"
local core = require "perfev.core"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local E, h = u.E, u.h
local SW, FORMAT = core.SW, core.FORMAT
local TIMES = compat.bor(FORMAT.TOTAL_TIME_ENABLED, FORMAT.TOTAL_TIME_RUNNING)

describe("perfev", function()
  it("exports what the README documents, and the core as perfev.core", function()
    for _, k in ipairs { "attr", "parse", "parse_list", "open", "group", "decode", "encode",
                         "enable_all", "disable_all", "clock_ns", "rusage", "list", "uprobe", "kprobe",
                         "sampler", "record", "perfdata", "perfmap", "compat", "help", "attach", "alloc" } do
      assert.is_not_nil(perfev[k], k)
    end
    -- perfev.compat.hex(v), as the README and doc/runtimes.md write it
    assert.equal(require("perfev.compat"), perfev.compat)
    assert.equal("ff", perfev.compat.hex(255))
    for k, v in pairs(core) do   -- every constant table
      if type(v) == "table" and k:match("^[A-Z]") then assert.equal(v, perfev[k], k) end
    end
    assert.equal(core, perfev.core)
    assert.equal(core.ERRNO, perfev.ERRNO)
    -- the core's internals and its own open (another signature) stay in the core
    for _, k in ipairs { "event_methods", "ring_methods", "group_reader", "group_results", "_snapshot_walk",
                         "_selfread_compute", "perfdata_reader", "attr_fields", "scale" } do
      assert.is_nil(rawget(perfev, k), k)
      assert.is_nil(perfev[k], k)
    end
    assert.not_equal(core.open, perfev.open)
  end)

  it("require 'perfev' loads no probe, ELF, sampler, list, record or perf.data code", function()
    local out = assert(u.run_lua([[
      require "perfev"
      local mods = {}
      for k in pairs(package.loaded) do
        if k:match("^perfev%.") then mods[#mods + 1] = k end
      end
      table.sort(mods)
      print(table.concat(mods, " "))
    ]]))
    for _, m in ipairs { "perfev.probe", "perfev.elf", "perfev.sampler", "perfev.list", "perfev.record",
                         "perfev.perfdata", "perfev.perfmap", "perfev.perfdata.writer" } do
      assert.is_nil(out:find(m .. "[ \n]"), m .. " loaded by require 'perfev': " .. out)
    end
    assert.matches("perfev.core", out, 1, true)
  end)

  describe("open", function()
    it("opens a generic software event by name, disabled, reading its times", function()
      local ev = assert(perfev.open("page-faults"))
      assert.equal("page-faults", ev:name())
      local a = ev:attr()
      assert.equal(core.TYPE.SOFTWARE, a.type)
      assert.equal(SW.PAGE_FAULTS, a.config)
      assert.equal(1, a.disabled)
      assert.equal(TIMES, a.read_format)
      h.touch_pages(10)
      assert.is_false((ev:read()))   -- opened disabled: never ran
      ev:close()
    end)

    it("knows perf's aliases and gives the canonical name", function()
      for alias, want in pairs { cs = { "context-switches", SW.CONTEXT_SWITCHES },
                                 faults = { "page-faults", SW.PAGE_FAULTS },
                                 migrations = { "cpu-migrations", SW.CPU_MIGRATIONS },
                                 ["cpu-clock"] = { "cpu-clock", SW.CPU_CLOCK },
                                 ["task-clock"] = { "task-clock", SW.TASK_CLOCK } } do
        local ev = assert(perfev.open(alias))
        assert.equal(want[1], ev:name(), alias)
        assert.equal(want[2], ev:attr().config, alias)
        ev:close()
      end
    end)

    it("an unknown name raises, saying where the known ones are (not all of them)", function()
      local ok, err = pcall(perfev.open, "no-such-event")
      assert.is_false(ok)
      assert.matches("unknown event 'no-such-event'", err, 1, true)
      assert.matches("; perfev.list() shows the events of this machine", err, 1, true)
      assert.is_nil(err:find("task-clock", 1, true), err)
      -- where it points: the names are there
      local names = {}
      for _, r in ipairs(perfev.list("sw", { probe = false })) do names[r.name] = true end
      assert.is_true(names["task-clock"])
      assert.has_error(function() perfev.open(42) end)
    end)

    it("a table spec: attr fields plus a name; disabled and times by default", function()
      local ev = assert(perfev.open { type = "software", config = SW.TASK_CLOCK, name = "tc" })
      assert.equal("tc", ev:name())
      assert.equal(1, ev:attr().disabled)
      assert.equal(TIMES, ev:attr().read_format)
      ev:close()
      -- what the table says wins
      ev = assert(perfev.open { type = "software", config = SW.TASK_CLOCK, disabled = false,
                                read_format = FORMAT.ID })
      assert.equal(0, ev:attr().disabled)
      assert.equal(FORMAT.ID, ev:attr().read_format)
      u.spin(2e6)
      assert.is_true(ev:read() > 0)   -- counting from the open
      ev:close()
    end)

    it("an attr is used as it is", function()
      local a = core.attr { type = "software", config = SW.PAGE_FAULTS }
      local ev = assert(perfev.open(a))
      assert.equal(a, ev:attr())
      h.touch_pages(16)
      assert.is_true(ev:read() >= 16)   -- not disabled: counts at once
      assert.equal("page-faults", ev:name())
      ev:close()
    end)

    it("options: name, pid, cpu, group", function()
      local ev = assert(perfev.open("task-clock", { name = "mine", pid = 0, cpu = 0 }))
      assert.equal("mine", ev:name())
      ev:close()
      local g = assert(perfev.group { "task-clock", "page-faults" })
      local extra = assert(perfev.open({ type = "software", config = SW.PAGE_FAULTS,
                                         disabled = false }, { group = g }))
      g:enable()
      h.touch_pages(16)
      g:disable()
      -- the extra member counted with the group, and appears in the leader's read
      assert.is_true(extra:read() >= 16)
      assert.equal(3, g:leader():read_raw().nr)
      extra:close()
      g:close()
    end)

    it("a refused open returns nil, message, errno", function()
      local ev, msg, err = perfev.open("task-clock", { pid = -1, cpu = -1 })
      assert.is_nil(ev)
      assert.equal(E.EINVAL, err)
      assert.matches("pid == -1 with cpu == -1", msg, 1, true)
    end)

    local paranoid = tonumber(u.read_file("/proc/sys/kernel/perf_event_paranoid") or "")
    local out, why
    if paranoid and paranoid >= 2 then
      out, why = u.run_as_nobody([[
        local perfev = require "perfev"
        local ev, msg = perfev.open("task-clock")
        if not ev then print("nil\t" .. msg) return end
        local a = ev:attr()
        local n = ev:measure(function() local x = 0 for i = 1, 1e5 do x = x + i end end)
        print(ev:data().fallback, a.exclude_kernel, a.exclude_hv, n > 0)
        -- a group takes the same path (issue 9: groups had no permission fallback)
        local g, gmsg = perfev.group { "task-clock", "page-faults", "duration_time" }
        if not g then print("nil\t" .. gmsg) return end
        local r = g:measure(function() local x = 0 for i = 1, 1e5 do x = x + i end end)
        print(g:event(1):data().fallback, g:event(2):data().fallback, g:event(2):attr().exclude_kernel,
              r["task-clock"] > 0)
      ]])
    else
      why = "kernel.perf_event_paranoid is " .. tostring(paranoid) .. ", below 2"
    end
    if out then
      it("falls back to user-space counting when kernel counting is refused", function()
        assert.equal("exclude_kernel\t1\t1\ttrue\nexclude_kernel\texclude_kernel\t1\ttrue\n", out)
      end)
    else
      pending("the exclude_kernel fallback as an unprivileged user: " .. why)
    end
  end)

  describe("measure", function()
    it("resets, enables, calls fn with its arguments, disables, returns the read", function()
      local ev = assert(perfev.open("page-faults"))
      local n, enabled, running = ev:measure(h.touch_pages, 50)
      assert.is_true(n >= 50, "faults " .. n)
      assert.is_true(enabled > 0 and running > 0)
      -- disabled afterwards
      h.touch_pages(50)
      assert.equal(n, ev:read())
      -- and reset before the next call
      local m = ev:measure(h.touch_pages, 5)
      assert.is_true(m >= 5 and m < n, ("second measure %d, first %d"):format(m, n))
      ev:close()
    end)

    it("re-raises fn's error and leaves the event disabled", function()
      local ev = assert(perfev.open("page-faults"))
      local ok, err = pcall(ev.measure, ev, function() h.touch_pages(4); error({ code = 7 }) end)
      assert.is_false(ok)
      assert.same({ code = 7 }, err)
      local n = ev:read()
      h.touch_pages(20)
      assert.equal(n, ev:read())
      ev:close()
    end)
  end)

  describe("enable_all and disable_all", function()
    it("start and stop every event this process opened", function()
      local a = assert(perfev.open("page-faults"))
      local b = assert(perfev.open("task-clock"))
      h.touch_pages(10)
      assert.is_false((a:read()))
      assert.is_true(perfev.enable_all())
      h.touch_pages(20)
      u.spin(1e6)
      assert.is_true(perfev.disable_all())
      local pa, pb = a:read(), b:read()
      assert.is_true(pa >= 20, "page-faults " .. tostring(pa))
      assert.is_true(pb > 0)
      h.touch_pages(20)
      u.spin(1e6)
      assert.equal(pa, a:read())
      assert.equal(pb, b:read())
      a:close(); b:close()
    end)
  end)

  describe("perfev.help", function()
    local help = require "perfev.help"

    it("names every entry point print(perfev) lists, each with a signature, a line and a page", function()
      for _, e in ipairs(help.ENTRIES) do
        local name = e[1]
        if name ~= "event" then assert.is_not_nil(perfev[name], name) end
        local text = help.text(name)
        assert.equal(text, help.text("perfev." .. name))
        local sig, line, page = text:match("^([^\n]+)\n  ([^\n]+)\n  see ([^\n]+)$")
        assert.is_not_nil(sig, text)
        assert.matches(name == "event" and "ev:" or name, sig, 1, true)
        assert.is_true(#line > 10, line)
        -- the pages it names exist
        for file in page:gmatch("([%w_/%-]+%.md)") do assert.is_true(u.exists(file), file) end
      end
      assert.matches("perfev.open(spec[, opts]) -> event | nil, message, errno", help.text("open"), 1, true)
      assert.matches("\n  open ", help.text(), 1, true)
    end)

    it("prints the text (as at the REPL); an unknown name raises at the caller with the closest", function()
      local written = {}
      local stdout = io.stdout
      -- luacheck: ignore 122
      io.stdout = { write = function(_, ...) for _, s in ipairs { ... } do written[#written + 1] = s end end }
      local ok, err = pcall(perfev.help, "group")
      io.stdout = stdout
      assert.is_true(ok, err)
      assert.equal(help.text("group") .. "\n", table.concat(written))
      local line = debug.getinfo(1, "l").currentline + 1
      ok, err = pcall(perfev.help, "opne")
      assert.is_false(ok)
      assert.equal(("spec/lua_layer_spec.lua:%d: perfev.help: no entry point 'opne' (did you mean 'open'?); "
                    .. "perfev.help() lists them"):format(line), err)
    end)
  end)

  it("perfev.attr builds attrs from names, tables and attrs", function()
    local a = perfev.attr("context-switches")
    assert.equal(core.TYPE.SOFTWARE, a.type)
    assert.equal(SW.CONTEXT_SWITCHES, a.config)
    assert.equal(5, perfev.attr { type = "breakpoint" }.type)
    assert.equal(a, perfev.attr(a))
  end)
end)
