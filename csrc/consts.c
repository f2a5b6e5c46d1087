/* The kernel's perf enums as name/value data.
 *
 * Every constant comes from the system's headers (<linux/perf_event.h>,
 * <linux/hw_breakpoint.h>, <asm/perf_regs.h>, <time.h>) or, for what newer
 * kernels added, from abi.h; nothing here restates a number. The data is
 * const and walked by the same few loops, so adding a kernel constant is
 * one line and the file keeps no mutable state. */
#include <errno.h>  /* the errno values perf_event_open and its ioctls return */
#include <time.h>   /* CLOCK_* ids for attr.clockid */
#include <string.h>

#include "perfev.h"

/* One entry: the kernel's name without its prefix, and its value. */
#define C(prefix, name) { #name, (uint64_t)(prefix##name) }
/* For the few kernel names that carry their common part as a suffix. */
#define S(name, suffix) { #name, (uint64_t)(name##suffix) }
/* For names with a common suffix as well as a prefix (PERF_MEM_OP_SHIFT). */
#define X(prefix, name, suffix) { #name, (uint64_t)(prefix##name##suffix) }
/* For a key that differs from the kernel's spelling. */
#define N(key, value) { key, (uint64_t)(value) }

static const struct perfev_const type_c[] = {
  C(PERF_TYPE_, HARDWARE), C(PERF_TYPE_, SOFTWARE), C(PERF_TYPE_, TRACEPOINT),
  C(PERF_TYPE_, HW_CACHE), C(PERF_TYPE_, RAW), C(PERF_TYPE_, BREAKPOINT),
};

static const struct perfev_const hw_c[] = {
  C(PERF_COUNT_HW_, CPU_CYCLES), C(PERF_COUNT_HW_, INSTRUCTIONS),
  C(PERF_COUNT_HW_, CACHE_REFERENCES), C(PERF_COUNT_HW_, CACHE_MISSES),
  C(PERF_COUNT_HW_, BRANCH_INSTRUCTIONS), C(PERF_COUNT_HW_, BRANCH_MISSES),
  C(PERF_COUNT_HW_, BUS_CYCLES), C(PERF_COUNT_HW_, STALLED_CYCLES_FRONTEND),
  C(PERF_COUNT_HW_, STALLED_CYCLES_BACKEND), C(PERF_COUNT_HW_, REF_CPU_CYCLES),
};

static const struct perfev_const hw_cache_c[] = {
  C(PERF_COUNT_HW_CACHE_, L1D), C(PERF_COUNT_HW_CACHE_, L1I),
  C(PERF_COUNT_HW_CACHE_, LL), C(PERF_COUNT_HW_CACHE_, DTLB),
  C(PERF_COUNT_HW_CACHE_, ITLB), C(PERF_COUNT_HW_CACHE_, BPU),
  C(PERF_COUNT_HW_CACHE_, NODE),
};

static const struct perfev_const hw_cache_op_c[] = {
  C(PERF_COUNT_HW_CACHE_OP_, READ), C(PERF_COUNT_HW_CACHE_OP_, WRITE),
  C(PERF_COUNT_HW_CACHE_OP_, PREFETCH),
};

static const struct perfev_const hw_cache_result_c[] = {
  C(PERF_COUNT_HW_CACHE_RESULT_, ACCESS), C(PERF_COUNT_HW_CACHE_RESULT_, MISS),
};

static const struct perfev_const sw_c[] = {
  C(PERF_COUNT_SW_, CPU_CLOCK), C(PERF_COUNT_SW_, TASK_CLOCK),
  C(PERF_COUNT_SW_, PAGE_FAULTS), C(PERF_COUNT_SW_, CONTEXT_SWITCHES),
  C(PERF_COUNT_SW_, CPU_MIGRATIONS), C(PERF_COUNT_SW_, PAGE_FAULTS_MIN),
  C(PERF_COUNT_SW_, PAGE_FAULTS_MAJ), C(PERF_COUNT_SW_, ALIGNMENT_FAULTS),
  C(PERF_COUNT_SW_, EMULATION_FAULTS), C(PERF_COUNT_SW_, DUMMY),
  C(PERF_COUNT_SW_, BPF_OUTPUT), C(PERF_COUNT_SW_, CGROUP_SWITCHES),
};

