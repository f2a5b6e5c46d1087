/* The allocation profiler's engine (perfev.alloc, lua/perfev/alloc.lua): a
 * lua_Alloc installed over the state's own (lua_getallocf, lua_setallocf:
 * every block Lua allocates, frees or resizes passes through it) counts
 * the bytes and blocks allocated and freed, and samples an allocation on
 * average every `period` bytes (an exponential countdown: a block of s
 * bytes is sampled with probability 1 - exp(-s/period), as Go's
 * MemProfileRate). A resize that grows a block is a free of the old block
 * and an allocation of the new one; one that shrinks it allocates nothing
 * (a sampled block keeps its sample, its in-use bytes the new size).
 *
 * The allocator runs inside the VM where no Lua may run and no stack may be
 * walked safely (inside the garbage collector, while a stack is being
 * reallocated: Lua 5.4.6 turns its pointers into offsets meanwhile): it
 * records the sampled block alone (address, size) as pending, and asks
 * for the stack to be recorded at the next safe point:
 *
 * - "hook" (Lua 5.3, 5.4): it arms a one-shot hook on the running
 *   coroutine (lua_sethook: count 1, call, return), which records the Lua
 *   stack there and gives the pending blocks to it: the next instruction of
 *   the function that allocated, or the return of the C function that did
 *   (string.rep). The running coroutine is known through coroutine.resume
 *   and coroutine.wrap replaced while profiling (ap:wrappers), by the
 *   coroutine tracker the CPU profiler uses too (profiler/cotrack.c).
 * - "signal" (LuaJIT: count hooks do not run in compiled code): it sends
 *   SIGPROF to this thread, the signal of jit.profile's timer; jit.profile
 *   stops the VM at its next safe point and its callback (Lua) records the
 *   stack and calls ap:attribute(index).
 *
 * Sampled blocks not freed yet are kept by address (allocprof/live.c):
 * what is live of them at stop is the in-use profile.
 *
 * The profiler lives in malloc'd memory, not in its userdata: if another
 * allocator was installed over ours meanwhile, ours cannot be taken out at
 * stop; it then stays, passing every call through, and its memory is never
 * freed (the state may call it until lua_close's last free). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "perfev.h"
#include "profiler/profiler.h"
#include "profiler/cotrack.h"
#include "allocprof.h"

#define ALLOCPROF_MT "perfev.allocprof"
#define MAX_FRAMES 512
#define HOOK_MASK (LUA_MASKCOUNT | LUA_MASKCALL | LUA_MASKRET)

enum ap_mode { AP_COUNT, AP_HOOK, AP_SIGNAL };

struct ap_pending {
  uintptr_t ptr;
  size_t size;
};

/* What the samples of one stack weigh. */
struct ap_vals {
  double objects, space;          /* scaled: the allocations they stand for */
  uint64_t samples, bytes;        /* the samples themselves */
};

struct allocprof {
  lua_Alloc prev_f;               /* the allocator under ours */
  void *prev_ud;
  enum ap_mode mode;
  int installed, running, busy;
  uint64_t period, rng;
  int64_t next;                   /* bytes until the next sample */
  uint64_t alloc_bytes, alloc_count, free_bytes, free_count, sampled, dropped;
  struct ap_pending *pend;
  size_t npend, cappend;
  struct ap_live live;
  struct ap_vals *vals;           /* by stack index + 1; [0]: no stack */
  size_t capvals;
  struct prof_agg agg;            /* "hook": the frames and stacks */
  lua_State *current, *armed;
  lua_Hook prev_hook;
  int prev_mask, prev_count;
  struct perfev_cochain chain;    /* "hook": the resumes in progress (cotrack.h) */
};

struct ap_ud {
  struct allocprof *a;
};

/* ---- the allocator ---- */

static void *ap_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

static void forget(struct allocprof *a, void *ptr, size_t osize)
{
  a->free_bytes += osize;
  a->free_count++;
  if (a->running)
    ap_live_del(&a->live, (uintptr_t)ptr);
}

static void arm(struct allocprof *a, lua_State *T);

