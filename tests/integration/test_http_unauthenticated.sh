#!/usr/bin/env bash
# What a client without credentials gets from the HTTP API, on a real
# gateway with http.token set, OTA on and the operator page served:
# /healthz says only the overall status without the bearer (backends,
# their failures and addresses only with it), and no route it may reach
# holds a body: many connections announcing big bodies to /healthz, /ui/
# and the OTA check are refused at their head, the gateway's memory stays
# flat and a fresh /healthz still answers.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

command -v node >/dev/null || bail "node is installed (scripts/setup.sh)"

TOKEN=unauth-test-token-3b8e
start_broker broker || bail "the broker starts"
start_backend backend
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"ota\": { \"enabled\": true,
    \"mqtt_endpoint\": \"127.0.0.1:$BROKER_PORT\",
    \"device_key\": \"unauth-device-key\", \"group\": \"GID_{board}\",
    \"activation\": \"off\" }"
jq --argjson port "$HTTP_PORT" --arg token "$TOKEN" --arg ui "$src/web" \
    '.http = {listen: "127.0.0.1", port: $port, token: $token, ui_dir: $ui}' \
    "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
start_gateway gw "$cfg" || bail "the gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"

echo "# 1. /healthz: the status to anyone, the rest with the token"
code=$(curl -sS -o "$GW_TMP/h.json" -w '%{http_code}' --max-time 5 "$BASE/healthz")
check "without a token: 200 ($code)" test "$code" = 200
check "saying only the status ($(cat "$GW_TMP/h.json"))" \
    jq -e '. == {status: "ok"}' "$GW_TMP/h.json"
check "no backend name or address in it" \
    not grep -Eq "backend|127\.0\.0\.1|$BACKEND_PORT" "$GW_TMP/h.json"
code=$(curl -sS -o "$GW_TMP/h.json" -w '%{http_code}' --max-time 5 -I "$BASE/healthz")
check "HEAD without a token: 200 ($code)" test "$code" = 200
code=$(curl -sS -o "$GW_TMP/h.json" -w '%{http_code}' --max-time 5 \
    -H "Authorization: Bearer $TOKEN" "$BASE/healthz")
check "with the token: 200 ($code)" test "$code" = 200
check "the whole document: broker, backends by name, sessions, uptime" \
    jq -e '.status == "ok" and .broker == "up" and .backends[0].name == "mock"
        and .sessions == 0 and (.uptime_s | type) == "number"' "$GW_TMP/h.json"
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
    -H "Authorization: Bearer not-$TOKEN" "$BASE/healthz")
check "a wrong token: 401 ($code)" test "$code" = 401

echo "# 2. no body on GET or HEAD, none past what OTA parses"
# status METHOD PATH LENGTH: the status of a request announcing LENGTH
# body bytes and sending none of them.
status() {
    curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -X "$1" \
        -H "Content-Length: $3" "$BASE$2" 2>/dev/null
}
code=$(status GET /healthz 10)
check "GET /healthz announcing a body: 400 at its head ($code)" test "$code" = 400
code=$(status GET /ui/index.html 10)
check "GET /ui/index.html announcing a body: 400 at its head ($code)" test "$code" = 400
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -H 'Transfer-Encoding: chunked' \
    --data-binary x "$BASE/healthz" -X GET 2>/dev/null)
check "GET /healthz with a chunked body: 400 ($code)" test "$code" = 400
code=$(status POST /xiaozhi/ota/ 65537)
check "an OTA check announcing more than 64 KiB: 413 at its head ($code)" test "$code" = 413
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/ui/index.html")
check "GET /ui/index.html without a body still answers 200 ($code)" test "$code" = 200

echo "# 3. 256 connections from 8 addresses announcing big bodies"
# Each announces 262143 bytes (under http.max_body_bytes) to /healthz,
# /ui/ or OTA in turn and sends 200 KiB of it: before the limits were
# checked at the head this held ~64 MiB and every connection slot, so
# that /healthz went unanswered for the body timeout.
node "$src/tests/mcp/http_memory.mjs" --port "$HTTP_PORT" --pid "$GW_PID" \
    --connections 256 --local-addresses 8 --announce 262143 --send 204800 \
    --target 'GET /healthz' --target 'GET /ui/index.html' \
    --target 'POST /xiaozhi/ota/' --settle-ms 10000 --probe /healthz \
    >"$GW_TMP/m.json" 2>&1
m=$(tail -n 1 "$GW_TMP/m.json")
echo "# $m"
check "every connection was refused (a status or closed), none held" \
    jq -e '.ends.open == 0 and ([.ends | to_entries[] | select(.key != "open")
        | select(.key | test("^(400|413|closed)$")) | .value] | add) == 256' <<<"$m"
check "the gateway grew by less than 8 MiB ($(jq .growth_kib <<<"$m") KiB)" \
    jq -e '.growth_kib < 8192' <<<"$m"
check "a fresh /healthz answered 200 meanwhile ($(jq -c .probe <<<"$m"))" \
    jq -e '.probe == 200' <<<"$m"
check "the refusals were logged" \
    grep -q 'a GET or HEAD request takes no body' "$GW_LOG"
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/healthz")
check "and /healthz still answers 200 ($code)" test "$code" = 200

stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
finish
