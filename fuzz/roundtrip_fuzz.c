/* libFuzzer target: every record perfev.decode gets out of arbitrary bytes
 * must encode, decode back to the same table, and encode again to the same
 * bytes (fuzz/driver.lua). Any Lua error escaping is a bug: it aborts, so
 * that libFuzzer saves the input. */
#include "fuzz_lua.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static lua_State *L;
  if (!L)
    L = fuzz_open("roundtrip");
  if (fuzz_run(L, data, size))
    fuzz_die(L, "round trip");
  return 0;
}
