/* libFuzzer target: perfev.decode over arbitrary bytes, under the attr the
 * first byte selects (fuzz/attrs.lua). A Lua error is the decoder refusing
 * malformed input, as it must; only a crash or a sanitizer report is a bug. */
#include "fuzz_lua.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static lua_State *L;
  if (!L)
    L = fuzz_open("decode");
  if (fuzz_run(L, data, size))
    lua_pop(L, 1);
  return 0;
}