/* Single bits first so that perfev_const_name finds a bit's own name;
 * WEIGHT_TYPE (a two-bit mask) comes last. */
static const struct perfev_const sample_c[] = {
  C(PERF_SAMPLE_, IP), C(PERF_SAMPLE_, TID), C(PERF_SAMPLE_, TIME),
  C(PERF_SAMPLE_, ADDR), C(PERF_SAMPLE_, READ), C(PERF_SAMPLE_, CALLCHAIN),
  C(PERF_SAMPLE_, ID), C(PERF_SAMPLE_, CPU), C(PERF_SAMPLE_, PERIOD),
  C(PERF_SAMPLE_, STREAM_ID), C(PERF_SAMPLE_, RAW), C(PERF_SAMPLE_, BRANCH_STACK),
  C(PERF_SAMPLE_, REGS_USER), C(PERF_SAMPLE_, STACK_USER), C(PERF_SAMPLE_, WEIGHT),
  C(PERF_SAMPLE_, DATA_SRC), C(PERF_SAMPLE_, IDENTIFIER), C(PERF_SAMPLE_, TRANSACTION),
  C(PERF_SAMPLE_, REGS_INTR), C(PERF_SAMPLE_, PHYS_ADDR), C(PERF_SAMPLE_, AUX),
  C(PERF_SAMPLE_, CGROUP), C(PERF_SAMPLE_, DATA_PAGE_SIZE),
  C(PERF_SAMPLE_, CODE_PAGE_SIZE), C(PERF_SAMPLE_, WEIGHT_STRUCT),
  C(PERF_SAMPLE_, WEIGHT_TYPE),
};

static const struct perfev_const branch_c[] = {
  C(PERF_SAMPLE_BRANCH_, USER), C(PERF_SAMPLE_BRANCH_, KERNEL),
  C(PERF_SAMPLE_BRANCH_, HV), C(PERF_SAMPLE_BRANCH_, ANY),
  C(PERF_SAMPLE_BRANCH_, ANY_CALL), C(PERF_SAMPLE_BRANCH_, ANY_RETURN),
  C(PERF_SAMPLE_BRANCH_, IND_CALL), C(PERF_SAMPLE_BRANCH_, ABORT_TX),
  C(PERF_SAMPLE_BRANCH_, IN_TX), C(PERF_SAMPLE_BRANCH_, NO_TX),
  C(PERF_SAMPLE_BRANCH_, COND), C(PERF_SAMPLE_BRANCH_, CALL_STACK),
  C(PERF_SAMPLE_BRANCH_, IND_JUMP), C(PERF_SAMPLE_BRANCH_, CALL),
  C(PERF_SAMPLE_BRANCH_, NO_FLAGS), C(PERF_SAMPLE_BRANCH_, NO_CYCLES),
  C(PERF_SAMPLE_BRANCH_, TYPE_SAVE), C(PERF_SAMPLE_BRANCH_, HW_INDEX),
  C(PERF_SAMPLE_BRANCH_, PRIV_SAVE), C(PERF_SAMPLE_BRANCH_, COUNTERS),
  C(PERF_SAMPLE_BRANCH_, PLM_ALL),
};

static const struct perfev_const br_c[] = {
  C(PERF_BR_, UNKNOWN), C(PERF_BR_, COND), C(PERF_BR_, UNCOND), C(PERF_BR_, IND),
  C(PERF_BR_, CALL), C(PERF_BR_, IND_CALL), C(PERF_BR_, RET), C(PERF_BR_, SYSCALL),
  C(PERF_BR_, SYSRET), C(PERF_BR_, COND_CALL), C(PERF_BR_, COND_RET),
  C(PERF_BR_, ERET), C(PERF_BR_, IRQ), C(PERF_BR_, SERROR), C(PERF_BR_, NO_TX),
  C(PERF_BR_, EXTEND_ABI),
};

