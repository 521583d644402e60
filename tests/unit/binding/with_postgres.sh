#!/usr/bin/env bash
# Runs a command beside a PostgreSQL server of its own: a new cluster in a
# temporary directory (Debian's postgresql package: initdb, pg_ctl),
# reachable only through a unix socket in that directory, stopped and
# removed at the end. The command gets its connection string in
# GW_TEST_PG_CONNINFO. Installs nothing: without the server it fails
# (scripts/setup.sh installs it).
set -euo pipefail

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
    echo "with_postgres: no PostgreSQL server under /usr/lib/postgresql" \
        "(scripts/setup.sh installs the postgresql package)" >&2
    exit 1
fi

dir=$(mktemp -d /tmp/gw-pg.XXXXXX)
# The server refuses to run as root: then it runs as an unprivileged user.
as=()
if [ "$(id -u)" = 0 ]; then
    user=postgres
    getent passwd "$user" >/dev/null || user=nobody
    chown "$user" "$dir"
    as=(setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups --)
fi
stop() {
    "${as[@]}" "$pgbin/pg_ctl" -D "$dir/data" -m immediate stop \
        >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap stop EXIT

if ! "${as[@]}" "$pgbin/initdb" -D "$dir/data" -U gwtest -A trust \
    --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    exit 1
fi
# fsync off: the tests kill clients, never the server.
if ! "${as[@]}" "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -t 60 -o "-k $dir -c listen_addresses='' -c fsync=off" start \
    >/dev/null; then
    cat "$dir/server.log" >&2
    exit 1
fi
export GW_TEST_PG_CONNINFO="host=$dir user=gwtest dbname=postgres"
"$@"
