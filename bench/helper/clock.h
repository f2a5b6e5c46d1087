/* The clocks the benchmark helpers time their C loops with, read the same
 * way by every helper so that their figures compare. */
#ifndef PERFEV_BENCH_CLOCK_H
#define PERFEV_BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on clock id, or -1 when the clock cannot be read. */
static inline int64_t bench_clock_ns(clockid_t id)
{
  struct timespec ts;
  if (clock_gettime(id, &ts) < 0)
    return -1;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
