/* core.signal_ignore(signo) -> saved: a signal's disposition set to ignore,
 * the one it had kept in a userdata whose saved:restore() puts it back.
 * The LuaJIT engine ignores SIGPROF under jit.profile: jit.profile keeps
 * the disposition it found and gives it back when it stops, also from
 * lua_close before the finalizers run; found ignored, a SIGPROF the
 * event sends after that is dropped, where the default would end the
 * process (a profile or perfev.frames left running at exit). */
#include <errno.h>
#include <signal.h>
#include <string.h>
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

int perfev_sigsave_open_lib(lua_State *L)
{
  /* no __gc: a disposition collected unrestored stays ignored, the safe side */
  static const luaL_Reg meta[] = { { "__tostring", l_tostring }, { NULL, NULL } };
  static const luaL_Reg methods[] = { { "restore", l_restore }, { "restored", l_restored }, { NULL, NULL } };
  perfev_class_register(L, SIGSAVE_MT, meta, methods);
  lua_pushcfunction(L, l_signal_ignore);
  lua_setfield(L, -2, "signal_ignore");
  return 0;
}
