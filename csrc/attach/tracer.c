/* The attach tracer (perfev.attach, lua/perfev/attach/init.lua): every
 * thread of a running process PTRACE_SEIZEd (and those it starts,
 * PTRACE_O_TRACECLONE), each thread's perf event routed to that thread's
 * own signal (F_SETOWN_EX F_OWNER_TID, F_SETSIG, O_ASYNC: csrc/profiler/profiler.c
 * does the same in-process), so that an overflow stops the thread in a
 * signal-delivery-stop at the sample; the wait step (attach/wait.c)
 * returns it with its registers, tracer:resume(tid) lets it go on with the
 * signal suppressed. close (also __gc, __close) detaches every thread,
 * delivering any signal of the target's own it held.
 *
 * No PTRACE_O_EXITKILL: if perfev dies, the kernel detaches the threads
 * and they run on; a signal of ours still queued is one whose default
 * action is to ignore (the Lua layer picks one the target does not catch).
 * No PTRACE_O_TRACEFORK/VFORK: a child the target forks is never traced,
 * and a per-thread event (inherit = 0) is not inherited: it runs as if
 * perfev were not there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
#include "attach.h"

#define SEIZE_OPTIONS (PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC)
#define SEIZE_PASSES 64       /* /proc/PID/task read again while threads appear */

struct attach_tracer *perfev_tracer_check(lua_State *L)
{
  struct attach_tracer *tr = (struct attach_tracer *)perfev_self(L, PERFEV_TRACER_MT);
  if (tr->closed)
    luaL_error(L, "perfev.tracer: attempt to use a closed tracer");
  if (gettid() != tr->tracer_tid)
    luaL_error(L, "perfev.tracer: used from thread %d, but thread %d traces: ptrace answers "
                  "the tracing thread alone", (int)gettid(), (int)tr->tracer_tid);
  return tr;
}

/* The thread tid of the tracer (not gone), or NULL. */
static struct attach_thread *tracer_find(struct attach_tracer *tr, pid_t tid)
{
  for (size_t i = 0; i < tr->n; i++)
    if (tr->t[i].tid == tid && tr->t[i].state != T_GONE)
      return &tr->t[i];
  return NULL;
}

struct attach_thread *perfev_tracer_add(struct attach_tracer *tr, pid_t tid)
{
  struct attach_thread *th = tracer_find(tr, tid);
  if (th)
    return th;
  if (tr->n == tr->cap) {
    size_t cap = tr->cap ? tr->cap * 2 : 16;
    void *p = realloc(tr->t, cap * sizeof *tr->t);
    if (!p)
      return NULL;
    tr->t = (struct attach_thread *)p;
    tr->cap = cap;
  }
  th = &tr->t[tr->n++];
  th->tid = tid;
  th->fd = -1;
  th->state = T_RUNNING;
  return th;
}

/* Whether fd is the routed event fd of one of the threads. */
static int tracer_owns_fd(const struct attach_tracer *tr, int fd)
{
  for (size_t i = 0; i < tr->n; i++)
    if (tr->t[i].fd == fd && fd >= 0)
      return 1;
  return 0;
}

/* ---- seizing ---- */

/* The pid of the process tracing pid now (TracerPid in /proc/PID/status), 0 none. */
static int tracer_of(pid_t pid)
{
  char path[64], line[256];
  int who = 0;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "TracerPid: %d", &who) == 1)
      break;
  fclose(f);
  return who;
}

static int read_level(const char *path)
{
  int level = -1;
  FILE *f = fopen(path, "re");
  if (f) {
    if (fscanf(f, "%d", &level) != 1)
      level = -1;
    fclose(f);
  }
  return level;
}

