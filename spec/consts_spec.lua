-- The constant tables of perfev.core against the values the kernel's
-- headers define (include/uapi/linux/perf_event.h, hw_breakpoint.h,
-- arch/x86/include/uapi/asm/perf_regs.h, linux/time.h).
local core = require "perfev.core"
local compat = require "perfev.compat"

-- Every table perfev.core exports.
local TABLES = {
  "TYPE", "HW", "HW_CACHE", "HW_CACHE_OP", "HW_CACHE_RESULT", "SW", "SAMPLE",
  "BRANCH", "BR", "BR_SPEC", "BR_NEW", "BR_ARM64", "BR_PRIV", "REGS_ABI", "TXN",
  "FORMAT", "ATTR_SIZE", "IOC", "IOC_FLAG", "FLAG", "RECORD", "MISC", "CONTEXT",
  "AUX_FLAG", "NS", "KSYMBOL_TYPE", "KSYMBOL_FLAG", "BPF_EVENT",
  "MEM_OP", "MEM_LVL", "MEM_LVLNUM", "MEM_REMOTE", "MEM_SNOOP", "MEM_SNOOPX",
  "MEM_LOCK", "MEM_TLB", "MEM_BLK", "MEM_HOPS", "MEM_SHIFT",
  "BP_TYPE", "BP_LEN", "CLOCK", "REG", "ERRNO",
}

