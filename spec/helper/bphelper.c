/* bphelper: a C module for the specs (not part of perfev), built by
 * `make test` / `make check` into build/spec/bphelper.so.
 *
 *   local h = require "bphelper"
 *   h.addr()            -> address of an 8-byte aligned volatile uint64_t,
 *                          the memory breakpoint specs watch
 *   h.write(n [, v])    -> stores to it exactly n times (v, or 1..n); returns n
 *   h.read(n)           -> loads it exactly n times; returns the last value
 *   h.value()           -> its value (one load: one access for an RW watch)
 *   h.getppid_loop(n)   -> exactly n getppid system calls; returns getppid()
 *   h.touch_pages(n)    -> maps n fresh anonymous pages, writes one byte to
 *                          each (n minor page faults), unmaps; returns n
 *   h.sleep_ms(ms)      -> nanosleep, restarted on EINTR
 *   h.addr2(), h.write2(n) -> a second watched variable (ev:modify specs)
 *   h.now_ns()          -> CLOCK_MONOTONIC in nanoseconds
 *   h.ring_map(fd, n)   -> address of a 1+n page perf mmap, or nil, errno
 *   h.ring_unmap(a, n)  -> munmap of it; h.ring_head(a) -> its data_head
 *   h.fd_count()        -> open fds of this process (from /proc/self/fd)
 *   h.map_file(path, len, off [, exec]) -> address of a shared file mapping,
 *                          or nil, errno; h.unmap(addr, len) -> munmap ok
 *   h.probe_loop(n)     -> calls the exported perfev_probe_target() n times
 *                          (the uprobe specs' target); returns its last result
 *
 * The watched variable is module-level static storage on purpose: it is the
 * memory under test, shared by every state that loads this helper. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include <lua.h>
#include <lauxlib.h>
#include "compat.h"

static _Alignas(8) volatile uint64_t watched;

static lua_Integer check_count(lua_State *L, int idx) {
  lua_Integer n = luaL_checkinteger(L, idx);
  luaL_argcheck(L, n >= 0, idx, "count must be >= 0");
  return n;
}

static int h_addr(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(uintptr_t)&watched);
  return 1;
}

static int h_write(lua_State *L) {
  lua_Integer n = check_count(L, 1);
  if (lua_isnoneornil(L, 2)) {
    for (lua_Integer i = 1; i <= n; i++) watched = (uint64_t)i;
  } else {
    uint64_t v = (uint64_t)luaL_checkinteger(L, 2);
    for (lua_Integer i = 0; i < n; i++) watched = v;
  }
  lua_pushinteger(L, n);
  return 1;
}

static int h_read(lua_State *L) {
  lua_Integer n = check_count(L, 1);
  uint64_t v = 0;
  for (lua_Integer i = 0; i < n; i++) v = watched;
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

static int h_value(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)watched);
  return 1;
}

static int h_getppid_loop(lua_State *L) {
  lua_Integer n = check_count(L, 1);
  long r = 0;
  for (lua_Integer i = 0; i < n; i++) r = syscall(SYS_getppid);
  lua_pushinteger(L, (lua_Integer)r);
  return 1;
}

static int h_touch_pages(lua_State *L) {
  lua_Integer n = check_count(L, 1);
  long page = sysconf(_SC_PAGESIZE);
  size_t len = (size_t)n * (size_t)page;
  if (n == 0) {
    lua_pushinteger(L, 0);
    return 1;
  }
  volatile unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == (volatile unsigned char *)MAP_FAILED)
    return luaL_error(L, "touch_pages: mmap of %d pages failed (errno %d)", (int)n, errno);
  for (lua_Integer i = 0; i < n; i++) p[(size_t)i * (size_t)page] = 1;
  munmap((void *)p, len);
  lua_pushinteger(L, n);
  return 1;
}

static int h_sleep_ms(lua_State *L) {
  lua_Integer ms = check_count(L, 1);
  struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
  return 0;
}

/* ---- appended for the event/ioctl specs ---- */

/* A second watched variable, so that ev:modify() can move a breakpoint. */
static _Alignas(8) volatile uint64_t watched2;

static int h_addr2(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(uintptr_t)&watched2);
  return 1;
}

static int h_write2(lua_State *L) {
  lua_Integer n = check_count(L, 1);
  for (lua_Integer i = 1; i <= n; i++) watched2 = (uint64_t)i;
  lua_pushinteger(L, n);
  return 1;
}

/* CLOCK_MONOTONIC in nanoseconds. */
static int h_now_ns(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000000000 + ts.tv_nsec);
  return 1;
}

/* h.ring_map(fd, data_pages) -> address of a perf ring buffer mapping
 * (1 + data_pages pages), or nil, errno. The specs need a ring buffer for
 * set_output and pause_output before perfev has ev:mmap(). */
