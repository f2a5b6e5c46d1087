/* Lua version compatibility: perfev is written against the Lua 5.4 API and
 * these rename-style shims let the same sources build for 5.3 and LuaJIT
 * 2.1 (whose headers already declare several 5.2 functions). */
#ifndef PERFEV_COMPAT_H
#define PERFEV_COMPAT_H

#include <lua.h>
#include <lauxlib.h>

#if LUA_VERSION_NUM < 502
#  ifndef LUA_OK
#    define LUA_OK 0
#  endif
#  define lua_rawlen(L, i) lua_objlen((L), (i))
#  ifndef luaL_newlib
#    define luaL_newlibtable(L, l) lua_createtable((L), 0, sizeof(l) / sizeof((l)[0]) - 1)
#    define luaL_newlib(L, l) (luaL_newlibtable((L), (l)), luaL_setfuncs((L), (l), 0))
#  endif
/* LuaJIT 2.1 declares luaL_setfuncs, luaL_testudata and luaL_setmetatable;
 * plain Lua 5.1 lacks them and is not supported. */
#  define lua_getuservalue(L, i) lua_getfenv((L), (i))
#  define lua_setuservalue(L, i) lua_setfenv((L), (i))
#  define lua_absindex(L, i) ((i) > 0 || (i) <= LUA_REGISTRYINDEX ? (i) : lua_gettop(L) + (i) + 1)
/* 5.1's lua_getfield, lua_rawget and lua_rawgeti return nothing; from 5.3
 * on they return the type of the value pushed, which the core tests. */
static inline int perfev_getfield(lua_State *L, int i, const char *k)
{
  lua_getfield(L, i, k);
  return lua_type(L, -1);
}
static inline int perfev_rawget(lua_State *L, int i)
{
  lua_rawget(L, i);
  return lua_type(L, -1);
}
static inline int perfev_rawgeti(lua_State *L, int i, lua_Integer n)
{
  lua_rawgeti(L, i, (int)n);
  return lua_type(L, -1);
}
#  define lua_getfield(L, i, k) perfev_getfield((L), (i), (k))
#  define lua_rawget(L, i) perfev_rawget((L), (i))
#  define lua_rawgeti(L, i, n) perfev_rawgeti((L), (i), (n))
/* LuaJIT's io library keeps a FILE * first in its file userdata (and NULL
 * once closed), under the same LUA_FILEHANDLE name. */
#  include <stdio.h>
#  include <lualib.h>
typedef struct { FILE *f; } luaL_Stream;
#  define PERFEV_STREAM_CLOSED(s) ((s)->f == NULL)
#endif

#ifndef PERFEV_STREAM_CLOSED
#  define PERFEV_STREAM_CLOSED(s) ((s)->closef == NULL)
#endif

#if LUA_VERSION_NUM < 503
/* Numbers above 2^53 lose precision on 5.1/5.2/LuaJIT: documented in README. */
#  define lua_isinteger(L, i) (lua_type((L), (i)) == LUA_TNUMBER)
#endif

#if LUA_VERSION_NUM < 504
#  define perfev_newuserdata(L, sz) lua_newuserdata((L), (sz))
#  define perfev_getiuservalue(L, i) (lua_getuservalue((L), (i)), lua_type((L), -1))
#  define perfev_setiuservalue(L, i) lua_setuservalue((L), (i))
#else
#  define perfev_newuserdata(L, sz) lua_newuserdatauv((L), (sz), 1)
#  define perfev_getiuservalue(L, i) lua_getiuservalue((L), (i), 1)
#  define perfev_setiuservalue(L, i) lua_setiuservalue((L), (i), 1)
#endif

/* __close only exists from 5.4 on; registering it elsewhere is harmless. */

#endif
