/* The decoder object shared by everything that decodes records (core.decode,
 * rings, snapshots, perf.data files, core.encode): the decode parameters
 * of each attr of a stream, read from it once, and where a record says which
 * attr it belongs to (its id), to pick the layout of each record. */
#include <string.h>
#include "decode.h"

/* ---- the decode parameters of an attr ---- */

void perfev_attr_params_init(struct perfev_attr_params *l, const struct perfev_attr *a, uint64_t id)
{
  /* Read from the byte image as the struct: by name (perfev_attr_u64) it
   * costs a search per field on every decode and encode call. */
  struct perf_event_attr pa;
  memset(&pa, 0, sizeof pa);
  memcpy(&pa, a->raw, sizeof pa < sizeof a->raw ? sizeof pa : sizeof a->raw);
  memset(l, 0, sizeof *l);
  l->id = id;
  l->sample_type = pa.sample_type;
  l->read_format = pa.read_format;
  l->branch_sample_type = pa.branch_sample_type;
  l->regs_user = pa.sample_regs_user;
  l->regs_intr = pa.sample_regs_intr;
  l->sample_id_all = pa.sample_id_all;
  l->period = pa.sample_period;
  l->inherit = pa.inherit;
  l->trailer_size = 8u * (uint32_t)__builtin_popcountll(l->sample_type & PERFEV_TRAILER_BITS);
}

struct perfev_decoder *perfev_decoder_new(lua_State *L, size_t n)
{
  struct perfev_decoder *d = (struct perfev_decoder *)perfev_newuserdata(
    L, sizeof *d + n * sizeof d->attrs[0]);
  memset(d, 0, sizeof *d + n * sizeof d->attrs[0]);
  d->n = n;
  d->id_pos = d->is_pos = -1;
  luaL_setmetatable(L, PERFEV_DECODER_MT);
  return d;
}

#define ID_BEFORE (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR)

/* Where a sample's id is, in u64 words after the header; -1: nowhere. */
static int id_pos(const struct perfev_attr_params *l)
{
  if (l->sample_type & PERF_SAMPLE_IDENTIFIER)
    return 0;
  if (l->sample_type & PERF_SAMPLE_ID)
    return __builtin_popcountll(l->sample_type & ID_BEFORE);
  return -1;
}

/* Where the trailer's id is, in u64 words from the record's end. */
static int is_pos(const struct perfev_attr_params *l)
{
  if (!l->sample_id_all)
    return -1;
  if (l->sample_type & PERF_SAMPLE_IDENTIFIER)
    return 0;
  if (l->sample_type & PERF_SAMPLE_ID)
    return __builtin_popcountll(l->sample_type & (PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU));
  return -1;
}

/* The same for the stream_id, which the kernel sets to the event's own id:
 * after ID in a sample, before CPU and IDENTIFIER in the trailer. */
static int sid_pos(const struct perfev_attr_params *l)
{
  if (!(l->sample_type & PERF_SAMPLE_STREAM_ID))
    return -1;
  return __builtin_popcountll(l->sample_type & (ID_BEFORE | PERF_SAMPLE_ID));
}

static int sis_pos(const struct perfev_attr_params *l)
{
  if (!l->sample_id_all || !(l->sample_type & PERF_SAMPLE_STREAM_ID))
    return -1;
  return __builtin_popcountll(l->sample_type & (PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER));
}

/* Whether the events can be told apart by stream_id instead (go-perf's
 * shared rings): every one has STREAM_ID and no ID, and none inherits
 * (an inherited child's stream_id is its own id, unknown here). */
static int by_stream_id(const struct perfev_decoder *d)
{
  for (size_t i = 0; i < d->n; i++) {
    const struct perfev_attr_params *l = &d->attrs[i];
    if (id_pos(l) >= 0 || sid_pos(l) < 0 || l->inherit)
      return 0;
  }
  return 1;
}

static void finish(lua_State *L, struct perfev_decoder *d, const char *who)
{
  int (*idp)(const struct perfev_attr_params *) = id_pos, (*isp)(const struct perfev_attr_params *) = is_pos;
  if (d->n >= 2 && by_stream_id(d)) {
    idp = sid_pos;
    isp = sis_pos;
  }
  d->id_pos = idp(&d->attrs[0]);
  d->is_pos = isp(&d->attrs[0]);
  if (d->n < 2)
    return;
  if (d->id_pos < 0)
    luaL_error(L, "%s: a stream of several events needs PERF_SAMPLE_IDENTIFIER "
                  "(or PERF_SAMPLE_ID, or PERF_SAMPLE_STREAM_ID without inherit) in every "
                  "sample_type to tell its records apart", who);
  for (size_t i = 1; i < d->n; i++)
    if (idp(&d->attrs[i]) != d->id_pos || isp(&d->attrs[i]) != d->is_pos)
      luaL_error(L, "%s: the events of one stream must put the id at the same "
                    "place: use PERF_SAMPLE_IDENTIFIER in every sample_type (and the same "
                    "sample_id_all)", who);
}

