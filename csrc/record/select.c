/* Field selection, the `fields` option of every record iteration
 * (perfev.decode, ring:records and ring:samples, perf.data records and
 * samples), and the one function that hands an iteration its next record
 * (perfev_iter_record).
 *
 * A selection is compiled once from its names: each is a row of the
 * sample's layout (layout.c), a header key, or a key the source adds
 * (rec.event, rec.offset). Per attr (sample_type, read_format, period) it
 * becomes a plan: the byte offset of each scalar that sits before the
 * first field of variable size, and the rows to walk for the others. A
 * record whose fields all have an offset is read in place: its values are
 * pushed straight from the bytes, with no table at all. Otherwise the
 * decoder walks the sample, running the ops of the rows asked for and
 * stepping over the others, into one table reused for every record, and
 * the values are taken from it. With an `into` table the same walk fills
 * the caller's table with the fields asked for (and rec.type). */
#include <string.h>
#include "decode.h"

enum { K_ROW, K_PERIOD, K_TYPE, K_SIZE, K_MISC, K_CPUMODE, K_FLAG, K_EXTRA };
enum { H_ABSENT, H_U64, H_S32, H_U32, H_PERIOD, H_TABLE, H_TYPE, H_SIZE, H_MISC, H_CPUMODE,
       H_FLAG, H_EXTRA, H_CHAIN, H_CHAIN_CTX };
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

/* Compiles the field names of the list at idx into sel (raises at the
 * caller naming an unknown field, with "did you mean"); the state's user
 * value at uv gets their key strings. */
