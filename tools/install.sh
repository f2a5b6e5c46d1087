#!/bin/sh
# tools/install.sh: what `make install` and `make uninstall` do.
#
#   install.sh install   CMOD LMOD CORE.so lua/perfev/a.lua ...
#   install.sh files     LMOD DIR MODE FILE ...   (FILEs into DIR: bin, man page, docs)
#   install.sh uninstall CMOD LMOD [FILE ...]     (FILEs: what `files` installed)
#
# CMOD/perfev/core.so and LMOD/<module path> are installed; every directory
# that did not exist is created and listed in LMOD/perfev/.installed-dirs,
# so that uninstall removes the files and exactly the directories install
# created (deepest first), and nothing that was there before.
set -eu

cmd=$1
created=$(mktemp)
trap 'rm -f "$created"' EXIT
# mkd DIR: creates DIR and its missing parents, listing each one
mkd() {
  if [ ! -d "$1" ]; then
    mkd "$(dirname "$1")"
    mkdir "$1"
    echo "$1" >> "$created"
  fi
}

if [ "$cmd" = files ]; then
  lmod=$2 dir=$3 mode=$4
  shift 4
  mkd "$dir"
  for f in "$@"; do
    echo "install -m $mode $f $dir/$(basename "$f")"
    install -m "$mode" "$f" "$dir/$(basename "$f")"
  done
  if [ -s "$created" ]; then cat "$created" >> "$lmod/perfev/.installed-dirs"; fi
  exit 0
fi

cmod=$2 lmod=$3
shift 3
manifest=$lmod/perfev/.installed-dirs

case $cmd in
install)
  core=$1
  shift
  mkd "$cmod/perfev"
  echo "install -m 0755 $core $cmod/perfev/core.so"
  install -m 0755 "$core" "$cmod/perfev/core.so"
  for f in "$@"; do
    dest=$lmod/${f#lua/}
    mkd "$(dirname "$dest")"
    echo "install -m 0644 $f $dest"
    install -m 0644 "$f" "$dest"
  done
  # an earlier install's list stays valid: append what this one created
  if [ -s "$created" ]; then cat "$created" >> "$manifest"; fi
  touch "$manifest"
  ;;
uninstall)
  rm -f "$cmod/perfev/core.so" "$@"
  if [ -d "$lmod/perfev" ]; then
    find "$lmod/perfev" -name '*.lua' -type f -exec rm -f {} +
  fi
  dirs=
  if [ -f "$manifest" ]; then dirs=$(sort -r "$manifest"); fi
  rm -f "$manifest"
  # deepest first (a path sorts after its parent); a directory still holding
  # something else is kept, with a word
  for d in $dirs; do
    [ -d "$d" ] || continue
    rmdir "$d" 2>/dev/null || echo "uninstall: kept $d (not empty)" >&2
  done
  ;;
*)
  echo "usage: $0 install|uninstall CMOD LMOD [CORE LUA-FILES...]" >&2
  exit 2
  ;;
esac
