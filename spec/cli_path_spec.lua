-- The perfev command as a user meets it: installed under a prefix it finds
-- its own modules with no LUA_PATH; --version and `help`; Ctrl-C ends record
-- and profile quietly with status 130 after writing what they measured; a
-- core built for another Lua says so.
local u = require "spec.support.util"

local LUA = u.lua_interpreter()
local ROOT = u.trim(u.sh("pwd"))
local BIN = ROOT .. "/bin/perfev"
local ENV = u.lua_env()
local UNSET = "env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 -u LUA_PATH_5_3 -u LUA_CPATH_5_3 "
-- a Lua program that runs for about `s` seconds of CPU
local BUSY = [[local s = tonumber(arg[1]) local t0 = os.clock() local function f(n)
  if n < 2 then return n end return f(n - 1) + f(n - 2) end
while os.clock() - t0 < s do f(18) end]]

-- run(cmd) -> stdout and stderr together, exit status
local function run(cmd)
  local out = u.sh(cmd .. " 2>&1; echo \"exit=$?\"")
  return (out:gsub("exit=%d+%s*$", "")), tonumber(out:match("exit=(%d+)%s*$"))
end

local function perfev(args) return ENV .. LUA .. " " .. BIN .. " " .. args end

describe("the perfev command on the user's path", function()
  local dir
  before_each(function() dir = u.tmpdir() end)
  after_each(function() u.rmdir(dir) end)

  it("runs installed under a prefix with no LUA_PATH #slow", function()
    local args = (os.getenv("PERFEV_MAKE_ARGS") or "") .. " PREFIX=" .. dir .. "/prefix"
    local out, status = run("make -s install " .. args)
    assert.are.equal(0, status, out)
    out, status = run("cd / && " .. UNSET .. dir .. "/prefix/bin/perfev --version")
    assert.are.equal(0, status, out)
    -- the modules and the core it reports are the prefix's
    assert.truthy(out:match("^perfev %d+%.%d+%.%d+ %("), out)
    assert.truthy(out:find("modules: " .. dir .. "/prefix/share/lua/", 1, true), out)
    assert.truthy(out:find("core: " .. dir .. "/prefix/lib/lua/", 1, true), out)
    out, status = run("cd / && " .. UNSET .. dir .. "/prefix/bin/perfev list sw")
    assert.are.equal(0, status, out)
    assert.truthy(out:find("cpu-clock", 1, true), out)
  end)

  it("prints its version, and help for a command", function()
    local out, status = run(perfev("--version"))
    assert.are.equal(0, status, out)
    assert.truthy(out:match("^perfev 0%.%d+%.%d+ %("), out)
    local help
    help, status = run(perfev("help stat"))
    assert.are.equal(0, status, help)
    assert.truthy(help:find("Usage: perfev stat", 1, true), help)
    assert.are.equal(help, (run(perfev("stat --help"))))
    out, status = run(perfev("help nosuch"))
    assert.are.equal(129, status)
    assert.truthy(out:find("unknown command 'nosuch'", 1, true), out)
    out, status = run(perfev(""))
    assert.are.equal(129, status)
    assert.truthy(out:find("a command is required", 1, true), out)
  end)

  it("passes the options after the script to the script (perfev profile, record, stat)", function()
    local f = assert(io.open(dir .. "/args.lua", "w"))
    f:write('local o = io.open(arg[0] .. ".out", "w") o:write(table.concat(arg, " ")) o:close()')
    f:close()
    for _, c in ipairs { "profile -o p.folded", "record -o r.data", "stat -e task-clock" } do
      os.remove(dir .. "/args.lua.out")
      local out, status = run("cd " .. dir .. " && " .. perfev(c .. " args.lua -i x.data --stdio -v"))
      assert.are.equal(0, status, c .. ": " .. out)
      assert.are.equal("-i x.data --stdio -v", u.read_file(dir .. "/args.lua.out"), c)
    end
  end)

  describe("Ctrl-C", function()
    local script
    before_each(function()
      script = dir .. "/busy.lua"
      local f = assert(io.open(script, "w"))
      f:write(BUSY)
      f:close()
    end)

    -- one SIGINT to the process group after 2 s, as a terminal's Ctrl-C does
    local function interrupt(args)
      return run("cd " .. dir .. " && " .. ROOT .. "/tools/ctrl-c.sh 2 " .. perfev(args))
    end

    it("ends perfev record of a command with 130 after writing", function()
      local out, status = interrupt("record -o int.data -- " .. LUA .. " busy.lua 30")
      assert.are.equal(130, status, out)
      local n = tonumber(out:match("Captured and wrote [%d.]+ MB %S+ %((%d+) samples%)"))
      assert.truthy(n and n > 0, out)
      -- the file holds what the summary says
      local pd = require "perfev.perfdata"
      local f = assert(pd.open(dir .. "/int.data"))
      local samples = 0
      for rec in f:records { types = { "sample" } } do if rec.type == "sample" then samples = samples + 1 end end
      f:close()
      assert.are.equal(n, samples)
    end)

    -- a script in perfev's process: on LuaJIT a Ctrl-C that jit.profile's
    -- callback takes is sent again out of it (core.signal_keep): one
    -- Ctrl-C ends the run (3 of 4 such runs were lost before, under load)
    local function interrupt_script(args)
      return interrupt(args)
    end

    it("ends perfev record of a Lua script with 130 after writing", function()
      local out, status = interrupt_script("record -o int.data busy.lua 6")
      assert.are.equal(130, status, out)
      assert.truthy(out:find("Captured and wrote", 1, true), out)
      assert.falsy(out:find("interrupted!", 1, true), out)
    end)

    it("ends perfev profile with 130 after writing, without an error", function()
      local out, status = interrupt_script("profile -o int.folded busy.lua 6")
      assert.are.equal(130, status, out)
      assert.falsy(out:find("interrupted!", 1, true), out)
      local folded = assert(u.read_file(dir .. "/int.folded"))
      assert.truthy(folded:find("f (" .. "busy.lua:1)", 1, true) or folded:find("busy.lua", 1, true), folded)
    end)
  end)

  describe("a script's error", function()
    local ERR = [[local t = {} for i = 1, 200000 do t[i] = tostring(i) end
local function inner() error("boom") end
local function outer() inner() end
outer()]]
    before_each(function()
      local f = assert(io.open(dir .. "/err.lua", "w"))
      f:write(ERR)
      f:close()
    end)

    -- each subcommand: status 1, the error with the script's traceback
    -- (down to its main chunk, none of perfev's frames), what it measured
    for _, c in ipairs { { "stat -e task-clock", "task%-clock" }, { "record -o e.data", "Captured and wrote" },
                         { "profile -o e.folded", "written to e.folded" } } do
      it("perfev " .. c[1] .. ": status 1, the traceback, what was measured", function()
        local out, status = run("cd " .. dir .. " && " .. perfev(c[1] .. " err.lua"))
        assert.are.equal(1, status, out)
        assert.truthy(out:find("err.lua:2: boom\nstack traceback:\n", 1, true), out)
        assert.truthy(out:find("err.lua:3: in ", 1, true), out)
        assert.truthy(out:find("err.lua:4: in main chunk\n", 1, true), out)
        assert.falsy(out:find("perfev/", 1, true), out)
        assert.truthy(out:match(c[2]), out)
      end)
    end

    it("a script that cannot be opened is 127 in every subcommand", function()
      for _, c in ipairs { "stat", "record", "profile" } do
        local out, status = run(perfev(c .. " " .. dir .. "/nosuch.lua"))
        assert.are.equal(127, status, c .. ": " .. out)
        assert.truthy(out:find("nosuch.lua", 1, true), out)
      end
    end)
  end)

  it("says which Lua a core was built for when another Lua loads it", function()
    -- the other runtime's core: LuaJIT's under PUC Lua, and the reverse
    local jit = rawget(_G, "jit") ~= nil
    local other_lua = jit and "lua5.4" or "luajit"
    local core = ROOT .. "/build/perfev/core.so"
    if not u.have(other_lua) then
      pending(other_lua .. " is not installed")
      return
    end
    local cmd = ("cd %s && mkdir -p c/perfev && cp %s c/perfev/ && LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' "
                 .. "LUA_CPATH='c/?.so;;' %s -e 'require \"perfev\"'"):format(dir, core, ROOT, ROOT, other_lua)
    local out, status = run(cmd)
    assert.are_not.equal(0, status)
    local built = jit and "LuaJIT" or "Lua 5%.%d"
    assert.truthy(out:match("core%.so was built for " .. built), out)
    assert.truthy(out:find("rebuild it for this Lua", 1, true), out)
  end)
end)
