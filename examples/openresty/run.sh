#!/bin/sh
# Starts examples/openresty/nginx.conf from the repo on 127.0.0.1:PORT, with
# build/openresty as its prefix directory; `sh run.sh PORT stop` stops it.
# Needs `make core-luajit` (the core built against LuaJIT, for nginx) and
# Debian's nginx and libnginx-mod-http-lua (doc/openresty.md).
#
# The workers open their perf events on themselves. Started as root, nginx
# runs its workers as `nobody`, whom kernel.perf_event_paranoid 2 (the
# kernel's default) lets count user space only: context switches, which
# happen in the kernel, would count 0 (and 3 or more, which some
# distributions' kernels set, refuses every event). So run.sh, started as
# root, runs the workers as root (`user root;`): every event counts, and any
# flaw in the Lua code they run is a flaw running as root, which is why this
# is a recipe for a local test on 127.0.0.1, not for a server
# (doc/openresty.md, Permissions). NGINX_USER=nobody runs them as nobody
# instead; started by another user, nginx runs its workers as that user.
# NGINX_PREFIX sets the prefix directory (default build/openresty); NGINX_CONF
# another configuration to start (default examples/openresty/nginx.conf).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
port=${1:-8080}
prefix=${NGINX_PREFIX:-$repo/build/openresty}
if [ "${2:-}" = stop ]; then
  kill "$(cat "$prefix/logs/nginx.pid")"
  exit 0
fi
if [ ! -f "$repo/build/luajit/perfev/core.so" ]; then
  echo "run.sh: no build/luajit/perfev/core.so: run 'make core-luajit' first" >&2
  exit 1
fi
if ! command -v nginx >/dev/null 2>&1 || [ ! -f /usr/lib/nginx/modules/ngx_http_lua_module.so ]; then
  echo "run.sh: needs nginx and its lua module: apt-get install nginx libnginx-mod-http-lua" >&2
  exit 1
fi
mkdir -p "$prefix/logs" "$prefix/lib"
ln -sfn "$repo/lua" "$prefix/lua"
ln -sfn "$repo/examples/openresty" "$prefix/app"
ln -sfn "$repo/build/luajit/perfev" "$prefix/lib/perfev"
sed "s/listen 127.0.0.1:8080;/listen 127.0.0.1:$port;/" "${NGINX_CONF:-$repo/examples/openresty/nginx.conf}" > "$prefix/nginx.conf"
if [ "$(id -u)" = 0 ]; then
  user=${NGINX_USER:-root}
  nginx -p "$prefix" -c "$prefix/nginx.conf" -g "user $user $(id -gn "$user");"
else
  user=$(id -un)
  nginx -p "$prefix" -c "$prefix/nginx.conf"
fi
# the daemon writes its pid file after nginx returns
i=0
while [ ! -s "$prefix/logs/nginx.pid" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
if [ "$user" = root ] || [ "$paranoid" -le 1 ]; then
  counts="every event counts"
else
  counts="kernel.perf_event_paranoid is $paranoid: user space only at best (see $prefix/logs/error.log)"
fi
echo "nginx on 127.0.0.1:$port (pid $(cat "$prefix/logs/nginx.pid")), workers as $user: $counts; stop: sh $0 $port stop"
