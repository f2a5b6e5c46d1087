/* The bounds-checked byte cursor shared by the kernel record decoder
 * (decode.c) and the reader of perf's own records (perfdata/perf_records.c): a
 * region of a record, read in the host's byte order or (swap) the other
 * one, every read checked against the region's end. Integers are loaded
 * through memcpy, so no alignment is needed. The reads are inline (they
 * are the decoder's hot path); a failure goes to the owner's fail
 * function, which raises its own message with where the record is. */
#ifndef PERFEV_CURSOR_H
#define PERFEV_CURSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Integers at p, in the host's byte order or (swap) the other one. */
static inline uint16_t perfev_ld16(const unsigned char *p, int swap)
{
  uint16_t v;
  memcpy(&v, p, 2);
  return swap ? __builtin_bswap16(v) : v;
}

static inline uint32_t perfev_ld32(const unsigned char *p, int swap)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return swap ? __builtin_bswap32(v) : v;
}

static inline uint64_t perfev_ld64(const unsigned char *p, int swap)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return swap ? __builtin_bswap64(v) : v;
}

struct perfev_cursor {
  const unsigned char *rec;      /* the record's first byte: messages count offsets from it */
  const unsigned char *p, *end;  /* the region being read */
  int swap;
  /* Raises the owner's error with msg; does not return. The cursor is the
   * first member of the owner's state, which fail may cast it back to. */
  void (*fail)(const struct perfev_cursor *c, const char *msg);
};

/* Formats a message and hands it to c->fail. */
void perfev_cursor_fail(const struct perfev_cursor *c, const char *fmt, ...)
  __attribute__((format(printf, 2, 3), noreturn));
/* "what needs n bytes at record offset k, m left" (what NULL: padding). */
void perfev_cursor_overrun(const struct perfev_cursor *c, size_t n, const char *what)
  __attribute__((noreturn));

static inline size_t perfev_cursor_left(const struct perfev_cursor *c)
{
  return (size_t)(c->end - c->p);
}

/* The next n bytes of the region; raises when it has fewer. */
static inline const unsigned char *perfev_cursor_take(struct perfev_cursor *c, size_t n,
                                                      const char *what)
{
  const unsigned char *q = c->p;
  if (n > perfev_cursor_left(c))
    perfev_cursor_overrun(c, n, what);
  c->p += n;
  return q;
}

static inline uint16_t perfev_cursor_u16(struct perfev_cursor *c, const char *what)
{
  return perfev_ld16(perfev_cursor_take(c, 2, what), c->swap);
}

static inline uint32_t perfev_cursor_u32(struct perfev_cursor *c, const char *what)
{
  return perfev_ld32(perfev_cursor_take(c, 4, what), c->swap);
}

static inline uint64_t perfev_cursor_u64(struct perfev_cursor *c, const char *what)
{
  return perfev_ld64(perfev_cursor_take(c, 8, what), c->swap);
}

/* n, a count of items of `each` bytes, when they fit in what is left. */
static inline uint64_t perfev_cursor_fits(struct perfev_cursor *c, uint64_t n, size_t each,
                                          const char *what)
{
  if (n > perfev_cursor_left(c) / each)
    perfev_cursor_fail(c, "%s count %llu overflows the record (%zu bytes left)", what,
                       (unsigned long long)n, perfev_cursor_left(c));
  return n;
}

/* A u64 count of items of `each` bytes that must fit in what is left. */
static inline uint64_t perfev_cursor_count(struct perfev_cursor *c, size_t each, const char *what)
{
  return perfev_cursor_fits(c, perfev_cursor_u64(c, what), each, what);
}

#endif
