/* ring:read(): an event's count read through its metadata page, without a
 * system call when the PMU lets user space read the counter (x86 rdpmc),
 * as perf_event_open(2) describes under cap_user_rdpmc; otherwise read(2).
 *
 * The page is read in three steps kept apart so that the arithmetic can be
 * tested on synthetic pages (core._selfread_compute): load() copies the
 * fields under the page's seqlock, reading the counter and the TSC inside
 * the loop through a source of values; compute() is pure arithmetic over
 * the copy; ring:read() chooses between it and read(2). */
#include <string.h>
#include "perfev.h"
#include "ring.h"

#define CAP_RDPMC (1ULL << 2)
#define CAP_TIME (1ULL << 3)
#define CAP_TIME_ZERO (1ULL << 4)
#define CAP_TIME_SHORT (1ULL << 5)

/* The fields of the page, as one pass of the seqlock loop saw them. */
struct snap {
  uint32_t index;
  int64_t offset;
  uint64_t enabled, running, caps;
  uint16_t pmc_width, time_shift;
  uint32_t time_mult;
  uint64_t time_offset, time_zero, time_cycles, time_mask;
  uint64_t pmc, cyc;   /* read in the loop when the caps say so; else 0 */
  int have_pmc, have_cyc;
};

/* Where the counter and the TSC come from: the instructions, or a test's
 * values. pmc or tsc NULL: this machine cannot read it. in_loop runs once
 * a pass, before lock is read again (the test moves lock there). */
struct source {
  uint64_t (*pmc)(uint32_t counter, void *ctx);
  uint64_t (*tsc)(void *ctx);
  void (*in_loop)(void *ctx);
  void *ctx;
};

#define LOAD(field) __atomic_load_n(&pg->field, __ATOMIC_RELAXED)

/* The man page's loop: retried while the kernel updated the page under us
 * (lock moved). Returns the number of passes. */
static unsigned load(const struct perf_event_mmap_page *pg, const struct source *src,
                     struct snap *s)
{
  unsigned passes = 0;
  uint32_t seq;
  do {
    passes++;
    seq = __atomic_load_n(&pg->lock, __ATOMIC_ACQUIRE);
    s->enabled = LOAD(time_enabled);
    s->running = LOAD(time_running);
    s->caps = LOAD(capabilities);
    s->time_offset = LOAD(time_offset);
    s->time_mult = LOAD(time_mult);
    s->time_shift = LOAD(time_shift);
    s->time_zero = LOAD(time_zero);
    s->time_cycles = LOAD(time_cycles);
    s->time_mask = LOAD(time_mask);
    s->have_cyc = (s->caps & CAP_TIME) && s->enabled != s->running && src->tsc;
    s->cyc = s->have_cyc ? src->tsc(src->ctx) : 0;
    s->index = LOAD(index);
    s->offset = LOAD(offset);
    s->pmc_width = LOAD(pmc_width);
    s->have_pmc = (s->caps & CAP_RDPMC) && s->index && src->pmc;
    s->pmc = s->have_pmc ? src->pmc(s->index - 1, src->ctx) : 0;
    if (src->in_loop)
      src->in_loop(src->ctx);
    /* the loads above before lock is read again */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
  } while (__atomic_load_n(&pg->lock, __ATOMIC_RELAXED) != seq);
  return passes;
}

/* What the page says, computed. */
struct value {
  uint64_t count;      /* offset + the sign-extended counter */
  uint64_t pmc;        /* the counter, sign-extended by pmc_width */
  uint64_t enabled, running;
  uint64_t cyc;        /* the TSC, corrected for a short counter */
  uint64_t delta;      /* ns since the kernel last updated the times */
  int user;            /* the count came from the counter: no read(2) needed */
  int extrapolated;    /* delta was added to the times */
};

/* cyc * mult >> shift, in the man page's quotient/remainder form, which
 * keeps the product in 64 bits. */
static uint64_t cyc_to_ns(uint64_t cyc, uint32_t mult, uint16_t shift)
{
  unsigned sh = shift & 63;
  uint64_t quot = cyc >> sh, rem = cyc & ((1ULL << sh) - 1);
  return quot * mult + ((rem * mult) >> sh);
}

static uint64_t sign_extend(uint64_t v, unsigned width)
{
  unsigned sh;
  if (width == 0 || width >= 64)
    return v;
  sh = 64 - width;
  return (uint64_t)((int64_t)(v << sh) >> sh);
}

/* A TSC narrower than 64 bits (cap_user_time_short) may have wrapped
 * since time_cycles: the man page's correction. */
static uint64_t correct_cyc(const struct snap *s, uint64_t cyc)
{
  if (s->caps & CAP_TIME_SHORT)
    return s->time_cycles + ((cyc - s->time_cycles) & s->time_mask);
  return cyc;
}

