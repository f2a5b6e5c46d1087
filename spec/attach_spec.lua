-- perfev.attach's engine and safety (lua/perfev/attach/init.lua,
-- csrc/attach/tracer.c, attach/wait.c, attach/mem.c): refusals, a target
-- that forks, exits or starts threads while attached, perfev killed with
-- SIGKILL mid-run, and `perfev profile -p`. The stacks here come from a
-- trivial reader (spec/support/attach_reader.lua: one frame named after the
-- file mapped at the sampled instruction); the readers' specs check real
-- Lua stacks.
local perfev = require "perfev"
local core = require "perfev.core"
local util = require "spec.support.util"
local shell = require "spec.support.shell"

local reader = require "spec.support.attach_reader"

local function tmpfile(text)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  os.execute("chmod 0644 " .. path)
  return path
end

-- A Lua snippet: waits until a tracer holds this process (then prints
-- "traced"), or until none does (prints "untraced").
local TRACED = [[
local function tracer()
  local f = io.open("/proc/self/status") local s = f:read("a") f:close()
  return tonumber(s:match("TracerPid:%s*(%d+)"))
end
local function wait_traced(want)
  local t0 = os.time()
  while (tracer() ~= 0) ~= want do
    if os.time() - t0 > 20 then io.write("timeout\n") os.exit(3) end
  end
  io.write(want and "traced\n" or "untraced\n") io.flush()
end
-- the block checksum the spec recomputes
local function block(i)
  local s = 0
  for j = 1, 100000 do s = (s * 31 + j + i) % 1000000007 end
  return s
end
]]

local function block(i)
  local s = 0
  for j = 1, 100000 do s = (s * 31 + j + i) % 1000000007 end
  return s
end

-- Starts code in a child Lua in the background; returns its pid and the
-- file its output goes to.
local function start(code)
  local script, out = tmpfile(TRACED .. code), os.tmpname()
  local pid = tonumber(shell.trim(shell.sh(("%s%s %s > %s 2>&1 & echo $!")
    :format(util.lua_env(), util.lua_interpreter(), script, out))))
  -- $! is the shell's child, which runs env, which runs Lua: attach once it is Lua
  local lua = core.readlink("/proc/self/exe")
  local t0 = os.time()
  while core.readlink(("/proc/%d/exe"):format(pid)) ~= lua and os.time() - t0 < 10 do os.execute("sleep 0.02") end
  return pid, out, script
end

local function alive(pid)
  local s = shell.read_file(("/proc/%d/status"):format(pid))
  return s and not s:match("State:%s*Z") and s or nil
end

local function wait_for(pred, what)
  local t0 = os.time()
  while not pred() do
    assert(os.time() - t0 < 30, "timed out waiting for " .. what)
    os.execute("sleep 0.05")
  end
end