/* The kernel spells the non-speculative value PERF_BR_NON_SPEC_CORRECT_PATH,
 * outside the PERF_BR_SPEC_ prefix. */
static const struct perfev_const br_spec_c[] = {
  C(PERF_BR_SPEC_, NA), C(PERF_BR_SPEC_, WRONG_PATH),
  C(PERF_BR_, NON_SPEC_CORRECT_PATH), C(PERF_BR_SPEC_, CORRECT_PATH),
};

static const struct perfev_const br_new_c[] = {
  C(PERF_BR_NEW_, FAULT_ALGN), C(PERF_BR_NEW_, FAULT_DATA), C(PERF_BR_NEW_, FAULT_INST),
  C(PERF_BR_NEW_, ARCH_1), C(PERF_BR_NEW_, ARCH_2), C(PERF_BR_NEW_, ARCH_3),
  C(PERF_BR_NEW_, ARCH_4), C(PERF_BR_NEW_, ARCH_5),
};

/* arm64's names for the architecture-specific BR_NEW values. */
static const struct perfev_const br_arm64_c[] = {
  C(PERF_BR_ARM64_, FIQ), C(PERF_BR_ARM64_, DEBUG_HALT), C(PERF_BR_ARM64_, DEBUG_EXIT),
  C(PERF_BR_ARM64_, DEBUG_INST), C(PERF_BR_ARM64_, DEBUG_DATA),
};

static const struct perfev_const br_priv_c[] = {
  C(PERF_BR_PRIV_, UNKNOWN), C(PERF_BR_PRIV_, USER), C(PERF_BR_PRIV_, KERNEL),
  C(PERF_BR_PRIV_, HV),
};

static const struct perfev_const regs_abi_c[] = {
  C(PERF_SAMPLE_REGS_ABI_, NONE), C(PERF_SAMPLE_REGS_ABI_, 32),
  C(PERF_SAMPLE_REGS_ABI_, 64),
};

static const struct perfev_const txn_c[] = {
  C(PERF_TXN_, ELISION), C(PERF_TXN_, TRANSACTION), C(PERF_TXN_, SYNC),
  C(PERF_TXN_, ASYNC), C(PERF_TXN_, RETRY), C(PERF_TXN_, CONFLICT),
  C(PERF_TXN_, CAPACITY_WRITE), C(PERF_TXN_, CAPACITY_READ),
  C(PERF_TXN_, ABORT_MASK), C(PERF_TXN_, ABORT_SHIFT),
};

static const struct perfev_const format_c[] = {
  C(PERF_FORMAT_, TOTAL_TIME_ENABLED), C(PERF_FORMAT_, TOTAL_TIME_RUNNING),
  C(PERF_FORMAT_, ID), C(PERF_FORMAT_, GROUP), C(PERF_FORMAT_, LOST),
};

/* The sizes of struct perf_event_attr the kernel has published. */
static const struct perfev_const attr_size_c[] = {
  C(PERF_ATTR_SIZE_, VER0), C(PERF_ATTR_SIZE_, VER1), C(PERF_ATTR_SIZE_, VER2),
  C(PERF_ATTR_SIZE_, VER3), C(PERF_ATTR_SIZE_, VER4), C(PERF_ATTR_SIZE_, VER5),
  C(PERF_ATTR_SIZE_, VER6), C(PERF_ATTR_SIZE_, VER7), C(PERF_ATTR_SIZE_, VER8),
};

