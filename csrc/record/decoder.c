/* The decoder object shared by everything that decodes records (core.decode,
 * rings, snapshots, perf.data files, core.encode): the decode parameters
 * of each attr of a stream, read from it once, and where a record says which
 * attr it belongs to (its id), to pick the layout of each record. */
#include <string.h>
#include "decoder.h"

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

void perfev_decoder_count_lost(struct perfev_decoder *d, uint32_t type, const unsigned char *rec,
                               size_t len)
{
  if (type == PERF_RECORD_LOST && len >= 24)
    d->lost += perfev_ld64(rec + 16, d->swap);
  else if (type == PERF_RECORD_LOST_SAMPLES && len >= 16)
    d->lost += perfev_ld64(rec + 8, d->swap);
}

/* ---- the decoder of what perfev.decode and perfev.encode take ---- */

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

void perfev_decoder_open_lib(lua_State *L)
{
  perfev_class_register(L, PERFEV_DECODER_MT, NULL, NULL);
  lua_pushcfunction(L, l_id_positions);
  lua_setfield(L, -2, "id_positions");
}