void perfev_decoder_finish(lua_State *L, struct perfev_decoder *d)
{
  finish(L, d, "perfev.decode");
}

int perfev_decoder_pick(const struct perfev_decoder *d, const unsigned char *rec, size_t len,
                        uint32_t type, size_t *li, uint64_t *id)
{
  const struct perfev_rtype *rt;
  *li = 0;
  if (d->n == 1)
    return PERFEV_PICK_OK;
  if (type == PERF_RECORD_SAMPLE) {
    if (d->id_pos < 0)
      return PERFEV_PICK_OK;
    if (len < 8 * (size_t)(d->id_pos + 2))
      return PERFEV_PICK_SHORT;
    *id = perfev_ld64(rec + 8 * (size_t)(d->id_pos + 1), d->swap);
  } else {
    rt = perfev_rtype_find(type);
    if (d->is_pos < 0 || !rt || !rt->trailer)
      return PERFEV_PICK_OK;   /* no id: body fields do not depend on the attr */
    if (len < 8 * (size_t)(d->is_pos + 2))
      return PERFEV_PICK_SHORT;
    *id = perfev_ld64(rec + len - 8 * (size_t)(d->is_pos + 1), d->swap);
  }
  for (size_t i = 0; i < d->n; i++)
    if (d->attrs[i].id == *id) {
      *li = i;
      return PERFEV_PICK_OK;
    }
  return PERFEV_PICK_NO_ATTR;
}

/* ---- core.decode(bytes, attr | event | { [id] = attr or event, ... }, [options]) ---- */

/* Upvalues 1 and 2, the byte string and the decoder, only keep them alive:
 * the state points at both. */
#define DECODE_UPV_INTO lua_upvalueindex(3)
#define DECODE_UPV_STATE lua_upvalueindex(4)

/* The iterator: the string, where it is and the decoder are in the state,
 * so that a step reads no upvalue but the state. */
static int decode_step(lua_State *L, struct perfev_reuse *st);

static int decode_next(lua_State *L)
{
  struct perfev_reuse *st = (struct perfev_reuse *)lua_touserdata(L, DECODE_UPV_STATE);
  const unsigned char *rec = st->bytes + st->off;
  /* values mode's shortcut (this decoder is the closure's: never replaced,
   * so the plan made for it needs no check of the layout); kept apart from
   * the general step so that a plain sample pays for nothing else */
  size_t size = perfev_select_scalar_size(st, st->dec, rec, st->len - st->off, 0);
  if (size) {
    size_t off = st->off;
    st->off += size;
    return perfev_select_push_scalars(L, st, st->dec, rec, off);
  }
  return decode_step(L, st);
}

/* The general step: the next record, its table or its values. */
static __attribute__((noinline)) int decode_step(lua_State *L, struct perfev_reuse *st)
{
  struct perfev_decoder *d = st->dec;
  const unsigned char *s = st->bytes;
  size_t len = st->len, off = st->off;
  struct perf_event_header h;
  int n = 0;
  if (st->sel.tally && (n = perfev_tally_next(L, st, DECODE_UPV_STATE, d, NULL, off >= len)) > 0)
    return n;
  while (n == 0) {   /* n is 0 for a record skipped (values of samples only) */
    if (off >= len)   /* the tallies of the last samples, if any */
      return st->sel.tally ? perfev_tally_next(L, st, DECODE_UPV_STATE, d, NULL, 1) : 0;
    if (len - off < sizeof h)
      perfev_decode_error(L, off, 0, len - off, "the buffer ends inside a record header");
    perfev_record_header(s + off, d->swap, &h);
    if (h.size < sizeof h)
      perfev_decode_error(L, off, h.type, h.size, "size is smaller than the 8-byte header");
    if (h.size > len - off)
      perfev_decode_error(L, off, h.type, h.size, "size runs past the end of the buffer");
    st->off = off + h.size;
    n = perfev_iter_record(L, st, d, DECODE_UPV_STATE, DECODE_UPV_INTO, s + off, h.size, off, NULL);
    off += h.size;
  }
  return n;
}