static const struct perfev_const ioc_c[] = {
  C(PERF_EVENT_IOC_, ENABLE), C(PERF_EVENT_IOC_, DISABLE), C(PERF_EVENT_IOC_, REFRESH),
  C(PERF_EVENT_IOC_, RESET), C(PERF_EVENT_IOC_, PERIOD), C(PERF_EVENT_IOC_, SET_OUTPUT),
  C(PERF_EVENT_IOC_, SET_FILTER), C(PERF_EVENT_IOC_, ID), C(PERF_EVENT_IOC_, SET_BPF),
  C(PERF_EVENT_IOC_, PAUSE_OUTPUT), C(PERF_EVENT_IOC_, QUERY_BPF),
  C(PERF_EVENT_IOC_, MODIFY_ATTRIBUTES),
};

static const struct perfev_const ioc_flag_c[] = {
  C(PERF_IOC_FLAG_, GROUP),
};

static const struct perfev_const flag_c[] = {
  C(PERF_FLAG_, FD_NO_GROUP), C(PERF_FLAG_, FD_OUTPUT), C(PERF_FLAG_, PID_CGROUP),
  C(PERF_FLAG_, FD_CLOEXEC),
};

static const struct perfev_const record_c[] = {
  C(PERF_RECORD_, MMAP), C(PERF_RECORD_, LOST), C(PERF_RECORD_, COMM),
  C(PERF_RECORD_, EXIT), C(PERF_RECORD_, THROTTLE), C(PERF_RECORD_, UNTHROTTLE),
  C(PERF_RECORD_, FORK), C(PERF_RECORD_, READ), C(PERF_RECORD_, SAMPLE),
  C(PERF_RECORD_, MMAP2), C(PERF_RECORD_, AUX), C(PERF_RECORD_, ITRACE_START),
  C(PERF_RECORD_, LOST_SAMPLES), C(PERF_RECORD_, SWITCH),
  C(PERF_RECORD_, SWITCH_CPU_WIDE), C(PERF_RECORD_, NAMESPACES),
  C(PERF_RECORD_, KSYMBOL), C(PERF_RECORD_, BPF_EVENT), C(PERF_RECORD_, CGROUP),
  C(PERF_RECORD_, TEXT_POKE), C(PERF_RECORD_, AUX_OUTPUT_HW_ID),
  C(PERF_RECORD_, CALLCHAIN_DEFERRED),
};

/* header.misc: several names share a bit (their meaning depends on the
 * record type); perfev_const_name returns the first listed. */
static const struct perfev_const misc_c[] = {
  C(PERF_RECORD_MISC_, CPUMODE_MASK), C(PERF_RECORD_MISC_, CPUMODE_UNKNOWN),
  C(PERF_RECORD_MISC_, KERNEL), C(PERF_RECORD_MISC_, USER),
  C(PERF_RECORD_MISC_, HYPERVISOR), C(PERF_RECORD_MISC_, GUEST_KERNEL),
  C(PERF_RECORD_MISC_, GUEST_USER), C(PERF_RECORD_MISC_, PROC_MAP_PARSE_TIMEOUT),
  C(PERF_RECORD_MISC_, MMAP_DATA), C(PERF_RECORD_MISC_, COMM_EXEC),
  C(PERF_RECORD_MISC_, FORK_EXEC), C(PERF_RECORD_MISC_, SWITCH_OUT),
  C(PERF_RECORD_MISC_, EXACT_IP), C(PERF_RECORD_MISC_, SWITCH_OUT_PREEMPT),
  C(PERF_RECORD_MISC_, MMAP_BUILD_ID), C(PERF_RECORD_MISC_, EXT_RESERVED),
};

/* Callchain context markers: u64 values just below 2^64, which Lua shows as
 * small negative integers. */
static const struct perfev_const context_c[] = {
  C(PERF_CONTEXT_, HV), C(PERF_CONTEXT_, KERNEL), C(PERF_CONTEXT_, USER),
  C(PERF_CONTEXT_, USER_DEFERRED), C(PERF_CONTEXT_, GUEST),
  C(PERF_CONTEXT_, GUEST_KERNEL), C(PERF_CONTEXT_, GUEST_USER), C(PERF_CONTEXT_, MAX),
};