static void sample(struct allocprof *a, void *r, size_t nsize)
{
  a->sampled++;
  if (a->npend == a->cappend) {
    size_t ncap = a->cappend ? a->cappend * 2 : 64;
    struct ap_pending *p = realloc(a->pend, ncap * sizeof *p);
    if (!p) {
      a->dropped++;
      return;
    }
    a->pend = p;
    a->cappend = ncap;
  }
  if (ap_live_put(&a->live, (uintptr_t)r, nsize) != 0) {
    a->dropped++;
    return;
  }
  a->pend[a->npend].ptr = (uintptr_t)r;
  a->pend[a->npend].size = nsize;
  a->npend++;
  if (a->mode == AP_HOOK) {
    if (a->current && a->armed != a->current)
      arm(a, a->current);
  } else if (a->mode == AP_SIGNAL) {
    /* jit.profile's handler: a sample at the next safe point. At every
     * sampled block: one sent while jit.profile cannot take a sample (in a
     * __gc finalizer LuaJIT holds its hooks) only counts there. raise
     * fails only for a bad signal number: were it to, the block would wait
     * for the next sample's stack */
    (void)raise(SIGPROF);
  }
}

static void *ap_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
  struct allocprof *a = (struct allocprof *)ud;
  void *r = a->prev_f(a->prev_ud, ptr, osize, nsize);
  if (nsize == 0) {
    if (ptr)
      forget(a, ptr, osize);
    return r;
  }
  if (!r)
    return r;                     /* failed: the old block stays */
  if (ptr && nsize <= osize) {
    /* shrunk: no allocation; a sampled block keeps its sample (LuaJIT's
     * collector shrinks its string table: counted as an allocation, it was
     * 16 MB "allocated" by a full collection) */
    a->free_bytes += osize - nsize;
    if (a->running && ap_live_shrink(&a->live, (uintptr_t)ptr, (uintptr_t)r, nsize) != 0)
      a->dropped++;
    return r;
  }
  if (ptr)
    forget(a, ptr, osize);        /* (when ptr is NULL, osize is the object's type) */
  if (a->busy)
    return r;                     /* the profiler's own (a stack being recorded) */
  a->alloc_bytes += nsize;
  a->alloc_count++;
  if (!a->running || a->mode == AP_COUNT)
    return r;
  a->next -= (int64_t)nsize;
  if (a->next > 0)
    return r;
  a->next = ap_next_sample(&a->rng, a->period);
  sample(a, r, nsize);
  return r;
}

/* ---- the stacks ---- */

static struct ap_vals *vals_at(struct allocprof *a, size_t idx)
{
  if (idx >= a->capvals) {
    size_t ncap = a->capvals ? a->capvals : 64;
    while (ncap <= idx)
      ncap *= 2;
    struct ap_vals *v = realloc(a->vals, ncap * sizeof *v);
    if (!v)
      return NULL;
    memset(v + a->capvals, 0, (ncap - a->capvals) * sizeof *v);
    a->vals = v;
    a->capvals = ncap;
  }
  return &a->vals[idx];
}

/* Gives the pending blocks to the stack of index idx (0: none known). */
static void assign(struct allocprof *a, size_t idx)
{
  struct ap_vals *v = vals_at(a, idx);
  if (!v) {
    idx = 0;
    v = vals_at(a, 0);
  }
  for (size_t i = 0; i < a->npend; i++) {
    const struct ap_pending *p = &a->pend[i];
    double s = ap_scale(p->size, a->period);
    if (v) {
      v->objects += s;
      v->space += s * (double)p->size;
      v->samples++;
      v->bytes += p->size;
    }
    struct ap_block *b = ap_live_get(&a->live, p->ptr);
    if (b && b->stack == AP_PENDING)
      b->stack = (uint32_t)idx;
  }
  a->npend = 0;
}

/* Records L's stack from level `from` (and its resumers') and gives it the
 * pending blocks. */
static void record_here(struct allocprof *a, lua_State *L, int from)
{
  const struct prof_walk w = { &a->agg, &a->chain, MAX_FRAMES, NULL, NULL };
  uint32_t ids[MAX_FRAMES];
  int cut;
  a->busy++;
  int n = prof_lua_stack(&w, L, from, ids, &cut);
  long sid = n >= 0 ? prof_agg_stack_id(&a->agg, ids, (uint32_t)n) : -1;
  assign(a, sid < 0 ? 0 : (size_t)sid + 1);
  a->busy--;
}

