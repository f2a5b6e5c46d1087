/* The mmap ring buffer of a sampling event: ev:mmap(pages) and the ring
 * userdata. Records are copied out of the ring before data_tail moves past
 * them, so nothing handed to Lua can be overwritten by the kernel, and a
 * record that wraps around the end of the buffer comes back whole.
 * Overwrite rings (mapped read-only) are read by ring/snapshot.c, counts
 * through the metadata page by ring/selfread.c, the AUX area by ring/aux.c. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "perfev.h"
#include "record/iter.h"
#include "ring.h"

/* ---- ev:mmap(pages) ---- */

static int pages_ok(lua_Integer n)
{
  return n == 0 || (n > 0 && n <= (1 << 20) && (n & (n - 1)) == 0);
}

static int push_mmap_error(lua_State *L, int err)
{
  if (err == EPERM || err == ENOMEM)
    return perfev_push_errno(L, err, "mmap (the ring exceeds the locked-memory limit: fewer "
                                     "pages, or raise /proc/sys/kernel/perf_event_mlock_kb)");
  if (err == EINVAL)
    return perfev_push_errno(L, err, "mmap (the kernel refuses to map an inherited per-task "
                                     "event (cpu -1); open it per CPU)");
  return perfev_push_errno(L, err, "mmap");
}

/* Where the data area is: the page says so from Linux 4.1; before, it is
 * the pages after the first. */
static void ring_area(struct perfev_ring *r, size_t pagesz, size_t pages)
{
  uint64_t off = r->page->data_offset, size = r->page->data_size;
  if (size == 0 || off + size > r->map_size) {
    off = pagesz;
    size = pages * pagesz;
  }
  r->data = (const unsigned char *)r->page + off;
  r->data_size = size;
}

/* The decoder of the ring's records, from the event's attr. */
static struct perfev_decoder *ring_decoder(lua_State *L, const struct perfev_event *ev)
{
  struct perfev_decoder *d = perfev_decoder_new(L, 1);
  perfev_attr_params_init(&d->attrs[0], &ev->attr, ev->id);
  perfev_decoder_finish(L, d);
  return d;
}

/* ev:mmap's options: { overwrite = boolean }. Returns whether to map the
 * ring read-only. A write_backward event's ring is always one: records()
 * could not follow a data_head that moves down, and perf maps it so too. */
static int overwrite_opt(lua_State *L, int backward)
{
  static const struct perfev_opt opts[] = { { "overwrite", LUA_TBOOLEAN }, { NULL, 0 } };
  int overwrite;
  perfev_check_options(L, 3, "ev:mmap", opts);
  overwrite = perfev_opt_bool(L, 3, "overwrite", backward);
  if (backward && !overwrite)
    luaL_error(L, "ev:mmap: a write_backward event's ring is an overwrite ring (read with "
                  "ring:snapshot()): leave out overwrite = false");
  return overwrite;
}

/* ev:mmap([pages = 8 [, opts]]) -> ring | nil, message, errno: a method
 * of the event, set on its class by perfev_ring_open_lib (the event
 * knows nothing of rings). */