static void select_compile(lua_State *L, int idx, int uv, struct perfev_select *sel,
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
    lua_rawseti(L, uv, PERFEV_SEL_KEYS + (lua_Integer)i);   /* the key string, for lookups */
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

static void plan_make(const struct perfev_select *sel, struct perfev_sel_plan *p,
                      const struct perfev_attr_params *l)
{
  int off[32];
  uint32_t present = 0;
  size_t pos = sizeof(struct perf_event_header);
  int fixed = 1;
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < perfev_sample_nfields; i++) {
    const struct perfev_rfield *r = &perfev_sample_fields[i];
    size_t size;
    off[i] = -1;
    if (r->mask && !(l->sample_type & r->mask))
      continue;
    present |= 1u << i;
    off[i] = fixed ? (int)pos : -1;
    if (r->mask == PERF_SAMPLE_PERIOD && fixed)
      p->period_at = (uint16_t)pos;
    size = row_size(r, l);
    if (!size)
      fixed = 0;
    pos += size;
  }
  p->fast = 1;
  for (size_t j = 0; j < sel->n; j++) {
    const struct perfev_sel_field *f = &sel->f[j];
    uint32_t here = f->rows & present;
    uint8_t how = H_ABSENT;
    switch (f->kind) {
    case K_ROW: case K_PERIOD:
      if (here) {
        int row = 31 - __builtin_clz(here);   /* the last row sets the key (id) */
        uint8_t op = perfev_sample_fields[row].op;
        if (op == OP_CALLCHAIN && f->row != NO_ROW && off[row] >= 0) {
          how = H_CHAIN;   /* read in place into a reused table */
          p->chain = (uint16_t)off[row];
          if (off[row] + 8 > p->min_size)
            p->min_size = (uint16_t)(off[row] + 8);
        } else if (op == OP_CALLCHAIN && f->row == NO_ROW && off[row] >= 0 && sel->tally) {
          how = H_CHAIN_CTX;   /* a tally's: its contexts pushed from the chain it keeps */
          p->chain = (uint16_t)off[row];
          if (off[row] + 8 > p->min_size)
            p->min_size = (uint16_t)(off[row] + 8);
        } else if (f->row != NO_ROW && off[row] >= 0 && (op == OP_U64 || op == OP_S32 || op == OP_U32)) {
          how = op == OP_U64 ? H_U64 : op == OP_S32 ? H_S32 : H_U32;
          p->f[j].off = (uint16_t)off[row];
          if (off[row] + (op == OP_U64 ? 8 : 4) > p->min_size)
            p->min_size = (uint16_t)(off[row] + (op == OP_U64 ? 8 : 4));
        } else {
          how = H_TABLE;
          p->rows |= f->rows;
          p->fast = 0;
        }
      } else if (f->kind == K_PERIOD && l->period) {
        how = H_PERIOD;
      }
      break;
    case K_TYPE: how = H_TYPE; break;
    case K_SIZE: how = H_SIZE; break;
    case K_MISC: how = H_MISC; break;
    case K_CPUMODE: how = H_CPUMODE; break;
    case K_FLAG: how = H_FLAG; p->f[j].off = f->row; break;
    default: how = H_EXTRA; p->f[j].off = f->row; break;
    }
    p->f[j].how = how;
  }
  /* a tally's keys: values at a fixed place, the callchain, and its
   * contexts beside it (alone, they would be keyed by the whole chain) */
  p->tally = 1;
  int has_chain = 0;
  for (size_t j = 0; j < sel->n; j++)
    has_chain |= p->f[j].how == H_CHAIN;
  for (size_t j = 0; j < sel->n && p->tally; j++) {
    uint8_t how = p->f[j].how;
    if (how == H_TABLE || (how == H_EXTRA && p->f[j].off != PERFEV_EXTRA_EVENT) ||
        (how == H_CHAIN_CTX && !has_chain)) {
      p->tally = 0;
      p->untallied = (uint8_t)j;
    }
  }
  if (p->period_at + 8 > p->min_size && p->period_at)
    p->min_size = (uint16_t)(p->period_at + 8);
  if (p->min_size < sizeof(struct perf_event_header))   /* a sample has its header at least */
    p->min_size = sizeof(struct perf_event_header);
  p->variable = !fixed;
  if (fixed && pos > p->min_size)   /* every row fixed: the record holds them all */
    p->min_size = (uint16_t)pos;
  p->scalars = p->fast && !p->chain;
  for (size_t j = 0; j < sel->n; j++) {
    switch (p->f[j].how) {
    case H_U64: p->f[j].scalar = PERFEV_SCALAR_U64; break;
    case H_U32: p->f[j].scalar = PERFEV_SCALAR_U32; break;
    case H_S32: p->f[j].scalar = PERFEV_SCALAR_S32; break;
    case H_PERIOD: p->f[j].scalar = PERFEV_SCALAR_PERIOD; break;
    default: p->scalars = 0;
    }
  }
  switch (sel->n ? p->f[0].how : H_ABSENT) {
  case H_U64: case H_S32: case H_U32: case H_PERIOD: case H_TYPE: case H_SIZE: case H_MISC:
  case H_CPUMODE:
    p->first_set = 1;
    break;
  default:
    p->first_set = 0;
  }
  p->sample_type = l->sample_type;
  p->read_format = l->read_format;
  p->period = l->period;
  p->valid = 1;
}

/* The plan for layout li: cached by its index, remade when the attr differs. */
const struct perfev_sel_plan *perfev_select_plan(struct perfev_select *sel,
                                                 const struct perfev_attr_params *l, size_t li)
{
  struct perfev_sel_plan *p = &sel->plans[li % PERFEV_SELECT_PLANS];
  if (!p->valid || p->sample_type != l->sample_type || p->read_format != l->read_format ||
      p->period != l->period)
    plan_make(sel, p, l);
  return p;
}

/* ---- one record ---- */

/* The value of field j of the sample at rec, read in place, as a u64 (a
 * header key's bits, a flag as 0 or 1); perfev_select_push_key pushes it. */
uint64_t perfev_select_key(const struct perfev_sel_plan *p, size_t j, const struct perfev_attr_params *l,
                           const unsigned char *rec, int swap)
{
  uint16_t at = p->f[j].off;
  switch (p->f[j].how) {
  case H_U64: return perfev_ld64(rec + at, swap);
  case H_S32: case H_U32: return perfev_ld32(rec + at, swap);
  case H_PERIOD: return l->period;
  case H_SIZE: return perfev_ld16(rec + 6, swap);
  case H_MISC: return perfev_ld16(rec + 4, swap);
  case H_CPUMODE: return perfev_ld16(rec + 4, swap) & PERF_RECORD_MISC_CPUMODE_MASK;
  case H_FLAG: return (perfev_ld16(rec + 4, swap) & perfev_misc_flags[at].bit) != 0;
  default: return 0;   /* H_TYPE, H_ABSENT; H_EXTRA: the source's, by layout */
  }
}

