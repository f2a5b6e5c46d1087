/* rawdecode: the baseline of bench/decode.lua (not part of perfev), built
 * by `make bench` into build/bench/rawdecode.so.
 *
 *   local raw = require "rawdecode"
 *   local records, samples, sum, ns = raw.walk(bytes, sample_type)
 *   for ip, tid, time in raw.values(bytes, sample_type) do ... end
 *   for rec in raw.tables(bytes, sample_type[, into]) do ... end
 *   raw.cpu_ns() ; raw.children_cpu_ns()
 *
 * walk goes over a buffer of perf records (host byte order) in a plain C
 * loop, and for every sample adds ip + tid + time (wrapping, as Lua
 * integers do) to sum: the least a decoder must do to touch those fields.
 * ns is the CPU time the loop took. A record that does not fit the buffer
 * is an error giving its offset. Times are CPU times (this process's, and
 * its waited-for children's user + system), so that other processes on a
 * busy machine weigh less on the ratios than on wall-clock times. */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <linux/perf_event.h>
#include <lua.h>
#include <lauxlib.h>
#include "compat.h"
#include "clock.h"

static int64_t cpu_ns(void) { return bench_clock_ns(CLOCK_PROCESS_CPUTIME_ID); }

static uint64_t at64(const unsigned char *p)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static uint32_t at32(const unsigned char *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Where ip, tid and time sit in a sample of this sample_type (bytes after
 * the start of the record; 0: absent). */
struct where { size_t ip, tid, time, need; };

static struct where where_of(uint64_t st)
{
  struct where w = { 0, 0, 0, 0 };
  size_t pos = sizeof(struct perf_event_header);
  if (st & PERF_SAMPLE_IDENTIFIER)
    pos += 8;
  if (st & PERF_SAMPLE_IP)
    w.ip = pos, pos += 8;
  if (st & PERF_SAMPLE_TID)
    w.tid = pos + 4, pos += 8;
  if (st & PERF_SAMPLE_TIME)
    w.time = pos, pos += 8;
  w.need = pos;
  return w;
}

static int r_walk(lua_State *L)
{
  size_t len, off = 0;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 1, &len);
  struct where w = where_of((uint64_t)luaL_checkinteger(L, 2));
  uint64_t sum = 0, records = 0, samples = 0;
  int64_t t0 = cpu_ns(), t1;
  while (off < len) {
    struct perf_event_header h;
    const unsigned char *rec = s + off;
    if (len - off < sizeof h)
      return luaL_error(L, "walk: a header is cut at offset %d", (int)off);
    memcpy(&h, rec, sizeof h);
    if (h.size < sizeof h || h.size > len - off)
      return luaL_error(L, "walk: bad size %d at offset %d", (int)h.size, (int)off);
    if (h.type == PERF_RECORD_SAMPLE && h.size >= w.need) {
      if (w.ip)
        sum += at64(rec + w.ip);
      if (w.tid)
        sum += at32(rec + w.tid);
      if (w.time)
        sum += at64(rec + w.time);
      samples++;
    }
    records++;
    off += h.size;
  }
  t1 = cpu_ns();
  lua_pushinteger(L, (lua_Integer)records);
  lua_pushinteger(L, (lua_Integer)samples);
  lua_pushinteger(L, (lua_Integer)sum);
  lua_pushinteger(L, (lua_Integer)(t1 - t0));
  return 4;
}

/* ---- the Lua C API's floor: the least a Lua binding can do ----
 *
 * raw.values(bytes, sample_type): an iterator giving ip, tid, time of
 * each sample, found as walk finds them (no bounds check of the fields,
 * no other record type, no byte order): what a C iterator called by a Lua
 * generic for costs when it decodes nothing.
 *
 * raw.tables(bytes, sample_type, into): an iterator giving each sample as
 * a table with the keys a full decode of it has (type, size, misc,
 * cpumode, ip, pid, tid, time, period, and callchain and
 * callchain_contexts when the sample has a callchain: the addresses and
 * one { context, first, last } a marker), set through the C API
 * (lua_setfield) from the bytes, a new table each sample or, with into,
 * that table refilled. Only for the bench's two sample_types (ip, tid,
 * time, [period], [callchain]). */
struct iter { const unsigned char *s; size_t len, off; struct where w; size_t period, chain; };

static struct iter *iter_new(lua_State *L)
{
  struct iter *it = (struct iter *)lua_newuserdata(L, sizeof *it);
  uint64_t st = (uint64_t)luaL_checkinteger(L, 2);
  it->s = (const unsigned char *)luaL_checklstring(L, 1, &it->len);
  it->off = 0;
  it->w = where_of(st);
  it->period = st & PERF_SAMPLE_PERIOD ? it->w.need : 0;
  it->chain = st & PERF_SAMPLE_CALLCHAIN ? it->w.need + (it->period ? 8 : 0) : 0;
  return it;
}

/* The next sample (NULL: none), its header in h. */
static const unsigned char *next_sample(struct iter *it, struct perf_event_header *h)
{
  while (it->off + sizeof *h <= it->len) {
    const unsigned char *rec = it->s + it->off;
    memcpy(h, rec, sizeof *h);
    if (h->size < sizeof *h)
      return NULL;
    it->off += h->size;
    if (h->type == PERF_RECORD_SAMPLE)
      return rec;
  }
  return NULL;
}

