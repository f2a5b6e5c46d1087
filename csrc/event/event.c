/* The event userdata: one perf event fd and every ioctl on it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "perfev.h"

struct perfev_event *perfev_event_check(lua_State *L, int idx)
{
  struct perfev_event *ev = (struct perfev_event *)luaL_checkudata(L, idx, PERFEV_EVENT_MT);
  if (ev->fd < 0)
    luaL_error(L, "perfev.event: attempt to use a closed event");
  return ev;
}

struct perfev_event *perfev_event_self(lua_State *L)
{
  struct perfev_event *ev = (struct perfev_event *)perfev_self(L, PERFEV_EVENT_MT);
  if (ev->fd < 0)
    luaL_error(L, "perfev.event: attempt to use a closed event");
  return ev;
}

int perfev_event_push(lua_State *L, int fd, const struct perfev_attr *a)
{
  struct perfev_event *ev = (struct perfev_event *)perfev_newuserdata(L, sizeof *ev);
  uint64_t id = 0;
  ev->fd = fd;
  ev->attr = *a;
  ev->read_format = perfev_attr_u64(a, "read_format");
  /* kernels before 3.12 lack the ioctl; the id is then 0 */
  ev->id = ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 ? id : 0;
  luaL_setmetatable(L, PERFEV_EVENT_MT);
  lua_newtable(L);
  perfev_setiuservalue(L, -2);
  return 1;
}

/* ---- ioctls, as data: request, and how the Lua argument becomes its argument ---- */

enum ioc_arg { ARG_GROUP, ARG_INT, ARG_COUNT, ARG_U64, ARG_BOOL };

struct ioc_spec {
  const char *name;
  unsigned long req;
  enum ioc_arg arg;
};

static const struct ioc_spec ioctls[] = {
  { "enable", PERF_EVENT_IOC_ENABLE, ARG_GROUP },
  { "disable", PERF_EVENT_IOC_DISABLE, ARG_GROUP },
  { "reset", PERF_EVENT_IOC_RESET, ARG_GROUP },
  { "refresh", PERF_EVENT_IOC_REFRESH, ARG_COUNT },   /* overflows before it disables: 0 is undefined */
  { "period", PERF_EVENT_IOC_PERIOD, ARG_U64 },
  { "set_bpf", PERF_EVENT_IOC_SET_BPF, ARG_INT },
  { "pause_output", PERF_EVENT_IOC_PAUSE_OUTPUT, ARG_BOOL },
};

static int l_ioctl(lua_State *L)
{
  const struct ioc_spec *s = (const struct ioc_spec *)lua_touserdata(L, lua_upvalueindex(2));
  struct perfev_event *ev = perfev_event_self(L);
  uint64_t u64;
  int r;
  switch (s->arg) {
  case ARG_GROUP:
    r = ioctl(ev->fd, s->req, lua_toboolean(L, 2) ? PERF_IOC_FLAG_GROUP : 0);
    break;
  case ARG_INT:
  case ARG_COUNT: {
    luaL_checkinteger(L, 2);
    int v = perfev_int_arg(L, 2, 0, lua_pushfstring(L, "ev:%s", s->name), "argument");
    if (s->arg == ARG_COUNT && v < 1)
      return luaL_error(L, "ev:%s: the count must be a positive integer, got %d", s->name, v);
    r = ioctl(ev->fd, s->req, v);
    break;
  }
  case ARG_BOOL:
    r = ioctl(ev->fd, s->req, lua_toboolean(L, 2) ? 1 : 0);
    break;
  default:
    u64 = (uint64_t)luaL_checkinteger(L, 2);
    r = ioctl(ev->fd, s->req, &u64);
    break;
  }
  if (r < 0)
    return perfev_push_errno(L, errno, s->name);
  lua_pushboolean(L, 1);
  return 1;
}

static int l_id(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  uint64_t id = 0;
  if (ioctl(ev->fd, PERF_EVENT_IOC_ID, &id) < 0)
    return perfev_push_errno(L, errno, "id");
  lua_pushinteger(L, (lua_Integer)id);
  return 1;
}

static int l_set_output(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  int target = lua_isnoneornil(L, 2) ? -1 : perfev_event_check(L, 2)->fd;
  /* the kernel compares the unsigned long argument with -1: pass a long,
   * an int -1 would arrive as 0xffffffff (EBADF) */
  if (ioctl(ev->fd, PERF_EVENT_IOC_SET_OUTPUT, (long)target) < 0)
    return perfev_push_errno(L, errno, "set_output");
  lua_pushboolean(L, 1);
  return 1;
}

static int l_set_filter(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  const char *filter = luaL_checkstring(L, 2);
  if (ioctl(ev->fd, PERF_EVENT_IOC_SET_FILTER, filter) < 0)
    return perfev_push_errno(L, errno, "set_filter");
  lua_pushboolean(L, 1);
  return 1;
}

static int l_modify(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  struct perfev_attr a = *perfev_attr_check(L, 2);
  if (ioctl(ev->fd, PERF_EVENT_IOC_MODIFY_ATTRIBUTES, a.raw) < 0)
    return perfev_push_errno(L, errno, "modify (the kernel supports it for breakpoints only)");
  ev->attr = a;
  lua_pushboolean(L, 1);
  return 1;
}

