/* Values mode (values.c): an iteration with `fields` and no `into` table
 * returns a sample's selected fields as values, read in place where the
 * plan knows their offsets, with no table per record. */
#ifndef PERFEV_VALUES_H
#define PERFEV_VALUES_H

#include "decode.h"

/* The shortcut: the size of the record at rec (avail bytes left in its
 * buffer) when it is a whole sample that sel's plan of scalars reads,
 * else 0. With attrs, the plan is also checked against the decoder's one
 * attr, for a decoder that can be replaced (ring:add): it can be freed
 * and another made at its place. */
static inline size_t perfev_values_scalar_size(const struct perfev_select *sel,
                                               const struct perfev_decoder *d,
                                               const unsigned char *rec, size_t avail, int attrs)
{
  const struct perfev_sel_plan *p = sel->scalars;
  struct perf_event_header h;
  if (!d || sel->scalars_of != d || avail < sizeof h)
    return 0;
  perfev_record_header(rec, d->swap, &h);
  if (h.type != PERF_RECORD_SAMPLE || h.size > avail || h.size < p->min_size)
    return 0;
  if (attrs && (d->n != 1 || p->sample_type != d->attrs[0].sample_type ||
                p->read_format != d->attrs[0].read_format || p->period != d->attrs[0].period))
    return 0;
  return h.size;
}

/* ... and pushes them (inline: it is the whole of a selected iteration's
 * work on a plain sample); a sample with rows of variable size is checked
 * whole first (off: its offset, for the message). */
static inline int perfev_values_push_scalars(lua_State *L, const struct perfev_select *sel,
                                             const struct perfev_decoder *d,
                                             const unsigned char *rec, size_t off)
{
  const struct perfev_sel_plan *p = sel->scalars;
  size_t n = sel->n;
  int swap = d->swap;
  if (p->variable)
    perfev_decode_check_sample(L, &d->attrs[0], rec, perfev_ld16(rec + 6, swap), off, swap);
  if (n + 6 > LUA_MINSTACK)   /* a C function has LUA_MINSTACK slots */
    luaL_checkstack(L, (int)n + 6, "too many fields");
  for (size_t j = 0; j < n; j++) {
    const unsigned char *at = rec + p->f[j].off;
    switch (p->f[j].scalar) {
    case PERFEV_SCALAR_U64: lua_pushinteger(L, (lua_Integer)perfev_ld64(at, swap)); break;
    case PERFEV_SCALAR_U32: lua_pushinteger(L, (lua_Integer)perfev_ld32(at, swap)); break;
    case PERFEV_SCALAR_S32: lua_pushinteger(L, (lua_Integer)(int32_t)perfev_ld32(at, swap)); break;
    default: lua_pushinteger(L, (lua_Integer)p->period); break;
    }
  }
  return (int)n;
}

/* Pushes the selected fields of the sample at rec (to->sel: the
 * selection; a walk of the rows that have no fixed offset fills to's
 * table) and returns how many, or skips a record of another type
 * (returns 0). */
int perfev_values_push(lua_State *L, struct perfev_decoder *d, const struct perfev_sink *to,
                       const unsigned char *rec, size_t len, size_t off,
                       const struct perfev_extra *x);

#endif