/* nil, "ptrace: ...: what to do", errno */
static int push_seize_error(lua_State *L, int err, pid_t pid, pid_t tid)
{
  luaL_Buffer b;
  char line[320];
  lua_pushnil(L);
  luaL_buffinit(L, &b);
  snprintf(line, sizeof line, "perfev.attach: cannot trace process %d (PTRACE_SEIZE of thread %d): %s: ",
           (int)pid, (int)tid, strerror(err));
  luaL_addstring(&b, line);
  if (err == ESRCH) {
    snprintf(line, sizeof line, "no process %d (it is not running, or it exited)", (int)pid);
    luaL_addstring(&b, line);
  } else if (err == EPERM || err == EACCES) {
    int other = tracer_of(tid), scope = read_level("/proc/sys/kernel/yama/ptrace_scope");
    if (other > 0) {
      snprintf(line, sizeof line, "process %d traces it already (a debugger, strace, another "
                                  "perfev): a thread has one tracer at a time; ", other);
      luaL_addstring(&b, line);
    }
    if (scope >= 0) {
      snprintf(line, sizeof line, "kernel.yama.ptrace_scope is %d%s; ", scope,
               scope == 1 ? " (a process may trace its descendants alone)"
               : scope == 2 ? " (only CAP_SYS_PTRACE may trace)"
               : scope == 3 ? " (no process may trace: until reboot)" : "");
      luaL_addstring(&b, line);
    }
    luaL_addstring(&b, "run perfev as the target's user (with the same or fewer privileges), "
                       "as root, or with CAP_SYS_PTRACE (setcap cap_sys_ptrace,cap_perfmon+ep "
                       "on the interpreter, or `sudo`)");
    if (scope >= 1 && scope <= 2)
      luaL_addstring(&b, ", or lower the scope: sysctl -w kernel.yama.ptrace_scope=0");
  } else if (err == EBUSY) {
    luaL_addstring(&b, "the thread is being traced by another tracer");
  }
  luaL_pushresult(&b);
  lua_pushinteger(L, err);
  return 3;
}

/* Seizes every thread listed in /proc/PID/task, until a pass finds none
 * new (a thread started by one not seized yet is not seen by TRACECLONE).
 * 0, or the errno of the failed seize (*bad: its thread). */
static int seize_all(struct attach_tracer *tr, pid_t *bad)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)tr->pid);
  for (int pass = 0; pass < SEIZE_PASSES; pass++) {
    int found = 0;
    DIR *d = opendir(path);
    struct dirent *e;
    if (!d) {
      *bad = tr->pid;
      return errno == ENOENT ? ESRCH : errno;
    }
    while ((e = readdir(d)) != NULL) {
      char *end;
      long tid = strtol(e->d_name, &end, 10);
      if (*end || tid <= 0 || tracer_find(tr, (pid_t)tid))
        continue;
      if (ptrace(PTRACE_SEIZE, (pid_t)tid, 0, (void *)(long)SEIZE_OPTIONS) != 0) {
        int err = errno;
        if (err == ESRCH && tid != tr->pid)   /* a thread that exited meanwhile */
          continue;
        closedir(d);
        *bad = (pid_t)tid;
        return err;
      }
      if (!perfev_tracer_add(tr, (pid_t)tid)) {
        closedir(d);
        (void)ptrace(PTRACE_DETACH, (pid_t)tid, 0, 0);
        *bad = (pid_t)tid;
        return ENOMEM;
      }
      found = 1;
    }
    closedir(d);
    if (!found)
      return 0;
  }
  return 0;
}

/* ---- detaching ---- */

/* Stops our signals: no overflow of ours is routed any more. */
static void unroute(struct attach_tracer *tr)
{
  for (size_t i = 0; i < tr->n; i++) {
    int fd = tr->t[i].fd, fl;
    if (fd < 0)
      continue;
    fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
      (void)fcntl(fd, F_SETFL, fl & ~O_ASYNC);
  }
}

/* Detaches one running thread: interrupted, waited for its stop, let go
 * with the signal it stopped for when that is the target's own. */
