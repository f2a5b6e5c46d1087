/* Every field of struct perf_event_attr (newest ABI), in layout order.
 * Union members share an offset; only the first of a union has a dump label,
 * which names the whole union the way `perf stat -vv` does. */
#include <string.h>
#include "perfev.h"
#include "fields.h"

#define U(name, off, sz, fmt) { name, off, sz, 0, (sz) * 8, 0, PERFEV_NAMES_NONE, fmt, NULL, name }
#define ALIAS(name, off, sz) { name, off, sz, 0, (sz) * 8, 0, PERFEV_NAMES_NONE, PERFEV_FMT_UNSIGNED, NULL, NULL }
#define NAMED(name, off, sz, kind, tbl, fmt) { name, off, sz, 0, (sz) * 8, 0, kind, fmt, tbl, name }
/* a bit (or bits) of the u64 flag word at offset 40 */
#define CSTR(name, off) { name, off, 8, 0, 64, 0, PERFEV_NAMES_CSTR, PERFEV_FMT_HEX, NULL, NULL }
#define FLAG(name, bit, w) { name, 40, 8, bit, w, 0, PERFEV_NAMES_NONE, PERFEV_FMT_UNSIGNED, NULL, name }
#define AUXBIT(name, bit) { name, 116, 4, bit, 1, 0, PERFEV_NAMES_NONE, PERFEV_FMT_UNSIGNED, NULL, name }

#define FLAGS_OFF 40

const struct perfev_field perfev_attr_fields[] = {
  NAMED("type", 0, 4, PERFEV_NAMES_ENUM, "TYPE", PERFEV_FMT_UNSIGNED),
  U("size", 4, 4, PERFEV_FMT_UNSIGNED),
  U("config", 8, 8, PERFEV_FMT_HEX),
  { "sample_period", 16, 8, 0, 64, 0, PERFEV_NAMES_NONE, PERFEV_FMT_UNSIGNED, NULL,
    "{ sample_period, sample_freq }" },
  ALIAS("sample_freq", 16, 8),
  NAMED("sample_type", 24, 8, PERFEV_NAMES_MASK, "SAMPLE", PERFEV_FMT_FLAGS),
  NAMED("read_format", 32, 8, PERFEV_NAMES_MASK, "FORMAT", PERFEV_FMT_FLAGS),
  FLAG("disabled", 0, 1), FLAG("inherit", 1, 1), FLAG("pinned", 2, 1),
  FLAG("exclusive", 3, 1), FLAG("exclude_user", 4, 1), FLAG("exclude_kernel", 5, 1),
  FLAG("exclude_hv", 6, 1), FLAG("exclude_idle", 7, 1), FLAG("mmap", 8, 1),
  FLAG("comm", 9, 1), FLAG("freq", 10, 1), FLAG("inherit_stat", 11, 1),
  FLAG("enable_on_exec", 12, 1), FLAG("task", 13, 1), FLAG("watermark", 14, 1),
  FLAG("precise_ip", 15, 2), FLAG("mmap_data", 17, 1), FLAG("sample_id_all", 18, 1),
  FLAG("exclude_host", 19, 1), FLAG("exclude_guest", 20, 1),
  FLAG("exclude_callchain_kernel", 21, 1), FLAG("exclude_callchain_user", 22, 1),
  FLAG("mmap2", 23, 1), FLAG("comm_exec", 24, 1), FLAG("use_clockid", 25, 1),
  FLAG("context_switch", 26, 1), FLAG("write_backward", 27, 1),
  FLAG("namespaces", 28, 1), FLAG("ksymbol", 29, 1), FLAG("bpf_event", 30, 1),
  FLAG("aux_output", 31, 1), FLAG("cgroup", 32, 1), FLAG("text_poke", 33, 1),
  FLAG("build_id", 34, 1), FLAG("inherit_thread", 35, 1),
  FLAG("remove_on_exec", 36, 1), FLAG("sigtrap", 37, 1),
  FLAG("defer_callchain", 38, 1), FLAG("defer_output", 39, 1),
  { "wakeup_events", 48, 4, 0, 32, 0, PERFEV_NAMES_NONE, PERFEV_FMT_UNSIGNED, NULL,
    "{ wakeup_events, wakeup_watermark }" },
  ALIAS("wakeup_watermark", 48, 4),
  NAMED("bp_type", 52, 4, PERFEV_NAMES_MASK, "BP_TYPE", PERFEV_FMT_UNSIGNED),
  { "bp_addr", 56, 8, 0, 64, 0, PERFEV_NAMES_NONE, PERFEV_FMT_HEX, NULL, "{ bp_addr, config1 }" },
  CSTR("kprobe_func", 56), CSTR("uprobe_path", 56), ALIAS("config1", 56, 8),
  { "bp_len", 64, 8, 0, 64, 0, PERFEV_NAMES_NONE, PERFEV_FMT_HEX, NULL, "{ bp_len, config2 }" },
  ALIAS("kprobe_addr", 64, 8), ALIAS("probe_offset", 64, 8), ALIAS("config2", 64, 8),
  NAMED("branch_sample_type", 72, 8, PERFEV_NAMES_MASK, "BRANCH", PERFEV_FMT_FLAGS),
  NAMED("sample_regs_user", 80, 8, PERFEV_NAMES_REGS, "REG", PERFEV_FMT_HEX),
  U("sample_stack_user", 88, 4, PERFEV_FMT_UNSIGNED),
  { "clockid", 92, 4, 0, 32, 1, PERFEV_NAMES_ENUM, PERFEV_FMT_SIGNED, "CLOCK", "clockid" },
  NAMED("sample_regs_intr", 96, 8, PERFEV_NAMES_REGS, "REG", PERFEV_FMT_HEX),
  U("aux_watermark", 104, 4, PERFEV_FMT_UNSIGNED),
  U("sample_max_stack", 108, 2, PERFEV_FMT_UNSIGNED),
  U("aux_sample_size", 112, 4, PERFEV_FMT_UNSIGNED),
  { "aux_action", 116, 4, 0, 32, 0, PERFEV_NAMES_NONE, PERFEV_FMT_HEX, NULL, NULL },
  AUXBIT("aux_start_paused", 0), AUXBIT("aux_pause", 1), AUXBIT("aux_resume", 2),
  U("sig_data", 120, 8, PERFEV_FMT_UNSIGNED),
  U("config3", 128, 8, PERFEV_FMT_HEX),
};

