/* What every part of the core does the same way: registering a class,
 * reporting a failed system call, reading an options table. */
#include <stdint.h>
#include <string.h>
#include "perfev.h"

/* ---- classes ---- */

/* Whether meta defines __index itself. Read from the list, not from the
 * metatable: a second luaopen (a new state's require) finds it filled. */
static int has_meta(const luaL_Reg *meta, const char *name)
{
  for (; meta && meta->name; meta++)
    if (strcmp(meta->name, name) == 0)
      return 1;
  return 0;
}

/* The state a class's own query methods tell, for the default __tostring:
 * the method, and the words for a true and a false answer. */
static const struct {
  const char *method, *yes, *no;
} STATE_QUERIES[] = {
  { "closed", "closed", "open" },
  { "running", "running", "stopped" },
};

/* __tostring of a class that gives none: its name, what its query methods
 * answer (closed, running) and its address, e.g. "perfev.profiler(stopped,
 * 0x5581...)": no perfev userdata prints as a bare "userdata: 0x...". A
 * class with more to say (an event's name and fd, a ring's size) gives its
 * own __tostring in meta, in the same "class(facts)" form. Upvalue 1: the
 * metatable. */
static int default_tostring(lua_State *L)
{
  int n = 0;
  lua_settop(L, 1);
  lua_getfield(L, lua_upvalueindex(1), "__name");                /* 2 */
  perfev_self(L, lua_tostring(L, 2));
  if (lua_getfield(L, lua_upvalueindex(1), "__methods") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_getfield(L, lua_upvalueindex(1), "__index");            /* 3 */
  }
  lua_pushvalue(L, 2);
  lua_pushliteral(L, "(");
  n = 2;
  for (size_t i = 0; lua_istable(L, 3) && i < sizeof STATE_QUERIES / sizeof STATE_QUERIES[0]; i++) {
    if (lua_getfield(L, 3, STATE_QUERIES[i].method) != LUA_TFUNCTION) {
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, 1);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {   /* a state it cannot tell: left out */
      lua_pop(L, 1);
      continue;
    }
    lua_pushfstring(L, "%s, ", lua_toboolean(L, -1) ? STATE_QUERIES[i].yes : STATE_QUERIES[i].no);
    lua_remove(L, -2);
    n++;
  }
  lua_pushfstring(L, "%p)", lua_topointer(L, 1));
  lua_concat(L, n + 1);
  return 1;
}

void perfev_class_register(lua_State *L, const char *mt, const luaL_Reg *meta,
                           const luaL_Reg *methods)
{
  luaL_newmetatable(L, mt);
  lua_pushstring(L, mt);   /* LuaJIT's luaL_newmetatable does not set __name */
  lua_setfield(L, -2, "__name");
  if (meta) {
    lua_pushvalue(L, -1);
    luaL_setfuncs(L, meta, 1);
  }
  if (!has_meta(meta, "__tostring")) {
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, default_tostring, 1);
    lua_setfield(L, -2, "__tostring");
  }
  if (methods) {
    lua_newtable(L);
    lua_pushvalue(L, -2);
    luaL_setfuncs(L, methods, 1);
    /* a class whose __index is a function (attr fields) finds its
     * methods under __methods */
    lua_setfield(L, -2, has_meta(meta, "__index") ? "__methods" : "__index");
  }
  lua_pop(L, 1);
}

void perfev_class_methods(lua_State *L, const char *mt)
{
  luaL_getmetatable(L, mt);
  if (lua_getfield(L, -1, "__methods") != LUA_TTABLE) {   /* a class with its own __index */
    lua_pop(L, 1);
    lua_getfield(L, -1, "__index");
  }
  lua_remove(L, -2);
}

/* ---- a method's self ---- */

/* Pushes the string key under which table t holds the value at fn and
 * returns 1, or returns 0 (nothing pushed; also when t is no table). */
static int key_of(lua_State *L, int t, int fn)
{
  if (!lua_istable(L, t))
    return 0;
  for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, fn)) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

/* Pushes the name the metatable at mt gives the function at fn: a
 * metamethod's ("__tostring") or a method's (in __index or __methods);
 * returns 1, or 0 with nothing pushed. */
static int name_in_class(lua_State *L, int mt, int fn)
{
  static const char *const tables[] = { "__methods", "__index" };
  if (key_of(L, mt, fn))
    return 1;
  for (size_t i = 0; lua_istable(L, mt) && i < sizeof tables / sizeof tables[0]; i++) {
    lua_getfield(L, mt, tables[i]);
    if (key_of(L, lua_gettop(L), fn)) {
      lua_remove(L, -2);
      return 1;
    }
    lua_pop(L, 1);
  }
  return 0;
}

