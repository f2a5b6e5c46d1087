/* perf's own record types (PERF_RECORD_HEADER_ATTR and the others from 64
 * on, tools/lib/perf/include/perf/event.h) decoded into tables the same
 * way layout.c describes kernel records: a row per field, one loop,
 * a function for each kind of field, every read bounds-checked. Names
 * that would hide rec.type or rec.size get a prefix (update_type,
 * round_type, error_type, auxtrace_type, data_size).
 *
 * The rows are the one description of these layouts: core.PERFDATA.LAYOUT
 * exports them, and the writer (lua/perfev/perfdata/usrec.lua) encodes
 * by walking them, with a function for each kind of the same name. */
#include <inttypes.h>
#include <string.h>
#include "perfdata.h"

/* The kinds of field: the op, and its name in core.PERFDATA.LAYOUT. OPT
 * marks where the fields a newer perf added begin (absent: the record
 * ends there). */
#define PD_UOPS(X)                                                                            \
  X(U8, u8) X(U32, u32) X(U64, u64) X(PAD32, pad32) X(CSTR, cstr) X(BYTES, bytes)           \
  X(U64S, u64s) X(OPT, opt) X(ATTR, attr) X(ID_INDEX, id_index) X(THREADS, threads)         \
  X(CPUS, cpus) X(STAT_CONFIG, stat_config) X(EVENT_UPDATE, event_update)                   \
  X(BUILD_ID, build_id) X(AUXTRACE_ERROR, auxtrace_error) X(FEATURE, feature)
#define PD_UOP_ENUM(op, name) U_##op,
#define PD_UOP_NAME(op, name) [U_##op] = #name,
enum { PD_UOPS(PD_UOP_ENUM) U_COUNT };
static const char *const uop_names[U_COUNT] = { PD_UOPS(PD_UOP_NAME) };

struct ufield {
  uint8_t op;
  uint8_t n;          /* bytes of a fixed-size string */
  const char *name;
};

struct utype {
  const char *name;
  const struct ufield *fields;
  size_t nfields;
};

#define F(name, op) { op, 0, name }   /* as layout.c: the name, then how it is read */
#define UT(name, f) { name, f, sizeof(f) / sizeof((f)[0]) }

static const struct ufield attr_f[] = { F("attr", U_ATTR) };
static const struct ufield event_type_f[] = { F("event_id", U_U64), { U_CSTR, 64, "name" } };
static const struct ufield tracing_f[] = { F("data_size", U_U32) };
static const struct ufield build_id_f[] = { F(NULL, U_BUILD_ID) };
static const struct ufield id_index_f[] = { F("entries", U_ID_INDEX) };
static const struct ufield auxtrace_info_f[] = {
  F("auxtrace_type", U_U32), F(NULL, U_PAD32), F("priv", U_U64S),
};
static const struct ufield auxtrace_f[] = {
  F("data_size", U_U64), F("data_offset", U_U64), F("reference", U_U64), F("idx", U_U32),
  F("tid", U_U32), F("cpu", U_U32),
};
static const struct ufield auxtrace_error_f[] = { F(NULL, U_AUXTRACE_ERROR) };
static const struct ufield thread_map_f[] = { F("threads", U_THREADS) };
static const struct ufield cpu_map_f[] = { F("cpus", U_CPUS) };
static const struct ufield stat_config_f[] = { F("config", U_STAT_CONFIG) };
static const struct ufield stat_f[] = {
  F("id", U_U64), F("cpu", U_U32), F("thread", U_U32), F("val", U_U64), F("ena", U_U64),
  F("run", U_U64),
};
static const struct ufield stat_round_f[] = { F("round_type", U_U64), F("time", U_U64) };
static const struct ufield event_update_f[] = { F(NULL, U_EVENT_UPDATE) };
/* time_cycles and what follows came with Linux 5.13's perf */
static const struct ufield time_conv_f[] = {
  F("time_shift", U_U64), F("time_mult", U_U64), F("time_zero", U_U64), F(NULL, U_OPT),
  F("time_cycles", U_U64), F("time_mask", U_U64), F("cap_user_time_zero", U_U8),
  F("cap_user_time_short", U_U8),
};
static const struct ufield feature_f[] = { F(NULL, U_FEATURE) };
static const struct ufield data_f[] = { F("data", U_BYTES) };
static const struct ufield empty_f[] = { F(NULL, U_OPT) };

