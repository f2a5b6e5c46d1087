/* The allocation profiler's sampled blocks still live (a hash table by
 * address, in malloc'd memory: it is updated from inside the Lua
 * allocator) and the sampling's maths (no libm: the core links none). */
#include <stdlib.h>
#include <string.h>
#include "allocprof.h"

static size_t slot_of(uintptr_t p, size_t cap)
{
  uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;   /* Fibonacci hashing */
  return (size_t)(h >> 20) & (cap - 1);
}

static int grow(struct ap_live *t)
{
  size_t ncap = t->cap ? t->cap * 2 : 1024;
  struct ap_block *s = calloc(ncap, sizeof *s);
  if (!s)
    return -1;
  for (size_t i = 0; i < t->cap; i++) {
    if (!t->slots[i].ptr)
      continue;
    size_t j = slot_of(t->slots[i].ptr, ncap);
    while (s[j].ptr)
      j = (j + 1) & (ncap - 1);
    s[j] = t->slots[i];
  }
  free(t->slots);
  t->slots = s;
  t->cap = ncap;
  return 0;
}

struct ap_block *ap_live_get(const struct ap_live *t, uintptr_t ptr)
{
  if (!t->n)
    return NULL;
  for (size_t j = slot_of(ptr, t->cap); t->slots[j].ptr; j = (j + 1) & (t->cap - 1))
    if (t->slots[j].ptr == ptr)
      return &t->slots[j];
  return NULL;
}

int ap_live_put(struct ap_live *t, uintptr_t ptr, size_t size)
{
  struct ap_block *b = ap_live_get(t, ptr);
  if (!b) {
    if ((t->n + 1) * 2 > t->cap && grow(t) != 0)
      return -1;
    size_t j = slot_of(ptr, t->cap);
    while (t->slots[j].ptr)
      j = (j + 1) & (t->cap - 1);
    b = &t->slots[j];
    t->n++;
  }
  b->ptr = ptr;
  b->size = size;
  b->sampled = size;
  b->stack = AP_PENDING;
  return 0;
}

int ap_live_shrink(struct ap_live *t, uintptr_t ptr, uintptr_t nptr, size_t size)
{
  struct ap_block *b = ap_live_get(t, ptr);
  if (!b)
    return 0;
  if (nptr == ptr) {
    b->size = size;
    return 0;
  }
  struct ap_block keep = *b;
  ap_live_del(t, ptr);
  if (ap_live_put(t, nptr, keep.sampled) != 0)
    return -1;
  b = ap_live_get(t, nptr);
  b->size = size;
  b->stack = keep.stack;
  return 0;
}

void ap_live_del(struct ap_live *t, uintptr_t ptr)
{
  struct ap_block *b = ap_live_get(t, ptr);
  if (!b)
    return;
  /* backward shift: the blocks after it in its run move up when their
   * home slot is not between the hole and them */
  size_t i = (size_t)(b - t->slots), mask = t->cap - 1;
  for (size_t j = (i + 1) & mask; t->slots[j].ptr; j = (j + 1) & mask) {
    size_t home = slot_of(t->slots[j].ptr, t->cap);
    if (((j - home) & mask) >= ((j - i) & mask)) {
      t->slots[i] = t->slots[j];
      i = j;
    }
  }
  t->slots[i].ptr = 0;
  t->n--;
}

void ap_live_free(struct ap_live *t)
{
  free(t->slots);
  memset(t, 0, sizeof *t);
}

/* ---- maths ---- */

#define LN2 0.69314718055994530942

/* ln(x) for x > 0: x = m 2^e, m in [sqrt(1/2), sqrt(2)), ln m by the
 * series of 2 atanh((m - 1)/(m + 1)) (|t| < 0.172: 11 terms, 1e-16) */
static double ln(double x)
{
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  int e = (int)((b >> 52) & 0x7ff) - 1023;
  b = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  double m;
  memcpy(&m, &b, sizeof m);
  if (m > 1.4142135623730951) {
    m /= 2;
    e++;
  }
  double t = (m - 1) / (m + 1), t2 = t * t, term = t, sum = 0;
  for (int k = 1; k <= 21; k += 2) {
    sum += term / k;
    term *= t2;
  }
  return 2 * sum + e * LN2;
}

/* exp(-x) for x >= 0: x = k ln 2 + r, r in [0, ln 2) */
static double exp_neg(double x)
{
  if (x > 700)
    return 0;
  int k = (int)(x / LN2);
  double r = x - k * LN2, term = 1, sum = 1;
  for (int i = 1; i <= 20; i++) {
    term *= -r / i;
    sum += term;
  }
  uint64_t b = (uint64_t)(1023 - k) << 52;    /* 2^-k, k <= 1010 here */
  double p;
  memcpy(&p, &b, sizeof p);
  return sum * p;
}

double ap_scale(size_t size, uint64_t period)
{
  if (period <= 1 || size == 0)
    return 1;
  double q = 1 - exp_neg((double)size / (double)period);
  return q > 0 ? 1 / q : 1;
}

int64_t ap_next_sample(uint64_t *rng, uint64_t period)
{
  if (period <= 1)
    return 0;
  uint64_t x = *rng;               /* xorshift64* */
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *rng = x;
  double u = (double)(((x * 0x2545f4914f6cdd1dull) >> 11) + 1) * (1.0 / 9007199254740992.0);  /* (0, 1] */
  double d = -ln(u) * (double)period;
  if (d > 9.0e18)
    d = 9.0e18;
  return (int64_t)d;
}
