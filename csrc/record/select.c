/* Field selection, the `fields` option of every record iteration
 * (perfev.decode, ring:records and ring:samples, perf.data records and
 * samples): the names compiled, and a plan per attr.
 *
 * A selection is compiled once from its names: each is a row of the
 * sample's layout (layout.c), a header key, or a key the source adds
 * (rec.event, rec.offset). Per attr (sample_type, read_format, period) it
 * becomes a plan: the byte offset of each scalar that sits before the
 * first field of variable size, and the rows to walk for the others. A
 * record whose fields all have an offset is read in place (values.c,
 * tally.c): its values are pushed straight from the bytes, with no table
 * at all. Otherwise the decoder walks the sample, running the ops of the
 * rows asked for (rows_now) and stepping over the others. */
#include <string.h>
#include "select.h"
#include "slots.h"

enum { K_ROW, K_PERIOD, K_TYPE, K_SIZE, K_MISC, K_CPUMODE, K_FLAG, K_EXTRA };
#define NO_ROW 0xff

const char *const perfev_extra_names[PERFEV_NEXTRA] = { "event", "offset" };

/* Keys an op sets besides the row's own name. */
static const struct { const char *name; uint8_t op; } derived[] = {
  { "callchain_contexts", OP_CALLCHAIN }, { "mem", OP_DATA_SRC }, { "var2_w", OP_WEIGHT },
  { "var3_w", OP_WEIGHT }, { "dyn_size", OP_STACK },
};
#define NDERIVED (sizeof derived / sizeof derived[0])

static const struct { const char *name; uint8_t kind; } header_keys[] = {
  { "type", K_TYPE }, { "size", K_SIZE }, { "misc", K_MISC }, { "cpumode", K_CPUMODE },
};
#define NHEADER (sizeof header_keys / sizeof header_keys[0])

/* ---- names ---- */

static uint32_t rows_named(const char *name, int *last)
{
  uint32_t rows = 0;
  for (size_t i = 0; i < perfev_sample_nfields; i++)
    if (perfev_sample_fields[i].name && strcmp(perfev_sample_fields[i].name, name) == 0) {
      rows |= 1u << i;
      *last = (int)i;
    }
  return rows;
}

static uint32_t rows_of_op(uint8_t op)
{
  uint32_t rows = 0;
  for (size_t i = 0; i < perfev_sample_nfields; i++)
    if (perfev_sample_fields[i].op == op)
      rows |= 1u << i;
  return rows;
}

/* What the key name is in a sample; 0 when no sample has it. */
static int lookup(const char *name, struct perfev_sel_field *f)
{
  int last = NO_ROW;
  memset(f, 0, sizeof *f);
  f->row = NO_ROW;
  for (size_t i = 0; i < NHEADER; i++)
    if (strcmp(name, header_keys[i].name) == 0) {
      f->name = header_keys[i].name;
      f->kind = header_keys[i].kind;
      return 1;
    }
  for (size_t i = 0; i < perfev_misc_nflags; i++) {
    const struct perfev_misc_flag *m = &perfev_misc_flags[i];
    if ((m->type == 0 || m->type == PERF_RECORD_SAMPLE) && strcmp(name, m->name) == 0) {
      f->name = m->name;
      f->kind = K_FLAG;
      f->row = (uint8_t)i;
      return 1;
    }
  }
  for (int k = 0; k < PERFEV_NEXTRA; k++)
    if (strcmp(name, perfev_extra_names[k]) == 0) {
      f->name = perfev_extra_names[k];
      f->kind = K_EXTRA;
      f->row = (uint8_t)k;
      return 1;
    }
  if ((f->rows = rows_named(name, &last)) != 0) {
    f->name = perfev_sample_fields[last].name;
    f->kind = strcmp(name, "period") == 0 ? K_PERIOD : K_ROW;
    f->row = (uint8_t)last;
    return 1;
  }
  for (size_t i = 0; i < NDERIVED; i++)
    if (strcmp(name, derived[i].name) == 0) {
      f->name = derived[i].name;
      f->kind = K_ROW;
      f->rows = rows_of_op(derived[i].op);
      return 1;
    }
  return 0;
}

/* Every name a selection takes, for "did you mean". */
static size_t all_names(const char **out, size_t max)
{
  size_t n = 0;
  for (size_t i = 0; i < NHEADER && n < max; i++)
    out[n++] = header_keys[i].name;
  for (size_t i = 0; i < perfev_misc_nflags && n < max; i++)
    if (perfev_misc_flags[i].type == 0 || perfev_misc_flags[i].type == PERF_RECORD_SAMPLE)
      out[n++] = perfev_misc_flags[i].name;
  for (size_t i = 0; i < PERFEV_NEXTRA && n < max; i++)
    out[n++] = perfev_extra_names[i];
  for (size_t i = 0; i < perfev_sample_nfields && n < max; i++)
    if (perfev_sample_fields[i].name)
      out[n++] = perfev_sample_fields[i].name;
  for (size_t i = 0; i < NDERIVED && n < max; i++)
    out[n++] = derived[i].name;
  return n;
}