/* The attr and id of the value at idx (attr or event); 0 if neither. */
static int attr_of(lua_State *L, int idx, const struct perfev_attr **a, uint64_t *id)
{
  struct perfev_event *ev;
  struct perfev_attr *at = (struct perfev_attr *)luaL_testudata(L, idx, PERFEV_ATTR_MT);
  if (at) {
    *a = at;
    return 1;
  }
  ev = (struct perfev_event *)luaL_testudata(L, idx, PERFEV_EVENT_MT);
  if (ev) {
    *a = &ev->attr;
    *id = ev->id;
    return 1;
  }
  return 0;
}

/* Fills a decoder from { [id] = attr, ... } or { event, ... } at idx. */
static struct perfev_decoder *decoder_from_map(lua_State *L, int idx, const char *who)
{
  size_t n = 0, i = 0;
  struct perfev_decoder *d;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1))
    n++;
  d = perfev_decoder_new(L, n);
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    const struct perfev_attr *a = NULL;
    uint64_t id = 0;
    int is_event = luaL_testudata(L, -1, PERFEV_EVENT_MT) != NULL;
    if (!attr_of(L, -1, &a, &id))
      luaL_error(L, "%s: the attrs table maps ids to attrs (or lists events)", who);
    if (!is_event) {
      if (!lua_isinteger(L, -2))
        luaL_error(L, "%s: the attrs table's keys must be event ids", who);
      id = (uint64_t)lua_tointeger(L, -2);
    }
    perfev_attr_params_init(&d->attrs[i++], a, id);
  }
  return d;
}

/* Whether the table at idx holds attrs or events (rather than attr fields). */
static int is_map(lua_State *L, int idx)
{
  int yes = 0;
  if (!lua_istable(L, idx))
    return 0;
  lua_pushnil(L);
  if (lua_next(L, idx)) {
    yes = luaL_testudata(L, -1, PERFEV_ATTR_MT) || luaL_testudata(L, -1, PERFEV_EVENT_MT);
    lua_pop(L, 2);
  }
  return yes;
}

struct perfev_decoder *perfev_decoder_from(lua_State *L, int idx, const char *who)
{
  const struct perfev_attr *a = NULL;
  uint64_t id = 0;
  struct perfev_decoder *d;
  idx = lua_absindex(L, idx);
  if (attr_of(L, idx, &a, &id)) {
    d = perfev_decoder_new(L, 1);
    perfev_attr_params_init(&d->attrs[0], a, id);
  } else if (is_map(L, idx)) {
    d = decoder_from_map(L, idx, who);
  } else {
    if (!lua_istable(L, idx))
      luaL_error(L, "%s: argument %d must be an attr, an event, a table of attr fields or a "
                    "table of attrs by id, got %s", who, idx, luaL_typename(L, idx));
    a = perfev_attr_from(L, idx);
    d = perfev_decoder_new(L, 1);
    perfev_attr_params_init(&d->attrs[0], a, 0);
    lua_remove(L, -2);   /* the attr: the layout has what it needs */
  }
  finish(L, d, who);
  return d;
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
static void accelerate(lua_State *L, struct perfev_reuse *st, struct perfev_decoder *d)
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
  struct perfev_reuse *st;
  int top;
  luaL_checkstring(L, 1);
  lua_settop(L, 3);
  d = perfev_decoder_from(L, 2, "perfev.decode");
  top = lua_gettop(L);
  st = perfev_decode_options(L, 3, "perfev.decode", &d->swap);   /* pushes into, state */
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

/* core.id_positions(attr) -> where a sample's id is (u64 words after the
 * header) and where a side-band record's is (u64 words before the end of
 * its sample_id trailer); -1: none. The events of one stream need both
 * equal, as the decoder and perf require: the perf.data writer checks so. */
static int l_id_positions(lua_State *L)
{
  struct perfev_attr_params l;
  perfev_attr_params_init(&l, perfev_attr_check(L, 1), 0);
  lua_pushinteger(L, id_pos(&l));
  lua_pushinteger(L, is_pos(&l));
  return 2;
}

int perfev_decode_open_lib(lua_State *L)
{
  static const luaL_Reg funcs[] = {
    { "decode", l_decode }, { "id_positions", l_id_positions },
#if PERFEV_LUAJIT
    { "decode_accelerator", l_accelerator },
#endif
    { NULL, NULL }
  };
  perfev_class_register(L, PERFEV_DECODER_MT, NULL, NULL);
  luaL_setfuncs(L, funcs, 0);
  return 0;
}