static const struct utype utypes[PD_USER_END - PD_USER_START] = {
  [PD_HEADER_ATTR - 64] = UT("header_attr", attr_f),
  [PD_EVENT_TYPE - 64] = UT("event_type", event_type_f),
  [PD_TRACING_DATA - 64] = UT("tracing_data", tracing_f),
  [PD_BUILD_ID - 64] = UT("build_id", build_id_f),
  [PD_FINISHED_ROUND - 64] = UT("finished_round", empty_f),
  [PD_ID_INDEX - 64] = UT("id_index", id_index_f),
  [PD_AUXTRACE_INFO - 64] = UT("auxtrace_info", auxtrace_info_f),
  [PD_AUXTRACE - 64] = UT("auxtrace", auxtrace_f),
  [PD_AUXTRACE_ERROR - 64] = UT("auxtrace_error", auxtrace_error_f),
  [PD_THREAD_MAP - 64] = UT("thread_map", thread_map_f),
  [PD_CPU_MAP - 64] = UT("cpu_map", cpu_map_f),
  [PD_STAT_CONFIG - 64] = UT("stat_config", stat_config_f),
  [PD_STAT - 64] = UT("stat", stat_f),
  [PD_STAT_ROUND - 64] = UT("stat_round", stat_round_f),
  [PD_EVENT_UPDATE - 64] = UT("event_update", event_update_f),
  [PD_TIME_CONV - 64] = UT("time_conv", time_conv_f),
  [PD_HEADER_FEATURE - 64] = UT("header_feature", feature_f),
  [PD_COMPRESSED - 64] = UT("compressed", data_f),
  [PD_FINISHED_INIT - 64] = UT("finished_init", empty_f),
  [PD_COMPRESSED2 - 64] = UT("compressed2", data_f),
  [PD_BPF_METADATA - 64] = UT("bpf_metadata", data_f),
  [PD_SCHEDSTAT_CPU - 64] = UT("schedstat_cpu", data_f),
  [PD_SCHEDSTAT_DOMAIN - 64] = UT("schedstat_domain", data_f),
};

/* HEADER_* feature bits of the file header, by bit. */
const char *const pd_feature_names[] = {
  NULL, "tracing_data", "build_id", "hostname", "osrelease", "version", "arch", "nrcpus",
  "cpudesc", "cpuid", "total_mem", "cmdline", "event_desc", "cpu_topology", "numa_topology",
  "branch_stack", "pmu_mappings", "group_desc", "auxtrace", "stat", "cache", "sample_time",
  "mem_topology", "clockid", "dir_format", "bpf_prog_info", "bpf_btf", "compressed",
  "cpu_pmu_caps", "clock_data", "hybrid_topology", "pmu_caps", "cpu_domain_info",
};
const size_t pd_nfeatures = sizeof pd_feature_names / sizeof pd_feature_names[0];

/* The name of a user record type, or NULL. */
static const char *pd_user_name(uint32_t type)
{
  if (type < PD_USER_START || type >= PD_USER_END)
    return NULL;
  return utypes[type - PD_USER_START].name;
}

/* ---- the cursor ---- */

struct ucur {
  struct perfev_cursor in;   /* first: ucur_fail casts it back */
  lua_State *L;
  const struct pd_reader *r;
  uint64_t foff;
  const char *tname;
};

static void ucur_fail(const struct perfev_cursor *in, const char *msg)
{
  const struct ucur *c = (const struct ucur *)(const void *)in;
  pd_error(c->L, c->r, "the %s record at offset %" PRIu64 ": %s", c->tname, c->foff, msg);
}

static const unsigned char *take(struct ucur *c, size_t n, const char *what)
{
  return perfev_cursor_take(&c->in, n, what);
}

static size_t left(const struct ucur *c)
{
  return perfev_cursor_left(&c->in);
}

#define get64(c, what) perfev_cursor_u64(&(c)->in, what)
#define get32(c, what) perfev_cursor_u32(&(c)->in, what)
#define get16(c, what) perfev_cursor_u16(&(c)->in, what)
#define count_of(c, n, each, what) perfev_cursor_fits(&(c)->in, n, each, what)
#define fail(c, ...) perfev_cursor_fail(&(c)->in, __VA_ARGS__)

/* A NUL-terminated string of at most n bytes. */
static void push_cstr(lua_State *L, const unsigned char *p, size_t n)
{
  const unsigned char *nul = memchr(p, 0, n);
  lua_pushlstring(L, (const char *)p, nul ? (size_t)(nul - p) : n);
}

/* ---- composite fields ---- */

