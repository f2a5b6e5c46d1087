#!/bin/sh
# tools/check-speedscope.sh PROFILE [SCREENSHOT.png [NAMES]]
#
# Opens PROFILE (speedscope JSON, or folded stacks) in the real speedscope
# app (the npm package `speedscope`, installed into build/tools/speedscope
# when missing) in headless Chromium over http://127.0.0.1, as
# index.html#profileURL=..., and checks that speedscope imported it (the
# page title becomes the profile's name) and drew it (the screenshot has
# many colours, not a blank or error page). NAMES (comma-separated): names
# that speedscope must show, each in a row of its sandwich view's table
# (alone, or followed by a Trace Event's args)
# (a page of the DOM, unlike the flame chart's canvas), for the profile it
# opens on.
#
# Exit: 0 checked, 1 failed, 77 cannot check here (no chromium or npm, or
# npm cannot fetch the package): the reason on stderr.
set -u
LUA=${LUA:-lua5.4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SS_DIR=${SPEEDSCOPE_DIR:-$ROOT/build/tools/speedscope}
SS_VERSION=${SPEEDSCOPE_VERSION:-1.20.0}
profile=${1:?usage: check-speedscope.sh PROFILE [SCREENSHOT.png]}
shot=${2:-}
names=${3:-}

skip() { echo "check-speedscope: cannot check here: $*" >&2; exit 77; }
fail() { echo "check-speedscope: FAILED: $*" >&2; exit 1; }

command -v chromium >/dev/null 2>&1 || skip "no chromium (apt-get install chromium)"
release=$SS_DIR/node_modules/speedscope/dist/release
if [ ! -f "$release/index.html" ]; then
  command -v npm >/dev/null 2>&1 || skip "no npm to install speedscope (apt-get install npm)"
  mkdir -p "$SS_DIR"
  npm install --silent --no-audit --no-fund --prefix "$SS_DIR" "speedscope@$SS_VERSION" >&2 ||
    skip "npm install speedscope@$SS_VERSION failed (offline?)"
fi

tmp=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
cp -r "$release"/. "$tmp"/
name=$(basename "$profile")
cp "$profile" "$tmp/$name"
"$LUA" "$ROOT/tools/httpd.lua" "$tmp" 120 > "$tmp/port" &
server=$!
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
port=$(cat "$tmp/port")
[ -n "$port" ] || fail "the HTTP server did not start"
url="http://127.0.0.1:$port/index.html#profileURL=http://127.0.0.1:$port/$name"

chrome() {
  timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$tmp/chrome" --window-size=1200,800 \
    --virtual-time-budget=15000 "$@" 2>>"$tmp/chrome.log"
}

chrome --dump-dom "$url" > "$tmp/dom.html" || fail "chromium --dump-dom failed: $(tail -3 "$tmp/chrome.log")"
title=$(sed -n 's:.*<title>\([^<]*\)</title>.*:\1:p' "$tmp/dom.html" | head -1)
case $title in
  *" - speedscope") ;;
  *) fail "speedscope did not import $name (page title: '$title')" ;;
esac
chrome --screenshot="$tmp/shot.png" "$url" >/dev/null || fail "chromium --screenshot failed"
[ -s "$tmp/shot.png" ] || fail "no screenshot"
set -- $("$LUA" "$ROOT/tools/png-stats.lua" "$tmp/shot.png")
colours=${3:-0}
[ "$colours" -ge 20 ] || fail "the screenshot is blank ($colours colours)"
[ -n "$shot" ] && cp "$tmp/shot.png" "$shot"
shown=
if [ -n "$names" ]; then
  # (speedscope names a Trace Event slice by its name and its args: "ai {...}")
  missing() {
    local n old_ifs=$IFS
    IFS=,
    for n in $names; do
      grep -qF ">$n<" "$tmp/sandwich.html" || grep -qF ">$n {" "$tmp/sandwich.html" || { IFS=$old_ifs; echo "$n"; return; }
    done
    IFS=$old_ifs
  }
  # the table is drawn after the import, on the browser's time: a dump that
  # came before its rows is taken once more (it failed so once in a CI run)
  for try in 1 2; do
    chrome --dump-dom "$url&view=sandwich" > "$tmp/sandwich.html" || fail "chromium --dump-dom (sandwich) failed"
    gone=$(missing)
    [ -z "$gone" ] && break
  done
  [ -z "$gone" ] || fail "speedscope's sandwich view shows no '$gone' (in 2 tries)"
  shown=", showing $names"
fi
echo "check-speedscope: $name opened in speedscope ('$title'), screenshot of $colours colours$shown"