static void detach_running(struct attach_tracer *tr, size_t i)
{
  pid_t tid = tr->t[i].tid;
  if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) {
    tr->t[i].state = T_GONE;   /* ESRCH: gone already (reaped below by the kernel) */
    return;
  }
  for (;;) {
    int st, sig, event;
    pid_t r = waitpid(tid, &st, __WALL);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st))
      break;
    if (!WIFSTOPPED(st))
      continue;
    sig = WSTOPSIG(st);
    event = st >> 16;
    if (event == PTRACE_EVENT_CLONE) {
      unsigned long child = 0;
      /* the new thread is traced from birth: detached in its turn */
      if (ptrace(PTRACE_GETEVENTMSG, tid, 0, &child) == 0 && child > 0)
        (void)perfev_tracer_add(tr, (pid_t)child);
      sig = 0;
    } else if (event != 0) {
      sig = 0;                 /* the interrupt's stop, a group-stop, exec */
    } else {
      siginfo_t si;
      if (sig == tr->signo && ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 &&
          tracer_owns_fd(tr, si.si_fd))
        sig = 0;               /* ours: suppressed */
    }
    (void)ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig);
    break;
  }
  tr->t[i].state = T_GONE;
}

static void detach_all(struct attach_tracer *tr)
{
  unroute(tr);
  /* tr->n may grow: a thread started meanwhile is detached in its turn */
  for (size_t i = 0; i < tr->n; i++) {
    if (tr->t[i].state == T_HELD) {
      (void)ptrace(PTRACE_DETACH, tr->t[i].tid, 0, 0);
      tr->t[i].state = T_GONE;
    } else if (tr->t[i].state == T_RUNNING) {
      detach_running(tr, i);
    }
  }
}

static void tracer_close(struct attach_tracer *tr)
{
  if (tr->closed)
    return;
  tr->closed = 1;
  /* ptrace answers the tracing thread alone: a __gc run on another thread
   * cannot detach, and the threads are let go when that thread ends */
  if (gettid() == tr->tracer_tid)
    detach_all(tr);
  free(tr->t);
  tr->t = NULL;
  tr->n = tr->cap = 0;
}

/* ---- methods ---- */

/* core.attach_tracer(pid, signo) -> tracer | nil, message, errno */
static int l_attach_tracer(lua_State *L)
{
  int pid = perfev_int_arg(L, 1, 0, "perfev.attach_tracer", "pid");
  int signo = perfev_int_arg(L, 2, SIGURG, "perfev.attach_tracer", "signal");
  pid_t bad = pid;
  int err;
  if (pid <= 0)
    return luaL_error(L, "perfev.attach_tracer: pid must be a process id above 0, got %d", pid);
  if (signo <= 0 || signo >= SIGRTMIN || signo == SIGKILL || signo == SIGSTOP)
    return luaL_error(L, "perfev.attach_tracer: signal %d cannot be the overflow signal", signo);
  if (pid == getpid())
    return luaL_error(L, "perfev.attach_tracer: pid %d is this process: a process cannot trace "
                         "itself (perfev.profile profiles it)", pid);
  struct attach_tracer *tr = (struct attach_tracer *)perfev_newuserdata(L, sizeof *tr);
  memset(tr, 0, sizeof *tr);
  tr->pid = pid;
  tr->signo = signo;
  tr->tracer_tid = gettid();
  tr->closed = 1;            /* until seized: __gc has nothing to undo */
  luaL_setmetatable(L, PERFEV_TRACER_MT);
  lua_newtable(L);           /* uservalue: tid -> the routed event (keeps its fd ours) */
  perfev_setiuservalue(L, -2);
  tr->closed = 0;
  err = seize_all(tr, &bad);
  if (err) {
    tracer_close(tr);
    return push_seize_error(L, err, pid, bad);
  }
  return 1;
}

/* tr:route(tid, event) -> true | nil, message, errno: the event's overflow
 * signal goes to thread tid, which stops at it. */
static int l_route(lua_State *L)
{
  struct attach_tracer *tr = perfev_tracer_check(L);
  int tid = perfev_int_arg(L, 2, 0, "perfev.tracer:route", "tid");
  struct perfev_event *ev = perfev_event_check(L, 3);
  struct attach_thread *th = tracer_find(tr, tid);
  struct f_owner_ex owner = { F_OWNER_TID, tid };
  int fl;
  if (!th)
    return luaL_error(L, "perfev.tracer:route: thread %d is not traced", tid);
  if (fcntl(ev->fd, F_SETOWN_EX, &owner) != 0 || fcntl(ev->fd, F_SETSIG, tr->signo) != 0)
    return perfev_push_errno(L, errno, "perfev.tracer:route: fcntl");
  fl = fcntl(ev->fd, F_GETFL);
  if (fl < 0 || fcntl(ev->fd, F_SETFL, fl | O_ASYNC) != 0)
    return perfev_push_errno(L, errno, "perfev.tracer:route: fcntl");
  th->fd = ev->fd;
  perfev_getiuservalue(L, 1);
  lua_pushvalue(L, 3);
  lua_rawseti(L, -2, tid);
  lua_pushboolean(L, 1);
  return 1;
}

