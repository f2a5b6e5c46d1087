/* ring:aux(pages): the AUX area of a ring, where PMUs that trace (intel_pt,
 * cs_etm, arm_spe ...) write their high-bandwidth data, apart from the
 * records. The area is mapped behind the data area at the offset and size
 * written into the metadata page first; aux_head and aux_tail work as
 * data_head and data_tail do.
 *
 * The mapping belongs to the ring (struct perfev_ring.aux): ring:close()
 * and the ring's __gc unmap it before the ring, so it never outlives the
 * page its head and tail live in. The aux object is a handle that keeps
 * the ring alive (its uservalue) and can unmap the area earlier. */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#include "perfev.h"
#include "ring.h"

#define PERFEV_AUX_MT "perfev.aux"

struct perfev_aux {
  struct perfev_ring *ring;   /* kept alive by the uservalue */
};

void perfev_ring_aux_unmap(struct perfev_ring *r)
{
  if (r->aux) {
    munmap(r->aux, r->aux_len);   /* fails only for a bad range: ours is not */
    r->aux = NULL;
    r->aux_len = 0;
  }
}

static int push_aux_error(lua_State *L, int err)
{
  if (err == EOPNOTSUPP)
    return perfev_push_errno(L, err, "ring:aux: this event's PMU has no AUX area (intel_pt, "
                                     "intel_bts, cs_etm, arm_spe ... do; software, tracepoint "
                                     "and most hardware events do not)");
  if (err == EPERM || err == ENOMEM)
    return perfev_push_errno(L, err, "ring:aux (the AUX area exceeds the locked-memory limit: "
                                     "fewer pages, or raise /proc/sys/kernel/perf_event_mlock_kb)");
  if (err == EINVAL)
    return perfev_push_errno(L, err, "ring:aux (the kernel refused the AUX offset or size; "
                                     "an event whose output goes to another ring has no AUX "
                                     "area of its own)");
  return perfev_push_errno(L, err, "ring:aux");
}

/* ring:aux(pages) -> aux | nil, message, errno */
int perfev_ring_aux(lua_State *L)
{
  struct perfev_ring *r = perfev_ring_self(L);
  lua_Integer pages = luaL_checkinteger(L, 2);
  const struct perfev_event *ev;
  long pagesz = sysconf(_SC_PAGESIZE);
  struct perfev_aux *a;
  size_t len;
  void *p;
  luaL_argcheck(L, pages > 0 && pages <= (1 << 20) && (pages & (pages - 1)) == 0, 2,
                "the number of AUX pages must be a power of two (1, 2, 4, ... up to 2^20)");
  if (r->overwrite)
    return luaL_error(L, "ring:aux: an overwrite ring maps its metadata page read-only, and "
                         "the AUX offset and size are written there: map the ring read-write");
  if (r->aux)
    return luaL_error(L, "ring:aux: this ring already has an AUX area (aux:close() it first)");
  ev = perfev_ring_event(L, r);
  if (pagesz <= 0)
    return perfev_push_errno(L, errno, "sysconf(_SC_PAGESIZE)");
  lua_settop(L, 2);
  a = (struct perfev_aux *)perfev_newuserdata(L, sizeof *a);
  a->ring = r;
  luaL_setmetatable(L, PERFEV_AUX_MT);
  lua_pushvalue(L, 1);
  perfev_setiuservalue(L, -2);
  len = (size_t)pages * (size_t)pagesz;
  /* right behind the data area: map_size is its end, page aligned */
  r->page->aux_offset = r->map_size;
  r->page->aux_size = len;
  p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, ev->fd, (off_t)r->map_size);
  if (p == MAP_FAILED) {
    int err = errno;
    r->page->aux_offset = 0;
    r->page->aux_size = 0;
    return push_aux_error(L, err);
  }
  r->aux = (unsigned char *)p;
  r->aux_len = len;
  return 1;
}

/* ---- the aux object ---- */

static struct perfev_ring *aux_ring(lua_State *L)
{
  struct perfev_aux *a = (struct perfev_aux *)perfev_self(L, PERFEV_AUX_MT);
  if (!a->ring->page || !a->ring->aux)
    luaL_error(L, "perfev.aux: attempt to use a closed AUX area");
  return a->ring;
}

static uint64_t aux_head(const struct perfev_ring *r)
{
  return __atomic_load_n(&r->page->aux_head, __ATOMIC_ACQUIRE);
}

