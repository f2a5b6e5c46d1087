/* The perf.data reader userdata: core.perfdata_reader(file, opts). The Lua
 * layer (lua/perfev/perfdata.lua) reads the header, the attrs and the
 * features; this part streams the records: the iterator reads a chunk,
 * cuts a record, decodes it and returns its table, with nothing else per
 * record in Lua. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "perfdata.h"

#define PD_DEFAULT_BUF ((size_t)1 << 20)
#define PD_MIN_BUF ((size_t)1 << 16)          /* a record is at most 65535 bytes */
#define PD_DEFAULT_QUEUE ((size_t)256 << 20)  /* time order: a half flush past this */
#define PD_NONE UINT64_MAX                    /* a record without a time */

static struct pd_reader *check_reader(lua_State *L)
{
  struct pd_reader *r = (struct pd_reader *)perfev_self(L, PD_READER_MT);
  if (r->closed)
    luaL_error(L, "perfev.perfdata: the file is closed");
  return r;
}

/* Pushes uservalue slot `slot` of the reader at idx. */
static void get_slot(lua_State *L, int idx, int slot)
{
  perfev_getiuservalue(L, idx);
  lua_rawgeti(L, -1, slot);
  lua_remove(L, -2);
}

/* uservalue[slot] = the value on top (popped). */
static void set_slot(lua_State *L, int idx, int slot)
{
  idx = lua_absindex(L, idx);
  perfev_getiuservalue(L, idx);
  lua_insert(L, -2);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 1);
}

/* Adds the stream's warning (pd_next_raw's, at its end) to the caller's
 * warnings list (uservalue WARN: f:header().warnings), once. */
static void add_warning(lua_State *L, int idx, struct pd_reader *r)
{
  if (!r->warning[0] || r->warned)
    return;
  r->warned = 1;
  get_slot(L, idx, PD_UV_WARN);
  if (lua_istable(L, -1)) {
    lua_pushstring(L, r->warning);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  }
  lua_pop(L, 1);
}

static void release(struct pd_reader *r)
{
  pd_unmap(r);
  free(r->buf);
  free(r->zbuf);
  free(r->lx);
  pd_zstd_free(r->z);
  pd_queue_free(&r->q);
  r->buf = r->zbuf = NULL;
  r->lx = NULL;
  r->z = NULL;
  r->d = NULL;
  r->stream = NULL;
  r->closed = 1;
}

/* ---- the decoder over the attrs list ---- */

/* Where the time is, for ordering without decoding. */
static void time_offsets(struct pd_lx *x, const struct perfev_attr_params *l)
{
  const uint64_t st = l->sample_type;
  x->time_sample = x->time_trailer = -1;
  if (!(st & PERF_SAMPLE_TIME))
    return;
  x->time_sample = 8 * __builtin_popcountll(st & (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID));
  if (l->sample_id_all)   /* sample_id: tid, time, id, stream_id, cpu, identifier */
    x->time_trailer = 8 * (1 + __builtin_popcountll(st & (PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
                                              PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER)));
}

/* The attrs entry on top, { attr = <perfev.attr>, ids = { integer... } },
 * checked: what is wrong raises naming attrs[i] and the field. */
