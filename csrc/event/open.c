/* perf_event_open(2): the call itself, the attr size handshake (E2BIG) and
 * error messages that say what to do. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "perfev.h"
#include "attr/fields.h"

static int sys_perf_event_open(struct perfev_attr *a, pid_t pid, int cpu, int group, unsigned long flags)
{
  return (int)syscall(SYS_perf_event_open, (struct perf_event_attr *)(void *)a->raw, pid, cpu,
                      group, flags);
}

static int read_paranoid(void)
{
  int level = 99;
  FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
  if (f) {
    if (fscanf(f, "%d", &level) != 1)
      level = 99;
    fclose(f);
  }
  return level;
}

static int have_cpu_pmu(void)
{
  struct stat st;
  return stat("/sys/bus/event_source/devices/cpu", &st) == 0 ||
         stat("/sys/bus/event_source/devices/cpu_core", &st) == 0 ||
         stat("/sys/bus/event_source/devices/armv8_pmuv3_0", &st) == 0;
}

static int is_hw_type(uint64_t type)
{
  return type == PERF_TYPE_HARDWARE || type == PERF_TYPE_HW_CACHE || type == PERF_TYPE_RAW;
}

struct open_ctx {
  const struct perfev_attr *attr;
  pid_t pid;
  int cpu;
  int group;
};

static void advise_permission(luaL_Buffer *b)
{
  char line[256];
  int level = read_paranoid();
  snprintf(line, sizeof line,
           "kernel.perf_event_paranoid is %d (read from /proc/sys/kernel/perf_event_paranoid); ",
           level);
  luaL_addstring(b, line);
  luaL_addstring(b, level >= 2 ? "at 2 and above only user-space (exclude_kernel) "
                                 "measurement of your own processes is allowed; "
                               : "");
  luaL_addstring(b, "run as root, give the process CAP_PERFMON (or CAP_SYS_ADMIN on kernels "
                    "before 5.8), or lower the level: sysctl -w kernel.perf_event_paranoid=1");
}

static void advise_unsupported(luaL_Buffer *b, const struct open_ctx *c)
{
  char line[200];
  uint64_t type = perfev_attr_u64(c->attr, "type");
  if (is_hw_type(type) && !have_cpu_pmu()) {
    luaL_addstring(b, "no hardware PMU on this machine (no /sys/bus/event_source/devices/cpu, "
                      "as in most virtual machines): hardware, cache and raw events cannot be "
                      "counted here; software events (task-clock, page-faults ...) still work");
    return;
  }
  snprintf(line, sizeof line,
           "the event (type %llu, config %#llx) is not supported by this machine's PMU",
           (unsigned long long)type, (unsigned long long)perfev_attr_u64(c->attr, "config"));
  luaL_addstring(b, line);
  if (perfev_attr_u64(c->attr, "sample_period") && is_hw_type(type))
    luaL_addstring(b, ", or it cannot sample (no overflow interrupt)");
}

static void advise_invalid(luaL_Buffer *b, const struct open_ctx *c)
{
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (c->cpu < -1 || (ncpu > 0 && c->cpu >= ncpu)) {
    char line[160];
    snprintf(line, sizeof line, "cpu %d does not exist: pass -1 (any cpu) or one of 0..%ld",
             c->cpu, ncpu - 1);
    luaL_addstring(b, line);
    return;
  }
  if (c->pid == -1 && c->cpu == -1) {
    luaL_addstring(b, "pid == -1 with cpu == -1 is invalid: measuring every process needs a "
                      "cpu (open one event per cpu), and measuring every cpu needs a pid "
                      "(0 for this process)");
    return;
  }
  if (perfev_attr_u64(c->attr, "freq"))
    luaL_addstring(b, "sample_freq may exceed kernel.perf_event_max_sample_rate, or ");
  luaL_addstring(b, "the kernel rejected a field combination of the attr (reserved or unknown "
                    "bits, a sample_type/read_format this kernel lacks, a group leader on "
                    "another cpu or task, or an unsupported clockid)");
}

/* The actionable part of an open error, by errno. */
static void advise(luaL_Buffer *b, int err, const struct open_ctx *c)
{
  char line[160];
  switch (err) {
  case EACCES: case EPERM: advise_permission(b); break;
  case ENOENT: case EOPNOTSUPP: advise_unsupported(b, c); break;
  case EINVAL: advise_invalid(b, c); break;
  case ESRCH:
    snprintf(line, sizeof line, "no process or thread with pid %d", (int)c->pid);
    luaL_addstring(b, line);
    break;
  case ENODEV:
    snprintf(line, sizeof line, "the event's PMU does not exist or does not support this "
                                "(cpu %d offline, or a per-task event on a per-cpu PMU)", c->cpu);
    luaL_addstring(b, line);
    break;
  case EMFILE: case ENFILE:
    luaL_addstring(b, "too many open files: close events or raise `ulimit -n`");
    break;
  case EBUSY:
    luaL_addstring(b, "another event has exclusive use of the PMU");
    break;
  case EOVERFLOW:
    luaL_addstring(b, "sample_max_stack exceeds kernel.perf_event_max_stack");
    break;
  case EBADF:
    luaL_addstring(b, "the group leader is closed or not a perf event");
    break;
  default:
    break;
  }
}

