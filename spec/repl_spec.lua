-- perfev at the interpreter's REPL, the way a user first meets it: the
-- real `lua -i` (or `luajit -i`) of the runtime running this spec, fed
-- lines through a pipe. The REPL runs `perfev.open(...)` as
-- `return perfev.open(...)` (Lua 5.3/5.4; LuaJIT's `=expr` the same): a
-- tail call that leaves no frame of the caller, which once put every
-- mistake at lua/perfev/options.lua:42. `lua -e 'return ...'` has the same
-- shape and runs each entry point on its own.
local u = require "spec.support.util"

local LUA = u.lua_interpreter()
local ENV = u.lua_env()
local JIT = rawget(_G, "jit") ~= nil
-- how the REPL prints a value: Lua 5.3+ an expression, LuaJIT `=expr`
local SHOW = JIT and "=" or ""

-- repl(lines) -> stdout, stderr of the interactive interpreter reading
-- `perfev = require "perfev"` and then these lines from a pipe
local function repl(lines)
  local input, err = os.tmpname(), os.tmpname()
  local f = assert(io.open(input, "w"))
  f:write('perfev = require "perfev"\n', table.concat(lines, "\n"), "\n")
  f:close()
  local p = assert(io.popen(("%s%s -i < %s 2> %s"):format(ENV, LUA, input, err), "r"))
  local out = p:read("a")
  p:close()
  local e = u.read_file(err)
  os.remove(input)
  os.remove(err)
  return out, e
end

-- tail(code) -> the first line of stderr of `lua -e 'perfev = require
-- "perfev"' -e 'return <code>'`, without the interpreter's "lua5.4: "
local function tail(code)
  local err = os.tmpname()
  local cmd = ("%s%s -e 'perfev = require \"perfev\"' -e 'return %s' 2> %s >/dev/null"):format(ENV, LUA, code, err)
  os.execute(cmd)
  local e = u.read_file(err)
  os.remove(err)
  return (e:match("^[^\n]*"):gsub("^[^:]*: ", "", 1))
end

-- A position inside perfev's own files ("lua/perfev/options.lua:42: ").
local function internal_position(msg)
  return msg:match("^[^ ]*lua/perfev/[^ ]*%.lua:%d+:")
end

-- The error lines of a REPL's stderr (the tracebacks' frames left out).
local function messages(err)
  local out = {}
  for line in err:gmatch("[^\n]+") do
    if not line:match("^%s") and line ~= "stack traceback:" then out[#out + 1] = line end
  end
  return out
end

describe("at the REPL", function()
  it("an unknown event: no perfev position, one line, the closest name and where to look", function()
    local lines = { 'perfev.open("task-clok")', 'perfev.parse("cycles,task-clok")' }
    if JIT then lines[#lines + 1] = '=perfev.open("task-clok")' end   -- LuaJIT's tail call
    local _, err = repl(lines)
    local msgs = messages(err)
    assert.equal(#lines, #msgs, err)
    for _, m in ipairs(msgs) do
      assert.is_nil(internal_position(m), m)
      -- the caller's position (LuaJIT's statement: stdin:1) or none (a tail call)
      local msg = m:gsub("^stdin:%d+: ", "")
      assert.matches("^perfev%.parse: unknown event 'task%-clok' %(did you mean 'task%-clock'%?%) "
                     .. "at position %d; perfev%.list%(%) shows the events of this machine$", msg)
      assert.is_true(#m < 140, m)
    end
  end)

  it("every entry point, called as the REPL calls it, raises at no perfev file", function()
    for _, case in ipairs {
      { 'perfev.open("task-clok")', "perfev.parse: unknown event 'task-clok' (did you mean 'task-clock'?)" },
      { 'perfev.open("task-clock", { bogus = 1 })', "perfev.open: unknown option 'bogus'" },
      { 'perfev.group({ "task-clok" })', "perfev.group: member 1 (string 'task-clok'): perfev.parse: unknown" },
      { 'perfev.group({ "task-clock" }, { bogus = 1 })', "perfev.group: unknown option 'bogus'" },
      { "perfev.parse(42)", "perfev.parse: expected an event string, got integer 42" },
      { 'perfev.parse_list("cs", { bogus = 1 })', "perfev.parse: unknown option 'bogus'" },
      { 'perfev.attr({ config = "cpu-clok" })', "perfev.attr: unknown event name 'cpu-clok' (did you mean" },
      { "perfev.attr({ bogus = 1 })", "perfev.attr: unknown field 'bogus'" },
      { "perfev.list(5)", "perfev.list: the filter (argument #1) must be a string" },
      { "perfev.uprobe({ bogus = 1 })", "perfev.uprobe: " },
      { "perfev.kprobe({ bogus = 1 })", "perfev.kprobe: " },
      { "perfev.sampler({ bogus = 1 })", "perfev.sampler: unknown option 'bogus'" },
      { "perfev.record({ bogus = 1 })", "perfev.record: unknown option 'bogus'" },
      { "perfev.profile({ bogus = 1 })", "perfev.profile: unknown option 'bogus'" },
      { "perfev.stat({ bogus = 1 })", "perfev.stat: unknown option 'bogus'" },
      { 'perfev.report.open("/nonexistent", 5)', "perfev.report: options must be a table" },
      { "perfev.perfdata.open(5)", "perfev.perfdata.open: expected a path" },
      { "perfev.perfdata.create(5)", "perfev.perfdata.create: attrs must be a list" },
      { "perfev.perfmap.open(nil, { bogus = 1 })", "perfev.perfmap.open: unknown option 'bogus'" },
      { "perfev.on_warning(5)", "perfev.on_warning: expected a function" },
      { 'perfev.help("opn")', "perfev.help: no entry point 'opn' (did you mean 'open'?)" },
      { 'perfev.open("task-clock").read_raw(5)', "perfev.event: bad self for read_raw" },
      { 'perfev.open("task-clock"):measure(5)', "perfev: measure: expects a function to call" },
      { "perfev.profile():write(5)", "perfev.profile: " },
    } do
      local m = tail(case[1])
      assert.is_nil(internal_position(m), case[1] .. " -> " .. m)
      assert.equal(1, m:find(case[2], 1, true), case[1] .. " -> " .. m)
    end
  end)

  it("perfev prints its entry points, perfev.help() what each does", function()
    local out = repl { SHOW .. "perfev", 'perfev.help("open")', "perfev.help()" }
    assert.matches("perfev [%d.]+: Linux perf events for Lua\n", out)
    assert.matches("entry points: open, group, parse, parse_list, list,", out, 1, true)
    -- perfev.help("open"): the signature, a line, the page
    assert.matches("perfev.open(spec[, opts]) -> event | nil, message, errno\n  open one event", out, 1, true)
    assert.matches("see README.md (A tour), doc/events.md\n", out, 1, true)
    -- perfev.help(): a line per entry point
    assert.matches("\n  profile +profile Lua functions", out)
    assert.is_nil(out:match("table: 0x"), out)
  end)

  it("what perfev returns prints as its class, not table: 0x...", function()
    local out, err = repl {
      SHOW .. 'perfev.parse("cycles:u")',
      'ev = perfev.open("task-clock") ev:enable()',
      SHOW .. "ev:read_raw()",
      SHOW .. 'perfev.list("nosuchthing")',
      SHOW .. 'perfev.list("pagefaults")',
      SHOW .. "perfev.compat.hex(255)",
    }
    assert.equal("", err)
    assert.matches("perfev.parse.event(cpu-cycles:u: type 0, config 0x0, exclude_guest, exclude_hv, exclude_kernel)",
                   out, 1, true)
    assert.matches("perfev%.reading%(value = %d+, time_enabled = %d+, time_running = %d+%)", out)
    assert.matches("perfev.list: no event matches 'nosuchthing'\n", out, 1, true)
    assert.matches("perfev.list: no event matches 'pagefaults' (did you mean 'page-faults'?)\n", out, 1, true)
    assert.matches("\n?[> ]*ff\n", out)   -- perfev.compat without a require of its own
    assert.is_nil(out:match("table: 0x"), out)
  end)
end)