const size_t perfev_attr_nfields = sizeof perfev_attr_fields / sizeof perfev_attr_fields[0];

/* The table above hard-codes offsets; the system header checks them. */
_Static_assert(offsetof(struct perf_event_attr, config) == 8, "config");
_Static_assert(offsetof(struct perf_event_attr, sample_type) == 24, "sample_type");
_Static_assert(offsetof(struct perf_event_attr, wakeup_events) == FLAGS_OFF + 8, "flags");
_Static_assert(offsetof(struct perf_event_attr, bp_type) == 52, "bp_type");
_Static_assert(offsetof(struct perf_event_attr, config1) == 56, "config1");
_Static_assert(offsetof(struct perf_event_attr, config2) == 64, "config2");
_Static_assert(offsetof(struct perf_event_attr, branch_sample_type) == 72, "branch");
_Static_assert(offsetof(struct perf_event_attr, sample_regs_user) == 80, "regs_user");
_Static_assert(offsetof(struct perf_event_attr, clockid) == 92, "clockid");
_Static_assert(offsetof(struct perf_event_attr, sample_regs_intr) == 96, "regs_intr");
_Static_assert(offsetof(struct perf_event_attr, sample_max_stack) == 108, "max_stack");
_Static_assert(offsetof(struct perf_event_attr, aux_sample_size) == 112, "aux_sample");
_Static_assert(sizeof(struct perf_event_attr) <= PERFEV_ATTR_SIZE, "attr size");

const struct perfev_field *perfev_field_find(const char *name)
{
  for (size_t i = 0; i < perfev_attr_nfields; i++)
    if (strcmp(perfev_attr_fields[i].name, name) == 0)
      return &perfev_attr_fields[i];
  return NULL;
}
