#!/usr/bin/env bash
# A discovery that gets no answer in time is run again (docs/protocol.md
# 7.2): a device that leaves its first initialize requests unanswered
# (--mcp-ignore-first, a device late under a storm) ends with
# its tools read after retries, logged and counted; one that never
# answers shows "retrying" in /api/devices, then "failed" once its
# retries are spent.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
TOKEN=it-bearer-51d0e2

start_plugin_broker broker || bail "broker with the plugin starts"
start_backend backend
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
write_gateway_config "$GW_TMP/gw.json" \
    "\"mcp\": { \"call_timeout_ms\": 300, \"discover_retries\": 4,
             \"discover_retry_ms\": 200 }"
jq --argjson p "$HTTP_PORT" --arg t "$TOKEN" \
    '.http = {listen: "127.0.0.1", port: $p, token: $t}' \
    "$GW_TMP/gw.json" >"$GW_TMP/gw2.json"
start_gateway gw "$GW_TMP/gw2.json" || bail "gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"
peer_log "$GW_TMP/devices.err"

# mcp_state ID: the device's mcp.state in /api/devices/ID.
mcp_state() {
    curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "$BASE/api/devices/$1" | jq -r '.mcp.state // empty'
}
# state_is ID STATE: true when the device's mcp.state is STATE.
state_is() {
    [ "$(mcp_state "$1")" = "$2" ]
}

declare -A DEV_PID DEV_ID
echo "# a device late to its first three initialize requests"
named_device retry l 41 --idle --mcp-ignore-first 3
L=${DEV_ID[l]}
check "its first discovery times out" \
    wait_for_line "$GW_LOG" "dev=$L mcp.*initialize failed: timeout"
check "and is retried (logged)" \
    wait_for_line "$GW_LOG" "dev=$L mcp.*discovery retry 1 of 4"
check "each retry that gets no answer is retried in turn" \
    wait_for_line "$GW_LOG" "dev=$L mcp.*discovery retry 3 of 4"
check "its tools are read at last" \
    wait_for_line "$GW_LOG" "dev=$L mcp.* [0-9]+ tools? in [0-9]+ pages?"
d=$(curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE/api/devices/$L")
check "/api/devices says ready, with its tools ($(jq -c .mcp <<<"$d"))" \
    jq -e '.mcp.state == "ready" and .mcp.complete and .tool_count >= 4' <<<"$d"
n=$(gw_metric "$BASE" hybridgw_mcp_discovery_retries_total "$TOKEN")
check "hybridgw_mcp_discovery_retries_total counts the three retries ($n)" \
    test "$n" -eq 3

echo "# a device that never answers"
named_device retry s 42 --idle --mcp-silent
S=${DEV_ID[s]}
check "it waits for a retry: mcp.state retrying" \
    wait_until "" state_is "$S" retrying
check "its last retry is logged" \
    wait_for_line "$GW_LOG" "dev=$S mcp.*discovery retry 4 of 4"
check "then, its retries spent, failed" wait_until "" state_is "$S" failed
n=$(gw_metric "$BASE" hybridgw_mcp_discovery_retries_total "$TOKEN")
check "no retry past discover_retries ($n)" test "$n" -eq 7

r=$(end_device l)
device_ok "device l ends well" "$r"
check "it left three requests unanswered ($(jq -c .mcp <<<"$r"))" \
    jq -e '.mcp.ignored >= 3 and .mcp.lists >= 1' <<<"$r"
end_device s >/dev/null
stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
check "the gateway logged no error" \
    not grep -E ' error |ERROR|AddressSanitizer|runtime error' "$GW_LOG"
finish
