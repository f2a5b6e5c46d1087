/* Tallies: the `tally` option of every record iteration. Samples are
 * counted by the values of the selected fields (and their layout: an
 * event's samples never share a tally with another's) instead of being
 * returned one by one; each distinct set is returned once, with its count
 * and the sum of its periods, before the next record that is not a sample
 * and at the end. A report over a 100k-sample file then runs its Lua for
 * each distinct (event, pid, tid, cpu, ip, cpumode), not for each sample.
 *
 * The counts live in a userdata of the iteration state's user value
 * (PERFEV_SLOT_TALLY), replaced by one twice as large when full: the
 * entries in the order their first sample came (so that whoever builds
 * rows from them builds them in the samples' order) and an open-addressing
 * index over them. No malloc, nothing to free. A callchain can be part of
 * the key: the chains are kept, as read, in a second userdata
 * (PERFEV_SLOT_CHAINS), each entry holding where its chain is. */
#include <string.h>
#include "tally.h"
#include "callchain.h"
#include "decode.h"
#include "slots.h"

struct chains {
  size_t used, cap;  /* u64 words */
  uint64_t w[];
};

struct perfev_tally {
  size_t n, cap;     /* entries used, and room */
  size_t next;       /* the next entry handed out (while draining) */
  size_t slots;      /* index slots: a power of two, at least twice cap */
  size_t nf;         /* fields per key */
  int draining;      /* entries are being handed out */
  int held;          /* a record waits in PERFEV_SLOT_HELD */
  struct chains *chains;   /* the callchains of the entries (NULL: none yet) */
  /* then: uint64_t ent[cap][words]; uint32_t index[slots] (entry + 1; 0: empty) */
};

/* An entry: the key (its layout, then the field values), where its chain
 * is and how long (0 words: none), then the count and the sum of the
 * periods. */
enum { E_COFF, E_CLEN, E_COUNT, E_WEIGHT, E_AFTER };
static size_t key_words(const struct perfev_tally *t) { return 1 + t->nf; }
static size_t words(const struct perfev_tally *t) { return key_words(t) + E_AFTER; }

static uint64_t *entry(struct perfev_tally *t, size_t e)
{
  return (uint64_t *)(t + 1) + e * words(t);
}

static uint32_t *index_of(struct perfev_tally *t)
{
  return (uint32_t *)((uint64_t *)(t + 1) + t->cap * words(t));
}

static uint64_t mix(uint64_t h, const uint64_t *k, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    h ^= k[i];
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 29;
  }
  return h;
}

static size_t slot_of(const uint64_t *k, size_t n, const uint64_t *chain, size_t clen, size_t slots)
{
  return (size_t)mix(mix(0x9e3779b97f4a7c15u + clen, k, n), chain, clen) & (slots - 1);
}

static const uint64_t *chain_of(struct perfev_tally *t, const uint64_t *e)
{
  size_t kw = key_words(t);
  return e[kw + E_CLEN] ? t->chains->w + e[kw + E_COFF] : NULL;
}

/* The slot where the probe for entry e's key starts. */
static size_t entry_slot(struct perfev_tally *t, size_t e)
{
  const uint64_t *en = entry(t, e);
  return slot_of(en, key_words(t), chain_of(t, en), (size_t)en[key_words(t) + E_CLEN], t->slots);
}

static size_t next_slot(const struct perfev_tally *t, size_t s) { return (s + 1) & (t->slots - 1); }

/* Entry e in the index (its key is not there yet). */
static void index_put(struct perfev_tally *t, size_t e)
{
  uint32_t *ix = index_of(t);
  size_t s = entry_slot(t, e);
  while (ix[s])
    s = next_slot(t, s);
  ix[s] = (uint32_t)(e + 1);
}

/* Keeps the userdata on top in the state's user value at slot (popped). */
static void keep(lua_State *L, int state, int slot)
{
  perfev_getiuservalue(L, state);
  lua_pushvalue(L, -2);
  lua_rawseti(L, -2, slot);
  lua_pop(L, 2);
}

/* A new tally with room for cap entries, the state's from now on, holding
 * old's entries (old may be NULL). */
