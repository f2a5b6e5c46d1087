#!/bin/bash
# tools/check-user.sh LUA LUAROCKS: `make check-user`, the user's path.
#
# Does what a new user does, from a clean `make install` into a temporary
# prefix (and `luarocks make` into a temporary tree) with no LUA_PATH of the
# checkout's: every subcommand's --help and --version; perfev stat, record,
# report, list and profile in each output format on a small program of a
# user's (tools/check-user/app.lua), each output read by the consumer a user
# reads it with (perf report, go tool pprof, a JSON parser); Ctrl-C in the
# middle of record and profile; the README's examples and every
# examples/*.lua; the OpenResty recipe as doc/openresty.md writes it; the
# embedding recipe as doc/embedding.md writes it.
#
# Each step prints one line. A failed step prints the command that
# reproduces it (run from the step's directory, which is kept) and the end of
# its output; the run goes on and exits 1 at the end.
#   CHECK_USER_ONLY=regex   runs the steps whose name matches
#   CHECK_USER_PORT=N       the OpenResty recipe's port (default 18931)
set -u
LUA=${1:-lua5.4}
LUAROCKS=${2:-luarocks}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/perfev-user.XXXXXX)
PREFIX=$WORK/prefix
PORT=${CHECK_USER_PORT:-18931}
ONLY=${CHECK_USER_ONLY:-.}
LUAV=$("$LUA" -e 'print((_VERSION:match("%d+%.%d+")))')
case $LUA in *luajit*) JIT=1 ;; *) JIT= ;; esac
LMOD=$PREFIX/share/lua/$LUAV
CMOD=$PREFIX/lib/lua/$LUAV
APP=$ROOT/tools/check-user/app.lua
passed=0 failed=0 n=0

# The user's environment: the installed perfev first on PATH, the
# checkout's module paths unset; scripts that `require "perfev"` get the
# prefix's paths, as README's "Installing" says for a prefix Lua does not search.
USER_ENV="env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 -u LUA_PATH_5_3 -u LUA_CPATH_5_3 PATH=$PREFIX/bin:$PATH"
REQ_ENV="LUA_PATH='$LMOD/?.lua;$LMOD/?/init.lua;;' LUA_CPATH='$CMOD/?.so;;'"

# `... | has PATTERN`: grep that reads its input to the end (grep -q would
# stop early, and pipefail would count the writer's SIGPIPE as a failure)
HAS='has() { grep "$@" > /dev/null; };'

# step NAME DIR COMMAND: runs COMMAND with bash in DIR, one line of result
step() {
  local name=$1 dir=$2 cmd=$3
  [[ $name =~ $ONLY ]] || return 0
  n=$((n + 1))
  local log=$WORK/logs/$n.log
  mkdir -p "$WORK/logs"
  if (cd "$dir" && eval "$USER_ENV bash -c $(printf '%q' "set -o pipefail; $HAS $cmd")") > "$log" 2>&1; then
    passed=$((passed + 1))
    printf 'check-user: ok    %s\n' "$name"
  else
    failed=$((failed + 1))
    printf 'check-user: FAIL  %s\n  reproduce: cd %s && %s\n' "$name" "$dir" "$cmd"
    tail -n 8 "$log" | sed 's/^/  | /'
  fi
}

echo "check-user: $LUA, prefix $PREFIX"

# ---- install ----
step "make install PREFIX=<tmp> ($LUA)" "$ROOT" "make -s install LUA=$LUA PREFIX=$PREFIX > /dev/null"
step "installed perfev runs with no LUA_PATH" "$WORK" "perfev --version | grep '^perfev ' && command -v perfev | has '^$PREFIX/bin/perfev\$'"
# run by another Lua than it was installed for: one line saying so and what to do
OTHER=$([ "$LUA" = luajit ] && echo lua5.4 || echo luajit)
if command -v "$OTHER" > /dev/null; then
  step "$OTHER perfev (installed for $LUA): one line, what to do" "$WORK" \
    "$OTHER \$(command -v perfev) --version 2> other.txt; test \$? = 1 && test \$(wc -l < other.txt) = 1 && has 'make install LUA=$OTHER' other.txt"
fi

# ---- help and version ----
step "perfev --help" "$WORK" "perfev --help | has 'profile'"
for c in stat record report list profile; do
  step "perfev $c --help, perfev help $c" "$WORK" "perfev $c --help | has 'Usage: perfev $c' && perfev help $c | has 'Usage: perfev $c'"
done
step "man perfev, the installed docs" "$WORK" "MANPATH=$PREFIX/share/man man perfev | has 'PERFEV PROFILE' && test -f $PREFIX/share/doc/perfev/cli.md"
step "perfev nosuch: a usage error (129)" "$WORK" "perfev nosuch; test \$? = 129"

