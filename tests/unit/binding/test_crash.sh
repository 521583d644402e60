#!/usr/bin/env bash
# Crash test of the bindings store: crash_writer binds in a loop, printing
# each acknowledged id; the test kills it with SIGKILL in mid-run, three
# times at different points, and after each kill the database opens
# (SQLite: passes PRAGMA integrity_check) and holds every acknowledged
# binding. Usage: test_crash.sh WRITER sqlite | postgresql (the latter
# under with_postgres.sh).
set -euo pipefail
writer=$1
kind=$2

tmp=$(mktemp -d /tmp/gw-crash.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ "$kind" = sqlite ]; then
    target=$tmp/bindings.db
else
    target=${GW_TEST_PG_CONNINFO:?run under with_postgres.sh}
fi
acked=$tmp/acked
: >"$acked"

start=0
for want in 40 170 90; do
    coproc W { exec "$writer" write "$kind" "$target" "$start"; }
    pid=$W_PID
    got=0
    # Wait for want acknowledgements (each line is one; bounded by the
    # writer's own failure, which ends the stream).
    while [ "$got" -lt "$want" ] && IFS= read -r line <&"${W[0]}"; do
        printf '%s\n' "$line" >>"$acked"
        got=$((got + 1))
    done
    kill -KILL "$pid"
    # What it printed before it died was acknowledged too.
    while IFS= read -r line <&"${W[0]}"; do
        printf '%s\n' "$line" >>"$acked"
    done
    wait "$pid" 2>/dev/null && { echo "writer ended by itself"; exit 1; }
    if [ "$got" -lt "$want" ]; then
        echo "the writer stopped after $got bindings"
        exit 1
    fi
    echo "# killed the writer after $(wc -l <"$acked") acknowledged bindings"
    "$writer" check "$kind" "$target" "$acked"
    start=$((start + 100000))
done