/* Pushes "source:line: " of the first Lua function up the stack (the
 * caller, past pcall and other C functions between), or "". */
static void push_where(lua_State *L)
{
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0 && strcmp(ar.what, "C") != 0) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      return;
    }
  }
  lua_pushliteral(L, "");
}

/* Pushes what the value at idx is, for a message: "integer 42", "string
 * 'x'", "perfev.ring" (a class's __name), "table". */
static void push_got(lua_State *L, int idx)
{
  char clip[PERFEV_CLIP];
  int t = lua_type(L, idx);
  if (t == LUA_TNUMBER || t == LUA_TSTRING || t == LUA_TBOOLEAN) {
    lua_pushvalue(L, idx);   /* converted to a string there, not in place */
    const char *v = t == LUA_TBOOLEAN ? (lua_toboolean(L, idx) ? "true" : "false") : lua_tostring(L, -1);
    lua_pushfstring(L, t == LUA_TSTRING ? "%s '%s'" : "%s %s",
                    t == LUA_TNUMBER ? (lua_isinteger(L, idx) ? "integer" : "number") : lua_typename(L, t),
                    perfev_clip(v, clip));
    lua_remove(L, -2);
    return;
  }
  if (luaL_getmetafield(L, idx, "__name") != LUA_TNIL) {
    if (lua_type(L, -1) == LUA_TSTRING)
      return;
    lua_pop(L, 1);
  }
  lua_pushstring(L, t == LUA_TNONE ? "no value" : lua_typename(L, t));
}

/* Raises the bad-self error of perfev_self, naming the function running;
 * returns (nothing pushed) when that is the class's __gc: a finalizer
 * never raises (Lua 5.3 passes a finalizer's error on to whatever code runs
 * when the collector does: a table given a class's metatable would break
 * unrelated code when collected), its caller does nothing with NULL. */
static int bad_self(lua_State *L, const char *tname)
{
  lua_Debug ar;
  int fn, mt, got, top = lua_gettop(L);
  lua_checkstack(L, 12);
  if (top == 0)
    lua_pushliteral(L, "no value");
  else
    push_got(L, 1);
  got = lua_gettop(L);
  if (!lua_getstack(L, 0, &ar) || !lua_getinfo(L, "fn", &ar))
    lua_pushnil(L);
  fn = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  mt = lua_gettop(L);
  luaL_getmetatable(L, tname);
  if (name_in_class(L, mt, fn) || name_in_class(L, mt + 1, fn)) {
    const char *m = lua_tostring(L, -1);
    int meta = m[0] == '_' && m[1] == '_';
    if (strcmp(m, "__gc") == 0) {
      lua_settop(L, top);
      return 0;
    }
    lua_pushfstring(L, "%s: bad self for %s (expected a %s, got ", tname, m, tname);
    lua_pushvalue(L, got);
    lua_pushfstring(L, meta ? ")" : "): call it as obj:%s(...)", m);
  } else {
    /* a function of perfev.core that takes an instance first */
    lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
    lua_getfield(L, -1, "perfev.core");
    if (key_of(L, lua_gettop(L), fn))
      lua_pushfstring(L, "perfev.core.%s", lua_tostring(L, -1));
    else
      lua_pushstring(L, ar.name ? ar.name : tname);
    lua_pushfstring(L, ": argument #1 must be a %s, got ", tname);
    lua_pushvalue(L, got);
  }
  lua_concat(L, 3);
  push_where(L);
  lua_insert(L, -2);
  lua_concat(L, 2);   /* the position, then the message */
  return lua_error(L);
}

void *perfev_self_slow(lua_State *L, const char *tname)
{
  int t = lua_type(L, 1);
  if (t == LUA_TUSERDATA) {
    void *p = luaL_testudata(L, 1, tname);
    if (p)
      return p;
  } else if (t == LUA_TTABLE && lua_getmetatable(L, 1)) {
    int same = lua_rawequal(L, -1, lua_upvalueindex(1));
    luaL_getmetatable(L, tname);
    same = same && lua_isnil(L, -1);   /* tname is a class of tables, no userdata's */
    lua_pop(L, 2);
    if (same)
      return (void *)(uintptr_t)lua_topointer(L, 1);
  }
  bad_self(L, tname);
  return NULL;
}

/* ---- result tables ---- */

/* t[k] = v on the table on top: a u64 the kernel gave, under the 64-bit
 * rule of compat.h (a number within +-2^53, else a uint64_t cdata). */
