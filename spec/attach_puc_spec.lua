-- The PUC Lua reader (perfev.attach.puc) against running lua5.4, lua5.3
-- and lua5.1 processes, as Debian ships them (stripped, no debug symbols):
-- a workload of two functions costing 1:3 gives 25 % / 75 % +- 5 %, the
-- frames' source, linedefined and currentline equal what debug.getinfo
-- printed inside the target, a producer coroutine shows under its
-- resumer's coroutine.resume frame, short_src follows each version's
-- luaO_chunkid, and a process that is not PUC Lua is refused with a reason.
local u = require "spec.support.util"
local attach_target = require "perfev.attach.target"
local puc = require "perfev.attach.puc"
local calibrate = require "spec.support.calibrate"

-- 1200 samples: a share's binomial standard deviation is 1.25 %, the +-5 %
-- bound 4 of them (six runs of 800 gave cheap 22.1-26.6 %, its share by
-- os.clock inside the target being 25.6 %)
local SAMPLES = 1200

-- THE DRIVER: profile_pid(pid, n) profiles process pid through the engine,
-- perfev.attach (cpu-clock, a period of 2 ms, until n samples), and
-- returns the raw profile shape the engine feeds (perfev.profile.data:
-- frames, stacks of frame ids root first with weight and samples; here each
-- stack also says its thread, tid, from on_sample; each sample's weight 1)
-- with the samples outside Lua and those dropped counted (reasons: why ->
-- count), the runtime and the reader's states, or nil, why (refused).
local function profile_pid(pid, n)
  local attach = require "perfev.attach"
  local prof = { frames = {}, stacks = {}, weight = 0, samples = 0 }
  local frame_ids, stack_ids, seen = {}, {}, 0
  local function add(tid, frames)
    local ids = {}
    for i, f in ipairs(frames) do
      local key = table.concat({ f.what, tostring(f.name), f.source, f.line, f.linedefined }, "\0")
      if not frame_ids[key] then
        prof.frames[#prof.frames + 1] = f
        frame_ids[key] = #prof.frames
      end
      ids[i] = frame_ids[key]
    end
    local skey = tid .. ":" .. table.concat(ids, ",")
    local s = stack_ids[skey]
    if not s then
      s = { frames = ids, weight = 0, samples = 0, tid = tid }
      prof.stacks[#prof.stacks + 1] = s
      stack_ids[skey] = s
    end
    s.weight, s.samples = s.weight + 1, s.samples + 1
    prof.weight, prof.samples = prof.weight + 1, prof.samples + 1
  end
  -- a fixed period (2 ms of CPU time): each sample stands for the same time
  local p, why = attach.attach { pid = pid, event = "cpu-clock", period = 2000000, duration_ms = 120000,
                                 on_sample = function(tid, frames)
                                   seen = seen + 1
                                   if frames and #frames > 0 then add(tid, frames) end
                                   return seen >= n
                                 end }
  if not p then return nil, why end
  prof.runtime, prof.dropped, prof.outside = p.attach.runtime, p.attach.dropped, p.attach.outside
  prof.reasons = p.attach.reasons
  prof.states = p.attach.states
  return prof
end


-- Workloads ------------------------------------------------------------------

-- A leaf function on one line, so that the line a sample stops at is its
-- own whatever instruction last saved the pc; called with probe, it prints
-- (through report) debug.getinfo of itself and of its caller.
local REPORT = [[
local function report(name)
  local a, b = debug.getinfo(2, "Sl"), debug.getinfo(3, "Sl")
  -- one write of the whole line: two threads of a C host print at once,
  -- and print writes each argument apart
  io.write(table.concat({ "info " .. name, a.short_src, a.linedefined, a.currentline, b.currentline }, "\t")
           .. "\n")
  io.flush()
end
]] .. calibrate.SOURCE .. [[
-- iterations of f (a one_line function) for 20 ms of CPU time: each call
-- lasts ten 2 ms sampling periods
local function calibrate(f) return 20 * per_ms(f) end
]]
local function one_line(name)
  return ("local function %s(n, probe) if probe then report(%q) return 0 end "
          .. "local s = 0 for i = 1, n do s = s + i %% 7 end return s end\n"):format(name, name)
end

-- cheap(n) and dear(3n), called from the main chunk's loop on one line
local WORK = REPORT .. one_line("cheap") .. one_line("dear") .. [[
local N = calibrate(cheap)
io.stdout:setvbuf("no")
local x, round = 0, 0
while true do
  local probe = round == 0
  x = x + cheap(N, probe) + dear(3 * N, probe)
  if probe then io.write("ready\n") io.flush() end
  round = round + 1
end
]]

-- the producer runs in a coroutine, resumed by the main chunk's loop;
-- the consumer (three times the work) in the main chunk
local COROUTINES = REPORT .. one_line("produce") .. one_line("consume") .. [[
local N = calibrate(produce)
local producer = coroutine.create(function(probe)
  while true do probe = coroutine.yield(produce(N, probe)) end
end)
io.stdout:setvbuf("no")
local x, round = 0, 0
while true do
  local probe = round == 0
  local _, v = coroutine.resume(producer, probe)
  x = x + v + consume(3 * N, probe)
  if probe then io.write("ready\n") io.flush() end
  round = round + 1
end
]]

-- A C host linking liblua5.x.so: one Lua state per thread, each running
-- a script; drive(f), a C function, resumes f in a coroutine only the
-- registry holds (no argument or upvalue of the resumer names it).
local HOST_C = [[
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>

static int drive(lua_State *L) {
  lua_State *co;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  co = lua_newthread(L);
  luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  for (;;) {
    int status;
#if LUA_VERSION_NUM >= 504
    int nres;
    status = lua_resume(co, L, 0, &nres);
#elif LUA_VERSION_NUM >= 502
    status = lua_resume(co, L, 0);
#else
    status = lua_resume(co, 0);
#endif
    if (status != LUA_YIELD) return luaL_error(L, "drive: %s", lua_tostring(co, -1));
    lua_settop(co, 0);
  }
}

static void *run(void *path) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_pushcfunction(L, drive);
  lua_setglobal(L, "drive");
  if (luaL_dofile(L, (const char *)path)) fprintf(stderr, "%s\n", lua_tostring(L, -1));
  lua_close(L);
  return NULL;
}

int main(int argc, char **argv) {
  pthread_t t[2];
  int i, n = argc - 1 < 2 ? argc - 1 : 2;
  for (i = 0; i < n; i++) pthread_create(&t[i], NULL, run, argv[i + 1]);
  for (i = 0; i < n; i++) pthread_join(t[i], NULL);
  return 0;
}
]]

-- the host's second state: inner runs in the coroutine drive resumes
local DRIVEN = REPORT .. one_line("inner") .. [[
local N = calibrate(inner)
io.stdout:setvbuf("no")
drive(function()
  local probe = true
  while true do inner(N, probe); if probe then io.write("ready\n") io.flush() end probe = false; coroutine.yield() end
end)
]]

-- The current line of a function of several lines, against Lua's own: a
-- count hook runs every 2 to 9 instructions of body (drawn again at each
-- call, so that it lands on every line); it asks debug.getinfo for
-- body's current line and spins in a call on a line of its own for each of
-- body's lines, so that a sample in spin says (by the hook frame's line)
-- which line Lua saw in body at that moment.
local BODY = {
  "local function body(n)",
  "  local s = 0",
  "  for i = 1, n do",
  "    s = s + i",
  "    s = s % 1000",
  "    s = s * 3",
  "  end",
  "  return s",
  "end",
}
local function lines_workload()
  local out = { "local function spin() local x = 0 for i = 1, 3000 do x = x + i end return x end" }
  local first = #out + 1
  for _, l in ipairs(BODY) do out[#out + 1] = l end
  local hook_line = {}   -- the hook's line of spin() -> body's line it stands for
  out[#out + 1] = "local hook"
  out[#out + 1] = "function hook()"
  out[#out + 1] = "  local l = debug.getinfo(2, 'l').currentline"
  out[#out + 1] = "  if l == nil then return"
  for k = 0, #BODY - 1 do
    out[#out + 1] = ("  elseif l == %d then spin()"):format(first + k)
    hook_line[#out] = first + k
  end
  out[#out + 1] = "  end"
  out[#out + 1] = "  debug.sethook(hook, '', math.random(2, 9))"
  out[#out + 1] = "end"
  out[#out + 1] = "io.stdout:setvbuf('no')"
  out[#out + 1] = "print('ready')"
  out[#out + 1] = "debug.sethook(hook, '', 5)"
  out[#out + 1] = "while true do body(1000) end"
  return table.concat(out, "\n") .. "\n", hook_line, first
end

-- A chunk loaded again and again where the previous one was collected
-- (its Proto mostly at the same address): chunk_a (its code on line 1) run
-- by run_a, chunk_b (on line 2) by run_b, in turn. The reader keeps Protos
-- by address from one sample to the next: a sample must never give one
-- chunk the other's name or line.
local RELOAD = [[
local SRC_A = "local n = ... local s = 0 for i = 1, n do s = s + i % 7 end return s"
local SRC_B = "\nlocal n = ... local s = 0 for i = 1, n do s = s + i % 7 end return s"
local function run_a(f, n) local r = f(n) return r end
local function run_b(f, n) local r = f(n) return r end
io.stdout:setvbuf("no")
print("ready")
local round = 0
while true do
  round = round + 1
  local a = round % 2 == 1
  local f = (loadstring or load)(a and SRC_A or SRC_B, a and "=chunk_a" or "=chunk_b")
  if a then run_a(f, 200000) else run_b(f, 200000) end
  f = nil
  collectgarbage()
end
]]

local RUNTIMES = { "lua5.4", "lua5.3", "lua5.1" }

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- starts cmd .. " " .. the scripts (written under a directory name long
-- enough that short_src is cut by LUA_IDSIZE) and waits for each to print
-- "ready"; returns the pid and the functions' debug.getinfo by name
local function launch(cmd, dir, codes)
  local sub = dir .. "/a-directory-whose-name-is-long-enough-to-be-cut-by-chunkid"
  u.sh("mkdir -p " .. u.quote(sub))
  local paths = {}
  for i, code in ipairs(codes) do
    paths[i] = u.quote(("%s/workload%d.lua"):format(sub, i))
    write(("%s/workload%d.lua"):format(sub, i), code)
  end
  local out = dir .. "/out"
  local pid = tonumber(u.trim(u.sh(("%s %s > %s 2>&1 & echo $!"):format(cmd, table.concat(paths, " "), u.quote(out)))))
  local info = {}
  for _ = 1, 500 do
    local text = u.read_file(out) or ""
    local _, ready = text:gsub("ready", "")
    if ready >= #codes then
      for name, src, ld, line, caller in text:gmatch("info (%a+)\t([^\t]+)\t(%-?%d+)\t(%-?%d+)\t(%-?%d+)") do
        info[name] = { source = src, linedefined = tonumber(ld), line = tonumber(line), caller = tonumber(caller) }
      end
      return pid, info
    end
    u.h.sleep_ms(10)
  end
  u.sh("kill " .. pid)
  error(cmd .. " workload did not start: " .. tostring(u.read_file(out)))
end

local function start(interp, dir, code) return launch(interp, dir, { code }) end

local function leaf_weights(prof, info, names)
  local w, total = {}, 0
  for _, s in ipairs(prof.stacks) do
    local leaf = prof.frames[s.frames[#s.frames]]
    for _, name in ipairs(names) do
      local want = info[name]
      if leaf.what == "Lua" and leaf.source == want.source and leaf.linedefined == want.linedefined then
        w[name] = (w[name] or 0) + s.weight
        total = total + s.weight
      end
    end
  end
  return w, total
end

local function interp_missing(interp)
  if not u.have(interp) then
    print(("attach_puc_spec: %s is not installed: skipped"):format(interp))
    return true
  end
end

describe("perfev.attach.puc", function()
  local dir
  local pids = {}
  before_each(function() dir = u.tmpdir() end)
  after_each(function()
    for _, pid in ipairs(pids) do u.sh("kill -CONT " .. pid .. "; kill " .. pid .. " 2>/dev/null") end
    pids = {}
    u.rmdir(dir)
  end)

  if not u.is_root() then
    it("needs root to read another process's memory", function()
      print("attach_puc_spec: not root: skipped")
    end)
    return
  end

  for _, interp in ipairs(RUNTIMES) do
    it(interp .. ": two functions costing 1:3 give 25 % / 75 %, named as debug.getinfo names them", function()
      if interp_missing(interp) then return end
      local pid, info = start(interp, dir, WORK)
      pids[#pids + 1] = pid
      assert.truthy(info.cheap and info.dear, "the target printed its debug.getinfo")
      local prof = assert(profile_pid(pid, SAMPLES))
      assert.are.equal(1, #prof.states)
      assert.are.equal("Lua " .. interp:match("%d%.%d"), prof.runtime:match("^Lua %d%.%d"))
      -- a stack is dropped only where the target was stopped mid-change
      -- (a call being set up or a coroutine switching): a few at most
      assert.is_true(prof.dropped <= 0.02 * SAMPLES, ("%d dropped"):format(prof.dropped))
      local w, total = leaf_weights(prof, info, { "cheap", "dear" })
      assert.is_true(total >= 0.9 * prof.samples, ("%d of %d samples in cheap/dear"):format(total, prof.samples))
      local share = w.cheap / total
      assert.is_true(math.abs(share - 0.25) <= 0.05, ("cheap's share %.3f"):format(share))
      assert.is_true(math.abs(w.dear / total - 0.75) <= 0.05, ("dear's share %.3f"):format(w.dear / total))
      -- every stack in cheap/dear: [C] (the interpreter's pmain), the main
      -- chunk at the loop's line, the function at its own line
      for _, s in ipairs(prof.stacks) do
        local leaf = prof.frames[s.frames[#s.frames]]
        local want = (leaf.linedefined == info.cheap.linedefined and info.cheap)
                     or (leaf.linedefined == info.dear.linedefined and info.dear)
        if want then
          assert.are.equal(3, #s.frames)
          local root, main = prof.frames[s.frames[1]], prof.frames[s.frames[2]]
          assert.are.same({ what = "C", source = "[C]", line = -1, linedefined = -1 },
                          { what = root.what, source = root.source, line = root.line, linedefined = root.linedefined })
          assert.are.same({ what = "main", source = want.source, line = want.caller, linedefined = 0 },
                          { what = main.what, source = main.source, line = main.line, linedefined = main.linedefined })
          assert.are.same({ what = "Lua", source = want.source, line = want.line, linedefined = want.linedefined },
                          { what = leaf.what, source = leaf.source, line = leaf.line, linedefined = leaf.linedefined })
        end
      end
      -- the source is cut as Lua cuts it
      assert.are.equal("...", info.cheap.source:sub(1, 3))
    end)

    it(interp .. ": a producer coroutine shows under its resumer's coroutine.resume frame", function()
      if interp_missing(interp) then return end
      local pid, info = start(interp, dir, COROUTINES)
      pids[#pids + 1] = pid
      local prof = assert(profile_pid(pid, SAMPLES))
      assert.is_true(prof.dropped <= 0.02 * SAMPLES, ("%d dropped"):format(prof.dropped))
      local w, total = leaf_weights(prof, info, { "produce", "consume" })
      assert.is_true(total >= 0.9 * prof.samples, ("%d of %d samples in produce/consume"):format(total, prof.samples))
      assert.is_true(math.abs(w.produce / total - 0.25) <= 0.05, ("produce's share %.3f"):format(w.produce / total))
      local seen = 0
      for _, s in ipairs(prof.stacks) do
        local fr = {}
        for i, id in ipairs(s.frames) do fr[i] = prof.frames[id] end
        local leaf = fr[#fr]
        if leaf.what == "Lua" and leaf.linedefined == info.produce.linedefined then
          seen = seen + s.weight
          -- [C] pmain, main chunk at the resume, coroutine.resume [C], the
          -- coroutine's body at its call of produce, produce
          assert.are.equal(5, #fr)
          assert.are.equal("main", fr[2].what)
          assert.are.same({ "C", "coroutine.resume", "[C]" }, { fr[3].what, fr[3].name, fr[3].source })
          assert.are.same({ "Lua", info.produce.source, info.produce.caller },
                          { fr[4].what, fr[4].source, fr[4].line })
          assert.are.same({ info.produce.source, info.produce.line }, { leaf.source, leaf.line })
        elseif leaf.what == "Lua" and leaf.linedefined == info.consume.linedefined then
          assert.are.equal(3, #fr)
          assert.are.same({ "main", info.consume.caller }, { fr[2].what, fr[2].line })
        end
      end
      assert.is_true(seen > 0)
    end)

    it(interp .. ": a C host's two states are found, each thread's stack from its own state, "
       .. "a coroutine resumed from C under the C function", function()
      if interp_missing(interp) then return end
      local v = interp:match("%d%.%d")
      if not u.exists("/usr/include/lua" .. v .. "/lua.h") or not u.have("cc") then
        print(("attach_puc_spec: no cc or no /usr/include/lua%s (liblua%s-dev): C host skipped"):format(v, v))
        return
      end
      write(dir .. "/host.c", HOST_C)
      local bin = dir .. "/host"
      local out, ok = u.sh(("cc -O1 -o %s %s -I/usr/include/lua%s -llua%s -lpthread 2>&1")
                           :format(u.quote(bin), u.quote(dir .. "/host.c"), v, v))
      assert(ok, out)
      local pid, info = launch(bin, dir, { WORK, DRIVEN })
      pids[#pids + 1] = pid
      local prof = assert(profile_pid(pid, 300))
      assert.are.equal("Lua " .. v, prof.runtime:match("^Lua %d%.%d"))
      assert.is_true(prof.dropped <= 0.02 * 600, ("%d dropped"):format(prof.dropped))
      -- the reader found both states (the main thread waits in pthread_join:
      -- the engine's cpu-clock never samples a thread that sleeps)
      assert.are.equal(2, #prof.states)
      assert.are_not.equal(prof.states[1].label, prof.states[2].label)
      local drive_line
      local n = 0
      for line in DRIVEN:gmatch("([^\n]*)\n") do
        n = n + 1
        if line:find("^drive%(") then drive_line = n end
      end
      local tid_of, in_inner = {}, 0
      for _, st in ipairs(prof.stacks) do
        assert.are_not.equal(pid, st.tid)
        local fr = {}
        for i, id in ipairs(st.frames) do fr[i] = prof.frames[id] end
        local leaf = fr[#fr]
        assert.are.equal("main", fr[1].what)
        if leaf.source == info.inner.source and leaf.linedefined == info.inner.linedefined then
          -- the main chunk at drive(...), drive [C], the coroutine's body, inner
          in_inner = in_inner + st.weight
          assert.are.same({ { "main", drive_line }, { "C", "drive" }, { "Lua", info.inner.caller },
                            { "Lua", info.inner.line } },
                          { { fr[1].what, fr[1].line }, { fr[2].what, fr[2].name }, { fr[3].what, fr[3].line },
                            { leaf.what, leaf.line } })
          tid_of.inner = tid_of.inner or st.tid
          assert.are.equal(tid_of.inner, st.tid)
        elseif leaf.linedefined == info.cheap.linedefined or leaf.linedefined == info.dear.linedefined then
          assert.are.same({ "main", info.cheap.caller }, { fr[1].what, fr[1].line })
          assert.are.equal(2, #fr)
          tid_of.work = tid_of.work or st.tid
          assert.are.equal(tid_of.work, st.tid)
        end
      end
      assert.are_not.equal(tid_of.work, tid_of.inner)
      -- each thread's samples (the engine shares n among the threads by the
      -- CPU time each got)
      local of_tid = {}
      for _, st in ipairs(prof.stacks) do of_tid[st.tid] = (of_tid[st.tid] or 0) + st.weight end
      assert.is_true((of_tid[tid_of.inner] or 0) >= 50 and (of_tid[tid_of.work] or 0) >= 50,
                     ("samples by thread: %d driven, %d working"):format(of_tid[tid_of.inner] or 0,
                                                                          of_tid[tid_of.work] or 0))
      if in_inner < 0.9 * of_tid[tid_of.inner] then   -- say what the driven thread showed instead
        local seen = {}
        for _, st in ipairs(prof.stacks) do
          if st.tid == tid_of.inner then
            local fr = {}
            for i, id in ipairs(st.frames) do
              local f = prof.frames[id]
              fr[i] = ("%s %s %s:%s"):format(f.what, tostring(f.name), f.source, f.line)
            end
            seen[#seen + 1] = st.weight .. " x " .. table.concat(fr, " | ")
          end
        end
        for r, k in pairs(prof.reasons) do seen[#seen + 1] = k .. " x dropped: " .. r end
        error(("%d samples in the driven coroutine's inner; its thread showed:\n%s")
              :format(in_inner, table.concat(seen, "\n")))
      end
      local w, total = leaf_weights(prof, info, { "cheap", "dear" })
      assert.is_true(total >= 0.9 * of_tid[tid_of.work],
                     ("%d of the working thread's %d samples in cheap/dear"):format(total, of_tid[tid_of.work]))
      assert.is_true(w.cheap > 0 and w.dear > w.cheap)
    end)

    it(interp .. ": the current line of a function of several lines is the one Lua gives", function()
      if interp_missing(interp) then return end
      local code, hook_line, first = lines_workload()
      local pid = start(interp, dir, code)
      pids[#pids + 1] = pid
      local prof = assert(profile_pid(pid, 300))
      local checked, lines = 0, {}
      for _, st in ipairs(prof.stacks) do
        local fr = {}
        for i, id in ipairs(st.frames) do fr[i] = prof.frames[id] end
        local n = #fr
        if n >= 3 and fr[n - 1].what == "Lua" and hook_line[fr[n - 1].line]
           and fr[n - 2].linedefined == first then
          assert.are.equal(hook_line[fr[n - 1].line], fr[n - 2].line, "body's line as Lua saw it")
          checked = checked + st.weight
          lines[fr[n - 2].line] = true
        end
      end
      local distinct = 0
      for _ in pairs(lines) do distinct = distinct + 1 end
      assert.is_true(checked >= 100, ("%d samples in the hook's spin"):format(checked))
      assert.is_true(distinct >= 3, ("%d distinct lines of body"):format(distinct))
    end)

    it(interp .. ": a chunk loaded where a collected one was never gets its name or lines", function()
      if interp_missing(interp) then return end
      local pid = start(interp, dir, RELOAD)
      pids[#pids + 1] = pid
      local state
      local reader = { name = puc.name, probe = function(t)
        local st, why = puc.probe(t)
        state = st
        return st, why
      end }
      local n, checked, wrong = 0, 0, {}
      local p = assert(require("perfev.attach").attach {
        pid = pid, event = "cpu-clock", period = 1000000, duration_ms = 120000, reader = reader,
        on_sample = function(_, frames)
          n = n + 1
          local top, caller = frames and frames[#frames], frames and frames[#frames - 1]
          if top and caller and (top.source == "chunk_a" or top.source == "chunk_b") then
            -- run_a is defined on the script's line 3, run_b on line 4
            local want = caller.linedefined == 3 and { "chunk_a", 1 } or { "chunk_b", 2 }
            -- line 0: taken between the call and its first instruction,
            -- where Lua's own currentline is the chunk's linedefined, 0
            -- (once in a CI run's 1000 samples); its source must be right
            local line_ok = top.line == want[2] or top.line == 0
            if top.source ~= want[1] or not line_ok or top.what ~= "main" then
              wrong[#wrong + 1] = ("%s:%d under the caller defined at %d"):format(top.source, top.line,
                                                                                caller.linedefined)
            end
            checked = checked + 1
          end
          return n >= 1000
        end })
      assert.are.same({}, wrong)
      assert.is_true(checked >= 900, ("%d of %d samples in the chunks"):format(checked, n))
      assert.is_true(p.attach.dropped <= 20, ("%d dropped"):format(p.attach.dropped))
      -- the case was met: a Proto the reader kept found replaced at its address
      assert.is_true(state.reused > 0, "no Proto address reused")
    end)

    it(interp .. ": short_src is cut as that version's luaO_chunkid cuts it", function()
      if interp_missing(interp) then return end
      local names = {
        "@short.lua", "=stdin", "=" .. ("n"):rep(58), "=" .. ("n"):rep(59), "=" .. ("n"):rep(60),
        "=" .. ("n"):rep(80), "@" .. ("f"):rep(51), "@" .. ("f"):rep(52), "@" .. ("f"):rep(53),
        "@" .. ("f"):rep(58), "@" .. ("f"):rep(59), "@" .. ("f"):rep(60), "@" .. ("f"):rep(90),
        "return 1", ("x"):rep(42), ("x"):rep(43), ("x"):rep(44), ("x"):rep(45), ("x"):rep(46),
        ("x"):rep(80), "line one\nline two", "a\rb", ("y"):rep(50) .. "\nz", "",
      }
      local lines = {}
      for _, n in ipairs(names) do lines[#lines + 1] = ("%q"):format(n) end
      local script = dir .. "/chunkid.lua"
      local f = assert(io.open(script, "w"))
      f:write("local load = loadstring or load\n",
              "for _, n in ipairs { ", table.concat(lines, ", "), " } do\n",
              "  io.write(debug.getinfo(load('return 1', n), 'S').short_src, '\\0')\n",
              "end\n")
      f:close()
      local out = u.sh(interp .. " " .. u.quote(script))
      local got = {}
      for s in out:gmatch("([^%z]*)%z") do got[#got + 1] = s end
      assert.are.equal(#names, #got)
      local rules = interp == "lua5.1" and "5.1" or "5.3"
      for i, n in ipairs(names) do
        assert.are.equal(got[i], puc.chunkid(rules, n), ("chunk name %q"):format(n))
      end
    end)
  end

  -- the reader's own refusals (the engine goes on to the next reader)
  local function probe_pid(pid)
    local t = assert(attach_target.new(pid))
    return puc.probe(t)
  end

  it("refuses a process that is not PUC Lua, saying what it tried", function()
    local pid = tonumber(u.trim(u.sh("sleep 60 > /dev/null 2>&1 & echo $!")))
    pids[#pids + 1] = pid
    u.h.sleep_ms(50)
    local st, why = probe_pid(pid)
    assert.is_nil(st)
    assert.matches("no PUC Lua version string", why)
    assert.matches("sleep", why)
  end)

  it("refuses a LuaJIT process, naming it", function()
    if interp_missing("luajit") then return end
    local pid = tonumber(u.trim(u.sh("luajit -e 'while true do end' > /dev/null 2>&1 & echo $!")))
    pids[#pids + 1] = pid
    u.h.sleep_ms(100)
    local st, why = probe_pid(pid)
    assert.is_nil(st)
    assert.matches("LuaJIT", why)
  end)
end)
