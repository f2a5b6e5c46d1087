-- One of every record type and sample field, built byte by byte with
-- string.pack in either byte order (bitfields laid out as each order's
-- compiler lays them), for the decoder specs (decode_swap, select).
--   local E = require "spec.support.every_record"
--   E.stream(E.NATIVE) ; E.attrs() -> { [1] = attr A1, [2] = attr A2 }
local perfev = require "perfev"
local core = require "perfev.core"
local compat = require "perfev.compat"

local M = {}

local R, MISC, CTX = core.RECORD, core.MISC, core.CONTEXT
local pack = compat.pack

local NATIVE = pack("=I2", 1) == pack("<I2", 1) and "<" or ">"
local OTHER = NATIVE == "<" and ">" or "<"
M.NATIVE, M.OTHER = NATIVE, OTHER

-- The bitfields of perf_branch_entry's flags word: a little-endian compiler
-- allocates them from bit 0 up, a big-endian one from bit 63 down.
local BRANCH_BITS = { mispred = { 0, 1 }, predicted = { 1, 1 }, in_tx = { 2, 1 }, abort = { 3, 1 },
                      cycles = { 4, 16 }, type = { 20, 4 }, spec = { 24, 2 }, new_type = { 26, 4 },
                      priv = { 30, 3 } }

