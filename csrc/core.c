/* luaopen_perfev_core: assembles the core module from its parts. */
#include "perfev.h"
#include "attach/attach.h"
#include "allocprof/allocprof.h"

#define PERFEV_VERSION "0.1.0"

/* Which Lua this core was compiled for, as text in the file itself: a core
 * loaded by another Lua fails in dlopen before any of its code runs, and
 * perfev (init.lua) then reads this line from the file to say which Lua the
 * core was built for and how to rebuild it. */
#if PERFEV_LUAJIT
#  define PERFEV_BUILT_FOR LUAJIT_VERSION
#else
#  define PERFEV_BUILT_FOR LUA_RELEASE
#endif
__attribute__((used)) static const char built_for[] = "perfev.core built for <" PERFEV_BUILT_FOR ">";

static int l_scale(lua_State *L)
{
  lua_Integer v = luaL_checkinteger(L, 1), e = luaL_checkinteger(L, 2), r = luaL_checkinteger(L, 3);
  lua_pushinteger(L, (lua_Integer)perfev_scale((uint64_t)v, (uint64_t)e, (uint64_t)r));
  return 1;
}

PERFEV_EXPORT int luaopen_perfev_core(lua_State *L);

int luaopen_perfev_core(lua_State *L)
{
  static int (*const parts[])(lua_State *) = {
    perfev_attr_open_lib, perfev_event_open_lib, perfev_group_open_lib, perfev_prctl_open_lib,
    perfev_decode_open_lib, perfev_ring_open_lib,
    perfev_ring_aux_open_lib, perfev_ring_read_open_lib,
    perfev_attr_bytes_open_lib, perfev_perfdata_open_lib, perfev_encode_open_lib,
    perfev_clock_open_lib, perfev_profiler_open_lib, perfev_elfsym_open_lib,
    perfev_symtab_open_lib, perfev_kallsyms_open_lib, perfev_attach_open_lib, perfev_attach_mem_open_lib,
    perfev_sigsave_open_lib, perfev_allocprof_open_lib,
  };
  lua_newtable(L);
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    parts[i](L);
  perfev_consts_push(L, -1);
  lua_pushcfunction(L, l_scale);
  lua_setfield(L, -2, "scale");
  lua_pushinteger(L, PERFEV_ATTR_SIZE);
  lua_setfield(L, -2, "ATTR_SIZE_MAX");
  /* the one version string: perfev (init.lua) reports the same */
  lua_pushliteral(L, PERFEV_VERSION);
  lua_setfield(L, -2, "VERSION");
  lua_pushliteral(L, "perfev.core " PERFEV_VERSION);
  lua_setfield(L, -2, "_VERSION");
  return 1;
}
