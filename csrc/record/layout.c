/* The layout of every perf record as data: for each PERF_RECORD_* type the
 * fields that follow its header, in order, as perf_event_open(2) lists
 * them; the sample's fields with the sample_type bit that makes each one
 * present, in the order the kernel writes them; the sample_id trailer.
 * decode.c walks these rows with one loop. Field names are the man page's,
 * except where a body field would collide with a trailer field of another
 * meaning (noted at the row). Process and thread ids are u32 in the ABI
 * but pid_t in meaning (-1: none, as in a synthesized kernel mmap or a
 * switch_cpu_wide from idle): they are read as signed (OP_S32). */
#include <stdio.h>
#include <string.h>
#include "layout.h"

#define F(name, op) { 0, op, name }
#define PAD { 0, OP_PAD32, NULL }
#define S(bit, op, name) { PERF_SAMPLE_##bit, op, name }

/* pid and tid open several records */
#define PID_TID F("pid", OP_S32), F("tid", OP_S32)

static const struct perfev_rfield mmap_f[] = {
  PID_TID, F("addr", OP_U64), F("len", OP_U64), F("pgoff", OP_U64), F("filename", OP_STR),
};
static const struct perfev_rfield lost_f[] = { F("id", OP_U64), F("lost", OP_U64) };
static const struct perfev_rfield comm_f[] = { PID_TID, F("comm", OP_STR) };
/* exit and fork */
static const struct perfev_rfield task_f[] = {
  F("pid", OP_S32), F("ppid", OP_S32), F("tid", OP_S32), F("ptid", OP_S32), F("time", OP_U64),
};
/* throttle and unthrottle */
static const struct perfev_rfield throttle_f[] = {
  F("time", OP_U64), F("id", OP_U64), F("stream_id", OP_U64),
};
static const struct perfev_rfield read_f[] = { PID_TID, F("values", OP_READ) };
static const struct perfev_rfield mmap2_f[] = {
  PID_TID, F("addr", OP_U64), F("len", OP_U64), F("pgoff", OP_U64),
  F(NULL, OP_MMAP2_ID),   /* maj/min/ino/ino_generation, or build_id */
  F("prot", OP_U32), F("flags", OP_U32), F("filename", OP_STR),
};
static const struct perfev_rfield aux_f[] = {
  F("aux_offset", OP_U64), F("aux_size", OP_U64), F("flags", OP_AUX_FLAGS),
};
static const struct perfev_rfield itrace_f[] = { PID_TID };
static const struct perfev_rfield lost_samples_f[] = { F("lost", OP_U64) };
static const struct perfev_rfield switch_cpu_f[] = {
  F("next_prev_pid", OP_S32), F("next_prev_tid", OP_S32),
};
static const struct perfev_rfield namespaces_f[] = { PID_TID, F("namespaces", OP_NAMESPACES) };
static const struct perfev_rfield ksymbol_f[] = {
  F("addr", OP_U64), F("len", OP_U32), F("ksym_type", OP_U16), F("flags", OP_U16),
  F("name", OP_STR),
};
/* The man page's type and id would hide rec.type and the trailer's id. */
static const struct perfev_rfield bpf_f[] = {
  F("bpf_type", OP_U16), F("flags", OP_U16), F("prog_id", OP_U32), F("tag", OP_BYTES8),
};
/* The man page's id (a cgroup id) would hide the trailer's event id. */
static const struct perfev_rfield cgroup_f[] = { F("cgroup_id", OP_U64), F("path", OP_STR) };
static const struct perfev_rfield text_poke_f[] = { F("addr", OP_U64), F(NULL, OP_TEXT_POKE) };
static const struct perfev_rfield hw_id_f[] = { F("hw_id", OP_U64) };
static const struct perfev_rfield deferred_f[] = { F("cookie", OP_U64), F("callchain", OP_CALLCHAIN) };

