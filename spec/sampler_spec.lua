-- perfev.sampler against the kernel: one inherited event per online CPU,
-- rings merged in time order, following a command started with io.popen
-- (its fork, comm, mmap2, samples and exit, and the processes it forks),
-- several events per ring, poll and hup, and nothing left open.
local perfev = require "perfev"
local sampler = require "perfev.sampler"
local u = require "spec.support.util"
local tbc = require "spec.support.tbc"
local compat = require "perfev.compat"

local PID = u.pid()
local PROT_EXEC = 4

local collect, where, trim = u.collect, u.where, u.trim

local function of(recs, t, pid)
  return where(recs, function(r) return r.type == t and (pid == nil or r.pid == pid) end)
end

local function perf_maps()
  local _, n = u.read_file("/proc/self/maps"):gsub("perf_event", "")
  return n
end

local ONLINE = assert(tonumber(trim(u.sh("getconf _NPROCESSORS_ONLN"))))
-- a CPU-bound shell loop (about 0.3 s here)
local LOOP = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"

describe("perfev.sampler", function()
  describe("CPUs", function()
    it("parses the kernel's cpulist format", function()
      assert.same({ 0, 1, 2, 3, 5, 7, 8 }, sampler.parse_cpulist("0-3,5,7-8\n"))
      assert.same({ 0 }, sampler.parse_cpulist("0\n"))
      assert.same({ 4, 5, 6, 7 }, sampler.parse_cpulist("4-7"))
      assert.has_error(function() sampler.parse_cpulist("0-3,x") end,
                       "perfev.sampler.parse_cpulist: bad item 'x' in '0-3,x'")
      assert.has_error(function() sampler.parse_cpulist("3-1") end,
                       "perfev.sampler.parse_cpulist: bad item '3-1' in '3-1'")
    end)

    it("finds every online CPU, as getconf does", function()
      local cpus = assert(sampler.online_cpus())
      assert.equal(ONLINE, #cpus)
      local s = assert(perfev.sampler { period = 1000000 })
      assert.same(cpus, s.cpus)
      s:close()
    end)
  end)

  describe("options", function()
    it("a mistake raises naming the option", function()
      local cases = {
        { { comn = true }, "unknown option 'comn' (did you mean 'comm'?)" },
        { { pid = 1, command = "true" }, "give 'pid' or 'command', not both" },
        { { period = 10, freq = 10 }, "give 'period' or 'freq', not both" },
        { { pages = 3 }, "option 'pages': the number of data pages per CPU must be a power of two, got 3" },
        { { period = 0 }, "option 'period' must be > 0, got 0" },
        { { pid = "1" }, "option 'pid' must be an integer, got string '1'" },
        { { comm = 1 }, "option 'comm' must be a boolean, got integer 1" },
        { { cpus = {} }, "option 'cpus': an empty list (e.g. { 0, 1 } or \"0-3,5\")" },
        { { event = "cpu-clock", events = { "task-clock" } }, "give 'event' or 'events', not both" },
        { { command = "true", inherit = false },
          "option 'inherit' cannot be false with 'command': the command inherits the events" },
      }
      for _, c in ipairs(cases) do
        assert.has_error(function() perfev.sampler(c[1]) end, "perfev.sampler: " .. c[2])
      end
      assert.has_error(function() perfev.sampler { event = "no-such-event" } end)
    end)

    it("period, freq, sample_type and side-band bits reach the attrs; side-band on the first event only", function()
      local s = assert(perfev.sampler { events = { "cpu-clock", "task-clock" }, freq = 997,
                                        sample_type = { "ip", "tid" }, comm = true, mmap2 = true })
      local a1, a2 = s.events[1]:attr(), s.events[2]:attr()
      assert.same({ 1, 997, 1, 1 }, { a1.freq, a1.sample_freq, a1.inherit, a1.disabled })
      -- several events of one ring are told apart by the identifier
      assert.equal(perfev.attr { sample_type = { "identifier", "ip", "tid" } }.sample_type, a1.sample_type)
      assert.same({ 1, 1, 1 }, { a1.comm, a1.mmap2, a1.mmap })   -- mmap2 brings mmap: see doc/sampler.md
      assert.same({ 0, 0, 0 }, { a2.comm, a2.mmap2, a2.mmap })
      s:close()
      s = assert(perfev.sampler { period = 123456 })
      local a = s.events[1]:attr()
      assert.same({ 0, 123456 }, { a.freq, a.sample_period })
      assert.equal(perfev.attr { sample_type = { "ip", "tid", "time", "period" } }.sample_type, a.sample_type)
      s:close()
    end)

    it("pid = -1 watches whole CPUs: no inherit there", function()
      local s, msg, errno = perfev.sampler { pid = -1, period = 1000000 }
      if not s and (errno == u.E.EACCES or errno == u.E.EPERM) then
        pending("CPU-wide events need perf_event_paranoid <= 0 or CAP_PERFMON: " .. msg)
        return
      end
      assert(s, msg)
      assert.equal(0, s.events[1]:attr().inherit)
      assert.equal(-1, s.pid)
      s:close()
    end)
  end)

  describe("opening and closing", function()
    it("one inherited event and one ring per CPU; close releases every fd and mapping", function()
      local fds, maps = u.fd_count(), perf_maps()
      local s = assert(perfev.sampler { period = 1000000, pages = 4 })
      assert.equal(ONLINE, #s.events)
      assert.equal(ONLINE, #s.rings)
      for k, ev in ipairs(s.events) do
        local a = ev:attr()
        assert.equal(1, a.inherit)
        assert.equal(4 * s.rings[k]:info().data_offset, s.rings[k]:info().data_size)
      end
      assert.equal(fds + ONLINE, u.fd_count())
      assert.equal(maps + ONLINE, perf_maps())
      assert.is_true(s:close())
      assert.is_true(s:closed())
      assert.is_true(s:close())   -- twice is fine
      assert.equal(fds, u.fd_count())
      assert.equal(maps, perf_maps())
      assert.has_error(function() s:records() end, "perfev.sampler: attempt to use a closed session")
      if tbc.available then
        tbc.run([[
          local perfev, u, fds, ONLINE, assert = ...
          do
            local s2 <close> = assert(perfev.sampler { period = 1000000 })
            assert.equal(fds + ONLINE, u.fd_count())
            assert.is_false(s2:closed())
          end
        ]], perfev, u, fds, ONLINE, assert)
      end
      assert.equal(fds, u.fd_count())
      -- sessions dropped without close: their events' own __gc closes them
      -- (made in a function, so that no stack slot of this one holds one)
      local function drop() for _ = 1, 5 do assert(perfev.sampler { period = 1000000 }) end end
      drop()
      collectgarbage(); collectgarbage()
      assert.equal(fds, u.fd_count())
      assert.equal(maps, perf_maps())
    end)

    it("a command session closes its own events too: the dummy, the watch", function()
      local fds = u.fd_count()
      local s = assert(perfev.sampler { command = "exec true", period = 1000000, task = true })
      assert.is_true((s:wait()))
      s:close()
      assert.equal(fds, u.fd_count())
    end)

    it("a kernel refusal is nil, message, errno, with nothing left open", function()
      local pid_max = assert(tonumber(u.read_file("/proc/sys/kernel/pid_max")))
      local gone = pid_max - 1
      while u.exists("/proc/" .. gone) do gone = gone - 1 end
      local fds = u.fd_count()
      local s, msg, errno = perfev.sampler { pid = gone, period = 1000000 }
      assert.is_nil(s)
      assert.equal(u.E.ESRCH, errno)
      assert.matches("cpu 0", msg)
      assert.equal(fds, u.fd_count())
    end)
  end)

  describe("sampling this process", function()
    it("samples from every CPU's ring, merged in time order, each with its CPU #valgrind_differs", function()
      local s = assert(perfev.sampler { period = 200000, sample_type = { "ip", "tid", "time", "period" } })
      s:enable(); u.burn(100); s:disable()
      local samples = of(collect(s), "sample")
      assert.is_true(#samples >= 10, #samples .. " samples")
      local last, seen = 0, {}
      for _, r in ipairs(samples) do
        assert.same({ PID, PID, 200000 }, { r.pid, r.tid, r.period })
        assert.is_true(r.time >= last)
        last = r.time
        seen[r.cpu] = true
        assert.equal(s.events[1]:attr().type, r.event:attr().type)
      end
      for cpu in pairs(seen) do assert.is_true(cpu >= 0 and cpu < ONLINE) end
      -- mappings made before the session resolve through /proc/self/maps
      local maps, user = u.read_file("/proc/self/maps"), 0
      for _, r in ipairs(samples) do
        if r.cpumode == "user" then
          local file, off, m = s:resolve(0, r.ip)
          assert(file, ("user ip 0x%x resolves to no mapping"):format(r.ip))
          if file == "//anon" then
            -- machine code in an unnamed mapping: LuaJIT's compiled traces
            assert.is_true(compat.luajit, "an ip in anonymous memory on " .. compat.runtime)
          else
            assert.truthy(maps:find(file, 1, true))
          end
          assert.equal(r.ip - m.addr + m.pgoff, off)
          user = user + 1
        end
      end
      assert.is_true(user > 0)
      assert.is_nil(s:resolve(0, 0))
      assert.has_error(function() s:resolve(nil, 1) end, "perfev.sampler: resolve: pid must be an integer, got nil")
      -- each sample needs a full period of the count
      local count = s:read()
      assert.equal(count[1], count["cpu-clock"])
      assert.is_true(count[1] >= #samples * 200000, count[1] .. " ns for " .. #samples .. " samples")
      assert.equal(0, s:lost())
      s:close()
    end)

    it("without time in sample_type, records come CPU by CPU", function()
      local s = assert(perfev.sampler { period = 100000, sample_type = { "ip", "tid" } })
      s:enable(); u.burn(60); s:disable()
      local recs = collect(s)
      assert.is_true(#recs >= 5)
      for i = 2, #recs do assert.is_true(recs[i - 1].cpu <= recs[i].cpu) end
      s:close()
    end)
  end)

  describe("following a command", function()
    it("a CPU-bound child: its fork, comm, mmap2 of its binary and libraries, samples with its pid, exit", function()
      local s = assert(perfev.sampler { command = LOOP, period = 1000000, task = true, comm = true,
                                        mmap2 = true })
      local ok, how, code = s:wait()   -- the command has exited: its records are all written
      assert.same({ true, "exit", 0 }, { ok, how, code })
      local recs = collect(s)
      local child = s.pid
      assert.is_true(child ~= PID)
      local fork = of(recs, "fork", child)
      assert.equal(1, #fork)
      assert.same({ PID, child }, { fork[1].ppid, fork[1].tid })
      assert.equal(fork[1], recs[1])                          -- the command starts with its fork
      local comm = of(recs, "comm", child)
      assert.equal(1, #comm)
      assert.same({ "sh", true }, { comm[1].comm, comm[1].comm_exec })
      -- the shell, the dynamic loader and libc, each with the inode stat gives
      local files = {}
      for _, m in ipairs(of(recs, "mmap2", child)) do
        if compat.band(m.prot, PROT_EXEC) ~= 0 then files[m.filename] = m end
      end
      local sh = trim(u.sh("readlink -f /bin/sh"))
      for _, want in ipairs { sh, "ld%-linux", "libc%.so" } do
        local found
        for name, m in pairs(files) do
          if name == want or name:find(want) then found = m end
        end
        assert(found, "no executable mmap2 record for " .. want)
        local ino = tonumber(trim(u.sh("stat -L -c %i '" .. found.filename .. "'")))
        assert.equal(ino, found.ino)
      end
      local samples = of(recs, "sample")
      assert.is_true(#samples >= 20, #samples .. " samples")
      for _, r in ipairs(samples) do
        assert.same({ child, child }, { r.pid, r.tid })
        assert.is_true(r.time > comm[1].time)
      end
      local exit = of(recs, "exit", child)
      assert.equal(1, #exit)
      assert.equal(PID, exit[1].ppid)
      assert.equal(exit[1], recs[#recs])                     -- and ends with its exit
      for _, r in ipairs(recs) do assert.is_true(r.pid == child, r.type .. " of " .. tostring(r.pid)) end
      assert.same({ child }, s:pids())
      local count = s:read()[1]
      assert.is_true(count >= #samples * 1000000)
      s:close()
    end)

    it("the processes it forks; not this process's other children", function()
      -- (LuaJIT's compiled loop would run in an anonymous mapping, //anon:
      -- -joff keeps it in the interpreter, in LuaJIT's own file)
      local lua = u.lua_interpreter() .. (compat.luajit and " -joff" or "")
      local cmd = ("sleep 0; exec %s -e 'local x = 0 for i = 1, 3e6 do x = x + i %% 7 end'"):format(lua)
      local s = assert(perfev.sampler { command = cmd, event = "cpu-clock:u", period = 500000,
                                        task = true, comm = true, mmap2 = true })
      -- a child of this process during the session: inherits the events, is not followed
      local other = assert(tonumber(u.sh("echo $$; exec sleep 0"):match("^(%d+)")))
      assert.is_true((s:wait()))
      local recs, followed = collect(s), s:pids()
      local sleep = of(recs, "fork")
      assert.is_true(#sleep >= 2)   -- this one, and sleep's
      local kid = sleep[2]
      assert.same({ s.pid }, { kid.ppid })
      local want = { s.pid, kid.pid }
      table.sort(want)
      assert.same(want, followed)
      local kid_comm = of(recs, "comm", kid.pid)
      assert.equal(1, #kid_comm)   -- a fork has its parent's comm: a record comes with the exec
      assert.same({ "sleep", true }, { kid_comm[1].comm, kid_comm[1].comm_exec })
      assert.equal(1, #of(recs, "exit", kid.pid))
      assert.is_true(#where(recs, function(r) return r.pid == other end) == 0)
      -- the command's own exec into Lua: samples resolve into its mappings
      local exec = of(recs, "comm", s.pid)
      assert.equal(u.lua_interpreter():match("[^/]*$"):sub(1, 15), exec[#exec].comm)
      local by_file, n = {}, 0
      for _, r in ipairs(of(recs, "sample", s.pid)) do
        if r.time > exec[#exec].time then
          assert.equal("user", r.cpumode)
          local file, off = s:resolve(r.pid, r.ip)
          assert(file, ("sample ip 0x%x resolves to no mapping"):format(r.ip))
          local size = tonumber(trim(u.sh("stat -L -c %s '" .. file .. "' 2>/dev/null || echo 0")))
          if size > 0 then assert.is_true(off < size, file .. " offset past its end") end
          by_file[file] = (by_file[file] or 0) + 1
          n = n + 1
        end
      end
      assert.is_true(n >= 10, n .. " samples of the Lua child")
      local top, most = nil, 0
      for f, c in pairs(by_file) do if c > most then top, most = f, c end end
      assert.matches("lua", top)
      s:close()
    end)

    it("hup when the command's process exits; poll(0) never blocks", function()
      local s = assert(perfev.sampler { command = "exec sleep 0.2", period = 1000000 })
      local readable, hup = s:poll(0)
      assert.is_false(hup)
      assert.is_boolean(readable)
      for _ = 1, 100 do
        hup = select(2, s:poll(100))
        if hup then break end
        collect(s)   -- else poll returns at once: records are waiting
      end
      assert.is_true(hup)
      assert.is_true((s:wait()))
      s:close()
    end)
  end)

  describe("a running process", function()
    it("pid = a child: hup once it exits", function()
      local p = assert(io.popen("echo $$; exec sleep 0.3", "r"))
      local child = assert(tonumber(p:read("l")))
      local s = assert(perfev.sampler { pid = child, period = 1000000, comm = true })
      assert.equal(child, s.pid)
      assert.is_true(s:enable())
      local hup
      for _ = 1, 100 do
        hup = select(2, s:poll(100))
        if hup then break end
        collect(s)
      end
      p:close()
      assert.is_true(hup)
      s:close()
    end)

    it("pid = 0 with a disabled session: poll(0) finds nothing", function()
      local s = assert(perfev.sampler { period = 1000000 })
      assert.same({ false, false }, { s:poll(0) })
      assert.same({ false, false }, { s:poll(30) })
      s:close()
    end)
  end)

  describe("as an unprivileged user", function()
    it("a command session at perf_event_paranoid 2: user-space samples of the command, its fork", function()
      local paranoid = tonumber(u.read_file("/proc/sys/kernel/perf_event_paranoid") or "")
      if paranoid ~= 2 then
        pending("the user-space fallback shows at perf_event_paranoid 2; it is " .. tostring(paranoid))
        return
      end
      local out, why = u.run_as_nobody([[
        local perfev = require "perfev"
        local s, msg = perfev.sampler { command = "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done",
                                        period = 500000, task = true }
        if not s then print("nil", msg) return end
        assert(s:wait())
        local n, forks, user = 0, 0, true
        for r in s:records() do
          if r.type == "sample" then
            n = n + 1
            user = user and r.cpumode == "user" and r.pid == s.pid
          elseif r.type == "fork" and r.pid == s.pid then
            forks = forks + 1
          end
        end
        print(s.events[1]:data().fallback, s.events[#s.events]:data().fallback, n >= 5, forks, user)
        s:close()
      ]])
      if not out then pending(why); return end
      assert.equal("exclude_kernel\texclude_kernel\ttrue\t1\ttrue\n", out)
    end)
  end)

  describe("several events", function()
    it("share each CPU's ring (ring:add); each record carries its event", function()
      local s = assert(perfev.sampler {
        events = { { type = "software", config = "cpu-clock", sample_period = 200000 },
                   { type = "software", config = "task-clock", sample_period = 300000 } } })
      assert.equal(2 * ONLINE, #s.events)
      assert.equal(ONLINE, #s.rings)
      s:enable(); u.burn(100); s:disable()
      local n = {}
      for _, r in ipairs(of(collect(s), "sample")) do
        local name = r.event:data().name
        assert.equal(name == "cpu-clock" and 200000 or 300000, r.period)
        assert.equal(r.event:id(), r.id)
        n[name] = (n[name] or 0) + 1
      end
      assert.is_true((n["cpu-clock"] or 0) > 5 and (n["task-clock"] or 0) > 5)
      local counts = s:read()
      assert.is_true(counts["task-clock"] >= n["task-clock"] * 300000)
      s:close()
    end)
  end)
end)
