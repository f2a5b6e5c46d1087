/* read(2) on an event fd, decoded for every read_format combination. */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "perfev.h"

uint64_t perfev_scale(uint64_t value, uint64_t enabled, uint64_t running)
{
  if (!perfev_scales(enabled, running))
    return value;
#ifdef __SIZEOF_INT128__
  {
    unsigned __int128 v = (unsigned __int128)value * enabled / running;
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
  }
#else
  {
    long double v = (long double)value * enabled / running;
    return v >= 18446744073709551615.0L ? UINT64_MAX : (uint64_t)v;
  }
#endif
}

static size_t header_words(const struct perfev_reading *r)
{
  return (size_t)r->group + (size_t)r->has_enabled + (size_t)r->has_running;
}

static size_t entry_words(const struct perfev_reading *r)
{
  return 1 + (size_t)r->has_id + (size_t)r->has_lost;
}

static int decode(uint64_t fmt, const uint64_t *w, size_t nwords, struct perfev_reading *r)
{
  size_t at = 1;   /* a group's times follow nr; a single event's follow its value */
  r->enabled = r->running = 0;
  r->group = (fmt & PERF_FORMAT_GROUP) != 0;
  r->has_enabled = (fmt & PERF_FORMAT_TOTAL_TIME_ENABLED) != 0;
  r->has_running = (fmt & PERF_FORMAT_TOTAL_TIME_RUNNING) != 0;
  r->has_id = (fmt & PERF_FORMAT_ID) != 0;
  r->has_lost = (fmt & PERF_FORMAT_LOST) != 0;
  r->words = w;
  r->nwords = nwords;
  r->nr = r->group ? w[0] : 1;
  if (r->has_enabled)
    r->enabled = w[at++];
  if (r->has_running)
    r->running = w[at++];
  if (r->group && header_words(r) + r->nr * entry_words(r) > nwords)
    return EPROTO;
  if (!r->group && header_words(r) + entry_words(r) > nwords)
    return EPROTO;
  return 0;
}

/* Entry i of a decoded read: its value, id and lost count. */
static void reading_entry(const struct perfev_reading *r, uint64_t i, struct perfev_entry *e)
{
  const uint64_t *p;
  if (r->group) {
    p = r->words + header_words(r) + i * entry_words(r);
    e->value = p[0];
    p++;
  } else {
    e->value = r->words[0];
    p = r->words + 1 + (size_t)r->has_enabled + (size_t)r->has_running;
  }
  e->id = r->has_id ? *p++ : 0;
  e->lost = r->has_lost ? *p : 0;
}

int perfev_read_fd(int fd, uint64_t fmt, uint64_t *buf, size_t cap, struct perfev_reading *r)
{
  ssize_t n;
  do
    n = read(fd, buf, cap * sizeof *buf);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno;
  if (n == 0)
    return -1;
  return decode(fmt, buf, (size_t)n / sizeof *buf, r);
}

int perfev_push_read_error(lua_State *L, int err)
{
  if (err == -1) {
    lua_pushnil(L);
    lua_pushliteral(L, "read: the kernel returned 0 bytes: a pinned event (or its group) could "
                       "not stay on the PMU and is in error state; it no longer counts");
    lua_pushinteger(L, 0);
    return 3;
  }
  if (err == ENOSPC)
    return perfev_push_errno(L, err, "read: the group has too many members for one read");
  return perfev_push_errno(L, err, "read");
}

/* Pushes the scaled count of e, or false when it never ran. */
static void push_count(lua_State *L, const struct perfev_reading *r, const struct perfev_entry *e)
{
  if (r->has_running && r->running == 0)
    lua_pushboolean(L, 0);
  else
    lua_pushinteger(L, (lua_Integer)perfev_scale(e->value, r->enabled, r->running));
}

static void push_opt(lua_State *L, int has, uint64_t v)
{
  if (has)
    lua_pushinteger(L, (lua_Integer)v);
  else
    lua_pushnil(L);
}

