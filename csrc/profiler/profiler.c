/* The Lua-function profiler's engine (perfev.profile, lua/perfev/profile.lua):
 * a sampling perf event on this thread delivers a real-time signal at each
 * overflow (fcntl F_SETOWN_EX to this thread, F_SETSIG, O_ASYNC,
 * wakeup_events = 1); the signal handler only arms a one-shot hook with
 * lua_sethook, which Lua documents as safe to call from a signal handler
 * (lua.c stops a script on SIGINT that way); the hook, in Lua context,
 * drains the event's ring for the samples' periods, records the Lua stack
 * weighted by them, and disarms. Between samples no hook runs.
 *
 * The hook is armed with COUNT (next instruction of a Lua function), RET
 * (a C function returning: a sample taken inside string.rep lands on
 * string.rep) and CALL (a function being entered: the sample belongs to
 * its caller, so the callee's frame is left out).
 *
 * Coroutines: Lua 5.3/5.4 hooks belong to one lua_State (coroutine), so the
 * handler arms the one running: the Lua layer replaces coroutine.resume and
 * coroutine.wrap while profiling with closures from p:wrappers()
 * (profiler/cotrack.c), which track the running coroutine and the chain of
 * resumers (p->chain), whose stacks are recorded under the coroutine's. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "perfev.h"
#include "profiler.h"
#include "cotrack.h"
#include "ring/ring.h"
#include "record/callchain.h"

#define PROFILER_MT "perfev.profiler"
#define MAX_FRAMES 512      /* per sample, all threads of the chain together */
#define MAX_NATIVE 256      /* native frames kept per sample (the innermost) */
#ifndef TRAP_PERF
#define TRAP_PERF 6                 /* si_code of attr.sigtrap (kernel 5.13), not in glibc 2.36 */
#endif
#define HOOK_MASK (LUA_MASKCOUNT | LUA_MASKCALL | LUA_MASKRET)

struct profiler {
  int fd;                             /* our own dup of the event's fd: the event
                                       * userdata may be closed under a running
                                       * profiler, this one is closed by __gc */
  struct perfev_ring *ring;           /* its ring (kept alive by the uservalue) */
  int signo, running, ref;
  int names;                          /* registry ref: function -> name found, or false */
  int sigtrap;                        /* attr.sigtrap: SIGTRAP, TRAP_PERF, si_perf_data */
  int native;                         /* samples carry the callchain (native = true) */
  uint64_t cookie;                    /* attr.sig_data: which sigtrap event is ours */
  struct sigaction old_action;        /* restored at stop */
  lua_State *owner;                   /* the state p:start() ran in */
  lua_State *_Atomic current;         /* the coroutine running now */
  lua_State *_Atomic armed;           /* the state our hook is set on, or NULL */
  lua_Hook prev_hook;                 /* what `armed` had before: restored, chained */
  int prev_mask, prev_count;
  struct perfev_cochain chain;        /* the resumes in progress (cotrack.h) */
  volatile sig_atomic_t oom;
  uint64_t signals, hooks, samples, lost, weight, unattributed, truncated;
  struct prof_agg agg;
  struct prof_agg taken;               /* what the last p:take() returned (swapped out) */
  struct prof_timeline timeline;      /* the samples in time order (p:timeline(n)) */
  struct prof_budget budget;          /* the bound on the profiler's own cost */
  volatile sig_atomic_t in_hook;      /* the hook charges the budget: the handler leaves it */
  _Atomic uint64_t arm_ns;            /* the handler's arming, CPU ns not charged yet */
  uint64_t arm_cost;                  /* and charged so far (p:read().arm_cost) */
};

/* The profiler running on this thread. A signal handler receives no
 * context of ours, and the overflow signal goes to this thread alone
 * (F_OWNER_TID): a thread-local pointer is the one way from the handler to
 * the lua_State. Set by p:start(), cleared by p:stop(); one per thread is
 * also what makes a second profiler on the same thread an error. */
/* initial-exec: a fixed offset from the thread pointer, resolved at load
 * time from glibc's static TLS reserve for dlopen'ed modules. The default
 * (global-dynamic) model would call __tls_get_addr from the signal handler
 * and make core.so need ld-linux.so. */
static _Thread_local struct profiler *active __attribute__((tls_model("initial-exec")));

static void on_hook(lua_State *L, lua_Debug *ar);

/* Sets our one-shot hook on T, keeping what T had to restore and chain.
 * Called from the signal handler and from the coroutine wrappers (where a
 * signal may interrupt it: every step is idempotent). */
static void arm(struct profiler *p, lua_State *T)
{
  lua_Hook h = lua_gethook(T);
  if (h != on_hook) {
    p->prev_hook = h;
    p->prev_mask = h ? lua_gethookmask(T) : 0;
    p->prev_count = h ? lua_gethookcount(T) : 0;
  }
  atomic_store(&p->armed, T);
  lua_sethook(T, on_hook, HOOK_MASK | p->prev_mask, 1);
}

/* Gives T back the hook it had before arm (the user's, or none). */
static void restore_hook(const struct profiler *p, lua_State *T)
{
  lua_sethook(T, p->prev_hook, p->prev_mask, p->prev_count);
}

