/* Clocks for the Lua layer: clock_gettime by the attr's clockid names (so
 * that sample times taken with use_clockid can be compared with "now"), and
 * getrusage for perf's user_time/system_time tool events. */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "perfev.h"

/* The clock id at idx: a CLOCK constant name ("monotonic", "MONOTONIC_RAW")
 * or a number; CLOCK_MONOTONIC when absent. */
static clockid_t clock_arg(lua_State *L, int idx)
{
  uint64_t v;
  if (lua_isnoneornil(L, idx))
    return CLOCK_MONOTONIC;
  if (perfev_isnum(L, idx))   /* a number, or a 64-bit cdata on LuaJIT */
    return (clockid_t)perfev_int_arg(L, idx, 0, "perfev.clock_ns", "clock id");
  if (!perfev_const_lookup(perfev_consts_get("CLOCK"), luaL_checkstring(L, idx), &v)) {
    char clip[PERFEV_CLIP];
    luaL_argerror(L, idx, lua_pushfstring(L, "unknown clock '%s' (a name of perfev.CLOCK, "
                                             "e.g. 'monotonic', 'monotonic_raw', 'boottime')",
                                          perfev_clip(lua_tostring(L, idx), clip)));
  }
  return (clockid_t)v;
}

/* core.clock_ns([clock]) -> nanoseconds | nil, message, errno */
static int l_clock_ns(lua_State *L)
{
  struct timespec ts;
  if (clock_gettime(clock_arg(L, 1), &ts) != 0)
    return perfev_push_errno(L, errno, "clock_gettime");
  lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000000000 + ts.tv_nsec);
  return 1;
}

static lua_Integer tv_ns(const struct timeval *tv)
{
  return (lua_Integer)tv->tv_sec * 1000000000 + (lua_Integer)tv->tv_usec * 1000;
}

/* core.rusage(["self" | "children" | "thread"]) -> user ns, system ns */
static int l_rusage(lua_State *L)
{
  static const char *const whos[] = { "self", "children", "thread", NULL };
  static const int ids[] = { RUSAGE_SELF, RUSAGE_CHILDREN, RUSAGE_THREAD };
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  if (getrusage(ids[luaL_checkoption(L, 1, "self", whos)], &ru) != 0)
    return perfev_push_errno(L, errno, "getrusage");
  lua_pushinteger(L, tv_ns(&ru.ru_utime));
  lua_pushinteger(L, tv_ns(&ru.ru_stime));
  return 2;
}

int perfev_clock_open_lib(lua_State *L)
{
  static const luaL_Reg funcs[] = {
    { "clock_ns", l_clock_ns }, { "rusage", l_rusage }, { NULL, NULL }
  };
  luaL_setfuncs(L, funcs, 0);
  return 0;
}