static void compute(const struct snap *s, struct value *v)
{
  v->count = (uint64_t)s->offset;
  v->enabled = s->enabled;
  v->running = s->running;
  v->user = s->have_pmc;
  v->pmc = s->have_pmc ? sign_extend(s->pmc, s->pmc_width) : 0;
  v->count += v->pmc;
  v->cyc = correct_cyc(s, s->cyc);
  v->delta = 0;
  v->extrapolated = s->have_cyc;
  if (s->have_cyc) {
    v->delta = s->time_offset + cyc_to_ns(v->cyc, s->time_mult, s->time_shift);
    v->enabled += v->delta;
    if (s->index)   /* running only while on a counter */
      v->running += v->delta;
  }
}

/* The hardware clock of a perf timestamp (cap_user_time_zero), by the man
 * page's division form: the inverse of time_zero + cyc_to_ns(cyc). */
static uint64_t time_to_cyc(uint64_t timestamp, const struct snap *s)
{
  uint64_t t = timestamp - s->time_zero, quot, rem;
  unsigned sh = s->time_shift & 63;
  if (s->time_mult == 0)
    return 0;
  quot = t / s->time_mult;
  rem = t % s->time_mult;
  return (quot << sh) + (rem << sh) / s->time_mult;
}

/* ---- the instructions ---- */

#if defined(__x86_64__)
static uint64_t hw_rdpmc(uint32_t counter, void *ctx)
{
  uint32_t lo, hi;
  (void)ctx;
  __asm__ volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(counter));
  return (uint64_t)hi << 32 | lo;
}

static uint64_t hw_rdtsc(void *ctx)
{
  uint32_t lo, hi;
  (void)ctx;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t)hi << 32 | lo;
}
static const struct source hardware = { hw_rdpmc, hw_rdtsc, NULL, NULL };
#else
/* Elsewhere the counter is not read from user space: read(2) always. */
static const struct source hardware = { NULL, NULL, NULL, NULL };
#endif

static void push_opt(lua_State *L, int has, uint64_t v)
{
  if (has)
    lua_pushinteger(L, (lua_Integer)v);
  else
    lua_pushnil(L);
}

/* ring:read() -> what ev:read() returns: count|false [, enabled, running].
 * From the counter when cap_user_rdpmc and index allow (the event counts
 * this thread, on a counter now); otherwise ev:read() itself. Valid for
 * self-monitoring events only, as the man page says of rdpmc. */
int perfev_ring_read(lua_State *L)
{
  struct perfev_ring *r = perfev_ring_self(L);
  const struct perfev_event *ev = perfev_ring_event(L, r);
  uint64_t fmt = ev->read_format;
  int has_e = (fmt & PERF_FORMAT_TOTAL_TIME_ENABLED) != 0;
  int has_r = (fmt & PERF_FORMAT_TOTAL_TIME_RUNNING) != 0;
  struct snap s;
  struct value v;
  if (!(fmt & PERF_FORMAT_GROUP)) {   /* the page has one counter, not a group's */
    load(r->page, &hardware, &s);
    compute(&s, &v);
  } else {
    v.user = 0;
  }
  if (!v.user) {
    lua_settop(L, 1);
    perfev_getiuservalue(L, 1);
    lua_getfield(L, -1, "event");
    lua_replace(L, 1);
    lua_settop(L, 1);
    return perfev_read(L);
  }
  if (has_r && v.running == 0)
    lua_pushboolean(L, 0);
  else   /* a time the read_format lacks never scales, as in ev:read() */
    lua_pushinteger(L, (lua_Integer)perfev_scale(v.count, has_e ? v.enabled : 0,
                                                 has_r ? v.running : 0));
  if (!has_e && !has_r)
    return 1;
  push_opt(L, has_e, v.enabled);
  push_opt(L, has_r, v.running);
  return 3;
}

/* ---- core._selfread_compute: the same code over a synthetic page ---- */

#define PAGE_FIELD(f) { #f, offsetof(struct perf_event_mmap_page, f), \
                        sizeof(((struct perf_event_mmap_page *)0)->f) }
static const struct page_field {
  const char *name;
  size_t off, size;
} page_fields[] = {
  PAGE_FIELD(lock), PAGE_FIELD(index), PAGE_FIELD(offset), PAGE_FIELD(time_enabled),
  PAGE_FIELD(time_running), PAGE_FIELD(capabilities), PAGE_FIELD(pmc_width),
  PAGE_FIELD(time_shift), PAGE_FIELD(time_mult), PAGE_FIELD(time_offset),
  PAGE_FIELD(time_zero), PAGE_FIELD(time_cycles), PAGE_FIELD(time_mask),
};

static void store_field(struct perf_event_mmap_page *pg, const struct page_field *f, uint64_t v)
{
  unsigned char *p = (unsigned char *)pg + f->off;
  uint16_t v16 = (uint16_t)v;
  uint32_t v32 = (uint32_t)v;
  if (f->size == 2)
    memcpy(p, &v16, 2);
  else if (f->size == 4)
    memcpy(p, &v32, 4);
  else
    memcpy(p, &v, 8);
}

