/* Values mode: a sample's selected fields pushed as values (values.h).
 * Fields at a fixed offset are read in place; the callchain, when its
 * offset is fixed, refills one table of the state's; the other fields are
 * decoded by a walk of their rows alone into the iteration's table, and
 * taken from it. */
#include "values.h"
#include "callchain.h"
#include "slots.h"

/* Pushes the callchain at p->chain as the state's one callchain table:
 * the addresses without the PERF_CONTEXT_* markers, as a full decode's
 * rec.callchain, the entries after them of the last sample removed. */
static void push_chain(lua_State *L, struct perfev_select *sel, int state,
                       const struct perfev_sel_plan *p, const unsigned char *rec, int swap)
{
  const unsigned char *w = rec + p->chain;
  lua_Integer n;
  int t;
  perfev_getiuservalue(L, state);
  if (lua_rawgeti(L, -1, PERFEV_SLOT_CHAIN) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 64, 0);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, PERFEV_SLOT_CHAIN);
    sel->chain_len = 0;
  }
  lua_remove(L, -2);
  t = lua_gettop(L);
  n = perfev_chain_fill(L, t, w + 8, perfev_ld64(w, swap), swap);
  for (lua_Integer k = n + 1; k <= sel->chain_len; k++) {
    lua_pushnil(L);
    lua_rawseti(L, t, k);
  }
  sel->chain_len = n;
}

int perfev_values_push(lua_State *L, struct perfev_decoder *d, const struct perfev_sink *to,
                       const unsigned char *rec, size_t len, size_t off,
                       const struct perfev_extra *x)
{
  struct perfev_select *sel = to->sel;
  const struct perfev_sel_plan *p;
  const struct perfev_attr_params *l;
  struct perf_event_header h;
  size_t li;
  uint64_t id;
  int t = 0, uv = 0, swap;
  if (!d || len < sizeof h)
    return (int)perfev_decode_into(L, d, to, rec, len, off, NULL);   /* raises */
  swap = d->swap;
  perfev_record_header(rec, swap, &h);
  if (h.size < sizeof h || h.size > len ||
      perfev_decoder_pick(d, rec, h.size, h.type, &li, &id) != PERFEV_PICK_OK)
    return (int)perfev_decode_into(L, d, to, rec, len, off, NULL);   /* raises */
  if (h.type != PERF_RECORD_SAMPLE) {
    perfev_decoder_count_lost(d, h.type, rec, h.size);
    return 0;
  }
  l = &d->attrs[li];
  p = perfev_select_plan(sel, l, li);
  if (p->scalars && d->n == 1) {   /* the next samples take the shortcut */
    sel->scalars = p;
    sel->scalars_of = d;
    if (h.size >= p->min_size)
      return perfev_values_push_scalars(L, sel, d, rec, off);
  }
  if (sel->n + 6 > LUA_MINSTACK)   /* a C function has LUA_MINSTACK slots */
    luaL_checkstack(L, (int)sel->n + 6, "perfev.decode: too many fields");
  if (p->fast && p->variable && h.size >= p->min_size && perfev_plan_chain_fits(p, rec, h.size, swap))
    perfev_decode_check_sample(L, l, rec, h.size, off, swap);   /* read in place: checked whole */
  if (!p->fast || h.size < p->min_size || !perfev_plan_chain_fits(p, rec, h.size, swap)) {
    /* a walk of the rows asked for; a record too short for its fixed
     * fields is walked whole, so that the decoder says what is wrong */
    int bad = h.size < p->min_size || !perfev_plan_chain_fits(p, rec, h.size, swap);
    sel->rows_now = bad ? sel->rows_all : p->rows;
    perfev_decode_into(L, d, to, rec, h.size, off, NULL);
    t = lua_gettop(L);
    perfev_getiuservalue(L, to->state);
    uv = lua_gettop(L);
  }
  for (size_t j = 0; j < sel->n; j++) {
    if (p->f[j].how == PERFEV_H_TABLE) {
      lua_rawgeti(L, uv, PERFEV_SLOT_KEYS + (lua_Integer)j);
      lua_rawget(L, t);
    } else if (p->f[j].how == PERFEV_H_CHAIN) {
      push_chain(L, sel, to->state, p, rec, swap);
    } else {
      perfev_select_push_key(L, p, j, perfev_select_key(p, j, l, rec, swap), x, li, off);
    }
  }
  if (!p->first_set && lua_isnil(L, -(int)sel->n))
    luaL_error(L, "%s: the sample at offset %d has no '%s', the first of the fields: "
                  "a loop ends at a nil first value, so put first a field every sample has "
                  "(ip, tid, time, ...)", sel->who, (int)off, sel->f[0].name);
  if (t) {
    lua_remove(L, uv);
    lua_remove(L, t);
  }
  return (int)sel->n;
}
