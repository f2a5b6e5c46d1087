/* The profiler's samples in time order (perfev.profile{ timeline = n }):
 * a ring of the latest n samples, each its time, weight and stack. The
 * stacks are interned in an aggregation of the timeline's own, so that
 * p:take() and p:reset(), which start the profile's aggregation again,
 * leave the timeline's stacks valid. The ring is allocated when the
 * timeline is asked for: a sample allocates only when its stack or one of
 * its frames is new to the timeline (as the profile's aggregation). */
#include <stdlib.h>
#include <string.h>
#include "compat.h"
#include "profiler.h"

int prof_timeline_init(struct prof_timeline *t, size_t cap)
{
  prof_timeline_free(t);
  if (cap == 0)
    return 0;
  t->time = calloc(cap, sizeof *t->time);
  t->weight = calloc(cap, sizeof *t->weight);
  t->samples = calloc(cap, sizeof *t->samples);
  t->stack = calloc(cap, sizeof *t->stack);
  if (!t->time || !t->weight || !t->samples || !t->stack) {
    prof_timeline_free(t);
    return -1;
  }
  t->cap = cap;
  return 0;
}

void prof_timeline_forget(struct prof_timeline *t)
{
  if (t->map)
    memset(t->map, 0, t->capmap * sizeof *t->map);
}

/* The timeline's id of the profile's frame `id`, or -1 (out of memory). */
static long frame_of(struct prof_timeline *t, const struct prof_agg *from, uint32_t id)
{
  if (id >= t->capmap) {
    size_t ncap = t->capmap ? t->capmap : 64;
    while (ncap <= id)
      ncap *= 2;
    uint32_t *m = realloc(t->map, ncap * sizeof *m);
    if (!m)
      return -1;
    memset(m + t->capmap, 0, (ncap - t->capmap) * sizeof *m);
    t->map = m;
    t->capmap = ncap;
  }
  if (t->map[id])
    return (long)t->map[id] - 1;
  const struct prof_frame *f = &from->frames[id];
  struct prof_key k = { f->name, f->src, f->linedefined, f->line, f->what, f->ip };
  long mine = prof_agg_frame(&t->agg, &k);
  if (mine >= 0)
    t->map[id] = (uint32_t)mine + 1;
  return mine;
}

void prof_timeline_add(struct prof_timeline *t, const struct prof_agg *from, const uint32_t *ids,
                       uint32_t n, uint64_t time, uint64_t weight, uint64_t samples)
{
  if (t->cap == 0 || t->oom || t->busy)
    return;
  uint32_t mine[PROF_TIMELINE_FRAMES];
  long sid = 0;
  if (n > PROF_TIMELINE_FRAMES)       /* deeper than the hook records: cannot happen */
    n = PROF_TIMELINE_FRAMES;
  for (uint32_t i = 0; i < n && sid >= 0; i++) {
    long f = frame_of(t, from, ids[i]);
    if (f < 0)
      sid = -1;
    else
      mine[i] = (uint32_t)f;
  }
  if (sid >= 0)
    sid = prof_agg_stack(&t->agg, mine, n, 0, 0);
  if (sid < 0) {
    t->oom = 1;                 /* the profile goes on; the timeline stops here */
    return;
  }
  size_t slot = (size_t)(t->count % t->cap);
  t->time[slot] = time;
  t->weight[slot] = weight;
  t->samples[slot] = samples;
  t->stack[slot] = (uint32_t)sid;
  t->count++;
}

static void push_list(lua_State *L, const char *k, const uint64_t *v, const struct prof_timeline *t,
                      size_t first, size_t n, int plus_one)
{
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    size_t slot = (first + i) % t->cap;
    lua_pushinteger(L, (lua_Integer)(v ? v[slot] : t->stack[slot]) + plus_one);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, k);
}

void prof_timeline_push(lua_State *L, struct prof_timeline *t)
{
  t->busy = 1;          /* (a table's allocation may run a finalizer, and the hook in it) */
  lua_createtable(L, 0, 10);
  prof_agg_push_fields(L, &t->agg);
  size_t n = t->cap == 0 ? 0 : t->count < t->cap ? (size_t)t->count : t->cap;
  size_t first = t->cap == 0 || t->count < t->cap ? 0 : (size_t)(t->count % t->cap);
  push_list(L, "time", t->time, t, first, n, 0);
  push_list(L, "weight", t->weight, t, first, n, 0);
  push_list(L, "samples", t->samples, t, first, n, 0);
  push_list(L, "stack", NULL, t, first, n, 1);
  lua_pushinteger(L, (lua_Integer)n);
  lua_setfield(L, -2, "n");
  perfev_set_u64(L, "count", t->count);
  perfev_set_u64(L, "dropped", t->count - n);
  perfev_set_u64(L, "capacity", t->cap);
  lua_pushboolean(L, t->oom);
  lua_setfield(L, -2, "oom");
  t->busy = 0;
}

void prof_timeline_free(struct prof_timeline *t)
{
  prof_agg_free(&t->agg);
  free(t->map);
  free(t->time);
  free(t->weight);
  free(t->samples);
  free(t->stack);
  memset(t, 0, sizeof *t);
}
