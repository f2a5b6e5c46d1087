/* The coroutine tracker shared by the CPU profiler (profiler/profiler.c)
 * and the allocation profiler (allocprof/allocprof.c): coroutine.resume
 * and coroutine.wrap replaced while profiling by closures that keep the
 * chain of resumes (which coroutine runs, which thread resumed it) and
 * call their owner around each resume it tracks. */
#ifndef PERFEV_COTRACK_H
#define PERFEV_COTRACK_H

#include "perfev.h"

#define PERFEV_COCHAIN_MAX 64      /* nested resumes tracked */

/* The level of a resumer's stack its walk starts at: the wrapper, which
 * resumes the coroutine itself (on LuaJIT it calls the original resume,
 * level 0 there, which is left out). */
#define PERFEV_COTRACK_RESUMER_LEVEL (PERFEV_LUAJIT ? 1 : 0)

struct perfev_colink {
  lua_State *co, *resumer;
};

/* The resumes in progress, outermost first. */
struct perfev_cochain {
  struct perfev_colink link[PERFEV_COCHAIN_MAX];
  int depth;
};

/* What the wrappers' owner does. ud: the userdata given to
 * perfev_cotrack_wrappers (upvalue 1 of every wrapper). */
struct perfev_cotrack {
  /* The owner to call around a resume of a coroutine, or NULL when
   * this resume is not tracked (not running, the chain full). */
  void *(*tracking)(void *ud);
  /* co is about to run, resumed by from; and it stopped (returned,
   * yielded or failed: lua_status(co) says which). */
  void (*enter)(void *owner, lua_State *co, lua_State *from);
  void (*leave)(void *owner, lua_State *co, lua_State *from);
};

/* The thread that resumed co, or NULL. */
lua_State *perfev_cochain_resumer(const struct perfev_cochain *c, const lua_State *co);
/* Whether one more resume fits. */
int perfev_cochain_room(const struct perfev_cochain *c);
void perfev_cochain_push(struct perfev_cochain *c, lua_State *co, lua_State *from);
/* Drops the innermost link (none when the chain was emptied meanwhile: a
 * stop inside the coroutine). */
void perfev_cochain_pop(struct perfev_cochain *c);

/* [-0, +2] The self at index 1 (a userdata, checked by the caller) and
 * the original coroutine.resume and coroutine.wrap at 2 and 3 -> resume',
 * wrap' calling t around the resumes they track. t must be static. */
int perfev_cotrack_wrappers(lua_State *L, const struct perfev_cotrack *t);

/* "resume" or "wrap" when f is one of the wrappers (the C function the
 * user called: resume, or one made by wrap), else NULL. */
const char *perfev_cotrack_name(lua_CFunction f);

#endif
