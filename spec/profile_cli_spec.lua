-- `perfev profile` (lua/perfev/cli/profile.lua), through argparse as the
-- perfev dispatcher drives a subcommand module (summary, configure, run),
-- in a child interpreter: exit codes, stderr, the files it writes.
local shell = require "spec.support.shell"
local u = require "spec.support.util"

local LUA = os.getenv("LUA") or "lua5.4"
-- LuaJIT runs the work 10-50 times faster: more rounds, as many samples
local ROUNDS = LUA:match("luajit") and 20 or 1
local ENV = u.lua_env()

-- The launcher: a parser with one `profile` command, as the dispatcher makes.
local LAUNCH = [[
local argparse = require "argparse"
local m = require "perfev.cli.profile"
local parser = argparse("perfev", "perfev")
m.configure(parser:command("profile", m.summary))
os.exit(m.run(parser:parse()))
]]

local dir

-- Runs `perfev profile ARGS`; returns stdout, stderr, exit code.
local function perfev_profile(args)
  local launcher, err = dir .. "/launch.lua", dir .. "/stderr"
  local f = assert(io.open(launcher, "w"))
  f:write(LAUNCH)
  f:close()
  -- the status from the shell: LuaJIT's popen:close() does not report it
  local p = assert(io.popen(("%s%s %s profile %s 2>%s; echo \"exit=$?\""):format(ENV, LUA, launcher, args, err)))
  local out = p:read("a")
  p:close()
  local code = tonumber(out:match("exit=(%d+)\n?$"))
  return (out:gsub("exit=%d+\n?$", "")), shell.read_file(err) or "", code
end

local function script(name, body)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write(body)
  f:close()
  return path
end

