-- perfev.help([name]): the API from inside (the REPL): each entry point's
-- signature, what it does in a line, and the page that documents it. What
-- `print(perfev)` shows is the list of entry points (summary below).
local options = require "perfev.options"
local nearest = require "perfev.nearest"

local M = {}

-- { name, signature, one line, doc page }, in the order a user meets them.
M.ENTRIES = {
  { "open", "perfev.open(spec[, opts]) -> event | nil, message, errno",
    "open one event: a name in perf's syntax (\"task-clock\", \"cycles:u\"), a table of attr fields or an attr; "
    .. "opts: pid, cpu, group, flags, name", "README.md (A tour), doc/events.md" },
  { "group", "perfev.group(specs | \"{a,b}:u\"[, opts]) -> group | nil, message, errno",
    "open events that count together and are read in one read(2): g:read() -> results by name",
    "README.md (Groups), doc/events.md" },
  { "parse", "perfev.parse(s[, opts]) -> event table | list of them",
    "what an event string means: the attr fields perf would set (as perf stat -vv prints them)", "doc/events.md" },
  { "parse_list", "perfev.parse_list(s[, opts]) -> list of event tables",
    "perfev.parse, always a list", "doc/events.md" },
  { "list", "perfev.list([filter][, opts]) -> rows",
    "the events of this machine, like perf list, each with can_open; filter: a kind (hw, sw, cache, tool, "
    .. "pmu, tracepoint), a glob or a substring", "README.md (Event strings), doc/cli.md" },
  { "attr", "perfev.attr(spec) -> attr",
    "a perf_event_attr from a name, a table of fields or an attr; it prints its set fields",
    "README.md (Attributes)" },
  { "event", "ev:read() -> count, enabled, running; ev:enable() ev:disable() ev:reset() ev:measure(fn, ...) "
    .. "ev:read_raw() ev:mmap(pages) ev:close() ...",
    "the methods of what perfev.open returns (an event); every ioctl is one", "README.md (Events: every ioctl), "
    .. "doc/ring.md" },
  { "stat", "perfev.stat{ fn, args... | command = {...} | pid = N, duration_ms, interval_ms, events, repeat, ... } "
    .. "-> result | nil, message, errno, status",
    "perf stat in one call; perfev.stat.format(result[, { format = \"csv\" | \"json\" }]) prints it as perf does",
    "doc/stat.md" },
  { "profile", "perfev.profile{ event, freq | period, fn, output, ... } -> profiler | nil, message, errno",
    "profile Lua functions on a perf event: p:start() p:stop() p:write(\"out.svg\") (svg, folded, speedscope, "
    .. "pprof, perf.data, text)", "doc/profile.md" },
  { "attach", "perfev.attach{ pid, event, freq | period, duration_ms } -> profiler | nil, message, errno",
    "profile the Lua functions of a process that is already running (ptrace: each sample stops it "
    .. "where it ran); the same profiler object and outputs as perfev.profile", "doc/attach.md" },
  { "frames", "perfev.frames{ events, worst, by, keep, profile, enabled, timeline, gc } -> frames | nil, "
    .. "message, errno",
    "per-frame counters of a game loop: fr:mark() once a frame, fr:zone_begin(name) ... z:finish(), "
    .. "fr:report() (mean, p50, p95, p99, max, the worst frames with their Lua profile; gc: the Lua GC per frame)",
    "doc/games.md" },
  { "alloc", "perfev.alloc{ period, sample, collect, fn, output } -> profiler",
    "allocations by Lua stack: bytes and blocks allocated (sampled every period bytes) and in use at stop; "
    .. "a:write(\"heap.pb.gz\") (pprof alloc_/inuse_ objects/space), svg, folded, text; perfev.alloc.counter() "
    .. "per frame", "doc/memory.md" },
  { "sampler", "perfev.sampler{ command | pid, cpus, period | freq, ... } -> session | nil, message, errno",
    "sample a task and its children on every CPU: s:records() decodes the rings", "doc/sampler.md" },
  { "record", "perfev.record{ output, event, freq | period, callchain, fn | command, ... } -> summary",
    "sample into a perf.data file, like perf record", "doc/perfdata-write.md" },
  { "report", "perfev.report.open(path | file[, opts]) -> report | nil, message, errno",
    "read a perf.data file as perf report does: rep:rows(), rep:format()", "doc/report.md" },
  { "perfdata", "perfev.perfdata.open(path | file[, opts]) -> reader; perfev.perfdata.create(path, ...) -> writer",
    "read and write perf.data files record by record", "doc/perfdata.md, doc/perfdata-write.md" },
  { "perfmap", "perfev.perfmap.open([pid][, opts]) -> map",
    "write /tmp/perf-PID.map, through which perf names JIT or Lua code", "doc/perfdata-write.md" },
  { "uprobe", "perfev.uprobe{ path, func | offset | addr, ret } -> spec",
    "a user-space probe (a spec perfev.open takes); also as a string: \"uprobe/path=...,func=.../\"",
    "doc/events.md (Probes)" },
  { "kprobe", "perfev.kprobe{ func | addr, offset, ret } -> spec",
    "a kernel probe (a spec perfev.open takes), on kernels with CONFIG_KPROBES", "doc/events.md (Probes)" },
  { "decode", "perfev.decode(bytes, attrs[, opts]) -> iterator of records; perfev.decode.samples(bytes, attrs, "
    .. "field, ...), .tally(bytes, attrs, field, ...)",
    "the ring buffer's decoder over a byte string: tables (opts: into, swap), the fields' values of each "
    .. "sample, or the samples counted by them", "doc/decoding.md" },
  { "encode", "perfev.encode(record | records, attrs[, opts]) -> bytes",
    "the inverse of decode: decode(encode(rec, a), a) gives rec back", "doc/encode.md" },
  { "enable_all", "perfev.enable_all(); perfev.disable_all()",
    "start or stop every event this process opened (prctl PR_TASK_PERF_EVENTS_*)", "README.md (Everything at once)" },
  { "clock_ns", "perfev.clock_ns([clock]) -> nanoseconds",
    "read a clock of perfev.CLOCK by name (\"monotonic\", ...), as a use_clockid event stamps samples",
    "doc/events.md (Tool events)" },
  { "rusage", "perfev.rusage([who]) -> user ns, system ns", "this process's CPU times (getrusage)",
    "doc/events.md (Tool events)" },
  { "on_warning", "perfev.on_warning(fn | false | nil) -> previous handler",
    "where perfev's warnings go: fn(message), false (silent) or nil (stderr)", "README.md (Errors)" },
  { "compat", "perfev.compat.hex(v), .udec(v), .key(v), .band(a, b), .pack(fmt, ...) ...",
    "64-bit integers the same way on Lua 5.3, 5.4 and LuaJIT (where they may be cdata)", "doc/runtimes.md" },
  { "core", "perfev.core.open(attr, pid, cpu, group_fd, flags) ...",
    "the C core, without the Lua layer's policies; perfev.TYPE, SW, SAMPLE, FORMAT, RECORD ... its constants",
    "doc/architecture-core.md" },
  { "help", "perfev.help([name]) -> text", "this help; print(perfev) lists the entry points", "README.md" },
}