/* si_perf_data, which glibc's siginfo_t does not name: the long after
 * si_addr (the kernel's asm-generic/siginfo.h, _sigfault._perf._data). */
static unsigned long perf_data(const siginfo_t *si)
{
  unsigned long v;
  memcpy(&v, (const char *)&si->si_addr + sizeof(void *), sizeof v);
  return v;
}

/* The signals not charged yet. p:take() and p:reset() zero both counts
 * (swap_out); a signal between the two stores leaves charged_signals
 * ahead of p->signals: then all of p->signals, never a wrapped difference. */
static uint64_t uncharged(const struct profiler *p)
{
  uint64_t done = p->budget.charged_signals;
  return p->signals >= done ? p->signals - done : p->signals;
}

/* Charges the budget with the signals not charged yet and cost ns more
 * (the hook's own time, the arming's), at now. */
static void charge(struct profiler *p, uint64_t cost, uint64_t now)
{
  uint64_t armed = atomic_exchange(&p->arm_ns, 0);
  p->arm_cost += armed;   /* charge() never nests: the handler leaves it to a running hook */
  cost += armed;
  uint64_t n = uncharged(p);
  p->budget.charged_signals = p->signals;
  prof_budget_charge(&p->budget, cost + n * (p->budget.signal_ns + p->budget.irq_ns), now);
}

/* Signals that come without a hook between them (a real-time signal per
 * overflow is queued: where delivering one costs more CPU time than the
 * period, no Lua instruction runs between them, so no hook) are charged
 * by the handler, every SIGNALS_CHARGED of them. */
#define SIGNALS_CHARGED 64

/* Whether the signal is this profiler's event's, else hands it on. */
static int ours(const struct profiler *p, int sig, siginfo_t *si, void *uc)
{
  if (!p->sigtrap)                /* F_SETSIG puts the fd in si_fd */
    return si->si_fd == p->fd;
  if (si->si_code == TRAP_PERF && perf_data(si) == (unsigned long)p->cookie)
    return 1;
  /* somebody else's SIGTRAP: to the handler that was there */
  if (p->old_action.sa_flags & SA_SIGINFO)
    p->old_action.sa_sigaction(sig, si, uc);
  else if (p->old_action.sa_handler != SIG_DFL && p->old_action.sa_handler != SIG_IGN)
    p->old_action.sa_handler(sig);
  return 0;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
  struct profiler *p = active;
  if (!p || sig != p->signo)       /* after stop */
    return;
  int saved = errno;
  if (!ours(p, sig, si, uc)) {
    errno = saved;
    return;
  }
  p->signals++;
  /* Arming costs what lua_sethook costs: on Lua 5.4 it marks every Lua
   * frame of T's stack (settraps), a cost that grows with the depth of the
   * stack, not with what a sample records (150,000 frames deep: a
   * millisecond, more than the period; the thread did nothing but take
   * signals). So a hook armed already is not armed again, and the arming's
   * CPU time is charged to the budget, which lowers the rate to keep the
   * profiler within its share, however deep the stack. */
  lua_State *T = atomic_load(&p->current);
  if (T && atomic_load(&p->armed) != T) {
    uint64_t t0 = prof_budget_now();
    arm(p, T);
    uint64_t t1 = prof_budget_now();
    if (t1 > t0)
      atomic_fetch_add(&p->arm_ns, t1 - t0);
  }
  if (!p->in_hook && uncharged(p) >= SIGNALS_CHARGED)
    charge(p, 0, prof_budget_now());
  errno = saved;
}

/* ---- the ring: the samples' periods (sample_type is PERIOD alone) ---- */

/* Sums the periods of the samples ring r holds (sample_type PERIOD alone)
 * and consumes them; counts the samples in *n and adds the records lost to
 * *lost. Shared by the hook engine and LuaJIT's (core.profiler_drain). */
uint64_t prof_ring_periods(struct perfev_ring *r, uint64_t *n, uint64_t *lost)
{
  struct perfev_ring_walk w;
  struct perf_event_header h;
  uint64_t w_sum = 0, v;
  *n = 0;
  if (!r->page)               /* the ring was closed first (finalizers at lua_close) */
    return 0;
  perfev_ring_walk_init(&w, r, perfev_ring_head(r));
  for (; perfev_ring_walk_next(&w, &h) == PERFEV_WALK_RECORD; w.pos += h.size) {
    if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof h + 8) {
      perfev_ring_walk_copy(&w, w.pos + sizeof h, &v, 8);
      w_sum += v;
      (*n)++;
    } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof h + 16) {
      perfev_ring_walk_copy(&w, w.pos + sizeof h + 8, &v, 8);
      *lost += v;
    }
  }
  perfev_ring_consume(r, w.pos);
  return w_sum;
}

/* The weight of the stack recorded now: the periods the ring holds. A hook
 * that comes late (a long C call) gets all the samples taken meanwhile. */
static uint64_t drain(struct profiler *p, uint64_t *nsamples)
{
  uint64_t w = prof_ring_periods(p->ring, nsamples, &p->lost);
  if (*nsamples && w / *nsamples != prof_budget_period(&p->budget, w / *nsamples))
    w = *nsamples * prof_budget_period(&p->budget, w / *nsamples);
  p->samples += *nsamples;
  return w;
}

