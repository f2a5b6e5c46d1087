-- The generic event names perf users type, as data: name -> type and config.
-- (The full perf event grammar — modifiers, cache events, PMU terms — lives
-- in the event-name parser; this table is its vocabulary of generic names.)
local core = require "perfev.core"

local HW, SW = core.HW, core.SW

-- { canonical name, config, aliases... }
local hardware = {
  { "cpu-cycles", HW.CPU_CYCLES, "cycles" },
  { "instructions", HW.INSTRUCTIONS },
  { "cache-references", HW.CACHE_REFERENCES },
  { "cache-misses", HW.CACHE_MISSES },
  { "branch-instructions", HW.BRANCH_INSTRUCTIONS, "branches" },
  { "branch-misses", HW.BRANCH_MISSES },
  { "bus-cycles", HW.BUS_CYCLES },
  { "stalled-cycles-frontend", HW.STALLED_CYCLES_FRONTEND, "idle-cycles-frontend" },
  { "stalled-cycles-backend", HW.STALLED_CYCLES_BACKEND, "idle-cycles-backend" },
  { "ref-cycles", HW.REF_CPU_CYCLES },
}

local software = {
  { "cpu-clock", SW.CPU_CLOCK },
  { "task-clock", SW.TASK_CLOCK },
  { "page-faults", SW.PAGE_FAULTS, "faults" },
  { "minor-faults", SW.PAGE_FAULTS_MIN },
  { "major-faults", SW.PAGE_FAULTS_MAJ },
  { "context-switches", SW.CONTEXT_SWITCHES, "cs" },
  { "cpu-migrations", SW.CPU_MIGRATIONS, "migrations" },
  { "alignment-faults", SW.ALIGNMENT_FAULTS },
  { "emulation-faults", SW.EMULATION_FAULTS },
  { "dummy", SW.DUMMY },
  { "bpf-output", SW.BPF_OUTPUT },
  { "cgroup-switches", SW.CGROUP_SWITCHES },
}

-- perf's tool events: measured by the tool, not the kernel (perf 6.1 opens
-- a dummy software event in their place). { name, what it measures }
local tool = {
  { "duration_time", "wall-clock nanoseconds while enabled" },
  { "user_time", "user-mode CPU nanoseconds of this process while enabled" },
  { "system_time", "kernel-mode CPU nanoseconds of this process while enabled" },
}

local M = { hardware = hardware, software = software, tool = tool, byname = {}, tool_byname = {} }
for _, row in ipairs(tool) do M.tool_byname[row[1]] = { name = row[1], what = row[2] } end

local function index(list, kind, type)
  for _, row in ipairs(list) do
    local ev = { name = row[1], kind = kind, type = type, config = row[2] }
    for i = 1, #row do
      if i ~= 2 then M.byname[row[i]] = ev end
    end
  end
end
index(hardware, "hardware", core.TYPE.HARDWARE)
index(software, "software", core.TYPE.SOFTWARE)

-- Where an error about an unknown event sends its reader, rather than
-- listing names in a message (the command line says "perfev list":
-- lua/perfev/cli/run.lua).
M.WHERE = "perfev.list() shows the events of this machine"

-- Canonical name for an attr's type/config, or nil.
function M.name_of(type, config)
  local list = type == core.TYPE.HARDWARE and hardware or type == core.TYPE.SOFTWARE and software
  for _, row in ipairs(list or {}) do
    if row[2] == config then return row[1] end
  end
  return nil
end

return M
