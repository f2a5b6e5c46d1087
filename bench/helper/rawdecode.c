/* rawdecode: the baseline of bench/decode.lua (not part of perfev), built
 * by `make bench` into build/bench/rawdecode.so.
 *
 *   local raw = require "rawdecode"
 *   local records, samples, sum, ns = raw.walk(bytes, sample_type)
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