/* ---- the hook: the stack of the sample ---- */

/* Whether the value at the top of T is the function at `fn`; pops it. */
static int pop_is(lua_State *T, int fn)
{
  int same = lua_rawequal(T, -1, fn);
  lua_pop(T, 1);
  return same;
}

/* A name for the function at the top of T (frame lv), whose call gave none
 * (called from C: a sort comparator, a pcall'd function): the local or
 * upvalue of a caller, up to NAME_LEVELS levels up, that holds it. Cached
 * per function (p->names, weak keys) so that the search is done once.
 * Pushes the name and returns it, or pushes nothing and returns NULL. */
#define NAME_LEVELS 64
static const char *find_name(const struct profiler *p, lua_State *T, int lv)
{
  if (!lua_checkstack(T, 6))
    return NULL;
  int fn = lua_gettop(T);
  lua_rawgeti(T, LUA_REGISTRYINDEX, p->names);
  lua_pushvalue(T, fn);
  lua_rawget(T, -2);
  if (lua_type(T, -1) == LUA_TSTRING) {
    lua_remove(T, -2);
    return lua_tostring(T, -1);
  }
  int cached = lua_type(T, -1) == LUA_TBOOLEAN;
  lua_pop(T, 1);
  const char *found = NULL;
  lua_Debug c;
  /* the outermost callers first: a module's local names a function
   * better than the parameter of a function it was passed to */
  int top = lv;
  while (!cached && top < lv + NAME_LEVELS && lua_getstack(T, top + 1, &c))
    top++;
  for (int up = top; !cached && !found && up > lv && lua_getstack(T, up, &c); up--) {
    const char *nm;
    for (int i = 1; !found && (nm = lua_getlocal(T, &c, i)) != NULL; i++)
      if (pop_is(T, fn) && nm[0] != '(')
        found = nm;
    if (found || !lua_getinfo(T, "f", &c))
      continue;
    for (int i = 1; !found && (nm = lua_getupvalue(T, -1, i)) != NULL; i++)
      if (pop_is(T, fn) && nm[0])
        found = nm;
    lua_pop(T, 1);
  }
  if (!cached) {
    lua_pushvalue(T, fn);
    if (found)
      lua_pushstring(T, found);
    else
      lua_pushboolean(T, 0);
    lua_rawset(T, -3);
  }
  lua_pop(T, 1);                        /* the cache */
  if (!found)
    return NULL;
  lua_pushstring(T, found);
  return lua_tostring(T, -1);
}

/* The name of the C function at the top of T when it is one of the
 * coroutine wrappers (cotrack.c), whatever the call named it; else `name`.
 * Pops the function. */
static const char *wrapper_name(lua_State *T, const char *name)
{
  const char *w = perfev_cotrack_name(lua_tocfunction(T, -1));
  lua_pop(T, 1);
  return w ? w : name;
}

/* A frame's name (prof_walk.name): a Lua function's that its call gave
 * none found by find_name, the wrappers' as the user called them. */
static const char *frame_name(void *ud, lua_State *T, int lv, lua_Debug *d, int *pushed)
{
  const char *name = d->name;
  if (!name && d->what[0] == 'L' && lua_checkstack(T, 1) && lua_getinfo(T, "f", d)) {
    name = find_name((const struct profiler *)ud, T, lv);
    *pushed = name ? 2 : 1;
  } else if (d->what[0] == 'C' && lua_checkstack(T, 1) && lua_getinfo(T, "f", d)) {
    name = wrapper_name(T, name);
  }
  return name;
}

/* The Lua stack of the sample into ids, root first (luastack.c); -1 when
 * out of memory; *cut: whether it was cut at MAX_FRAMES (the caller
 * counts the samples it stands for). */
static int lua_stack(struct profiler *p, lua_State *L, int from, uint32_t *ids, int *cut)
{
  const struct prof_walk w = { &p->agg, &p->chain, MAX_FRAMES, frame_name, p };
  return prof_lua_stack(&w, L, from, ids, cut);
}

/* Now on CLOCK_MONOTONIC, ns: a sample's time in the timeline (the
 * clock of core.clock_ns(), which perfev.frames marks frames with). */
