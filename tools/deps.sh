#!/bin/sh
# tools/deps.sh: check what the build and the tests need, install what is
# missing with apt-get when run as root, otherwise print the command to run.
#
# usage: tools/deps.sh [-n] KIND:WHAT:PACKAGE ...
#   cmd:NAME:PKG      NAME is a command on PATH
#   file:PATH:PKG     PATH exists
#   pc:NAME:PKG       pkg-config knows NAME
#   lua:LUA/MOD:PKG   the interpreter LUA can require module MOD
#   -n                check only, never install (exit 1 when something is missing)
#
# Quiet and idempotent: prints nothing and exits 0 when everything is present.
set -eu

install=yes
if [ "${1:-}" = "-n" ]; then install=no; shift; fi

missing_pkgs=
missing_what=

have() {
  kind=${1%%:*}
  rest=${1#*:}
  what=${rest%:*}
  case $kind in
    cmd)  command -v "$what" >/dev/null 2>&1 ;;
    file) [ -e "$what" ] ;;
    pc)   command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$what" ;;
    lua)  lua=${what%%/*}; mod=${what#*/}
          command -v "$lua" >/dev/null 2>&1 &&
            "$lua" -e "require '$mod'" >/dev/null 2>&1 ;;
    *)    echo "deps.sh: unknown kind '$kind' in '$1'" >&2; exit 2 ;;
  esac
}

scan() {
  missing_pkgs=
  missing_what=
  for item in "$@"; do
    if ! have "$item"; then
      pkg=${item##*:}
      rest=${item#*:}
      missing_what="$missing_what ${rest%:*}"
      case " $missing_pkgs " in
        *" $pkg "*) ;;
        *) missing_pkgs="$missing_pkgs $pkg" ;;
      esac
    fi
  done
}

scan "$@"
[ -z "$missing_pkgs" ] && exit 0

echo "deps: missing:$missing_what" >&2
if [ "$install" = no ]; then
  echo "deps: install them with: sudo apt-get install -y$missing_pkgs" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "deps: no apt-get on this system; install the equivalent of these Debian packages:$missing_pkgs" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "deps: not root; run this, then run make again:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y$missing_pkgs" >&2
  exit 1
fi

echo "deps: apt-get install -y$missing_pkgs" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
# shellcheck disable=SC2086
apt-get -o DPkg::Lock::Timeout=300 install -y -qq $missing_pkgs

scan "$@"
if [ -n "$missing_pkgs" ]; then
  echo "deps: still missing after apt-get:$missing_what" >&2
  exit 1
fi