static struct perfev_tally *tally_new(lua_State *L, int state, size_t nf, size_t cap,
                                      const struct perfev_tally *old)
{
  size_t slots = 16, w = 1 + nf + E_AFTER;
  struct perfev_tally *t;
  while (slots < 2 * cap)
    slots *= 2;
  if (slots > UINT32_MAX || cap > (SIZE_MAX / 2 - sizeof *t) / (w * 8 + 8))
    luaL_error(L, "perfev: a tally of %zu distinct samples is too large", cap);
  t = (struct perfev_tally *)perfev_newuserdata(L, sizeof *t + cap * w * 8 + slots * 4);
  memset(t, 0, sizeof *t);
  t->cap = cap;
  t->slots = slots;
  t->nf = nf;
  memset(index_of(t), 0, slots * 4);
  if (old) {
    t->n = old->n;
    t->chains = old->chains;
    memcpy(entry(t, 0), (const uint64_t *)(old + 1), old->n * w * 8);
    for (size_t e = 0; e < t->n; e++)
      index_put(t, e);
  }
  keep(L, state, PERFEV_SLOT_TALLY);
  return t;
}

/* Room for n more chain words (a new arena, the state's, when full). */
static void chains_reserve(lua_State *L, int state, struct perfev_tally *t, size_t n)
{
  struct chains *c = t->chains, *nc;
  size_t cap = c ? c->cap : 0, used = c ? c->used : 0;
  if (cap - used >= n)
    return;
  while (cap - used < n)
    cap = cap ? 2 * cap : 4096;
  if (cap > (SIZE_MAX - sizeof *nc) / 8)
    luaL_error(L, "perfev: the callchains of a tally are too large");
  nc = (struct chains *)perfev_newuserdata(L, sizeof *nc + cap * 8);
  nc->cap = cap;
  nc->used = used;
  if (used)
    memcpy(nc->w, c->w, used * 8);
  keep(L, state, PERFEV_SLOT_CHAINS);
  t->chains = nc;
}

/* Counts the sample rec (attr li, plan p) in *tp. */
static void add(lua_State *L, struct perfev_tally **tp, size_t nf, int state,
                const struct perfev_sel_plan *p, const struct perfev_attr_params *l,
                const unsigned char *rec, int swap, size_t li)
{
  struct perfev_tally *t = *tp;
  uint64_t key[1 + PERFEV_SELECT_MAX], *e, *chain = NULL;
  uint32_t *ix;
  size_t s, clen = 0, kw = 1 + nf;
  if (!t)
    t = *tp = tally_new(L, state, nf, 256, NULL);
  key[0] = li;
  for (size_t j = 0; j < nf; j++)
    key[1 + j] = perfev_select_key(p, j, l, rec, swap);
  if (p->chain) {   /* the chain, as read, after the arena's last (not kept yet) */
    const unsigned char *w = rec + p->chain;
    clen = (size_t)perfev_ld64(w, swap);
    chains_reserve(L, state, t, clen + 1);
    chain = t->chains->w + t->chains->used;
    for (size_t i = 0; i < clen; i++)
      chain[i] = perfev_ld64(w + 8 + 8 * i, swap);
  }
  ix = index_of(t);
  for (s = slot_of(key, kw, chain, clen, t->slots); ix[s]; s = next_slot(t, s)) {
    e = entry(t, ix[s] - 1);
    if (memcmp(e, key, kw * 8) == 0 && e[kw + E_CLEN] == clen &&
        (clen == 0 || memcmp(chain_of(t, e), chain, clen * 8) == 0))
      goto count;
  }
  if (t->n == t->cap) {   /* a larger tally: the free slot is another */
    t = *tp = tally_new(L, state, nf, 2 * t->cap, t);
    ix = index_of(t);
    for (s = slot_of(key, kw, chain, clen, t->slots); ix[s]; s = next_slot(t, s))
      ;
  }
  e = entry(t, t->n);
  memcpy(e, key, kw * 8);
  e[kw + E_COFF] = clen ? t->chains->used : 0;
  e[kw + E_CLEN] = clen;
  e[kw + E_COUNT] = e[kw + E_WEIGHT] = 0;
  if (clen)
    t->chains->used += clen;   /* kept */
  ix[s] = (uint32_t)(++t->n);
count:
  e[kw + E_COUNT]++;
  e[kw + E_WEIGHT] += p->period_at ? perfev_ld64(rec + p->period_at, swap) : l->period;
}

/* Pushes a kept chain (n words, host order) as the decoder gives
 * rec.callchain, or (contexts) as rec.callchain_contexts. */
static void push_chain(lua_State *L, const uint64_t *w, size_t n, int contexts)
{
  if (contexts) {
    perfev_chain_push_contexts(L, (const unsigned char *)w, n, 0);
    return;
  }
  lua_createtable(L, (int)(n < 256 ? n : 256), 0);
  perfev_chain_fill(L, lua_gettop(L), (const unsigned char *)w, n, 0);
}

