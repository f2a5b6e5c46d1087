/* Time order the way perf gives it (tools/perf/util/ordered-events.c's
 * rules, re-implemented): records with a time wait in a queue; a
 * finished_round record releases those not newer than the newest time seen
 * when the previous round ended, since perf record writes every buffer
 * once per round and nothing older can come after; the end releases the
 * rest. Records wait as entries of one array (their place in the mapped
 * file, or their bytes copied into an arena), not as Lua tables. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "perfdata.h"

/* Faults in the whole pages of [p, p + n) at once, before they are
 * written. The queue's arrays are written page after page once per file;
 * where a page fault is dear (a virtual machine: ~15 us each measured
 * here, against ~1 us of ordering per page) one madvise costs less than
 * hundreds of faults. Best effort: a kernel before 5.14 (EINVAL) or a
 * failure leaves the pages to be faulted on first write, as before. */
static void populate(unsigned char *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = 4096;   /* the smallest page: the range stays inside the block */
  uintptr_t from = ((uintptr_t)p + page - 1) & ~(page - 1), to = ((uintptr_t)p + n) & ~(page - 1);
  if (to > from + 16 * page)
    (void)madvise((void *)from, to - from, MADV_POPULATE_WRITE);
#else
  (void)p, (void)n;
#endif
}

static int reserve(void **p, size_t *cap, size_t need, size_t each)
{
  size_t ncap;
  void *np;
  if (need <= *cap)
    return 0;
  ncap = *cap ? *cap : 1024;
  while (ncap < need)
    ncap *= 2;
  np = realloc(*p, ncap * each);
  if (!np)
    return ENOMEM;
  populate((unsigned char *)np + *cap * each, (ncap - *cap) * each);
  *p = np;
  *cap = ncap;
  return 0;
}

int pd_queue_push(struct pd_queue *q, const unsigned char *rec, size_t len, uint64_t time,
                  uint64_t foff, int stable)
{
  struct pd_qent *e;
  /* held counts a mapped record as a copied one, so that the order does
   * not depend on how the file is read */
  if (q->max_bytes && q->held + len > q->max_bytes && q->opos >= q->due) {
    int err = pd_queue_flush(q, PD_FLUSH_HALF);
    if (err)
      return err;
  }
  if ((q->n == q->cap && reserve((void **)&q->ents, &q->cap, q->n + 1, sizeof *q->ents)) ||
      (!stable && reserve((void **)&q->bytes.p, &q->bytes.cap, q->bytes.len + len, 1)))
    return ENOMEM;
  e = &q->ents[q->n++];
  e->time = time;
  e->foff = foff;
  e->len = (uint32_t)len;
  e->mapped = stable != 0;
  if (stable) {
    e->where.ext = rec;
  } else {
    e->where.at = q->bytes.len;
    memcpy(q->bytes.p + q->bytes.len, rec, len);
    q->bytes.len += len;
  }
  q->held += len;
  if (time > q->max_time)
    q->max_time = time;
  return 0;
}

/* Orders the entries by time, equal times in the order they are (the
 * merge is stable, and the queue keeps what waits sorted and appends newer
 * records, so that is their arrival order).
 * A round is a few runs already in time order (one per ring buffer perf
 * read), so a natural merge sort is linear in the common case: runs are
 * found, then merged pairwise into tmp and back. */
static int sort_by_time(struct pd_queue *q, struct pd_qent *e, size_t n)
{
  struct pd_qent *a = e, *b;
  size_t i, runs = 1;
  for (i = 1; i < n; i++)
    runs += e[i].time < e[i - 1].time;
  if (runs == 1)
    return 0;
  if (reserve((void **)&q->tmp, &q->cap_tmp, n, sizeof *q->tmp))
    return ENOMEM;
  b = q->tmp;
  while (runs > 1) {
    size_t out = 0, lo = 0;
    runs = 0;
    while (lo < n) {   /* merge the run at lo with the next one */
      size_t mid = lo + 1, hi, x, y;
      while (mid < n && a[mid].time >= a[mid - 1].time)
        mid++;
      hi = mid < n ? mid + 1 : n;
      while (hi < n && a[hi].time >= a[hi - 1].time)
        hi++;
      for (x = lo, y = mid; x < mid || y < hi;)
        b[out++] = (y >= hi || (x < mid && a[x].time <= a[y].time)) ? a[x++] : a[y++];
      runs++;
      lo = hi;
    }
    { struct pd_qent *t = a; a = b; b = t; }
  }
  if (a != e)
    memcpy(e, a, n * sizeof *e);
  return 0;
}

/* Drops the delivered entries ents[0..due): those that wait move to the
 * front, and their copied bytes to the spare arena, which becomes the
 * arena (so that it holds only what waits). */
static int drop_delivered(struct pd_queue *q)
{
  size_t i, due = q->due, need = 0;
  q->due = q->opos = 0;
  if (due == 0)
    return 0;
  if (q->bytes.len) {
    struct pd_bytes t;
    for (i = due; i < q->n; i++)
      need += q->ents[i].mapped ? 0 : q->ents[i].len;
    if (reserve((void **)&q->spare.p, &q->spare.cap, need, 1))
      return ENOMEM;
    q->spare.len = 0;
    for (i = due; i < q->n; i++) {
      struct pd_qent *e = &q->ents[i];
      if (e->mapped)
        continue;
      memcpy(q->spare.p + q->spare.len, q->bytes.p + e->where.at, e->len);
      e->where.at = q->spare.len;
      q->spare.len += e->len;
    }
    t = q->bytes;
    q->bytes = q->spare;
    q->spare = t;
    q->spare.len = 0;
  }
  memmove(q->ents, q->ents + due, (q->n - due) * sizeof *q->ents);
  q->n -= due;
  return 0;
}

/* Called when what the last flush made due has been delivered. */
int pd_queue_flush(struct pd_queue *q, int how)
{
  uint64_t limit = q->next_flush;
  size_t due = 0;
  if (drop_delivered(q))
    return ENOMEM;
  if (q->n > 0) {
    if (sort_by_time(q, q->ents, q->n))
      return ENOMEM;
    if (how == PD_FLUSH_FINAL)
      limit = UINT64_MAX;
    else if (how == PD_FLUSH_HALF)
      limit = q->ents[0].time + (q->ents[q->n - 1].time - q->ents[0].time) / 2;
    /* perf's limit 0 (before any round ended) releases nothing */
    while (limit != 0 && due < q->n && q->ents[due].time <= limit)
      q->held -= q->ents[due++].len;
    q->due = due;
  }
  if (how == PD_FLUSH_ROUND)
    q->next_flush = q->max_time;
  return 0;
}

int pd_queue_pending(const struct pd_queue *q)
{
  return q->n > q->due;
}

const struct pd_qent *pd_queue_next(struct pd_queue *q, const unsigned char **rec)
{
  const struct pd_qent *e;
  if (q->opos >= q->due)
    return NULL;
  e = &q->ents[q->opos++];
  *rec = e->mapped ? e->where.ext : q->bytes.p + e->where.at;
  return e;
}

void pd_queue_reset(struct pd_queue *q)
{
  q->n = q->due = q->opos = 0;
  q->bytes.len = q->spare.len = 0;
  q->held = 0;
  q->max_time = q->next_flush = 0;
}

void pd_queue_free(struct pd_queue *q)
{
  free(q->ents);
  free(q->tmp);
  free(q->bytes.p);
  free(q->spare.p);
  memset(q, 0, sizeof *q);
}