/* A group-format read without a group object: { [i] = count, ids = {...} } */
static int push_group_table(lua_State *L, const struct perfev_reading *r)
{
  struct perfev_entry e;
  lua_createtable(L, (int)r->nr, 4);
  lua_createtable(L, (int)r->nr, 0);
  for (uint64_t i = 0; i < r->nr; i++) {
    reading_entry(r, i, &e);
    push_count(L, r, &e);
    lua_rawseti(L, -3, (lua_Integer)i + 1);
    lua_pushinteger(L, (lua_Integer)e.id);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "ids");
  push_opt(L, r->has_enabled, r->enabled);
  lua_setfield(L, -2, "time_enabled");
  push_opt(L, r->has_running, r->running);
  lua_setfield(L, -2, "time_running");
  return 1;
}

/* The common case, kept lean (it is most of what a read costs from Lua):
 * one event, at most five words, decoded in place. */
static int read_single(lua_State *L, const struct perfev_event *ev)
{
  uint64_t w[5], fmt = ev->read_format, enabled = 0, running = 0;
  size_t at = 1;
  ssize_t n;
  do
    n = read(ev->fd, w, sizeof w);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return perfev_push_read_error(L, n < 0 ? errno : -1);
  if (fmt & PERF_FORMAT_TOTAL_TIME_ENABLED)
    enabled = w[at++];
  if (fmt & PERF_FORMAT_TOTAL_TIME_RUNNING)
    running = w[at++];
  if ((size_t)n < at * sizeof w[0])
    return perfev_push_read_error(L, EPROTO);
  if ((fmt & PERF_FORMAT_TOTAL_TIME_RUNNING) && running == 0)
    lua_pushboolean(L, 0);
  else
    lua_pushinteger(L, (lua_Integer)perfev_scale(w[0], enabled, running));
  if (at == 1)
    return 1;
  push_opt(L, (fmt & PERF_FORMAT_TOTAL_TIME_ENABLED) != 0, enabled);
  push_opt(L, (fmt & PERF_FORMAT_TOTAL_TIME_RUNNING) != 0, running);
  return 3;
}

/* ev:read() -> count|false, enabled, running (count false: never ran) */
int perfev_read(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  uint64_t buf[PERFEV_READ_WORDS];
  struct perfev_reading r;
  int err;
  if (!(ev->read_format & PERF_FORMAT_GROUP))
    return read_single(L, ev);
  err = perfev_read_fd(ev->fd, ev->read_format, buf, PERFEV_READ_WORDS, &r);
  if (err)
    return perfev_push_read_error(L, err);
  return push_group_table(L, &r);
}

static void push_entry(lua_State *L, const struct perfev_reading *r, const struct perfev_entry *e)
{
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)e->value);
  lua_setfield(L, -2, "value");
  if (r->has_id) {
    lua_pushinteger(L, (lua_Integer)e->id);
    lua_setfield(L, -2, "id");
  }
  if (r->has_lost) {
    lua_pushinteger(L, (lua_Integer)e->lost);
    lua_setfield(L, -2, "lost");
  }
}

/* ev:read_raw() -> the words as the kernel gave them, named */
int perfev_read_raw(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  uint64_t buf[PERFEV_READ_WORDS];
  struct perfev_reading r;
  struct perfev_entry e;
  int err = perfev_read_fd(ev->fd, ev->read_format, buf, PERFEV_READ_WORDS, &r);
  if (err)
    return perfev_push_read_error(L, err);
  if (r.group) {
    lua_createtable(L, (int)r.nr, 3);
    for (uint64_t i = 0; i < r.nr; i++) {
      reading_entry(&r, i, &e);
      push_entry(L, &r, &e);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_pushinteger(L, (lua_Integer)r.nr);
    lua_setfield(L, -2, "nr");
  } else {
    reading_entry(&r, 0, &e);
    push_entry(L, &r, &e);
  }
  push_opt(L, r.has_enabled, r.enabled);
  lua_setfield(L, -2, "time_enabled");
  push_opt(L, r.has_running, r.running);
  lua_setfield(L, -2, "time_running");
  return 1;
}