/* Sets the page from the table at idx: the fields by name, the
 * capability bits by theirs; anything else is a mistake. */
static void fill_page(lua_State *L, int idx, struct perf_event_mmap_page *pg,
                      uint64_t *timestamp, int *has_timestamp)
{
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
    size_t i;
    int done = 0;
    for (i = 0; i < sizeof page_fields / sizeof page_fields[0] && !done; i++)
      if (strcmp(k, page_fields[i].name) == 0) {
        if (!lua_isinteger(L, -1))
          luaL_error(L, "_selfread_compute: field '%s' must be an integer", k);
        store_field(pg, &page_fields[i], (uint64_t)lua_tointeger(L, -1));
        done = 1;
      }
    for (i = 0; i < perfev_ring_ncaps && !done; i++)
      if (strcmp(k, perfev_ring_cap_names[i]) == 0) {
        if (lua_toboolean(L, -1))
          pg->capabilities |= 1ULL << i;
        else
          pg->capabilities &= ~(1ULL << i);
        done = 1;
      }
    if (!done && strcmp(k, "timestamp") == 0 && lua_isinteger(L, -1)) {
      *timestamp = (uint64_t)lua_tointeger(L, -1);
      *has_timestamp = done = 1;
    }
    if (!done)
      luaL_error(L, "_selfread_compute: unknown page field '%s'", k);
    lua_pop(L, 1);
  }
}

struct fake { struct perf_event_mmap_page *pg; uint64_t pmc, tsc; lua_Integer bumps; };

static uint64_t fake_pmc(uint32_t counter, void *ctx)
{
  (void)counter;
  return ((const struct fake *)ctx)->pmc;
}

static uint64_t fake_tsc(void *ctx)
{
  return ((const struct fake *)ctx)->tsc;
}

/* The kernel's update, as seen from the reader: lock moves mid-pass. */
static void fake_update(void *ctx)
{
  struct fake *f = (struct fake *)ctx;
  if (f->bumps > 0) {
    f->bumps--;
    __atomic_fetch_add(&f->pg->lock, 2, __ATOMIC_RELEASE);
  }
}

/* core._selfread_compute(fields, pmc, tsc [, bumps]) -> { count, pmc,
 * enabled, running, cyc, delta, scaled, user, extrapolated, passes, time,
 * cyc_of_timestamp }. Internal: for the specs, which check the arithmetic
 * against the man page's formulas without a PMU that allows rdpmc. bumps:
 * passes in which lock moves (the loop must retry each). */
static int l_selfread_compute(lua_State *L)
{
  struct perf_event_mmap_page pg;
  struct fake f;
  struct source src = { fake_pmc, fake_tsc, fake_update, &f };
  struct snap s;
  struct value v;
  uint64_t timestamp = 0;
  int has_timestamp = 0;
  unsigned passes;
  luaL_checktype(L, 1, LUA_TTABLE);
  memset(&pg, 0, sizeof pg);
  fill_page(L, 1, &pg, &timestamp, &has_timestamp);
  f.pg = &pg;
  f.pmc = (uint64_t)luaL_checkinteger(L, 2);
  f.tsc = (uint64_t)luaL_checkinteger(L, 3);
  f.bumps = luaL_optinteger(L, 4, 0);
  luaL_argcheck(L, f.bumps >= 0 && f.bumps < 1000, 4, "between 0 and 999");
  passes = load(&pg, &src, &s);
  compute(&s, &v);
  lua_createtable(L, 0, 12);
  perfev_set_u64(L, "count", v.count);
  perfev_set_u64(L, "pmc", v.pmc);
  perfev_set_u64(L, "enabled", v.enabled);
  perfev_set_u64(L, "running", v.running);
  perfev_set_u64(L, "cyc", v.cyc);
  perfev_set_u64(L, "delta", v.delta);
  perfev_set_u64(L, "scaled", perfev_scale(v.count, v.enabled, v.running));
  perfev_set_u64(L, "passes", passes);
  lua_pushboolean(L, v.user);
  lua_setfield(L, -2, "user");
  lua_pushboolean(L, v.extrapolated);
  lua_setfield(L, -2, "extrapolated");
  if (s.caps & CAP_TIME_ZERO) {
    /* the perf clock at the given TSC (corrected), whether or not the
     * loop needed to read it */
    perfev_set_u64(L, "time", s.time_zero + cyc_to_ns(correct_cyc(&s, f.tsc), s.time_mult,
                                               s.time_shift));
    if (has_timestamp)
      perfev_set_u64(L, "cyc_of_timestamp", time_to_cyc(timestamp, &s));
  }
  return 1;
}

int perfev_ring_read_open_lib(lua_State *L)
{
  lua_pushcfunction(L, l_selfread_compute);
  lua_setfield(L, -2, "_selfread_compute");
  return 0;
}