void perfev_select_push_key(lua_State *L, const struct perfev_sel_plan *p, size_t j, uint64_t v,
                            const struct perfev_extra *x, size_t li, size_t off)
{
  switch (p->f[j].how) {
  case H_U64: case H_U32: case H_PERIOD: case H_SIZE: case H_MISC:
    lua_pushinteger(L, (lua_Integer)v);
    break;
  case H_S32:
    lua_pushinteger(L, (lua_Integer)(int32_t)(uint32_t)v);
    break;
  case H_TYPE:
    lua_pushliteral(L, "sample");
    break;
  case H_CPUMODE: {
    const char *mode = perfev_cpumode_names[v & PERF_RECORD_MISC_CPUMODE_MASK];
    lua_pushstring(L, mode ? mode : "unknown");
    break;
  }
  case H_FLAG:
    if (v)
      lua_pushboolean(L, 1);
    else
      lua_pushnil(L);
    break;
  case H_EXTRA:
    if (!x || !x->push(L, x->ud, p->f[j].off, 1, PERF_RECORD_SAMPLE, li, off))
      lua_pushnil(L);
    break;
  default:   /* H_ABSENT */
    lua_pushnil(L);
    break;
  }
}

int perfev_select_chain_field(const struct perfev_sel_plan *p, size_t j)
{
  return p->f[j].how == H_CHAIN ? 1 : p->f[j].how == H_CHAIN_CTX ? 2 : 0;
}

/* Pushes the value of field j of the sample at rec, read in place. */
static void push_value(lua_State *L, const struct perfev_sel_plan *p, size_t j,
                       const struct perfev_attr_params *l, const unsigned char *rec, int swap,
                       const struct perfev_extra *x, size_t li, size_t off)
{
  perfev_select_push_key(L, p, j, perfev_select_key(p, j, l, rec, swap), x, li, off);
}

/* Whether the callchain at p->chain fits the record of size bytes. */
static int chain_fits(const struct perfev_sel_plan *p, const unsigned char *rec, size_t size, int swap)
{
  uint64_t nr;
  if (!p->chain)
    return 1;
  nr = perfev_ld64(rec + p->chain, swap);
  return nr <= (size - p->chain - 8) / 8;
}

/* Pushes the callchain at p->chain as the state's one callchain table:
 * the addresses without the PERF_CONTEXT_* markers, as a full decode's
 * rec.callchain, the entries after them of the last sample removed. */
static void push_chain(lua_State *L, struct perfev_select *sel, int state,
                       const struct perfev_sel_plan *p, const unsigned char *rec, int swap)
{
  const unsigned char *w = rec + p->chain;
  uint64_t nr = perfev_ld64(w, swap);
  lua_Integer n = 0;
  int t;
  perfev_getiuservalue(L, state);
  if (lua_rawgeti(L, -1, PERFEV_SEL_CHAIN) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 64, 0);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, PERFEV_SEL_CHAIN);
    sel->chain_len = 0;
  }
  lua_remove(L, -2);
  t = lua_gettop(L);
  for (uint64_t i = 0; i < nr; i++) {
    uint64_t ip = perfev_ld64(w + 8 + 8 * i, swap);
    if (ip >= (uint64_t)PERF_CONTEXT_MAX)
      continue;
    lua_pushinteger(L, (lua_Integer)ip);
    lua_rawseti(L, t, ++n);
  }
  for (lua_Integer k = n + 1; k <= sel->chain_len; k++) {
    lua_pushnil(L);
    lua_rawseti(L, t, k);
  }
  sel->chain_len = n;
}

/* Values mode: pushes the selected fields of a sample, or skips a record
 * of another type (returns 0). */