-- Expected values, table by table: a sample of each, from the kernel headers.
local EXPECT = {
  TYPE = { HARDWARE = 0, SOFTWARE = 1, TRACEPOINT = 2, HW_CACHE = 3, RAW = 4,
           BREAKPOINT = 5 },
  HW = { CPU_CYCLES = 0, INSTRUCTIONS = 1, BRANCH_MISSES = 5, REF_CPU_CYCLES = 9 },
  HW_CACHE = { L1D = 0, L1I = 1, LL = 2, DTLB = 3, ITLB = 4, BPU = 5, NODE = 6 },
  HW_CACHE_OP = { READ = 0, WRITE = 1, PREFETCH = 2 },
  HW_CACHE_RESULT = { ACCESS = 0, MISS = 1 },
  SW = { CPU_CLOCK = 0, TASK_CLOCK = 1, PAGE_FAULTS = 2, DUMMY = 9, BPF_OUTPUT = 10,
         CGROUP_SWITCHES = 11 },
  SAMPLE = { IP = 1, TID = 2, TIME = 4, CALLCHAIN = compat.lshift(1, 5), RAW = compat.lshift(1, 10),
             IDENTIFIER = compat.lshift(1, 16), AUX = compat.lshift(1, 20), WEIGHT_STRUCT = compat.lshift(1, 24),
             WEIGHT_TYPE = compat.bor(compat.lshift(1, 14), compat.lshift(1, 24)) },
  BRANCH = { USER = 1, KERNEL = 2, HV = 4, ANY = 8, CALL_STACK = compat.lshift(1, 11),
             PRIV_SAVE = compat.lshift(1, 18), COUNTERS = compat.lshift(1, 19), PLM_ALL = 7 },
  BR = { UNKNOWN = 0, COND = 1, RET = 6, SYSCALL = 7, NO_TX = 14, EXTEND_ABI = 15 },
  BR_SPEC = { NA = 0, WRONG_PATH = 1, NON_SPEC_CORRECT_PATH = 2, CORRECT_PATH = 3 },
  BR_NEW = { FAULT_ALGN = 0, FAULT_INST = 2, ARCH_1 = 3, ARCH_5 = 7 },
  BR_PRIV = { UNKNOWN = 0, USER = 1, KERNEL = 2, HV = 3 },
  REGS_ABI = { NONE = 0, ["32"] = 1, ["64"] = 2 },
  TXN = { ELISION = 1, CAPACITY_READ = compat.lshift(1, 7), ABORT_MASK = compat.lshift(0xffffffff, 32),
          ABORT_SHIFT = 32 },
  FORMAT = { TOTAL_TIME_ENABLED = 1, TOTAL_TIME_RUNNING = 2, ID = 4, GROUP = 8,
             LOST = 16 },
  ATTR_SIZE = { VER0 = 64, VER7 = 128, VER8 = 136 },
  IOC = { ENABLE = 0x2400, DISABLE = 0x2401, REFRESH = 0x2402, RESET = 0x2403,
          PERIOD = 0x40082404, SET_OUTPUT = 0x2405, SET_FILTER = 0x40082406,
          ID = 0x80082407, SET_BPF = 0x40042408, PAUSE_OUTPUT = 0x40042409,
          QUERY_BPF = 0xc008240a, MODIFY_ATTRIBUTES = 0x4008240b },
  IOC_FLAG = { GROUP = 1 },
  FLAG = { FD_NO_GROUP = 1, FD_OUTPUT = 2, PID_CGROUP = 4, FD_CLOEXEC = 8 },
  RECORD = { MMAP = 1, LOST = 2, COMM = 3, EXIT = 4, FORK = 7, SAMPLE = 9, MMAP2 = 10,
             SWITCH_CPU_WIDE = 15, KSYMBOL = 17, TEXT_POKE = 20, AUX_OUTPUT_HW_ID = 21,
             CALLCHAIN_DEFERRED = 22 },
  MISC = { CPUMODE_MASK = 7, CPUMODE_UNKNOWN = 0, KERNEL = 1, USER = 2, HYPERVISOR = 3,
           GUEST_KERNEL = 4, GUEST_USER = 5, PROC_MAP_PARSE_TIMEOUT = compat.lshift(1, 12),
           MMAP_DATA = compat.lshift(1, 13), COMM_EXEC = compat.lshift(1, 13), SWITCH_OUT = compat.lshift(1, 13),
           EXACT_IP = compat.lshift(1, 14), MMAP_BUILD_ID = compat.lshift(1, 14), EXT_RESERVED = compat.lshift(1, 15) },
  -- u64 values just below 2^64 read as negative Lua integers
  CONTEXT = { HV = -32, KERNEL = -128, USER = -512, USER_DEFERRED = -640,
              GUEST = -2048, GUEST_KERNEL = -2176, GUEST_USER = -2560, MAX = -4095 },
  AUX_FLAG = { TRUNCATED = 1, OVERWRITE = 2, PARTIAL = 4, COLLISION = 8,
               PMU_FORMAT_TYPE_MASK = 0xff00, CORESIGHT_FORMAT_CORESIGHT = 0,
               CORESIGHT_FORMAT_RAW = 0x100 },
  NS = { NET = 0, UTS = 1, IPC = 2, PID = 3, USER = 4, MNT = 5, CGROUP = 6, MAX = 7 },
  KSYMBOL_TYPE = { UNKNOWN = 0, BPF = 1, OOL = 2 },
  KSYMBOL_FLAG = { UNREGISTER = 1 },
  BPF_EVENT = { UNKNOWN = 0, PROG_LOAD = 1, PROG_UNLOAD = 2 },
  MEM_OP = { NA = 1, LOAD = 2, STORE = 4, PFETCH = 8, EXEC = 0x10 },
  MEM_LVL = { NA = 1, HIT = 2, MISS = 4, L1 = 8, LOC_RAM = 0x80, UNC = 0x2000 },
  MEM_LVLNUM = { L1 = 1, L4 = 4, L2_MHB = 5, MSC = 6, UNC = 8, CXL = 9, ANY_CACHE = 0xb,
                 RAM = 0xd, NA = 0xf },
  MEM_REMOTE = { REMOTE = 1 },
  MEM_SNOOP = { NA = 1, NONE = 2, HIT = 4, MISS = 8, HITM = 0x10 },
  MEM_SNOOPX = { FWD = 1, PEER = 2 },
  MEM_LOCK = { NA = 1, LOCKED = 2 },
  MEM_TLB = { NA = 1, HIT = 2, MISS = 4, L1 = 8, L2 = 0x10, WK = 0x20, OS = 0x40 },
  MEM_BLK = { NA = 1, DATA = 2, ADDR = 4 },
  MEM_HOPS = { ["0"] = 1, ["1"] = 2, ["2"] = 3, ["3"] = 4 },
  MEM_SHIFT = { OP = 0, LVL = 5, SNOOP = 19, LOCK = 24, DTLB = 26, TLB = 26, LVLNUM = 33,
                REMOTE = 37, SNOOPX = 38, BLK = 40, HOPS = 43 },
  BP_TYPE = { EMPTY = 0, R = 1, W = 2, RW = 3, X = 4, INVALID = 7 },
  BP_LEN = { LEN_1 = 1, LEN_2 = 2, LEN_4 = 4, LEN_8 = 8 },
  CLOCK = { REALTIME = 0, MONOTONIC = 1, MONOTONIC_RAW = 4, BOOTTIME = 7, TAI = 11 },
  -- include/uapi/asm-generic/errno-base.h and errno.h
  ERRNO = { EPERM = 1, ENOENT = 2, ESRCH = 3, E2BIG = 7, EBADF = 9, EACCES = 13, EBUSY = 16,
            ENODEV = 19, EINVAL = 22, EMFILE = 24, ENOSPC = 28, EOVERFLOW = 75, EOPNOTSUPP = 95 },
  REG = { AX = 0, BX = 1, SP = 7, IP = 8, FLAGS = 9, GS = 15, R8 = 16, R15 = 23,
          XMM0 = 32, XMM1 = 34, XMM15 = 62 },
}