static uint64_t now_ns(void)
{
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void record(struct profiler *p, lua_State *L, int from, uint64_t w, uint64_t nsamples)
{
  uint32_t ids[MAX_FRAMES];
  int cut = 0;
  int n = lua_stack(p, L, from, ids, &cut);
  if (n < 0 || prof_agg_stack(&p->agg, ids, (uint32_t)n, w, nsamples) < 0) {
    p->oom = 1;
    return;
  }
  /* every sample this record stands for (signals that came before the
   * hook ran are one record): counted 1, a loaded machine's coalesced
   * samples made a cut stack look uncut (90 of 100+) */
  if (cut)
    p->truncated += nsamples;
  p->weight += w;
  if (p->timeline.cap)
    prof_timeline_add(&p->timeline, &p->agg, ids, (uint32_t)n, now_ns(), w, nsamples);
}

/* ---- native = true: each sample's callchain under the Lua stack ---- */

/* Appends the callchain of the sample at ring position pos (after its
 * period) to ids[n..], outermost first, as native frames ('u' user, 'k'
 * kernel; the PERF_CONTEXT_* markers say which). Returns the new count or
 * -1 when out of memory. */
static int native_frames(struct profiler *p, const struct perfev_ring_walk *w, uint64_t pos,
                         uint64_t end, uint32_t *ids, int n)
{
  uint64_t nr, words[2 * MAX_NATIVE], ip;
  struct perfev_chain c;
  uint32_t inner[MAX_NATIVE];           /* innermost first, as the kernel gives them */
  int m = 0, kind;
  char space = 'k';
  if (pos + 8 > end)
    return n;
  perfev_ring_walk_copy(w, pos, &nr, 8);
  if (nr > (end - pos - 8) / 8)
    nr = (end - pos - 8) / 8;
  if (nr > 2 * MAX_NATIVE)              /* room for MAX_NATIVE frames and their markers */
    nr = 2 * MAX_NATIVE;
  perfev_ring_walk_copy(w, pos + 8, words, (size_t)nr * 8);
  perfev_chain_init(&c, (const unsigned char *)words, nr, 0);
  while (m < MAX_NATIVE && (kind = perfev_chain_next(&c, &ip)) != PERFEV_CHAIN_END) {
    if (kind == PERFEV_CHAIN_MARKER) {
      space = ip == (uint64_t)PERF_CONTEXT_USER ? 'u' : 'k';
      continue;
    }
    struct prof_key k = { NULL, NULL, -1, -1, space, ip };
    long id = prof_agg_frame(&p->agg, &k);
    if (id < 0)
      return -1;
    inner[m++] = (uint32_t)id;
  }
  while (m > 0)
    ids[n++] = inner[--m];
  return n;
}

/* The hook of a profiler with native = true: one stack per sample, the
 * Lua stack (the same for all the samples the ring holds now) with the
 * sample's own callchain under it. */
static void record_native(struct profiler *p, lua_State *L, int from)
{
  struct perfev_ring_walk w;
  struct perf_event_header h;
  uint32_t ids[MAX_FRAMES + MAX_NATIVE];
  int base = -2;                        /* the Lua stack: read at the first sample */
  int cut = 0;
  uint64_t when = p->timeline.cap ? now_ns() : 0;
  uint64_t v;
  if (!p->ring->page)
    return;
  perfev_ring_walk_init(&w, p->ring, perfev_ring_head(p->ring));
  for (; perfev_ring_walk_next(&w, &h) == PERFEV_WALK_RECORD; w.pos += h.size) {
    if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof h + 8) {
      perfev_ring_walk_copy(&w, w.pos + sizeof h, &v, 8);
      v = prof_budget_period(&p->budget, v);
      if (base == -2)
        base = lua_stack(p, L, from, ids, &cut);
      int n = base < 0 ? -1 : native_frames(p, &w, w.pos + sizeof h + 8, w.pos + h.size, ids, base);
      if (n < 0 || prof_agg_stack(&p->agg, ids, (uint32_t)n, v, 1) < 0) {
        p->oom = 1;
        break;
      }
      if (p->timeline.cap)
        prof_timeline_add(&p->timeline, &p->agg, ids, (uint32_t)n, when, v, 1);
      p->weight += v;
      p->samples++;
      p->truncated += (uint64_t)cut;
    } else if (h.type == PERF_RECORD_LOST && h.size >= sizeof h + 16) {
      perfev_ring_walk_copy(&w, w.pos + sizeof h + 8, &v, 8);
      p->lost += v;
    }
  }
  perfev_ring_consume(p->ring, w.pos);
  if (base != -2)
    p->hooks++;
}

static int event_mask(int event)
{
#ifdef LUA_HOOKTAILCALL
  if (event == LUA_HOOKTAILCALL)
    return LUA_MASKCALL;
#endif
  return 1 << event;
}

static void on_hook(lua_State *L, lua_Debug *ar)
{
  struct profiler *p = active;
  if (!p) {                       /* left on a coroutine by a stopped profiler */
    lua_sethook(L, NULL, 0, 0);
    return;
  }
  /* disarm first: a signal from here on arms the hook again */
  lua_State *expected = L;
  int mine = atomic_compare_exchange_strong(&p->armed, &expected, NULL);
#if PERFEV_LUAJIT
  /* LuaJIT's hooks are global: armed on one coroutine, the hook runs in
   * whichever runs next (a request's coroutine that C code resumed) */
  if (!mine && expected)
    mine = atomic_compare_exchange_strong(&p->armed, &expected, NULL);
#endif
  lua_Hook chained = p->prev_hook;
  int chained_mask = p->prev_mask;
  restore_hook(p, L);
  if (mine && !p->oom) {
    p->in_hook = 1;
    atomic_signal_fence(memory_order_seq_cst);
    uint64_t t0 = prof_budget_now();
    int callee = ar->event != LUA_HOOKRET && ar->event != LUA_HOOKCOUNT &&
                 ar->event != LUA_HOOKLINE;
    if (p->native) {
      record_native(p, L, callee ? 1 : 0);
    } else {
      uint64_t n, w = drain(p, &n);
      if (w) {
        p->hooks++;
        record(p, L, callee ? 1 : 0, w, n);
      }
    }
    uint64_t t1 = prof_budget_now();
    charge(p, t1 > t0 ? t1 - t0 : 0, t1);
    atomic_signal_fence(memory_order_seq_cst);
    p->in_hook = 0;
  }
  /* the user's hook, for the events it asked for (last: it may raise) */
  if (chained && (chained_mask & event_mask(ar->event)))
    chained(L, ar);
}