# ---- stat ----
step "perfev stat -- $LUA app.lua" "$WORK" \
  "perfev stat -e task-clock,page-faults -- $LUA $APP 0.3 2> stat.txt; grep -E '[0-9.]+ +msec task-clock' stat.txt && grep -E '[1-9][0-9]* +page-faults' stat.txt"
step "perfev stat -x, app.lua (in process)" "$WORK" "perfev stat -x, -e task-clock $APP 0.3 2> stat.csv; grep -E '^[0-9.]+,msec,task-clock,' stat.csv"
step "perfev stat -j -- true" "$WORK" "perfev stat -j -e page-faults -- true 2> stat.json; $LUA -e 'local cjson = require \"cjson\" for l in io.lines(\"stat.json\") do assert(cjson.decode(l)[\"counter-value\"]) end'"
step "perfev stat -e task-clok: did you mean" "$WORK" "perfev stat -e task-clok -- true 2> err.txt; test \$? != 0 && grep -q \"did you mean 'task-clock'\" err.txt"

# ---- record, report ----
step "perfev record -- $LUA app.lua; perf report reads it" "$WORK" \
  "perfev record -o cmd.data -- $LUA $APP 0.5 && perf report -i cmd.data --stdio 2>/dev/null | grep -E '^ +[0-9.]+% +$(basename "$LUA")'"
step "perfev report --stdio" "$WORK" "perfev report -i cmd.data --stdio | grep -E '^ +[0-9.]+% '"
step "perfev record -g app.lua (in process)" "$WORK" "perfev record -g $APP 0.5 && perf report --stdio 2>/dev/null | has 'Samples'"

# ---- list ----
step "perfev list sw" "$WORK" "perfev list sw | has cpu-clock"