static int iter_values(lua_State *L, struct perfev_decoder *d, int state, int into,
                       struct perfev_reuse *st, const unsigned char *rec, size_t len, size_t off,
                       const struct perfev_extra *x)
{
  struct perfev_select *sel = &st->sel;
  const struct perfev_sel_plan *p;
  const struct perfev_attr_params *l;
  struct perf_event_header h;
  size_t li;
  uint64_t id;
  int t = 0, uv = 0;
  if (!d || len < sizeof h)
    return (int)perfev_decode_into(L, d, state, into, rec, len, off, NULL);   /* raises */
  perfev_record_header(rec, d->swap, &h);
  if (h.size < sizeof h || h.size > len ||
      perfev_decoder_pick(d, rec, h.size, h.type, &li, &id) != PERFEV_PICK_OK)
    return (int)perfev_decode_into(L, d, state, into, rec, len, off, NULL);   /* raises */
  if (h.type != PERF_RECORD_SAMPLE) {
    perfev_decode_count_lost(d, h.type, rec, h.size);
    return 0;
  }
  l = &d->attrs[li];
  p = perfev_select_plan(sel, l, li);
  if (p->scalars && d->n == 1) {   /* the next samples take the shortcut */
    sel->scalars = p;
    sel->scalars_of = d;
    if (h.size >= p->min_size)
      return perfev_select_push_scalars(L, st, d, rec, off);
  }
  if (sel->n + 6 > LUA_MINSTACK)   /* a C function has LUA_MINSTACK slots */
    luaL_checkstack(L, (int)sel->n + 6, "perfev.decode: too many fields");
  if (p->fast && p->variable && h.size >= p->min_size && chain_fits(p, rec, h.size, d->swap))
    perfev_decode_check_sample(L, l, rec, h.size, off, d->swap);   /* read in place: checked whole */
  if (!p->fast || h.size < p->min_size || !chain_fits(p, rec, h.size, d->swap)) {
    /* a walk of the rows asked for; a record too short for its fixed
     * fields is walked whole, so that the decoder says what is wrong */
    int bad = h.size < p->min_size || !chain_fits(p, rec, h.size, d->swap);
    sel->rows_now = bad ? sel->rows_all : p->rows;
    perfev_decode_into(L, d, state, into, rec, h.size, off, NULL);
    t = lua_gettop(L);
    perfev_getiuservalue(L, state);
    uv = lua_gettop(L);
  }
  for (size_t j = 0; j < sel->n; j++) {
    if (p->f[j].how == H_TABLE) {
      lua_rawgeti(L, uv, PERFEV_SEL_KEYS + (lua_Integer)j);
      lua_rawget(L, t);
    } else if (p->f[j].how == H_CHAIN) {
      push_chain(L, sel, state, p, rec, d->swap);
    } else {
      push_value(L, p, j, l, rec, d->swap, x, li, off);
    }
  }
  if (!p->first_set && lua_isnil(L, -(int)sel->n))
    luaL_error(L, "%s: the sample at offset %d has no '%s', the first of the fields: "
                  "a loop ends at a nil first value, so put first a field every sample has "
                  "(ip, tid, time, ...)", sel->who, (int)off, sel->f[0].name);
  if (t) {
    lua_remove(L, uv);
    lua_remove(L, t);
  }
  return (int)sel->n;
}

/* Tally mode: counts a sample (returns 0), or gives another record as a
 * table, after the tallies of the samples before it. */
