-- examples/embed: a C host (a game loop) that links perfev's core
-- statically and Lua statically, built with `make embed` for the runtime
-- running this suite (make test passes its LUA/LUA_PC in PERFEV_MAKE_ARGS).
local shell = require "spec.support.shell"
local C = require "perfev.compat"

local FRAMES = 300
local FRAME_PAGES = 16   -- host.c touches this many fresh pages a frame
local EVENTS = 3         -- game.lua's group

local function make_args()
  local args = os.getenv("PERFEV_MAKE_ARGS")
  if args and args ~= "" then return args end
  if C.luajit then return "LUA=luajit LUA_PC=luajit" end
  return ("LUA=lua%s"):format(_VERSION:match("%d+%.%d+"))
end

-- Runs cmd; returns its output and exit status (from the shell: LuaJIT's
-- popen:close() does not report it).
local function run(cmd)
  local out = shell.sh(cmd .. " 2>&1; echo \"exit=$?\"")
  local status = tonumber(out:match("exit=(%d+)%s*$"))
  return out:gsub("exit=%d+%s*$", ""), status
end

local function fields(out)
  local t = {}
  for k, v in out:gmatch("([%w_]+)=([^\n]*)") do t[k] = tonumber(v) or v end
  return t
end

local LPATH = "LUA_PATH='lua/?.lua;lua/?/init.lua;;'"