# ---- profile, each format, each read by its consumer ----
# every row names a function by its definition: NAME (app.lua:LINE) where
# line LINE of app.lua defines NAME (or <anonymous>), and one function is
# one row (one row per LINE)
NAMES_OK="$LUA -e '
local src = {} for l in io.lines(\"$APP\") do src[#src + 1] = l end
local rows, seen = 0, {}
for l in io.lines(\"p.txt\") do
  local name, line = l:match(\"%%  (%S+) %(.-app%.lua:(%d+)%)\")
  if name and name ~= \"main\" then
    rows = rows + 1
    local def = src[tonumber(line)]
    assert(name == \"<anonymous>\" or def:find(name, 1, true), (\"row %q: app.lua:%s is %q\"):format(l, line, def))
    assert(not seen[line], (\"one function, two rows: %q and %q\"):format(seen[line] or \"\", l))
    seen[line] = l
  end
end
assert(rows >= 5, \"too few rows: \" .. rows)'"
step "perfev profile -o p.txt: functions named by their definition" "$WORK" \
  "perfev profile -o p.txt $APP 1 && $NAMES_OK && grep -q round_trip p.txt && ! grep -q 'perfev/' p.txt"
step "perfev profile -o p.folded" "$WORK" "perfev profile -o p.folded $APP 0.5 && grep -q 'round_trip.*;' p.folded"
step "perfev profile -o p.svg" "$WORK" "perfev profile -o p.svg $APP 0.5 && grep -q '<svg' p.svg && grep -q round_trip p.svg"
step "perfev profile -o p.speedscope.json (JSON)" "$WORK" \
  "perfev profile -o p.speedscope.json $APP 0.5 && $LUA -e 'local t = require(\"cjson\").decode(io.open(\"p.speedscope.json\"):read(\"*a\")) local ok for _, f in ipairs(t.shared.frames) do ok = ok or f.name:find(\"round_trip\") end assert(ok)'"
step "perfev profile -o p.pb.gz (go tool pprof)" "$WORK" "perfev profile -o p.pb.gz $APP 0.5 && HOME=$WORK go tool pprof -top p.pb.gz 2>/dev/null | has round_trip"
step "perfev profile -o p.data (perf report)" "$WORK" "perfev profile -o p.data $APP 0.5 && perf report -i p.data --stdio 2>/dev/null | has round_trip"

# ---- attach: a program already running (doc/attach.md), every Lua here ----
# rows named by their definition, as the in-process profile names them
ATT_NAMES_OK=$(printf '%s' "$NAMES_OK" | sed 's/p\.txt/att.txt/')
for T in lua5.4 lua5.3 lua5.1 luajit; do
  command -v $T > /dev/null || continue
  step "perfev profile -p PID -d 2 ($T app.lua, already running)" "$WORK" \
    "$T $APP 30 > /dev/null & pid=\$!; sleep 1; perfev profile -p \$pid -d 2 -o att.txt; rc=\$?; kill \$pid; test \$rc = 0 && $ATT_NAMES_OK && grep -q round_trip att.txt && grep -q 'Attached to process' att.txt"
done
step "perfev profile -p PID -o att.folded; the target goes on" "$WORK" \
  "$LUA $APP 30 > app.out & pid=\$!; sleep 1; perfev profile -p \$pid -d 1 -o att.folded && kill -0 \$pid && grep -q 'round_trip.*;' att.folded; rc=\$?; kill \$pid; test \$rc = 0"
step "Ctrl-C in perfev profile -p: 130, profile written" "$WORK" \
  "$LUA $APP 30 > /dev/null & pid=\$!; sleep 1; $ROOT/tools/ctrl-c.sh 2 perfev profile -p \$pid -o attint.folded; rc=\$?; kill \$pid; test \$rc = 130 && grep -q round_trip attint.folded"

# ---- Ctrl-C ----
step "Ctrl-C in perfev record: 130, file written" "$WORK" \
  "$ROOT/tools/ctrl-c.sh 2 perfev record -o int.data -- $LUA $APP 30 2> int.txt; test \$? = 130 && grep -q 'Captured and wrote' int.txt && perf report -i int.data --stdio 2>/dev/null | has Samples"
# (a script's Ctrl-C on LuaJIT that jit.profile's callback takes is sent
# again out of it: doc/profile.md; one Ctrl-C, one try)
step "Ctrl-C in perfev profile: 130, profile written" "$WORK" \
  "$ROOT/tools/ctrl-c.sh 2 perfev profile -o int.folded $APP 6; test \$? = 130 && grep -q round_trip int.folded"
step "Ctrl-C in perfev record script.lua: 130, file written" "$WORK" \
  "$ROOT/tools/ctrl-c.sh 2 perfev record -o sint.data $APP 6 2> sint.txt; test \$? = 130 && grep -q 'Captured and wrote' sint.txt && perf report -i sint.data --stdio 2>/dev/null | has round_trip"

# ---- the README's examples and examples/*.lua, from the prefix ----
mkdir -p "$WORK/readme"
noclose=--no-close
[ "$LUAV" = 5.4 ] && noclose=
"$LUA" "$ROOT/tools/check-user/readme.lua" "$ROOT/README.md" "$WORK/readme" $noclose > /dev/null
for f in "$WORK"/readme/*.lua; do
  [ -e "$f" ] || continue
  step "README $(basename "$f" .lua)" "$WORK" "$REQ_ENV $LUA $f > /dev/null"
done
for f in "$ROOT"/examples/*.lua; do
  step "examples/$(basename "$f")" "$WORK" "$REQ_ENV $LUA $f ex.data > /dev/null"
done

# ---- luarocks make into a temporary tree (PUC Lua: luarocks builds for it) ----
if [ -z "$JIT" ] && command -v "$LUAROCKS" > /dev/null; then
  step "luarocks make; the tree's perfev runs" "$WORK" \
    "mkdir -p src && cp -R $ROOT/perfev-scm-1.rockspec $ROOT/csrc $ROOT/lua $ROOT/bin src/ && (cd src && $LUAROCKS make --deps-mode=none --lua-version=$LUAV --tree $WORK/rocks perfev-scm-1.rockspec > /dev/null) && $WORK/rocks/bin/perfev --version && $WORK/rocks/bin/perfev list sw | has cpu-clock"
fi

# ---- the OpenResty recipe (doc/openresty.md), on nginx's LuaJIT ----
if command -v nginx > /dev/null; then
  step "OpenResty: run.sh, requests, /metrics counts or says why not" "$ROOT" \
    "make -s core-luajit && sh examples/openresty/run.sh $PORT > /dev/null && for i in 1 2 3 4 5; do curl -sf 127.0.0.1:$PORT/work/heavy > /dev/null; done; curl -sf 127.0.0.1:$PORT/metrics > $WORK/metrics.txt; rc=\$?; sh examples/openresty/run.sh $PORT stop; test \$rc = 0 && { grep -E '^perfev_request_context_switches_total\{uri=\"/work/heavy\"\} [1-9]' $WORK/metrics.txt || { grep -q 'scope=\"user\"' $WORK/metrics.txt && grep -q 'perfev' build/openresty/logs/error.log; }; }"
  step "OpenResty: a bad event is a 400 with perfev's message" "$ROOT" \
    "sh examples/openresty/run.sh $PORT > /dev/null && code=\$(curl -s -o $WORK/bad.txt -w '%{http_code}' '127.0.0.1:$PORT/profile?n=10&loc=/work/split&event=cpu-clok'); sh examples/openresty/run.sh $PORT stop; test \"\$code\" = 400 && grep -q 'cpu-clock' $WORK/bad.txt"
fi

# ---- the embedding recipe (doc/embedding.md) ----
step "embed: make embed, build/embed/host game.lua" "$ROOT" \
  "make -s embed LUA=$LUA > /dev/null && LUA_PATH='lua/?.lua;lua/?/init.lua;;' build/embed/host examples/embed/game.lua 100 | has 'frames=100'"

echo "check-user: $LUA: $passed passed, $failed failed"
if [ "$failed" = 0 ]; then rm -rf "$WORK"; exit 0; fi
echo "check-user: the steps' files are kept in $WORK"
exit 1
