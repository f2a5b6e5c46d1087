/* A sample's Lua stack as interned frame ids (profiler.h's prof_lua_stack),
 * for the CPU profiler's hook (profiler.c) and the allocation profiler's
 * (allocprof/allocprof.c): the running coroutine's frames, then its
 * resumer's from the wrapper's level (the chain of resumes, cotrack.h),
 * and so on down to the main thread; cut at a bound with a "[truncated]"
 * frame. */
#include "profiler.h"
#include "cotrack.h"

static char what_code(const char *what)
{
  return what[0] == 'C' ? 'C' : what[0] == 'm' ? 'm' : 'L';
}

/* Appends T's frames from level `from`, leaf first; returns the new count,
 * or -1 when out of memory. Sets *full when w->max - 1 frames are in. */
static int walk(const struct prof_walk *w, lua_State *T, int from, uint32_t *ids, int n, int *full)
{
  lua_Debug d;
  for (int lv = from; lua_getstack(T, lv, &d); lv++) {
    if (n == w->max - 1) {
      *full = 1;
      return n;
    }
    lua_getinfo(T, "Sln", &d);
    int pushed = 0;
    const char *name = w->name ? w->name(w->ud, T, lv, &d, &pushed) : d.name;
    struct prof_key k = { name, d.short_src, d.linedefined, d.currentline, what_code(d.what), 0 };
    long id = prof_agg_frame(w->agg, &k);
    lua_pop(T, pushed);
    if (id < 0)
      return -1;
    ids[n++] = (uint32_t)id;
  }
  return n;
}

int prof_lua_stack(const struct prof_walk *w, lua_State *L, int from, uint32_t *ids, int *cut)
{
  int n = 0, full = 0;
  for (lua_State *T = L; T && !full && n >= 0; T = perfev_cochain_resumer(w->chain, T),
       from = PERFEV_COTRACK_RESUMER_LEVEL)
    n = walk(w, T, from, ids, n, &full);
  if (n >= 0 && full) {
    struct prof_key k = { "[truncated]", "", -1, -1, 't', 0 };
    long id = prof_agg_frame(w->agg, &k);
    ids[n++] = (uint32_t)id;
    if (id < 0)
      n = -1;
  }
  for (int i = 0, j = n - 1; i < j; i++, j--) {   /* root first */
    uint32_t t = ids[i];
    ids[i] = ids[j];
    ids[j] = t;
  }
  *cut = full;
  return n;
}
