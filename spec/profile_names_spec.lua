-- perfev.profile's names (issue 19, items 1-3): a function is named by its
-- definition, whatever called it and however (a local, an alias, an
-- upvalue, a field, a method, pcall, coroutine.wrap, recursion, a tail
-- call), one row per function; perfev's own frames are never between the
-- user's. On LuaJIT with the compiler on and off, each engine, and on PUC
-- Lua. debug.getinfo's "n" is the caller's name for the callee, and on
-- LuaJIT after a tail call the name of the call that made the function
-- making it: a parser's num, str and arr were all named `value`.
local shell = require "spec.support.shell"
local u = require "spec.support.util"
local perfev = require "perfev"
local data = require "perfev.profile.data"

local JIT = rawget(_G, "jit")

-- Each function defined on its own line, the name it must be shown by
-- after "-->" (read by the spec, independently of perfev; "a|b": either,
-- for the function defined without a name, which an engine may name by
-- the local of its caller that holds it). Each one spins
-- in its own loop: it is the leaf of its samples.
local PROGRAM = [[
local N, F = ...
local M, Obj = {}, {}
Obj.__index = Obj
local function by_local(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end --> by_local
local function by_upvalue(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end --> by_upvalue
function M.by_field(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end --> by_field
function Obj:by_method(n) local s = 0 for i = 1, n do s = s + i % 11 end return s + #self end --> by_method
M.assigned = function(n) local s = 0 for i = 1, n do s = s + i % 13 end return s end --> assigned
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end --> fib
local function tail_leaf(n) local s = 0 for i = 1, n do s = s + i % 9 end return s end --> tail_leaf
local function tail_mid(n) return tail_leaf(n) end --> tail_mid
local function tail_top(n) return tail_mid(n) end --> tail_top
local function via_upvalue(n) local r = by_upvalue(n) return r end --> via_upvalue
local function gen_body() --> gen_body
  while true do local s = 0 for i = 1, N do s = s + i % 19 end coroutine.yield(s) end
end
local alias, t, obj = by_local, { f = M.by_field }, setmetatable({}, Obj)
return function(rounds) --> <anonymous>|program
  -- made while profiling (coroutine.wrap is perfev's then)
  local gen = coroutine.wrap(function() --> gen
    while true do local s = 0 for i = 1, N do s = s + i % 17 end coroutine.yield(s) end
  end)
  local gen2 = coroutine.wrap(gen_body)
  for _ = 1, rounds do
    by_local(N) alias(N) via_upvalue(N) M.by_field(N) t.f(N) obj:by_method(N) Obj.by_method(obj, N)
    M.assigned(N) fib(F) tail_top(N) gen() gen2() pcall(by_local, N)
  end
end
]]

-- the leaves the program's samples must show (each spins)
local LEAVES = { "by_local", "by_upvalue", "by_field", "by_method", "assigned", "fib", "tail_leaf",
                 "gen", "gen_body" }

-- linedefined -> the name written after "-->"
local function expected_names()
  local names, n = {}, 0
  for line in (PROGRAM):gmatch("([^\n]*)\n") do
    n = n + 1
    names[n] = line:match("%-%->%s*(%S+)%s*$")
  end
  return names
end

local function own_source(src)
  return src:match("lua/perfev/.*%.lua$") ~= nil or src:match("perfev/profile/[%w_]+%.lua$") ~= nil
end

-- Checks a profile of the program at path: every frame of the program
-- named as its definition says, one row per function, every leaf seen,
-- no perfev frame in a stack but one [perfev] leaf. Returns the share of
-- [perfev] leaves.
local function check(pr, path, what)
  local want = expected_names()
  local seen, own = {}, 0
  assert.is_true(pr.samples >= 50, what .. ": too few samples: " .. pr.samples)
  for _, s in ipairs(pr.stacks) do
    local labels = table.concat(data.labels(pr, s), ";")
    for i, fid in ipairs(s.frames) do
      local f = pr.frames[fid]
      assert.is_false(own_source(f.source or ""), what .. ": perfev's frame in " .. labels)
      if f.what == "perfev" then
        assert.equal(#s.frames, i, what .. ": [perfev] not the leaf in " .. labels)
        own = own + s.weight
      end
      if f.source == path and f.what == "Lua" then
        local name = want[f.linedefined]
        assert(name, what .. ": a function defined at a line the program does not mark: " .. f.linedefined)
        local okname = false
        for n in name:gmatch("[^|]+") do okname = okname or n == f.name end
        assert(okname, ("%s: the function of line %d is named %s, not %s, in %s")
                       :format(what, f.linedefined, f.name, name, labels))
        if i == #s.frames then seen[name] = true end
        if name == "gen" or name == "gen_body" then
          -- under the wrap function that ran it, named as the C function it is
          assert.equal("wrap [C]", pr.funcs[pr.frames[s.frames[i - 1]].func].label, what .. ": " .. labels)
        end
      end
    end
  end
  -- one function, one row
  local rows = {}
  for _, r in ipairs(data.by_function(pr)) do
    if r.func.source == path and r.func.what == "Lua" then
      assert.is_nil(rows[r.func.linedefined], what .. ": two rows for line " .. r.func.linedefined)
      rows[r.func.linedefined] = r.label
    end
  end
  for _, name in ipairs(LEAVES) do
    assert.is_true(seen[name] == true, what .. ": no sample of " .. name)
  end
  return own / pr.weight
end

describe("perfev.profile's function names", function()
  local dir, path
  setup(function()
    dir = shell.tmpdir()
    path = dir .. "/program.lua"
    local f = assert(io.open(path, "w"))
    f:write(PROGRAM)
    f:close()
  end)
  teardown(function()
    if JIT then JIT.on() end
    shell.rmdir(dir)
  end)

  -- (runtime, compiler, engine): LuaJIT's engine "jit" is its default with
  -- the compiler on, "hook" with it off; each is run both ways
  local runs
  if JIT then
    runs = { { "on", "jit" }, { "off", "hook" }, { "off", "jit" }, { "on", "hook" } }
  else
    runs = { { nil, "hook" } }
  end
  for _, run in ipairs(runs) do
    local compiler, engine = run[1], run[2]
    local what = ("%s, engine %s"):format(compiler and ("LuaJIT, compiler " .. compiler) or _VERSION, engine)
    it("names every function by its definition, and no perfev frame between the user's (" .. what .. ")", function()
      if compiler == "off" then JIT.off() elseif compiler == "on" then JIT.on() end
      local program = assert(loadfile(path))(JIT and 400000 or 100000, JIT and 25 or 20)
      local p = assert(perfev.profile { engine = engine, period = 1000000 })
      local ok, err = pcall(p.run, p, program, JIT and 30 or 20)
      if JIT then JIT.on() end
      assert(ok, err)
      local pr = p:profile()
      local own = check(pr, path, what)
      print(("\n  %s: %d samples, [perfev] %.1f%%"):format(what, pr.samples, 100 * own))
      p:close()
    end)
  end

  it("lists no frame that no sample holds (speedscope)", function()
    local cjson = require "cjson"
    local program = assert(loadfile(path))(JIT and 400000 or 100000, JIT and 25 or 20)
    local p = assert(perfev.profile { period = 1000000 })
    p:run(program, 2)
    local doc = cjson.decode(p:format("speedscope"))
    local used = {}
    for _, s in ipairs(doc.profiles[1].samples) do
      for _, i in ipairs(s) do used[i + 1] = true end
    end
    for i, f in ipairs(doc.shared.frames) do
      assert.is_true(used[i] == true, "a frame no sample uses: " .. f.name)
      assert.is_false(own_source(f.file or ""), "perfev's frame listed: " .. f.name)
    end
    p:close()
  end)

  it("folds perfev's own work into one [perfev] leaf where the user's code called it", function()
    -- p:pause() and p:resume() from the profiled code itself, as the
    -- embedding example's frame loop does: a sample taken in them (the
    -- event enabled again, its first overflow) is perfev's
    local p = assert(perfev.profile { period = 100000 })
    local function busy() local s = 0 for i = 1, JIT and 1e6 or 2e5 do s = s + i % 7 end return s end
    p:start()
    for _ = 1, 100 do busy() p:pause() p:resume() end
    p:stop()
    local pr = p:profile()
    print(("\n  pause/resume: %d samples, [perfev] %.1f%%"):format(pr.samples, 100 * data.share(pr, data.OWN)))
    for _, s in ipairs(pr.stacks) do
      local labels = table.concat(data.labels(pr, s), ";")
      for i, fid in ipairs(s.frames) do
        local f = pr.frames[fid]
        assert.is_false(own_source(f.source or ""), "perfev's frame in " .. labels)
        if f.what == "perfev" then assert.equal(#s.frames, i, labels) end
      end
    end
    p:close()
  end)

  it("folds perfev's frames: one [perfev] frame, the leaf with the C functions it called", function()
    -- the stacks an engine gives when a sample lands in perfev's code: in
    -- p:resume's enable (the embedding example's `resume (hook.lua:113);
    -- enable [C]`), in the jit engine's wrap closure between the user's
    -- frames (`simulate;<anonymous> (jit.lua:247);pack;[GC]`)
    local hook = debug.getinfo(require("perfev.profile.hook").new, "S").short_src
    local jitsrc = hook:gsub("hook%.lua$", "jit.lua")
    local raw = {
      frames = {
        { what = "main", source = "app.lua", linedefined = 0, line = 9 },
        { what = "Lua", name = "simulate", source = "app.lua", linedefined = 3, line = 4 },
        { what = "Lua", name = "resume", source = hook, linedefined = 112, line = 113 },
        { what = "C", name = "enable", source = "[C]", linedefined = -1, line = -1 },
        { what = "Lua", name = "wrapped", source = jitsrc, linedefined = 247, line = 250 },
        { what = "Lua", name = "pack", source = jitsrc, linedefined = 24, line = 24 },
        { what = "C", name = "[GC]", source = "", linedefined = -1, line = -1 },
        { what = "Lua", name = "step", source = "app.lua", linedefined = 5, line = 6 },
      },
      stacks = {
        { 1, 2, 3, 4, weight = 1, samples = 1 },
        { 1, 2, 5, 6, 7, weight = 2, samples = 2 },
        { 1, 2, 5, 8, weight = 4, samples = 4 },
      },
    }
    local pr = data.build(raw, { event = "cpu-clock" })
    local got = {}
    for _, s in ipairs(pr.stacks) do
      got[#got + 1] = table.concat(data.labels(pr, s), ";"):gsub(" %(app%.lua:?%d*%)", "")
    end
    table.sort(got)
    -- the first two are one stack now: merged, their weights summed
    assert.same({ "main chunk;simulate;[perfev]", "main chunk;simulate;[perfev];step" }, got)
    local w = {}
    for _, s in ipairs(pr.stacks) do w[#s.frames] = s.weight end
    assert.same({ [3] = 3, [4] = 4 }, w)
    -- only the functions the stacks use listed
    local labels = {}
    for _, f in ipairs(pr.funcs) do labels[#labels + 1] = f.label end
    table.sort(labels)
    assert.same({ "[perfev]", "main chunk (app.lua)", "simulate (app.lua:3)", "step (app.lua:5)" }, labels)
  end)

  it("shows a VM state (LuaJIT's [GC], [JIT compiler], an attached target's [trace N]) by its name", function()
    local raw = {
      frames = {
        { what = "main", source = "app.lua", linedefined = 0, line = 9 },
        { what = "C", name = "[GC]", source = "", linedefined = -1, line = -1 },
        { what = "C", name = "[trace 3]", source = "", linedefined = -1, line = -1 },
        { what = "C", name = "concat", source = "[C]", linedefined = -1, line = -1 },
      },
      stacks = { { 1, 2, weight = 1, samples = 1 }, { 1, 3, weight = 1, samples = 1 },
                 { 1, 4, weight = 1, samples = 1 } },
    }
    local pr = data.build(raw, { event = "cpu-clock" })
    local got = {}
    for _, s in ipairs(pr.stacks) do got[#got + 1] = table.concat(data.labels(pr, s), ";") end
    table.sort(got)
    assert.same({ "main chunk (app.lua);[GC]", "main chunk (app.lua);[trace 3]",
                  "main chunk (app.lua);concat [C]" }, got)
  end)

  -- The user's path of issue 19: a parser profiled by `perfev profile`.
  it("names a parser's functions in `perfev profile`'s report, as on PUC Lua", function()
    local parser = dir .. "/parser.lua"
    local f = assert(io.open(parser, "w"))
    f:write([==[
local num, str, arr, value
function num(s, i)
  local j = i while s:byte(j) and s:byte(j) >= 48 and s:byte(j) <= 57 do j = j + 1 end
  return tonumber(s:sub(i, j - 1)), j
end
function str(s, i) local j = s:find('"', i + 1, true) return s:sub(i + 1, j - 1), j + 1 end
local function skip(s, i) while s:byte(i) == 32 or s:byte(i) == 44 do i = i + 1 end return i end
function arr(s, i)
  local t = {} i = i + 1
  while s:byte(i) ~= 93 do local v v, i = value(s, i) t[#t + 1] = v i = skip(s, i) end
  return t, i + 1
end
function value(s, i)
  local c = s:byte(i)
  if c == 91 then return arr(s, i) elseif c == 34 then return str(s, i) else return num(s, i) end
end
local parts = {}
for k = 1, 200 do parts[#parts + 1] = (k % 3 == 0) and '"abcdefgh"' or tostring(k * 12345) end
local doc = "[" .. table.concat(parts, ",") .. ",[1,2,[3,4]]]"
for _ = 1, tonumber(arg[1]) do value(doc, 1) end
]==])
    f:close()
    local out = dir .. "/p.folded"
    local cmd = ("%s%s bin/perfev profile -c 500000 -o %s %s %d 2>&1"):format(
      u.lua_env(), u.lua_interpreter(), out, parser, JIT and 30000 or 3000)
    local msg, ok = u.sh(cmd)
    assert(ok, msg)
    local folded = assert(shell.read_file(out))
    local rows = {}
    for stack in folded:gmatch("([^\n]+) %d+\n") do
      for label in stack:gmatch("[^;]+") do
        local name, line = label:match("^(%S+) %(.-parser%.lua:(%d+)%)$")
        if name then
          rows[line] = rows[line] or {}
          rows[line][name] = true
        end
      end
    end
    local want = { ["2"] = "num", ["6"] = "str", ["7"] = "skip", ["8"] = "arr", ["13"] = "value" }
    for line, names in pairs(rows) do
      local list = {}
      for n in pairs(names) do list[#list + 1] = n end
      assert.same({ want[line] }, list, "the function of parser.lua:" .. line)
    end
    assert.is_truthy(rows["2"], "no sample in num:\n" .. folded)
    assert.is_truthy(rows["8"], "no sample in arr:\n" .. folded)
  end)
end)