-- Record builders for byte order E ("<" or ">").
local function builder(E)
  local b = {}
  local function ints(fmt) return function(...) return pack(E .. fmt:rep(select("#", ...)), ...) end end
  b.u64, b.u32, b.u16 = ints("I8"), ints("I4"), ints("I2")
  function b.record(rtype, misc, body)
    body = body .. ("\0"):rep((8 - #body % 8) % 8)
    return pack(E .. "I4I2I2", rtype, misc or 0, 8 + #body) .. body
  end
  function b.cstr(s) return s .. "\0" .. ("\0"):rep((8 - (#s + 1) % 8) % 8) end
  function b.branch_flags(t)
    local v = 0
    for name, x in pairs(t) do
      local bit, width = BRANCH_BITS[name][1], BRANCH_BITS[name][2]
      v = compat.bor(v, compat.lshift(x, E == ">" and 64 - bit - width or bit))
    end
    return b.u64(v)
  end
  -- The sample_id trailer of TID|TIME|ID|STREAM_ID|CPU|IDENTIFIER.
  function b.trailer(id) return b.u32(101, 102) .. b.u64(103, id, 105) .. b.u32(3, 0) .. b.u64(id) end
  return b
end

local A1 = { sample_type = { "identifier", "ip", "tid", "time", "addr", "id", "stream_id", "cpu", "period",
                             "read", "callchain", "raw", "branch_stack", "regs_user", "stack_user",
                             "weight_struct", "data_src", "transaction", "phys_addr", "cgroup",
                             "data_page_size", "code_page_size", "aux" },
             read_format = { "group", "total_time_enabled", "id", "lost" },
             branch_sample_type = { "any", "hw_index" }, sample_regs_user = compat.bor(compat.lshift(1, 0),
                 compat.lshift(1, 8)),
             sample_id_all = true }
local A2 = { sample_type = { "identifier", "ip", "weight", "regs_intr" }, sample_regs_intr = compat.lshift(1, 8),
             sample_id_all = true }

-- One of every record type and sample field, in byte order E.
local function stream(E)
  local b = builder(E)
  local u64, u32, u16, rec, cstr, T = b.u64, b.u32, b.u16, b.record, b.cstr, b.trailer
  local src = compat.bor(compat.lshift(2, 0), compat.lshift(compat.bor(2, 8), 5), compat.lshift(1, 24),
      compat.lshift(1, 33))
  local sample1 = rec(R.SAMPLE, compat.bor(MISC.USER, MISC.EXACT_IP),
    u64(1, 0x401000) .. u32(10, 11) .. u64(123456789, 0xdead000, 1, 78) .. u32(2, 0) .. u64(100000)
    .. u64(2, 500, 7, 1, 0, 8, 2, 3)                                             -- read: group of 2
    .. u64(5, CTX.KERNEL, compat.hex64("0xffffffff81000010"), CTX.USER, 0x401000, 0x401100)   -- callchain
    .. u32(12) .. "RAW\1\2\3\4\5\6\7\8\9"                                     -- raw
    .. u64(2, 9, 0x10, 0x20) .. b.branch_flags { mispred = 1, cycles = 100, type = 3, priv = 5 }
    .. u64(0x30, 0x40) .. b.branch_flags { predicted = 1, in_tx = 1, abort = 1, spec = 2, new_type = 9 }
    .. u64(2, 0x1111, 0x2222)                                                  -- regs_user: abi, ax, ip
    .. u64(16) .. "stackstackstack!" .. u64(12)                               -- stack_user, dyn_size
    .. u64(compat.bor(70000, compat.lshift(12, 32), compat.lshift(34,
        48)))                                    -- weight_struct
    .. u64(src, 0x100000003, 0x1234000, 55, 4096, 2097152)
    .. u64(8) .. "AUXDATA!")
  local sample2 = rec(R.SAMPLE, MISC.KERNEL, u64(2, compat.hex64("0xffffffff81234567"), 300, 2, 0xabc))
  return table.concat {
    sample1, sample2,
    rec(R.MMAP, compat.bor(MISC.USER, MISC.MMAP_DATA), u32(7, 8) .. u64(0x400000, 4096,
        0) .. cstr("/bin/true") .. T(1)),
    rec(R.LOST, 0, u64(1, 17) .. T(1)),
    rec(R.COMM, MISC.COMM_EXEC, u32(5, 6) .. cstr("lua5.4") .. T(1)),
    rec(R.EXIT, 0, u32(1, 2, 3, 4) .. u64(99) .. T(1)),
    rec(R.FORK, MISC.FORK_EXEC, u32(1, 2, 3, 4) .. u64(98) .. T(1)),
    rec(R.THROTTLE, 0, u64(50, 1, 105) .. T(1)),
    rec(R.READ, 0, u32(9, 10) .. u64(1, 555, 1234, 1, 0) .. T(1)),
    rec(R.MMAP2, MISC.USER, u32(7, 8) .. u64(0x1000, 0x2000, 0x3000) .. u32(8, 1) .. u64(424242, 3)
      .. u32(5, 2) .. cstr("/usr/lib/libc.so.6") .. T(1)),
    rec(R.MMAP2, MISC.MMAP_BUILD_ID, u32(7, 8) .. u64(0x1000, 0x2000, 0) .. pack("I1I1I2", 20, 0, 0)
      .. ("\1\2\3\4\5"):rep(4) .. u32(5, 2) .. cstr("/x") .. T(1)),
    rec(R.AUX, 0, u64(4096, 512, compat.bor(1, 4)) .. T(1)),
    rec(R.ITRACE_START, 0, u32(11, 12) .. T(1)),
    rec(R.LOST_SAMPLES, 0, u64(33) .. T(1)),
    rec(R.SWITCH, compat.bor(MISC.SWITCH_OUT, MISC.SWITCH_OUT_PREEMPT), T(1)),
    rec(R.SWITCH_CPU_WIDE, 0, u32(20, 21) .. T(1)),
    rec(R.NAMESPACES, 0, u32(1, 2) .. u64(2, 10, 11, 20, 21) .. T(1)),
    rec(R.KSYMBOL, 0, u64(compat.hex64("0xffffffffc0000000")) .. u32(256) .. u16(1, 0) .. cstr("bpf_prog_x") .. T(1)),
    rec(R.BPF_EVENT, 0, u16(1, 0) .. u32(77) .. "TAGTAG!!" .. T(1)),
    rec(R.CGROUP, 0, u64(9) .. cstr("/user.slice") .. T(1)),
    rec(R.TEXT_POKE, 0, u64(compat.hex64("0xffffffff81000000")) .. u16(2, 5) .. "\x90\x90" .. "\xe8\1\2\3\4"
      .. ("\0"):rep(5) .. T(1)),
    rec(R.AUX_OUTPUT_HW_ID, 0, u64(6) .. T(1)),
    rec(R.CALLCHAIN_DEFERRED, 0, u64(42, 3, CTX.USER, 0x401000, 0x402000) .. T(1)),
    rec(200, 0, "abcdefgh"),
  }
end

M.builder, M.stream, M.A1, M.A2 = builder, stream, A1, A2
-- The attrs of the stream, by id: 1 (A1, samples of every field) and 2 (A2).
function M.attrs() return { [1] = perfev.attr(A1), [2] = perfev.attr(A2) } end

return M
