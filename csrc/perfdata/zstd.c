/* zstd for perf.data's compressed records (perf record -z), loaded from
 * the system's libzstd.so.1 when a file needs it: perfev.core links
 * nothing but libc, and files without compressed records never load it.
 * Only zstd's stable streaming ABI is used, declared here. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "perfdata.h"

/* ZSTD_inBuffer and ZSTD_outBuffer of zstd.h (stable since zstd 1.0) */
struct zin { const void *src; size_t size, pos; };
struct zout { void *dst; size_t size, pos; };

struct pd_zstd {
  void *lib;
  void *ds;
  void *(*create)(void);
  size_t (*release)(void *);
  size_t (*init)(void *);
  size_t (*decompress)(void *, struct zout *, struct zin *);
  unsigned (*is_error)(size_t);
  const char *(*error_name)(size_t);
};

static const char *const libnames[] = { "libzstd.so.1", "libzstd.so" };

/* dlsym into a function pointer of any type, as POSIX allows. */
static int sym(void *lib, const char *name, void *fnp)
{
  void *p = dlsym(lib, name);
  if (!p)
    return 0;
  memcpy(fnp, &p, sizeof p);
  return 1;
}

struct pd_zstd *pd_zstd_new(char *why, size_t whylen)
{
  struct pd_zstd *z = calloc(1, sizeof *z);
  if (!z) {
    snprintf(why, whylen, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < sizeof libnames / sizeof libnames[0] && !z->lib; i++)
    z->lib = dlopen(libnames[i], RTLD_NOW | RTLD_LOCAL);
  if (!z->lib) {
    snprintf(why, whylen, "libzstd.so.1 cannot be loaded (install Debian's libzstd1)");
    free(z);
    return NULL;
  }
  if (!sym(z->lib, "ZSTD_createDStream", &z->create) ||
      !sym(z->lib, "ZSTD_freeDStream", &z->release) ||
      !sym(z->lib, "ZSTD_initDStream", &z->init) ||
      !sym(z->lib, "ZSTD_decompressStream", &z->decompress) ||
      !sym(z->lib, "ZSTD_isError", &z->is_error) ||
      !sym(z->lib, "ZSTD_getErrorName", &z->error_name)) {
    snprintf(why, whylen, "libzstd.so.1 lacks the streaming API");
    dlclose(z->lib);
    free(z);
    return NULL;
  }
  z->ds = z->create();
  if (!z->ds || z->is_error(z->init(z->ds))) {
    snprintf(why, whylen, "libzstd cannot create a decompression stream");
    pd_zstd_free(z);
    return NULL;
  }
  return z;
}

void pd_zstd_free(struct pd_zstd *z)
{
  if (!z)
    return;
  if (z->ds)
    z->release(z->ds);
  dlclose(z->lib);
  free(z);
}

int pd_zstd_reset(struct pd_zstd *z)
{
  return z->is_error(z->init(z->ds)) ? -1 : 0;
}

const char *pd_zstd_inflate(struct pd_zstd *z, const unsigned char *in, size_t n,
                            unsigned char **out, size_t *len, size_t *cap, size_t max)
{
  struct zin zi = { in, n, 0 };
  /* until the input is used up and the output was not full (a full
   * output may leave bytes inside the stream) */
  for (;;) {
    struct zout zo;
    size_t ret;
    if (*cap - *len < 65536) {   /* room for a block's worth, growing by doubling */
      size_t ncap = *cap ? *cap * 2 : 1 << 20;
      unsigned char *nb;
      if (ncap > max)
        return "it inflates past the reader's limit for one compressed record";
      nb = realloc(*out, ncap);
      if (!nb)
        return "out of memory";
      *out = nb;
      *cap = ncap;
    }
    zo.dst = *out;
    zo.size = *cap;
    zo.pos = *len;
    ret = z->decompress(z->ds, &zo, &zi);
    *len = zo.pos;
    if (z->is_error(ret))
      return z->error_name(ret);
    if (zi.pos == zi.size && zo.pos < zo.size)
      return NULL;
  }
}