void perfev_set_u64(lua_State *L, const char *k, uint64_t v)
{
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

/* ---- system call failures ---- */

int perfev_push_errno(lua_State *L, int err, const char *what)
{
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", what, strerror(err));
  lua_pushinteger(L, err);
  return 3;
}

/* ---- integers the kernel takes as int ---- */

int perfev_int_arg(lua_State *L, int idx, lua_Integer dflt, const char *who, const char *what)
{
  lua_Integer v = luaL_optinteger(L, idx, dflt);
  if (v < INT32_MIN || v > INT32_MAX)
    luaL_error(L, "%s: %s %I is out of range (the kernel takes a 32-bit int)", who, what, v);
  return (int)v;
}

/* ---- messages ---- */

const char *perfev_clip(const char *s, char buf[PERFEV_CLIP])
{
  size_t n = strlen(s);
  if (n < PERFEV_CLIP)
    return s;
  memcpy(buf, s, PERFEV_CLIP - 4);
  memcpy(buf + PERFEV_CLIP - 4, "...", 4);
  return buf;
}

/* Edit distance, capped: enough to suggest the name a typo meant. */
static size_t distance(const char *a, const char *b)
{
  size_t la = strlen(a), lb = strlen(b), row[48];
  if (la >= 47 || lb >= 47)
    return 99;
  for (size_t j = 0; j <= lb; j++)
    row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best)
        best = up + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

const char *perfev_nearest(const char *name, const void *items, size_t n, size_t stride)
{
  const char *best = NULL;
  size_t bestd = 3;
  for (size_t i = 0; i < n; i++) {
    const char *cand = *(const char *const *)(const void *)((const char *)items + i * stride);
    size_t d = cand ? distance(name, cand) : 99;
    if (d < bestd) {
      bestd = d;
      best = cand;
    }
  }
  return best;
}

/* ---- options tables ---- */

/* "a, b and c": the names of opts, for the unknown-option message. */
static void push_names(lua_State *L, const struct perfev_opt *opts)
{
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (const struct perfev_opt *o = opts; o->name; o++) {
    if (o != opts)
      luaL_addstring(&b, o[1].name ? ", " : " and ");
    luaL_addstring(&b, o->name);
  }
  luaL_pushresult(&b);
}

static const char *type_name(int type)
{
  return type == LUA_TNUMBER ? "an integer" : type == LUA_TBOOLEAN ? "a boolean"
       : type == LUA_TTABLE ? "a table" : "a string";
}

/* Whether the value on top has the type option o takes. */
static int type_ok(lua_State *L, const struct perfev_opt *o)
{
  if (o->type == LUA_TNUMBER)
    return lua_isinteger(L, -1);
  return lua_type(L, -1) == o->type;
}

int perfev_check_options(lua_State *L, int idx, const char *who, const struct perfev_opt *opts)
{
  if (lua_isnoneornil(L, idx))
    return 0;
  if (!lua_istable(L, idx))
    return luaL_error(L, "%s: the options must be a table, got %s", who, luaL_typename(L, idx));
  idx = lua_absindex(L, idx);
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
    const struct perfev_opt *o = opts;
    while (o->name && !(k && strcmp(o->name, k) == 0))
      o++;
    if (!o->name) {
      char clip[PERFEV_CLIP];
      push_names(L, opts);
      luaL_error(L, "%s: unknown option '%s' (the options are %s)", who,
                 k ? perfev_clip(k, clip) : luaL_typename(L, -3), lua_tostring(L, -1));
    }
    if (!type_ok(L, o))
      luaL_error(L, "%s: option '%s' must be %s, got %s", who, o->name, type_name(o->type),
                 o->type == LUA_TNUMBER && lua_type(L, -1) == LUA_TNUMBER ? "a float"
                                                                   : luaL_typename(L, -1));
  }
  return 1;
}

/* Pushes option name of the table at idx and returns 1, or returns 0
 * (nothing pushed) when it is absent or idx holds no table. */
static int opt_get(lua_State *L, int idx, const char *name)
{
  if (!lua_istable(L, idx))
    return 0;
  if (lua_getfield(L, idx, name) != LUA_TNIL)
    return 1;
  lua_pop(L, 1);
  return 0;
}

int perfev_opt_bool(lua_State *L, int idx, const char *name, int dflt)
{
  if (!opt_get(L, idx, name))
    return dflt;
  dflt = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return dflt;
}

lua_Integer perfev_opt_int(lua_State *L, int idx, const char *name, lua_Integer dflt)
{
  lua_Integer v;
  if (!opt_get(L, idx, name))
    return dflt;
  v = lua_tointeger(L, -1);
  lua_pop(L, 1);
  return v;
}
