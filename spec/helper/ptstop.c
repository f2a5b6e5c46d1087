/* ptstop: a C module for the specs (not part of perfev): stops a thread of
 * another process with ptrace and gives its registers, so that an attach
 * reader can be driven before the attach engine does it.
 *
 *   local pt = require "ptstop"
 *   pt.seize(tid)      -> true | nil, message   (PTRACE_SEIZE, no stop)
 *   pt.stop(tid)       -> regs | nil, message   (PTRACE_INTERRUPT, waits for the stop)
 *                         regs: { rip =, rsp =, rbp =, rax =, ..., r15 = }
 *   pt.cont(tid)       -> true | nil, message   (PTRACE_CONT, no signal)
 *   pt.detach(tid)     -> true | nil, message
 *
 * Register values below 2^53 are exact numbers on every Lua. */
#include <errno.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <lua.h>
#include <lauxlib.h>
#include "compat.h"

static int fail(lua_State *L, const char *what)
{
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", what, strerror(errno));
  return 2;
}

static pid_t tid_arg(lua_State *L)
{
  return (pid_t)luaL_checkinteger(L, 1);
}

static int pt_seize(lua_State *L)
{
  if (ptrace(PTRACE_SEIZE, tid_arg(L), NULL, NULL) != 0)
    return fail(L, "PTRACE_SEIZE");
  lua_pushboolean(L, 1);
  return 1;
}

static void set_reg(lua_State *L, const char *name, unsigned long long v)
{
  if (v < (1ULL << 53))
    lua_pushinteger(L, (lua_Integer)v);
  else
    lua_pushnumber(L, (lua_Number)v);
  lua_setfield(L, -2, name);
}

static int pt_stop(lua_State *L)
{
  pid_t tid = tid_arg(L);
  int status;
  struct user_regs_struct r;
  if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0)
    return fail(L, "PTRACE_INTERRUPT");
  for (;;) {
    pid_t w = waitpid(tid, &status, __WALL);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return fail(L, "waitpid");
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      lua_pushnil(L);
      lua_pushliteral(L, "the thread exited");
      return 2;
    }
    if (WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP)
      break;
    /* a signal-delivery-stop before our stop: deliver it, wait again */
    if (WIFSTOPPED(status)
        && ptrace(PTRACE_CONT, tid, NULL, (void *)(long)WSTOPSIG(status)) != 0)
      return fail(L, "PTRACE_CONT");
  }
  if (ptrace(PTRACE_GETREGS, tid, NULL, &r) != 0)
    return fail(L, "PTRACE_GETREGS");
  lua_createtable(L, 0, 18);
  set_reg(L, "rip", r.rip); set_reg(L, "rsp", r.rsp); set_reg(L, "rbp", r.rbp);
  set_reg(L, "rax", r.rax); set_reg(L, "rbx", r.rbx); set_reg(L, "rcx", r.rcx);
  set_reg(L, "rdx", r.rdx); set_reg(L, "rsi", r.rsi); set_reg(L, "rdi", r.rdi);
  set_reg(L, "r8", r.r8); set_reg(L, "r9", r.r9); set_reg(L, "r10", r.r10);
  set_reg(L, "r11", r.r11); set_reg(L, "r12", r.r12); set_reg(L, "r13", r.r13);
  set_reg(L, "r14", r.r14); set_reg(L, "r15", r.r15);
  return 1;
}

static int pt_cont(lua_State *L)
{
  if (ptrace(PTRACE_CONT, tid_arg(L), NULL, NULL) != 0)
    return fail(L, "PTRACE_CONT");
  lua_pushboolean(L, 1);
  return 1;
}

static int pt_detach(lua_State *L)
{
  if (ptrace(PTRACE_DETACH, tid_arg(L), NULL, NULL) != 0)
    return fail(L, "PTRACE_DETACH");
  lua_pushboolean(L, 1);
  return 1;
}

int luaopen_ptstop(lua_State *L)
{
  static const luaL_Reg fns[] = {
    { "seize", pt_seize }, { "stop", pt_stop }, { "cont", pt_cont },
    { "detach", pt_detach }, { NULL, NULL }
  };
  luaL_newlib(L, fns);   /* compat.h: also for 5.1 */
  return 1;
}
