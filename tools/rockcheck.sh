#!/bin/sh
# tools/rockcheck.sh LUA LUA_VERSION LUAROCKS ROCKSPEC
# Proves the rockspec: `luarocks make` from a copy of the sources into a
# temporary tree, without network when the system allows it (unshare -n),
# then requires perfev from that tree alone.
set -eu
lua=$1 luaver=$2 luarocks=$3 rockspec=$4

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/src"
# A copy, so that luarocks' objects (it compiles next to the sources) stay out of the tree.
cp -R "$rockspec" csrc lua bin "$tmp/src/"

offline=
if unshare -n true 2>/dev/null; then offline="unshare -n"; fi
# --deps-mode=none: offline, the Lua dependencies (argparse, lua-cjson)
# come from the system (`make deps`), where luarocks does not see them.
echo "rockcheck: ${offline:+$offline }$luarocks make --deps-mode=none --lua-version=$luaver --tree $tmp/tree $rockspec"
(cd "$tmp/src" && $offline "$luarocks" make --deps-mode=none --lua-version="$luaver" --tree "$tmp/tree" "$rockspec")

cd "$tmp"
env -u LUA_PATH -u LUA_CPATH -u "LUA_PATH_$(echo "$luaver" | tr . _)" \
    -u "LUA_CPATH_$(echo "$luaver" | tr . _)" T="$tmp/tree" V="$luaver" "$lua" -e '
local t, v = os.getenv("T"), os.getenv("V")
package.path = t .. "/share/lua/" .. v .. "/?.lua;" .. t .. "/share/lua/" .. v .. "/?/init.lua;" .. package.path
package.cpath = t .. "/lib/lua/" .. v .. "/?.so;" .. package.cpath
for _, m in ipairs{ { "perfev", package.path }, { "perfev.core", package.cpath } } do
  local f = assert(package.searchpath(m[1], m[2]))
  assert(f:sub(1, #t) == t, m[1] .. " found outside the luarocks tree: " .. f)
end
local p = require "perfev"
print("rockcheck: require \"perfev\" from the luarocks tree: " .. tostring(p._VERSION or "ok"))
'
# the command the rockspec installs (install.bin) runs from the tree (a
# temporary tree is on no path: given here as `luarocks path` would)
t=$tmp/tree
env LUA_PATH="$t/share/lua/$luaver/?.lua;$t/share/lua/$luaver/?/init.lua;;" \
    LUA_CPATH="$t/lib/lua/$luaver/?.so;;" "$t/bin/perfev" --help >/dev/null
echo "rockcheck: $tmp/tree/bin/perfev --help runs"