local WORK = [[
local function spin(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end
local function cheap() local r = spin(300000) return r end
local function dear() local r = spin(900000) return r end
for _ = 1, tonumber(arg[1]) do cheap() dear() end
if arg[2] == "raise" then error("the script failed") end
if arg[2] == "exit" then os.exit(3) end
]]

describe("perfev profile", function()
  setup(function() dir = shell.tmpdir() end)
  teardown(function() shell.rmdir(dir) end)

  it("prints the text report of a script, which sees its arguments in arg", function()
    local s = script("work.lua", WORK .. "print('args', arg[0] ~= nil, arg[1])\n")
    local out, err, code = perfev_profile("-c 250000 " .. s .. " " .. 10 * ROUNDS)
    assert.equal(0, code, err)
    assert.matches("args\ttrue\t" .. 10 * ROUNDS, out, 1, true)
    assert.matches("# perfev profile: Lua functions on event 'cpu%-clock' %(period 250000%)", out)
    local dear = tonumber(out:match("\n%s+([%d.]+)%%%s+[%d.]+%%%s+dear %("))
    assert.is_true(math.abs(dear - 75) <= 5, out)
    assert.matches("main chunk %(" .. s:gsub("%p", "%%%0") .. "%)", out)
  end)

  it("writes the format the output's name asks for", function()
    local s = script("work.lua", WORK)
    local folded = dir .. "/out.folded"
    local _, err, code = perfev_profile("-F 999 -o " .. folded .. " " .. s .. " " .. 5 * ROUNDS)
    assert.equal(0, code, err)
    assert.matches("samples %(cpu%-clock%) written to " .. folded:gsub("%p", "%%%0"), err)
    local lines = shell.lines(folded)
    assert.is_true(#lines >= 2)
    -- every stack starts at the script's main chunk; a sample may land in
    -- the main chunk's own loop, a stack of one frame, but most are deeper
    local deep, all = 0, 0
    for _, l in ipairs(lines) do
      assert.matches("^main chunk %(.-%)[; ].* %d+$", l)
      local n = tonumber(l:match(" (%d+)$"))
      all = all + n
      if l:match("^main chunk %(.-%);[^ ]+") then deep = deep + n end
    end
    assert.is_true(deep >= all * 0.9, table.concat(lines, "\n"))
  end)

  it("joins the native stacks under the Lua frames with --native", function()
    local s = script("copy.lua", [[
local function builder()
  local t = {}
  for i = 1, 100 do t[i] = string.rep("ab", 40000) end
  return #table.concat(t)
end
for _ = 1, tonumber(arg[1]) do builder() end
]])
    local folded = dir .. "/native.folded"
    -- page-faults: the hook engine on every runtime (LuaJIT's clocks have no callchain)
    local _, err, code = perfev_profile("--native -e page-faults -c 1 -o " .. folded .. " " .. s .. " 20")
    assert.equal(0, code, err)
    local lines = shell.lines(folded)
    local native, libc, all = 0, 0, 0
    for _, l in ipairs(lines) do
      local n = tonumber(l:match(" (%d+)$"))
      all = all + n
      -- builder, then (5.4) rep or concat [C], then native frames ending
      -- where the page was touched: libc's copy routine, or (LuaJIT, when
      -- a collection shrank its string buffer) the VM's own copy loop
      local leaf_object = l:match(";builder %(.-%);.*%[([^%]]+)%] %d+$")
      if leaf_object and leaf_object ~= "C" then native = native + n end
      if l:match(";builder %(.-%);.*__?mem[%w_]+ %[libc%.so%.6%]") then libc = libc + n end
    end
    local seen = ("%d of %d under builder with native frames, %d in libc's mem*:\n%s")
      :format(native, all, libc, table.concat(lines, "\n", 1, math.min(#lines, 5)))
    assert.is_true(all > 0)
    assert.is_true(native / all >= 0.8, seen)
    assert.is_true(libc / all >= 0.2, seen)
  end)

  it("still writes the profile when the script raises, and exits 1", function()
    local s = script("work.lua", WORK)
    local out = dir .. "/raised.txt"
    local _, err, code = perfev_profile("-o " .. out .. " " .. s .. " 5 raise")
    assert.equal(1, code)
    -- as lua prints it: the message and the script's traceback, no perfev frame
    assert.matches("perfev profile: .-work%.lua:5: the script failed\nstack traceback:\n", err)
    assert.matches("work%.lua:5: in main chunk\nperfev profile: ", err)
    assert.matches("dear %(", shell.read_file(out))
  end)

  it("keeps the script's os.exit status, after writing the profile", function()
    local s = script("work.lua", WORK)
    local out = dir .. "/exit.txt"
    local _, err, code = perfev_profile("-o " .. out .. " " .. s .. " 3 exit")
    assert.equal(3, code, err)
    assert.matches("# Samples: %d+", shell.read_file(out))
  end)

  it("says what is wrong on stderr, with a non-zero exit", function()
    local s = script("work.lua", WORK)
    local _, err, code = perfev_profile("-e no-such-event " .. s .. " 1")
    assert.equal(129, code)   -- a usage error, as stat and record give it (doc/cli.md)
    assert.matches("^perfev profile: unknown event 'no%-such%-event' at position 1; perfev list shows", err)
    _, err, code = perfev_profile("-o out.bin " .. s .. " 1")
    assert.equal(1, code)
    assert.matches("perfev profile: cannot tell the format of 'out.bin' from its name", err, 1, true)
    _, err, code = perfev_profile(dir .. "/missing.lua")
    assert.equal(127, code)   -- as perfev stat and record, and a shell
    assert.matches("^perfev profile: cannot open .*missing%.lua", err)
    _, err, code = perfev_profile("-F 99 -c 1000 " .. s)
    assert.is_true(code ~= 0)
    assert.matches("can not be used together", err)
    local ev = require("perfev").open("cycles")
    if ev then ev:close() else
      _, err, code = perfev_profile("-e cycles " .. s .. " 1")
      assert.equal(1, code)
      assert.matches("^perfev profile: perf_event_open: No such file or directory", err)
    end
  end)

  it("has --help", function()
    local out, _, code = perfev_profile("--help")
    assert.equal(0, code)
    for _, o in ipairs { "%-e", "%-%-event", "%-F", "%-%-freq", "%-c", "%-%-count", "%-%-native", "%-o", "script" } do
      assert.matches(o, out)
    end
  end)
end)
