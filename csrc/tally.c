/* Tallies: the `tally` option of every record iteration. Samples are
 * counted by the values of the selected fields (and their layout: an
 * event's samples never share a tally with another's) instead of being
 * returned one by one; each distinct set is returned once, with its count
 * and the sum of its periods, before the next record that is not a sample
 * and at the end. A report over a 100k-sample file then runs its Lua for
 * each distinct (event, pid, tid, cpu, ip, cpumode), not for each sample.
 *
 * The counts live in a userdata of the iteration state's user value
 * (PERFEV_SEL_TALLY), replaced by one twice as large when full: the
 * entries in the order their first sample came (so that whoever builds
 * rows from them builds them in the samples' order) and an open-addressing
 * index over them. No malloc, nothing to free. */
#include <string.h>
#include "decode.h"

struct perfev_tally {
  size_t n, cap;     /* entries used, and room */
  size_t next;       /* the next entry handed out (while draining) */
  size_t slots;      /* index slots: a power of two, at least twice cap */
  size_t nf;         /* fields per key */
  int draining;      /* entries are being handed out */
  int held;          /* a record waits in PERFEV_SEL_HELD */
  /* then: uint64_t ent[cap][words]; uint32_t index[slots] (entry + 1; 0: empty) */
};

/* An entry: the key (its layout, then the field values), then the count
 * and the sum of the periods. */
static size_t key_words(const struct perfev_tally *t) { return 1 + t->nf; }
static size_t words(const struct perfev_tally *t) { return key_words(t) + 2; }

static uint64_t *entry(struct perfev_tally *t, size_t e)
{
  return (uint64_t *)(t + 1) + e * words(t);
}

static uint32_t *index_of(struct perfev_tally *t)
{
  return (uint32_t *)((uint64_t *)(t + 1) + t->cap * words(t));
}

static size_t slot_of(const uint64_t *k, size_t n, size_t slots)
{
  uint64_t h = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < n; i++) {
    h ^= k[i];
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 29;
  }
  return (size_t)h & (slots - 1);
}

/* Entry e in the index (its key is not there yet). */
static void index_put(struct perfev_tally *t, size_t e)
{
  uint32_t *ix = index_of(t);
  size_t s = slot_of(entry(t, e), key_words(t), t->slots);
  while (ix[s])
    s = (s + 1) & (t->slots - 1);
  ix[s] = (uint32_t)(e + 1);
}

/* A new tally with room for cap entries, the state's from now on, holding
 * old's entries (old may be NULL). */
static struct perfev_tally *tally_new(lua_State *L, int state, size_t nf, size_t cap,
                                      const struct perfev_tally *old)
{
  size_t slots = 16, w = 1 + nf + 2;
  struct perfev_tally *t;
  while (slots < 2 * cap)
    slots *= 2;
  if (slots > UINT32_MAX || cap > (SIZE_MAX / 2 - sizeof *t) / (w * 8 + 8))
    luaL_error(L, "%s: a tally of %zu distinct samples is too large", "perfev", cap);
  t = (struct perfev_tally *)perfev_newuserdata(L, sizeof *t + cap * w * 8 + slots * 4);
  memset(t, 0, sizeof *t);
  t->cap = cap;
  t->slots = slots;
  t->nf = nf;
  memset(index_of(t), 0, slots * 4);
  if (old) {
    t->n = old->n;
    memcpy(entry(t, 0), (const uint64_t *)(old + 1), old->n * w * 8);
    for (size_t e = 0; e < t->n; e++)
      index_put(t, e);
  }
  perfev_getiuservalue(L, state);
  lua_pushvalue(L, -2);
  lua_rawseti(L, -2, PERFEV_SEL_TALLY);
  lua_pop(L, 2);
  return t;
}