/* ---- start and stop ---- */

static struct profiler *check_profiler(lua_State *L)
{
  return (struct profiler *)perfev_self(L, PROFILER_MT);
}

/* A real-time signal nobody handles: its disposition is SIG_DFL. */
static int free_signal(int want)
{
  for (int s = want ? want : SIGRTMIN + 8; s <= SIGRTMAX; s++) {
    struct sigaction sa;
    if (sigaction(s, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL)
      return s;
    if (want)
      break;
  }
  return -1;
}

/* The first touch of some pages faults on each touch while a signal is
 * pending: the vDSO's vvar pages (read by clock_gettime) and the ring's
 * metadata page (written as data_tail moves). With a page-faults event
 * routed as an asynchronous signal (period 1), such a fault is counted,
 * signalled and taken again after the handler, counted and signalled
 * again, without end. The thread never got past its first
 * clock_gettime(CLOCK_MONOTONIC), or the first data_tail its sampler
 * stored (a KVM guest on kvm-clock, Linux 6.1; a plain C program does the
 * same; sigtrap's signal, sent once the fault is done, does not). So those
 * pages, and the ring's data pages, are touched once before a signal is
 * routed. */
static void warm_pages(const struct perfev_ring *r)
{
  struct timespec ts;
  (void)clock_gettime(CLOCK_MONOTONIC, &ts);   /* the vvar pages every vDSO clock reads */
  long page = sysconf(_SC_PAGESIZE);
  if (!r || !r->page)
    return;
  for (size_t off = 0; off < r->map_size; off += page > 0 ? (size_t)page : 4096)
    (void)((const volatile unsigned char *)r->page)[off];
  if (!r->overwrite)   /* a writable metadata page: its first write */
    __atomic_store_n(&r->page->data_tail, __atomic_load_n(&r->page->data_tail, __ATOMIC_ACQUIRE),
                     __ATOMIC_RELEASE);
}

/* Routes the event's overflow signal to this thread (the pages of ring r,
 * if any, touched first). 0 or an errno. */
static int route_signal(int fd, int signo, const struct perfev_ring *r)
{
  struct f_owner_ex owner = { F_OWNER_TID, gettid() };
  warm_pages(r);
  if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, signo) != 0)
    return errno;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_ASYNC) != 0)
    return errno;
  return 0;
}

/* Stops the signals and takes those already queued, with the handler still
 * ours (after it is gone, a queued real-time signal would kill the process).
 * Where the signals could not be stopped (the event still enabled, or still
 * routed), our handler stays: with no profiler active it ignores them. */
static int quiesce(struct profiler *p)
{
  int err = 0, stopped = 1;
  if (ioctl(p->fd, PERF_EVENT_IOC_DISABLE, 0) != 0) {
    err = errno;
    stopped = 0;
  }
  int fl = fcntl(p->fd, F_GETFL);
  if (fl < 0 || (!p->sigtrap && fcntl(p->fd, F_SETFL, fl & ~O_ASYNC) != 0)) {
    err = err ? err : errno;
    stopped = stopped && p->sigtrap;   /* sigtrap's signal stops with the event */
  }
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, p->signo);
  if (pthread_sigmask(SIG_BLOCK, &set, &old) != 0)
    return err ? err : EINVAL;
  struct timespec zero = { 0, 0 };
  while (sigtimedwait(&set, NULL, &zero) == p->signo)
    ;
  if (stopped && sigaction(p->signo, &p->old_action, NULL) != 0)
    err = err ? err : errno;
  if (pthread_sigmask(SIG_SETMASK, &old, NULL) != 0)
    err = err ? err : EINVAL;
  return err;
}

/* Undoes start: signals, hooks, the thread-local pointer, the anchor. */
static int stop(lua_State *L, struct profiler *p)
{
  if (!p->running)
    return 0;
  int err = quiesce(p);
  lua_State *T = atomic_exchange(&p->armed, NULL);
  if (T && lua_gethook(T) == on_hook)
    restore_hook(p, T);
  uint64_t n;
  p->unattributed += drain(p, &n);
  p->running = 0;
  p->chain.depth = 0;
  atomic_store(&p->current, NULL);
  if (active == p)
    active = NULL;
  luaL_unref(L, LUA_REGISTRYINDEX, p->ref);
  p->ref = LUA_NOREF;
  return err;
}

static int fail_errno(lua_State *L, int err, const char *what)
{
  return luaL_error(L, "perfev.profile: %s: %s", what, strerror(err));
}

