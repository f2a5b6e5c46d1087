/* prctl(PR_TASK_PERF_EVENTS_*): every event of the calling process at once. */
#include <errno.h>
#include <sys/prctl.h>
#include "perfev.h"

static int task_events(lua_State *L, int option, const char *what)
{
  if (prctl(option, 0, 0, 0, 0) < 0)
    return perfev_push_errno(L, errno, what);
  lua_pushboolean(L, 1);
  return 1;
}

static int l_enable_all(lua_State *L)
{
  return task_events(L, PR_TASK_PERF_EVENTS_ENABLE, "enable_all");
}

static int l_disable_all(lua_State *L)
{
  return task_events(L, PR_TASK_PERF_EVENTS_DISABLE, "disable_all");
}

int perfev_prctl_open_lib(lua_State *L)
{
  static const luaL_Reg funcs[] = {
    { "enable_all", l_enable_all }, { "disable_all", l_disable_all }, { NULL, NULL }
  };
  luaL_setfuncs(L, funcs, 0);
  return 0;
}
