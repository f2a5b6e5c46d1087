/* ring:snapshot(): the records of an overwrite ring, newest first.
 *
 * A ring mapped read-only is never waited for: the kernel overwrites its
 * oldest records. Only a write_backward ring can be walked then: the kernel
 * writes each record just below the previous one and leaves data_head at
 * the newest, so the records from data_head upward run from newest to
 * oldest, each starting where the previous one ends. A forward overwrite
 * ring has its newest record at the end and no way to find the first whole
 * record once it has wrapped, so snapshot() refuses it (perf too uses
 * write_backward for --overwrite). */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include "perfev.h"
#include "record/decode.h"
#include "ring.h"

/* snapshot's options: { pause = boolean } (default true). */
static int pause_opt(lua_State *L)
{
  static const struct perfev_opt opts[] = { { "pause", LUA_TBOOLEAN }, { NULL, 0 } };
  perfev_check_options(L, 2, "ring:snapshot", opts);
  return perfev_opt_bool(L, 2, "pause", 1);
}

static int pause_output(const struct perfev_event *ev, int on)
{
  return ioctl(ev->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, on ? 1 : 0);
}

static int push_pause_error(lua_State *L, int err)
{
  if (err == ENOTTY || err == EINVAL)
    return perfev_push_errno(L, err, "snapshot: pausing the ring (PERF_EVENT_IOC_PAUSE_OUTPUT "
                                     "needs Linux 4.7; or pass { pause = false } and disable "
                                     "the event around the snapshot)");
  return perfev_push_errno(L, err, "snapshot: pausing the ring");
}

/* Copies the whole data area into out, starting at the newest record, and
 * returns how many bytes of the copy the kernel cannot have overwritten
 * while it was taken: data_head is read again after the copy, and each
 * byte it moved down was written over the oldest end of the copy. */
static uint64_t copy_from_head(const struct perfev_ring *r, unsigned char *out)
{
  uint64_t size = r->data_size, head = perfev_ring_head(r), moved;
  size_t at = (size_t)(head & (size - 1));
  memcpy(out, r->data + at, (size_t)size - at);
  memcpy(out + (size_t)size - at, r->data, at);
  /* the copy's loads before the second load of data_head */
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  moved = head - perfev_ring_head(r);
  return moved >= size ? 0 : size - moved;
}

/* Decodes the records of the copy (limit bytes of it) into the table at
 * the top, newest first; stops at the first that is not whole: a header
 * of size 0 is ring never written, one running past limit was partly
 * overwritten by the newest. */
static void walk(lua_State *L, struct perfev_ring *r, const unsigned char *copy, uint64_t limit)
{
  struct perfev_ring_walk w = { copy, r->data_size - 1, 0, limit };
  struct perf_event_header h;
  uint64_t lost = r->dec->lost;
  lua_Integer n = 0;
  for (; perfev_ring_walk_next(&w, &h) == PERFEV_WALK_RECORD; w.pos += h.size) {
    /* the copy starts at its newest record: none wraps */
    size_t li = perfev_decode_one(L, r->dec, copy + w.pos, h.size, (size_t)w.pos);
    if (r->dec->n > 1) {   /* rec.event, as records() sets it for a shared ring */
      perfev_getiuservalue(L, 1);
      lua_getfield(L, -1, "events");
      lua_rawgeti(L, -1, (lua_Integer)li + 1);
      lua_setfield(L, -4, "event");
      lua_pop(L, 2);
    }
    lua_rawseti(L, -2, ++n);
  }
  /* ring:lost() counts what records() consumed; a snapshot consumes
   * nothing, and the next one would count the same LOST records again */
  r->dec->lost = lost;
}

/* ring:snapshot([{ pause = true }]) -> { records, newest first } | nil, message, errno */
int perfev_ring_snapshot(lua_State *L)
{
  struct perfev_ring *r = perfev_ring_self(L);
  int pause = pause_opt(L);
  struct perfev_event *ev = NULL;
  unsigned char *copy;
  uint64_t limit;
  if (!r->overwrite)
    return luaL_error(L, "ring:snapshot: this ring is read-write, read by records(); "
                         "snapshot() reads an overwrite ring of a write_backward event");
  if (!r->backward)
    return luaL_error(L, "ring:snapshot: a forward overwrite ring loses its record boundaries "
                         "once it wraps: open the event with write_backward = true");
  if (pause)
    ev = perfev_ring_event(L, r);
  lua_settop(L, 1);
  if (!r->data_size) {
    lua_newtable(L);
    return 1;
  }
  copy = (unsigned char *)perfev_newuserdata(L, (size_t)r->data_size);
  if (pause && pause_output(ev, 1) < 0)
    return push_pause_error(L, errno);
  limit = copy_from_head(r, copy);
  if (pause && pause_output(ev, 0) < 0)
    return perfev_push_errno(L, errno, "snapshot: resuming the ring (it stays paused: "
                                       "ev:pause_output(false))");
  lua_newtable(L);
  walk(L, r, copy, limit);
  return 1;
}

/* core._snapshot_walk(area, head, attr) -> { records, newest first }: the
 * copy and walk of snapshot() over a synthetic backward ring whose data
 * area is the string area (a power of two bytes) and whose data_head is
 * head. Internal: for the specs, which build rings the kernel would only
 * produce by chance (a record across the end, one partly overwritten). */
static int l_snapshot_walk(lua_State *L)
{
  size_t len;
  const char *area = luaL_checklstring(L, 1, &len);
  uint64_t head = (uint64_t)luaL_checkinteger(L, 2);
  const struct perfev_attr *a = perfev_attr_check(L, 3);
  struct perf_event_mmap_page *pg;
  struct perfev_ring *r;
  unsigned char *copy;
  luaL_argcheck(L, len >= 8 && (len & (len - 1)) == 0, 1, "a power of two bytes, 8 or more");
  lua_settop(L, 3);
  pg = (struct perf_event_mmap_page *)perfev_newuserdata(L, sizeof *pg);
  memset(pg, 0, sizeof *pg);
  pg->data_head = head;
  r = (struct perfev_ring *)perfev_newuserdata(L, sizeof *r);
  memset(r, 0, sizeof *r);
  r->page = pg;
  r->data = (const unsigned char *)area;
  r->data_size = len;
  r->overwrite = r->backward = 1;
  r->dec = perfev_decoder_new(L, 1);
  perfev_attr_params_init(&r->dec->attrs[0], a, 0);
  perfev_decoder_finish(L, r->dec);
  copy = (unsigned char *)perfev_newuserdata(L, len);
  {
    uint64_t limit = copy_from_head(r, copy);
    lua_newtable(L);
    walk(L, r, copy, limit);
  }
  return 1;
}

void perfev_ring_snapshot_open_lib(lua_State *L)
{
  lua_pushcfunction(L, l_snapshot_walk);
  lua_setfield(L, -2, "_snapshot_walk");
}