static void unknown_field(lua_State *L, const char *who, const char *name)
{
  const char *names[80];
  size_t n = all_names(names, sizeof names / sizeof names[0]);
  const char *near = perfev_nearest(name, names, n, sizeof names[0]);
  char clip[PERFEV_CLIP];
  if (near)
    luaL_error(L, "%s: unknown field '%s' (did you mean '%s'?)", who, perfev_clip(name, clip), near);
  luaL_error(L, "%s: unknown field '%s' (a sample's fields are its record keys: ip, tid, time, "
                "callchain, ...; see doc/decoding.md)", who, perfev_clip(name, clip));
}

void perfev_select_compile(lua_State *L, int idx, int uv, struct perfev_select *sel,
                           const char *who)
{
  size_t n;
  idx = lua_absindex(L, idx);
  uv = lua_absindex(L, uv);
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: option 'fields' must be a list of field names, got %s", who,
               luaL_typename(L, idx));
  n = (size_t)lua_rawlen(L, idx);
  if (n == 0 || n > PERFEV_SELECT_MAX)
    luaL_error(L, "%s: option 'fields' must list 1 to %d field names, got %d", who,
               PERFEV_SELECT_MAX, (int)n);
  memset(sel, 0, sizeof *sel);
  if (perfev_sample_nfields > 32)   /* rows are bits of a uint32_t */
    luaL_error(L, "%s: the sample layout has more than 32 rows", who);
  for (size_t i = 0; i < n; i++) {
    struct perfev_sel_field *f = &sel->f[i];
    lua_rawgeti(L, idx, (lua_Integer)i + 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "%s: fields[%d] must be a field name, got %s", who, (int)i + 1,
                 luaL_typename(L, -1));
    if (!lookup(lua_tostring(L, -1), f))
      unknown_field(L, who, lua_tostring(L, -1));
    lua_rawseti(L, uv, PERFEV_SLOT_KEYS + (lua_Integer)i);   /* the key string, for lookups */
    sel->rows_all |= f->rows;
    sel->period |= f->kind == K_PERIOD;
    if (f->kind == K_SIZE)
      sel->hdr |= PERFEV_HDR_SIZE;
    else if (f->kind == K_MISC)
      sel->hdr |= PERFEV_HDR_MISC;
    else if (f->kind == K_CPUMODE)
      sel->hdr |= PERFEV_HDR_CPUMODE;
    else if (f->kind == K_FLAG)
      sel->hdr |= PERFEV_HDR_FLAGS;
    else if (f->kind == K_EXTRA)
      sel->extra |= 1u << f->row;
  }
  sel->n = n;
  sel->who = who;
  sel->rows_now = sel->rows_all;
}

/* ---- plans: where each field is in a sample of one attr ---- */

/* The bytes of a row of fixed size; 0: its size is in the record. */
static size_t row_size(const struct perfev_rfield *f, const struct perfev_attr_params *l)
{
  switch (f->op) {
  case OP_U64: case OP_WEIGHT: case OP_DATA_SRC:
    return 8;
  case OP_U32: case OP_S32: case OP_PAD32:
    return 4;
  case OP_READ:
    if (l->read_format & PERF_FORMAT_GROUP)
      return 0;
    return 8u * (1u + (size_t)__builtin_popcountll(l->read_format & (
                 PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING |
                 PERF_FORMAT_ID | PERF_FORMAT_LOST)));
  default:
    return 0;
  }
}

/* Where each row of a sample of attr l starts (off[i], -1: absent or
 * after a row of variable size), and where its fixed rows end. */
struct row_offsets {
  int off[32];
  uint32_t present;   /* the rows the sample has, by bit */
  size_t end;         /* the bytes of its rows of fixed size, header included */
  int fixed;          /* every row has a fixed size */
  uint16_t period_at; /* the period's offset; 0: none, or not fixed */
};