/* Pushes entry t->next (samples, weight, values...) and returns how many. */
static int push_entry(lua_State *L, struct perfev_tally *t, struct perfev_select *sel,
                      struct perfev_decoder *d, const struct perfev_extra *x)
{
  const uint64_t *e = entry(t, t->next++);
  size_t li = (size_t)e[0], nf = t->nf;
  const struct perfev_attr_params *l = &d->attrs[li];
  const struct perfev_sel_plan *p = perfev_select_plan(sel, l, li);
  luaL_checkstack(L, (int)nf + 8, "perfev: too many fields");
  size_t kw = 1 + nf;
  lua_pushinteger(L, (lua_Integer)e[kw + E_COUNT]);
  if (p->period_at || l->period)
    lua_pushinteger(L, (lua_Integer)e[kw + E_WEIGHT]);
  else
    lua_pushnil(L);
  for (size_t j = 0; j < nf; j++) {
    uint8_t how = p->f[j].how;
    if (how == PERFEV_H_CHAIN || how == PERFEV_H_CHAIN_CTX)   /* the chain: NULL, none */
      push_chain(L, chain_of(t, e), (size_t)e[kw + E_CLEN], how == PERFEV_H_CHAIN_CTX);
    else
      perfev_select_push_key(L, p, j, e[1 + j], x, li, 0);
  }
  return (int)nf + 2;
}

int perfev_tally_hold(lua_State *L, struct perfev_tally *t, struct perfev_select *sel, int state,
                      struct perfev_decoder *d, const struct perfev_extra *x)
{
  if (!t || t->n == 0)
    return 1;
  keep(L, state, PERFEV_SLOT_HELD);
  t->held = 1;
  t->draining = 1;
  t->next = 0;
  return push_entry(L, t, sel, d, x);
}

int perfev_tally_next(lua_State *L, struct perfev_tally *t, struct perfev_select *sel, int state,
                      struct perfev_decoder *d, const struct perfev_extra *x, int end)
{
  if (!t)
    return 0;
  if (end && !t->draining && t->n) {
    t->draining = 1;
    t->next = 0;
  }
  if (!t->draining)
    return 0;
  if (t->next < t->n)
    return push_entry(L, t, sel, d, x);
  /* every tally handed out: empty, and the record held back comes */
  t->draining = 0;
  if (t->n * 8 < t->slots) {   /* few entries in a large index: clear theirs */
    uint32_t *ix = index_of(t);
    for (size_t e = 0; e < t->n; e++) {
      size_t s = entry_slot(t, e);
      while (ix[s] != e + 1)
        s = next_slot(t, s);
      ix[s] = 0;
    }
  } else {
    memset(index_of(t), 0, t->slots * 4);
  }
  t->n = t->next = 0;
  if (t->chains)
    t->chains->used = 0;
  if (!t->held)
    return 0;
  t->held = 0;
  perfev_getiuservalue(L, state);
  lua_rawgeti(L, -1, PERFEV_SLOT_HELD);
  lua_pushnil(L);
  lua_rawseti(L, -3, PERFEV_SLOT_HELD);
  lua_remove(L, -2);
  return 1;
}

int perfev_tally_count(lua_State *L, struct perfev_tally **t, struct perfev_select *sel, int state,
                       struct perfev_decoder *d, const unsigned char *rec, size_t len, size_t off)
{
  const struct perfev_attr_params *l;
  const struct perfev_sel_plan *p;
  struct perf_event_header h;
  size_t li;
  uint64_t id;
  if (!d || len < sizeof h)
    return 0;
  perfev_record_header(rec, d->swap, &h);
  if (h.type != PERF_RECORD_SAMPLE || h.size < sizeof h || h.size > len ||
      perfev_decoder_pick(d, rec, h.size, h.type, &li, &id) != PERFEV_PICK_OK)
    return 0;
  l = &d->attrs[li];
  p = perfev_select_plan(sel, l, li);
  if (!p->tally)
    luaL_error(L, "%s: option 'tally': field '%s' cannot be a tally's key (keys are values at "
                  "a fixed place of this event's samples, the callchain, and callchain_contexts "
                  "beside callchain)", sel->who, sel->f[p->untallied].name);
  if (h.size < p->min_size || !perfev_plan_chain_fits(p, rec, h.size, d->swap))
    return 0;
  if (p->variable)   /* counted in place: checked whole, as a full decode reads it */
    perfev_decode_check_sample(L, l, rec, h.size, off, d->swap);
  add(L, t, sel->n, state, p, l, rec, d->swap, li);
  return 1;
}
