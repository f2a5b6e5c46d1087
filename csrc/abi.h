/* What kernels newer than the system's <linux/perf_event.h> added, defined
 * here under #ifndef so that perfev supports the newest ABI everywhere. */
#ifndef PERFEV_ABI_H
#define PERFEV_ABI_H

#include <linux/perf_event.h>

/* struct perf_event_attr grew to 136 bytes with config3 (Linux 6.3). */
#define PERFEV_ATTR_SIZE 136
#ifndef PERF_ATTR_SIZE_VER7
#define PERF_ATTR_SIZE_VER7 128
#endif
#ifndef PERF_ATTR_SIZE_VER8
#define PERF_ATTR_SIZE_VER8 136
#endif

#ifndef PERF_FORMAT_LOST
#define PERF_FORMAT_LOST (1U << 4)
#endif

#ifndef PERF_RECORD_AUX_OUTPUT_HW_ID
#define PERF_RECORD_AUX_OUTPUT_HW_ID 21
#endif
#ifndef PERF_RECORD_CALLCHAIN_DEFERRED
#define PERF_RECORD_CALLCHAIN_DEFERRED 22
#endif

#ifndef PERF_EVENT_IOC_PAUSE_OUTPUT
#define PERF_EVENT_IOC_PAUSE_OUTPUT _IOW('$', 9, __u32)
#endif
#ifndef PERF_EVENT_IOC_QUERY_BPF
#define PERF_EVENT_IOC_QUERY_BPF _IOWR('$', 10, struct perf_event_query_bpf *)
#endif
#ifndef PERF_EVENT_IOC_MODIFY_ATTRIBUTES
#define PERF_EVENT_IOC_MODIFY_ATTRIBUTES _IOW('$', 11, struct perf_event_attr *)
#endif

#ifndef PERF_FLAG_FD_NO_GROUP
#define PERF_FLAG_FD_NO_GROUP (1UL << 0)
#endif
#ifndef PERF_FLAG_FD_OUTPUT
#define PERF_FLAG_FD_OUTPUT (1UL << 1)
#endif
#ifndef PERF_FLAG_PID_CGROUP
#define PERF_FLAG_PID_CGROUP (1UL << 2)
#endif
#ifndef PERF_FLAG_FD_CLOEXEC
#define PERF_FLAG_FD_CLOEXEC (1UL << 3)
#endif

/* Linux 6.8: branch stacks can carry per-branch event counters. The system
 * header may have it as an enum constant; a same-valued macro is harmless. */
#ifndef PERF_SAMPLE_BRANCH_COUNTERS
#define PERF_SAMPLE_BRANCH_COUNTERS (1U << 19)
#endif

/* Newer data_src.mem_lvl_num levels (6.6: UNC; 6.11: L2_MHB, MSC). */
#ifndef PERF_MEM_LVLNUM_L2_MHB
#define PERF_MEM_LVLNUM_L2_MHB 0x05
#endif
#ifndef PERF_MEM_LVLNUM_MSC
#define PERF_MEM_LVLNUM_MSC 0x06
#endif
#ifndef PERF_MEM_LVLNUM_UNC
#define PERF_MEM_LVLNUM_UNC 0x08
#endif

/* Deferred user callchains: the marker in a sample's callchain that the
 * PERF_RECORD_CALLCHAIN_DEFERRED record completes. */
#ifndef PERF_CONTEXT_USER_DEFERRED
#define PERF_CONTEXT_USER_DEFERRED ((__u64)-640)
#endif

/* x86 perf register indexes (attr.sample_regs_user/intr bit numbers). The
 * system's <asm/perf_regs.h> is only the x86 one on x86; elsewhere, and when
 * it is missing, the same numbers are defined here so that records written
 * on x86 decode anywhere. */
#if defined(__x86_64__) || defined(__i386__)
#  if defined(__has_include)
#    if __has_include(<asm/perf_regs.h>)
#      include <asm/perf_regs.h>
#      define PERFEV_HAVE_X86_PERF_REGS 1
#    endif
#  endif
#endif
#ifndef PERFEV_HAVE_X86_PERF_REGS
#define PERF_REG_X86_AX 0
#define PERF_REG_X86_BX 1
#define PERF_REG_X86_CX 2
#define PERF_REG_X86_DX 3
#define PERF_REG_X86_SI 4
#define PERF_REG_X86_DI 5
#define PERF_REG_X86_BP 6
#define PERF_REG_X86_SP 7
#define PERF_REG_X86_IP 8
#define PERF_REG_X86_FLAGS 9
#define PERF_REG_X86_CS 10
#define PERF_REG_X86_SS 11
#define PERF_REG_X86_DS 12
#define PERF_REG_X86_ES 13
#define PERF_REG_X86_FS 14
#define PERF_REG_X86_GS 15
#define PERF_REG_X86_R8 16
#define PERF_REG_X86_R9 17
#define PERF_REG_X86_R10 18
#define PERF_REG_X86_R11 19
#define PERF_REG_X86_R12 20
#define PERF_REG_X86_R13 21
#define PERF_REG_X86_R14 22
#define PERF_REG_X86_R15 23
/* Each XMM register is 128 bits and takes two indexes. */
#define PERF_REG_X86_XMM0 32
#define PERF_REG_X86_XMM1 34
#define PERF_REG_X86_XMM2 36
#define PERF_REG_X86_XMM3 38
#define PERF_REG_X86_XMM4 40
#define PERF_REG_X86_XMM5 42
#define PERF_REG_X86_XMM6 44
#define PERF_REG_X86_XMM7 46
#define PERF_REG_X86_XMM8 48
#define PERF_REG_X86_XMM9 50
#define PERF_REG_X86_XMM10 52
#define PERF_REG_X86_XMM11 54
#define PERF_REG_X86_XMM12 56
#define PERF_REG_X86_XMM13 58
#define PERF_REG_X86_XMM14 60
#define PERF_REG_X86_XMM15 62
#endif

#endif
