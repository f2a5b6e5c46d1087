/* The Lua state of a fuzz target: perfev.core linked in (csrc/ is compiled
 * into the fuzzer), the attrs of fuzz/attrs.lua and the per-input function
 * of fuzz/driver.lua, both embedded by fuzz/embed.lua at build time. */
#ifndef PERFEV_FUZZ_LUA_H
#define PERFEV_FUZZ_LUA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>
#include "fuzz_sources.h"

int luaopen_perfev_core(lua_State *L);

static void fuzz_die(lua_State *L, const char *what)
{
  fprintf(stderr, "fuzz: %s: %s\n", what, lua_tostring(L, -1));
  abort();
}

/* A state with the per-input function of mode ("decode", "roundtrip") at
 * stack index 1. */
static lua_State *fuzz_open(const char *mode)
{
  lua_State *L = luaL_newstate();
  if (!L)
    abort();
  luaL_openlibs(L);
  luaL_requiref(L, "perfev.core", luaopen_perfev_core, 0);
  if (luaL_loadbuffer(L, fuzz_driver, sizeof fuzz_driver - 1, fuzz_driver_name) != LUA_OK)
    fuzz_die(L, "loading driver.lua");
  lua_insert(L, -2);
  if (luaL_loadbuffer(L, fuzz_attrs, sizeof fuzz_attrs - 1, fuzz_attrs_name) != LUA_OK ||
      lua_pcall(L, 0, 1, 0) != LUA_OK)
    fuzz_die(L, "running attrs.lua");
  lua_pushstring(L, mode);
  if (lua_pcall(L, 3, 1, 0) != LUA_OK)
    fuzz_die(L, "running driver.lua");
  return L;
}

/* Runs the input: its first byte selects the attr, the rest is records.
 * Returns 1 with the message on top when the Lua side raised. */
static int fuzz_run(lua_State *L, const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  lua_pushvalue(L, 1);
  lua_pushlstring(L, (const char *)data + 1, size - 1);
  lua_pushinteger(L, data[0]);
  return lua_pcall(L, 2, 0, 0) != LUA_OK;
}

#endif
