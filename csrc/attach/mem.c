/* What perfev.attach reads of another process (lua/perfev/attach/target.lua):
 * its memory (core.vm_read: process_vm_readv, which needs the same
 * permission as ptrace (PTRACE_MODE_ATTACH_REALCREDS) and never changes
 * the target; a read that crosses into an unmapped page fails whole: a
 * reader never sees part of a value) and its /proc links (core.readlink:
 * /proc/PID/exe, cwd, root). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "attach.h"

#define VM_READ_MAX (16u << 20)   /* one read: 16 MiB */

/* core.vm_read(pid, addr, len) -> bytes | nil, message, errno */
static int l_vm_read(lua_State *L)
{
  int pid = perfev_int_arg(L, 1, 0, "perfev.vm_read", "pid");
  uint64_t addr = 0;
  lua_Integer len = luaL_checkinteger(L, 3);
  char small[256], *buf = small;
  struct iovec local, remote;
  ssize_t got;
  int err;
  if (!perfev_tou64(L, 2, &addr))
    return luaL_argerror(L, 2, "an address (an integer)");
  if (len < 0 || (uint64_t)len > VM_READ_MAX)
    return luaL_error(L, "perfev.vm_read: length %d is out of range (0..%d)", (int)len,
                      (int)VM_READ_MAX);
  if (len == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  if ((size_t)len > sizeof small && !(buf = (char *)malloc((size_t)len)))
    return perfev_push_errno(L, ENOMEM, "perfev.vm_read");
  local.iov_base = buf;
  local.iov_len = (size_t)len;
  remote.iov_base = (void *)(uintptr_t)addr;
  remote.iov_len = (size_t)len;
  got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  err = got < 0 ? errno : got < len ? EFAULT : 0;
  if (!err)
    lua_pushlstring(L, buf, (size_t)len);
  if (buf != small)
    free(buf);
  if (err) {
    lua_pushnil(L);
    lua_pushfstring(L, "perfev.vm_read: %d bytes at %p of process %d: %s%s", (int)len,
                    (void *)(uintptr_t)addr, pid, strerror(err),
                    err == EFAULT ? " (not mapped in the target)"
                    : err == EPERM ? " (reading another process's memory needs the right to "
                                     "trace it: its user, root or CAP_SYS_PTRACE)"
                    : err == ESRCH ? " (no such process)" : "");
    lua_pushinteger(L, err);
    return 3;
  }
  return 1;
}

/* core.readlink(path) -> target | nil, message, errno */
static int l_readlink(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  char buf[4096];
  ssize_t n = readlink(path, buf, sizeof buf);
  if (n < 0)
    return perfev_push_errno(L, errno, path);
  if ((size_t)n == sizeof buf)
    return perfev_push_errno(L, ENAMETOOLONG, path);
  lua_pushlstring(L, buf, (size_t)n);
  return 1;
}

int perfev_attach_mem_open_lib(lua_State *L)
{
  lua_pushcfunction(L, l_readlink);
  lua_setfield(L, -2, "readlink");
  lua_pushcfunction(L, l_vm_read);
  lua_setfield(L, -2, "vm_read");
  return 0;
}