static void check_entry(lua_State *L, const struct pd_reader *r, size_t i)
{
  if (!lua_istable(L, -1))
    pd_error(L, r, "attrs[%zu] must be a table { attr =, ids =, name = }, got %s", i,
             luaL_typename(L, -1));
  lua_getfield(L, -1, "attr");
  if (!luaL_testudata(L, -1, PERFEV_ATTR_MT))
    pd_error(L, r, "attrs[%zu].attr must be a perfev.attr, got %s", i, luaL_typename(L, -1));
  lua_getfield(L, -2, "ids");
  if (!lua_isnil(L, -1) && !lua_istable(L, -1))
    pd_error(L, r, "attrs[%zu].ids must be a list of ids, got %s", i, luaL_typename(L, -1));
  for (size_t j = 1; lua_istable(L, -1) && j <= lua_rawlen(L, -1); j++) {
    lua_rawgeti(L, -1, (lua_Integer)j);
    if (!lua_isinteger(L, -1))
      pd_error(L, r, "attrs[%zu].ids[%zu] must be an integer, got %s", i, j,
               luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
}

/* Checks every entry of the attrs list at index attrs, refills the names
 * table at index names, and returns how many ids the entries list. */
static size_t check_entries(lua_State *L, const struct pd_reader *r, int attrs, int names,
                            size_t nattrs)
{
  size_t nids = 0;
  for (size_t i = 1; i <= nattrs; i++) {
    lua_rawgeti(L, attrs, (lua_Integer)i);
    check_entry(L, r, i);
    lua_getfield(L, -1, "ids");
    nids += lua_istable(L, -1) ? lua_rawlen(L, -1) : 0;
    lua_getfield(L, -2, "name");
    lua_rawseti(L, names, (lua_Integer)i);
    lua_pop(L, 2);
  }
  return nids;
}

/* Builds the decoder from the attrs list (uservalue ATTRS: { attr =, ids =,
 * name = } each): one layout per id, or a single one for a single attr;
 * refills the names table. Raises when the attrs cannot share a stream. */
static void rebuild(lua_State *L, int ridx)
{
  struct pd_reader *r = (struct pd_reader *)lua_touserdata(L, ridx);
  struct perfev_decoder *d;
  size_t nattrs, nids, nl, k = 0;
  int attrs, names;
  ridx = lua_absindex(L, ridx);
  get_slot(L, ridx, PD_UV_ATTRS);
  attrs = lua_gettop(L);
  get_slot(L, ridx, PD_UV_NAMES);
  names = lua_gettop(L);
  nattrs = lua_rawlen(L, attrs);
  /* until it succeeds, nothing refers to a decoder that lx does not match */
  r->d = NULL;
  r->dirty = 1;
  if (nattrs == 0) {
    r->dirty = 0;
    lua_pop(L, 2);
    return;
  }
  nids = check_entries(L, r, attrs, names, nattrs);
  if (nattrs > 1 && nids == 0)
    pd_error(L, r, "%zu attrs and no event ids: their records cannot be told apart", nattrs);
  /* perf tags the records it synthesizes with id 0 and reads them with
   * the first attr: one more layout, for id 0 */
  nl = nattrs == 1 ? 1 : nids + 1;
  d = perfev_decoder_new(L, nl);
  {
    struct pd_lx *lx = realloc(r->lx, nl * sizeof *lx);
    if (!lx)
      luaL_error(L, "perfev.perfdata: out of memory");
    r->lx = lx;
    r->nlx = nl;
  }
  for (size_t i = 1; i <= nattrs && k < nids + (nl == 1); i++) {
    const struct perfev_attr *a;
    size_t n;
    lua_rawgeti(L, attrs, (lua_Integer)i);
    lua_getfield(L, -1, "attr");
    a = perfev_attr_check(L, -1);
    lua_getfield(L, -2, "ids");
    n = lua_istable(L, -1) ? lua_rawlen(L, -1) : 0;
    if (nl == 1) {
      lua_rawgeti(L, -1, 1);
      perfev_attr_params_init(&d->attrs[0], a, (uint64_t)luaL_optinteger(L, -1, 0));
      lua_pop(L, 1);
      r->lx[0].attr = (int)i;
      k = 1;
    }
    for (size_t j = 1; nl > 1 && j <= n; j++) {
      lua_rawgeti(L, -1, (lua_Integer)j);
      perfev_attr_params_init(&d->attrs[k], a, (uint64_t)luaL_checkinteger(L, -1));
      r->lx[k++].attr = (int)i;
      lua_pop(L, 1);
    }
    lua_pop(L, 3);
  }
  if (nl > 1) {
    lua_rawgeti(L, attrs, 1);
    lua_getfield(L, -1, "attr");
    perfev_attr_params_init(&d->attrs[k], perfev_attr_check(L, -1), 0);
    r->lx[k++].attr = 1;
    lua_pop(L, 2);
  }
  for (size_t i = 0; i < nl; i++)
    time_offsets(&r->lx[i], &d->attrs[i]);
  d->swap = r->swap;
  perfev_decoder_finish(L, d);
  set_slot(L, ridx, PD_UV_DEC);   /* keeps the decoder alive */
  r->d = d;
  r->dirty = 0;
  lua_pop(L, 2);
}

/* The decoder, rebuilt when the attrs changed; NULL when none is known. */
static struct perfev_decoder *decoder(lua_State *L, int ridx, struct pd_reader *r)
{
  if (r->dirty)
    rebuild(L, ridx);
  return r->d;
}

/* ---- what ordering needs of a raw record ---- */

/* The layout of a record, as the decoder will pick it; -1: none fits. */
static int layout_of(const struct pd_reader *r, const unsigned char *rec, size_t len, uint32_t type)
{
  size_t li;
  uint64_t id;
  return perfev_decoder_pick(r->d, rec, len, type, &li, &id) == PERFEV_PICK_OK ? (int)li : -1;
}

static uint64_t time_of(const struct pd_reader *r, const unsigned char *rec, size_t len,
                        uint32_t type)
{
  int li = layout_of(r, rec, len, type);
  const struct perfev_rtype *rt;
  const struct pd_lx *x;
  if (li < 0)
    return PD_NONE;
  x = &r->lx[li];
  if (type == PERF_RECORD_SAMPLE) {
    if (x->time_sample < 0 || len < 16 + (size_t)x->time_sample)
      return PD_NONE;
    return perfev_ld64(rec + 8 + x->time_sample, r->swap);
  }
  rt = perfev_rtype_find(type);
  if (!rt || !rt->trailer || x->time_trailer < 0 || len < 8 + (size_t)x->time_trailer)
    return PD_NONE;
  return perfev_ld64(rec + len - x->time_trailer, r->swap);
}

/* ---- the iterator ---- */

struct pd_iter {
  /* the upvalues' userdata, taken once (the closure keeps them alive) */
  struct pd_reader *r;
  struct perfev_iter *st;
  unsigned generation;
  int order;           /* time order */
  int offsets;         /* rec.offset */
  int done;
  int filtered;        /* types given: only those in want[] */
  size_t replay_pos;
  unsigned char want[32];   /* record types 0..255 */
};

#define IT_UPV_READER lua_upvalueindex(1)
#define IT_UPV_NAMES lua_upvalueindex(2)
#define IT_UPV_ITER lua_upvalueindex(3)
#define IT_UPV_INTO lua_upvalueindex(4)
#define IT_UPV_STATE lua_upvalueindex(5)

static int wanted(const struct pd_iter *it, uint32_t type)
{
  if (!it->filtered)
    return 1;
  return type < 256 && (it->want[type / 8] & (1u << (type % 8)));
}

/* rec.event (a sample's event name) and rec.offset (with offsets, or
 * when asked for by name). */
static int push_extra(lua_State *L, void *ud, int which, int asked, uint32_t type, size_t li,
                      size_t off)
{
  const struct pd_iter *it = (const struct pd_iter *)ud;
  const struct pd_reader *r = it->r;
  if (which == PERFEV_EXTRA_OFFSET) {
    if (!it->offsets && !asked)
      return 0;
    lua_pushinteger(L, (lua_Integer)off);
    return 1;
  }
  if (type != PERF_RECORD_SAMPLE || li >= r->nlx)
    return 0;
  if (lua_rawgeti(L, IT_UPV_NAMES, r->lx[li].attr) == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

/* attrs entry index (from 1) holding id, or 0. */
static size_t entry_of_id(lua_State *L, int attrs, lua_Integer id)
{
  size_t n = lua_rawlen(L, attrs);
  for (size_t i = 1; i <= n; i++) {
    int found = 0;
    lua_rawgeti(L, attrs, (lua_Integer)i);
    lua_getfield(L, -1, "ids");
    for (size_t j = 1; lua_istable(L, -1) && !found && j <= lua_rawlen(L, -1); j++) {
      lua_rawgeti(L, -1, (lua_Integer)j);
      found = lua_tointeger(L, -1) == id;
      lua_pop(L, 1);
    }
    lua_pop(L, 2);
    if (found)
      return i;
  }
  return 0;
}

/* What perf's own records change in the reader, with their table on top:
 * a header_attr adds its attr (unless its ids are known), an event_update
 * names an event. */
static void apply_user(lua_State *L, int ridx, struct pd_reader *r, uint32_t type)
{
  int rec = lua_gettop(L), attrs;
  if (type != PD_HEADER_ATTR && type != PD_EVENT_UPDATE)
    return;
  get_slot(L, ridx, PD_UV_ATTRS);
  attrs = lua_gettop(L);
  if (type == PD_HEADER_ATTR) {
    lua_getfield(L, rec, "ids");
    lua_rawgeti(L, -1, 1);
    if (lua_isnil(L, -1) || entry_of_id(L, attrs, lua_tointeger(L, -1)) == 0) {
      lua_createtable(L, 0, 3);
      lua_getfield(L, rec, "attr");
      lua_setfield(L, -2, "attr");
      lua_pushvalue(L, -3);
      lua_setfield(L, -2, "ids");
      lua_rawseti(L, attrs, (lua_Integer)lua_rawlen(L, attrs) + 1);
      r->dirty = 1;
    }
    lua_pop(L, 2);
  } else {
    size_t i;
    lua_getfield(L, rec, "name");
    lua_getfield(L, rec, "id");
    i = lua_isstring(L, -2) ? entry_of_id(L, attrs, lua_tointeger(L, -1)) : 0;
    if (i) {
      lua_rawgeti(L, attrs, (lua_Integer)i);
      lua_pushvalue(L, -3);
      lua_setfield(L, -2, "name");
      lua_pop(L, 1);
      get_slot(L, ridx, PD_UV_NAMES);
      lua_pushvalue(L, -3);
      lua_rawseti(L, -2, (lua_Integer)i);
      lua_pop(L, 1);
    }
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
}

static void queue_oom(lua_State *L, struct pd_reader *r)
{
  pd_error(L, r, "out of memory while ordering records by time");
}

/* The reader as a source of records (ud: the iterator). */
struct pd_source {
  struct perfev_source src;
  struct pd_iter *it;
  struct perfev_extra x;
};

/* The next record of what the open read ahead (pipe mode), pushed:
 * 1; 0 when they are over. */
static int replay_next(lua_State *L, struct pd_iter *it)
{
  struct pd_reader *r = it->r;
  while (it->replay_pos < r->nreplay) {
    lua_Integer type;
    get_slot(L, IT_UPV_READER, PD_UV_REPLAY);
    lua_getfield(L, -1, "types");
    lua_rawgeti(L, -1, (lua_Integer)++it->replay_pos);
    type = lua_tointeger(L, -1);
    if (wanted(it, (uint32_t)type)) {
      lua_rawgeti(L, -3, (lua_Integer)it->replay_pos);
      if (it->offsets) {
        lua_getfield(L, -4, "offsets");
        lua_rawgeti(L, -1, (lua_Integer)it->replay_pos);
        lua_setfield(L, -3, "offset");
        lua_pop(L, 1);
      }
      lua_replace(L, -4);
      lua_pop(L, 2);
      return 1;
    }
    lua_pop(L, 3);
  }
  return 0;
}

/* One of perf's own records (type 64 and up), at rec: applied to the
 * reader (attrs, names, rounds), and pushed when the iteration wants it
 * (returns 1). */
static int user_record(lua_State *L, struct pd_iter *it, const unsigned char *rec, size_t len,
                       uint64_t foff, uint32_t type)
{
  struct pd_reader *r = it->r;
  int want = wanted(it, type), top = lua_gettop(L);
  if (type == PD_HEADER_ATTR || type == PD_EVENT_UPDATE || want) {
    pd_user_decode(L, r, rec, len, foff);
    apply_user(L, IT_UPV_READER, r, type);
  }
  if (type == PD_FINISHED_ROUND && it->order && pd_queue_flush(&r->q, PD_FLUSH_ROUND))
    queue_oom(L, r);
  if (!want) {
    lua_settop(L, top);
    return 0;
  }
  if (it->offsets) {
    lua_pushinteger(L, (lua_Integer)foff);
    lua_setfield(L, -2, "offset");
  }
  return 1;
}

/* The decoder for a kernel record; raises when no attr is known yet. */
static struct perfev_decoder *kernel_decoder(lua_State *L, struct pd_reader *r,
                                             const unsigned char *rec, uint64_t foff)
{
  struct perfev_decoder *d = decoder(L, IT_UPV_READER, r);
  if (!d)
    pd_error(L, r, "the kernel record at offset %" PRIu64 " (type %" PRIu32 ") comes before any "
             "attr: a pipe-mode stream must start with its header_attr records", foff,
             perfev_ld32(rec, r->swap));
  return d;
}

static int source_record(struct perfev_source *src, struct perfev_decoder *d,
                         const unsigned char *rec, size_t len, uint64_t foff)
{
  src->dec = d;
  src->rec = rec;
  src->len = len;
  src->off = (size_t)foff;
  return PERFEV_SOURCE_RECORD;
}

/* The next record: the queue's (time order), the replayed, perf's own
 * (pushed), or the stream's; a kernel record with a time waits in the
 * queue under time order. */
static int pd_next(lua_State *L, struct perfev_source *src)
{
  struct pd_iter *it = ((struct pd_source *)src)->it;
  struct pd_reader *r = it->r;
  if (it->done)
    return PERFEV_SOURCE_END;
  if (it->replay_pos < r->nreplay && replay_next(L, it))
    return PERFEV_SOURCE_PUSHED;
  for (;;) {
    const unsigned char *rec;
    size_t len;
    uint64_t foff, t;
    uint32_t type;
    int inflated;
    if (it->order) {
      const struct pd_qent *e = pd_queue_next(&r->q, &rec);
      if (e)
        return source_record(src, kernel_decoder(L, r, rec, e->foff), rec, e->len, e->foff);
    }
    rec = pd_next_raw(L, r, &len, &foff, &inflated);
    if (!rec) {
      if (it->order && pd_queue_pending(&r->q)) {
        if (pd_queue_flush(&r->q, PD_FLUSH_FINAL))
          queue_oom(L, r);
        continue;
      }
      add_warning(L, IT_UPV_READER, r);
      it->done = 1;
      return PERFEV_SOURCE_END;
    }
    type = perfev_ld32(rec, r->swap);
    if (type >= PD_USER_START) {
      if (user_record(L, it, rec, len, foff, type)) {
        src->dec = decoder(L, IT_UPV_READER, r);
        return PERFEV_SOURCE_PUSHED;
      }
      continue;
    }
    if (!wanted(it, type))
      continue;
    /* perf delivers at once what has no time (or time 0: synthesized) */
    if (it->order && decoder(L, IT_UPV_READER, r) &&
        (t = time_of(r, rec, len, type)) != PD_NONE && t != 0) {
      if (pd_queue_push(&r->q, rec, len, t, foff, r->map && !inflated))
        queue_oom(L, r);
      continue;
    }
    return source_record(src, kernel_decoder(L, r, rec, foff), rec, len, foff);
  }
}

static int iter_next(lua_State *L)
{
  struct pd_source s;
  struct pd_iter *it = (struct pd_iter *)lua_touserdata(L, IT_UPV_ITER);
  struct pd_reader *r = it->r;
  if (r->closed)
    return luaL_error(L, "perfev.perfdata: the file is closed");
  if (it->generation != r->generation)
    return luaL_error(L, "perfev.perfdata: %s: a later f:records() restarted the file; this "
                         "iterator is finished", r->name);
  s.it = it;
  s.x.push = push_extra;
  s.x.ud = it;
  s.src.next = pd_next;
  s.src.ud = it;
  s.src.dec = r->d;
  s.src.x = &s.x;
  return perfev_iter_next(L, it->st, IT_UPV_STATE, IT_UPV_INTO, &s.src);
}

/* r:records{ order = "time", types = { 9, 10 }, offsets = true } -> iterator */
static int l_records(lua_State *L)
{
  struct pd_reader *r = check_reader(L);
  struct pd_iter *it;
  static const struct perfev_opt opts[] = {
    { "order", LUA_TSTRING }, { "offsets", LUA_TBOOLEAN }, { "types", LUA_TTABLE },
    { "into", LUA_TTABLE }, { "fields", LUA_TTABLE }, { "tally", LUA_TBOOLEAN }, { NULL, 0 }
  };
  lua_settop(L, 2);
  perfev_check_options(L, 2, "perfev.perfdata: records", opts);
  if (r->started) {
    if (!r->seekable)
      return pd_error(L, r, "a stream that cannot seek is read once: call f:records() once");
    pd_rewind(L, r);
  }
  r->started = 1;
  r->generation++;
  lua_pushvalue(L, 1);
  get_slot(L, 1, PD_UV_NAMES);
  it = (struct pd_iter *)lua_newuserdata(L, sizeof *it);
  memset(it, 0, sizeof *it);
  it->generation = r->generation;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "order");
    if (!lua_isnil(L, -1)) {
      const char *order = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
      char clip[PERFEV_CLIP];
      if (lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "records: option 'order' must be \"file\" or \"time\", got %s",
                          luaL_typename(L, -1));
      if (strcmp(order, "time") != 0 && strcmp(order, "file") != 0)
        return luaL_error(L, "records: option 'order' must be \"file\" or \"time\", got string '%s'",
                          perfev_clip(order, clip));
      it->order = order[0] == 't';
    }
    it->offsets = perfev_opt_bool(L, 2, "offsets", 0);
    lua_getfield(L, 2, "types");
    if (lua_istable(L, -1)) {
      it->filtered = 1;
      for (size_t i = 1; i <= lua_rawlen(L, -1); i++) {
        lua_Integer t;
        lua_rawgeti(L, -1, (lua_Integer)i);
        if (!lua_isinteger(L, -1))
          return luaL_error(L, "perfev.perfdata: records: types[%d] must be an integer, got %s",
                            (int)i, luaL_typename(L, -1));
        t = lua_tointeger(L, -1);
        if (t >= 0 && t < 256)
          it->want[t / 8] |= (unsigned char)(1u << (t % 8));
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 2);
  }
  it->r = r;
  it->st = perfev_iter_state(L, 2, "perfev.perfdata: records");   /* into, state */
  if (it->st->sel.values) {   /* values: samples alone */
    unsigned char sample = it->filtered ? it->want[PERF_RECORD_SAMPLE / 8] : 0xff;
    memset(it->want, 0, sizeof it->want);
    it->want[PERF_RECORD_SAMPLE / 8] = (unsigned char)(sample & (1u << (PERF_RECORD_SAMPLE % 8)));
    it->filtered = 1;
  }
  lua_pushcclosure(L, iter_next, 5);
  return 1;
}

/* r:preread() -> the perf records before the first kernel record (pipe
 * mode: attrs, features, ...), applied and kept to be replayed by
 * records(); the position after them becomes where records() restarts. */
static int l_preread(lua_State *L)
{
  struct pd_reader *r = check_reader(L);
  int list, types, offs;
  lua_settop(L, 1);
  lua_newtable(L);
  list = lua_gettop(L);
  lua_newtable(L);
  types = lua_gettop(L);
  lua_pushvalue(L, types);
  lua_setfield(L, list, "types");
  lua_newtable(L);
  offs = lua_gettop(L);
  lua_pushvalue(L, offs);
  lua_setfield(L, list, "offsets");
  r->nreplay = 0;
  for (;;) {
    size_t len;
    uint64_t foff;
    int inflated;
    const unsigned char *rec = pd_next_raw(L, r, &len, &foff, &inflated);
    uint32_t type;
    if (!rec) {
      add_warning(L, 1, r);
      r->start = r->off;
      break;
    }
    type = perfev_ld32(rec, r->swap);
    if (type < PD_USER_START) {
      pd_unread(r);
      r->start = foff;
      break;
    }
    pd_user_decode(L, r, rec, len, foff);
    apply_user(L, 1, r, type);
    lua_rawseti(L, list, (lua_Integer)++r->nreplay);
    lua_pushinteger(L, type);
    lua_rawseti(L, types, (lua_Integer)r->nreplay);
    lua_pushinteger(L, (lua_Integer)foff);
    lua_rawseti(L, offs, (lua_Integer)r->nreplay);
  }
  lua_pushvalue(L, list);
  set_slot(L, 1, PD_UV_REPLAY);
  lua_pushvalue(L, list);
  return 1;
}

/* r:set_attrs({ { attr =, ids =, name = }, ... }): builds the decoder now,
 * so that attrs which cannot share a stream fail at open. */
static int l_set_attrs(lua_State *L)
{
  struct pd_reader *r = check_reader(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_pushvalue(L, 2);
  set_slot(L, 1, PD_UV_ATTRS);
  r->dirty = 1;
  rebuild(L, 1);
  return 0;
}

static int l_attrs(lua_State *L)
{
  check_reader(L);
  get_slot(L, 1, PD_UV_ATTRS);
  return 1;
}

/* Frees the buffers (the Lua layer closes the file it opened). */
static int l_close(lua_State *L)
{
  struct pd_reader *r = (struct pd_reader *)perfev_self(L, PD_READER_MT);
  if (!r->closed)
    release(r);
  return 0;
}

/* core.perfdata_reader(file, { name =, start =, size =, swap =, pipe =,
 * seekable =, bufsize =, max_queue =, warnings =, mmap = }): size nil reads
 * to the end; warnings: a list the reader adds its warnings to; mmap =
 * false reads a regular file through stdio rather than mapping it. */
static int l_reader(lua_State *L)
{
  static const struct perfev_opt opts[] = {
    { "name", LUA_TSTRING }, { "start", LUA_TNUMBER }, { "size", LUA_TNUMBER },
    { "swap", LUA_TBOOLEAN }, { "pipe", LUA_TBOOLEAN }, { "seekable", LUA_TBOOLEAN },
    { "bufsize", LUA_TNUMBER }, { "max_queue", LUA_TNUMBER }, { "warnings", LUA_TTABLE },
    { "mmap", LUA_TBOOLEAN }, { NULL, 0 }
  };
  perfev_stream *s = perfev_checkstream(L, 1);
  struct pd_reader *r;
  lua_Integer bufsize, size;
  const char *name;
  lua_settop(L, 2);
  perfev_check_options(L, 2, "perfev.perfdata_reader", opts);
  if (perfev_stream_file(s) == NULL)
    return luaL_error(L, "perfev.perfdata: the file is closed");
  bufsize = perfev_opt_int(L, 2, "bufsize", (lua_Integer)PD_DEFAULT_BUF);
  if (bufsize < (lua_Integer)PD_MIN_BUF)
    bufsize = (lua_Integer)PD_MIN_BUF;
  r = (struct pd_reader *)perfev_newuserdata(L, sizeof *r);
  memset(r, 0, sizeof *r);
  r->closed = 1;   /* until the buffer is there: __gc frees nothing */
  luaL_setmetatable(L, PD_READER_MT);
  lua_createtable(L, 6, 0);
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, PD_UV_FILE);
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "warnings");
    lua_rawseti(L, -2, PD_UV_WARN);
  }
  lua_newtable(L);
  lua_rawseti(L, -2, PD_UV_ATTRS);
  lua_newtable(L);
  lua_rawseti(L, -2, PD_UV_NAMES);
  perfev_setiuservalue(L, -2);
  r->buf = malloc((size_t)bufsize);
  if (!r->buf)
    return luaL_error(L, "perfev.perfdata: out of memory");
  r->closed = 0;
  r->win = r->buf;
  r->cap = (size_t)bufsize;
  r->stream = s;
  name = lua_istable(L, 2) && lua_getfield(L, 2, "name") == LUA_TSTRING ? lua_tostring(L, -1)
                                                                       : "perf.data";
  snprintf(r->name, sizeof r->name, "%s", name);
  lua_settop(L, 3);   /* the reader */
  r->start = r->off = (uint64_t)perfev_opt_int(L, 2, "start", 0);
  size = perfev_opt_int(L, 2, "size", -1);
  r->end = size < 0 ? UINT64_MAX : r->start + (uint64_t)size;
  r->q.max_bytes = (size_t)perfev_opt_int(L, 2, "max_queue", (lua_Integer)PD_DEFAULT_QUEUE);
  r->swap = perfev_opt_bool(L, 2, "swap", 0);
  r->pipe = perfev_opt_bool(L, 2, "pipe", 0);
  r->seekable = perfev_opt_bool(L, 2, "seekable", 0);
  if (r->seekable && fseeko(perfev_stream_file(s), (off_t)r->start, SEEK_SET) != 0)
    return pd_error(L, r, "cannot seek to the data at offset %" PRIu64 ": %s", r->start,
                    strerror(errno));
  if (perfev_opt_bool(L, 2, "mmap", 1))
    pd_map(r);
  return 1;
}

static int l_gc(lua_State *L)
{
  struct pd_reader *r = (struct pd_reader *)perfev_self(L, PD_READER_MT);
  if (r && !r->closed)   /* NULL: __gc given another self (perfev_self) */
    release(r);
  return 0;
}

static int l_tostring(lua_State *L)
{
  struct pd_reader *r = (struct pd_reader *)perfev_self(L, PD_READER_MT);
  lua_pushfstring(L, "perfev.perfdata.reader (%s%s)", r->name, r->closed ? ", closed" : "");
  return 1;
}

int perfev_perfdata_open_lib(lua_State *L)
{
  static const luaL_Reg methods[] = {
    { "records", l_records }, { "preread", l_preread }, { "set_attrs", l_set_attrs },
    { "attrs", l_attrs }, { "close", l_close }, { NULL, NULL }
  };
  static const luaL_Reg meta[] = {
    { "__gc", l_gc }, { "__close", l_gc }, { "__tostring", l_tostring }, { NULL, NULL }
  };
  perfev_class_register(L, PD_READER_MT, meta, methods);
  lua_pushcfunction(L, l_reader);
  lua_setfield(L, -2, "perfdata_reader");
  pd_push_consts(L);
  lua_setfield(L, -2, "PERFDATA");
  return 0;
}
