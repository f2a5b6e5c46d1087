/* Shared declarations of the perfev C core (perfev.core). */
#ifndef PERFEV_H
#define PERFEV_H

#include <stddef.h>
#include <stdint.h>
#include <linux/perf_event.h>
#include <linux/hw_breakpoint.h>
#include "compat.h"
#include "abi.h"

/* The one symbol the shared module exports (the build hides the rest). */
#define PERFEV_EXPORT __attribute__((visibility("default")))

/* ---- util.c: classes, system call failures, options tables ---- */

/* Registers the class mt: the functions of meta (may be NULL) as its
 * metamethods and those of methods (may be NULL) in its __index table, or
 * under __methods when meta has its own __index. Every function gets the
 * metatable as upvalue 1 (perfev_self compares it). Sets __name. Every
 * class prints as "mt(facts)": its own __tostring in meta says what
 * matters (an event's name and fd), else a default names the class, the
 * answers of its closed/running methods, and its address. */
void perfev_class_register(lua_State *L, const char *mt, const luaL_Reg *meta,
                           const luaL_Reg *methods);
/* Pushes the methods table of class mt (to add closures to it). */
void perfev_class_methods(lua_State *L, const char *mt);
/* The integer argument at idx (dflt when absent) that the kernel narrows
 * to an int (pid, cpu, fd, ioctl argument, clock id): raises "who: what N
 * is out of range" rather than letting it wrap. */
int perfev_int_arg(lua_State *L, int idx, lua_Integer dflt, const char *who, const char *what);
/* s, or its first bytes and "..." in buf when it is longer: what a
 * message echoes of the caller's input is bounded. */
#define PERFEV_CLIP 68
const char *perfev_clip(const char *s, char buf[PERFEV_CLIP]);
/* The name closest to name (edit distance under 3) among n items of
 * `stride` bytes whose first member is their name (a const char *), or
 * NULL: what "did you mean" suggests. */
const char *perfev_nearest(const char *name, const void *items, size_t n, size_t stride);
/* Pushes nil, "what: strerror(err)", err; returns 3. */
int perfev_push_errno(lua_State *L, int err, const char *what);
void perfev_set_u64(lua_State *L, const char *k, uint64_t v);

/* One option an options table may hold: its name and its Lua type
 * (LUA_TNUMBER means an integer). A list ends with a NULL name. */
struct perfev_opt {
  const char *name;
  int type;
};
/* Checks the options table at idx against opts: an unknown key or a value
 * of another type raises "who: ..." naming the option. Returns 0 when idx
 * holds none or nil (no options), else 1. */
int perfev_check_options(lua_State *L, int idx, const char *who, const struct perfev_opt *opts);
/* The value of a checked option, or dflt when it is absent (or idx is not
 * a table). */
int perfev_opt_bool(lua_State *L, int idx, const char *name, int dflt);
lua_Integer perfev_opt_int(lua_State *L, int idx, const char *name, lua_Integer dflt);

/* ---- constants (consts.c): the kernel's enums as name/value data ---- */
struct perfev_const {
  const char *name;   /* kernel name without its prefix, e.g. "IP" for PERF_SAMPLE_IP */
  uint64_t value;
};
struct perfev_const_table {
  const char *name;   /* exported as core.<name>, e.g. "SAMPLE" */
  const struct perfev_const *items;
  size_t n;
};
/* The table called tname, or NULL. */
const struct perfev_const_table *perfev_consts_get(const char *tname);
/* Case-insensitive lookup of name in t; returns 1 and sets *out when found. */
int perfev_const_lookup(const struct perfev_const_table *t, const char *name, uint64_t *out);
/* Name of value in t (exact match), or NULL. */
const char *perfev_const_name(const struct perfev_const_table *t, uint64_t value);
/* Sets core.<NAME> = { KEY = value, ... } for every table on the table at idx. */
void perfev_consts_push(lua_State *L, int idx);

/* ---- attr (attr.c, attr/fields.c) ---- */
#define PERFEV_ATTR_MT "perfev.attr"
struct perfev_attr {
  unsigned char raw[PERFEV_ATTR_SIZE];   /* byte image of struct perf_event_attr */
};
struct perfev_attr *perfev_attr_check(lua_State *L, int idx);
/* Pushes a new attr built from the value at idx (attr: copied; table: fields set). */
struct perfev_attr *perfev_attr_from(lua_State *L, int idx);
uint64_t perfev_attr_u64(const struct perfev_attr *a, const char *field);
/* The string field (uprobe_path, kprobe_func) of the attr at idx that holds
 * a pointer the attr does not own, or NULL. */
const char *perfev_attr_foreign_string(lua_State *L, int idx);
/* Name of the first field at or after byte offset off that is non-zero, or NULL. */
const char *perfev_attr_nonzero_from(const struct perfev_attr *a, size_t off);
int perfev_attr_open_lib(lua_State *L);   /* registers the metatable, pushes core.attr */
/* attr/bytes.c: an attr from a file's bytes, in either byte order. */
struct perfev_attr *perfev_attr_push_bytes(lua_State *L, const unsigned char *p, size_t n, int swap);
int perfev_attr_bytes_open_lib(lua_State *L);   /* core.attr_from_bytes */