void perfev_tally_add(lua_State *L, struct perfev_reuse *st, int state,
                      const struct perfev_sel_plan *p, const struct perfev_layout *l,
                      const unsigned char *rec, int swap, size_t li)
{
  struct perfev_tally *t = st->tally;
  uint64_t key[1 + PERFEV_SELECT_MAX], *e;
  uint32_t *ix;
  size_t nf = st->sel.n, s;
  if (!t)
    t = st->tally = tally_new(L, state, nf, 256, NULL);
  key[0] = li;
  for (size_t j = 0; j < nf; j++)
    key[1 + j] = perfev_select_key(p, j, l, rec, swap);
  ix = index_of(t);
  for (s = slot_of(key, 1 + nf, t->slots); ix[s]; s = (s + 1) & (t->slots - 1)) {
    e = entry(t, ix[s] - 1);
    if (memcmp(e, key, (1 + nf) * 8) == 0)
      goto count;
  }
  if (t->n == t->cap) {
    t = st->tally = tally_new(L, state, nf, 2 * t->cap, t);
    ix = index_of(t);
    for (s = slot_of(key, 1 + nf, t->slots); ix[s]; s = (s + 1) & (t->slots - 1))
      ;
  }
  e = entry(t, t->n);
  memcpy(e, key, (1 + nf) * 8);
  e[1 + nf] = e[2 + nf] = 0;
  ix[s] = (uint32_t)(++t->n);
count:
  e[1 + nf]++;
  e[2 + nf] += p->period_at ? perfev_ld64(rec + p->period_at, swap) : l->period;
}

/* Pushes entry t->next (samples, weight, values...) and returns how many. */
static int push_entry(lua_State *L, struct perfev_reuse *st, struct perfev_decoder *d,
                      const struct perfev_extra *x)
{
  struct perfev_tally *t = st->tally;
  const uint64_t *e = entry(t, t->next++);
  size_t li = (size_t)e[0], nf = t->nf;
  const struct perfev_layout *l = &d->layouts[li];
  const struct perfev_sel_plan *p = perfev_select_plan(&st->sel, l, li);
  luaL_checkstack(L, (int)nf + 8, "perfev: too many fields");
  lua_pushinteger(L, (lua_Integer)e[1 + nf]);
  if (p->period_at || l->period)
    lua_pushinteger(L, (lua_Integer)e[2 + nf]);
  else
    lua_pushnil(L);
  for (size_t j = 0; j < nf; j++)
    perfev_select_push_key(L, p, j, e[1 + j], x, li, 0);
  return (int)nf + 2;
}

int perfev_tally_hold(lua_State *L, struct perfev_reuse *st, int state, struct perfev_decoder *d,
                      const struct perfev_extra *x)
{
  struct perfev_tally *t = st->tally;
  if (!t || t->n == 0)
    return 1;
  perfev_getiuservalue(L, state);
  lua_pushvalue(L, -2);
  lua_rawseti(L, -2, PERFEV_SEL_HELD);
  lua_pop(L, 2);
  t->held = 1;
  t->draining = 1;
  t->next = 0;
  return push_entry(L, st, d, x);
}

int perfev_tally_next(lua_State *L, struct perfev_reuse *st, int state, struct perfev_decoder *d,
                      const struct perfev_extra *x, int end)
{
  struct perfev_tally *t = st->tally;
  if (!t)
    return 0;
  if (end && !t->draining && t->n) {
    t->draining = 1;
    t->next = 0;
  }
  if (!t->draining)
    return 0;
  if (t->next < t->n)
    return push_entry(L, st, d, x);
  /* every tally handed out: empty, and the record held back comes */
  t->draining = 0;
  if (t->n * 8 < t->slots) {   /* few entries in a large index: clear theirs */
    uint32_t *ix = index_of(t);
    for (size_t e = 0; e < t->n; e++) {
      size_t s = slot_of(entry(t, e), key_words(t), t->slots);
      while (ix[s] != e + 1)
        s = (s + 1) & (t->slots - 1);
      ix[s] = 0;
    }
  } else {
    memset(index_of(t), 0, t->slots * 4);
  }
  t->n = t->next = 0;
  if (!t->held)
    return 0;
  t->held = 0;
  perfev_getiuservalue(L, state);
  lua_rawgeti(L, -1, PERFEV_SEL_HELD);
  lua_pushnil(L);
  lua_rawseti(L, -3, PERFEV_SEL_HELD);
  lua_remove(L, -2);
  return 1;
}