/* ev:query_bpf([max]) -> { prog ids... }, prog_cnt */
static int l_query_bpf(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  lua_Integer max = luaL_optinteger(L, 2, 64);
  struct perf_event_query_bpf *q;
  int r, err;
  luaL_argcheck(L, max >= 0 && max <= 65536, 2, "between 0 and 65536");
  q = (struct perf_event_query_bpf *)calloc(1, sizeof *q + (size_t)max * sizeof(uint32_t));
  if (!q)
    return luaL_error(L, "query_bpf: out of memory");
  q->ids_len = (uint32_t)max;
  r = ioctl(ev->fd, PERF_EVENT_IOC_QUERY_BPF, q);
  err = errno;
  if (r < 0 && err != ENOSPC) {
    free(q);
    return perfev_push_errno(L, err, "query_bpf");
  }
  lua_createtable(L, (int)q->prog_cnt, 0);
  for (uint32_t i = 0; i < q->prog_cnt && i < q->ids_len; i++) {
    lua_pushinteger(L, q->ids[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, q->prog_cnt);
  free(q);
  return 2;
}

static int l_fileno(lua_State *L)
{
  lua_pushinteger(L, perfev_event_self(L)->fd);
  return 1;
}

static int l_attr(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  struct perfev_attr *a = perfev_attr_from(L, 0);
  *a = ev->attr;
  return 1;
}

static int l_close(lua_State *L)
{
  struct perfev_event *ev = (struct perfev_event *)perfev_self(L, PERFEV_EVENT_MT);
  if (ev->fd >= 0) {
    int fd = ev->fd;
    ev->fd = -1;
    if (close(fd) < 0 && errno != EINTR)
      return perfev_push_errno(L, errno, "close");
  }
  lua_pushboolean(L, 1);
  return 1;
}

void perfev_event_close(struct perfev_event *ev)
{
  if (ev->fd >= 0) {
    close(ev->fd);
    ev->fd = -1;
  }
}

static int l_gc(lua_State *L)
{
  struct perfev_event *ev = (struct perfev_event *)perfev_self(L, PERFEV_EVENT_MT);
  if (ev)   /* NULL: a finalizer given another self (perfev_self) */
    perfev_event_close(ev);
  return 0;
}

static int l_tostring(lua_State *L)
{
  struct perfev_event *ev = (struct perfev_event *)perfev_self(L, PERFEV_EVENT_MT);
  char buf[160];
  const char *name;
  perfev_getiuservalue(L, 1);
  lua_getfield(L, -1, "name");
  name = lua_isstring(L, -1) ? lua_tostring(L, -1) : "?";
  if (ev->fd < 0)
    snprintf(buf, sizeof buf, "closed");
  else
    snprintf(buf, sizeof buf, "type %llu, config 0x%llx, fd %d, id %llu",
             (unsigned long long)perfev_attr_u64(&ev->attr, "type"),
             (unsigned long long)perfev_attr_u64(&ev->attr, "config"), ev->fd,
             (unsigned long long)ev->id);
  lua_pushfstring(L, "perfev.event(%s: %s)", name, buf);
  return 1;
}

static int l_newindex(lua_State *L)
{
  char clip[PERFEV_CLIP];
  const char *k;
  perfev_self(L, PERFEV_EVENT_MT);
  k = lua_tostring(L, 2);
  return luaL_error(L, "perfev.event: cannot set '%s': an event's fields are its methods; "
                       "keep your own values in ev:data()", k ? perfev_clip(k, clip) : "?");
}

/* ev:data() -> the table where the Lua layer and the user keep per-event values */
static int l_data(lua_State *L)
{
  perfev_self(L, PERFEV_EVENT_MT);
  perfev_getiuservalue(L, 1);
  return 1;
}

/* ev:name() -> the event's name, as perfev.open or perfev.group gave it */
static int l_name(lua_State *L)
{
  perfev_self(L, PERFEV_EVENT_MT);
  perfev_getiuservalue(L, 1);
  lua_getfield(L, -1, "name");
  return 1;
}

static int l_closed(lua_State *L)
{
  struct perfev_event *ev = (struct perfev_event *)perfev_self(L, PERFEV_EVENT_MT);
  lua_pushboolean(L, ev->fd < 0);
  return 1;
}

int perfev_event_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__gc", l_gc }, { "__close", l_gc }, { "__tostring", l_tostring },
    { "__newindex", l_newindex }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = {
    { "id", l_id }, { "set_output", l_set_output }, { "set_filter", l_set_filter },
    { "modify", l_modify }, { "query_bpf", l_query_bpf }, { "fileno", l_fileno },
    { "attr", l_attr }, { "close", l_close }, { "closed", l_closed },
    { "read", perfev_read }, { "read_raw", perfev_read_raw }, { "data", l_data },
    { "name", l_name }, { NULL, NULL }   /* ev:mmap is ring/ring.c's */
  };
  perfev_class_register(L, PERFEV_EVENT_MT, meta, methods);
  perfev_class_methods(L, PERFEV_EVENT_MT);
  for (size_t i = 0; i < sizeof ioctls / sizeof ioctls[0]; i++) {
    luaL_getmetatable(L, PERFEV_EVENT_MT);   /* upvalue 1, as every method has */
    lua_pushlightuserdata(L, (void *)&ioctls[i]);
    lua_pushcclosure(L, l_ioctl, 2);
    lua_setfield(L, -2, ioctls[i].name);
  }
  lua_setfield(L, -2, "event_methods");   /* core.event_methods: the Lua layer adds to it */
  lua_pushcfunction(L, perfev_open);
  lua_setfield(L, -2, "open");
  return 0;
}