#define R(type, name, fields, trailer) \
  { PERF_RECORD_##type, name, fields, sizeof(fields) / sizeof((fields)[0]), trailer }

/* Indexed by type: rtypes[t].type == t is checked by perfev_rtype_find. */
static const struct perfev_rtype rtypes[] = {
  { 0, NULL, NULL, 0, 0 },
  R(MMAP, "mmap", mmap_f, 1), R(LOST, "lost", lost_f, 1), R(COMM, "comm", comm_f, 1),
  R(EXIT, "exit", task_f, 1), R(THROTTLE, "throttle", throttle_f, 1),
  R(UNTHROTTLE, "unthrottle", throttle_f, 1), R(FORK, "fork", task_f, 1),
  R(READ, "read", read_f, 1), { PERF_RECORD_SAMPLE, "sample", NULL, 0, 0 },
  R(MMAP2, "mmap2", mmap2_f, 1), R(AUX, "aux", aux_f, 1),
  R(ITRACE_START, "itrace_start", itrace_f, 1), R(LOST_SAMPLES, "lost_samples", lost_samples_f, 1),
  { PERF_RECORD_SWITCH, "switch", NULL, 0, 1 },   /* no body */
  R(SWITCH_CPU_WIDE, "switch_cpu_wide", switch_cpu_f, 1),
  R(NAMESPACES, "namespaces", namespaces_f, 1), R(KSYMBOL, "ksymbol", ksymbol_f, 1),
  R(BPF_EVENT, "bpf_event", bpf_f, 1), R(CGROUP, "cgroup", cgroup_f, 1),
  R(TEXT_POKE, "text_poke", text_poke_f, 1), R(AUX_OUTPUT_HW_ID, "aux_output_hw_id", hw_id_f, 1),
  R(CALLCHAIN_DEFERRED, "callchain_deferred", deferred_f, 1),
};

const struct perfev_rtype *perfev_rtype_find(uint32_t type)
{
  if (type >= sizeof rtypes / sizeof rtypes[0] || rtypes[type].type != type || !rtypes[type].name)
    return NULL;
  return &rtypes[type];
}

/* The sample, in the order the kernel writes it (perf_output_sample). */
const struct perfev_rfield perfev_sample_fields[] = {
  S(IDENTIFIER, OP_U64, "id"), S(IP, OP_U64, "ip"),
  S(TID, OP_S32, "pid"), S(TID, OP_S32, "tid"), S(TIME, OP_U64, "time"),
  S(ADDR, OP_U64, "addr"), S(ID, OP_U64, "id"), S(STREAM_ID, OP_U64, "stream_id"),
  S(CPU, OP_U32, "cpu"), S(CPU, OP_PAD32, NULL), S(PERIOD, OP_U64, "period"),
  S(READ, OP_READ, "read"), S(CALLCHAIN, OP_CALLCHAIN, "callchain"), S(RAW, OP_RAW, "raw"),
  S(BRANCH_STACK, OP_BRANCH, "branch_stack"), S(REGS_USER, OP_REGS_USER, "regs_user"),
  S(STACK_USER, OP_STACK, "stack_user"),
  { PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT, OP_WEIGHT, "weight" },
  S(DATA_SRC, OP_DATA_SRC, "data_src"), S(TRANSACTION, OP_U64, "transaction"),
  S(REGS_INTR, OP_REGS_INTR, "regs_intr"), S(PHYS_ADDR, OP_U64, "phys_addr"),
  S(CGROUP, OP_U64, "cgroup"), S(DATA_PAGE_SIZE, OP_U64, "data_page_size"),
  S(CODE_PAGE_SIZE, OP_U64, "code_page_size"), S(AUX, OP_AUXDATA, "aux"),
};
const size_t perfev_sample_nfields = sizeof perfev_sample_fields / sizeof perfev_sample_fields[0];

/* struct sample_id, appended to other records when attr.sample_id_all. */
const struct perfev_rfield perfev_trailer_fields[] = {
  S(TID, OP_S32, "pid"), S(TID, OP_S32, "tid"), S(TIME, OP_U64, "time"),
  S(ID, OP_U64, "id"), S(STREAM_ID, OP_U64, "stream_id"),
  S(CPU, OP_U32, "cpu"), S(CPU, OP_PAD32, NULL), S(IDENTIFIER, OP_U64, "id"),
};
const size_t perfev_trailer_nfields = sizeof perfev_trailer_fields / sizeof perfev_trailer_fields[0];

#define M(type, bit, name) { PERF_RECORD_##type, PERF_RECORD_MISC_##bit, name }

/* The same bit means different things in different records. */
const struct perfev_misc_flag perfev_misc_flags[] = {
  M(MMAP, PROC_MAP_PARSE_TIMEOUT, "proc_map_parse_timeout"),
  M(MMAP2, PROC_MAP_PARSE_TIMEOUT, "proc_map_parse_timeout"),
  M(MMAP, MMAP_DATA, "mmap_data"), M(MMAP2, MMAP_DATA, "mmap_data"),
  M(COMM, COMM_EXEC, "comm_exec"), M(FORK, FORK_EXEC, "fork_exec"),
  M(SWITCH, SWITCH_OUT, "switch_out"), M(SWITCH_CPU_WIDE, SWITCH_OUT, "switch_out"),
  M(SAMPLE, EXACT_IP, "exact_ip"), M(MMAP2, MMAP_BUILD_ID, "mmap_build_id"),
  M(SWITCH, SWITCH_OUT_PREEMPT, "switch_out_preempt"),
  M(SWITCH_CPU_WIDE, SWITCH_OUT_PREEMPT, "switch_out_preempt"),
  { 0, PERF_RECORD_MISC_EXT_RESERVED, "ext_reserved" },
};
const size_t perfev_misc_nflags = sizeof perfev_misc_flags / sizeof perfev_misc_flags[0];

/* header.misc & PERF_RECORD_MISC_CPUMODE_MASK */
const char *const perfev_cpumode_names[8] = {
  [PERF_RECORD_MISC_CPUMODE_UNKNOWN] = "unknown", [PERF_RECORD_MISC_KERNEL] = "kernel",
  [PERF_RECORD_MISC_USER] = "user", [PERF_RECORD_MISC_HYPERVISOR] = "hypervisor",
  [PERF_RECORD_MISC_GUEST_KERNEL] = "guest_kernel", [PERF_RECORD_MISC_GUEST_USER] = "guest_user",
};

/* Widths as union perf_mem_data_src declares its bitfields. */
const struct perfev_mem_field perfev_mem_fields[] = {
  { "op", PERF_MEM_OP_SHIFT, 5, 0, "MEM_OP" },
  { "lvl", PERF_MEM_LVL_SHIFT, 14, 0, "MEM_LVL" },
  { "snoop", PERF_MEM_SNOOP_SHIFT, 5, 0, "MEM_SNOOP" },
  { "lock", PERF_MEM_LOCK_SHIFT, 2, 0, "MEM_LOCK" },
  { "dtlb", PERF_MEM_TLB_SHIFT, 7, 0, "MEM_TLB" },
  { "lvl_num", PERF_MEM_LVLNUM_SHIFT, 4, 1, "MEM_LVLNUM" },
  { "remote", PERF_MEM_REMOTE_SHIFT, 1, 0, "MEM_REMOTE" },
  { "snoopx", PERF_MEM_SNOOPX_SHIFT, 2, 0, "MEM_SNOOPX" },
  { "blk", PERF_MEM_BLK_SHIFT, 3, 0, "MEM_BLK" },
  { "hops", PERF_MEM_HOPS_SHIFT, 3, 1, "MEM_HOPS" },
};
const size_t perfev_mem_nfields = sizeof perfev_mem_fields / sizeof perfev_mem_fields[0];

const struct perfev_context perfev_contexts[] = {
  { "hv", PERF_CONTEXT_HV }, { "kernel", PERF_CONTEXT_KERNEL }, { "user", PERF_CONTEXT_USER },
  { "guest", PERF_CONTEXT_GUEST }, { "guest_kernel", PERF_CONTEXT_GUEST_KERNEL },
  { "guest_user", PERF_CONTEXT_GUEST_USER }, { "user_deferred", PERF_CONTEXT_USER_DEFERRED },
};
const size_t perfev_ncontexts = sizeof perfev_contexts / sizeof perfev_contexts[0];

/* The CORESIGHT_FORMAT_* values share bits with the flags: no key of their own. */
int perfev_aux_flag_named(const struct perfev_const *c)
{
  return (c->value & (c->value - 1)) == 0 && strncmp(c->name, "CORESIGHT", 9) != 0;
}

const struct perfev_branch_bit perfev_branch_bits[] = {
  { "mispred", 0, 1, 1 }, { "predicted", 1, 1, 1 }, { "in_tx", 2, 1, 1 }, { "abort", 3, 1, 1 },
  { "cycles", 4, 16, 0 }, { "type", 20, 4, 0 }, { "spec", 24, 2, 0 }, { "new_type", 26, 4, 0 },
  { "priv", 30, 3, 0 },
};
const size_t perfev_branch_nbits = sizeof perfev_branch_bits / sizeof perfev_branch_bits[0];

unsigned perfev_branch_shift(const struct perfev_branch_bit *b, int be)
{
  return be ? 64u - b->bit - b->width : b->bit;
}

void perfev_reg_name(int i, char buf[PERFEV_REG_NAME])
{
  const struct perfev_const_table *t = perfev_consts_get("REG");
  const char *name = t ? perfev_const_name(t, (uint64_t)i) : NULL;
  const char *lo = (!name && i > 0 && t) ? perfev_const_name(t, (uint64_t)(i - 1)) : NULL;
  if (lo && strncmp(lo, "XMM", 3) == 0)
    snprintf(buf, PERFEV_REG_NAME, "%sh", lo);
  else if (name)
    snprintf(buf, PERFEV_REG_NAME, "%s", name);
  else
    snprintf(buf, PERFEV_REG_NAME, "r%d", i);
  for (size_t n = 0; buf[n]; n++)
    if (buf[n] >= 'A' && buf[n] <= 'Z')
      buf[n] = (char)(buf[n] - 'A' + 'a');
}
