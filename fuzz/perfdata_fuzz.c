/* libFuzzer target: whole perf.data files (header, attrs, features,
 * records, in either byte order, file or pipe mode) through
 * perfev.perfdata, read in file and in time order. A Lua error is the
 * reader refusing a damaged file, as it must; only a crash or a sanitizer
 * report is a bug. The Lua layer is loaded from lua/ (run from the
 * repository root, as `make fuzz` does); the seeds are in
 * fuzz/corpus/perfdata. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>

int luaopen_perfev_core(lua_State *L);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Returns function(bytes) that reads the file the bytes are. */
static const char driver[] =
  "package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path\n"
  "local pd = require 'perfev.perfdata'\n"
  "return function(bytes)\n"
  "  local fh = assert(io.tmpfile())\n"
  "  fh:write(bytes)\n"
  "  fh:seek('set', 0)\n"
  "  local f = pd.open(fh, { bufsize = 1, max_queue = 4096 })\n"
  "  if f then\n"
  "    for _, order in ipairs { 'file', 'time' } do\n"
  "      pcall(function() for _ in f:records { order = order } do end end)\n"
  "    end\n"
  "    f:attrs(); f:features(); f:close()\n"
  "  end\n"
  "  fh:close()\n"
  "end\n";

static void die(lua_State *L, const char *what)
{
  fprintf(stderr, "perfdata_fuzz: %s: %s\n", what, lua_tostring(L, -1));
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static lua_State *L;
  if (!L) {
    L = luaL_newstate();
    if (!L)
      abort();
    luaL_openlibs(L);
    luaL_requiref(L, "perfev.core", luaopen_perfev_core, 0);
    lua_pop(L, 1);
    if (luaL_loadbuffer(L, driver, sizeof driver - 1, "=perfdata_fuzz") != LUA_OK ||
        lua_pcall(L, 0, 1, 0) != LUA_OK)
      die(L, "loading the driver");
  }
  lua_pushvalue(L, 1);
  lua_pushlstring(L, (const char *)data, size);
  /* pd.open returns nil, message for a damaged header; anything raised
   * past that is a bug in the Lua layer */
  if (lua_pcall(L, 1, 0, 0) != LUA_OK)
    die(L, "perfev.perfdata raised");
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