/* p:start() -> p. Raises when a profiler runs on this thread already. */
static int l_start(lua_State *L)
{
  struct profiler *p = check_profiler(L);
  if (p->running)
    return luaL_error(L, "perfev.profile: this profiler is running already");
  if (active)
    return luaL_error(L, "perfev.profile: a profiler is running on this thread already "
                         "(stop it first: one per thread)");
  if (!p->ring->page)
    return luaL_error(L, "perfev.profile: the event's ring is closed");
  prof_budget_start(&p->budget, p->ring);   /* before our handler is set: it sends signals */
  p->in_hook = 0;
  int want = perfev_int_arg(L, 2, 0, "perfev.profile: start", "signal");
  int signo = p->sigtrap ? SIGTRAP : free_signal(want);
  if (signo < 0)
    return want ? luaL_error(L, "perfev.profile: signal %d is in use (it has a handler)", want)
                : luaL_error(L, "perfev.profile: no free real-time signal");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, &p->old_action) != 0)
    return fail_errno(L, errno, "sigaction");
  p->signo = signo;
  p->owner = L;
  p->chain.depth = 0;
  atomic_store(&p->current, L);
  atomic_store(&p->armed, NULL);
  p->prev_hook = NULL;
  p->prev_mask = p->prev_count = 0;
  lua_pushvalue(L, 1);
  p->ref = luaL_ref(L, LUA_REGISTRYINDEX);   /* alive while running, whatever the caller keeps */
  active = p;
  p->running = 1;
  int err = p->sigtrap ? 0 : route_signal(p->fd, signo, p->ring);
  if (!err && ioctl(p->fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
    err = errno;
  if (err) {
    stop(L, p);
    return fail_errno(L, err, "arming the event's signal");
  }
  lua_settop(L, 1);
  return 1;
}

/* p:stop() -> p (a no-op when stopped). */
static int l_stop(lua_State *L)
{
  struct profiler *p = check_profiler(L);
  int err = stop(L, p);
  if (err)
    return fail_errno(L, err, "stop");
  lua_settop(L, 1);
  return 1;
}

/* p:read() -> { frames = { {name, source, linedefined, line, what} ... },
 *               stacks = { {frame ids, root first; weight, samples} ... },
 *               signals, hooks, samples, lost, weight, unattributed, truncated, signal,
 *               arm_cost (CPU ns the signal handler spent arming the hook) } */
static void push_read(lua_State *L, const struct profiler *p, const struct prof_agg *agg)
{
  prof_agg_push(L, agg);
  perfev_set_u64(L, "signals", p->signals);
  perfev_set_u64(L, "hooks", p->hooks);
  perfev_set_u64(L, "samples", p->samples);
  perfev_set_u64(L, "lost", p->lost);
  perfev_set_u64(L, "weight", p->weight);
  perfev_set_u64(L, "unattributed", p->unattributed);
  perfev_set_u64(L, "truncated", p->truncated);
  perfev_set_u64(L, "arm_cost", p->arm_cost);
  perfev_set_u64(L, "signal", (uint64_t)p->signo);
  prof_budget_push(L, &p->budget);
}

static int l_read(lua_State *L)
{
  struct profiler *p = check_profiler(L);
  if (p->oom)
    return luaL_error(L, "perfev.profile: out of memory while recording stacks");
  push_read(L, p, &p->agg);
  return 1;
}

/* Zeroes the counts and hands the aggregation over to *out (p's own is
 * left empty): what p:reset() drops and p:take() returns. */
static void swap_out(struct profiler *p, struct prof_agg *out)
{
  *out = p->agg;
  memset(&p->agg, 0, sizeof p->agg);
  prof_timeline_forget(&p->timeline);     /* the profile's frame ids start again */
  p->signals = p->hooks = p->samples = p->lost = p->weight = p->unattributed = p->truncated = 0;
  p->arm_cost = 0;
  /* the budget's count of the signals it charged restarts with p->signals:
   * left as it was, the next charge's p->signals - charged_signals wrapped
   * around (2^64 signals' cost) and lowered the rate to 0 Hz (a period of
   * seconds) at the next window after a p:take() */
  p->budget.charged_signals = 0;
  p->oom = 0;
}

/* p:reset() -> p: the stacks and counts read so far are dropped (after a
 * p:read() while running: the next read gives the samples since). */
static int l_reset(lua_State *L)
{
  struct profiler *p = check_profiler(L);
  struct prof_agg old;
  swap_out(p, &old);
  prof_agg_free(&old);
  lua_settop(L, 1);
  return 1;
}

/* p:take() -> what p:read() gives, and p starts afresh: the stacks and
 * counts are swapped out before the tables are built, so a hook that runs
 * meanwhile (a finalizer run by the allocation of those tables) records
 * into the next take, never into one being read or dropped. The stacks
 * taken stay in p->taken until the next take or __gc (also if building
 * the tables raises). */
static int l_take(lua_State *L)
{
  struct profiler *p = check_profiler(L);
  prof_agg_free(&p->taken);
  struct profiler was = *p;       /* the counts, before they are zeroed */
  swap_out(p, &p->taken);
  if (was.oom) {
    prof_agg_free(&p->taken);
    return luaL_error(L, "perfev.profile: out of memory while recording stacks");
  }
  push_read(L, &was, &p->taken);
  return 1;
}

/* p:discard() -> p: the samples the ring holds, not recorded yet, are
 * counted as unattributed (p:pause(): taken before it, their stack is
 * gone; the next hook would give them to whatever runs after resume). */
static int l_discard(lua_State *L)
{
  struct profiler *p = check_profiler(L);
  uint64_t n;
  p->unattributed += drain(p, &n);
  lua_settop(L, 1);
  return 1;
}

/* p:timeline(n) -> p: the latest n samples are kept in time order, each
 * with its time, weight and stack (0: none; what was kept is dropped). */
static int l_timeline(lua_State *L)
{
  struct profiler *p = check_profiler(L);
  lua_Integer n = luaL_checkinteger(L, 2);
  if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(uint64_t))
    return luaL_argerror(L, 2, "a number of samples, 0 or more");
  if (prof_timeline_init(&p->timeline, (size_t)n) != 0)
    return luaL_error(L, "perfev.profile: out of memory for a timeline of %d samples", (int)n);
  lua_settop(L, 1);
  return 1;
}