static int l_mmap(lua_State *L)
{
  struct perfev_event *ev = perfev_event_self(L);
  lua_Integer pages = luaL_optinteger(L, 2, 8);
  long pagesz = sysconf(_SC_PAGESIZE);
  int backward = perfev_attr_u64(&ev->attr, "write_backward") != 0;
  int overwrite = overwrite_opt(L, backward);
  struct perfev_ring *r;
  void *p;
  luaL_argcheck(L, pages_ok(pages), 2,
                "the number of data pages must be a power of two (1, 2, 4, 8, ... up to 2^20), "
                "or 0 for the metadata page alone");
  if (pagesz <= 0)
    return perfev_push_errno(L, errno, "sysconf(_SC_PAGESIZE)");
  r = (struct perfev_ring *)perfev_newuserdata(L, sizeof *r);
  memset(r, 0, sizeof *r);
  luaL_setmetatable(L, PERFEV_RING_MT);
  r->map_size = ((size_t)pages + 1) * (size_t)pagesz;
  /* without PROT_WRITE the kernel never waits for data_tail: it overwrites */
  p = mmap(NULL, r->map_size, overwrite ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
           ev->fd, 0);
  if (p == MAP_FAILED)
    return push_mmap_error(L, errno);
  r->page = (struct perf_event_mmap_page *)p;
  r->overwrite = overwrite;
  r->backward = backward;
  ring_area(r, (size_t)pagesz, (size_t)pages);
  r->ev = ev;
  lua_createtable(L, 0, 3);   /* the uservalue keeps the events and decoder alive */
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "event");
  lua_createtable(L, 1, 0);   /* events, in the order of the decoder's layouts */
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  lua_setfield(L, -2, "events");
  r->dec = ring_decoder(L, ev);
  lua_setfield(L, -2, "decoder");
  perfev_setiuservalue(L, -2);
  return 1;
}

/* ---- the ring's methods ---- */

static struct perfev_ring *ring_self(lua_State *L)
{
  struct perfev_ring *r = (struct perfev_ring *)perfev_self(L, PERFEV_RING_MT);
  if (!r->page)
    luaL_error(L, "perfev.ring: attempt to use a closed ring");
  return r;
}

/* The kernel's writes up to head are visible once head is read with
 * acquire (the man page's rmb after reading data_head). */
static uint64_t load_head(const struct perfev_ring *r)
{
  return __atomic_load_n(&r->page->data_head, __ATOMIC_ACQUIRE);
}

/* Hands [.., tail) back to the kernel; release orders our copies before it
 * (the man page's mb before writing data_tail). */
static void store_tail(struct perfev_ring *r, uint64_t tail)
{
  __atomic_store_n(&r->page->data_tail, tail, __ATOMIC_RELEASE);
}

/* rec.event: the event of the layout the record was decoded with, when
 * the ring carries several (upvalue 3: the events table). */
static int push_event(lua_State *L, void *ud, int which, int asked, uint32_t type, size_t li,
                      size_t off)
{
  const struct perfev_ring *r = (const struct perfev_ring *)ud;
  (void)asked, (void)type, (void)off;
  if (which != PERFEV_EXTRA_EVENT || r->dec->n < 2)
    return 0;
  lua_rawgeti(L, lua_upvalueindex(3), (lua_Integer)li + 1);
  return 1;
}

/* The ring as a source of records: the next one copied out whole (also
 * across the end of the area), data_tail handed back past it before it
 * is decoded. ud: the ring; end: the head when records() began. */
struct ring_source {
  struct perfev_source src;
  struct perfev_ring *r;
  uint64_t head;
};

static int ring_next(lua_State *L, struct perfev_source *src)
{
  struct ring_source *s = (struct ring_source *)src;
  struct perfev_ring *r = s->r;
  struct perfev_ring_walk w;
  struct perf_event_header h;
  perfev_ring_walk_init(&w, r, s->head);
  switch (perfev_ring_walk_next(&w, &h)) {
  case PERFEV_WALK_END:
    return PERFEV_SOURCE_END;
  case PERFEV_WALK_BROKEN:
    store_tail(r, s->head);   /* resynchronise at head, then report */
    perfev_decode_error(L, (size_t)w.pos, h.type, h.size,
                        "a record in the ring is not whole (skipped to data_head)");
    break;
  default:
    break;
  }
  if (!r->rec && !(r->rec = (unsigned char *)malloc(PERFEV_RECORD_MAX)))
    luaL_error(L, "perfev.ring: out of memory");
  perfev_ring_walk_copy(&w, w.pos, r->rec, h.size);
  store_tail(r, w.pos + h.size);
  src->dec = r->dec;
  src->rec = r->rec;
  src->len = h.size;
  src->off = (size_t)w.pos;
  return PERFEV_SOURCE_RECORD;
}

