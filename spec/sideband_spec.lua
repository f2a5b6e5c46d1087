-- Side-band records against the kernel, through perfev.sampler: fork,
-- comm and exit of a child of this process (io.popen), mmap2 of a new file
-- mapping and of a newly loaded shared library (both the inode and the
-- build-id form), switch records of this process and CPU-wide switch
-- records paired across tasks. Each value is checked against what the
-- kernel shows elsewhere: /proc/self/maps, stat(1), readelf(1), $$.
local perfev = require "perfev"
local u = require "spec.support.util"
local compat = require "perfev.compat"

local PID = u.pid()
local PROT_READ, PROT_EXEC, MAP_SHARED = 1, 4, 1

local collect, where, trim = u.collect, u.where, u.trim

-- The /proc/self/maps line of the mapping starting at addr, as fields.
local function maps_line(addr)
  for line in io.lines("/proc/self/maps") do
    local lo, perms, off, maj, min, ino, path =
      line:match("^(%x+)%-%x+ (%S+) (%x+) (%x+):(%x+) (%d+)%s*(.*)$")
    if lo and tonumber(lo, 16) == addr then
      return { perms = perms, pgoff = tonumber(off, 16), maj = tonumber(maj, 16),
               min = tonumber(min, 16), ino = tonumber(ino), path = path }
    end
  end
  return nil
end

-- stat(1): inode and the device split as the kernel's MAJOR()/MINOR().
local function stat(path)
  local out = trim(u.sh("stat -L -c '%i %d' '" .. path .. "'"))
  local ino, dev = out:match("^(%d+) (%d+)$")
  dev = assert(tonumber(dev), "stat failed for " .. path)
  return { ino = tonumber(ino), maj = compat.bor(compat.band(compat.rshift(dev, 8), 0xfff),
      compat.band(compat.rshift(dev, 32), compat.bnot(0xfff))),
           min = compat.bor(compat.band(dev, 0xff), compat.band(compat.rshift(dev, 12), compat.bnot(0xff))) }
end