static int push_open_error(lua_State *L, int err, const struct open_ctx *c)
{
  luaL_Buffer b;
  lua_pushnil(L);
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "perf_event_open: ");
  luaL_addstring(&b, strerror(err));
  luaL_addstring(&b, ": ");
  advise(&b, err, c);
  luaL_pushresult(&b);
  lua_pushinteger(L, err);
  return 3;
}

static int push_e2big(lua_State *L, const struct perfev_attr *a, uint32_t ksize)
{
  const char *field = perfev_attr_nonzero_from(a, ksize);
  lua_pushnil(L);
  lua_pushfstring(L, "perf_event_open: this kernel's perf_event_attr is %d bytes and does not "
                     "know the field '%s': leave it unset (0) on this kernel",
                  (int)ksize, field ? field : "?");
  lua_pushinteger(L, E2BIG);
  return 3;
}

/* Opens with our full attr; a kernel older than our struct answers E2BIG
 * and reports its size, which we accept when the fields beyond it are 0. */
static int open_fd(struct perfev_attr *a, const struct open_ctx *c, unsigned long flags,
                   uint32_t *ksize)
{
  int fd = sys_perf_event_open(a, c->pid, c->cpu, c->group, flags);
  if (fd >= 0 || errno != E2BIG)
    return fd;
  *ksize = (uint32_t)perfev_attr_u64(a, "size");
  if (*ksize == 0 || *ksize >= PERFEV_ATTR_SIZE || perfev_attr_nonzero_from(a, *ksize)) {
    errno = E2BIG;
    return -1;
  }
  return sys_perf_event_open(a, c->pid, c->cpu, c->group, flags);
}

