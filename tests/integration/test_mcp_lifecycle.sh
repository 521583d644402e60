#!/usr/bin/env bash
# esp-mcp's lifecycle gate through a relayed initialize: a device in the
# simulator's esp-mcp-exact mode (--mcp-engine esp-mcp: requests but ping
# refused until notifications/initialized, reset by every initialize),
# the gateway's discovery, then a backend that sends initialize with a
# newer protocol and never notifications/initialized, as xiaozhi backends
# do. The backend's tools/call and later API calls must still succeed.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
TOKEN=it-bearer-7c2a91
MKEY=It-Manager-Lc3Qx5

start_plugin_broker broker || bail "broker with the plugin starts"
start_backend backend --mcp --mcp-protocol 2025-06-18 --mcp-list-delay-ms 0 \
    --turn-frames 10 --tts-frames 4 \
    --mcp-call 'self.sim.echo:{"text":"from-backend"}'
start_gateway_api gw \
    "\"mcp\": { \"call_timeout_ms\": 5000 }" ||
    bail "gateway starts with its HTTP API"
peer_log "$GW_TMP/devices.err"

declare -A DEV_PID DEV_ID
named_device lifecycle e 31 --idle --mcp-engine esp-mcp --mcp-echo-tool \
    --turns 0 --frames 20
E=${DEV_ID[e]}
check "the gateway reads the device's tools" \
    wait_for_line "$GW_LOG" "dev=$E mcp.* [0-9]+ tools? in [0-9]+ pages?"

tok=$(daily_token "$MKEY")
# api_echo TEXT: self.sim.echo through /api/commands; the HTTP status.
api_echo() {
    curl -sS --max-time 15 -o "$GW_TMP/api.json" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
        --data "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/call\",\"params\":{\"name\":\"self.sim.echo\",\"arguments\":{\"text\":\"$1\"}}}}" \
        "$BASE/api/commands/$E"
}
code=$(api_echo before)
check "an API call before the conversation succeeds ($code)" \
    jq -e '.success and .data.content[0].text == "before"' "$GW_TMP/api.json"

echo "# a conversation: the backend's initialize reaches the device"
kill -USR1 "${DEV_PID[e]}"
check "the backend gets its tools/call answer" \
    wait_for_line "$BACKEND_EVENTS" '"ev":"mcp".*"matched":"tools/call"'
ev=$(grep '"ev":"mcp"' "$BACKEND_EVENTS" | grep '"matched":"initialize"' | tail -n 1)
check "its initialize (2025-06-18) is answered by the device itself" \
    jq -e '.payload.result.protocolVersion == "2025-06-18" and
        .payload.result.serverInfo.name == "sim-esp"' <<<"$ev"
ev=$(grep '"ev":"mcp"' "$BACKEND_EVENTS" | grep '"matched":"tools/call"' | tail -n 1)
check "the backend's tools/call succeeds after it ($(jq -c .payload <<<"$ev"))" \
    jq -e '.payload.result.content[0].text == "from-backend"' <<<"$ev"
check "the gateway followed the relayed initialize with notifications/initialized" \
    test "$(count_lines "$GW_TMP/e.out" '< mcp notifications/initialized')" -ge 2

code=$(api_echo after)
check "an API call after the relayed initialize succeeds ($code $(jq -c .data "$GW_TMP/api.json"))" \
    jq -e '.success and .data.content[0].text == "after"' "$GW_TMP/api.json"

r=$(end_device e)
device_ok "the device ends well (no request refused by its lifecycle gate)" "$r"
check "it ran as esp-mcp's engine and was initialized twice ($(jq -c \
    '[.mcp_engine, .mcp_reinitializes, .mcp_lifecycle_refused]' <<<"$r"))" \
    jq -e '.mcp_engine == "esp-mcp" and .mcp_reinitializes >= 1 and
        .mcp_lifecycle_refused == 0' <<<"$r"
stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
check "the gateway logged no error" \
    not grep -E ' error |ERROR|AddressSanitizer|runtime error' "$GW_LOG"
finish
