/* core.signal_ignore(signo) -> saved: a signal's disposition set to ignore,
 * the one it had kept in a userdata whose saved:restore() puts it back.
 * The LuaJIT engine ignores SIGPROF under jit.profile: jit.profile keeps
 * the disposition it found and gives it back when it stops, also from
 * lua_close before the finalizers run; found ignored, a SIGPROF the
 * event sends after that is dropped, where the default would end the
 * process (a profile or perfev.frames left running at exit).
 *
 * core.signal_keep(signo) -> kept: the disposition signo has now, kept;
 * kept:again(ms) puts it back and has the signal sent to the process once
 * more after ms (a POSIX timer, owned by kept, deleted by its __gc). The
 * LuaJIT engine keeps luajit.c's SIGINT handler: the hook that handler
 * sets can land in jit.profile's callback, where it dies with it (LuaJIT
 * restores its hooks after the callback), and the handler has reset
 * SIGINT to its default; again() delivers that Ctrl-C once more, out of
 * the callback. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include "perfev.h"

#define SIGSAVE_MT "perfev.saved_signal"

struct saved_signal {
  int signo;
  int restored;
  struct sigaction old;
};

static int l_signal_ignore(lua_State *L)
{
  int signo = perfev_int_arg(L, 1, 0, "perfev.signal_ignore", "signo");
  struct sigaction sa;
  struct saved_signal *s;
  if (signo <= 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP)
    return luaL_error(L, "perfev.signal_ignore: %d is not a signal that can be ignored", signo);
  s = (struct saved_signal *)perfev_newuserdata(L, sizeof *s);
  memset(s, 0, sizeof *s);
  s->signo = signo;
  s->restored = 1;                 /* nothing to give back until the swap is done */
  luaL_setmetatable(L, SIGSAVE_MT);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, &s->old) != 0)
    return perfev_push_errno(L, errno, "sigaction");
  s->restored = 0;
  return 1;
}

/* saved:restore() -> true | nil, message, errno (once; then a no-op) */
static int l_restore(lua_State *L)
{
  struct saved_signal *s = (struct saved_signal *)perfev_self(L, SIGSAVE_MT);
  if (!s->restored) {
    if (sigaction(s->signo, &s->old, NULL) != 0)
      return perfev_push_errno(L, errno, "sigaction");
    s->restored = 1;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_restored(lua_State *L)
{
  lua_pushboolean(L, ((struct saved_signal *)perfev_self(L, SIGSAVE_MT))->restored);
  return 1;
}

static int l_tostring(lua_State *L)
{
  const struct saved_signal *s = (const struct saved_signal *)perfev_self(L, SIGSAVE_MT);
  lua_pushfstring(L, "%s(signal %d, %s)", SIGSAVE_MT, s->signo, s->restored ? "restored" : "ignored");
  return 1;
}

#define SIGKEEP_MT "perfev.kept_signal"

struct kept_signal {
  int signo;
  int has_timer;
  timer_t timer;
  struct sigaction kept;
};

static int l_signal_keep(lua_State *L)
{
  int signo = perfev_int_arg(L, 1, 0, "perfev.signal_keep", "signo");
  struct kept_signal *k;
  if (signo <= 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP)
    return luaL_error(L, "perfev.signal_keep: %d is not a signal that can be handled", signo);
  k = (struct kept_signal *)perfev_newuserdata(L, sizeof *k);
  memset(k, 0, sizeof *k);
  k->signo = signo;
  luaL_setmetatable(L, SIGKEEP_MT);
  if (sigaction(signo, NULL, &k->kept) != 0)
    return perfev_push_errno(L, errno, "sigaction");
  return 1;
}

/* kept:again(ms) -> true | nil, message, errno */
static int l_again(lua_State *L)
{
  struct kept_signal *k = (struct kept_signal *)perfev_self(L, SIGKEEP_MT);
  lua_Integer ms = luaL_checkinteger(L, 2);
  struct itimerspec its;
  if (ms < 1 || ms > 60000)
    return luaL_error(L, "kept:again: ms must be 1..60000, got %d", (int)ms);
  if (!(k->kept.sa_flags & SA_SIGINFO) && (k->kept.sa_handler == SIG_DFL || k->kept.sa_handler == SIG_IGN)) {
    /* no handler was kept: sent again, the signal would end the process or vanish */
    lua_pushnil(L);
    lua_pushliteral(L, "kept:again: the kept disposition is no handler");
    lua_pushinteger(L, EINVAL);
    return 3;
  }
  if (!k->has_timer) {
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = k->signo;
    if (timer_create(CLOCK_MONOTONIC, &ev, &k->timer) != 0)
      return perfev_push_errno(L, errno, "timer_create");
    k->has_timer = 1;
  }
  if (sigaction(k->signo, &k->kept, NULL) != 0)
    return perfev_push_errno(L, errno, "sigaction");
  memset(&its, 0, sizeof its);
  its.it_value.tv_sec = (time_t)(ms / 1000);
  its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
  if (timer_settime(k->timer, 0, &its, NULL) != 0)
    return perfev_push_errno(L, errno, "timer_settime");
  lua_pushboolean(L, 1);
  return 1;
}

static int l_kept_gc(lua_State *L)
{
  struct kept_signal *k = (struct kept_signal *)perfev_self(L, SIGKEEP_MT);
  if (k && k->has_timer) {
    (void)timer_delete(k->timer);   /* a pending expiry goes with it */
    k->has_timer = 0;
  }
  return 0;
}

static int l_kept_tostring(lua_State *L)
{
  const struct kept_signal *k = (const struct kept_signal *)perfev_self(L, SIGKEEP_MT);
  lua_pushfstring(L, "%s(signal %d)", SIGKEEP_MT, k->signo);
  return 1;
}

static void kept_open(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__tostring", l_kept_tostring }, { "__gc", l_kept_gc }, { "__close", l_kept_gc }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = { { "again", l_again }, { "close", l_kept_gc }, { NULL, NULL } };
  perfev_class_register(L, SIGKEEP_MT, meta, methods);
  lua_pushcfunction(L, l_signal_keep);
  lua_setfield(L, -2, "signal_keep");
}

int perfev_sigsave_open_lib(lua_State *L)
{
  kept_open(L);
  /* no __gc: a disposition collected unrestored stays ignored, the safe side */
  static const luaL_Reg meta[] = { { "__tostring", l_tostring }, { NULL, NULL } };
  static const luaL_Reg methods[] = { { "restore", l_restore }, { "restored", l_restored }, { NULL, NULL } };
  perfev_class_register(L, SIGSAVE_MT, meta, methods);
  lua_pushcfunction(L, l_signal_ignore);
  lua_setfield(L, -2, "signal_ignore");
  return 0;
}
