/* A sample's callchain made into Lua values, one way for every reader of
 * a sample (callchain.h): the decoder's rec.callchain and
 * rec.callchain_contexts (decode.c), values mode's reused chain table
 * (values.c), a tally's chains (tally.c); the profiler walks the same
 * entries with perfev_chain_next. */
#include "callchain.h"

lua_Integer perfev_chain_fill(lua_State *L, int t, const unsigned char *w, uint64_t nr, int swap)
{
  struct perfev_chain c;
  uint64_t v;
  lua_Integer n = 0;
  int kind;
  perfev_chain_init(&c, w, nr, swap);
  while ((kind = perfev_chain_next(&c, &v)) != PERFEV_CHAIN_END) {
    if (kind != PERFEV_CHAIN_IP)
      continue;
    lua_pushinteger(L, (lua_Integer)v);
    lua_rawseti(L, t, ++n);
  }
  return n;
}

lua_Integer perfev_chain_segments(const unsigned char *w, uint64_t nr, int swap,
                                  perfev_chain_seg_fn seg, void *ud)
{
  struct perfev_chain c;
  uint64_t v, marker = 0;
  lua_Integer n = 0, k = 0, first = 0;
  int kind;
  perfev_chain_init(&c, w, nr, swap);
  while ((kind = perfev_chain_next(&c, &v)) != PERFEV_CHAIN_END) {
    if (kind == PERFEV_CHAIN_IP) {
      n++;
      continue;
    }
    if (k)   /* the segment the last marker opened ends here */
      seg(ud, marker, first, n, k);
    marker = v;
    first = n + 1;
    k++;
  }
  if (k)
    seg(ud, marker, first, n, k);
  return k;
}

/* A segment as a new table, item k of the table on top. */
static void push_segment(void *ud, uint64_t marker, lua_Integer first, lua_Integer last,
                         lua_Integer k)
{
  lua_State *L = (lua_State *)ud;
  const char *name = perfev_context_name(marker);
  lua_createtable(L, 0, 3);
  if (name)
    lua_pushstring(L, name);
  else
    lua_pushinteger(L, (lua_Integer)marker);
  lua_setfield(L, -2, "context");
  lua_pushinteger(L, first);
  lua_setfield(L, -2, "first");
  lua_pushinteger(L, last);
  lua_setfield(L, -2, "last");
  lua_rawseti(L, -2, k);
}

void perfev_chain_push_contexts(lua_State *L, const unsigned char *w, uint64_t nr, int swap)
{
  lua_createtable(L, 2, 0);
  if (perfev_chain_segments(w, nr, swap, push_segment, L) == 0) {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
}

const char *perfev_context_name(uint64_t marker)
{
  for (size_t i = 0; i < perfev_ncontexts; i++)
    if (perfev_contexts[i].marker == marker)
      return perfev_contexts[i].name;
  return NULL;
}