static const struct perfev_const aux_flag_c[] = {
  C(PERF_AUX_FLAG_, TRUNCATED), C(PERF_AUX_FLAG_, OVERWRITE), C(PERF_AUX_FLAG_, PARTIAL),
  C(PERF_AUX_FLAG_, COLLISION), C(PERF_AUX_FLAG_, PMU_FORMAT_TYPE_MASK),
  C(PERF_AUX_FLAG_, CORESIGHT_FORMAT_CORESIGHT), C(PERF_AUX_FLAG_, CORESIGHT_FORMAT_RAW),
};

/* Indexes into PERF_RECORD_NAMESPACES' link_info array; the kernel puts
 * the common part last (NET_NS_INDEX) and calls the count NR_NAMESPACES. */
static const struct perfev_const ns_c[] = {
  S(NET, _NS_INDEX), S(UTS, _NS_INDEX), S(IPC, _NS_INDEX), S(PID, _NS_INDEX),
  S(USER, _NS_INDEX), S(MNT, _NS_INDEX), S(CGROUP, _NS_INDEX),
  N("MAX", NR_NAMESPACES),
};

static const struct perfev_const ksymbol_type_c[] = {
  C(PERF_RECORD_KSYMBOL_TYPE_, UNKNOWN), C(PERF_RECORD_KSYMBOL_TYPE_, BPF),
  C(PERF_RECORD_KSYMBOL_TYPE_, OOL),
};

static const struct perfev_const ksymbol_flag_c[] = {
  C(PERF_RECORD_KSYMBOL_FLAGS_, UNREGISTER),
};

static const struct perfev_const bpf_event_c[] = {
  C(PERF_BPF_EVENT_, UNKNOWN), C(PERF_BPF_EVENT_, PROG_LOAD),
  C(PERF_BPF_EVENT_, PROG_UNLOAD),
};

/* data_src (union perf_mem_data_src): each table holds one field's values
 * unshifted, as they read once the field is extracted; MEM_SHIFT says
 * where each field sits. */
static const struct perfev_const mem_op_c[] = {
  C(PERF_MEM_OP_, NA), C(PERF_MEM_OP_, LOAD), C(PERF_MEM_OP_, STORE),
  C(PERF_MEM_OP_, PFETCH), C(PERF_MEM_OP_, EXEC),
};

static const struct perfev_const mem_lvl_c[] = {
  C(PERF_MEM_LVL_, NA), C(PERF_MEM_LVL_, HIT), C(PERF_MEM_LVL_, MISS),
  C(PERF_MEM_LVL_, L1), C(PERF_MEM_LVL_, LFB), C(PERF_MEM_LVL_, L2),
  C(PERF_MEM_LVL_, L3), C(PERF_MEM_LVL_, LOC_RAM), C(PERF_MEM_LVL_, REM_RAM1),
  C(PERF_MEM_LVL_, REM_RAM2), C(PERF_MEM_LVL_, REM_CCE1), C(PERF_MEM_LVL_, REM_CCE2),
  C(PERF_MEM_LVL_, IO), C(PERF_MEM_LVL_, UNC),
};

static const struct perfev_const mem_lvlnum_c[] = {
  C(PERF_MEM_LVLNUM_, L1), C(PERF_MEM_LVLNUM_, L2), C(PERF_MEM_LVLNUM_, L3),
  C(PERF_MEM_LVLNUM_, L4), C(PERF_MEM_LVLNUM_, L2_MHB), C(PERF_MEM_LVLNUM_, MSC),
  C(PERF_MEM_LVLNUM_, UNC), C(PERF_MEM_LVLNUM_, CXL), C(PERF_MEM_LVLNUM_, IO),
  C(PERF_MEM_LVLNUM_, ANY_CACHE), C(PERF_MEM_LVLNUM_, LFB), C(PERF_MEM_LVLNUM_, RAM),
  C(PERF_MEM_LVLNUM_, PMEM), C(PERF_MEM_LVLNUM_, NA),
};