static void row_offsets(const struct perfev_attr_params *l, struct row_offsets *ro)
{
  size_t pos = sizeof(struct perf_event_header);
  memset(ro, 0, sizeof *ro);
  ro->fixed = 1;
  for (size_t i = 0; i < perfev_sample_nfields; i++) {
    const struct perfev_rfield *r = &perfev_sample_fields[i];
    size_t size;
    ro->off[i] = -1;
    if (r->mask && !(l->sample_type & r->mask))
      continue;
    ro->present |= 1u << i;
    ro->off[i] = ro->fixed ? (int)pos : -1;
    if (r->mask == PERF_SAMPLE_PERIOD && ro->fixed)
      ro->period_at = (uint16_t)pos;
    size = row_size(r, l);
    if (!size)
      ro->fixed = 0;
    pos += size;
  }
  ro->end = pos;
}

/* The record must hold size bytes from offset at. */
static void need(struct perfev_sel_plan *p, int at, int size)
{
  if (at + size > p->min_size)
    p->min_size = (uint16_t)(at + size);
}

/* How the plan gets a field set by a row of the sample (kind K_ROW or
 * K_PERIOD), with its offset in p->f[j].off when read in place. */
static uint8_t row_how(const struct perfev_select *sel, size_t j, struct perfev_sel_plan *p,
                       const struct row_offsets *ro, const struct perfev_attr_params *l)
{
  const struct perfev_sel_field *f = &sel->f[j];
  uint32_t here = f->rows & ro->present;
  int row, at;
  uint8_t op;
  if (!here)
    return f->kind == K_PERIOD && l->period ? PERFEV_H_PERIOD : PERFEV_H_ABSENT;
  row = 31 - __builtin_clz(here);   /* the last row sets the key (id) */
  op = perfev_sample_fields[row].op;
  at = ro->off[row];
  if (op == OP_CALLCHAIN && at >= 0 && (f->row != NO_ROW || sel->tally)) {
    p->chain = (uint16_t)at;
    need(p, at, 8);
    /* the chain read in place into a reused table; its contexts, a
     * tally's, pushed from the chain it keeps */
    return f->row != NO_ROW ? PERFEV_H_CHAIN : PERFEV_H_CHAIN_CTX;
  }
  if (f->row != NO_ROW && at >= 0 && (op == OP_U64 || op == OP_S32 || op == OP_U32)) {
    p->f[j].off = (uint16_t)at;
    need(p, at, op == OP_U64 ? 8 : 4);
    return op == OP_U64 ? PERFEV_H_U64 : op == OP_S32 ? PERFEV_H_S32 : PERFEV_H_U32;
  }
  p->rows |= f->rows;
  p->fast = 0;
  return PERFEV_H_TABLE;
}

/* Whether every field can be a tally's key: values at a fixed place, the
 * callchain, and its contexts beside it (alone, they would be keyed by
 * the whole chain); when not, the first that cannot. */
static void plan_tally(const struct perfev_select *sel, struct perfev_sel_plan *p)
{
  int has_chain = 0;
  p->tally = 1;
  for (size_t j = 0; j < sel->n; j++)
    has_chain |= p->f[j].how == PERFEV_H_CHAIN;
  for (size_t j = 0; j < sel->n && p->tally; j++) {
    uint8_t how = p->f[j].how;
    if (how == PERFEV_H_TABLE || (how == PERFEV_H_EXTRA && p->f[j].off != PERFEV_EXTRA_EVENT) ||
        (how == PERFEV_H_CHAIN_CTX && !has_chain)) {
      p->tally = 0;
      p->untallied = (uint8_t)j;
    }
  }
}

/* Whether every field is an integer read in place (the values pushed by
 * one loop), each one's kind; whether the first always has a value. */
static void plan_scalars(const struct perfev_select *sel, struct perfev_sel_plan *p)
{
  p->scalars = p->fast && !p->chain;
  for (size_t j = 0; j < sel->n; j++) {
    switch (p->f[j].how) {
    case PERFEV_H_U64: p->f[j].scalar = PERFEV_SCALAR_U64; break;
    case PERFEV_H_U32: p->f[j].scalar = PERFEV_SCALAR_U32; break;
    case PERFEV_H_S32: p->f[j].scalar = PERFEV_SCALAR_S32; break;
    case PERFEV_H_PERIOD: p->f[j].scalar = PERFEV_SCALAR_PERIOD; break;
    default: p->scalars = 0;
    }
  }
  switch (sel->n ? p->f[0].how : PERFEV_H_ABSENT) {
  case PERFEV_H_U64: case PERFEV_H_S32: case PERFEV_H_U32: case PERFEV_H_PERIOD:
  case PERFEV_H_TYPE: case PERFEV_H_SIZE: case PERFEV_H_MISC: case PERFEV_H_CPUMODE:
    p->first_set = 1;
    break;
  default:
    p->first_set = 0;
  }
}

