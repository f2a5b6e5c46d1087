#!/bin/sh
# Starts examples/openresty/nginx.conf from the repo on 127.0.0.1:PORT, with
# build/openresty as its prefix directory; `sh run.sh PORT stop` stops it.
# Needs `make core-luajit` (the core built against LuaJIT, for nginx).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
port=${1:-8080}
prefix=$repo/build/openresty
if [ "${2:-}" = stop ]; then
  kill "$(cat "$prefix/logs/nginx.pid")"
  exit 0
fi
mkdir -p "$prefix/logs" "$prefix/lib"
ln -sfn "$repo/lua" "$prefix/lua"
ln -sfn "$repo/examples/openresty" "$prefix/app"
ln -sfn "$repo/build/luajit/perfev" "$prefix/lib/perfev"
sed "s/listen 127.0.0.1:8080;/listen 127.0.0.1:$port;/" "$repo/examples/openresty/nginx.conf" > "$prefix/nginx.conf"
nginx -p "$prefix" -c "$prefix/nginx.conf"
echo "nginx on 127.0.0.1:$port (pid $(cat "$prefix/logs/nginx.pid")); stop: sh $0 $port stop"
