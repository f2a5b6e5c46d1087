/* The profiler's bound on its own cost (perfev.profile). The kernel bounds
 * perf record's: when its sampling interrupt takes more than
 * perf_cpu_time_max_percent (25 %) of the time between samples, it lowers
 * perf_event_max_sample_rate. A perfev sample costs more than the
 * interrupt, and in the profiled thread: a signal delivered to it, a hook
 * or a callback that walks the Lua stack. Unbounded, -F 100000 made a
 * 1.4 s script take 161 s. So each sample's cost is measured here: the
 * thread's CPU time in the hook (or jit.profile's callback), plus one
 * signal's delivery and return per signal, measured at start by sending
 * the thread a signal, and the event's own interrupt per sample, measured
 * at start by enabling it a moment. Costs are summed over windows of the thread's CPU
 * time; when a window's share is over the bound, the event's rate is
 * lowered (PERF_EVENT_IOC_PERIOD) so that, at the cost measured, the share
 * fits the bound. Read out with the profile: the rate asked and the rate
 * now, how many times it was lowered, the cost and the CPU time. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "perfev.h"
#include "profiler.h"
#include "ring/ring.h"

#define WINDOW_NS 20000000ull      /* the thread's CPU time a share is measured over */
#define CALIBRATE 16               /* signals sent to measure one's cost */
#define BUDGET_MT "perfev.profiler_budget"

