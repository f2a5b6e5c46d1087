#!/bin/sh
# tools/check-svg.sh FLAMEGRAPH.svg [SEARCH] [SCREENSHOT.png]
#
# Opens perfev's SVG flame graph in headless Chromium over
# http://127.0.0.1 inside a test page that drives its script: every frame
# has a tooltip (<title>), clicking (flamegraph.zoom) a narrow frame makes
# it the full width and hides what is outside it, reset gives the widths
# back, and a search for SEARCH (a regular expression, default: the first
# leaf's name) colours the matches and reports their share. Then a
# screenshot, checked to be non-blank.
#
# Exit: 0 checked, 1 failed, 77 cannot check here (no chromium).
set -u
LUA=${LUA:-lua5.4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
svg=${1:?usage: check-svg.sh FLAMEGRAPH.svg [SEARCH] [SCREENSHOT.png]}
search=${2:-}
shot=${3:-}

skip() { echo "check-svg: cannot check here: $*" >&2; exit 77; }
fail() { echo "check-svg: FAILED: $*" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 || skip "no chromium (apt-get install chromium)"

tmp=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
cp "$svg" "$tmp/fg.svg"
cat > "$tmp/index.html" <<HTML
<!DOCTYPE html><html><head><title>check</title></head><body>
<object id="o" data="fg.svg" type="image/svg+xml" width="1200" height="800"></object>
<pre id="result">not run</pre>
<script>
var out = document.getElementById("result");
function check() {
  var w = document.getElementById("o").contentWindow, fg = w.flamegraph;
  if (!fg) return "no flamegraph object: the SVG's script did not run";
  var f = fg.frames;
  if (f.length < 2) return "only " + f.length + " frames";
  for (var i = 0; i < f.length; i++)
    if (!f[i].querySelector("title") || !f[i].querySelector("title").textContent) return "frame " + i + " has no tooltip";
  function width(g) { return +g.querySelector("rect").getAttribute("width"); }
  var full = width(f[0]), pick = -1;
  for (i = 1; i < f.length; i++) if (width(f[i]) < full * 0.9 && width(f[i]) > 5) { pick = i; break; }
  if (pick < 0) return "no narrow frame to zoom into";
  var before = width(f[pick]);
  fg.zoom(pick);
  if (Math.abs(width(f[pick]) - full) > 1) return "zoom: frame " + pick + " is " + width(f[pick]) + " px, not " + full;
  var hidden = 0;
  for (i = 0; i < f.length; i++) if (f[i].style.display === "none") hidden++;
  fg.reset();
  if (Math.abs(width(f[pick]) - before) > 0.01) return "reset: width " + width(f[pick]) + " not " + before;
  var re = "$search";
  if (!re) { var t = f[f.length - 1].querySelector("title").textContent; re = t.split(" ")[0].replace(/[^A-Za-z0-9_]/g, "."); }
  fg.search(re);
  var m = w.document.getElementById("matched").textContent, purple = 0;
  for (i = 0; i < f.length; i++) if (f[i].querySelector("rect").getAttribute("fill") === "rgb(190,80,230)") purple++;
  if (!/^Matched: [0-9.]+%$/.test(m) || purple === 0) return "search '" + re + "': '" + m + "', " + purple + " frames coloured";
  return "PASS " + f.length + " frames; zoomed frame " + pick + " (" + hidden + " hidden); search '" + re + "' " + m;
}
document.getElementById("o").addEventListener("load", function () {
  try { out.textContent = check(); } catch (e) { out.textContent = "error: " + e; }
});
</script></body></html>
HTML
"$LUA" "$ROOT/tools/httpd.lua" "$tmp" 60 > "$tmp/port" &
server=$!
i=0
while [ ! -s "$tmp/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
port=$(cat "$tmp/port")
[ -n "$port" ] || fail "the HTTP server did not start"

chrome() {
  timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$tmp/chrome" --window-size=1200,800 \
    --virtual-time-budget=5000 "$@" 2>>"$tmp/chrome.log"
}
chrome --dump-dom "http://127.0.0.1:$port/index.html" > "$tmp/dom.html" || fail "chromium failed"
result=$(sed -n 's:.*<pre id="result">\([^<]*\)</pre>.*:\1:p' "$tmp/dom.html")
case $result in
  PASS*) ;;
  *) fail "${result:-no result}" ;;
esac
chrome --screenshot="$tmp/shot.png" "http://127.0.0.1:$port/fg.svg" >/dev/null || fail "chromium --screenshot failed"
set -- $("$LUA" "$ROOT/tools/png-stats.lua" "$tmp/shot.png")
[ "${3:-0}" -ge 20 ] || fail "the screenshot is blank (${3:-0} colours)"
[ -n "$shot" ] && cp "$tmp/shot.png" "$shot"
echo "check-svg: $result; screenshot of $3 colours"