static unsigned long flags_arg(lua_State *L, int idx)
{
  const struct perfev_const_table *t = perfev_consts_get("FLAG");
  unsigned long flags = 0;
  if (lua_isnoneornil(L, idx))
    return 0;
  if (lua_type(L, idx) == LUA_TNUMBER)
    return (unsigned long)luaL_checkinteger(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  for (lua_Integer i = 1; lua_rawgeti(L, idx, i) != LUA_TNIL; i++) {
    uint64_t v = 0;   /* luaL_error does not return, but clang cannot know it */
    const char *name = lua_tostring(L, -1);
    if (!name || !perfev_const_lookup(t, name, &v)) {
      char clip[PERFEV_CLIP];
      luaL_error(L, "perfev.open: unknown flag '%s' (fd_no_group, fd_output, pid_cgroup)",
                 name ? perfev_clip(name, clip) : luaL_typename(L, -1));
    }
    flags |= (unsigned long)v;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return flags;
}

/* pid may be a cgroup directory path with the pid_cgroup flag. */
static int pid_arg(lua_State *L, int idx, unsigned long flags, int *cgroup_fd)
{
  const char *path;
  *cgroup_fd = -1;
  if (lua_type(L, idx) != LUA_TSTRING)
    return perfev_int_arg(L, idx, 0, "perfev.open", "pid");
  if (!(flags & PERF_FLAG_PID_CGROUP))
    luaL_error(L, "perfev.open: pid is a path but the pid_cgroup flag is not set");
  path = lua_tostring(L, idx);
  *cgroup_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return *cgroup_fd;
}

static int group_arg(lua_State *L, int idx)
{
  if (lua_isnoneornil(L, idx))
    return -1;
  if (lua_type(L, idx) == LUA_TNUMBER)
    return perfev_int_arg(L, idx, -1, "perfev.open", "group fd");
  return perfev_event_check(L, idx)->fd;
}

/* The kernel copies only `size` bytes (0 reads as VER0): a field set
 * beyond them would be silently ignored, so refuse it instead. */
static void check_size_covers(lua_State *L, const struct perfev_attr *a, uint32_t usize)
{
  uint32_t seen = usize ? usize : PERF_ATTR_SIZE_VER0;
  const char *field = seen < PERFEV_ATTR_SIZE ? perfev_attr_nonzero_from(a, seen) : NULL;
  if (field)
    luaL_error(L, "perfev.open: attr field '%s' is set, but 'size' is %d: the kernel reads only "
                  "the first %d bytes and would ignore it (leave 'size' alone: perfev sets it)",
               field, (int)usize, (int)seen);
}

/* The string field of type when it is the kprobe or uprobe PMU's (whose
 * config1 points to a string the kernel reads), else NULL. */
static const char *probe_string_field(uint64_t type)
{
  static const char *const pmus[] = { "kprobe", "uprobe" };
  static const char *const fields[] = { "kprobe_func", "uprobe_path" };
  for (size_t i = 0; i < sizeof pmus / sizeof pmus[0]; i++) {
    char path[64];
    unsigned long long t;
    FILE *f;
    int n;
    snprintf(path, sizeof path, "/sys/bus/event_source/devices/%s/type", pmus[i]);
    if (!(f = fopen(path, "re")))
      continue;
    n = fscanf(f, "%llu", &t);
    fclose(f);
    if (n == 1 && t == type)
      return fields[i];
  }
  return NULL;
}

/* A probe attr's string pointer must be one the attr owns: the kernel
 * would read whatever memory an attr from bytes points at. */
static void check_strings(lua_State *L, const struct perfev_attr *a)
{
  const char *field = perfev_attr_foreign_string(L, 1)
                        ? probe_string_field(perfev_attr_u64(a, "type")) : NULL;
  if (field)
    luaL_error(L, "perfev.open: the attr's %s is an address it holds no string for (an attr "
                  "from bytes or a file, or an event's copy): set attr.%s to the string first",
               field, field);
}

/* core.open(attr, pid, cpu, group, flags) */
int perfev_open(lua_State *L)
{
  /* a copy: the kernel writes its own size into the attr on E2BIG */
  struct perfev_attr local = *perfev_attr_check(L, 1), *a = &local;
  struct open_ctx c;
  unsigned long flags = flags_arg(L, 5) | PERF_FLAG_FD_CLOEXEC;
  int cgroup_fd, fd, err;
  uint32_t ksize = 0, usize = (uint32_t)perfev_attr_u64(a, "size");
  /* the kernel reads `size` bytes of our PERFEV_ATTR_SIZE-byte image */
  if (usize > PERFEV_ATTR_SIZE || (usize != 0 && usize < PERF_ATTR_SIZE_VER0))
    return luaL_error(L, "perfev.open: attr field 'size' is %d: it must be 0 (read as %d) or "
                         "%d..%d", (int)usize, PERF_ATTR_SIZE_VER0, PERF_ATTR_SIZE_VER0,
                      PERFEV_ATTR_SIZE);
  check_size_covers(L, a, usize);
  check_strings(L, a);
  c.attr = a;
  c.cpu = perfev_int_arg(L, 3, -1, "perfev.open", "cpu");
  c.group = group_arg(L, 4);
  c.pid = pid_arg(L, 2, flags, &cgroup_fd);
  if (lua_type(L, 2) == LUA_TSTRING && cgroup_fd < 0)
    return perfev_push_errno(L, errno, "perfev.open: cannot open the cgroup directory");
  fd = open_fd(a, &c, flags, &ksize);
  err = errno;
  if (fd < 0 && (err == EMFILE || err == ENFILE)) {
    /* events dropped to the GC may hold the fds: the collector does not see
     * them in its memory accounting. Collect once, then try again. */
    lua_gc(L, LUA_GCCOLLECT, 0);
    fd = open_fd(a, &c, flags, &ksize);
    err = errno;
  }
  if (cgroup_fd >= 0)
    close(cgroup_fd);
  if (fd < 0 && err == E2BIG)
    return push_e2big(L, a, ksize ? ksize : (uint32_t)perfev_attr_u64(a, "size"));
  if (fd < 0)
    return push_open_error(L, err, &c);
  return perfev_event_push(L, fd, a);
}