/* p:timeline_read() -> { frames, stacks, time, stack, weight, samples, n,
 * count, dropped, capacity, oom } (see profiler_timeline.c) */
static int l_timeline_read(lua_State *L)
{
  prof_timeline_push(L, &check_profiler(L)->timeline);
  return 1;
}

static int l_running(lua_State *L)
{
  lua_pushboolean(L, check_profiler(L)->running);
  return 1;
}

static int l_gc(lua_State *L)
{
  struct profiler *p = check_profiler(L);
  if (!p)   /* __gc given another self (perfev_self) */
    return 0;
  stop(L, p);
  prof_agg_free(&p->agg);
  prof_agg_free(&p->taken);
  prof_timeline_free(&p->timeline);
  luaL_unref(L, LUA_REGISTRYINDEX, p->names);
  p->names = LUA_NOREF;
  if (p->fd >= 0) {
    close(p->fd);
    p->fd = -1;
  }
  return 0;
}

/* ---- the coroutine wrappers (cotrack.c) ---- */

static void enter(void *owner, lua_State *co, lua_State *from)
{
  struct profiler *p = (struct profiler *)owner;
  perfev_cochain_push(&p->chain, co, from);
  atomic_store(&p->current, co);
  lua_State *expected = from;    /* a sample pending in the resumer: take it along */
  if (atomic_compare_exchange_strong(&p->armed, &expected, NULL)) {
    restore_hook(p, from);
    arm(p, co);
  }
}

static void leave(void *owner, lua_State *co, lua_State *from)
{
  struct profiler *p = (struct profiler *)owner;
  perfev_cochain_pop(&p->chain);
  atomic_store(&p->current, from);
  lua_State *expected = co;      /* a sample pending in the coroutine: to the resumer */
  if (atomic_compare_exchange_strong(&p->armed, &expected, NULL)) {
    restore_hook(p, co);
    arm(p, from);
  }
}

/* Whether a resume of co is one the chain tracks. */
static void *tracking(void *ud)
{
  struct profiler *p = (struct profiler *)ud;
  return p->running && perfev_cochain_room(&p->chain) && active == p ? p : NULL;
}

/* p:wrappers(resume, wrap) -> resume', wrap': coroutine.resume and
 * coroutine.wrap that keep track of the running coroutine. */
static int l_wrappers(lua_State *L)
{
  static const struct perfev_cotrack track = { tracking, enter, leave };
  check_profiler(L);
  return perfev_cotrack_wrappers(L, &track);
}

/* core.profiler(event, ring[, bound]) -> profiler. The event must sample
 * PERIOD alone, the ring be its own; bound: the share of the thread's CPU
 * time the profiler may take (profiler/budget.c), none when absent. */
static int l_new(lua_State *L)
{
  struct perfev_event *ev = perfev_event_check(L, 1);
  struct perfev_ring *r = (struct perfev_ring *)luaL_checkudata(L, 2, PERFEV_RING_MT);
  lua_Number bound = luaL_optnumber(L, 3, 0);   /* read before the userdata takes index 3 */
  uint64_t st = perfev_attr_u64(&ev->attr, "sample_type");
  if (st != PERF_SAMPLE_PERIOD && st != (PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN))
    return luaL_argerror(L, 1, "the event must sample 'period' alone, or with 'callchain'");
  if (!r->page || r->overwrite || r->backward)
    return luaL_argerror(L, 2, "a forward, writable ring is needed");
  struct profiler *p = (struct profiler *)perfev_newuserdata(L, sizeof *p);
  memset(p, 0, sizeof *p);
  p->fd = -1;
  p->ref = LUA_NOREF;
  p->names = LUA_NOREF;
  luaL_setmetatable(L, PROFILER_MT);       /* __gc from here on: it closes p->fd */
  /* Our own fd for the event: whoever closes the event's (ev:close() while
   * the profiler runs), p:stop() can still disable it and stop its signal */
  p->fd = fcntl(ev->fd, F_DUPFD_CLOEXEC, 0);
  if (p->fd < 0)
    return luaL_error(L, "perfev.profile: cannot duplicate the event's fd: %s", strerror(errno));
  p->ring = r;
  p->sigtrap = perfev_attr_u64(&ev->attr, "sigtrap") != 0;
  p->native = (st & PERF_SAMPLE_CALLCHAIN) != 0;
  p->cookie = perfev_attr_u64(&ev->attr, "sig_data");
  prof_budget_init(&p->budget, p->fd, &ev->attr, bound);
  lua_newtable(L);                         /* the names found, weak keys */
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  p->names = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_createtable(L, 2, 0);                /* keeps the event and the ring alive */
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  lua_pushvalue(L, 2);
  lua_rawseti(L, -2, 2);
  perfev_setiuservalue(L, -2);
  return 1;
}