/* The records() iterator: upvalue 1 the ring, 2 the head when it began,
 * 3 the events, 4 the table to decode every record into (nil: a new table
 * per record), 5 the iteration state. */
static int records_next(lua_State *L)
{
  struct ring_source s;
  struct perfev_extra x;
  s.r = (struct perfev_ring *)lua_touserdata(L, lua_upvalueindex(1));
  if (!s.r->page)
    return luaL_error(L, "perfev.ring: the ring was closed during iteration");
  x.push = push_event;
  x.ud = s.r;
  s.head = (uint64_t)lua_tointeger(L, lua_upvalueindex(2));
  s.src.next = ring_next;
  s.src.ud = s.r;
  s.src.dec = s.r->dec;
  s.src.x = &x;
  return perfev_iter_next(L, (struct perfev_iter *)lua_touserdata(L, lua_upvalueindex(5)),
                          lua_upvalueindex(5), lua_upvalueindex(4), &s.src);
}

/* Pushes the records() iterator for the options at index 2. */
static int push_records(lua_State *L, const char *who)
{
  struct perfev_ring *r = ring_self(L);
  /* records() advances data_tail, which an overwrite ring maps read-only,
   * and could not walk a head that moves down (write_backward) */
  if (r->overwrite)
    return luaL_error(L, "perfev.ring: an overwrite ring (mmap overwrite, or write_backward) "
                         "is read with ring:snapshot(), not records()");
  lua_settop(L, 2);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, (lua_Integer)(r->data_size ? load_head(r) : 0));
  perfev_getiuservalue(L, 1);
  lua_getfield(L, -1, "events");
  if (lua_isnil(L, 2)) {   /* upvalues 4 and 5: no table, the ring's own state (key strings) */
    lua_pushnil(L);
    if (lua_getfield(L, -3, "records_state") == LUA_TNIL) {
      lua_pop(L, 2);
      perfev_iter_options(L, 2, who, NULL);
      lua_pushvalue(L, -1);
      lua_setfield(L, -4, "records_state");
    }
  } else {                 /* the table, and a state of its own */
    perfev_iter_options(L, 2, who, NULL);
  }
  lua_remove(L, -4);
  lua_pushcclosure(L, records_next, 5);
  return 1;
}

/* ring:records([{ into = t, fields = { ... } }]) -> iterator over the records available now */
static int l_records(lua_State *L)
{
  return push_records(L, "ring:records");
}

/* ring:samples(field, ...) -> iterator of the fields' values of each
 * sample available now: ring:records { fields = { field, ... } } */
static int l_samples(lua_State *L)
{
  int n = lua_gettop(L) - 1;
  ring_self(L);
  if (n < 1)
    return luaL_error(L, "ring:samples: name the fields (ring:samples(\"ip\", \"tid\", ...))");
  lua_createtable(L, 0, 1);
  lua_createtable(L, n > 0 ? n : 0, 0);
  for (int i = 1; i <= n; i++) {
    lua_pushvalue(L, i + 1);
    lua_rawseti(L, -2, i);
  }
  lua_setfield(L, -2, "fields");
  lua_replace(L, 2);
  return push_records(L, "ring:samples");
}

/* A decoder for the ring's layouts plus ev's; raises when ev's records
 * could not be told apart from the others'. */
static struct perfev_decoder *grown_decoder(lua_State *L, const struct perfev_decoder *old,
                                            const struct perfev_event *ev)
{
  struct perfev_decoder *d = perfev_decoder_new(L, old->n + 1);
  memcpy(d->attrs, old->attrs, old->n * sizeof old->attrs[0]);
  perfev_attr_params_init(&d->attrs[old->n], &ev->attr, ev->id);
  d->lost = old->lost;
  perfev_decoder_finish(L, d);
  return d;
}