static const struct perfev_const mem_remote_c[] = {
  C(PERF_MEM_REMOTE_, REMOTE),
};

static const struct perfev_const mem_snoop_c[] = {
  C(PERF_MEM_SNOOP_, NA), C(PERF_MEM_SNOOP_, NONE), C(PERF_MEM_SNOOP_, HIT),
  C(PERF_MEM_SNOOP_, MISS), C(PERF_MEM_SNOOP_, HITM),
};

static const struct perfev_const mem_snoopx_c[] = {
  C(PERF_MEM_SNOOPX_, FWD), C(PERF_MEM_SNOOPX_, PEER),
};

static const struct perfev_const mem_lock_c[] = {
  C(PERF_MEM_LOCK_, NA), C(PERF_MEM_LOCK_, LOCKED),
};

static const struct perfev_const mem_tlb_c[] = {
  C(PERF_MEM_TLB_, NA), C(PERF_MEM_TLB_, HIT), C(PERF_MEM_TLB_, MISS),
  C(PERF_MEM_TLB_, L1), C(PERF_MEM_TLB_, L2), C(PERF_MEM_TLB_, WK), C(PERF_MEM_TLB_, OS),
};

static const struct perfev_const mem_blk_c[] = {
  C(PERF_MEM_BLK_, NA), C(PERF_MEM_BLK_, DATA), C(PERF_MEM_BLK_, ADDR),
};

static const struct perfev_const mem_hops_c[] = {
  C(PERF_MEM_HOPS_, 0), C(PERF_MEM_HOPS_, 1), C(PERF_MEM_HOPS_, 2), C(PERF_MEM_HOPS_, 3),
};

/* The TLB field is mem_dtlb in the union but PERF_MEM_TLB_SHIFT in the
 * macros: DTLB (the field's name) first, TLB (the macro's) as an alias. */
static const struct perfev_const mem_shift_c[] = {
  X(PERF_MEM_, OP, _SHIFT), X(PERF_MEM_, LVL, _SHIFT), X(PERF_MEM_, SNOOP, _SHIFT),
  X(PERF_MEM_, LOCK, _SHIFT), N("DTLB", PERF_MEM_TLB_SHIFT), X(PERF_MEM_, TLB, _SHIFT),
  X(PERF_MEM_, LVLNUM, _SHIFT), X(PERF_MEM_, REMOTE, _SHIFT),
  X(PERF_MEM_, SNOOPX, _SHIFT), X(PERF_MEM_, BLK, _SHIFT), X(PERF_MEM_, HOPS, _SHIFT),
};

/* attr.bp_type and attr.bp_len. */
static const struct perfev_const bp_type_c[] = {
  C(HW_BREAKPOINT_, EMPTY), C(HW_BREAKPOINT_, R), C(HW_BREAKPOINT_, W),
  C(HW_BREAKPOINT_, RW), C(HW_BREAKPOINT_, X), C(HW_BREAKPOINT_, INVALID),
};

static const struct perfev_const bp_len_c[] = {
  C(HW_BREAKPOINT_, LEN_1), C(HW_BREAKPOINT_, LEN_2), C(HW_BREAKPOINT_, LEN_3),
  C(HW_BREAKPOINT_, LEN_4), C(HW_BREAKPOINT_, LEN_5), C(HW_BREAKPOINT_, LEN_6),
  C(HW_BREAKPOINT_, LEN_7), C(HW_BREAKPOINT_, LEN_8),
};