/* ---- the hook ---- */

static void ap_hook(lua_State *L, lua_Debug *ar);

static void arm(struct allocprof *a, lua_State *T)
{
  lua_Hook h = lua_gethook(T);
  if (h != ap_hook) {
    a->prev_hook = h;
    a->prev_mask = h ? lua_gethookmask(T) : 0;
    a->prev_count = h ? lua_gethookcount(T) : 0;
  }
  a->armed = T;
  lua_sethook(T, ap_hook, HOOK_MASK | a->prev_mask, 1);
}

static void disarm(struct allocprof *a, lua_State *T)
{
  if (a->armed != T)
    return;
  a->armed = NULL;
  lua_sethook(T, a->prev_hook, a->prev_mask, a->prev_count);
}

static struct allocprof *of_state(lua_State *L)
{
  void *ud = NULL;
  return lua_getallocf(L, &ud) == ap_alloc ? (struct allocprof *)ud : NULL;
}

static void ap_hook(lua_State *L, lua_Debug *ar)
{
  struct allocprof *a = of_state(L);
  if (!a) {                        /* another allocator over ours: we cannot find it */
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  lua_Hook ph = a->prev_hook;
  int pm = a->prev_mask, ev = ar->event;
  /* given back also where L is not the state armed: a coroutine created
   * while the hook was armed inherited it (Lua's rule) */
  if (a->armed == L)
    a->armed = NULL;
  lua_sethook(L, ph, pm, a->prev_count);
#ifdef LUA_HOOKTAILCALL
  int call = ev == LUA_HOOKCALL || ev == LUA_HOOKTAILCALL;
  int bit = ev == LUA_HOOKTAILCALL ? LUA_MASKCALL : 1 << ev;
#else
  int call = ev == LUA_HOOKCALL;
  int bit = 1 << ev;
#endif
  /* at a call the allocation was the caller's: the callee's frame is left out */
  if (a->npend && a->running)
    record_here(a, L, call ? 1 : 0);
  if (ph && (pm & bit))
    ph(L, ar);
}

/* ---- the coroutine wrappers ("hook", profiler/cotrack.c) ---- */

static void enter(void *owner, lua_State *co, lua_State *from)
{
  struct allocprof *a = (struct allocprof *)owner;
  if (a->npend)
    record_here(a, from, 1);
  disarm(a, from);
  perfev_cochain_push(&a->chain, co, from);
  a->current = co;
}

static void leave(void *owner, lua_State *co, lua_State *from)
{
  struct allocprof *a = (struct allocprof *)owner;
  if (!a->running || a->chain.depth == 0)
    return;                       /* stopped inside the coroutine */
  if (a->npend) {
    if (lua_status(co) == LUA_YIELD)
      record_here(a, co, 0);
    else
      record_here(a, from, 1);
  }
  disarm(a, co);
  perfev_cochain_pop(&a->chain);
  a->current = from;
}

/* Whether a resume is one the chain tracks. */
static void *tracking(void *ud)
{
  struct allocprof *a = ((struct ap_ud *)ud)->a;
  return a && a->running && perfev_cochain_room(&a->chain) ? a : NULL;
}

/* ---- the methods ---- */

static struct allocprof *check_ap(lua_State *L)
{
  struct ap_ud *u = (struct ap_ud *)perfev_self(L, ALLOCPROF_MT);
  if (!u)
    return NULL;
  if (!u->a)
    luaL_error(L, "perfev.alloc: the profiler is closed");
  return u->a;
}

/* Takes our allocator out when it is the state's, or when it is under
 * others of ours only (a perfev.frames' counter closed before a
 * perfev.alloc.counter() made after it): the one over it then calls the
 * one under it. Else (another allocator over ours) it stays, passing
 * through (a->installed stays set: its memory is never freed). Left in
 * the chain of a state, it was called by lua_close's last frees after
 * the core was unloaded: a crash at exit. */
static void uninstall(lua_State *L, struct allocprof *a)
{
  if (!a->installed)
    return;
  void *ud = NULL;
  lua_Alloc f = lua_getallocf(L, &ud);
  if (f == ap_alloc && ud == a) {
    lua_setallocf(L, a->prev_f, a->prev_ud);
    a->installed = 0;
    return;
  }
  while (f == ap_alloc) {
    struct allocprof *over = (struct allocprof *)ud;
    if (over->prev_f == ap_alloc && over->prev_ud == a) {
      over->prev_f = a->prev_f;
      over->prev_ud = a->prev_ud;
      a->installed = 0;
      return;
    }
    f = over->prev_f;
    ud = over->prev_ud;
  }
}

static void stop(lua_State *L, struct allocprof *a)
{
  if (!a->running)
    return;
  if (a->npend)
    assign(a, 0);
  a->running = 0;
  if (a->armed)
    disarm(a, a->armed);
  a->current = NULL;
  a->chain.depth = 0;
  uninstall(L, a);
}

static int l_start(lua_State *L)
{
  struct allocprof *a = check_ap(L);
  if (a->running)
    return luaL_error(L, "perfev.alloc: this profiler is running already");
  if (a->installed)
    return luaL_error(L, "perfev.alloc: this profiler's allocator could not be taken out "
                      "(another was installed over it): make a new one");
  a->prev_f = lua_getallocf(L, &a->prev_ud);
  a->next = ap_next_sample(&a->rng, a->period);
  a->current = L;
  a->chain.depth = 0;
  a->running = 1;
  a->installed = 1;
  lua_setallocf(L, ap_alloc, a);
  return 0;
}

static int l_stop(lua_State *L)
{
  stop(L, check_ap(L));
  return 0;
}

static int l_closed(lua_State *L)
{
  struct ap_ud *u = (struct ap_ud *)perfev_self(L, ALLOCPROF_MT);
  lua_pushboolean(L, !u || !u->a);
  return 1;
}

static int l_running(lua_State *L)
{
  lua_pushboolean(L, check_ap(L)->running);
  return 1;
}

/* ap:attribute(index): the pending blocks to stack index (>= 1), which
 * the Lua side keeps ("signal": jit.profile's callback). */
static int l_attribute(lua_State *L)
{
  struct allocprof *a = check_ap(L);
  lua_Integer idx = luaL_checkinteger(L, 2);
  luaL_argcheck(L, idx >= 1 && idx < (lua_Integer)UINT32_MAX, 2, "a stack index from 1");
  lua_pushnumber(L, (lua_Number)a->npend);
  assign(a, (size_t)idx);
  return 1;
}

static int l_pending(lua_State *L)
{
  lua_pushnumber(L, (lua_Number)check_ap(L)->npend);
  return 1;
}

/* ap:busy(flag): while set, allocations are counted, never sampled (the
 * profiler's own Lua work) */
static int l_busy(lua_State *L)
{
  struct allocprof *a = check_ap(L);
  a->busy = lua_toboolean(L, 2);
  return 0;
}

static void set_num(lua_State *L, const char *k, double v)
{
  lua_pushnumber(L, (lua_Number)v);
  lua_setfield(L, -2, k);
}

/* ap:counts(t) -> t: the totals into t (no allocation once t has them) */
static void push_counts(lua_State *L, const struct allocprof *a)
{
  set_num(L, "alloc_bytes", (double)a->alloc_bytes);
  set_num(L, "alloc_count", (double)a->alloc_count);
  set_num(L, "free_bytes", (double)a->free_bytes);
  set_num(L, "free_count", (double)a->free_count);
  set_num(L, "sampled", (double)a->sampled);
  set_num(L, "dropped", (double)a->dropped);
}

static int l_counts(lua_State *L)
{
  struct allocprof *a = check_ap(L);
  if (lua_istable(L, 2))
    lua_settop(L, 2);
  else
    lua_createtable(L, 0, 6);
  push_counts(L, a);
  return 1;
}

/* ap:read() -> { frames, stacks ("hook"), values = { [index] = { objects,
 * space, inuse_objects, inuse_space, samples, bytes } } (index 0: no stack
 * known), counts, period, live } */
static int l_read(lua_State *L)
{
  struct allocprof *a = check_ap(L);
  a->busy++;
  size_t n = a->capvals ? a->capvals : 1;
  double *inuse = calloc(2 * n, sizeof *inuse);
  if (!inuse) {
    a->busy--;
    return luaL_error(L, "perfev.alloc: out of memory");
  }
  size_t live = 0;
  for (size_t i = 0; i < a->live.cap; i++) {
    const struct ap_block *b = &a->live.slots[i];
    if (!b->ptr)
      continue;
    size_t idx = b->stack == AP_PENDING || b->stack >= n ? 0 : b->stack;
    double s = ap_scale(b->sampled, a->period);
    inuse[2 * idx] += s;
    inuse[2 * idx + 1] += s * (double)b->size;
    live++;
  }
  prof_agg_push(L, &a->agg);
  lua_newtable(L);
  for (size_t i = 0; i < n; i++) {
    struct ap_vals z = { 0, 0, 0, 0 };
    const struct ap_vals *v = i < a->capvals ? &a->vals[i] : &z;
    if (!v->samples && inuse[2 * i] == 0)
      continue;
    lua_createtable(L, 0, 6);
    set_num(L, "objects", v->objects);
    set_num(L, "space", v->space);
    set_num(L, "inuse_objects", inuse[2 * i]);
    set_num(L, "inuse_space", inuse[2 * i + 1]);
    set_num(L, "samples", (double)v->samples);
    set_num(L, "bytes", (double)v->bytes);
    lua_rawseti(L, -2, (lua_Integer)i);
  }
  free(inuse);
  lua_setfield(L, -2, "values");
  push_counts(L, a);
  set_num(L, "period", (double)a->period);
  set_num(L, "live", (double)live);
  set_num(L, "pending", (double)a->npend);
  a->busy--;
  return 1;
}

/* ap:wrappers(resume, wrap) -> resume', wrap' ("hook") */
static int l_wrappers(lua_State *L)
{
  static const struct perfev_cotrack track = { tracking, enter, leave };
  check_ap(L);
  return perfev_cotrack_wrappers(L, &track);
}

static int l_gc(lua_State *L)
{
  struct ap_ud *u = (struct ap_ud *)perfev_self(L, ALLOCPROF_MT);
  if (!u || !u->a)
    return 0;
  struct allocprof *a = u->a;
  stop(L, a);
  uninstall(L, a);
  if (a->installed)
    return 0;                     /* still called: left as it is, for good */
  u->a = NULL;
  prof_agg_free(&a->agg);
  ap_live_free(&a->live);
  free(a->pend);
  free(a->vals);
  free(a);
  return 0;
}

/* core.allocprof(period, mode[, seed]) -> profiler. period: bytes between
 * samples on average (1: every allocation); mode: "count" (totals only),
 * "hook" or "signal". */
static int l_new(lua_State *L)
{
  static const char *const modes[] = { "count", "hook", "signal", NULL };
  lua_Number period = luaL_checknumber(L, 1);
  int mode = luaL_checkoption(L, 2, NULL, modes);
  lua_Number seed = luaL_optnumber(L, 3, 0);
  luaL_argcheck(L, period >= 1 && period <= 9.0e15, 1, "a period of bytes from 1");
  struct ap_ud *u = (struct ap_ud *)perfev_newuserdata(L, sizeof *u);
  u->a = NULL;
  luaL_setmetatable(L, ALLOCPROF_MT);
  struct allocprof *a = calloc(1, sizeof *a);
  if (!a)
    return luaL_error(L, "perfev.alloc: out of memory");
  a->period = (uint64_t)period;
  a->mode = (enum ap_mode)mode;
  a->rng = seed > 0 ? (uint64_t)seed : (uint64_t)(uintptr_t)a ^ 0x9e3779b97f4a7c15ull;
  if (!a->rng)
    a->rng = 1;
  u->a = a;
  return 1;
}

int perfev_allocprof_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = { { "__gc", l_gc }, { "__close", l_gc }, { NULL, NULL } };
  static const luaL_Reg methods[] = {
    { "start", l_start }, { "stop", l_stop }, { "running", l_running }, { "read", l_read },
    { "counts", l_counts }, { "attribute", l_attribute }, { "pending", l_pending },
    { "busy", l_busy }, { "wrappers", l_wrappers }, { "close", l_gc }, { "closed", l_closed },
    { NULL, NULL }
  };
  perfev_class_register(L, ALLOCPROF_MT, meta, methods);
  lua_pushcfunction(L, l_new);
  lua_setfield(L, -2, "allocprof");
  return 0;
}