/* ring:add(ev) -> true | nil, message, errno: ev's records go to this ring
 * too (PERF_EVENT_IOC_SET_OUTPUT), and records() sets rec.event. Every
 * event of a shared ring needs PERF_SAMPLE_IDENTIFIER (or the same id
 * position) for its records to be told apart. */
static int l_add(lua_State *L)
{
  struct perfev_ring *r = ring_self(L);
  struct perfev_event *ev = perfev_event_check(L, 2);
  struct perfev_decoder *d;
  if (r->ev->fd < 0)
    return luaL_error(L, "perfev.ring: its event is closed");
  lua_settop(L, 2);
  d = grown_decoder(L, r->dec, ev);   /* raises before anything changes */
  if (ioctl(ev->fd, PERF_EVENT_IOC_SET_OUTPUT, (long)r->ev->fd) < 0)
    return perfev_push_errno(L, errno, "set_output (the events must be on the same CPU, "
                                       "or the same task, use the same clock and the same "
                                       "write_backward)");
  perfev_getiuservalue(L, 1);
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "decoder");
  lua_getfield(L, -1, "events");
  lua_pushvalue(L, 2);
  lua_rawseti(L, -2, (lua_Integer)d->n);
  r->dec = d;
  lua_pushboolean(L, 1);
  return 1;
}

/* Bytes records() would read; for an overwrite ring, which has no
 * data_tail, the bytes written so far up to a ring's worth (what a
 * snapshot walks at most). A backward ring's head counts down from 0. */
static uint64_t pending_bytes(const struct perfev_ring *r)
{
  uint64_t head, n;
  if (!r->data_size)
    return 0;
  head = load_head(r);
  if (!r->overwrite)
    return head - r->page->data_tail;
  n = r->backward ? (uint64_t)0 - head : head;
  return n < r->data_size ? n : r->data_size;
}

/* ring:pending() -> bytes of records waiting in the ring */
static int l_pending(lua_State *L)
{
  lua_pushinteger(L, (lua_Integer)pending_bytes(ring_self(L)));
  return 1;
}

/* ring:lost() -> samples the kernel reported lost (LOST and LOST_SAMPLES
 * records iterated so far) */
static int l_lost(lua_State *L)
{
  lua_pushinteger(L, (lua_Integer)ring_self(L)->dec->lost);
  return 1;
}

