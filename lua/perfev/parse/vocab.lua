-- The vocabulary of perf's event grammar, as data: the modifiers, the
-- fields a parsed event carries, branch filters, call-graph modes. The
-- grammar (perfev.parse), the lexer and the term application read it.
local core = require "perfev.core"
local compat = require "perfev.compat"

local V = {}

-- Fields of a parsed event that are not attr fields.
V.EXTRA = {
  name = true, group = true, leader = true, group_name = true, sample_read = true,
  weak_group = true, precise_max = true, bpf_counter = true, pmu = true, scale = true,
  unit = true, terms = true, per_pkg = true, snapshot = true, tool = true, probe = true,
}

-- The modifiers, as data. kind:
--   level   -- u/k/h: the first one excludes all three levels, each then
--              re-includes its own; u also excludes guests unless G/H came
--   virt    -- G/H: the first one excludes both, each re-includes its own
--   set     -- sets its field (leader_only: only a group's leader, from a group modifier)
--   precise -- p: precise_ip + 1 (at most max), excludes guests unless G/H came
--   extra   -- a non-attr flag in the result, honoured by perfev.open and
--              perfev.group: P (precise_ip 3, stepped down until the kernel
--              accepts), S (PERF_SAMPLE_READ; in a group only the leader
--              samples), W (a group that cannot open as a group opens its
--              members one by one), b (perf's BPF counters: not supported,
--              kept as a flag)
V.MODIFIERS = {
  { "u", "exclude_user", kind = "level", excludes_guest = true },
  { "k", "exclude_kernel", kind = "level" },
  { "h", "exclude_hv", kind = "level" },
  { "G", "exclude_guest", kind = "virt" },
  { "H", "exclude_host", kind = "virt" },
  { "I", "exclude_idle", kind = "set" },
  { "p", "precise_ip", kind = "precise", max = 3, excludes_guest = true },
  { "P", "precise_max", kind = "extra" },
  { "S", "sample_read", kind = "extra" },
  { "D", "pinned", kind = "set", leader_only = true },
  { "W", "weak_group", kind = "extra" },
  { "e", "exclusive", kind = "set", leader_only = true },
  { "b", "bpf_counter", kind = "extra" },
}
V.MOD = {}
for _, m in ipairs(V.MODIFIERS) do V.MOD[m[1]] = m end
local MOD_CHARS, MOD_SET = {}, {}
for _, m in ipairs(V.MODIFIERS) do
  MOD_CHARS[#MOD_CHARS + 1] = m[1]
  MOD_SET[#MOD_SET + 1] = m[1]
end
V.MOD_CHARS = table.concat(MOD_CHARS, " ")
V.MOD_SET = "^[" .. table.concat(MOD_SET) .. "]*$"

V.LEVELS = { "exclude_user", "exclude_kernel", "exclude_hv" }

-- The bits every event table carries (numbers internally, booleans out).
V.BITS = { "exclude_user", "exclude_kernel", "exclude_hv", "exclude_idle",
               "exclude_host", "exclude_guest", "pinned", "exclusive" }


-- branch_type=NAME: perf's branch filter names -> PERF_SAMPLE_BRANCH_*.
-- A privilege level alone (u, k, hv) samples any branch at that level.
V.BRANCH_FILTERS = {
  u = "USER", k = "KERNEL", hv = "HV", any = "ANY", any_call = "ANY_CALL", any_ret = "ANY_RETURN",
  ind_call = "IND_CALL", abort_tx = "ABORT_TX", in_tx = "IN_TX", no_tx = "NO_TX", cond = "COND",
  ind_jmp = "IND_JUMP", call = "CALL", save_type = "TYPE_SAVE", stack = "CALL_STACK",
  priv = "PRIV_SAVE",
}

-- call-graph=MODE, as perf record maps it (with stack-size and max-stack,
-- in any order: see callchain() below).
V.CALLGRAPH = {
  fp = { sample = { "CALLCHAIN" } },
  dwarf = { sample = { "CALLCHAIN", "REGS_USER", "STACK_USER", "ADDR", "DATA_SRC" },
            fields = { mmap_data = true, exclude_callchain_user = true }, dwarf = true },
  lbr = { sample = { "CALLCHAIN", "BRANCH_STACK" },
          branch = { "USER", "CALL_STACK", "NO_FLAGS", "NO_CYCLES", "HW_INDEX" } },
  no = {},
}
V.STACK_SIZE = 8192           -- perf's default user stack dump for dwarf
V.STACK_SIZE_MAX = 65528      -- the kernel's limit (u16, 8-byte aligned)

-- The user registers perf records for dwarf unwinding: the x86-64
-- general-purpose ones (perf's PERF_REGS_MASK, without the segment registers).
local SEGMENT = { DS = true, ES = true, FS = true, GS = true }
V.DWARF_REGS = 0
for name, bit in pairs(core.REG) do
  if bit < 24 and not SEGMENT[name] then V.DWARF_REGS = compat.bor(V.DWARF_REGS, compat.lshift(1, bit)) end
end


return V