static int h_ring_map(lua_State *L) {
  int fd = (int)luaL_checkinteger(L, 1);
  size_t len = (size_t)(check_count(L, 2) + 1) * (size_t)sysconf(_SC_PAGESIZE);
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    lua_pushnil(L);
    lua_pushinteger(L, errno);
    return 2;
  }
  lua_pushinteger(L, (lua_Integer)(uintptr_t)p);
  return 1;
}

static int h_ring_unmap(lua_State *L) {
  uintptr_t addr = (uintptr_t)luaL_checkinteger(L, 1);
  size_t len = (size_t)(check_count(L, 2) + 1) * (size_t)sysconf(_SC_PAGESIZE);
  lua_pushboolean(L, munmap((void *)addr, len) == 0);
  return 1;
}

/* h.ring_head(addr) -> data_head of the mapping's control page */
static int h_ring_head(lua_State *L) {
  const struct perf_event_mmap_page *pg =
    (const struct perf_event_mmap_page *)(uintptr_t)luaL_checkinteger(L, 1);
  uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
  lua_pushinteger(L, (lua_Integer)head);
  return 1;
}

/* h.fd_count() -> open file descriptors of this process, counted in-process
 * (a `ls /proc/PID/fd` child races with its own pipe's fds). */
static int h_fd_count(lua_State *L) {
  DIR *d = opendir("/proc/self/fd");
  lua_Integer n = 0;
  struct dirent *e;
  if (!d)
    return luaL_error(L, "fd_count: cannot open /proc/self/fd (errno %d)", errno);
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  lua_pushinteger(L, n - 1);   /* the directory's own fd */
  return 1;
}

/* h.map_file(path, len, offset [, exec]) -> address of a MAP_SHARED
 * mapping of the file (PROT_READ, or PROT_READ|PROT_EXEC), or nil, errno.
 * The sampler specs watch the mmap2 record the kernel writes for it. */
static int h_map_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  size_t len = (size_t)check_count(L, 2);
  off_t off = (off_t)check_count(L, 3);
  int prot = lua_toboolean(L, 4) ? PROT_READ | PROT_EXEC : PROT_READ;
  int fd = open(path, O_RDONLY | O_CLOEXEC), err;
  void *p;
  if (fd < 0) {
    lua_pushnil(L);
    lua_pushinteger(L, errno);
    return 2;
  }
  p = mmap(NULL, len, prot, MAP_SHARED, fd, off);
  err = errno;
  close(fd);   /* the mapping keeps the file */
  if (p == MAP_FAILED) {
    lua_pushnil(L);
    lua_pushinteger(L, err);
    return 2;
  }
  lua_pushinteger(L, (lua_Integer)(uintptr_t)p);
  return 1;
}

/* perfev_probe_target: an exported, never-inlined function the probe specs
 * put a uprobe (and a uretprobe) on; h.probe_loop(n) calls it exactly n
 * times. The volatile store keeps the call from being optimised away. */
int perfev_probe_target(int x);
static volatile int probe_sink;
__attribute__((noinline, used)) int perfev_probe_target(int x) {
  probe_sink = x;
  return x + 1;
}

static int h_probe_loop(lua_State *L) {
  lua_Integer n = check_count(L, 1);
  int r = 0;
  for (lua_Integer i = 0; i < n; i++) r = perfev_probe_target((int)i);
  lua_pushinteger(L, r);
  return 1;
}

/* h.unmap(addr, len) -> true when munmap succeeded */
static int h_unmap(lua_State *L) {
  uintptr_t addr = (uintptr_t)luaL_checkinteger(L, 1);
  size_t len = (size_t)check_count(L, 2);
  lua_pushboolean(L, munmap((void *)addr, len) == 0);
  return 1;
}

static const luaL_Reg funcs[] = {
  { "addr", h_addr },
  { "write", h_write },
  { "read", h_read },
  { "value", h_value },
  { "getppid_loop", h_getppid_loop },
  { "touch_pages", h_touch_pages },
  { "sleep_ms", h_sleep_ms },
  { "addr2", h_addr2 },
  { "write2", h_write2 },
  { "now_ns", h_now_ns },
  { "ring_map", h_ring_map },
  { "ring_unmap", h_ring_unmap },
  { "ring_head", h_ring_head },
  { "fd_count", h_fd_count },
  { "map_file", h_map_file },
  { "unmap", h_unmap },
  { "probe_loop", h_probe_loop },
  { NULL, NULL }
};

int luaopen_bphelper(lua_State *L);
int luaopen_bphelper(lua_State *L) {
  luaL_newlib(L, funcs);   /* compat.h: also for 5.1 */
  return 1;
}
