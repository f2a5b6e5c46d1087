/* The coroutine tracker (cotrack.h): coroutine.resume and coroutine.wrap
 * as the profilers replace them while profiling. Every wrapper's upvalues:
 * 1 its owner's userdata, 2 the owner's struct perfev_cotrack (light
 * userdata), 3 the original function (resume, wrap, or the function the
 * original wrap made), 4 (wrap's functions) their coroutine. */
#include "perfev.h"
#include "cotrack.h"

#define UP_OWNER 1
#define UP_TRACK 2
#define UP_ORIG 3
#define UP_CO 4

lua_State *perfev_cochain_resumer(const struct perfev_cochain *c, const lua_State *co)
{
  for (int i = c->depth - 1; i >= 0; i--)
    if (c->link[i].co == co)
      return c->link[i].resumer;
  return NULL;
}

int perfev_cochain_room(const struct perfev_cochain *c)
{
  return c->depth < PERFEV_COCHAIN_MAX;
}

void perfev_cochain_push(struct perfev_cochain *c, lua_State *co, lua_State *from)
{
  c->link[c->depth].co = co;
  c->link[c->depth].resumer = from;
  c->depth++;
}

void perfev_cochain_pop(struct perfev_cochain *c)
{
  if (c->depth > 0)
    c->depth--;
}

/* The owner to call around a resume of co from L, or NULL (co NULL:
 * not a coroutine, left to the original function). */
static void *tracking(lua_State *L, lua_State *co, const struct perfev_cotrack **t)
{
  *t = (const struct perfev_cotrack *)lua_touserdata(L, lua_upvalueindex(UP_TRACK));
  return co ? (*t)->tracking(lua_touserdata(L, lua_upvalueindex(UP_OWNER))) : NULL;
}

#if PERFEV_LUAJIT
/* LuaJIT: calls the original function with the arguments, co marked
 * running meanwhile. */
static int call_in(lua_State *L, lua_State *co)
{
  const struct perfev_cotrack *t;
  void *owner = tracking(L, co, &t);
  int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(UP_ORIG));
  lua_insert(L, 1);
  if (!owner) {
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L);
  }
  t->enter(owner, co, L);
  int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
  t->leave(owner, co, L);
  if (st != LUA_OK)
    return lua_error(L);
  return lua_gettop(L);
}

static int l_co_resume(lua_State *L)
{
  return call_in(L, lua_tothread(L, 1));
}

static int l_co_wrapped(lua_State *L)
{
  return call_in(L, lua_tothread(L, lua_upvalueindex(UP_CO)));
}
#else
/* Whether co can take nargs values and be resumed; else the original's
 * message on L. */
static int resumable(lua_State *L, lua_State *co, int nargs)
{
  if (!lua_checkstack(co, nargs)) {
    lua_pushliteral(L, "too many arguments to resume");
    return 0;
  }
#if LUA_VERSION_NUM < 504
  if (lua_status(co) == LUA_OK && lua_gettop(co) == 0) {   /* 5.4's lua_resume says it */
    lua_pushliteral(L, "cannot resume dead coroutine");
    return 0;
  }
#endif
  return 1;
}

/* Resumes co from L with the nargs values on top of L, marked running
 * meanwhile when tracked; leaves on L's top the values co returned or
 * yielded and gives their count, or leaves its error and gives -1. The
 * resume is made here, not by calling the original coroutine.resume:
 * a lua_call costs one of the C calls Lua allows nested (LUAI_MAXCCALLS,
 * 200), and with the resume's own that halved how deep coroutines nest
 * while profiling ("C stack overflow" at 98 wraps instead of 196). */
static int resume_co(lua_State *L, lua_State *co, int nargs)
{
  int nres;
  if (!resumable(L, co, nargs))
    return -1;
  const struct perfev_cotrack *t;
  void *owner = tracking(L, co, &t);
  lua_xmove(L, co, nargs);
  if (owner)
    t->enter(owner, co, L);
#if LUA_VERSION_NUM < 504
  int st = lua_resume(co, L, nargs);
  nres = lua_gettop(co);
#else
  int st = lua_resume(co, L, nargs, &nres);
#endif
  if (owner)
    t->leave(owner, co, L);
  if (st != LUA_OK && st != LUA_YIELD) {
    lua_xmove(co, L, 1);
    return -1;
  }
  if (!lua_checkstack(L, nres + 1)) {
    lua_pop(co, nres);
    lua_pushliteral(L, "too many results to resume");
    return -1;
  }
  lua_xmove(co, L, nres);
  return nres;
}

/* coroutine.resume while profiling */
static int l_co_resume(lua_State *L)
{
  lua_State *co = lua_tothread(L, 1);
  if (!co) {                            /* the original's message */
    lua_pushvalue(L, lua_upvalueindex(UP_ORIG));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
  }
  int n = resume_co(L, co, lua_gettop(L) - 1);
  lua_pushboolean(L, n >= 0);
  lua_insert(L, n >= 0 ? -(n + 1) : -2);
  return n >= 0 ? n + 1 : 2;
}

/* a coroutine.wrap function while profiling; raises as the original does,
 * the coroutine closed and a string error prefixed with the caller's
 * position */
static int l_co_wrapped(lua_State *L)
{
  lua_State *co = lua_tothread(L, lua_upvalueindex(UP_CO));
  int n = resume_co(L, co, lua_gettop(L));
  if (n >= 0)
    return n;
  int st = lua_status(co);
  if (st != LUA_OK && st != LUA_YIELD) {
#if LUA_VERSION_NUM >= 504
    st = lua_resetthread(co);           /* its to-be-closed variables */
    lua_xmove(co, L, 1);
#endif
  }
  if (st != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}
#endif

/* coroutine.wrap while profiling: the original's function, wrapped when
 * it is one whose coroutine we can reach (upvalue 1: 5.3, 5.4) */
static int l_co_wrap(lua_State *L)
{
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(UP_ORIG));
  lua_insert(L, 1);
  lua_call(L, 1, 1);                       /* the original's function */
  const char *up = lua_getupvalue(L, 1, 1);  /* its coroutine (5.3, 5.4) */
  if (!up || !lua_isthread(L, -1)) {
    if (up)
      lua_pop(L, 1);
    return 1;                              /* not what we know: left as it is */
  }
  lua_pushvalue(L, lua_upvalueindex(UP_OWNER));
  lua_pushvalue(L, lua_upvalueindex(UP_TRACK));
  lua_pushvalue(L, 1);
  lua_pushvalue(L, -4);
  lua_pushcclosure(L, l_co_wrapped, 4);
  return 1;
}

int perfev_cotrack_wrappers(lua_State *L, const struct perfev_cotrack *t)
{
  luaL_checktype(L, 2, LUA_TFUNCTION);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  for (int i = 2; i <= 3; i++) {
    lua_pushvalue(L, 1);
    lua_pushlightuserdata(L, (void *)t);
    lua_pushvalue(L, i);
    lua_pushcclosure(L, i == 2 ? l_co_resume : l_co_wrap, 3);
  }
  return 2;
}

const char *perfev_cotrack_name(lua_CFunction f)
{
  return f == l_co_resume ? "resume" : f == l_co_wrapped ? "wrap" : NULL;
}
