#!/bin/bash
# tools/ctrl-c.sh SECONDS COMMAND [ARGS...]: runs COMMAND in a process group
# of its own and, after SECONDS, sends one SIGINT to that group, as a
# terminal's Ctrl-C does (timeout(1) signals its child and then its group:
# the child gets two). Exits with COMMAND's status.
set -m
secs=$1
shift
"$@" &
pid=$!
sleep "$secs"
kill -INT -- "-$pid" 2>/dev/null
wait "$pid"
