-- perfev.frames { gc = true }: the Lua GC's figures per frame (bytes
-- allocated and freed, collections; on LuaJIT with profile the collector's
-- time) beside the events, checked against a perfev.alloc.counter() of
-- the spec's own read after each mark, and against what the frames did.
local perfev = require "perfev"
local cjson = require "cjson"
local u = require "spec.support.util"

local JIT = rawget(_G, "jit")

-- A constant of 3,000 bytes: `A .. i` makes one string of 3,000 bytes and
-- i's digits (one allocation of the string, and the digits' own)
local A = ("a"):rep(3000)

local support = require "spec.support.frames"
local nearest_rank, copy = support.nearest_rank, support.copy

describe("perfev.frames { gc = true }", function()
  it("a frame's garbage and a forced collection are in their frames, as a counter of the spec's own reads them",
     function()
    local FRAMES, MAKE, COLLECT = 12, 5, 9
    local STRINGS = 100
    local kept = {}
    for i = 1, STRINGS do kept[i] = false end          -- the list's slots made before
    local made = 0
    for i = 1, STRINGS do made = made + #A + #tostring(i) end
    local fr = assert(perfev.frames { events = { "task-clock" }, gc = true, worst = 3, by = "alloc-bytes",
                                      timeline = true })
    local n = #fr.names
    assert.are.same({ "task-clock", "alloc-bytes", "free-bytes", "gc-cycles" }, fr.names)
    -- LuaJIT: its compiler off. A trace it compiles is an allocation at a
    -- moment of its choosing: between the mark's read and the spec's
    -- (6,984 bytes against 288 in one run of four)
    if JIT then
      JIT.off()
      JIT.flush()
    end
    local c = perfev.alloc.counter()                   -- the spec's own, read after each mark
    local ct = c:read()
    c:read(ct)
    local raw = { { alloc_bytes = ct.alloc_bytes, free_bytes = ct.free_bytes, gc_cycles = ct.gc_cycles } }
    local reads = { copy(fr.counts, n) }
    -- the zones made now: their rings (keep values a figure) are no frame's garbage
    fr:zone_begin("make"):finish()
    fr:zone_begin("idle"):finish()
    collectgarbage()
    collectgarbage("stop")                             -- the collections are the frames' own
    fr:reset()
    c:read(ct)
    raw[1] = { alloc_bytes = ct.alloc_bytes, free_bytes = ct.free_bytes, gc_cycles = ct.gc_cycles }
    reads[1] = copy(fr.counts, n)
    for f = 1, FRAMES do
      if f == MAKE then
        local z = fr:zone_begin("make")
        -- a zone of nothing, at a depth new in this frame: perfev's tables
        -- for the depth are made before its begin, not in it
        fr:zone_begin("idle"):finish()
        for i = 1, STRINGS do kept[i] = A .. i end
        z:finish()
      elseif f == COLLECT then
        for i = 1, STRINGS do kept[i] = false end     -- garbage now
        collectgarbage()
        collectgarbage("stop")                         -- (LuaJIT's full collection starts it again)
      end
      fr:mark()
      c:read(ct)
      raw[f + 1] = { alloc_bytes = ct.alloc_bytes, free_bytes = ct.free_bytes, gc_cycles = ct.gc_cycles }
      reads[f + 1] = copy(fr.counts, n)
    end
    collectgarbage("restart")
    if JIT then JIT.on() end
    assert.are.equal(false, kept[STRINGS])             -- (the strings were garbage since COLLECT)
    local st = fr:stats()
    local report = fr:report()
    local tl = fr:timeline()
    local vals = {}
    for _, name in ipairs { "alloc-bytes", "free-bytes", "gc-cycles" } do vals[name] = fr:values(name) end
    local idle, make = fr:values("alloc-bytes", "idle"), fr:values("alloc-bytes", "make")
    fr:close()
    c:close()
    local per = {}
    for k, name in ipairs { "alloc-bytes", "free-bytes", "gc-cycles" } do
      local i = 1 + k
      local field = name:gsub("-", "_")
      per[name] = {}
      for f = 1, FRAMES do
        local v = reads[f + 1][i] - reads[f][i]
        per[name][f] = v
        -- the spec's counter read just after the mark: the same figure
        assert.are.equal(raw[f + 1][field] - raw[f][field], v, ("%s, frame %d"):format(name, f))

      end
      local total, max = 0, per[name][1]
      for f = 1, FRAMES do
        total = total + per[name][f]
        if per[name][f] > max then max = per[name][f] end
      end
      local e = st.events[name]
      assert.are.equal(e, st.events[i])
      assert.are.equal(total, e.total, name)
      assert.are.equal(total / FRAMES, e.mean, name)
      assert.are.equal(max, e.max, name)
      assert.are.equal(nearest_rank(per[name], 50), e.p50, name)
      assert.are.equal(nearest_rank(per[name], 95), e.p95, name)
      assert.are.equal(nearest_rank(per[name], 99), e.p99, name)
      assert.are.same(per[name], vals[name])
    end
    -- what the frames did: the strings made in MAKE (within 5 %: their
    -- headers and the digits' strings), one collection in COLLECT and none
    -- elsewhere, freeing the strings
    local got = per["alloc-bytes"][MAKE]
    assert.is_true(got >= made and got <= made * 1.05, ("frame %d: %d bytes allocated for %d made\n%s")
                   :format(MAKE, got, made, report))
    for f = 1, FRAMES do
      assert.are.equal(f == COLLECT and 1 or 0, per["gc-cycles"][f], ("frame %d\n%s"):format(f, report))
    end
    assert.is_true(per["free-bytes"][COLLECT] >= made, report)
    -- the zones: the strings in theirs, nothing in the empty one at its new depth
    assert.is_true(make[MAKE] >= made and make[MAKE] <= got, report)
    for f = 1, FRAMES do
      assert.are.equal(0, idle[f], ("idle, frame %d\n%s"):format(f, report))
      if f ~= MAKE then assert.are.equal(0, make[f]) end
    end
    -- the worst frame by alloc-bytes is the one that made the strings
    assert.are.equal(MAKE, st.worst[1].frame, report)
    assert.are.equal(got, st.worst[1].counts["alloc-bytes"])
    assert.truthy(report:find("\nalloc KiB +[%d.]+", 1), report)
    assert.truthy(report:find("\ngc%-cycles +0%.083 +0%.000 +1%.000 +1%.000 +1%.000\n"), report)
    assert.truthy(report:find("worst 3 frames by alloc%-bytes:\n  frame 5 +alloc%-bytes [%d.]+ KiB"), report)
    -- the timeline: each figure a counter track, a value a frame
    local doc = cjson.decode(tl:format("chrome"))
    local track = { ["alloc-bytes"] = {}, ["free-bytes"] = {}, ["gc-cycles"] = {} }
    for _, e in ipairs(doc.traceEvents) do
      if e.ph == "C" and track[e.name] then
        local t = track[e.name]
        t[#t + 1] = e.args.value
      end
    end
    for name, t in pairs(track) do assert.are.same(per[name], t, name) end
    print(("\n%s"):format(report))
  end)

  it("a mark and nested zones with gc on allocate nothing, and count no allocation of their own", function()
    local fr = assert(perfev.frames { worst = 5, keep = 64, gc = true })
    local frames = support.nested_frames(fr)
    local grown = support.least_growth(frames, 10000, function() fr:reset() end)
    local st = fr:stats()
    fr:close()
    assert.are.equal(0, grown, ("%.3f KiB allocated by 10000 frames"):format(grown))
    assert.are.equal(30000, st.frames)
    -- the allocator's own count: not a byte in any frame or zone
    assert.are.equal(0, st.events["alloc-bytes"].max)
    assert.are.equal(0, st.zones.update.events["alloc-bytes"].max)
    assert.are.equal(0, st.events["gc-cycles"].total)
  end)

  it("the collector's time per frame: LuaJIT's [GC] samples with profile, not measured on PUC Lua", function()
    local fr = assert(perfev.frames { events = { "task-clock" }, gc = true, profile = true, worst = 1 })
    local timed = fr.names[#fr.names] == "gc-time"
    if not JIT or not JIT.status() then
      fr:close()
      -- PUC Lua (and LuaJIT's hook engine, its compiler off): no sample
      -- is taken inside the collector; no figure rather than a wrong one
      assert.is_false(timed)
      print("\n  frames gc: no gc-time on " .. _VERSION .. " (not measured: doc/games.md)")
      return
    end
    assert.is_true(timed)
    -- a heap of 200,000 tables to traverse: three full collections in
    -- frame COLLECT, none elsewhere
    local heap = {}
    for i = 1, 200000 do heap[i] = { i } end
    local COLLECT = 4
    collectgarbage()
    collectgarbage("stop")
    fr:reset()
    for f = 1, 8 do
      local s = 0
      for i = 1, 2000000 do s = s + i % 7 end
      if f == COLLECT then
        for _ = 1, 3 do collectgarbage() end
        collectgarbage("stop")
      end
      fr:mark()
    end
    collectgarbage("restart")
    local gct, clock = fr:values("gc-time"), fr:values("task-clock")
    local report = fr:report()
    fr:close()
    assert.are.equal(200000, #heap)                      -- (live through the collections)
    for f = 1, 8 do
      if f == COLLECT then
        assert.is_true(gct[f] >= 0.5 * (clock[f] - clock[1]) and gct[f] <= clock[f],
                       ("frame %d: gc-time %.3f ms of %.3f ms\n%s"):format(f, gct[f] / 1e6, clock[f] / 1e6, report))
      else
        assert.are.equal(0, gct[f], ("frame %d\n%s"):format(f, report))
      end
    end
    print(("\n  frames gc: gc-time %.3f ms of the frame's %.3f ms (3 full collections)")
          :format(gct[COLLECT] / 1e6, clock[COLLECT] / 1e6))
  end)

  it("its counter closed under a counter made after it is taken out: that one counts on, the state closes", function()
    -- csrc/allocprof: an allocator closed under another of perfev's stayed
    -- in the chain, and lua_close's last frees called it after the core was
    -- unloaded (a crash at exit)
    local code = [[
      local perfev = require "perfev"
      local fr = assert(perfev.frames { events = { "task-clock" }, gc = true })
      local c = perfev.alloc.counter()
      local t = c:read()
      local b0 = t.alloc_bytes
      fr:close()                   -- its counter is under c's
      fr = nil
      collectgarbage()             -- its finalizers run while c's is over it
      collectgarbage()
      local keep = {}
      for i = 1, 100 do keep[i] = ("b"):rep(1000) .. i end
      c:read(t)
      c:close()
      io.write(("counted %d "):format(t.alloc_bytes - b0 >= 100000 and 1 or 0))
    ]]
    local tmp = os.tmpname()
    local f = assert(io.open(tmp, "w"))
    f:write(code)
    f:close()
    local out = u.sh(("%s%s %s 2>&1; echo rc=$?"):format(u.lua_env(), u.lua_interpreter(), tmp))
    os.remove(tmp)
    assert.truthy(out:find("counted 1 rc=0", 1, true), out)
  end)

  it("names the caller's mistakes", function()
    local ok, err = pcall(perfev.frames, { gc = 1 })
    assert.truthy(not ok and err:find("frames_gc_spec.lua:%d+: .*'gc'"), err)
    ok, err = pcall(perfev.frames, { by = "gc-time", events = { "task-clock" } })
    assert.truthy(not ok and err:find("frames_gc_spec.lua:%d+: perfev.frames: option 'by' must name"), err)
    local fr = assert(perfev.frames { gc = true, by = "gc-cycles" })
    assert.are.equal(6, fr.by)
    ok, err = pcall(fr.values, fr, "gc-time")
    assert.truthy(not ok and err:find("no event 'gc%-time'"), err)
    fr:close()
  end)
end)
