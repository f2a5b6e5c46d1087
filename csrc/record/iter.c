/* Record iteration: the one step every record of every source takes
 * (iter_record: its table, its selected values, or a tally's
 * count), and the one loop of an iterator call over a source
 * (perfev_iter_next), which holds the tally protocol: the tallies counted
 * so far are handed out before the next record that is not counted, and
 * at the end. The sources: a ring (ring/ring.c), a perf.data file
 * (perfdata/reader.c), and here core.decode's byte string. */
#include <string.h>
#include "iter.h"
#include "values.h"
#include "slots.h"

/* ---- one record, one iterator call ---- */

/* The step of one record (len bytes at rec, off its offset in the
 * stream), the same for every source: pushes its table (returns 1), or
 * its selected values (returns how many), or counts it in a tally or
 * skips it (returns 0). */
static int iter_record(lua_State *L, struct perfev_iter *st, struct perfev_decoder *d, int state,
                       int into, const unsigned char *rec, size_t len, size_t off,
                       const struct perfev_extra *x)
{
  struct perfev_sink to;
  if (perfev_values_scalar_size(&st->sel, d, rec, len, 1))
    return perfev_values_push_scalars(L, &st->sel, d, rec, off);
  to.fill = &st->fill;
  to.sel = &st->sel;
  to.state = state;
  to.into = into;
  if (st->sel.tally) {   /* a sample counted, or the record after the tallies */
    if (perfev_tally_count(L, &st->tally, &st->sel, state, d, rec, len, off))
      return 0;
    perfev_decode_into(L, d, &to, rec, len, off, x);   /* (a sample too short raises) */
    return perfev_tally_hold(L, st->tally, &st->sel, state, d, x);
  }
  if (st->sel.values)
    return perfev_values_push(L, d, &to, rec, len, off, x);
  perfev_decode_into(L, d, &to, rec, len, off, x);
  return 1;
}

int perfev_iter_next(lua_State *L, struct perfev_iter *st, int state, int into,
                     struct perfev_source *src)
{
  int n = 0;
  if (st->sel.tally && (n = perfev_tally_next(L, st->tally, &st->sel, state, src->dec, src->x, 0)) > 0)
    return n;   /* the tallies before a record, then the record */
  while (n == 0) {   /* 0: a record counted or skipped (values of samples only) */
    switch (src->next(L, src)) {
    case PERFEV_SOURCE_END:   /* the tallies of the last samples, if any */
      return st->sel.tally ? perfev_tally_next(L, st->tally, &st->sel, state, src->dec, src->x, 1) : 0;
    case PERFEV_SOURCE_PUSHED:
      return st->sel.tally ? perfev_tally_hold(L, st->tally, &st->sel, state, src->dec, src->x) : 1;
    default:
      n = iter_record(L, st, src->dec, state, into, src->rec, src->len, src->off, src->x);
    }
  }
  return n;
}

/* ---- the iteration's options: { into = t, swap = b, fields = { ... }, tally = b } ---- */

struct perfev_iter *perfev_iter_state(lua_State *L, int idx, const char *who)
{
  struct perfev_iter *st;
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
  st = (struct perfev_iter *)perfev_newuserdata(L, sizeof *st);
  memset(st, 0, sizeof *st);
  st->fill.dirty = 1;
  lua_createtable(L, PERFEV_NAME_SLOTS, 2);   /* the key strings, .aside, .spares */
  uv = lua_gettop(L);
  if (opts) {
    if (lua_getfield(L, idx, "fields") != LUA_TNIL)
      perfev_select_compile(L, -1, uv, &st->sel, who);
    lua_pop(L, 1);
    st->sel.tally = perfev_opt_bool(L, idx, "tally", 0);
    if (st->sel.tally && !st->sel.n)
      luaL_error(L, "%s: option 'tally' needs option 'fields' (the values samples are counted by)",
                 who);
  }
  perfev_setiuservalue(L, -2);
  st->fill.into = !lua_isnil(L, into);
  if (st->sel.n && !st->fill.into && !st->sel.tally) {   /* values: the walks go into a table of the state's */
    st->sel.values = 1;
    st->fill.into = 1;
    lua_newtable(L);
    lua_replace(L, into);
  }
  return st;
}

struct perfev_iter *perfev_iter_options(lua_State *L, int idx, const char *who, int *swap)
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
  return perfev_iter_state(L, given ? idx : 0, who);
}

/* ---- core.decode(bytes, attr | event | { [id] = attr or event, ... }, [options]) ---- */

/* Upvalues 1 and 2, the byte string and the decoder, only keep them alive:
 * the state points at both. */
#define DECODE_UPV_INTO lua_upvalueindex(3)
#define DECODE_UPV_STATE lua_upvalueindex(4)

/* The iterator: the string, where it is and the decoder are in the state,
 * so that a step reads no upvalue but the state. */
static int decode_step(lua_State *L, struct perfev_iter *st);

static int decode_next(lua_State *L)
{
  struct perfev_iter *st = (struct perfev_iter *)lua_touserdata(L, DECODE_UPV_STATE);
  const unsigned char *rec = st->bytes + st->off;
  /* values mode's shortcut (this decoder is the closure's: never replaced,
   * so the plan made for it needs no check of the layout); kept apart from
   * the general step so that a plain sample pays for nothing else */
  size_t size = perfev_values_scalar_size(&st->sel, st->dec, rec, st->len - st->off, 0);
  if (size) {
    size_t off = st->off;
    st->off += size;
    return perfev_values_push_scalars(L, &st->sel, st->dec, rec, off);
  }
  return decode_step(L, st);
}

