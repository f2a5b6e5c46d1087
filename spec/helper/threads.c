/* threads: a C module for the specs (not part of perfev): CPU work on the
 * calling thread or on another pthread, to show what pid = 0 counts.
 *
 *   local th = require "threads"
 *   th.burn(ms)          -> burns ms of the calling thread's CPU time
 *   th.gettid()          -> the calling thread's tid
 *   local t = th.start(ms) -> a new pthread, parked until t:go()
 *   t:tid()              -> its tid (a /proc/self/task entry while parked)
 *   t:go()               -> lets it burn ms of its own CPU time and joins it
 *
 * A parked thread that is collected unburnt is released with no work and
 * joined by __gc. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include "compat.h"

#define THREAD_MT "perfev.spec.thread"

static double thread_cpu_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Burns ms of this thread's CPU time; returns a value the loop depends on. */
static unsigned long burn_ms(double ms)
{
  double stop = thread_cpu_ms() + ms;
  volatile unsigned long x = 0;
  while (thread_cpu_ms() < stop)
    for (int i = 0; i < 10000; i++)
      x = x * 31 + (unsigned long)i;
  return x;
}

struct th {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pid_t tid;
  int started, ready, go, joined;
  double ms;
};

static void *th_main(void *arg)
{
  struct th *t = arg;
  pthread_mutex_lock(&t->mu);
  t->tid = (pid_t)syscall(SYS_gettid);
  t->ready = 1;
  pthread_cond_broadcast(&t->cv);
  while (!t->go)
    pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  burn_ms(t->ms);
  return NULL;
}

static void th_release(struct th *t, double ms)
{
  if (!t->started || t->joined)
    return;
  pthread_mutex_lock(&t->mu);
  t->ms = ms;
  t->go = 1;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->thread, NULL);
  t->joined = 1;
}

static int l_start(lua_State *L)
{
  double ms = luaL_checknumber(L, 1);
  struct th *t = (struct th *)lua_newuserdata(L, sizeof *t);
  int err;
  memset(t, 0, sizeof *t);
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->ms = ms;
  luaL_setmetatable(L, THREAD_MT);
  err = pthread_create(&t->thread, NULL, th_main, t);
  if (err != 0)
    return luaL_error(L, "threads.start: pthread_create: %s", strerror(err));
  t->started = 1;
  pthread_mutex_lock(&t->mu);
  while (!t->ready)
    pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
  return 1;
}

static int l_tid(lua_State *L)
{
  struct th *t = (struct th *)luaL_checkudata(L, 1, THREAD_MT);
  lua_pushinteger(L, t->tid);
  return 1;
}

static int l_go(lua_State *L)
{
  struct th *t = (struct th *)luaL_checkudata(L, 1, THREAD_MT);
  th_release(t, t->ms);
  return 0;
}

static int l_gc(lua_State *L)
{
  struct th *t = (struct th *)luaL_checkudata(L, 1, THREAD_MT);
  th_release(t, 0);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  return 0;
}

static int l_burn(lua_State *L)
{
  lua_pushinteger(L, (lua_Integer)(burn_ms(luaL_checknumber(L, 1)) & 0xff));
  return 1;
}

static int l_gettid(lua_State *L)
{
  lua_pushinteger(L, (lua_Integer)syscall(SYS_gettid));
  return 1;
}

int luaopen_threads(lua_State *L);

int luaopen_threads(lua_State *L)
{
  static const luaL_Reg methods[] = { { "tid", l_tid }, { "go", l_go }, { NULL, NULL } };
  static const luaL_Reg funcs[] = {
    { "start", l_start }, { "burn", l_burn }, { "gettid", l_gettid }, { NULL, NULL }
  };
  luaL_newmetatable(L, THREAD_MT);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
