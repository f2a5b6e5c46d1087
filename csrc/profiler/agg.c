/* The profiler's aggregation: frames and stacks interned in hash tables so
 * that a sample of a stack seen before costs hashing and a compare, no
 * allocation. Read out into Lua tables once, at the end. */
#include <stdlib.h>
#include <string.h>
#include "compat.h"
#include "profiler.h"

/* FNV-1a over bytes, continued from h. */
static uint32_t fnv(uint32_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 16777619u;
  return h;
}

static uint32_t fnv_str(uint32_t h, const char *s)
{
  return s ? fnv(h, s, strlen(s) + 1) : fnv(h, "", 1) ^ 0x9e3779b9u;
}

static uint32_t key_hash(const struct prof_key *k)
{
  uint32_t h = fnv_str(2166136261u, k->name);
  h = fnv_str(h, k->src);
  int nums[2] = { k->linedefined, k->line };
  h = fnv(h, nums, sizeof nums);
  h = fnv(h, &k->ip, sizeof k->ip);
  return fnv(h, &k->what, 1);
}

static int str_eq(const char *a, const char *b)
{
  return a == b || (a && b && strcmp(a, b) == 0);
}

static int frame_eq(const struct prof_frame *f, const struct prof_key *k)
{
  return f->linedefined == k->linedefined && f->line == k->line && f->what == k->what &&
         f->ip == k->ip && str_eq(f->name, k->name) && str_eq(f->src, k->src);
}

/* Grows an array to hold one more element of size sz; 0 or -1. */
static int grow(void **arr, size_t *cap, size_t need, size_t sz)
{
  if (need <= *cap)
    return 0;
  size_t ncap = *cap ? *cap * 2 : 64;
  while (ncap < need)
    ncap *= 2;
  void *p = realloc(*arr, ncap * sz);
  if (!p)
    return -1;
  *arr = p;
  *cap = ncap;
  return 0;
}

/* Rebuilds a table of ids + 1 at twice its size (or 256 slots), from the
 * hashes hash(i) of the n items. */
static int rehash(uint32_t **tab, size_t *cap, size_t n, uint32_t (*hash)(const void *, size_t),
                  const void *items)
{
  size_t ncap = *cap ? *cap * 2 : 256;
  uint32_t *t = calloc(ncap, sizeof *t);
  if (!t)
    return -1;
  for (size_t i = 0; i < n; i++) {
    size_t j = hash(items, i) & (ncap - 1);
    while (t[j])
      j = (j + 1) & (ncap - 1);
    t[j] = (uint32_t)i + 1;
  }
  free(*tab);
  *tab = t;
  *cap = ncap;
  return 0;
}

static uint32_t frame_hash_at(const void *items, size_t i)
{
  return ((const struct prof_frame *)items)[i].hash;
}

static uint32_t stack_hash_at(const void *items, size_t i)
{
  return ((const struct prof_stack *)items)[i].hash;
}

static char *dup_or_null(const char *s, int *fail)
{
  if (!s)
    return NULL;
  char *d = strdup(s);
  if (!d)
    *fail = 1;
  return d;
}

long prof_agg_frame(struct prof_agg *a, const struct prof_key *k)
{
  uint32_t h = key_hash(k);
  if (a->capftab) {
    for (size_t j = h & (a->capftab - 1); a->ftab[j]; j = (j + 1) & (a->capftab - 1)) {
      const struct prof_frame *f = &a->frames[a->ftab[j] - 1];
      if (f->hash == h && frame_eq(f, k))
        return (long)a->ftab[j] - 1;
    }
  }
  /* a new frame: keep the table at most half full */
  if ((a->nframes + 1) * 2 > a->capftab &&
      rehash(&a->ftab, &a->capftab, a->nframes, frame_hash_at, a->frames) != 0)
    return -1;
  if (grow((void **)&a->frames, &a->capframes, a->nframes + 1, sizeof *a->frames) != 0)
    return -1;
  int fail = 0;
  struct prof_frame *f = &a->frames[a->nframes];
  f->name = dup_or_null(k->name, &fail);
  f->src = dup_or_null(k->src, &fail);
  if (fail) {
    free(f->name);
    free(f->src);
    return -1;
  }
  f->linedefined = k->linedefined;
  f->line = k->line;
  f->what = k->what;
  f->ip = k->ip;
  f->hash = h;
  size_t j = h & (a->capftab - 1);
  while (a->ftab[j])
    j = (j + 1) & (a->capftab - 1);
  a->ftab[j] = (uint32_t)a->nframes + 1;
  return (long)a->nframes++;
}