/* The byte string as a source: its next record, its header checked. */
static int string_next(lua_State *L, struct perfev_source *src)
{
  struct perfev_iter *st = (struct perfev_iter *)src->ud;
  size_t len = st->len, off = st->off;
  struct perf_event_header h;
  if (off >= len)
    return PERFEV_SOURCE_END;
  if (len - off < sizeof h)
    perfev_decode_error(L, off, 0, len - off, "the buffer ends inside a record header");
  perfev_record_header(st->bytes + off, st->dec->swap, &h);
  if (h.size < sizeof h)
    perfev_decode_error(L, off, h.type, h.size, "size is smaller than the 8-byte header");
  if (h.size > len - off)
    perfev_decode_error(L, off, h.type, h.size, "size runs past the end of the buffer");
  st->off = off + h.size;
  src->rec = st->bytes + off;
  src->len = h.size;
  src->off = off;
  return PERFEV_SOURCE_RECORD;
}

/* The general step: the next record, its table or its values. */
static __attribute__((noinline)) int decode_step(lua_State *L, struct perfev_iter *st)
{
  struct perfev_source src = { string_next, st, st->dec, NULL, NULL, 0, 0 };
  return perfev_iter_next(L, st, DECODE_UPV_STATE, DECODE_UPV_INTO, &src);
}

#if PERFEV_LUAJIT
/* Where the Lua layer puts the function that gives LuaJIT a compiled
 * iterator for a plan of scalars (lua/perfev/decode_jit.lua). */
#define ACCELERATOR "perfev.decode.scalars"

/* With the C iterator on top: when the fields are a plan of scalars of
 * one attr in this byte order and the accelerator is set, replaces it with
 * accelerator(bytes, iterator, min_size, period, n, off1, kind1, ...),
 * which reads the same offsets through the FFI in a loop LuaJIT compiles
 * (and falls back on the C iterator for anything else). */
static void accelerate(lua_State *L, struct perfev_iter *st, struct perfev_decoder *d)
{
  const struct perfev_sel_plan *p;
  if (!st->sel.values || st->sel.tally || d->n != 1 || d->swap)
    return;
  p = perfev_select_plan(&st->sel, &d->attrs[0], 0);
  if (!p->scalars)
    return;
  if (lua_getfield(L, LUA_REGISTRYINDEX, ACCELERATOR) != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return;
  }
  luaL_checkstack(L, 6 + 2 * (int)st->sel.n, "perfev.decode: too many fields");
  lua_pushvalue(L, 1);
  lua_pushvalue(L, -3);
  lua_pushinteger(L, (lua_Integer)p->min_size);
  lua_pushinteger(L, (lua_Integer)p->period);
  lua_pushinteger(L, (lua_Integer)st->sel.n);
  for (size_t j = 0; j < st->sel.n; j++) {
    lua_pushinteger(L, (lua_Integer)p->f[j].off);
    lua_pushinteger(L, (lua_Integer)p->f[j].scalar);
  }
  lua_call(L, 5 + 2 * (int)st->sel.n, 1);
  lua_remove(L, -2);
}

/* core.decode_accelerator(fn | nil): sets it (LuaJIT's Lua layer). */
static int l_accelerator(lua_State *L)
{
  if (!lua_isnil(L, 1))
    luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, ACCELERATOR);
  return 0;
}
#endif

static int l_decode(lua_State *L)
{
  struct perfev_decoder *d;
  struct perfev_iter *st;
  int top;
  luaL_checkstring(L, 1);
  lua_settop(L, 3);
  d = perfev_decoder_from(L, 2, "perfev.decode");
  top = lua_gettop(L);
  st = perfev_iter_options(L, 3, "perfev.decode", &d->swap);   /* pushes into, state */
  st->bytes = (const unsigned char *)lua_tolstring(L, 1, &st->len);
  st->dec = d;
  lua_pushvalue(L, 1);
  lua_pushvalue(L, top);
  lua_pushvalue(L, top + 1);
  lua_pushvalue(L, top + 2);
  lua_pushcclosure(L, decode_next, 4);
#if PERFEV_LUAJIT
  accelerate(L, st, d);
#endif
  return 1;
}

/* core.SCALAR = { U64 = , U32 = , S32 = , PERIOD = }: the kinds of a
 * plan's scalars (select.h's PERFEV_SCALAR_*), as the accelerator is given
 * them (perfev.decode_jit reads them here). */
static void push_scalars(lua_State *L)
{
  static const struct { const char *name; int kind; } kinds[] = {
    { "U64", PERFEV_SCALAR_U64 }, { "U32", PERFEV_SCALAR_U32 },
    { "S32", PERFEV_SCALAR_S32 }, { "PERIOD", PERFEV_SCALAR_PERIOD },
  };
  lua_createtable(L, 0, (int)(sizeof kinds / sizeof kinds[0]));
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    lua_pushinteger(L, kinds[i].kind);
    lua_setfield(L, -2, kinds[i].name);
  }
}

int perfev_decode_open_lib(lua_State *L)
{
  static const luaL_Reg funcs[] = {
    { "decode", l_decode },
#if PERFEV_LUAJIT
    { "decode_accelerator", l_accelerator },
#endif
    { NULL, NULL }
  };
  perfev_decoder_open_lib(L);
  luaL_setfuncs(L, funcs, 0);
  push_scalars(L);
  lua_setfield(L, -2, "SCALAR");
  return 0;
}