-- "why=n, ..." of an attach profile's dropped samples, for a failure's message
local function reasons(t)
  local out = {}
  for why, n in pairs(t or {}) do out[#out + 1] = why .. "=" .. n end
  return table.concat(out, ", ")
end

local function kill(pid) if pid and alive(pid) then os.execute("kill -9 " .. pid .. " 2>/dev/null") end end

local function attach(opts)
  opts.reader = opts.reader or reader
  return perfev.attach(opts)
end

describe("perfev.attach", function()
  if not util.is_root() then
    pending("needs root (ptrace of another process and perf events on it), skipped")
    return
  end

  it("refuses a pid that does not exist, saying so", function()
    local p, msg, errno = perfev.attach { pid = 999999, reader = reader }
    assert.is_nil(p)
    assert.matches("no process 999999", msg)
    assert.equals(core.ERRNO.ESRCH, errno)
  end)

  it("raises at the caller's line for a wrong option", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() perfev.attach { pid = 1, frequency = 9 } end)
    assert.is_false(ok)
    assert.equals(("spec/attach_spec.lua:%d: perfev.attach: unknown option 'frequency' (did you mean 'freq'?)")
                  :format(line), err)
    assert.error_matches(function() perfev.attach { duration_ms = 1000 } end, "option 'pid' is required")
    assert.error_matches(function() perfev.attach { pid = util.pid() } end, "is this process")
  end)

  it("refuses, as a user who may not trace the process, with the kernel's reason and what to do", function()
    local pid, out = start("wait_traced(true) io.write('bad\\n')")
    finally(function() kill(pid) os.remove(out) end)
    local res, why = util.run_as_nobody(([[
      package.path = "./?.lua;" .. package.path
      local p, msg, errno = require("perfev").attach { pid = %d, reader = require "spec.support.attach_reader" }
      print(p, errno) print(msg)
    ]]):format(pid))
    if not res then pending(why) return end
    assert.matches("nil\t" .. core.ERRNO.EPERM, res, 1, true)
    assert.matches("Operation not permitted", res, 1, true)
    assert.matches("CAP_SYS_PTRACE", res, 1, true)
    assert.truthy(alive(pid))
    assert.equals("", shell.read_file(out))     -- it was never traced
  end)

  it("samples a running process's threads, the new ones too, and lets them go on", function()
    local pid, out = start([[
      local th = require "threads"
      wait_traced(true)
      local t = th.start(600)      -- a thread started while traced
      t:go()
      io.write("joined\n") io.flush()
      wait_traced(false)
      io.write("done\n")
    ]])
    finally(function() kill(pid) os.remove(out) end)
    local tids = {}
    local p, msg = attach { pid = pid, freq = 199, duration_ms = 30000, on_sample = function(tid, frames)
      if frames then tids[tid] = frames[1].name end
      return tid ~= pid and tids[tid] ~= nil    -- ends the run
    end, event = "task-clock" }
    assert(p, msg)
    assert.truthy(p.attach.threads >= 2)
    local in_helper = 0
    -- the new thread's samples land in threads.so's loop or in libc's clock
    -- it reads (which of them is the machine's luck): any is the thread's
    for tid in pairs(tids) do
      if tid ~= pid then in_helper = in_helper + 1 end
    end
    assert.truthy(in_helper >= 1, "no sample of the new thread: "
                  .. tostring(p:format("folded")) .. " " .. tostring(p.attach.ended))
    wait_for(function() return not alive(pid) end, "the target's end")
    assert.equals("traced\njoined\nuntraced\ndone\n", shell.read_file(out))
  end)

  it("joins the native frames of each sample (native = true), named from the target's files", function()
    -- time in C: string.rep's copies in libc (LuaJIT compiles block() into code no file maps)
    local pid, out = start("wait_traced(true) local t = {} while true do t[1] = ('x'):rep(1e6) end")
    finally(function() kill(pid) os.remove(out) end)
    local p, msg = attach { pid = pid, freq = 199, native = true, duration_ms = 1000 }
    assert(p, msg)
    local pr = p:profile()
    local a = p.attach
    assert.truthy(pr.samples >= 1, ("samples %d, dropped %d, outside %d, ended %s, reasons %s")
                  :format(a.samples, a.dropped, a.outside, tostring(a.ended), reasons(a.reasons)))
    local exe = core.readlink("/proc/self/exe"):match("[^/]*$")
    local named = 0
    for _, f in ipairs(pr.frames) do
      -- the interpreter's own frames: named, or "[lua5.4 (stripped)]" as Debian ships it
      if f.what == "native" and (f.source == exe or f.source:match("^lib")) then named = named + 1 end
    end
    assert.truthy(named >= 1, p:format("folded"))
    assert.truthy(alive(pid))
  end)

  it("ends when the target exits, and the target's exit is its own", function()
    local pid, out = start([[
      wait_traced(true)
      for i = 1, 100 do io.write(block(i), "\n") end
      io.flush()
      local t0 = os.clock()   -- 50 ms of CPU time: samples to take (LuaJIT wrote the blocks in under 1 ms)
      while os.clock() - t0 < 0.05 do end
      os.exit(7)
    ]])
    finally(function() kill(pid) os.remove(out) end)
    local p, msg = attach { pid = pid, freq = 999, duration_ms = 60000 }
    assert(p, msg)
    assert.equals("exited", p.attach.ended)
    assert.equals(7, p.attach.exit_code)
    local want = { "traced" }
    for i = 1, 100 do want[#want + 1] = tostring(block(i)) end
    assert.equals(table.concat(want, "\n") .. "\n", shell.read_file(out))
    assert.truthy(p:profile().samples >= 1)
  end)

  it("keeps a target stopped by SIGSTOP stopped, detaches, and it goes on at SIGCONT", function()
    local pid, out = start([[
      wait_traced(true)
      for i = 1, 60 do io.write(block(i), "\n") io.flush() end
      wait_traced(false)
    ]])
    finally(function() kill(pid) os.remove(out) end)
    local stopped = false
    -- (stopped once it saw itself traced: a SIGSTOP before left it waiting for
    -- a tracer that had gone, under ASan on the loaded VM)
    local p, msg = attach { pid = pid, freq = 999, duration_ms = 1500, on_sample = function()
      if not stopped and (shell.read_file(out) or ""):find("traced") then
        stopped = true
        os.execute("kill -STOP " .. pid)
      end
    end }
    assert(p, msg)
    assert.is_true(stopped)
    -- detached, it goes back to the stop of its own SIGSTOP (the kernel wakes it to re-enter it)
    wait_for(function() return alive(pid):match("State:%s*T") end, "the target stopped by its SIGSTOP")
    assert.matches("TracerPid:%s*0\n", alive(pid))
    local before = shell.read_file(out)
    os.execute("sleep 0.3")
    assert.equals(before, shell.read_file(out))       -- no progress while stopped
    os.execute("kill -CONT " .. pid)
    wait_for(function() return not alive(pid) end, "the target's end")
    local want = { "traced" }
    for i = 1, 60 do want[#want + 1] = tostring(block(i)) end
    want[#want + 1] = "untraced"
    assert.equals(table.concat(want, "\n") .. "\n", shell.read_file(out))
  end)

  it("leaves a child the target forks untraced and unharmed", function()
    local child = tmpfile("local s = 0 for j = 1, 3000000 do s = (s * 31 + j) % 1000000007 end print(s)")
    local pid, out = start(([[
      wait_traced(true)
      local f = io.popen("%s %s")   -- fork and exec while traced
      local got = f:read("a")
      io.write("child ", got) io.flush()
      for i = 1, 10 do io.write(block(i), "\n") end
      io.flush()
      wait_traced(false)
    ]]):format(util.lua_interpreter(), child))
    finally(function() kill(pid) os.remove(out) os.remove(child) end)
    local p, msg = attach { pid = pid, freq = 999, duration_ms = 60000, on_sample = function()
      local _, lines = (shell.read_file(out) or ""):gsub("\n", "")
      return lines >= 12                      -- traced, child, 10 blocks: detach
    end }
    assert(p, msg)
    local s = 0
    for j = 1, 3000000 do s = (s * 31 + j) % 1000000007 end
    wait_for(function() return not alive(pid) end, "the target's end")
    local want = { "traced", "child " .. s }
    for i = 1, 10 do want[#want + 1] = tostring(block(i)) end
    want[#want + 1] = "untraced"
    assert.equals(table.concat(want, "\n") .. "\n", shell.read_file(out))
    assert.equals(1, p.attach.threads)
  end)

  it("leaves the target running, its output unchanged, when perfev is killed with SIGKILL mid-run", function()
    local stop = os.tmpname()
    os.remove(stop)
    local pid, out = start(([[
      local seen, i = false, 0
      local function stop() local f = io.open(%q) if f then f:close() end return f ~= nil end
      while not stop() do
        i = i + 1
        io.write(i, " ", block(i), "\n") io.flush()
      end
      io.write("done\n")
    ]]):format(stop))
    local perfev_out = os.tmpname()
    local cli = shell.trim(shell.sh(("%s%s -e %s bin/perfev profile -p %d -F 999 -o %s.folded > %s 2>&1 & echo $!")
      :format(util.lua_env(), util.lua_interpreter(),
              shell.quote('package.path="./?.lua;"..package.path '
                          .. 'require("perfev.attach").READERS={"spec.support.attach_reader"}'),
              pid, perfev_out, perfev_out)))
    finally(function() kill(pid) kill(tonumber(cli)) os.remove(out) os.remove(stop) os.remove(perfev_out) end)
    local function tracer()
      local s = alive(pid)
      return s and tonumber(s:match("TracerPid:%s*(%d+)")) or 0
    end
    wait_for(function() return tracer() ~= 0 end, "perfev to attach")
    os.execute("sleep 0.5")                  -- samples taken meanwhile
    os.execute("kill -9 " .. cli)
    wait_for(function() return tracer() == 0 end, "the kernel to detach the killed tracer")
    os.execute("sleep 0.3")                  -- it runs on untraced
    local f = assert(io.open(stop, "w")) f:close()
    wait_for(function() return not alive(pid) end, "the target's end")
    local text = shell.read_file(out)
    local n = 0
    for line in text:gmatch("[^\n]+") do
      if line ~= "done" then
        n = n + 1
        assert.equals(("%d %d"):format(n, block(n)), line)
      end
    end
    assert.truthy(n >= 2)
    assert.matches("\ndone\n$", text)
  end)
end)

describe("perfev.attach.target", function()
  local target = require "perfev.attach.target"

  it("reads memory, the same through the page cache of a hold and across its pages", function()
    local t = assert(target.new(util.pid()))
    local exe = core.readlink("/proc/self/exe")
    assert.equals(exe, t.exe)
    local m
    for _, x in ipairs(t.maps) do
      if x.path == exe and x.offset == 0 then m = x break end
    end
    assert(m, "the executable's first mapping")
    assert.equals("\127ELF", t:read(m.lo, 4))
    assert.equals(2, t:u8(m.lo + 4))                    -- ELFCLASS64
    local direct = assert(t:read(m.lo + target.PAGE - 6, 12))
    local lo, hi = t:u64parts(m.lo + 24)                -- e_entry
    t:hold()
    assert.equals(direct, t:read(m.lo + target.PAGE - 6, 12))
    assert.equals("\127ELF", t:read(m.lo, 4))
    local lo2, hi2 = t:u64parts(m.lo + 24)
    assert.equals(lo, lo2)
    assert.equals(hi, hi2)
    assert.is_nil(t:read(0, 8))                          -- page 0 is never mapped
    t:flush()
    local s, msg, errno = t:read(0, 8)
    assert.is_nil(s)
    assert.matches("not mapped", msg)
    assert.equals(core.ERRNO.EFAULT, errno)
    -- e_ident after the magic: class 64, little-endian, version 1, OS ABI 0
    assert.equals("\2\1\1", t:cstring(m.lo + 4, 8))
    assert.is_nil(t:cstring(m.lo, 3))                  -- no NUL within the bound
  end)

  it("finds a function symbol of a mapped object at the address the process maps it", function()
    local t = assert(target.new(util.pid()))
    local addr = t:symbol("lua_pushinteger") or t:symbol("lua_pushnumber")
    assert.truthy(addr, "a Lua API function in the interpreter's .dynsym")
    local m = t:map_of(addr)
    assert.truthy(m and m.perms:sub(3, 3) == "x", "in an executable mapping")
    assert.is_nil(t:symbol("no_such_function_here"))
  end)
end)

describe("perfev profile -p", function()
  if not util.is_root() then
    pending("needs root, skipped")
    return
  end
  local PRE = shell.quote('package.path="./?.lua;"..package.path '
                          .. 'require("perfev.attach").READERS={"spec.support.attach_reader"}')
  local function cli(args)
    return shell.sh(("%s%s -e %s bin/perfev profile %s 2>&1; echo \"rc=$?\"")
      :format(util.lua_env(), util.lua_interpreter(), PRE, args))
  end

  it("writes the profile of a running process, in the format of the file's name", function()
    local pid, out = start("wait_traced(true) wait_traced(false)")
    local folded = os.tmpname() .. ".folded"
    finally(function() kill(pid) os.remove(out) os.remove(folded) end)
    local res = cli(("-p %d -d 1 -F 199 -o %s"):format(pid, folded))
    assert.matches("rc=0", res, 1, true)
    assert.matches("samples", res, 1, true)
    local text = assert(shell.read_file(folded))
    local total = 0
    for stack, w in text:gmatch("([^\n]+) (%d+)\n") do
      assert.truthy(#stack > 0)
      total = total + tonumber(w)
    end
    assert.truthy(total > 0)
    wait_for(function() return not alive(pid) end, "the target's end")
    assert.equals("traced\nuntraced\n", shell.read_file(out))
  end)

  it("refuses -p with a script, and a missing process", function()
    local res = cli("-p 1 x.lua")
    assert.matches("give -p or a script, not both", res, 1, true)
    assert.matches("rc=1", res, 1, true)
    res = cli("-p 999999 -d 1")
    assert.matches("no process 999999", res, 1, true)
    assert.matches("rc=1", res, 1, true)
  end)

  it("ends on Ctrl-C with status 130 after writing the profile", function()
    local pid, out = start("wait_traced(true) wait_traced(false)")
    local txt = os.tmpname() .. ".txt"
    finally(function() kill(pid) os.remove(out) os.remove(txt) end)
    -- the command in the background, SIGINT to it once it traces
    local res = shell.sh(("%s%s -e %s bin/perfev profile -p %d -o %s > /dev/null 2>&1 & c=$!; "
                          .. "while ! grep -q 'TracerPid:[[:space:]]*[1-9]' /proc/%d/status; do sleep 0.05; done; "
                          .. "sleep 0.5; kill -INT $c; wait $c; echo \"rc=$?\"")
      :format(util.lua_env(), util.lua_interpreter(), PRE, pid, txt, pid))
    assert.matches("rc=130", res, 1, true)
    local text = shell.read_file(txt)
    assert.matches("# perfev profile: Lua functions on event 'cpu%-clock' %(99 Hz%)", text)
    assert.matches("# Attached to process " .. pid .. " %(", text)
    wait_for(function() return not alive(pid) end, "the target's end")
    assert.equals("traced\nuntraced\n", shell.read_file(out))
  end)
end)