local function hex(bytes)
  return (bytes:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

-- The GNU build id readelf(1) reads from the file, or nil, reason.
local function readelf_build_id(path)
  local _, have = u.sh("command -v readelf >/dev/null 2>&1")
  if not have then return nil, "readelf (binutils) is not installed" end
  local id = u.sh("readelf -n '" .. path .. "' 2>/dev/null"):match("Build ID: (%x+)")
  if not id then return nil, path .. " has no GNU build id note" end
  return id
end

-- A fresh copy of the spec helper library: a file no one has mapped yet.
local function fresh_library()
  local src = assert(package.searchpath("bphelper", package.cpath))
  local dst = os.tmpname() .. ".so"
  local ok = os.execute(("cp '%s' '%s'"):format(src, dst))
  assert(ok, "cannot copy " .. src)
  return dst
end

-- Loads the library at path with package.loadlib under a sampler asking
-- for mmap2 records (build_id: their build-id form); returns the sampler
-- and the mmap2 records of that file, at least one.
local function load_library(path, build_id)
  local s = assert(perfev.sampler { event = "dummy", mmap2 = true, build_id = build_id })
  s:enable()
  assert(package.loadlib(path, "*"))
  s:disable()
  local recs = where(collect(s), function(r) return r.type == "mmap2" and r.filename == path end)
  assert.is_true(#recs >= 1, "no mmap2 record for " .. path)
  return s, recs
end

describe("side-band records", function()
  it("fork, comm and exit of a child started with io.popen (task = 1, comm = 1)", function()
    local s = assert(perfev.sampler { event = "dummy", task = true, comm = true })
    s:enable()
    local child = assert(tonumber(u.sh("echo $$; exec sleep 0"):match("^(%d+)")))
    s:disable()
    local recs = where(collect(s), function(r) return r.pid == child end)
    local fork = where(recs, function(r) return r.type == "fork" end)
    assert.equal(1, #fork)
    assert.same({ child, PID, child, PID }, { fork[1].pid, fork[1].ppid, fork[1].tid, fork[1].ptid })
    -- popen execs the shell, which execs sleep: two comm records, both execs
    local comms = where(recs, function(r) return r.type == "comm" end)
    assert.equal(2, #comms)
    assert.same({ "sh", "sleep" }, { comms[1].comm, comms[2].comm })
    for _, c in ipairs(comms) do
      assert.is_true(c.comm_exec)
      assert.equal(child, c.tid)
    end
    local exit = where(recs, function(r) return r.type == "exit" end)
    assert.equal(1, #exit)
    assert.same({ child, PID, child, PID }, { exit[1].pid, exit[1].ppid, exit[1].tid, exit[1].ptid })
    -- the fork record's own time, the trailers' times: in that order
    assert.is_true(fork[1].time <= comms[1].time and comms[1].time <= comms[2].time
                   and comms[2].time <= exit[1].time)
    assert.equal("fork", recs[1].type)
    assert.equal("exit", recs[#recs].type)
    s:close()
  end)

  it("mmap2 of a new file mapping: addr, len, pgoff, prot, flags, maj/min/ino as /proc/self/maps, stat show",
     function()
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write(("perfev"):rep(compat.idiv(4 * 4096, 6) + 1))
    f:close()
    local s = assert(perfev.sampler { event = "dummy", mmap2 = true, mmap_data = true })
    s:enable()
    local addr = assert(u.h.map_file(path, 8192, 4096))
    s:disable()
    local maps = assert(maps_line(addr), "the mapping is not in /proc/self/maps")
    local st = stat(path)
    local recs = where(collect(s), function(r) return r.type == "mmap2" and r.filename == path end)
    assert.equal(1, #recs)
    local m = recs[1]
    assert.same({ PID, PID, addr, 8192, 4096 }, { m.pid, m.tid, m.addr, m.len, m.pgoff })
    assert.equal(maps.pgoff, m.pgoff)
    assert.equal(PROT_READ, m.prot)
    assert.equal(MAP_SHARED, compat.band(m.flags, MAP_SHARED))
    assert.is_true(m.mmap_data)            -- not executable: reported for mmap_data
    assert.is_nil(m.build_id)              -- build_id not asked: the inode form
    assert.same({ maps.maj, maps.min, maps.ino }, { m.maj, m.min, m.ino })
    assert.same({ st.maj, st.min, st.ino }, { m.maj, m.min, m.ino })
    assert.is_number(m.ino_generation)
    assert.is_true(u.h.unmap(addr, 8192))
    os.remove(path)
    s:close()
  end)

  it("mmap2 of a library loaded with package.loadlib: its executable segment, inode form", function()
    local path = fresh_library()
    local s, recs = load_library(path)
    local st = stat(path)
    for _, m in ipairs(recs) do
      assert.equal(PID, m.pid)
      assert.equal(PROT_EXEC, compat.band(m.prot, PROT_EXEC))   -- without mmap_data: executable ones only
      assert.is_nil(m.mmap_data)
      local maps = assert(maps_line(m.addr), "no /proc/self/maps line at " .. m.addr)
      assert.matches("x", maps.perms)
      assert.same({ maps.pgoff, maps.ino, maps.maj, maps.min }, { m.pgoff, m.ino, m.maj, m.min })
      assert.same({ st.ino, st.maj, st.min }, { m.ino, m.maj, m.min })
    end
    os.remove(path)
    s:close()
  end)

  it("mmap2 with build_id = 1: the build id readelf reads, or the inode form when the kernel has none", function()
    local path = fresh_library()
    local want, why = readelf_build_id(path)
    if not want then
      os.remove(path)
      pending(why)
      return
    end
    local s, recs = load_library(path, true)
    local st = stat(path)
    for _, m in ipairs(recs) do
      if m.mmap_build_id then
        assert.equal(want, hex(m.build_id))
        assert.is_nil(m.ino)
      else   -- the kernel could not read the note: it says so by the form
        assert.is_nil(m.build_id)
        assert.equal(st.ino, m.ino)
      end
      assert.equal(maps_line(m.addr).pgoff, m.pgoff)
    end
    os.remove(path)
    s:close()
  end)

  it("switch records of this process (context_switch = 1): out and in alternate", function()
    local s = assert(perfev.sampler { event = "dummy", context_switch = true })
    s:enable()
    for _ = 1, 8 do u.h.sleep_ms(2) end
    s:disable()
    local recs = where(collect(s), function(r) return r.type == "switch" end)
    assert.is_true(#recs >= 16, #recs .. " switch records")
    local outs, voluntary = 0, 0
    for i, r in ipairs(recs) do
      assert.same({ PID, PID }, { r.pid, r.tid })   -- from the sample_id trailer
      -- sleeping switches this task out, waking switches it back in
      assert.equal(i % 2 == 1, r.switch_out == true, "record " .. i .. " out of turn")
      if r.switch_out then
        outs = outs + 1
        if not r.switch_out_preempt then voluntary = voluntary + 1 end
      end
      if i > 1 then assert.is_true(recs[i - 1].time <= r.time) end
    end
    assert.is_true(outs >= 8)
    assert.is_true(voluntary >= 8, voluntary .. " voluntary switches out for 8 sleeps")
    s:close()
  end)

  it("switch_cpu_wide on per-CPU events (pid = -1): each switch out pairs with the switch in after it", function()
    local s, msg, errno = perfev.sampler { event = "dummy", pid = -1, context_switch = true,
                                           sample_type = { "tid", "time", "cpu" }, pages = 64 }
    if not s and (errno == u.E.EACCES or errno == u.E.EPERM) then
      pending("CPU-wide events need perf_event_paranoid <= 0 or CAP_PERFMON: " .. msg)
      return
    end
    assert(s, msg)
    -- two busy children, so that sleeping hands the CPU to a task, not idle
    local loop = "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done"
    local busy = { assert(io.popen(loop)), assert(io.popen(loop)) }
    s:enable()
    for _ = 1, 20 do u.h.sleep_ms(1) end
    s:disable()
    for _, p in ipairs(busy) do p:close() end
    local per_cpu = {}
    for rec in s:records() do   -- every record: a lost one breaks a pair
      local l = per_cpu[rec.cpu] or {}
      per_cpu[rec.cpu] = l
      l[#l + 1] = rec
    end
    local ours, paired = 0, 0
    for _, list in pairs(per_cpu) do
      for i, r in ipairs(list) do
        if r.pid == PID then ours = ours + 1 end
        local nxt = list[i + 1]
        -- a switch both sides of which were written: the switch in that
        -- follows names this task as the one before. (Here the kernel
        -- writes neither side for the idle task on some CPUs, nor for
        -- pid 1's threads: such switches are not pairs.)
        if r.switch_out and r.tid ~= 0 and nxt and nxt.type == r.type and not nxt.switch_out
           and nxt.next_prev_tid == r.tid then
          assert.same({ r.next_prev_pid, r.next_prev_tid }, { nxt.pid, nxt.tid })
          assert.same({ r.pid, r.tid }, { nxt.next_prev_pid, nxt.next_prev_tid })
          assert.is_true(r.time <= nxt.time)
          paired = paired + 1
        end
      end
    end
    assert.is_true(ours >= 2, ours .. " switch records of this process")
    assert.is_true(paired >= 1, "no switch between two tasks was seen")
    s:close()
  end)
end)