/* attr.clockid (with use_clockid). */
static const struct perfev_const clock_c[] = {
  C(CLOCK_, REALTIME), C(CLOCK_, MONOTONIC), C(CLOCK_, PROCESS_CPUTIME_ID),
  C(CLOCK_, THREAD_CPUTIME_ID), C(CLOCK_, MONOTONIC_RAW), C(CLOCK_, REALTIME_COARSE),
  C(CLOCK_, MONOTONIC_COARSE), C(CLOCK_, BOOTTIME), C(CLOCK_, REALTIME_ALARM),
  C(CLOCK_, BOOTTIME_ALARM), C(CLOCK_, TAI),
};

/* x86 register indexes: bit numbers of attr.sample_regs_user/intr. */
static const struct perfev_const reg_c[] = {
  C(PERF_REG_X86_, AX), C(PERF_REG_X86_, BX), C(PERF_REG_X86_, CX),
  C(PERF_REG_X86_, DX), C(PERF_REG_X86_, SI), C(PERF_REG_X86_, DI),
  C(PERF_REG_X86_, BP), C(PERF_REG_X86_, SP), C(PERF_REG_X86_, IP),
  C(PERF_REG_X86_, FLAGS), C(PERF_REG_X86_, CS), C(PERF_REG_X86_, SS),
  C(PERF_REG_X86_, DS), C(PERF_REG_X86_, ES), C(PERF_REG_X86_, FS),
  C(PERF_REG_X86_, GS), C(PERF_REG_X86_, R8), C(PERF_REG_X86_, R9),
  C(PERF_REG_X86_, R10), C(PERF_REG_X86_, R11), C(PERF_REG_X86_, R12),
  C(PERF_REG_X86_, R13), C(PERF_REG_X86_, R14), C(PERF_REG_X86_, R15),
  C(PERF_REG_X86_, XMM0), C(PERF_REG_X86_, XMM1), C(PERF_REG_X86_, XMM2),
  C(PERF_REG_X86_, XMM3), C(PERF_REG_X86_, XMM4), C(PERF_REG_X86_, XMM5),
  C(PERF_REG_X86_, XMM6), C(PERF_REG_X86_, XMM7), C(PERF_REG_X86_, XMM8),
  C(PERF_REG_X86_, XMM9), C(PERF_REG_X86_, XMM10), C(PERF_REG_X86_, XMM11),
  C(PERF_REG_X86_, XMM12), C(PERF_REG_X86_, XMM13), C(PERF_REG_X86_, XMM14),
  C(PERF_REG_X86_, XMM15),
};

#define T(name, items) { name, items, sizeof(items) / sizeof((items)[0]) }

/* Every table, exported as core.<name>. */
/* errno names: what open and read return as their third value, so that the
 * Lua layer compares with core.ERRNO.EACCES rather than a number. */
static const struct perfev_const errno_c[] = {
  N("EPERM", EPERM), N("ENOENT", ENOENT), N("ESRCH", ESRCH), N("EINTR", EINTR),
  N("EIO", EIO), N("ENXIO", ENXIO), N("E2BIG", E2BIG), N("EBADF", EBADF),
  N("EAGAIN", EAGAIN), N("ENOMEM", ENOMEM), N("EACCES", EACCES), N("EFAULT", EFAULT),
  N("EBUSY", EBUSY), N("EEXIST", EEXIST), N("ENODEV", ENODEV), N("ENOTDIR", ENOTDIR),
  N("EISDIR", EISDIR), N("EINVAL", EINVAL), N("ENFILE", ENFILE), N("EMFILE", EMFILE),
  N("ENOTTY", ENOTTY), N("EFBIG", EFBIG), N("ENOSPC", ENOSPC), N("ESPIPE", ESPIPE),
  N("EPIPE", EPIPE), N("ERANGE", ERANGE), N("ENOSYS", ENOSYS), N("ENODATA", ENODATA),
  N("EOVERFLOW", EOVERFLOW), N("EOPNOTSUPP", EOPNOTSUPP), N("ETIMEDOUT", ETIMEDOUT),
};

