#!/usr/bin/env bash
# The command line of hybridgw: --version, --check-config on good and bad
# files, SIGHUP reload (a bad file keeps the running config), SIGTERM exit.
gw=$1
src=$2
. "$src/tests/integration/lib.sh"

out=$("$gw" --version)
check "--version exits 0 and names the program" \
    grep -qE '^hybridgw [0-9]+\.[0-9]+\.[0-9]+ ' <<<"$out"

for f in "$src"/config/*.json; do
    check "--check-config accepts $(basename "$f")" \
        "$gw" -c "$f" --check-config
done

bad=$GW_TMP/bad.json
cat >"$bad" <<'JSON'
{
  "backends": [ { "name": "main", "url": "http://127.0.0.1:8000/" } ],
  "udp": { "port": 70000 }
}
JSON
"$gw" -c "$bad" --check-config >"$GW_TMP/bad.out" 2>&1
rc=$?
check "--check-config exits 1 on a bad file" test "$rc" -eq 1
check "the error names the key path backends[0].url" \
    grep -q 'backends\[0\]\.url' "$GW_TMP/bad.out"
check "the error names the key path udp.port" \
    grep -q 'udp\.port' "$GW_TMP/bad.out"

# An MCP server's URL goes to libcurl as written: credentials in it would
# go out as Basic auth.
creds=$GW_TMP/creds.json
cat >"$creds" <<'JSON'
{
  "backends": [ { "name": "main", "url": "ws://127.0.0.1:8000/" } ],
  "mcp_servers": [ { "name": "t", "url": "http://user:pw@127.0.0.1:9/mcp" } ]
}
JSON
"$gw" -c "$creds" --check-config >"$GW_TMP/creds.out" 2>&1
rc=$?
check "--check-config refuses an MCP server URL with user:password@" \
    test "$rc" -eq 1
check "...naming the key mcp_servers[0].url" \
    grep -q 'mcp_servers\[0\]\.url: must not contain user:password@' \
    "$GW_TMP/creds.out"
check "...and never printing the password" not grep -q 'user:pw' "$GW_TMP/creds.out"

printf '{\n  "backends": [\n    { "name": "a" "url": "ws://x/" }\n  ]\n}\n' \
    >"$GW_TMP/syntax.json"
"$gw" -c "$GW_TMP/syntax.json" --check-config >"$GW_TMP/syntax.out" 2>&1
check "a syntax error is reported as file:line:col" \
    grep -qE 'syntax\.json:3:[0-9]+' "$GW_TMP/syntax.out"

"$gw" -c "$GW_TMP/missing.json" --check-config >/dev/null 2>&1
rc=$?
check "--check-config exits 1 on a missing file" test "$rc" -eq 1

"$gw" --no-such-flag >/dev/null 2>&1
rc=$?
check "an unknown flag is a usage error (2)" test "$rc" -eq 2

# A running gateway: reload with a broken file keeps running; a good file
# with a new log level applies; SIGTERM stops it with status 0.
# No broker listens on port 1: the gateway keeps retrying, which is fine
# here; UDP port 0 takes any free port.
live=$GW_TMP/live.json
cat >"$live" <<'JSON'
{ "mqtt": { "port": 1 }, "udp": { "port": 0 },
  "backends": [ { "name": "main", "url": "ws://127.0.0.1:1/" } ],
  "log": { "level": "info" } }
JSON
log=$GW_TMP/gw.log
peer_log "$log"
"$gw" -c "$live" >"$log" 2>&1 &
pid=$!
check "the gateway starts" wait_for_ready "$pid" "$log" 'running \(pid'

echo '{ "backends": [' >"$live"
kill -HUP "$pid"
check "a broken reload is refused" \
    wait_for_line "$log" 'reload of .* failed; the running configuration stays'
check "the gateway survives a broken reload" kill -0 "$pid"

cat >"$live" <<'JSON'
{ "mqtt": { "port": 2 }, "udp": { "port": 0 },
  "backends": [ { "name": "other", "url": "ws://127.0.0.1:1/" } ],
  "log": { "level": "debug" } }
JSON
kill -HUP "$pid"
check "a good reload applies" wait_for_line "$log" 'reloaded '
check "a restart-only key is reported, not applied" \
    grep -q 'mqtt.port changed but needs a restart' "$log"

kill -TERM "$pid"
EXIT_CODE=255
check "SIGTERM stops the gateway" wait_for_exit "$pid"
check "exit status after SIGTERM is 0" test "$EXIT_CODE" -eq 0
check "the stop is logged" grep -q 'SIGTERM received' "$log"

# gateway/backend/ws_random.c: the executable exports its lws_get_random, so
# libwebsockets takes its masking keys from there, not from one read of
# /dev/urandom per frame.
check "the binary exports its own lws_get_random" \
    sh -c "nm -D '$gw' | grep -q ' T lws_get_random\$'"

finish