/* ---- events (event.c, open.c, read.c, group.c) ---- */
#define PERFEV_EVENT_MT "perfev.event"
struct perfev_event {
  int fd;                      /* -1 once closed */
  uint64_t read_format;
  uint64_t id;                 /* PERF_EVENT_IOC_ID, read once at open */
  struct perfev_attr attr;     /* as opened (sample_type etc. for decoding) */
};
struct perfev_event *perfev_event_check(lua_State *L, int idx);  /* raises if closed */
/* The event at index 1 of an event method (registered with the event
 * metatable as upvalue 1, which spares a registry lookup); raises if closed. */
struct perfev_event *perfev_event_self(lua_State *L);

/* The one check of a method's self, which every C method and metamethod
 * makes: the instance of class tname at index 1. The fast path: a userdata
 * whose metatable is upvalue 1 (perfev_class_register gives it to every
 * function of a class). Else perfev_self_slow: a userdata of class tname
 * (found by name), or a table whose metatable is upvalue 1 where tname is
 * a class of tables (never a registered userdata class: a group's result
 * tables), else it raises at the caller's line "tname: bad self for
 * METHOD (expected a tname, got ...)", naming the method: whatever is
 * passed (a number, another class, a file), nothing is read from it.
 * In the class's __gc alone it returns NULL instead (a finalizer never
 * raises): a __gc returns at once on NULL. */
void *perfev_self_slow(lua_State *L, const char *tname);
static inline void *perfev_self(lua_State *L, const char *tname)
{
  if (lua_getmetatable(L, 1)) {
    /* tables by address: cheaper than lua_rawequal, the same answer */
    int same = lua_topointer(L, -1) == lua_topointer(L, lua_upvalueindex(1));
    lua_pop(L, 1);
    if (same && lua_type(L, 1) == LUA_TUSERDATA)
      return lua_touserdata(L, 1);
  }
  return perfev_self_slow(L, tname);
}
int perfev_event_open_lib(lua_State *L);
/* Closes the fd, once; errors ignored (for __gc and group close). */
void perfev_event_close(struct perfev_event *ev);
/* Wraps a new fd in an event userdata (reads its id); pushes it, returns 1. */
int perfev_event_push(lua_State *L, int fd, const struct perfev_attr *a);
int perfev_open(lua_State *L);               /* core.open */
int perfev_read(lua_State *L);               /* ev:read() */
int perfev_read_raw(lua_State *L);           /* ev:read_raw() */
int perfev_prctl_open_lib(lua_State *L);

/* ---- read(2) decoding (read.c) ---- */
struct perfev_reading {
  uint64_t nr;               /* entries: 1 unless PERF_FORMAT_GROUP */
  uint64_t enabled, running; /* 0 when the format lacks them */
  int has_enabled, has_running, has_id, has_lost, group;
  const uint64_t *words;     /* the raw words read */
  size_t nwords;
};
struct perfev_entry { uint64_t value, id, lost; };
#define PERFEV_READ_WORDS 512   /* one stack buffer: groups of up to 169 members */
/* Reads fd into buf and decodes it by fmt. Returns 0, an errno, or -1 when
 * the kernel returned 0 bytes (a pinned event in error state). */
int perfev_read_fd(int fd, uint64_t fmt, uint64_t *buf, size_t cap, struct perfev_reading *r);
/* Pushes what a failed perfev_read_fd means: nil, message, errno. */
int perfev_push_read_error(lua_State *L, int err);
int perfev_group_open_lib(lua_State *L);

/* Whether a count with these times needs scaling: it ran only part of the
 * time it was enabled. A time the read_format lacks reads as 0: no scaling. */
static inline int perfev_scales(uint64_t enabled, uint64_t running)
{
  return running != 0 && enabled != 0 && enabled != running;
}
/* Scales a multiplexed count: value * enabled / running, without overflow. */
uint64_t perfev_scale(uint64_t value, uint64_t enabled, uint64_t running);

/* ---- sampling: the ring buffer (ring/) ---- */
int perfev_ring_open_lib(lua_State *L);     /* the ring metatable, ev:mmap */
int perfev_ring_aux_open_lib(lua_State *L); /* the AUX area metatable (ring/aux.c) */
int perfev_ring_read_open_lib(lua_State *L); /* core._selfread_compute (ring/selfread.c) */

/* ---- records (record/): iteration and decoder, encoder ---- */
int perfev_decode_open_lib(lua_State *L);   /* core.decode (iter.c), the decoder metatable */
int perfev_encode_open_lib(lua_State *L);   /* core.encode */

/* ---- clocks (clock.c): core.clock_ns, core.rusage ---- */
int perfev_clock_open_lib(lua_State *L);
int perfev_sigsave_open_lib(lua_State *L);   /* core.signal_ignore (sigsave.c) */
int perfev_profiler_open_lib(lua_State *L); /* core.profiler (profiler/) */

/* ---- perf.data reader (perfdata/) ---- */
int perfev_perfdata_open_lib(lua_State *L);   /* core.perfdata_reader */

/* ---- symbols (symbols/) ---- */
int perfev_elfsym_open_lib(lua_State *L);     /* core.elf_symtab, elf_add_* (symbols/elf.c) */
int perfev_symtab_open_lib(lua_State *L);     /* core.symtab (symbols/symtab.c) */
int perfev_kallsyms_open_lib(lua_State *L);   /* core.kallsyms_map (symbols/kallsyms.c) */

#endif
