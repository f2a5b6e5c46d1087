-- perf's event grammar beyond names, and perfev's warning channel:
--   numeric TYPE:CONFIG events (1:3 is the software context-switches),
--   a tracepoint sampled as perf record samples it (every hit, with its raw
--   data, time and CPU), and a rate above the kernel's limit, reported
--   through perfev.on_warning.
--   LUA_CPATH='build/?.so;;' LUA_PATH='lua/?.lua;lua/?/init.lua;;' lua5.4 examples/grammar.lua
-- The tracepoint needs tracefs (mount -t tracefs nodev /sys/kernel/tracing)
-- and perf_event_paranoid <= 1 or root.
local perfev = require "perfev"

-- 1. TYPE:CONFIG, with modifiers, in a group
local g = assert(perfev.group("{1:1,1:3}:u"))
g:enable()
for _ = 1, 20 do os.execute("true") end
g:disable()
print(g:read())

-- 2. a tracepoint: sample_period 1, sample_type raw|time|cpu|period (+ ip|tid)
local attr = perfev.attr("sched:sched_switch")
print(("sched:sched_switch: sample_period %.0f, sample_type 0x%x"):format(attr.sample_period, attr.sample_type))
local s, err = perfev.sampler { event = "sched:sched_switch" }
if s then
  s:enable()
  for _ = 1, 5 do os.execute("sleep 0.01") end
  s:disable()
  local n, bytes = 0, 0
  for rec in s:records() do
    if rec.type == "sample" then n, bytes = n + 1, bytes + #(rec.raw or "") end
  end
  print(("%d sched_switch samples, %d bytes of raw tracepoint data"):format(n, bytes))
  s:close()
else
  print("sched:sched_switch cannot be sampled here: " .. tostring(err))
end

-- 3. the warning channel: a frequency above perf_event_max_sample_rate is
-- lowered to it, as perf record does; the message goes to the handler
local previous = perfev.on_warning(function(msg) print("warning: " .. msg) end)
local ev = assert(perfev.open { type = "software", config = "cpu-clock", freq = true, sample_freq = 10000000 })
print(("opened at %.0f Hz (fallback: %s)"):format(ev:attr().sample_freq, ev:data().fallback))
ev:close()
perfev.on_warning(previous)