long prof_agg_stack_id(struct prof_agg *a, const uint32_t *ids, uint32_t n)
{
  uint32_t h = fnv(2166136261u, ids, n * sizeof *ids);
  if (a->capstab) {
    for (size_t j = h & (a->capstab - 1); a->stab[j]; j = (j + 1) & (a->capstab - 1)) {
      struct prof_stack *s = &a->stacks[a->stab[j] - 1];
      if (s->hash == h && s->len == n && memcmp(a->ids + s->off, ids, n * sizeof *ids) == 0)
        return (long)a->stab[j] - 1;
    }
  }
  if ((a->nstacks + 1) * 2 > a->capstab &&
      rehash(&a->stab, &a->capstab, a->nstacks, stack_hash_at, a->stacks) != 0)
    return -1;
  if (grow((void **)&a->stacks, &a->capstacks, a->nstacks + 1, sizeof *a->stacks) != 0 ||
      grow((void **)&a->ids, &a->capids, a->nids + n, sizeof *a->ids) != 0)
    return -1;
  if (n)
    memcpy(a->ids + a->nids, ids, n * sizeof *ids);
  struct prof_stack *s = &a->stacks[a->nstacks];
  s->off = a->nids;
  s->len = n;
  s->hash = h;
  s->weight = 0;
  s->samples = 0;
  a->nids += n;
  size_t j = h & (a->capstab - 1);
  while (a->stab[j])
    j = (j + 1) & (a->capstab - 1);
  a->stab[j] = (uint32_t)a->nstacks + 1;
  return (long)a->nstacks++;
}

long prof_agg_stack(struct prof_agg *a, const uint32_t *ids, uint32_t n, uint64_t weight,
                    uint64_t samples)
{
  long id = prof_agg_stack_id(a, ids, n);
  if (id < 0)
    return -1;
  a->stacks[id].weight += weight;
  a->stacks[id].samples += samples;
  return id;
}

static void set_str(lua_State *L, const char *k, const char *v)
{
  if (!v)
    return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

static const char *what_name(char w)
{
  switch (w) {
  case 'C': return "C";
  case 'm': return "main";
  case 't': return "truncated";
  case 'u': return "native";
  case 'k': return "kernel";
  default: return "Lua";
  }
}

void prof_agg_push(lua_State *L, const struct prof_agg *a)
{
  lua_createtable(L, 0, 2);
  prof_agg_push_fields(L, a);
}

void prof_agg_push_fields(lua_State *L, const struct prof_agg *a)
{
  lua_createtable(L, (int)a->nframes, 0);
  for (size_t i = 0; i < a->nframes; i++) {
    const struct prof_frame *f = &a->frames[i];
    lua_createtable(L, 0, 5);
    set_str(L, "name", f->name);
    set_str(L, "source", f->src);
    set_int(L, "linedefined", f->linedefined);
    set_int(L, "line", f->line);
    set_str(L, "what", what_name(f->what));
    if (f->what == 'u' || f->what == 'k') {
      perfev_pushu64(L, f->ip);            /* exact on LuaJIT too (cdata above 2^53) */
      lua_setfield(L, -2, "ip");
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "frames");
  lua_createtable(L, (int)a->nstacks, 0);
  for (size_t i = 0; i < a->nstacks; i++) {
    const struct prof_stack *s = &a->stacks[i];
    lua_createtable(L, (int)s->len, 2);
    for (uint32_t j = 0; j < s->len; j++) {
      lua_pushinteger(L, (lua_Integer)a->ids[s->off + j] + 1);
      lua_rawseti(L, -2, (lua_Integer)j + 1);
    }
    set_int(L, "weight", (lua_Integer)s->weight);
    set_int(L, "samples", (lua_Integer)s->samples);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "stacks");
}

void prof_agg_free(struct prof_agg *a)
{
  for (size_t i = 0; i < a->nframes; i++) {
    free(a->frames[i].name);
    free(a->frames[i].src);
  }
  free(a->frames);
  free(a->ftab);
  free(a->stacks);
  free(a->stab);
  free(a->ids);
  memset(a, 0, sizeof *a);
}