static long elapsed_ms(const struct timespec *t0)
{
  struct timespec t;
  if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
    return 0;
  return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* poll(2), restarted with the time that remains when a signal interrupts. */
static int poll_fd(int fd, int timeout, short *revents)
{
  struct pollfd pfd = { fd, POLLIN, 0 };
  struct timespec t0;
  int n, wait = timeout;
  if (clock_gettime(CLOCK_MONOTONIC, &t0) < 0)
    return -1;
  while ((n = poll(&pfd, 1, wait)) < 0 && errno == EINTR) {
    if (timeout >= 0) {
      long left = timeout - elapsed_ms(&t0);
      wait = left > 0 ? (int)left : 0;
    }
  }
  *revents = pfd.revents;
  return n;
}

/* ring:poll([timeout_ms = -1]) -> readable, hup. readable: records are
 * waiting; hup: the monitored task is gone (no more records will come).
 * timeout 0 never blocks; -1 waits without limit. */
static int l_poll(lua_State *L)
{
  struct perfev_ring *r = ring_self(L);
  lua_Integer ms = luaL_optinteger(L, 2, -1);
  short ev = 0;
  luaL_argcheck(L, ms >= -1 && ms <= 0x7fffffff, 2, "milliseconds, or -1 to wait without limit");
  if (r->ev->fd < 0)
    return luaL_error(L, "perfev.ring: its event is closed");
  if (poll_fd(r->ev->fd, (int)ms, &ev) < 0)
    return perfev_push_errno(L, errno, "poll");
  if (ev & POLLNVAL)
    return perfev_push_errno(L, EBADF, "poll");
  lua_pushboolean(L, (ev & POLLIN) != 0 || pending_bytes(r) != 0);
  lua_pushboolean(L, (ev & POLLHUP) != 0);
  return 2;
}

/* The lock-protected fields, read consistently: the kernel bumps lock
 * around an update, and a read that saw it move is retried. */
struct locked { uint32_t index; int64_t offset; uint64_t enabled, running; };

static void read_locked(const struct perf_event_mmap_page *pg, struct locked *out)
{
  uint32_t seq;
  do {
    seq = __atomic_load_n(&pg->lock, __ATOMIC_ACQUIRE);
    out->index = __atomic_load_n(&pg->index, __ATOMIC_RELAXED);
    out->offset = __atomic_load_n(&pg->offset, __ATOMIC_RELAXED);
    out->enabled = __atomic_load_n(&pg->time_enabled, __ATOMIC_RELAXED);
    out->running = __atomic_load_n(&pg->time_running, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
  } while (__atomic_load_n(&pg->lock, __ATOMIC_RELAXED) != seq);
}

/* The bits of the capabilities word, low first. */
const char *const perfev_ring_cap_names[] = {
  "cap_bit0", "cap_bit0_is_deprecated", "cap_user_rdpmc", "cap_user_time",
  "cap_user_time_zero", "cap_user_time_short",
};
const size_t perfev_ring_ncaps = sizeof perfev_ring_cap_names / sizeof perfev_ring_cap_names[0];

/* ring:info() -> the metadata page, field by field */
static int l_info(lua_State *L)
{
  struct perfev_ring *r = ring_self(L);
  const struct perf_event_mmap_page *pg = r->page;
  struct locked lk;
  uint64_t caps = pg->capabilities;
  read_locked(pg, &lk);
  lua_createtable(L, 0, 28);
  perfev_set_u64(L, "version", pg->version);
  perfev_set_u64(L, "compat_version", pg->compat_version);
  perfev_set_u64(L, "index", lk.index);
  perfev_set_u64(L, "offset", (uint64_t)lk.offset);
  perfev_set_u64(L, "time_enabled", lk.enabled);
  perfev_set_u64(L, "time_running", lk.running);
  perfev_set_u64(L, "capabilities", caps);
  for (size_t i = 0; i < perfev_ring_ncaps; i++) {
    lua_pushboolean(L, (caps >> i) & 1);
    lua_setfield(L, -2, perfev_ring_cap_names[i]);
  }
  perfev_set_u64(L, "pmc_width", pg->pmc_width);
  perfev_set_u64(L, "time_shift", pg->time_shift);
  perfev_set_u64(L, "time_mult", pg->time_mult);
  perfev_set_u64(L, "time_offset", pg->time_offset);
  perfev_set_u64(L, "time_zero", pg->time_zero);
  perfev_set_u64(L, "time_cycles", pg->time_cycles);
  perfev_set_u64(L, "time_mask", pg->time_mask);
  perfev_set_u64(L, "size", pg->size);
  perfev_set_u64(L, "data_head", r->data_size ? load_head(r) : 0);
  perfev_set_u64(L, "data_tail", pg->data_tail);
  perfev_set_u64(L, "data_offset", (uint64_t)(r->data - (const unsigned char *)pg));
  perfev_set_u64(L, "data_size", r->data_size);
  perfev_set_u64(L, "aux_head", pg->aux_head);
  perfev_set_u64(L, "aux_tail", pg->aux_tail);
  perfev_set_u64(L, "aux_offset", pg->aux_offset);
  perfev_set_u64(L, "aux_size", pg->aux_size);
  lua_pushboolean(L, r->overwrite);
  lua_setfield(L, -2, "overwrite");
  lua_pushboolean(L, r->backward);
  lua_setfield(L, -2, "write_backward");
  return 1;
}

/* ring:event() -> the event the ring belongs to */
static int l_event(lua_State *L)
{
  perfev_self(L, PERFEV_RING_MT);
  perfev_getiuservalue(L, 1);
  lua_getfield(L, -1, "event");
  return 1;
}

static void ring_unmap(struct perfev_ring *r)
{
  perfev_ring_aux_unmap(r);
  if (r->page) {
    munmap(r->page, r->map_size);   /* fails only for a bad range: ours is not */
    r->page = NULL;
  }
  free(r->rec);
  r->rec = NULL;
}

static int l_close(lua_State *L)
{
  struct perfev_ring *r = (struct perfev_ring *)perfev_self(L, PERFEV_RING_MT);
  perfev_ring_aux_unmap(r);   /* the AUX area goes first, as perf unmaps it */
  free(r->rec);
  r->rec = NULL;
  if (r->page) {
    void *p = r->page;
    r->page = NULL;
    if (munmap(p, r->map_size) < 0)
      return perfev_push_errno(L, errno, "munmap");
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_gc(lua_State *L)
{
  struct perfev_ring *r = (struct perfev_ring *)perfev_self(L, PERFEV_RING_MT);
  if (r)   /* NULL: __gc given another self (perfev_self) */
    ring_unmap(r);
  return 0;
}

static int l_closed(lua_State *L)
{
  lua_pushboolean(L, ((struct perfev_ring *)perfev_self(L, PERFEV_RING_MT))->page == NULL);
  return 1;
}

static int l_tostring(lua_State *L)
{
  struct perfev_ring *r = (struct perfev_ring *)perfev_self(L, PERFEV_RING_MT);
  if (!r->page)
    lua_pushliteral(L, "perfev.ring(closed)");
  else
    lua_pushfstring(L, "perfev.ring(%d data bytes, %d pending%s)", (int)r->data_size,
                    (int)pending_bytes(r),
                    r->overwrite ? (r->backward ? ", backward" : ", overwrite") : "");
  return 1;
}

/* ---- for the other ring files (ring.h) ---- */

struct perfev_ring *perfev_ring_self(lua_State *L)
{
  return ring_self(L);
}

struct perfev_event *perfev_ring_event(lua_State *L, const struct perfev_ring *r)
{
  if (r->ev->fd < 0)
    luaL_error(L, "perfev.ring: its event is closed");
  return r->ev;
}

uint64_t perfev_ring_head(const struct perfev_ring *r)
{
  return load_head(r);
}

void perfev_ring_consume(struct perfev_ring *r, uint64_t tail)
{
  store_tail(r, tail);
}

/* The ring's class, and ev:mmap on the event's. */
int perfev_ring_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__gc", l_gc }, { "__close", l_gc }, { "__tostring", l_tostring }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = {
    { "records", l_records }, { "samples", l_samples }, { "poll", l_poll }, { "lost", l_lost }, { "info", l_info },
    { "pending", l_pending }, { "event", l_event }, { "add", l_add }, { "close", l_close },
    { "closed", l_closed }, { "snapshot", perfev_ring_snapshot }, { "read", perfev_ring_read },
    { "aux", perfev_ring_aux }, { NULL, NULL }
  };
  perfev_ring_snapshot_open_lib(L);
  perfev_class_register(L, PERFEV_RING_MT, meta, methods);
  perfev_class_methods(L, PERFEV_RING_MT);
  lua_setfield(L, -2, "ring_methods");   /* core.ring_methods: the Lua layer adds to it */
  perfev_class_methods(L, PERFEV_EVENT_MT);
  luaL_getmetatable(L, PERFEV_EVENT_MT);   /* upvalue 1, as every method has */
  lua_pushcclosure(L, l_mmap, 1);
  lua_setfield(L, -2, "mmap");
  lua_pop(L, 1);
  return 0;
}