/* tr:resume(tid) -> true | nil, message, errno: a thread the wait step
 * returned held goes on; the signal it stopped for is suppressed. */
static int l_resume(lua_State *L)
{
  struct attach_tracer *tr = perfev_tracer_check(L);
  int tid = perfev_int_arg(L, 2, 0, "perfev.tracer:resume", "tid");
  struct attach_thread *th = tracer_find(tr, tid);
  if (!th || th->state != T_HELD)
    return luaL_error(L, "perfev.tracer:resume: thread %d is not held", tid);
  th->state = T_RUNNING;
  if (ptrace(PTRACE_CONT, tid, 0, 0) != 0 && errno != ESRCH)   /* ESRCH: killed meanwhile */
    return perfev_push_errno(L, errno, "perfev.tracer:resume: ptrace");
  lua_pushboolean(L, 1);
  return 1;
}

/* tr:tids() -> { tid, ... } the threads traced now */
static int l_tids(lua_State *L)
{
  struct attach_tracer *tr = perfev_tracer_check(L);
  lua_Integer k = 0;
  lua_newtable(L);
  for (size_t i = 0; i < tr->n; i++)
    if (tr->t[i].state != T_GONE) {
      lua_pushinteger(L, tr->t[i].tid);
      lua_rawseti(L, -2, ++k);
    }
  return 1;
}

static int l_pid(lua_State *L)
{
  struct attach_tracer *tr = (struct attach_tracer *)perfev_self(L, PERFEV_TRACER_MT);
  lua_pushinteger(L, tr->pid);
  return 1;
}

static int l_closed(lua_State *L)
{
  struct attach_tracer *tr = (struct attach_tracer *)perfev_self(L, PERFEV_TRACER_MT);
  lua_pushboolean(L, tr->closed);
  return 1;
}

/* tr:close(): every thread detached (also __gc, __close) */
static int l_close(lua_State *L)
{
  struct attach_tracer *tr = (struct attach_tracer *)perfev_self(L, PERFEV_TRACER_MT);
  if (!tr)                          /* __gc given another self */
    return 0;
  tracer_close(tr);
  lua_pushnil(L);
  perfev_setiuservalue(L, 1);
  return 0;
}

/* "perfev.tracer(pid 123, 2 threads, signal 23)", or "(pid 123, closed)" */
static int l_tostring(lua_State *L)
{
  const struct attach_tracer *tr = (const struct attach_tracer *)perfev_self(L, PERFEV_TRACER_MT);
  if (tr->closed)
    lua_pushfstring(L, "%s(pid %d, closed)", PERFEV_TRACER_MT, (int)tr->pid);
  else
    lua_pushfstring(L, "%s(pid %d, %d threads, signal %d)", PERFEV_TRACER_MT, (int)tr->pid, (int)tr->n,
                    tr->signo);
  return 1;
}

int perfev_attach_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = { { "__gc", l_close }, { "__close", l_close }, { "__tostring", l_tostring },
                                   { NULL, NULL } };
  static const luaL_Reg methods[] = {
    { "route", l_route }, { "resume", l_resume }, { "wait", perfev_tracer_wait },
    { "tids", l_tids }, { "pid", l_pid }, { "closed", l_closed }, { "close", l_close },
    { NULL, NULL }
  };
  perfev_class_register(L, PERFEV_TRACER_MT, meta, methods);
  lua_pushcfunction(L, l_attach_tracer);
  lua_setfield(L, -2, "attach_tracer");
  return 0;
}
