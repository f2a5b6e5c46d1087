/* perfev_frames.h: frames and zones of a perfev.frames object (doc/games.md)
 * marked from a C or C++ host's native code, beside the Lua scripts that
 * mark their own. Header-only: static functions over Lua's C API, which
 * call the object's methods, so that the static library still exports
 * nothing but luaopen_perfev_core. Copy it beside the host's sources.
 *
 *   perfev_frames fr;
 *   lua_getfield(L, game, "frames");            -- a perfev.frames object, made in Lua
 *   if (perfev_frames_take(&fr, L) != 0) ...    -- pops it, keeps a reference
 *   for (;;) {
 *     perfev_frames_zone_begin(&fr, "world");   -- fr:zone_begin("world")
 *     update_world();
 *     perfev_frames_zone_end(&fr);              -- fr:zone_end(): the innermost open zone
 *     run_scripts();                            -- whose zones nest inside or beside
 *     perfev_frames_mark(&fr);                  -- fr:mark(), or the scripts mark
 *   }
 *   perfev_frames_release(&fr);
 *
 * Each call returns 0 (LUA_OK), or the status of the method's error with
 * its message on top of the stack, as lua_pcall leaves it. The calls push
 * nothing else and allocate nothing once a zone's name was seen. */
#ifndef PERFEV_FRAMES_H
#define PERFEV_FRAMES_H

#include <lua.h>
#include <lauxlib.h>

typedef struct perfev_frames {
  lua_State *L;
  int ref;          /* the object, in the registry */
} perfev_frames;

/* Takes the perfev.frames object on top of L's stack (popped). Returns 0,
 * or -1 when it is not a table (nothing kept). */
static inline int perfev_frames_take(perfev_frames *f, lua_State *L)
{
  f->L = L;
  f->ref = LUA_NOREF;
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return -1;
  }
  f->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* fr:<method>(name or nothing) */
static inline int perfev_frames_call(perfev_frames *f, const char *method, const char *name)
{
  lua_State *L = f->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, f->ref);
  lua_getfield(L, -1, method);
  lua_insert(L, -2);
  if (name)
    lua_pushstring(L, name);
  return lua_pcall(L, name ? 2 : 1, 0, 0);
}

/* fr:mark(): ends a frame */
static inline int perfev_frames_mark(perfev_frames *f)
{
  return perfev_frames_call(f, "mark", NULL);
}

/* fr:zone_begin(name): a zone starts (nested in the one open) */
static inline int perfev_frames_zone_begin(perfev_frames *f, const char *name)
{
  return perfev_frames_call(f, "zone_begin", name);
}

/* fr:zone_end(): the innermost open zone ends */
static inline int perfev_frames_zone_end(perfev_frames *f)
{
  return perfev_frames_call(f, "zone_end", NULL);
}

/* Drops the reference (the object is closed by its owner, or collected). */
static inline void perfev_frames_release(perfev_frames *f)
{
  if (f->ref != LUA_NOREF)
    luaL_unref(f->L, LUA_REGISTRYINDEX, f->ref);
  f->ref = LUA_NOREF;
}

#endif