static int iter_tally(lua_State *L, struct perfev_decoder *d, int state, int into,
                      struct perfev_reuse *st, const unsigned char *rec, size_t len, size_t off,
                      const struct perfev_extra *x)
{
  struct perf_event_header h;
  size_t li;
  uint64_t id;
  if (d && len >= sizeof h) {
    perfev_record_header(rec, d->swap, &h);
    if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof h && h.size <= len &&
        perfev_decoder_pick(d, rec, h.size, h.type, &li, &id) == PERFEV_PICK_OK) {
      const struct perfev_attr_params *l = &d->attrs[li];
      const struct perfev_sel_plan *p = perfev_select_plan(&st->sel, l, li);
      if (!p->tally)
        luaL_error(L, "%s: option 'tally': field '%s' cannot be a tally's key (keys are values at "
                      "a fixed place of this event's samples, the callchain, and callchain_contexts "
                      "beside callchain)", st->sel.who, st->sel.f[p->untallied].name);
      if (h.size >= p->min_size && chain_fits(p, rec, h.size, d->swap)) {
        if (p->variable)   /* counted in place: checked whole, as a full decode reads it */
          perfev_decode_check_sample(L, l, rec, h.size, off, d->swap);
        perfev_tally_add(L, st, state, p, l, rec, d->swap, li);
        return 0;
      }
    }
  }
  perfev_decode_into(L, d, state, into, rec, len, off, x);   /* (a sample too short raises) */
  return perfev_tally_hold(L, st, state, d, x);
}

int perfev_iter_record(lua_State *L, struct perfev_reuse *st, struct perfev_decoder *d,
                       int state, int into, const unsigned char *rec, size_t len, size_t off,
                       const struct perfev_extra *x)
{
  if (perfev_select_scalar_size(st, d, rec, len, 1))
    return perfev_select_push_scalars(L, st, d, rec, off);
  if (st->sel.tally)
    return iter_tally(L, d, state, into, st, rec, len, off, x);
  if (st->sel.values)
    return iter_values(L, d, state, into, st, rec, len, off, x);
  perfev_decode_into(L, d, state, into, rec, len, off, x);
  return 1;
}

int perfev_iter_values(lua_State *L, int state)
{
  return ((struct perfev_reuse *)lua_touserdata(L, state))->sel.values;
}

/* ---- the iteration's options: { into = t, swap = b, fields = { ... } } ---- */

struct perfev_reuse *perfev_decode_state(lua_State *L, int idx, const char *who)
{
  struct perfev_reuse *st;
  int opts, into, uv;
  if (idx)
    idx = lua_absindex(L, idx);
  opts = idx && lua_istable(L, idx);
  if (!opts || lua_getfield(L, idx, "into") != LUA_TTABLE) {
    if (opts)
      lua_pop(L, 1);
    lua_pushnil(L);
  }
  into = lua_gettop(L);
  st = (struct perfev_reuse *)perfev_newuserdata(L, sizeof *st);
  memset(st, 0, sizeof *st);
  st->dirty = 1;
  lua_createtable(L, PERFEV_NAME_SLOTS, 2);   /* the key strings, .aside, .spares */
  uv = lua_gettop(L);
  if (opts) {
    if (lua_getfield(L, idx, "fields") != LUA_TNIL)
      select_compile(L, -1, uv, &st->sel, who);
    lua_pop(L, 1);
    st->sel.tally = perfev_opt_bool(L, idx, "tally", 0);
    if (st->sel.tally && !st->sel.n)
      luaL_error(L, "%s: option 'tally' needs option 'fields' (the values samples are counted by)",
                 who);
  }
  perfev_setiuservalue(L, -2);
  st->into = !lua_isnil(L, into);
  if (st->sel.n && !st->into && !st->sel.tally) {   /* values: the walks go into a table of the state's */
    st->sel.values = 1;
    st->into = 1;
    lua_newtable(L);
    lua_replace(L, into);
  }
  return st;
}

struct perfev_reuse *perfev_decode_options(lua_State *L, int idx, const char *who, int *swap)
{
  static const struct perfev_opt with_swap[] = {
    { "into", LUA_TTABLE }, { "swap", LUA_TBOOLEAN }, { "fields", LUA_TTABLE },
    { "tally", LUA_TBOOLEAN }, { NULL, 0 }
  };
  static const struct perfev_opt without[] = {
    { "into", LUA_TTABLE }, { "fields", LUA_TTABLE }, { "tally", LUA_TBOOLEAN }, { NULL, 0 }
  };
  int given;
  idx = lua_absindex(L, idx);
  given = perfev_check_options(L, idx, who, swap ? with_swap : without);
  if (swap)
    *swap = given ? perfev_opt_bool(L, idx, "swap", 0) : 0;
  return perfev_decode_state(L, given ? idx : 0, who);
}