static void u_attr(struct ucur *c, const struct ufield *f)
{
  lua_State *L = c->L;
  uint32_t size;
  uint64_t n;
  if (left(c) < 8)
    take(c, 8, "the attr's type and size");
  size = perfev_ld32(c->in.p + 4, c->in.swap);
  if (size == 0)
    size = 64;   /* PERF_ATTR_SIZE_VER0: writers before the size field */
  perfev_attr_push_bytes(L, take(c, size, "the attr"), size, c->in.swap);
  lua_setfield(L, -2, f->name);
  n = count_of(c, left(c) / 8, 8, "ids");
  lua_createtable(L, (int)n, 0);
  for (uint64_t i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)get64(c, "id"));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "ids");
}

/* entries, then (newer perf) machine_pid and vcpu for each */
static void u_id_index(struct ucur *c, const struct ufield *f)
{
  lua_State *L = c->L;
  uint64_t nr = count_of(c, get64(c, "nr"), 32, "entries");
  int second = left(c) >= nr * 48;
  const unsigned char *e2 = c->in.p + nr * 32;
  static const char *const k[] = { "id", "idx", "cpu", "tid" };
  lua_createtable(L, (int)nr, 0);
  for (uint64_t i = 0; i < nr; i++) {
    lua_createtable(L, 0, 6);
    for (size_t j = 0; j < 4; j++)
      perfev_set_u64(L, k[j], get64(c, k[j]));
    if (second) {
      perfev_set_u64(L, "machine_pid", perfev_ld64(e2 + 16 * i, c->in.swap));
      perfev_set_u64(L, "vcpu", perfev_ld64(e2 + 16 * i + 8, c->in.swap));
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, f->name);
}

static void u_threads(struct ucur *c, const struct ufield *f)
{
  lua_State *L = c->L;
  uint64_t nr = count_of(c, get64(c, "nr"), 24, "threads");
  lua_createtable(L, (int)nr, 0);
  for (uint64_t i = 0; i < nr; i++) {
    lua_createtable(L, 0, 2);
    perfev_set_u64(L, "pid", get64(c, "pid"));
    push_cstr(L, take(c, 16, "comm"), 16);
    lua_setfield(L, -2, "comm");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, f->name);
}

static void push_cpu(lua_State *L, lua_Integer *n, lua_Integer cpu)
{
  lua_pushinteger(L, cpu);
  lua_rawseti(L, -2, ++*n);
}

/* struct perf_record_cpu_map_data (packed): a list, a bit mask of 32- or
 * 64-bit words, or a range; pushed as the list of cpus (-1: any cpu). */
static void push_cpu_map(struct ucur *c)
{
  lua_State *L = c->L;
  uint16_t kind = get16(c, "cpu map type");
  lua_Integer n = 0;
  lua_newtable(L);
  if (kind == 0) {
    uint16_t nr = get16(c, "cpu map nr");
    count_of(c, nr, 2, "cpus");
    for (uint16_t i = 0; i < nr; i++) {
      uint16_t cpu = get16(c, "cpu");
      push_cpu(L, &n, cpu == 0xffff ? -1 : cpu);
    }
  } else if (kind == 1) {
    uint16_t nr = get16(c, "cpu mask nr");
    uint16_t word = get16(c, "cpu mask long_size");
    if (word != 4 && word != 8)
      fail(c, "a cpu mask of %u-byte words", (unsigned)word);
    if (word == 8)
      take(c, 4, NULL);
    count_of(c, nr, word, "mask words");
    for (uint16_t i = 0; i < nr; i++) {
      uint64_t m = word == 4 ? get32(c, "mask") : get64(c, "mask");
      for (int b = 0; b < word * 8; b++)
        if (m & ((uint64_t)1 << b))
          push_cpu(L, &n, (lua_Integer)i * word * 8 + b);
    }
  } else if (kind == 2) {
    const unsigned char *p = take(c, 6, "cpu range");
    uint16_t first = perfev_ld16(p + 2, c->in.swap), last = perfev_ld16(p + 4, c->in.swap);
    if (p[0])
      push_cpu(L, &n, -1);
    for (uint32_t cpu = first; cpu <= last; cpu++)
      push_cpu(L, &n, cpu);
  } else {
    fail(c, "a cpu map of unknown type %u", (unsigned)kind);
  }
}

static void u_cpus(struct ucur *c, const struct ufield *f)
{
  push_cpu_map(c);
  lua_setfield(c->L, -2, f->name);
}

static void u_stat_config(struct ucur *c, const struct ufield *f)
{
  static const char *const tags[] = { "aggr_mode", "interval", "scale" };
  lua_State *L = c->L;
  uint64_t nr = count_of(c, get64(c, "nr"), 16, "config entries");
  lua_createtable(L, 0, (int)nr);
  for (uint64_t i = 0; i < nr; i++) {
    uint64_t tag = get64(c, "tag"), val = get64(c, "val");
    if (tag < sizeof tags / sizeof tags[0])
      lua_pushstring(L, tags[tag]);
    else
      lua_pushinteger(L, (lua_Integer)tag);
    lua_pushinteger(L, (lua_Integer)val);
    lua_rawset(L, -3);
  }
  lua_setfield(L, -2, f->name);
}

static void u_event_update(struct ucur *c, const struct ufield *f)
{
  static const char *const kinds[] = { "unit", "scale", "name", "cpus" };
  lua_State *L = c->L;
  uint64_t kind = get64(c, "type");
  (void)f;
  perfev_set_u64(L, "id", get64(c, "id"));
  if (kind < sizeof kinds / sizeof kinds[0])
    lua_pushstring(L, kinds[kind]);
  else
    lua_pushinteger(L, (lua_Integer)kind);
  lua_setfield(L, -2, "update_type");
  switch (kind) {
  case 0:
  case 2:
    push_cstr(L, c->in.p, left(c));
    lua_setfield(L, -2, kinds[kind]);
    break;
  case 1: {
    uint64_t bits = get64(c, "scale");
    double d;
    memcpy(&d, &bits, 8);
    lua_pushnumber(L, d);
    lua_setfield(L, -2, "scale");
    break;
  }
  case 3:
    push_cpu_map(c);
    lua_setfield(L, -2, "cpus");
    break;
  default:
    lua_pushlstring(L, (const char *)c->in.p, left(c));
    lua_setfield(L, -2, "data");
    break;
  }
}

/* pid, a 24-byte union of the build id and (misc BUILD_ID_SIZE) its size,
 * then the file name. */
static void u_build_id(struct ucur *c, const struct ufield *f)
{
  lua_State *L = c->L;
  uint16_t misc = perfev_ld16(c->in.rec + 4, c->in.swap);
  const unsigned char *id;
  size_t n = 20;
  (void)f;
  lua_pushinteger(L, (int32_t)get32(c, "pid"));
  lua_setfield(L, -2, "pid");
  id = take(c, 24, "build_id");
  if (misc & (1u << 15))
    n = id[20] <= 20 ? id[20] : 20;
  lua_pushlstring(L, (const char *)id, n);
  lua_setfield(L, -2, "build_id");
  push_cstr(L, c->in.p, left(c));
  lua_setfield(L, -2, "filename");
}

/* fmt 0 put the message where fmt 1 put the time; fmt 2 added machine_pid
 * and vcpu after the message. */
static void u_auxtrace_error(struct ucur *c, const struct ufield *f)
{
  static const char *const k[] = { "error_type", "code", "cpu", "pid", "tid", "fmt" };
  lua_State *L = c->L;
  uint32_t fmt = 0;
  (void)f;
  for (size_t i = 0; i < 6; i++) {
    uint32_t v = get32(c, k[i]);
    perfev_set_u64(L, k[i], v);
    fmt = v;
  }
  perfev_set_u64(L, "ip", get64(c, "ip"));
  if (fmt >= 1)
    perfev_set_u64(L, "time", get64(c, "time"));
  push_cstr(L, c->in.p, left(c) < 64 ? left(c) : 64);
  lua_setfield(L, -2, "msg");
  if (fmt >= 2 && left(c) >= 72) {
    take(c, 64, "msg");
    perfev_set_u64(L, "machine_pid", get32(c, "machine_pid"));
    perfev_set_u64(L, "vcpu", get32(c, "vcpu"));
  }
}

static void u_feature(struct ucur *c, const struct ufield *f)
{
  lua_State *L = c->L;
  uint64_t id = get64(c, "feat_id");
  (void)f;
  perfev_set_u64(L, "feat_id", id);
  if (id < pd_nfeatures && pd_feature_names[id]) {
    lua_pushstring(L, pd_feature_names[id]);
    lua_setfield(L, -2, "feature");
  }
  lua_pushlstring(L, (const char *)c->in.p, left(c));
  lua_setfield(L, -2, "data");
}

void pd_user_decode(lua_State *L, const struct pd_reader *r, const unsigned char *rec, size_t len,
                    uint64_t foff)
{
  uint32_t type = perfev_ld32(rec, r->swap);
  const struct utype *t = pd_user_name(type) ? &utypes[type - PD_USER_START] : NULL;
  struct ucur c = { { rec, rec + 8, rec + len, r->swap, ucur_fail }, L, r, foff,
                    t ? t->name : "unknown" };
  int optional = 0;
  lua_createtable(L, 0, 8);
  if (t) {
    lua_pushstring(L, t->name);
  } else {
    lua_pushinteger(L, (lua_Integer)type);
  }
  lua_setfield(L, -2, "type");
  perfev_set_u64(L, "size", len);
  perfev_set_u64(L, "misc", perfev_ld16(rec + 4, r->swap));
  if (!t) {
    lua_pushlstring(L, (const char *)c.in.p, left(&c));
    lua_setfield(L, -2, "data");
    return;
  }
  for (size_t i = 0; i < t->nfields; i++) {
    const struct ufield *f = &t->fields[i];
    size_t need = f->op == U_U8 ? 1 : f->op == U_U64 ? 8 : 4;
    if (f->op == U_OPT) {
      optional = 1;
      continue;
    }
    if (optional && left(&c) < need)
      break;
    switch (f->op) {
    case U_U8: perfev_set_u64(L, f->name, *take(&c, 1, f->name)); break;
    case U_U32: perfev_set_u64(L, f->name, get32(&c, f->name)); break;
    case U_U64: perfev_set_u64(L, f->name, get64(&c, f->name)); break;
    case U_PAD32: take(&c, 4, NULL); break;
    case U_CSTR: {
      /* perf 3.x cut event_type's name to strlen rounded up to 8 (24-byte
       * records for "cycles", 32 with no NUL for the 16 characters of
       * "context-switches"); perf's reader of that era took the name the
       * record has: so does perfev, NUL or not */
      size_t n = left(&c) < f->n ? left(&c) : f->n;
      push_cstr(L, take(&c, n, f->name), n);
      lua_setfield(L, -2, f->name);
      break;
    }
    case U_BYTES:
      lua_pushlstring(L, (const char *)c.in.p, left(&c));
      lua_setfield(L, -2, f->name);
      break;
    case U_U64S: {
      size_t n = left(&c) / 8;
      lua_createtable(L, (int)n, 0);
      for (size_t j = 0; j < n; j++) {
        lua_pushinteger(L, (lua_Integer)get64(&c, f->name));
        lua_rawseti(L, -2, (lua_Integer)j + 1);
      }
      lua_setfield(L, -2, f->name);
      break;
    }
    case U_ATTR: u_attr(&c, f); break;
    case U_ID_INDEX: u_id_index(&c, f); break;
    case U_THREADS: u_threads(&c, f); break;
    case U_CPUS: u_cpus(&c, f); break;
    case U_STAT_CONFIG: u_stat_config(&c, f); break;
    case U_EVENT_UPDATE: u_event_update(&c, f); break;
    case U_BUILD_ID: u_build_id(&c, f); break;
    case U_AUXTRACE_ERROR: u_auxtrace_error(&c, f); break;
    case U_FEATURE: u_feature(&c, f); break;
    default: break;
    }
  }
}

/* { [type name] = { { kind, name, bytes }, ... } }: the rows of every type,
 * name nil for a field without one, bytes the size of a fixed string. */
static void push_layouts(lua_State *L)
{
  lua_createtable(L, 0, PD_USER_END - PD_USER_START);
  for (size_t t = 0; t < PD_USER_END - PD_USER_START; t++) {
    const struct utype *u = &utypes[t];
    lua_createtable(L, (int)u->nfields, 0);
    for (size_t i = 0; i < u->nfields; i++) {
      const struct ufield *f = &u->fields[i];
      lua_createtable(L, 3, 0);
      lua_pushstring(L, uop_names[f->op]);
      lua_rawseti(L, -2, 1);
      if (f->name) {
        lua_pushstring(L, f->name);
        lua_rawseti(L, -2, 2);
      }
      if (f->n) {
        lua_pushinteger(L, f->n);
        lua_rawseti(L, -2, 3);
      }
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, u->name);
  }
}

/* core.PERFDATA = { FEATURE = { [bit] = name }, RECORD = { name = type },
 * LAYOUT = { name = rows } } */
void pd_push_consts(lua_State *L)
{
  lua_createtable(L, 0, 2);
  lua_createtable(L, (int)pd_nfeatures, 0);
  for (size_t i = 1; i < pd_nfeatures; i++) {
    lua_pushstring(L, pd_feature_names[i]);
    lua_rawseti(L, -2, (lua_Integer)i);
  }
  lua_setfield(L, -2, "FEATURE");
  lua_createtable(L, 0, PD_USER_END - PD_USER_START);
  for (uint32_t t = PD_USER_START; t < PD_USER_END; t++) {
    perfev_set_u64(L, utypes[t - PD_USER_START].name, t);
  }
  lua_setfield(L, -2, "RECORD");
  push_layouts(L);
  lua_setfield(L, -2, "LAYOUT");
}