uint64_t prof_budget_now(void)
{
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void no_op(int sig, siginfo_t *si, void *uc)
{
  (void)sig;
  (void)si;
  (void)uc;
}

/* One signal's cost to this thread (sent, delivered, handled, returned
 * from), in CPU ns: CALIBRATE of them sent to itself on a real-time
 * signal nobody handles, a no-op handler set meanwhile. 0 when none is free. */
static uint64_t signal_cost(void)
{
  for (int s = SIGRTMAX; s >= SIGRTMIN; s--) {
    struct sigaction sa, old;
    if (sigaction(s, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
      continue;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = no_op;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(s, &sa, NULL) != 0)
      return 0;
    pid_t pid = getpid(), tid = gettid();
    uint64_t t0 = prof_budget_now();
    int sent = 0;
    for (int i = 0; i < CALIBRATE; i++)
      sent += syscall(SYS_tgkill, pid, tid, s) == 0;
    uint64_t t1 = prof_budget_now();
    (void)sigaction(s, &old, NULL);
    return sent > 0 && t1 > t0 ? (t1 - t0) / (uint64_t)sent : 0;
  }
  return 0;
}

/* CPU time and nothing else: no fault, no system call. */
static void spin(uint64_t iters)
{
  volatile uint64_t x = 0;
  for (uint64_t i = 0; i < iters; i++)
    x += i;
}

static uint64_t timed_spin(uint64_t iters)
{
  uint64_t t0 = prof_budget_now();
  spin(iters);
  return prof_budget_now() - t0;
}

/* One sample's interrupt, in the thread's CPU ns: the same spin of about
 * CALIBRATE_NS timed with the event disabled, then enabled (no signal
 * routed yet), the difference shared among the samples it took, which
 * ring r held and are consumed. Where the interrupt is a timer's (the
 * clocks; hardware counters), this is most of a sample's cost: 25 to 60 us
 * in a KVM/PVM guest, where -F 10000 of cpu-clock alone, no signal, left a
 * spin 45 % of its CPU time. 0 when the spin took too few samples to
 * tell (a slow rate, an event a spin does not count: page faults).
 * A clock is measured at CALIBRATE_PERIOD_NS at most: shorter periods
 * than its interrupt make a storm (the next expiry is past when one
 * ends), where 2 ms of spin took 300 ms at -F 100000. */
#define CALIBRATE_PERIOD_NS 100000ull
#define CALIBRATE_ABOVE_HZ 1000.0   /* below, a sample would need 250 us to reach 25 % */
#define CALIBRATE_NS 2000000ull
#define CALIBRATE_MIN 4
static uint64_t irq_cost(int fd, struct perfev_ring *r)
{
  uint64_t iters = 1024, n, lost = 0;
  while (timed_spin(iters) < CALIBRATE_NS / 4 && iters < (1ull << 40))
    iters *= 2;
  iters *= 4;
  (void)prof_ring_periods(r, &n, &lost);          /* an empty ring first */
  uint64_t off = timed_spin(iters);
  if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
    return 0;
  uint64_t on = timed_spin(iters);
  if (ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) != 0)
    return 0;
  (void)prof_ring_periods(r, &n, &lost);
  return n >= CALIBRATE_MIN && on > off ? (on - off) / n : 0;
}

void prof_budget_init(struct prof_budget *b, int fd, const struct perfev_attr *a, double bound)
{
  memset(b, 0, sizeof *b);
  b->fd = fd;
  b->bound = bound > 0 && bound < 1 ? bound : 0;
  uint64_t type = perfev_attr_u64(a, "type"), config = perfev_attr_u64(a, "config");
  int freq = perfev_attr_u64(a, "freq") != 0;
  /* cpu-clock and task-clock (hrtimers): the kernel turns a frequency into
   * a period of 1e9/freq ns at open, and the ioctl then takes a period */
  int clock = type == PERF_TYPE_SOFTWARE &&
              (config == PERF_COUNT_SW_CPU_CLOCK || config == PERF_COUNT_SW_TASK_CLOCK);
  uint64_t v = perfev_attr_u64(a, freq ? "sample_freq" : "sample_period");
  b->sigtrap = perfev_attr_u64(a, "sigtrap") != 0;
  b->clock = clock;
  b->asked_freq = freq;
  b->asked = v;
  b->freq = freq && !clock;
  b->value = freq && clock && v ? 1000000000ull / v : v;
}

static void lower(struct prof_budget *b, double factor);

void prof_budget_start(struct prof_budget *b, struct perfev_ring *r)
{
  b->signal_ns = signal_cost();
  /* the rate asked in Hz, where it is one */
  double hz = b->freq ? (double)b->value : b->asked_freq && b->value ? 1e9 / (double)b->value : 0;
  /* not with attr.sigtrap: its overflow signals, routed or not */
  b->irq_ns = 0;
  if (b->bound > 0 && !b->sigtrap && r && hz > CALIBRATE_ABOVE_HZ) {
    uint64_t slow = CALIBRATE_PERIOD_NS;
    int clock = b->asked_freq && !b->freq && b->value < slow;
    if (!clock || ioctl(b->fd, PERF_EVENT_IOC_PERIOD, &slow) == 0)
      b->irq_ns = irq_cost(b->fd, r);
    if (clock)
      (void)ioctl(b->fd, PERF_EVENT_IOC_PERIOD, &b->value);
  }
  /* Lowered at once where a sample's interrupt and signal alone are over
   * the bound at the rate asked: there a real-time signal is queued at
   * each overflow faster than the thread returns to user space to take
   * it, no hook or handler runs, and once the queue is full the kernel
   * sends SIGIO instead, which ends the process (seen at -F 100000 here). */
  double share = hz * (double)(b->signal_ns + b->irq_ns) / 1e9;
  if (b->bound > 0 && share > b->bound)
    lower(b, share / b->bound * 1.1);
  b->cpu0 = b->win_start = prof_budget_now();
  b->win_cost = b->cost = 0;
  b->charged_signals = 0;
}

/* Lowers the rate by factor (> 1): a longer period or a lower frequency. */
static void lower(struct prof_budget *b, double factor)
{
  uint64_t v;
  if (b->freq) {
    v = (uint64_t)((double)b->value / factor);
    if (v < 1)
      v = 1;
  } else {
    v = (uint64_t)((double)b->value * factor) + 1;
  }
  if (v == b->value)
    return;
  if (ioctl(b->fd, PERF_EVENT_IOC_PERIOD, &v) != 0) {
    b->err = errno;
    return;
  }
  b->value = v;
  b->throttled++;
}

void prof_budget_charge(struct prof_budget *b, uint64_t cost, uint64_t now)
{
  b->cost += cost;
  b->win_cost += cost;
  if (now < b->win_start + WINDOW_NS)
    return;
  double share = (double)b->win_cost / (double)(now - b->win_start);
  b->win_start = now;
  b->win_cost = 0;
  if (b->bound > 0 && !b->err && share > b->bound)
    lower(b, share / b->bound * 1.1);   /* a tenth to spare */
}

uint64_t prof_budget_period(const struct prof_budget *b, uint64_t reported)
{
  return b->clock && b->throttled && !b->freq ? b->value : reported;
}

/* The rate now: Hz for a frequency (and the clocks asked one), else the period. */
static uint64_t rate_now(const struct prof_budget *b)
{
  if (b->asked_freq && !b->freq)
    return b->value ? 1000000000ull / b->value : 0;
  return b->value;
}

void prof_budget_push(lua_State *L, const struct prof_budget *b)
{
  perfev_set_u64(L, "cost", b->cost);
  perfev_set_u64(L, "cpu", b->cpu0 ? prof_budget_now() - b->cpu0 : 0);
  perfev_set_u64(L, "signal_cost", b->signal_ns);
  perfev_set_u64(L, "irq_cost", b->irq_ns);
  perfev_set_u64(L, "throttled", b->throttled);
  perfev_set_u64(L, "rate_asked", b->asked);
  perfev_set_u64(L, "rate_now", rate_now(b));
  lua_pushstring(L, b->asked_freq ? "Hz" : "period");
  lua_setfield(L, -2, "rate_unit");
  lua_pushnumber(L, b->bound);
  lua_setfield(L, -2, "max_cost");
  if (b->err) {
    lua_pushstring(L, strerror(b->err));
    lua_setfield(L, -2, "throttle_error");
  }
}

/* ---- for LuaJIT's engine: the budget as a userdata ---- */

struct budget_ud {
  struct prof_budget b;
  uint64_t signals;         /* charged so far */
};

static struct budget_ud *check_budget(lua_State *L)
{
  return (struct budget_ud *)perfev_self(L, BUDGET_MT);
}

/* The budget userdata at idx, or NULL (core.profiler_drain's second argument). */
const struct prof_budget *prof_budget_opt(lua_State *L, int idx)
{
  if (lua_isnoneornil(L, idx))
    return NULL;
  return &((struct budget_ud *)luaL_checkudata(L, idx, BUDGET_MT))->b;
}

/* core.profiler_budget(event, bound) -> budget. The budget keeps a dup of
 * the event's fd (closed by __gc): it lowers the event's rate through it,
 * and budget:quiesce() stops the event's signal through it, whoever
 * closed the event's own fd meanwhile. */
static int l_budget(lua_State *L)
{
  struct perfev_event *ev = perfev_event_check(L, 1);
  double bound = luaL_checknumber(L, 2);
  struct budget_ud *u = (struct budget_ud *)perfev_newuserdata(L, sizeof *u);
  memset(u, 0, sizeof *u);
  u->b.fd = -1;
  luaL_setmetatable(L, BUDGET_MT);
  int fd = fcntl(ev->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return luaL_error(L, "perfev.profile: cannot duplicate the event's fd: %s", strerror(errno));
  prof_budget_init(&u->b, fd, &ev->attr, bound);
  return 1;
}

static int l_gc(lua_State *L)
{
  struct budget_ud *u = check_budget(L);
  if (u && u->b.fd >= 0) {   /* NULL: __gc given another self (perfev_self) */
    close(u->b.fd);
    u->b.fd = -1;
  }
  return 0;
}

/* budget:quiesce() -> true | nil, message, errno: the event disabled and
 * its signal routed nowhere (O_ASYNC off), through the budget's own fd */
static int l_quiesce(lua_State *L)
{
  struct budget_ud *u = check_budget(L);
  int fl;
  if (u->b.fd < 0)
    return perfev_push_errno(L, EBADF, "quiesce");
  if (ioctl(u->b.fd, PERF_EVENT_IOC_DISABLE, 0) != 0)
    return perfev_push_errno(L, errno, "ioctl(PERF_EVENT_IOC_DISABLE)");
  fl = fcntl(u->b.fd, F_GETFL);
  if (fl < 0 || fcntl(u->b.fd, F_SETFL, fl & ~O_ASYNC) != 0)
    return perfev_push_errno(L, errno, "fcntl");
  lua_pushboolean(L, 1);
  return 1;
}

/* budget:start(ring) -> budget (the costs of a signal and of the event's
 * interrupt measured, the clock started) */
static int l_start(lua_State *L)
{
  struct budget_ud *u = check_budget(L);
  prof_budget_start(&u->b, (struct perfev_ring *)luaL_checkudata(L, 2, PERFEV_RING_MT));
  lua_settop(L, 1);
  return 1;
}

/* budget:now() -> the thread's CPU time, ns (a number) */
static int l_now(lua_State *L)
{
  check_budget(L);
  lua_pushnumber(L, (lua_Number)prof_budget_now());
  return 1;
}

/* budget:charge(t0, signals): a sample's cost, from t0 (budget:now()) to
 * now, and `signals` signals' */
static int l_charge(lua_State *L)
{
  struct budget_ud *u = check_budget(L);
  uint64_t t0 = (uint64_t)luaL_checknumber(L, 2);
  uint64_t n = (uint64_t)luaL_optnumber(L, 3, 1);
  uint64_t now = prof_budget_now();
  prof_budget_charge(&u->b, (now > t0 ? now - t0 : 0) + n * (u->b.signal_ns + u->b.irq_ns), now);
  return 0;
}

/* budget:read(t) -> t with cost, cpu, signal_cost, throttled, rate_asked,
 * rate_now, rate_unit, max_cost (and throttle_error) set */
static int l_read(lua_State *L)
{
  struct budget_ud *u = check_budget(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  prof_budget_push(L, &u->b);
  return 1;
}

/* tostring(budget): the bound, and whether and how often the rate was lowered */
static int l_tostring(lua_State *L)
{
  const struct prof_budget *b = &check_budget(L)->b;
  lua_pushfstring(L, BUDGET_MT "(bound %d%%, lowered %d times, %p)", (int)(b->bound * 100 + 0.5),
                  (int)b->throttled, lua_topointer(L, 1));
  return 1;
}

int perfev_profiler_budget_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__tostring", l_tostring }, { "__gc", l_gc }, { "__close", l_gc }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = {
    { "start", l_start }, { "now", l_now }, { "charge", l_charge }, { "read", l_read },
    { "quiesce", l_quiesce }, { "close", l_gc }, { NULL, NULL }
  };
  perfev_class_register(L, BUDGET_MT, meta, methods);
  lua_pushcfunction(L, l_budget);
  lua_setfield(L, -2, "profiler_budget");
  return 0;
}