static int values_step(lua_State *L)
{
  struct iter *it = (struct iter *)lua_touserdata(L, lua_upvalueindex(1));
  struct perf_event_header h;
  const unsigned char *rec = next_sample(it, &h);
  if (!rec)
    return 0;
  lua_pushinteger(L, (lua_Integer)at64(rec + it->w.ip));
  lua_pushinteger(L, (lua_Integer)at32(rec + it->w.tid));
  lua_pushinteger(L, (lua_Integer)at64(rec + it->w.time));
  return 3;
}

static int r_values(lua_State *L)
{
  lua_settop(L, 2);
  iter_new(L);
  lua_pushvalue(L, 1);   /* keeps the bytes */
  lua_pushcclosure(L, values_step, 2);
  return 1;
}

static void set_int(lua_State *L, int t, const char *k, lua_Integer v)
{
  lua_pushinteger(L, v);
  lua_setfield(L, t, k);
}

/* The table at t's field k, made when it is not a table; pushed. */
static int sub_table(lua_State *L, int t, const char *k, int narr, int nrec)
{
  if (lua_getfield(L, t, k) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, narr, nrec);
    lua_pushvalue(L, -1);
    lua_setfield(L, t, k);
  }
  return lua_gettop(L);
}

static void put_chain(lua_State *L, int t, const unsigned char *w)
{
  uint64_t nr = at64(w);
  lua_Integer n = 0, nseg = 0;
  int chain = sub_table(L, t, "callchain", (int)nr, 0), segs = 0;
  for (uint64_t i = 0; i < nr; i++) {
    uint64_t ip = at64(w + 8 + 8 * i);
    if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
      if (!segs)
        segs = sub_table(L, t, "callchain_contexts", 2, 0);
      if (lua_rawgeti(L, segs, ++nseg) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_createtable(L, 0, 3);
        lua_pushvalue(L, -1);
        lua_rawseti(L, segs, nseg);
      }
      lua_pushstring(L, ip == (uint64_t)PERF_CONTEXT_KERNEL ? "kernel" : "user");
      lua_setfield(L, -2, "context");
      set_int(L, lua_gettop(L), "first", n + 1);
      set_int(L, lua_gettop(L), "last", n);   /* the floor: the segment's end is not tracked */
      lua_pop(L, 1);
      continue;
    }
    lua_pushinteger(L, (lua_Integer)ip);
    lua_rawseti(L, chain, ++n);
  }
  lua_settop(L, chain - 1);
}

static int tables_step(lua_State *L)
{
  struct iter *it = (struct iter *)lua_touserdata(L, lua_upvalueindex(1));
  struct perf_event_header h;
  const unsigned char *rec = next_sample(it, &h);
  int t;
  if (!rec)
    return 0;
  if (lua_istable(L, lua_upvalueindex(3)))
    lua_pushvalue(L, lua_upvalueindex(3));
  else
    lua_createtable(L, 0, 12);
  t = lua_gettop(L);
  lua_pushliteral(L, "sample");
  lua_setfield(L, t, "type");
  set_int(L, t, "size", h.size);
  set_int(L, t, "misc", h.misc);
  lua_pushstring(L, (h.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL ? "kernel" : "user");
  lua_setfield(L, t, "cpumode");
  set_int(L, t, "ip", (lua_Integer)at64(rec + it->w.ip));
  set_int(L, t, "pid", (lua_Integer)at32(rec + it->w.tid - 4));
  set_int(L, t, "tid", (lua_Integer)at32(rec + it->w.tid));
  set_int(L, t, "time", (lua_Integer)at64(rec + it->w.time));
  set_int(L, t, "period", it->period ? (lua_Integer)at64(rec + it->period) : 1);
  if (it->chain)
    put_chain(L, t, rec + it->chain);
  return 1;
}

static int r_tables(lua_State *L)
{
  lua_settop(L, 3);
  iter_new(L);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 3);
  lua_pushcclosure(L, tables_step, 3);
  return 1;
}

/* The clock the C loop uses, for timing the Lua side the same way. */
static int r_cpu_ns(lua_State *L)
{
  lua_pushinteger(L, (lua_Integer)cpu_ns());
  return 1;
}

/* User + system time of the children waited for so far (os.execute's). */
static int r_children_cpu_ns(lua_State *L)
{
  struct rusage ru;
  if (getrusage(RUSAGE_CHILDREN, &ru) < 0)
    return luaL_error(L, "getrusage failed");
  lua_pushinteger(L, (lua_Integer)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
                       (lua_Integer)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000);
  return 1;
}

static const luaL_Reg funcs[] = {
  { "walk", r_walk },
  { "values", r_values },
  { "tables", r_tables },
  { "cpu_ns", r_cpu_ns },
  { "children_cpu_ns", r_children_cpu_ns },
  { NULL, NULL }
};

int luaopen_rawdecode(lua_State *L);
int luaopen_rawdecode(lua_State *L)
{
  luaL_newlib(L, funcs);   /* compat.h: also for 5.1 */
  return 1;
}