/* aux:info() -> { aux_head, aux_tail, aux_offset, aux_size } */
static int l_info(lua_State *L)
{
  const struct perfev_ring *r = aux_ring(L);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)aux_head(r));
  lua_setfield(L, -2, "aux_head");
  lua_pushinteger(L, (lua_Integer)r->page->aux_tail);
  lua_setfield(L, -2, "aux_tail");
  lua_pushinteger(L, (lua_Integer)r->page->aux_offset);
  lua_setfield(L, -2, "aux_offset");
  lua_pushinteger(L, (lua_Integer)r->page->aux_size);
  lua_setfield(L, -2, "aux_size");
  return 1;
}

/* aux:pending() -> bytes between aux_tail and aux_head */
static int l_pending(lua_State *L)
{
  const struct perfev_ring *r = aux_ring(L);
  lua_pushinteger(L, (lua_Integer)(aux_head(r) - r->page->aux_tail));
  return 1;
}

/* aux:read([max]) -> the bytes between aux_tail and aux_head (at most max),
 * copied out before aux_tail moves past them, so the kernel may reuse the
 * space. An empty string when there is nothing new. */
static int l_read(lua_State *L)
{
  struct perfev_ring *r = aux_ring(L);
  lua_Integer max = luaL_optinteger(L, 2, (lua_Integer)r->aux_len);
  uint64_t head = aux_head(r), tail = r->page->aux_tail, n = head - tail;
  size_t at, first;
  luaL_argcheck(L, max >= 0, 2, "a byte count >= 0");
  if (n > r->aux_len)
    return luaL_error(L, "perfev.aux: aux_head is %I bytes ahead of aux_tail, more than the "
                         "area holds (%I): the area was written in overwrite mode",
                      (lua_Integer)n, (lua_Integer)r->aux_len);
  if (n > (uint64_t)max)
    n = (uint64_t)max;
  at = (size_t)(tail & (r->aux_len - 1));
  first = r->aux_len - at < n ? r->aux_len - at : (size_t)n;
  lua_pushlstring(L, (const char *)r->aux + at, first);
  lua_pushlstring(L, (const char *)r->aux, (size_t)n - first);   /* what wrapped around */
  lua_concat(L, 2);
  /* release: the copy is done before the kernel may write there again */
  __atomic_store_n(&r->page->aux_tail, tail + n, __ATOMIC_RELEASE);
  return 1;
}

/* aux:ring() -> the ring the area belongs to */
static int l_ring(lua_State *L)
{
  perfev_self(L, PERFEV_AUX_MT);
  perfev_getiuservalue(L, 1);
  return 1;
}

static int l_close(lua_State *L)
{
  struct perfev_aux *a = (struct perfev_aux *)perfev_self(L, PERFEV_AUX_MT);
  struct perfev_ring *r = a->ring;
  if (r->aux) {
    void *p = r->aux;
    r->aux = NULL;
    if (munmap(p, r->aux_len) < 0)
      return perfev_push_errno(L, errno, "munmap");
    r->aux_len = 0;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* The ring is reachable from here, so it is alive or being finalised in
 * the same cycle (its memory then still valid, and its area unmapped). */
static int l_gc(lua_State *L)
{
  struct perfev_aux *a = (struct perfev_aux *)perfev_self(L, PERFEV_AUX_MT);
  if (a)   /* NULL: __gc given another self (perfev_self) */
    perfev_ring_aux_unmap(a->ring);
  return 0;
}

static int l_closed(lua_State *L)
{
  const struct perfev_aux *a = (const struct perfev_aux *)perfev_self(L, PERFEV_AUX_MT);
  lua_pushboolean(L, a->ring->aux == NULL || a->ring->page == NULL);
  return 1;
}

static int l_tostring(lua_State *L)
{
  const struct perfev_aux *a = (const struct perfev_aux *)perfev_self(L, PERFEV_AUX_MT);
  const struct perfev_ring *r = a->ring;
  if (!r->aux || !r->page)
    lua_pushliteral(L, "perfev.aux(closed)");
  else
    lua_pushfstring(L, "perfev.aux(%I bytes, %I pending)", (lua_Integer)r->aux_len,
                    (lua_Integer)(aux_head(r) - r->page->aux_tail));
  return 1;
}

int perfev_ring_aux_open_lib(lua_State *L)
{
  static const luaL_Reg meta[] = {
    { "__gc", l_gc }, { "__close", l_gc }, { "__tostring", l_tostring }, { NULL, NULL }
  };
  static const luaL_Reg methods[] = {
    { "info", l_info }, { "pending", l_pending }, { "read", l_read }, { "ring", l_ring },
    { "close", l_close }, { "closed", l_closed }, { NULL, NULL }
  };
  perfev_class_register(L, PERFEV_AUX_MT, meta, methods);
  return 0;
}