/* core.profiler_route(event, signo[, ring]) -> true | nil, message,
 * errno: the event's overflow sends signal signo to this thread (signo 0:
 * no more); the pages of its ring are touched first (warm_pages). LuaJIT's
 * engine gives its event's overflows to jit.profile as SIGPROF, the
 * signal of jit.profile's own timer: perfev's event is its clock. */
static int l_route(lua_State *L)
{
  struct perfev_event *ev = perfev_event_check(L, 1);
  int signo = perfev_int_arg(L, 2, 0, "perfev.profile: route", "signo");
  const struct perfev_ring *r = lua_isnoneornil(L, 3) ? NULL
                              : (const struct perfev_ring *)luaL_checkudata(L, 3, PERFEV_RING_MT);
  int err;
  if (signo > 0) {
    err = route_signal(ev->fd, signo, r);
  } else {
    int fl = fcntl(ev->fd, F_GETFL);
    err = (fl < 0 || fcntl(ev->fd, F_SETFL, fl & ~O_ASYNC) != 0) ? errno : 0;
  }
  if (err)
    return perfev_push_errno(L, err, "fcntl");
  lua_pushboolean(L, 1);
  return 1;
}

/* core.profiler_drain(ring[, budget]) -> weight, samples, lost: the
 * periods of the samples ring holds (sample_type PERIOD alone), consumed
 * (a clock's as its budget lowered it); LuaJIT's engine weighs its samples
 * with it (no record tables, no iterator). */
static int l_drain(lua_State *L)
{
  struct perfev_ring *r = perfev_ring_self(L);
  const struct prof_budget *b = prof_budget_opt(L, 2);
  uint64_t n, lost = 0, w = prof_ring_periods(r, &n, &lost);
  if (b && n && prof_budget_period(b, w / n) != w / n)
    w = n * prof_budget_period(b, w / n);
  lua_pushnumber(L, (lua_Number)w);
  lua_pushnumber(L, (lua_Number)n);
  lua_pushnumber(L, (lua_Number)lost);
  return 3;
}

/* core.profiler_thread() -> the running thread: the main thread too, which
 * coroutine.running() gives as nil on Lua 5.1/LuaJIT (the jit engine walks
 * a coroutine's resumers down to it). */
static int l_thread(lua_State *L)
{
  lua_pushthread(L);
  return 1;
}

/* core.stack_left() -> the bytes of this thread's C stack below the
 * caller's frame, or nil when the system does not say. LuaJIT's resumes
 * nest on the C stack with no bound of their own: nested too deep, it
 * crashes (SIGSEGV past ~100,000 coroutine.wrap); the jit engine's
 * wrappers ask this to refuse before that (perfev.profile.jit). */
static int l_stack_left(lua_State *L)
{
  pthread_attr_t a;
  void *lo;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &a) != 0)
    return 0;
  int rc = pthread_attr_getstack(&a, &lo, &size);
  (void)pthread_attr_destroy(&a);
  if (rc != 0)
    return 0;
  char here;
  uintptr_t at = (uintptr_t)&here, base = (uintptr_t)lo;
  lua_pushinteger(L, at > base ? (lua_Integer)(at - base) : 0);
  return 1;
}

int perfev_profiler_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = { { "__gc", l_gc }, { "__close", l_gc }, { NULL, NULL } };
  static const luaL_Reg methods[] = {
    { "start", l_start }, { "stop", l_stop }, { "read", l_read }, { "reset", l_reset }, { "take", l_take },
    { "discard", l_discard }, { "timeline", l_timeline }, { "timeline_read", l_timeline_read },
    { "running", l_running }, { "close", l_gc },
    { "wrappers", l_wrappers }, { NULL, NULL }
  };
  perfev_class_register(L, PROFILER_MT, meta, methods);
  lua_pushcfunction(L, l_new);
  lua_setfield(L, -2, "profiler");
  lua_pushcfunction(L, l_thread);
  lua_setfield(L, -2, "profiler_thread");
  lua_pushcfunction(L, l_route);
  lua_setfield(L, -2, "profiler_route");
  lua_pushcfunction(L, l_drain);
  lua_setfield(L, -2, "profiler_drain");
  lua_pushcfunction(L, l_stack_left);
  lua_setfield(L, -2, "stack_left");
  return perfev_profiler_budget_open_lib(L);
}
