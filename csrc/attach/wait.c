/* The attach tracer's wait step, tr:wait(ms): the next stop of a traced
 * thread that the Lua layer must see, the others handled here.
 *
 *   "sample", tid, regs     stopped at our overflow signal (held: the Lua
 *                           layer reads its stack, then tr:resume(tid))
 *   "thread", tid           a new thread, traced (its event to be opened)
 *   "exit", tid, status     a thread exited (status: the wait status)
 *   "exec", tid             the target ran execve (held): its Lua is gone
 *   "gone"                  no traced thread is left
 *   "timeout"               ms passed
 *   "interrupted"           a signal with a handler came (Ctrl-C under lua.c)
 *
 * Handled here: a signal of the target's own is delivered (PTRACE_CONT
 * with it), a group-stop is kept (PTRACE_LISTEN), the first stop of a new
 * thread and other event stops go on.
 *
 * The step sleeps in sigtimedwait on SIGCHLD (which a tracee's stop sends
 * to its tracer), blocked only while it waits, and polls each traced
 * thread with waitpid(tid, WNOHANG): never waitpid(-1), which would reap
 * the host's own children. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include "attach.h"

static void set_reg(lua_State *L, const char *name, unsigned long long v)
{
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, name);
}

/* Pushes the registers of stopped thread tid; 0 or an errno. */
static int push_regs(lua_State *L, pid_t tid)
{
#if defined(__x86_64__)
  struct user_regs_struct r;
  if (ptrace(PTRACE_GETREGS, tid, 0, &r) != 0)
    return errno;
  lua_createtable(L, 0, 18);
  set_reg(L, "rip", r.rip); set_reg(L, "rsp", r.rsp); set_reg(L, "rbp", r.rbp);
  set_reg(L, "rax", r.rax); set_reg(L, "rbx", r.rbx); set_reg(L, "rcx", r.rcx);
  set_reg(L, "rdx", r.rdx); set_reg(L, "rsi", r.rsi); set_reg(L, "rdi", r.rdi);
  set_reg(L, "r8", r.r8); set_reg(L, "r9", r.r9); set_reg(L, "r10", r.r10);
  set_reg(L, "r11", r.r11); set_reg(L, "r12", r.r12); set_reg(L, "r13", r.r13);
  set_reg(L, "r14", r.r14); set_reg(L, "r15", r.r15);
  set_reg(L, "fs_base", r.fs_base);
  return 0;
#else
  (void)L;
  (void)tid;
  return ENOSYS;   /* the register names the readers know are x86-64's */
#endif
}

/* What one wait status of thread th means. Returns the number of values
 * pushed for the Lua layer, or 0 when the stop was handled here. */
static int handle(lua_State *L, struct attach_tracer *tr, struct attach_thread *th, int st)
{
  pid_t tid = th->tid;
  int sig, event;
  if (WIFEXITED(st) || WIFSIGNALED(st)) {
    th->state = T_GONE;
    lua_pushliteral(L, "exit");
    lua_pushinteger(L, tid);
    lua_pushinteger(L, st);
    return 3;
  }
  if (!WIFSTOPPED(st))
    return 0;
  sig = WSTOPSIG(st);
  event = st >> 16;
  if (event == PTRACE_EVENT_CLONE) {
    unsigned long child = 0;
    int ok = ptrace(PTRACE_GETEVENTMSG, tid, 0, &child) == 0 && child > 0;
    (void)ptrace(PTRACE_CONT, tid, 0, 0);
    if (!ok)
      return 0;
    if (!perfev_tracer_add(tr, (pid_t)child))   /* out of memory: let it go untraced */
      return 0;
    lua_pushliteral(L, "thread");
    lua_pushinteger(L, (lua_Integer)child);
    return 2;
  }
  if (event == PTRACE_EVENT_EXEC) {
    th->state = T_HELD;
    lua_pushliteral(L, "exec");
    lua_pushinteger(L, tid);
    return 2;
  }
  if (event == PTRACE_EVENT_STOP) {
    if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
      (void)ptrace(PTRACE_LISTEN, tid, 0, 0);   /* a group-stop: stays stopped */
    else
      (void)ptrace(PTRACE_CONT, tid, 0, 0);     /* a new thread's first stop */
    return 0;
  }
  if (event != 0) {
    (void)ptrace(PTRACE_CONT, tid, 0, 0);
    return 0;
  }
  /* a signal-delivery-stop: ours, or the target's own */
  if (sig == tr->signo) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 && si.si_fd == th->fd && th->fd >= 0) {
      int err;
      th->state = T_HELD;
      lua_pushliteral(L, "sample");
      lua_pushinteger(L, tid);
      err = push_regs(L, tid);
      if (err) {
        lua_pop(L, 1);
        lua_pushboolean(L, 0);
        lua_pushstring(L, strerror(err));
        return 4;
      }
      return 3;
    }
  }
  (void)ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig);   /* the target's own: delivered */
  return 0;
}

/* One pass over the threads: the values pushed for the first stop the Lua
 * layer must see, 0 when none; *live: threads not gone. */
static int scan(lua_State *L, struct attach_tracer *tr, int *live)
{
  *live = 0;
  for (size_t k = 0; k < tr->n; k++) {
    size_t i = (tr->next + k) % tr->n;
    struct attach_thread *th = &tr->t[i];
    int st, n;
    pid_t r;
    if (th->state == T_GONE)
      continue;
    (*live)++;
    if (th->state == T_HELD)
      continue;
    r = waitpid(th->tid, &st, __WALL | WNOHANG);
    if (r == 0)
      continue;
    if (r < 0) {
      if (errno == EINTR)
        continue;
      th->state = T_GONE;   /* ECHILD: not ours any more (reaped elsewhere) */
      lua_pushliteral(L, "exit");
      lua_pushinteger(L, th->tid);
      return 2;
    }
    n = handle(L, tr, th, st);
    if (n) {
      tr->next = (i + 1) % tr->n;   /* the next pass starts after it: every thread its turn */
      return n;
    }
    /* handled here: tr->t may have grown (realloc), th is not used again */
    k--;                    /* the same thread again: another stop may be queued */
  }
  return 0;
}

static long long now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int perfev_tracer_wait(lua_State *L)
{
  struct attach_tracer *tr = perfev_tracer_check(L);
  lua_Number ms = luaL_optnumber(L, 2, 100);
  long long deadline = now_ms() + (long long)(ms > 0 ? ms : 0);
  sigset_t set, old;
  int n = 0, live = 0;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  if (pthread_sigmask(SIG_BLOCK, &set, &old) != 0)
    return perfev_push_errno(L, errno, "perfev.tracer:wait: pthread_sigmask");
  for (;;) {
    long long left;
    struct timespec ts;
    n = scan(L, tr, &live);
    if (n)
      break;
    if (live == 0) {
      lua_pushliteral(L, "gone");
      n = 1;
      break;
    }
    left = deadline - now_ms();
    if (left <= 0) {
      lua_pushliteral(L, "timeout");
      n = 1;
      break;
    }
    ts.tv_sec = (time_t)(left / 1000);
    ts.tv_nsec = (long)(left % 1000) * 1000000L;
    if (sigtimedwait(&set, NULL, &ts) < 0 && errno == EINTR) {
      lua_pushliteral(L, "interrupted");
      n = 1;
      break;
    }
  }
  /* a SIGCHLD left pending is delivered as the host would have had it */
  (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
  return n;
}