static void plan_make(const struct perfev_select *sel, struct perfev_sel_plan *p,
                      const struct perfev_attr_params *l)
{
  struct row_offsets ro;
  row_offsets(l, &ro);
  memset(p, 0, sizeof *p);
  p->period_at = ro.period_at;
  p->fast = 1;
  for (size_t j = 0; j < sel->n; j++) {
    const struct perfev_sel_field *f = &sel->f[j];
    uint8_t how;
    switch (f->kind) {
    case K_ROW: case K_PERIOD: how = row_how(sel, j, p, &ro, l); break;
    case K_TYPE: how = PERFEV_H_TYPE; break;
    case K_SIZE: how = PERFEV_H_SIZE; break;
    case K_MISC: how = PERFEV_H_MISC; break;
    case K_CPUMODE: how = PERFEV_H_CPUMODE; break;
    case K_FLAG: how = PERFEV_H_FLAG; p->f[j].off = f->row; break;
    default: how = PERFEV_H_EXTRA; p->f[j].off = f->row; break;
    }
    p->f[j].how = how;
  }
  plan_tally(sel, p);
  if (p->period_at)
    need(p, p->period_at, 8);
  if (p->min_size < sizeof(struct perf_event_header))   /* a sample has its header at least */
    p->min_size = sizeof(struct perf_event_header);
  p->variable = !ro.fixed;
  if (ro.fixed && ro.end > p->min_size)   /* every row fixed: the record holds them all */
    p->min_size = (uint16_t)ro.end;
  plan_scalars(sel, p);
  p->sample_type = l->sample_type;
  p->read_format = l->read_format;
  p->period = l->period;
  p->valid = 1;
}

/* The plan for attr li: cached by its index, remade when the attr differs. */
const struct perfev_sel_plan *perfev_select_plan(struct perfev_select *sel,
                                                 const struct perfev_attr_params *l, size_t li)
{
  struct perfev_sel_plan *p = &sel->plans[li % PERFEV_SELECT_PLANS];
  if (!p->valid || p->sample_type != l->sample_type || p->read_format != l->read_format ||
      p->period != l->period)
    plan_make(sel, p, l);
  return p;
}

/* ---- a field of a sample ---- */

/* The value of field j of the sample at rec, read in place, as a u64 (a
 * header key's bits, a flag as 0 or 1); perfev_select_push_key pushes it. */
uint64_t perfev_select_key(const struct perfev_sel_plan *p, size_t j, const struct perfev_attr_params *l,
                           const unsigned char *rec, int swap)
{
  uint16_t at = p->f[j].off;
  switch (p->f[j].how) {
  case PERFEV_H_U64: return perfev_ld64(rec + at, swap);
  case PERFEV_H_S32: case PERFEV_H_U32: return perfev_ld32(rec + at, swap);
  case PERFEV_H_PERIOD: return l->period;
  case PERFEV_H_SIZE: return perfev_ld16(rec + 6, swap);
  case PERFEV_H_MISC: return perfev_ld16(rec + 4, swap);
  case PERFEV_H_CPUMODE: return perfev_ld16(rec + 4, swap) & PERF_RECORD_MISC_CPUMODE_MASK;
  case PERFEV_H_FLAG: return (perfev_ld16(rec + 4, swap) & perfev_misc_flags[at].bit) != 0;
  default: return 0;   /* PERFEV_H_TYPE, PERFEV_H_ABSENT; PERFEV_H_EXTRA: the source's, by layout */
  }
}

void perfev_select_push_key(lua_State *L, const struct perfev_sel_plan *p, size_t j, uint64_t v,
                            const struct perfev_extra *x, size_t li, size_t off)
{
  switch (p->f[j].how) {
  case PERFEV_H_U64: case PERFEV_H_U32: case PERFEV_H_PERIOD: case PERFEV_H_SIZE: case PERFEV_H_MISC:
    lua_pushinteger(L, (lua_Integer)v);
    break;
  case PERFEV_H_S32:
    lua_pushinteger(L, (lua_Integer)(int32_t)(uint32_t)v);
    break;
  case PERFEV_H_TYPE:
    lua_pushliteral(L, "sample");
    break;
  case PERFEV_H_CPUMODE: {
    const char *mode = perfev_cpumode_names[v & PERF_RECORD_MISC_CPUMODE_MASK];
    lua_pushstring(L, mode ? mode : "unknown");
    break;
  }
  case PERFEV_H_FLAG:
    if (v)
      lua_pushboolean(L, 1);
    else
      lua_pushnil(L);
    break;
  case PERFEV_H_EXTRA:
    if (!x || !x->push(L, x->ud, p->f[j].off, 1, PERF_RECORD_SAMPLE, li, off))
      lua_pushnil(L);
    break;
  default:   /* PERFEV_H_ABSENT */
    lua_pushnil(L);
    break;
  }
}