describe("examples/embed: a game-loop host linking perfev statically", function()
  local built, build_out
  setup(function()
    build_out, built = run("make -s embed " .. make_args())
  end)

  it("builds with make embed", function()
    assert.are.equal(0, built, build_out)
  end)

  it("finds perfev's Lua modules with no LUA_PATH, from anywhere, and says how to run it", function()
    local out, status = run("cd / && env -u LUA_PATH -u LUA_PATH_5_4 -u LUA_PATH_5_3 " .. shell.trim(shell.sh("pwd"))
                            .. "/build/embed/host " .. shell.trim(shell.sh("pwd")) .. "/examples/embed/game.lua 20")
    assert.are.equal(0, status, out)
    assert.are.equal(20, fields(out).frames, out)
    out, status = run("build/embed/host examples/embed/game.lua lots")
    assert.are.equal(2, status, out)
    assert.truthy(out:find("FRAMES must be a positive number\nusage: ", 1, true), out)
    out, status = run("build/embed/host nosuch.lua")
    assert.are.equal(2, status, out)
    assert.truthy(out:find("cannot read the game script", 1, true), out)
  end)

  it("reads the group once a frame, counts the frames' work and zones (from C too), and leaves no fd behind",
     function()
    local out, status = run(LPATH .. " build/embed/host examples/embed/game.lua " .. FRAMES)
    assert.are.equal(0, status, out)
    local f = fields(out)
    assert.are.equal(FRAMES, f.frames)
    -- every frame maps and touches FRAME_PAGES fresh pages
    assert.is_true(f.page_faults >= FRAMES * FRAME_PAGES, out)
    assert.is_true(f.task_clock_ns > 0, out)
    assert.is_true(f.context_switches >= 0, out)
    assert.are.equal(f.fds_before + EVENTS, f.fds_during, out)
    assert.are.equal(f.fds_before, f.fds_after, out)
    -- the per-frame table: mean, p50, p95, p99, max of each event, the
    -- means adding up to the totals, the percentiles in order, and the
    -- worst frames by task-clock, slowest first, the slowest at the max
    local rows = {}
    local ROW = "\n(%a[%a%- ]-) +([%d.]+) +([%d.]+) +([%d.]+) +([%d.]+) +([%d.]+)"
    for name, mean, p50, p95, p99, max in out:gmatch(ROW) do
      rows[name:gsub(" +$", "")] = { tonumber(mean), tonumber(p50), tonumber(p95), tonumber(p99), tonumber(max) }
    end
    local faults, clock = rows["page-faults"], rows["task-clock ms"]
    assert.truthy(faults and clock and rows["context-switches"], out)
    assert.is_true(math.abs(faults[1] * FRAMES - f.page_faults) < 1, out)
    assert.is_true(math.abs(clock[1] * FRAMES - f.task_clock_ns / 1e6) < 0.01 * FRAMES, out)
    for _, r in pairs(rows) do
      assert.is_true(r[2] <= r[3] and r[3] <= r[4] and r[4] <= r[5], out)
    end
    assert.is_true(faults[2] >= FRAME_PAGES, out)
    -- the zones: the host's world update marked from C (perfev_frames.h),
    -- with its FRAME_PAGES page faults a frame; the script's own two
    local zones, z = {}, nil
    for line in out:gmatch("[^\n]+") do
      local zone, calls = line:match("^  (%a+) %((%d+) calls%)$")
      if zone then
        z = { calls = tonumber(calls) }
        zones[zone] = z
      elseif z and line:match("^    %a") then
        local name, mean, p50 = line:match("^    (%a[%a%- ]-) +([%d.]+) +([%d.]+)")
        z[name] = { tonumber(mean), tonumber(p50) }
      else
        z = nil
      end
    end
    local world = zones.world
    assert.truthy(world and zones.think and zones.animate, out)
    -- gc = true (game.lua): the Lua GC's figures per frame and per zone,
    -- the zone marked from C too; the host's world update (C, its pages
    -- mmap'd) allocates nothing of Lua's, nor do its begin and end (on
    -- LuaJIT the compiler's traces of them do, in a few frames: up to
    -- 1.1 KiB, the median frame 0)
    assert.truthy(rows["alloc KiB"] and rows["free KiB"] and rows["gc-cycles"], out)
    if C.luajit then
      assert.are.equal(0, world["alloc KiB"][2], out)
    else
      assert.are.same({ 0, 0 }, world["alloc KiB"], out)
    end
    for _, zone in pairs(zones) do assert.are.equal(FRAMES, zone.calls, out) end
    assert.is_true(world["page-faults"][2] >= FRAME_PAGES, out)
    assert.is_true(world["page-faults"][1] * FRAMES <= f.page_faults, out)
    -- (each mean printed to 3 decimals: 0.002 for their rounding)
    assert.is_true(world["task-clock ms"][1] + zones.think["task-clock ms"][1] + zones.animate["task-clock ms"][1]
                   <= clock[1] + 0.002, out)
    local worst = {}
    for ms in out:gmatch("\n  frame %d+ +([%d.]+) ms  page%-faults %d+  context%-switches %d+") do
      worst[#worst + 1] = tonumber(ms)
    end
    assert.are.equal(5, #worst, out)
    assert.are.equal(clock[5], worst[1], out)
    for i = 2, #worst do assert.is_true(worst[i] <= worst[i - 1], out) end
    print(("\nembed (%s): %d frames, g:read(t) %d ns per frame read, raw read(2) of the same group %d ns "
           .. "(ratio %.2f), fds %d -> %d -> %d")
          :format(f.runtime, f.frames, f.read_ns, f.raw_read_ns, f.ratio, f.fds_before, f.fds_during, f.fds_after))
  end)

  it("profiles the frames' Lua from C (perfev.profile resumed and paused around game.frame)", function()
    local dir = shell.tmpdir()
    local out, status = run(("%s build/embed/host examples/embed/game.lua %d %s/frames.folded")
                            :format(LPATH, FRAMES, dir))
    local folded = shell.read_file(dir .. "/frames.folded") or ""
    shell.rmdir(dir)
    assert.are.equal(0, status, out)
    local f = fields(out)
    assert.is_true(f.profile_samples > 0, out)
    -- the frame's scripting: think and animate cost 3:1 by construction
    local think, animate, all = 0, 0, 0
    for line in folded:gmatch("[^\n]+") do
      local stack, w = line:match("^(.*) (%d+)$")
      w = tonumber(w)
      all = all + w
      if stack:match("game%.lua:%d+%);think %(examples/embed/game%.lua:%d+%)") then think = think + w end
      if stack:match("game%.lua:%d+%);animate %(examples/embed/game%.lua:%d+%)") then animate = animate + w end
    end
    local share = think / (think + animate)
    print(("\nembed profile (%s): %d samples, think:animate %.1f%%:%.1f%%, %.1f%% of the weight in them")
          :format(f.runtime, f.profile_samples, 100 * share, 100 * (1 - share), 100 * (think + animate) / all))
    assert.is_true(math.abs(share - 0.75) <= 0.05, ("think: %.3f"):format(share))
    -- paused outside game.frame: the host's C work (update_world: its page
    -- faults and loops) is not in it, most of the weight is the frames' Lua
    assert.is_true((think + animate) / all >= 0.6, ("%.3f"):format((think + animate) / all))
    assert.are.equal(f.fds_before, f.fds_after, out)
  end)

  it("writes the timeline: the host's zone (from C) and the script's, each frame's counts", function()
    local cjson = require "cjson"
    local dir = shell.tmpdir()
    local out, status = run(("%s build/embed/host examples/embed/game.lua 40 %s/game.trace.json "
                             .. "%s/game.speedscope.json"):format(LPATH, dir, dir))
    local trace = shell.read_file(dir .. "/game.trace.json")
    local ss = shell.read_file(dir .. "/game.speedscope.json")
    shell.rmdir(dir)
    assert.are.equal(0, status, out)
    assert.truthy(trace, out)
    local doc = cjson.decode(trace)
    local calls, faults, frames = {}, {}, 0
    for _, e in ipairs(doc.traceEvents) do
      if e.ph == "E" and e.cat == "zone" then
        calls[e.name] = (calls[e.name] or 0) + 1
        faults[e.name] = (faults[e.name] or 0) + e.args["page-faults"]
      end
      if e.ph == "E" and e.cat == "frame" then frames = frames + 1 end
    end
    -- 40 frames, each with the host's zone (marked from C) and the script's two
    assert.are.equal(40, frames)
    assert.same({ world = 40, think = 40, animate = 40 }, calls)
    -- the world update touches FRAME_PAGES fresh pages each frame
    assert.is_true(faults.world >= 40 * FRAME_PAGES, faults.world)
    local sdoc = cjson.decode(ss)
    local names = {}
    for _, f in ipairs(sdoc.shared.frames) do names[f.name] = true end
    assert.same({ frame = true, world = true, think = true, animate = true }, names)
    assert.are.equal(2, select(2, out:gsub("timeline=", "")))
  end)

  it("exports Lua's API from the host (-Wl,-E) so that shared C modules load beside the static core", function()
    local cjson_dir = C.luajit and "5.1" or _VERSION:match("%d+%.%d+")
    if not shell.exists("/usr/lib/x86_64-linux-gnu/lua/" .. cjson_dir .. "/cjson.so") then
      pending("lua-cjson for Lua " .. cjson_dir .. " is not installed (make deps installs it)")
      return
    end
    local dir = shell.tmpdir()
    local script = dir .. "/game.lua"
    local f = assert(io.open(script, "w"))
    f:write('local game = dofile("examples/embed/game.lua")\n',
            'assert(require("cjson").encode({ 1, 2 }) == "[1,2]")\n',
            'return game\n')
    f:close()
    local out, status = run(LPATH .. " build/embed/host " .. script .. " 10")
    shell.rmdir(dir)
    assert.are.equal(0, status, out)
    assert.are.equal(10, fields(out).frames)
  end)

  it("links a static library whose only global symbol is luaopen_perfev_core", function()
    local out, status = run("nm -g --defined-only build/libperfev.a | grep ' [A-Z] '")
    assert.are.equal(0, status, out)
    assert.are.same({ "luaopen_perfev_core" }, (function()
      local names = {}
      for name in out:gmatch(" [A-Z] ([%w_]+)") do names[#names + 1] = name end
      return names
    end)())
  end)
end)
