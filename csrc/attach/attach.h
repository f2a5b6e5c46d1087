/* The attach tracer (perfev.attach): what attach/tracer.c (seize, route,
 * resume, detach) and attach/wait.c (the wait step) share. */
#ifndef PERFEV_ATTACH_H
#define PERFEV_ATTACH_H

#include <sys/types.h>
#include "perfev.h"

#define PERFEV_TRACER_MT "perfev.tracer"

enum attach_state {
  T_RUNNING,    /* resumed (or never stopped since seized) */
  T_HELD,       /* stopped at a stop the wait step returned: Lua resumes it */
  T_GONE,       /* exited, reaped */
};

struct attach_thread {
  pid_t tid;
  int fd;                  /* the routed event's fd (ours), -1 none */
  enum attach_state state;
};

struct attach_tracer {
  pid_t pid;               /* the target process (thread group id) */
  pid_t tracer_tid;        /* the thread that seized: every ptrace call is its */
  int signo;               /* the overflow signal, suppressed at each sample */
  int closed;
  size_t n, cap, next;     /* threads; next: where the wait step's scan starts */
  struct attach_thread *t;
};

/* attach/tracer.c */
struct attach_tracer *perfev_tracer_check(lua_State *L);   /* self at 1; raises if closed */
/* Adds tid (seized already) to the tracer; NULL when out of memory. */
struct attach_thread *perfev_tracer_add(struct attach_tracer *tr, pid_t tid);

/* attach/wait.c: tracer:wait(ms) */
int perfev_tracer_wait(lua_State *L);

int perfev_attach_open_lib(lua_State *L);       /* core.attach_tracer (attach/tracer.c) */
int perfev_attach_mem_open_lib(lua_State *L);   /* core.vm_read (attach/mem.c) */

#endif