static const struct perfev_const_table tables[] = {
  T("TYPE", type_c), T("HW", hw_c), T("HW_CACHE", hw_cache_c),
  T("HW_CACHE_OP", hw_cache_op_c), T("HW_CACHE_RESULT", hw_cache_result_c),
  T("SW", sw_c), T("SAMPLE", sample_c), T("BRANCH", branch_c), T("BR", br_c),
  T("BR_SPEC", br_spec_c), T("BR_NEW", br_new_c), T("BR_ARM64", br_arm64_c),
  T("BR_PRIV", br_priv_c), T("REGS_ABI", regs_abi_c), T("TXN", txn_c),
  T("FORMAT", format_c), T("ATTR_SIZE", attr_size_c), T("IOC", ioc_c),
  T("IOC_FLAG", ioc_flag_c), T("FLAG", flag_c), T("RECORD", record_c),
  T("MISC", misc_c), T("CONTEXT", context_c), T("AUX_FLAG", aux_flag_c),
  T("NS", ns_c), T("KSYMBOL_TYPE", ksymbol_type_c), T("KSYMBOL_FLAG", ksymbol_flag_c),
  T("BPF_EVENT", bpf_event_c), T("MEM_OP", mem_op_c), T("MEM_LVL", mem_lvl_c),
  T("MEM_LVLNUM", mem_lvlnum_c), T("MEM_REMOTE", mem_remote_c),
  T("MEM_SNOOP", mem_snoop_c), T("MEM_SNOOPX", mem_snoopx_c), T("MEM_LOCK", mem_lock_c),
  T("MEM_TLB", mem_tlb_c), T("MEM_BLK", mem_blk_c), T("MEM_HOPS", mem_hops_c),
  T("MEM_SHIFT", mem_shift_c), T("BP_TYPE", bp_type_c), T("BP_LEN", bp_len_c),
  T("CLOCK", clock_c), T("REG", reg_c), T("ERRNO", errno_c),
};

#define NTABLES (sizeof(tables) / sizeof(tables[0]))

/* Folds a name character so that lookups ignore case and accept '-' for
 * '_' ("page-faults" finds PAGE_FAULTS). ASCII only, so the C locale a host
 * program may have set cannot change the result. */
static int fold(unsigned char c)
{
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 'A';
  if (c == '-')
    return '_';
  return c;
}

static int name_eq(const char *key, const char *name)
{
  for (; *key && *name; key++, name++)
    if (fold((unsigned char)*key) != fold((unsigned char)*name))
      return 0;
  return *key == '\0' && *name == '\0';
}

const struct perfev_const_table *perfev_consts_get(const char *tname)
{
  for (size_t i = 0; i < NTABLES; i++)
    if (name_eq(tables[i].name, tname))
      return &tables[i];
  return NULL;
}

int perfev_const_lookup(const struct perfev_const_table *t, const char *name, uint64_t *out)
{
  for (size_t i = 0; i < t->n; i++) {
    if (name_eq(t->items[i].name, name)) {
      *out = t->items[i].value;
      return 1;
    }
  }
  return 0;
}

const char *perfev_const_name(const struct perfev_const_table *t, uint64_t value)
{
  for (size_t i = 0; i < t->n; i++)
    if (t->items[i].value == value)
      return t->items[i].name;
  return NULL;
}

void perfev_consts_push(lua_State *L, int idx)
{
  /* The pushes below would shift a relative index (lua_absindex is 5.2+). */
  if (idx < 0 && idx > LUA_REGISTRYINDEX)
    idx = lua_gettop(L) + idx + 1;
  for (size_t i = 0; i < NTABLES; i++) {
    const struct perfev_const_table *t = &tables[i];
    lua_createtable(L, 0, (int)t->n);
    for (size_t j = 0; j < t->n; j++) {
      lua_pushinteger(L, (lua_Integer)t->items[j].value);
      lua_setfield(L, -2, t->items[j].name);
    }
    lua_setfield(L, idx, t->name);
  }
}