local BY_NAME = {}
for _, e in ipairs(M.ENTRIES) do BY_NAME[e[1]] = e end
BY_NAME.disable_all = BY_NAME.enable_all
BY_NAME.perfev = BY_NAME.help

-- summary(version) -> what print(perfev) shows: the entry points by name
function M.summary(version)
  local names = {}
  for _, e in ipairs(M.ENTRIES) do names[#names + 1] = e[1] end
  return ("perfev %s: Linux perf events for Lua\n"
          .. "  entry points: %s\n"
          .. "  perfev.help(\"open\") says what one does; perfev.help() lists them all"):format(
          tostring(version), table.concat(names, ", "))
end

local function entry(e)
  return ("%s\n  %s\n  see %s"):format(e[2], e[3], e[4])
end

-- text([name]) -> the text for one entry point (name: "open",
-- "perfev.open", "ev:read"), or the list of them all; raises for a name
-- perfev does not have, with the closest one
function M.text(name)
  if name == nil then
    local out = {}
    for _, e in ipairs(M.ENTRIES) do out[#out + 1] = ("  %-11s %s"):format(e[1], e[3]) end
    return "perfev: the entry points (perfev.help(\"open\") for one; doc/ for the whole)\n"
           .. table.concat(out, "\n")
  end
  options.arg(name, "string", "perfev.help", "the name (argument #1)")
  local key = name:gsub("^perfev%.", ""):gsub("^ev:", "")
  local e = BY_NAME[key] or BY_NAME[key:match("^([%w_]+)") or ""]
  if not e then
    local known = {}
    for k in pairs(BY_NAME) do known[#known + 1] = k end
    options.raisef("perfev.help: no entry point '%s'%s; perfev.help() lists them", name, nearest.hint(key, known))
  end
  return entry(e)
end

-- help([name]): prints text(name) on standard output, as Python's help()
-- does, so that it shows at every REPL (LuaJIT's prints no value a
-- statement returns); require("perfev.help").text(name) gives the string.
function M.help(name)
  io.stdout:write(M.text(name), "\n")
end

return M
