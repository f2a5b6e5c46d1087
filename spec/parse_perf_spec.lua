-- perfev.parse against the perf tool: for every string below, perfev.parse
-- must build the attrs `perf stat -vv -e STRING true` prints, and reject
-- what perf rejects.
--
-- Compared fields (what perf's event parser decides): type, config,
-- config1 (= bp_addr), config2 (= bp_len), bp_type, precise_ip,
-- exclude_user, exclude_kernel, exclude_hv, exclude_idle, exclude_host,
-- exclude_guest, pinned, exclusive. Not compared (perf stat's own
-- additions): size, sample_type, read_format, disabled, inherit,
-- enable_on_exec, sample_period/freq (perf stat drops period= terms).
--
-- perf -vv prints one attr block per open attempt. perf retries a failed
-- open with fallbacks (cloexec, exclude_guest, precise_ip - 1, ...); a
-- block is a new event only when the one before it opened, or perf gave up
-- on it ("Warning: ... not supported"). When a group's hardware leader
-- fails, perf opens no members: the comparison then covers the members
-- perf printed. Tracepoint globs expand in directory order in perf and in
-- name order in perfev: those are compared sorted by config.
--
-- Skipped, with the reason printed, when perf is absent.
local parse = require "perfev.parse"
local names = require "perfev.names"
local cache = require "perfev.cache"
local fs = require "perfev.fs"
local tracepoint = require "perfev.tracepoint"
local shell = require "spec.support.shell"
local compat = require "perfev.compat"

local sh = shell.sh

local PERF = shell.trim(sh("command -v perf 2>/dev/null"))
if PERF ~= "" and sh(PERF .. " --version 2>/dev/null") == "" then PERF = "" end
local HAVE_TRACEFS = tracepoint.root() ~= nil

---------------------------------------------------------------------------
-- the strings

local accept, reject, unordered = {}, {}, {}
local function A(s, opts)
  accept[#accept + 1] = s
  if opts == "unordered" then unordered[s] = true end
end
local function R(s) reject[#reject + 1] = s end

-- generic names and every alias
for _, kind in ipairs { names.hardware, names.software } do
  for _, row in ipairs(kind) do
    A(row[1])
    for i = 3, #row do A(row[i]) end
  end
end

-- modifiers: each one, then pairs and a few longer strings
local SINGLE = { "u", "k", "h", "I", "G", "H", "p", "pp", "ppp", "P", "S", "D", "W", "e", "b" }
for _, m in ipairs(SINGLE) do
  A("cycles:" .. m)
  A("cpu-clock:" .. m)
end
local PAIR = { "u", "k", "h", "G", "H", "I", "p", "D", "e" }
for _, a in ipairs(PAIR) do
  for _, b in ipairs(PAIR) do
    if a ~= b then A("instructions:" .. a .. b) end
  end
end
for _, m in ipairs { "ukh", "hku", "uGH", "HGu", "kHp", "pGu", "upp", "ppu", "pppu", "Dep", "ukhIGHpSDWe",
                     "Pu", "pP", "uI", "IuG", "Sp", "bu" } do
  A("cycles:" .. m)
end
A("task-clock:u")
A("faults:k")
for _, m in ipairs { "uu", "kk", "u:k", "x", "pppp", "PP", "DD", "ee", "GG", "II", "U", ":u", "u:" } do
  R("cycles:" .. m)
end
-- an empty modifier after an event (not after a group) is accepted
for _, s in ipairs { "cycles:", "cycles:,cs", "r1a8:", "L1-dcache-loads:", "mem:0x1000:", "mem:0x1000:w:" } do
  A(s)
end
R("{cs,faults}:")

-- hardware cache names, with every alias, and invalid cache/op pairs
for _, ev in ipairs(cache.events()) do A(ev[1]) end
local SUFFIX = { "", "-load", "-loads", "-read", "-store", "-stores", "-write", "-prefetch",
                 "-prefetches", "-speculative-read", "-speculative-load", "-refs", "-Reference",
                 "-ops", "-access", "-misses", "-miss", "-load-misses", "-store-miss",
                 "-prefetch-refs", "-misses-load", "-refs-store", "-load-store",
                 "-prefetch-prefetch", "-misses-misses" }
for _, c in ipairs(cache.caches) do
  for i = 1, #c do
    if i == 1 or i >= 4 then
      for _, suf in ipairs(SUFFIX) do
        local s = c[i] .. suf
        local ok = pcall(parse.parse, s)
        if ok then A(s) else R(s) end       -- perf must agree either way
      end
    end
  end
end
A("L1-dcache-load-misses:u")
A("LLC-loads:pp")
for _, s in ipairs { "l1-dcache-loads", "L1-DCACHE-LOADS", "LLC-LOADS", "LLC-Load",
                     "L1-dcache-load-miss-miss", "L1-dcache-load-misses-x", "L1-dcache-load-misses/",
                     "LLC-foo", "L1-dcache-", "branch-misses-load", "branch-instructions-loads",
                     "CYCLES", "Cycles", "cpu_cycles", "CPU-CLOCK", "cyclez",
                     "sched_switch" } do
  R(s)
end

-- raw events
for _, s in ipairs { "r0", "r1a8", "rabc", "r1A8", "rffffffffffffffff", "r1a8:u", "r1a8:ppp",
                     "r003c:kH" } do
  A(s)
end
for _, s in ipairs { "R1a8", "r", "rg", "r12345678901234567", "r1a8:q" } do R(s) end

-- numeric TYPE:CONFIG events (issue 10 #1), alone, with terms, modifiers,
-- in lists and in named groups
for _, s in ipairs { "1:1", "1:1:hp", "1:3:u", "0x1:0x3", "01:1", "1: 1", "1 :1", "1:1 :u", "1:1:", "1:1//",
                     "1:1/name=x/", "1:1/name=x/u", "1:1/name=x/:u", "1:1/period=100000/", "1:1/config=3/",
                     "4:0x6530160/name=numpmu/", "2:0x174", "3:0x10000", "1:1,cs", "cs,1:1:k",
                     "{1:1,cs}:u", "{1:1:k,1:3}", "group1{cpu-clock,1:3},group2{1:1,1:3}:G" } do
  A(s)
end
for _, s in ipairs { "1:r1", "1:1:1", "1:-1", "1:", "1:1/umask=1/", "1:0x10000000000000000", "1:1/u" } do
  R(s)
end

-- breakpoints
for _, s in ipairs { "mem:0x1000", "mem:0x1000:r", "mem:0x1000:w", "mem:0x1000:x", "mem:0x1000:rw",
                     "mem:0x1000:wr", "mem:0x1000:rwx", "mem:0x1000:rx", "mem:0x1000/8", "mem:0x1000/2:w",
                     "mem:4096", "mem:0x1000/8:x", "mem:0x1000:u", "mem:0x1000:rw:u", "mem:0x1000/2:w:k",
                     "mem:0x1000/3", "mem:0x1000/16", "mem:0", "mem:0x1000:k", "mem:0x1000:wk",
                     "mem:010", "mem:0x1000/0x4", "mem:0x1000:rwu", "mem:0x1000:rwxuk", "mem:0x1000:up",
                     "mem:0x1000:p", "mem:0x1000/4:rw:uk", "mem:0xffffffffffffff00:x" } do
  A(s)
end
for _, s in ipairs { "mem:0x1000:kw", "mem:0x1000:rr", "mem:0x1000:xx", "mem:0x1000:u:k",
                     "mem:0x1000/4:ru:k", "mem:0X1000", "mem:0x1000/4/", "mem:", "mem:x" } do
  R(s)
end

-- tracepoints (tracefs must be mounted; the spec below says so when not)
if HAVE_TRACEFS then
  A("sched:sched_switch")
  A("sched:sched_wakeup:u")
  A("raw_syscalls:sys_enter:k")
  A("sched:sched_switch,sched:sched_wakeup")
  A("sched:sched_process_*", "unordered")
  A("sched:*exec", "unordered")
  A("sch*:sched_switch")
  A("sched:sched_proc?ss_exec")
  A("sched:sched_switch:")
  if fs.exists((tracepoint.root()) .. "/events/syscalls/sys_enter_openat/id") then
    A("syscalls:sys_enter_openat")
  end
  for _, s in ipairs { "sched:nonexist", "nope:sched_switch", "sched:", "sched:sched_switch:x",
                       "*:sched_switch", "sched:sched_nope*", "sched:sched_switch/name=x/" } do
    R(s)
  end
end

-- PMUs of this machine's sysfs (software, tracepoint, breakpoint, msr, uprobe)
for _, s in ipairs { "software/config=1/", "software/config=1/u", "software/config=0x3,config1=7,config2=9/",
                     "software/r1/", "software/r0x3/", "software/config=1,config1/",
                     "software/config=1,config=2/", "software/config=1,period=1000/", "software/period/",
                     "breakpoint/config=1/", "cpu-clock/config=3/", "cpu-clock/config1=3/",
                     "cpu-clock/name=foo/u", "cpu-clock/period=1000/", "cycles//", "r1a8/name=x/",
                     "L1-dcache-loads/name=x/" } do
  A(s)
end
local function have_pmu(p) return fs.exists("/sys/bus/event_source/devices/" .. p .. "/type") end
if have_pmu("msr") then
  for _, s in ipairs { "msr/tsc/", "msr/tsc/u", "msr/event=0x0/", "msr/event=1/", "msr/config=5/",
                       "msr/tsc,config1=3/", "msr/event=0x00,name=foo/", "msr/event/",
                       "msr/event=0x1234567890/", "msr//", "msr/config=10/", "tsc", "TSC", "tsc:u",
                       "msr/TSC/", "msr/tsc/pp", "msr/tsc/uk", "msr/tsc,event=2/", "msr/event=2,tsc/",
                       "msr/event=1,config=4/", "msr/config=4,event=1/", "msr/event=1,event=2/",
                       "msr/tsc,name='a,b'/", "msr/tsc/,cs", "msr/tsc/,msr/event=1/u" } do
    A(s)
  end
  for _, s in ipairs { "msr/foo/", "MSR/tsc/", "m*/tsc/", "msr/tsc/:u", "msr/tsc/x", "msr/config=0b1/",
                       "msr/tsc" } do
    R(s)
  end
end
if have_pmu("uprobe") then
  for _, s in ipairs { "uprobe/config=1/", "uprobe/retprobe/", "uprobe/retprobe=1,ref_ctr_offset=5/",
                       "uprobe/retprobe=0/", "uprobe/retprobe,config=2/", "uprobe/config=2,retprobe/" } do
    A(s)
  end
  R("uprobe/retprobe=2/")
end
if HAVE_TRACEFS then A("tracepoint/config=0x174/") end
for _, s in ipairs { "software/cpu-clock/", "breakpoint/bp_addr=0x1000/", "nopmu/config=1/",
                     "software/config=-1/", "cpu-clock/umask=1/", "software/config=1", "/config=1/" } do
  R(s)
end

-- groups and lists
for _, s in ipairs { "{cpu-clock,task-clock}", "{cycles,instructions}:u", "{cycles:k,instructions}:u",
                     "{cpu-clock:k,task-clock}:G", "{cpu-clock:G,task-clock}:H", "{cpu-clock,task-clock:p}:k",
                     "{cpu-clock:u,task-clock}:p", "{cpu-clock,task-clock}:S", "{cpu-clock,task-clock}:D",
                     "{cpu-clock,task-clock}:e", "{cpu-clock,task-clock}:W", "{cpu-clock,task-clock:D}",
                     "{cpu-clock,task-clock:e}:u", "cpu-clock,task-clock:u", "cpu-clock,{task-clock,faults}:k,cs",
                     "{cpu-clock}", "{cpu-clock},{cs}", "{cpu-clock:u}:u", "{cpu-clock:pp}:p",
                     "{cpu-clock:p}:pp", "{cpu-clock:I}:I", "{cpu-clock:H}:G", "group_name{cpu-clock,cs}",
                     "cpu-clock:u,cs:k", "{cs,faults,migrations}:kH", "{cpu-clock:D,task-clock}:e",
                     "{mem:0x1000:w,cpu-clock}:u" } do
  A(s)
end
for _, s in ipairs { "{cpu-clock,task-clock}:uu", "{cpu-clock,{cs}}", "{}", "cpu-clock,", ",cpu-clock",
                     "cpu-clock,,cs", "{cpu-clock:pp}:pp", "{cpu-clock,cs}:x", "{cpu-clock,cs}u" } do
  R(s)
end

-- whitespace between tokens, where perf's lexer takes it
for _, s in ipairs { "cs, faults", "cs ,faults", " cs", "cs ", "{cs, faults}", "{ cs,faults }", "{cs,faults} :u",
                     "cs :u", "cs: u", "cs:\tu", "cs : u", "cs: ", "cs :", "{cs , faults } : k", "{cs,faults}: u",
                     "software/config=1, config1=2/", "software/ config=1/", "software/config = 1/",
                     "software/config=1 /", "software/config=1/ u", "software /config=1/", "cs,  faults",
                     "cs\t,faults", "{cs,faults}, migrations", "r1a8 :u", "L1-dcache-loads :u",
                     "mem:0x1000 /8", "mem:0x1000/ 8", "mem: 0x1000", "mem:0x1000 :u", "mem:0x1000:w :u",
                     "mem:0x1000:w: u", "mem:0x1000 ,cs", " mem:0x1000", "{mem:0x1000 }", "{ cs }:u",
                     "g {cs}", "g{cs} ,faults", "cs:u ,faults", "cpu-clock/name= x/", "cpu-clock/ name=x /",
                     "cpu-clock/ period = 100 /" } do
  A(s)
end
for _, s in ipairs { "c s", "cs:u k", "r 1a8", "mem :0x1000", "mem:0x1000 :w", "mem:0x1000/8 :w",
                     "mem:0x1000: w", "cs ,", "cpu-clock/name=a b/" } do
  R(s)
end
if HAVE_TRACEFS then
  for _, s in ipairs { "sched: sched_switch", "sched :sched_switch", "sched:sched_switch :u",
                       "sched:sched_switch, cs" } do
    A(s)
  end
end
if have_pmu("msr") then
  for _, s in ipairs { "msr/ tsc /", "msr/event = 1/", "msr/tsc/ ,cs" } do A(s) end
end

-- quoting: single quotes, no spaces or '/' inside; string terms take no number
for _, s in ipairs { "cpu-clock/name='a,b'/", "cpu-clock/name='a:b'/", "cpu-clock/name='a=b.c'/" } do A(s) end
for _, s in ipairs { 'cpu-clock/name="a,b"/', "cpu-clock/name='a/b'/", "cpu-clock/name=''/", "cpu-clock/name='a b'/",
                     "cpu-clock/name=a'b'/", "cpu-clock/name=1/", "cpu-clock/metric-id='x y'/", "'cpu-clock'" } do
  R(s)
end

-- tool events: perf 6.1 opens a dummy software event for each
for _, s in ipairs { "duration_time", "user_time", "system_time", "duration_time:u", "user_time:k",
                     "system_time:u", "cpu-clock,duration_time", "{cpu-clock,duration_time}", "{duration_time}",
                     "duration_time,user_time" } do
  A(s)
end
R("duration_time/name=x/")

-- Deliberate differences from this perf (documented in the report):
-- perf 6.1 rejects r0xNNN at the top level; newer perf accepts it and the
-- issue asks for it. Checked on our side only.
local DEVIATIONS = { ["r0x1a8"] = 0x1a8, ["r0x0"] = 0 }

---------------------------------------------------------------------------
-- running perf (in parallel, once) and reading its attrs

-- run_all(strings, command): perf COMMAND -vv -e STRING true for each, in
-- parallel; "record" writes its perf.data beside the output, in the temporary directory.
local function run_all(strings, command)
  local dir = shell.tmpdir()
  local list = dir .. "/list"
  local f = assert(io.open(list, "wb"))
  for i, s in ipairs(strings) do f:write(i, "\0", s, "\0") end
  f:close()
  -- perf record opens (and prints) its events before it execs the workload,
  -- so a workload that cannot exec gives the same attrs without running
  -- `true` under a 1 us or 10 ns cpu-clock period (14 s each, idle).
  local cmd, workload = "stat", "true"
  if command == "record" then
    cmd, workload = "record -o \"$0/$1.data\"", "/nonexistent/perfev-no-workload"
  end
  sh(("xargs -0 -n 2 -P 8 sh -c '%s %s -vv -e \"$2\" %s >\"$0/$1\" 2>&1; exit 0' %s < %s")
     :format(PERF, cmd, workload, dir, list))
  local out = {}
  for i = 1, #strings do out[i] = fs.read(dir .. "/" .. i) or "" end
  shell.rmdir(dir)
  return out
end

local FIELD = {
  type = "type", config = "config", bp_type = "bp_type", precise_ip = "precise_ip",
  exclude_user = "exclude_user", exclude_kernel = "exclude_kernel", exclude_hv = "exclude_hv",
  exclude_idle = "exclude_idle", exclude_host = "exclude_host", exclude_guest = "exclude_guest",
  pinned = "pinned", exclusive = "exclusive",
  ["{ bp_addr, config1 }"] = "config1", ["{ bp_len, config2 }"] = "config2",
  config1 = "config1", config2 = "config2",
}
local COMPARED = { "type", "config", "config1", "config2", "bp_type", "precise_ip", "exclude_user",
                   "exclude_kernel", "exclude_hv", "exclude_idle", "exclude_host", "exclude_guest",
                   "pinned", "exclusive" }

-- perf's numbers exact on every runtime (64-bit words above 2^53 too).
local function tonum(s)
  if s:match("^0x%x+$") then return compat.hex64(s) end
  if s:match("^%d+$") then return compat.dec64(s) end
  return compat.tointeger(tonumber(s))
end

-- perf's output -> list of attrs (one per event), per the rule in the header
local function perf_attrs(out)
  local events, cur, last_ok, gave_up = {}, nil, true, false
  local inblock = false
  for line in (out .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^perf_event_attr:") then
      inblock = true
      cur = {}
      for _, k in ipairs(COMPARED) do cur[k] = 0 end
    elseif inblock and line:match("^%-%-%-%-") then
      inblock = false
      if last_ok or gave_up then events[#events + 1] = cur end
      last_ok, gave_up = false, false
    elseif inblock then
      local key, val = line:match("^  (.-)%s%s+(%S+)$")
      if key and FIELD[key] then cur[FIELD[key]] = tonum(val) end
    elseif line:match("^sys_perf_event_open:.* = %d+$") then
      last_ok = true
    elseif line:match("^Warning:") then
      gave_up = true
    end
  end
  return events
end

local function ours(t)
  local r = {}
  for _, k in ipairs(COMPARED) do
    local v = t[k]
    if k == "config1" then v = t.config1 or t.bp_addr end
    if k == "config2" then v = t.config2 or t.bp_len end
    if v == true then v = 1 elseif v == false or v == nil then v = 0 end
    r[k] = v
  end
  return r
end

local function show(e)
  local s = {}
  for _, k in ipairs(COMPARED) do
    if e[k] ~= 0 then s[#s + 1] = ("%s=%s"):format(k, k:match("config") and ("0x%x"):format(e[k]) or e[k]) end
  end
  return "{" .. table.concat(s, " ") .. "}"
end

local function by_config(a, b)
  if a.type ~= b.type then return a.type < b.type end
  return a.config < b.config
end

describe("perfev.parse against perf stat -vv #perf_heavy", function()
  if PERF == "" then
    pending("perf is not installed (package linux-perf): the comparison with perf stat -vv cannot run")
    return
  end
  if not HAVE_TRACEFS then
    print("parse_perf_spec: tracefs is not mounted: tracepoint strings left out "
          .. "(mount -t tracefs nodev /sys/kernel/tracing)")
  end

  local all = {}
  for _, s in ipairs(accept) do all[#all + 1] = s end
  for _, s in ipairs(reject) do all[#all + 1] = s end
  local outputs = run_all(all, "stat")
  local perf_out = {}
  for i, s in ipairs(all) do perf_out[s] = outputs[i] end

  it(("covers a broad list: %d accepted and %d rejected strings"):format(#accept, #reject), function()
    assert.is_true(#accept >= 300, "accepted strings: " .. #accept)
    assert.is_true(#reject >= 60, "rejected strings: " .. #reject)
  end)

  describe("accepted by perf", function()
    for _, s in ipairs(accept) do
      it(s, function()
        local want = perf_attrs(perf_out[s])
        assert(#want > 0, "perf did not accept '" .. s .. "':\n" .. perf_out[s])
        local got = parse.list(s)
        assert.is_true(#want <= #got, ("'%s': perf made %d events, perfev %d"):format(s, #want, #got))
        if #want < #got then
          -- only when perf stopped at a failed hardware group leader
          assert.matches("not supported", perf_out[s], 1, true)
        end
        local mine = {}
        for i, t in ipairs(got) do mine[i] = ours(t) end
        if unordered[s] then
          table.sort(want, by_config)
          table.sort(mine, by_config)
        end
        for i = 1, #want do
          assert.equal(show(want[i]), show(mine[i]), ("'%s' event %d"):format(s, i))
        end
      end)
    end
  end)

  describe("rejected by perf", function()
    for _, s in ipairs(reject) do
      it(s, function()
        assert.same({}, perf_attrs(perf_out[s]), "perf accepted '" .. s .. "'")
        local ok, err = pcall(parse.parse, s)
        assert.is_false(ok, "perfev accepted '" .. s .. "'")
        -- an unknown name also says where to look
        assert.matches("^spec/parse_perf_spec%.lua:%d+: perfev%.parse: .+ at position %d+$", (err:gsub(
          "; perfev%.list%(%) shows the events of this machine$", "")))
      end)
    end
  end)

  describe("deliberate differences", function()
    for s, config in pairs(DEVIATIONS) do
      it(s .. " (perf 6.1 rejects it; newer perf and perfev accept it)", function()
        local t = parse.parse(s)
        assert.equal(4, t.type)
        assert.equal(config, t.config)
      end)
    end
  end)
end)

---------------------------------------------------------------------------
-- Record-time terms (period, freq, call-graph, stack-size, max-stack,
-- inherit, overwrite, time, branch_type, aux-output ...): perf stat refuses
-- them, so they are compared with `perf record -vv -e STRING true`, as the
-- change each string makes to the attr of its bare event (perf record adds
-- its own defaults: IP|TID|TIME|PERIOD, freq 4000, inherit). For every
-- field below perfev must set what perf changed, and whatever perfev sets
-- must equal perf's value. sample_type bits perf adds must be in perfev's;
-- perfev may set no bit perf lacks; a bit perf drops must be explained:
-- PERIOD by a fixed period (freq = false), TIME by time=0.

local rec_accept, rec_reject, rec_base = {}, {}, {}
local function RA(s, base)
  rec_accept[#rec_accept + 1] = s
  rec_base[s] = base or "cpu-clock"
end
local function RR(s) rec_reject[#rec_reject + 1] = s end

for _, t in ipairs { "period=1000", "period=0", "period=0x10", "freq=99", "freq=0", "freq=99,period=100",
                     "period=100,freq=99", "call-graph=fp", "call-graph=dwarf", "call-graph=lbr", "call-graph=no",
                     "call-graph=fp,call-graph=no", "call-graph=no,call-graph=fp", "call-graph=dwarf,stack-size=4096",
                     "stack-size=4096,call-graph=dwarf", "call-graph=dwarf,stack-size=100", "stack-size=8192",
                     "max-stack=5", "max-stack=5,call-graph=fp", "call-graph=dwarf,max-stack=3",
                     "call-graph=lbr,max-stack=7", "inherit", "inherit=0", "inherit=1", "no-inherit", "overwrite",
                     "overwrite=0", "no-overwrite", "time", "time=0", "time=1", "percore", "percore=0", "aux-output",
                     "aux-output=0", "nr=5", "metric-id=x", "name=foo", "period=1000,time=0,no-inherit",
                     "call-graph=dwarf,period=5000,overwrite", "branch_type=any,period=10" } do
  RA("cpu-clock/" .. t .. "/")
end
for f in pairs(parse.BRANCH_FILTERS) do RA("cpu-clock/branch_type=" .. f .. "/") end
for _, s in ipairs { "cpu-clock/period=1000/u", "cpu-clock/call-graph=fp/k",
                     "cpu-clock/ period = 1000 , call-graph = fp /" } do
  RA(s)
end
for _, t in ipairs { "period=2000", "freq=10", "call-graph=dwarf", "no-inherit" } do
  RA("task-clock/" .. t .. "/", "task-clock")
  RA("software/config=1," .. t .. "/", "software/config=1/")
end
for _, t in ipairs { "time=2", "percore=2", "branch_type=bogus", "branch_type=hw_index", "call-graph=dwarf,4096",
                     "driver-config=x", "name=1", "call-graph=1", "period=abc", "branch_type=u|k" } do
  RR("cpu-clock/" .. t .. "/")
end
RR("software/config=1,driver-config=x/")
if HAVE_TRACEFS then
  for _, t in ipairs { "call-graph=fp", "max-stack=3,no-inherit", "overwrite", "call-graph=dwarf,stack-size=512",
                       "aux-output", "nr=3", "inherit=0" } do
    RA("sched:sched_switch/" .. t .. "/", "sched:sched_switch")
  end
  RA("sched:sched_switch/call-graph=fp/u", "sched:sched_switch")
  RA("sched:sched_switch/no-inherit/:k", "sched:sched_switch")
  for _, t in ipairs { "period=5", "name=x", "time=0", "freq=10", "config=1", "branch_type=any" } do
    RR("sched:sched_switch/" .. t .. "/")
  end
end

local REC_FIELDS = {
  ["{ sample_period, sample_freq }"] = "period", freq = "freq", inherit = "inherit",
  write_backward = "write_backward", aux_output = "aux_output", aux_sample_size = "aux_sample_size",
  sample_max_stack = "sample_max_stack", sample_stack_user = "sample_stack_user",
  sample_regs_user = "sample_regs_user", exclude_callchain_user = "exclude_callchain_user",
  mmap_data = "mmap_data", branch_sample_type = "branch_sample_type", sample_type = "sample_type",
}

local core = require "perfev.core"

local function names_mask(s, enum)
  local v = 0
  for n in s:gmatch("[^|]+") do v = compat.bor(v, (assert(enum[n], "unknown name " .. n))) end
  return v
end

-- the first attr block perf record printed (the event itself), by field
local function record_attr(out)
  local inblock, cur = false, nil
  for line in (out .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^perf_event_attr:") then
      inblock, cur = true, {}
    elseif inblock and line:match("^%-%-%-%-") then
      return cur
    elseif inblock then
      local key, val = line:match("^  (.-)%s%s+(%S+)$")
      local f = key and REC_FIELDS[key]
      if f == "sample_type" then
        cur[f] = names_mask(val, core.SAMPLE)
      elseif f == "branch_sample_type" then
        cur[f] = names_mask(val, core.BRANCH)
      elseif f then
        cur[f] = tonum(val)
      end
    end
  end
  return nil
end

local function norm(v)
  if v == true then return 1 elseif v == false then return 0 end
  return v
end

-- mismatches between perf's change (base -> with) and perfev's table t
local function record_diff(base, with, t)
  local bad = {}
  local mine = {}
  for _, f in pairs(REC_FIELDS) do mine[f] = norm(t[f]) end
  if t.freq then mine.period = t.sample_freq else mine.period = t.sample_period end
  for _, f in pairs(REC_FIELDS) do
    if f ~= "sample_type" then
      local want, was = with[f] or 0, base[f] or 0
      if (want ~= was and (mine[f] or 0) ~= want) or (want == was and mine[f] ~= nil and mine[f] ~= want) then
        bad[#bad + 1] = ("%s: perf %s (bare event %s), perfev %s"):format(f, want, was, tostring(mine[f]))
      end
    end
  end
  local st, want, was = mine.sample_type or 0, with.sample_type or 0, base.sample_type or 0
  local added, dropped = compat.band(want, compat.bnot(was)), compat.band(was, compat.bnot(want))
  if compat.band(st, added) ~= added then bad[#bad + 1] = ("sample_type lacks 0x%x"):format(compat.band(added,
      compat.bnot(st))) end
  if compat.band(st,
      compat.bnot(want)) ~= 0 then bad[#bad + 1] = ("sample_type has 0x%x perf lacks"):format(compat.band(st,
          compat.bnot(want))) end
  local explained = 0
  if t.freq == false then explained = compat.bor(explained, core.SAMPLE.PERIOD) end
  if t.terms and t.terms.time == 0 then explained = compat.bor(explained, core.SAMPLE.TIME) end
  if compat.band(dropped,
      compat.bnot(explained)) ~= 0 then bad[#bad + 1] = ("perf dropped sample_type 0x%x"):format(compat.band(dropped,
          compat.bnot(explained))) end
  return bad
end

describe("perfev.parse's record-time terms against perf record -vv #perf_heavy", function()
  if PERF == "" then
    pending("perf is not installed (package linux-perf): the comparison with perf record -vv cannot run")
    return
  end
  local all, seen = {}, {}
  local function add(x)
    if not seen[x] then
      seen[x] = true
      all[#all + 1] = x
    end
  end
  for _, x in ipairs(rec_accept) do add(x) add(rec_base[x]) end
  for _, x in ipairs(rec_reject) do add(x) end
  local outputs = run_all(all, "record")
  local out = {}
  for i, x in ipairs(all) do out[x] = outputs[i] end

  describe("accepted by perf", function()
    for _, x in ipairs(rec_accept) do
      it(x, function()
        local with = record_attr(out[x])
        assert(with, "perf record did not accept '" .. x .. "':\n" .. out[x])
        local base = assert(record_attr(out[rec_base[x]]), "perf record: no attr for " .. rec_base[x])
        local t = parse.parse(x)
        assert.same({}, record_diff(base, with, t))
      end)
    end
  end)

  describe("rejected by perf", function()
    for _, x in ipairs(rec_reject) do
      it(x, function()
        assert.is_nil(record_attr(out[x]), "perf record accepted '" .. x .. "'")
        local ok, err = pcall(parse.parse, x)
        assert.is_false(ok, "perfev accepted '" .. x .. "'")
        -- an unknown name also says where to look
        assert.matches("^spec/parse_perf_spec%.lua:%d+: perfev%.parse: .+ at position %d+$", (err:gsub(
          "; perfev%.list%(%) shows the events of this machine$", "")))
      end)
    end
  end)
end)