describe("perfev.core constants", function()
  it("exports every table, each non-empty", function()
    for _, name in ipairs(TABLES) do
      local t = core[name]
      assert.is_table(t, name)
      assert.is_not_nil(next(t), name .. " is empty")
    end
  end)

  it("keys are upper-case names and values are integers", function()
    for _, name in ipairs(TABLES) do
      for k, v in pairs(core[name]) do
        assert.is_string(k)
        assert.is_truthy(k:match("^[A-Z0-9_]+$"), name .. "." .. k)
        assert.equals("integer", compat.math_type(v), name .. "." .. k)
      end
    end
  end)

  for tname, expected in pairs(EXPECT) do
    it("matches the kernel headers for " .. tname, function()
      local t = core[tname]
      assert.is_table(t, tname)
      for k, v in pairs(expected) do
        assert.equals(v, t[k], tname .. "." .. k)
      end
    end)
  end

  it("has the values named in the design", function()
    assert.equals(1, core.SAMPLE.IP)
    assert.equals(compat.lshift(1, 24), core.SAMPLE.WEIGHT_STRUCT)
    assert.equals(9, core.RECORD.SAMPLE)
    assert.equals(21, core.RECORD.AUX_OUTPUT_HW_ID)
    assert.equals(16, core.FORMAT.LOST)
    assert.equals(5, core.TYPE.BREAKPOINT)
    assert.equals(11, core.SW.CGROUP_SWITCHES)
    assert.equals(0x2400, core.IOC.ENABLE)
    assert.equals(0x80082407, core.IOC.ID)
    assert.equals(3, core.BP_TYPE.RW)
    assert.equals(23, core.REG.R15)
    assert.equals(32, core.REG.XMM0)
    assert.equals(-512, core.CONTEXT.USER)
    assert.equals(-128, core.CONTEXT.KERNEL)
  end)

  it("prints context markers as the kernel's u64 values", function()
    assert.equals("fffffffffffffe00", ("%x"):format(core.CONTEXT.USER))
  end)

  it("has the complete lists of types, sample bits, formats and records", function()
    local count = { TYPE = 6, SAMPLE = 26, FORMAT = 5, RECORD = 22 }
    for tname, n in pairs(count) do
      local seen = 0
      for _ in pairs(core[tname]) do seen = seen + 1 end
      assert.equals(n, seen, tname)
    end
  end)

  it("has sample_type and read_format bits that are single bits", function()
    for _, tname in ipairs{ "SAMPLE", "FORMAT" } do
      for k, v in pairs(core[tname]) do
        if k ~= "WEIGHT_TYPE" then
          assert.is_true(v > 0 and compat.band(v, v - 1) == 0, tname .. "." .. k)
        end
      end
    end
  end)

  for _, tname in ipairs{ "TYPE", "SAMPLE", "FORMAT", "RECORD" } do
    it("has distinct values in " .. tname, function()
      local by_value = {}
      for k, v in pairs(core[tname]) do
        assert.is_nil(by_value[v], ("%s.%s and %s.%s are both %d"):format(
          tname, k, tname, tostring(by_value[v]), v))
        by_value[v] = k
      end
    end)
  end

  it("ERRNO names the errno an open returns", function()
    local _, _, errno = core.open(core.attr { type = "software", config = core.SW.TASK_CLOCK },
                                  4194305, -1)   -- above the largest pid_max: no such process
    assert.equals(core.ERRNO.ESRCH, errno)
  end)

  it("one version string: the core's, which perfev reports", function()
    assert.matches("^%d+%.%d+%.%d+$", core.VERSION)
    assert.equals("perfev.core " .. core.VERSION, core._VERSION)
    assert.equals("perfev " .. core.VERSION, require("perfev")._VERSION)
  end)

  it("numbers record types 1..22 without gaps", function()
    local by_value = {}
    for k, v in pairs(core.RECORD) do by_value[v] = k end
    for i = 1, 22 do assert.is_string(by_value[i], "record type " .. i) end
  end)
end)
