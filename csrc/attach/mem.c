/* What perfev.attach reads of another process (lua/perfev/attach/target.lua):
 * its memory (core.vm_read: process_vm_readv, which needs the same
 * permission as ptrace (PTRACE_MODE_ATTACH_REALCREDS) and never changes
 * the target; a read that crosses into an unmapped page fails whole: a
 * reader never sees part of a value; core.vm_read_pages: many blocks in
 * one call, the pages a sample touched read again at the next) and its
 * /proc links (core.readlink:
 * /proc/PID/exe, cwd, root). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "attach.h"

#define VM_READ_MAX (16u << 20)   /* one read: 16 MiB */
#define VM_PAGES_MAX 256          /* core.vm_read_pages: blocks at most */

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

/* core.vm_read_pages(pid, addrs, size) -> { bytes, ... }: the blocks of
 * size bytes at each address of the list addrs, in one process_vm_readv
 * (a reader's pages of the previous sample, read again at once). The
 * kernel stops at the first block it cannot read whole: the result holds
 * the blocks before it, in the order of addrs (the rest are left out:
 * read one by one, each with its own message). */
static int l_vm_read_pages(lua_State *L)
{
  int pid = perfev_int_arg(L, 1, 0, "perfev.vm_read_pages", "pid");
  lua_Integer size = luaL_checkinteger(L, 3);
  struct iovec local, remote[VM_PAGES_MAX];
  size_t n, i, whole;
  ssize_t got;
  char *buf;
  luaL_checktype(L, 2, LUA_TTABLE);
  if (size <= 0 || size > 65536)
    return luaL_error(L, "perfev.vm_read_pages: size %d is out of range (1..65536)", (int)size);
  n = (size_t)lua_rawlen(L, 2);
  if (n > VM_PAGES_MAX)
    n = VM_PAGES_MAX;
  for (i = 0; i < n; i++) {
    uint64_t addr = 0;
    lua_rawgeti(L, 2, (lua_Integer)(i + 1));
    if (!perfev_tou64(L, -1, &addr))
      return luaL_error(L, "perfev.vm_read_pages: address %d is not an integer", (int)(i + 1));
    lua_pop(L, 1);
    remote[i].iov_base = (void *)(uintptr_t)addr;
    remote[i].iov_len = (size_t)size;
  }
  lua_createtable(L, (int)n, 0);
  if (n == 0)
    return 1;
  if (!(buf = (char *)malloc(n * (size_t)size)))
    return perfev_push_errno(L, ENOMEM, "perfev.vm_read_pages");
  local.iov_base = buf;
  local.iov_len = n * (size_t)size;
  got = process_vm_readv(pid, &local, 1, remote, (unsigned long)n, 0);
  whole = got > 0 ? (size_t)got / (size_t)size : 0;
  for (i = 0; i < whole; i++) {
    lua_pushlstring(L, buf + i * (size_t)size, (size_t)size);
    lua_rawseti(L, -2, (lua_Integer)(i + 1));
  }
  free(buf);
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
  lua_pushcfunction(L, l_vm_read_pages);
  lua_setfield(L, -2, "vm_read_pages");
  return 0;
}
