#!/usr/bin/env bash
# No peer floods the log: on a real gateway (mosquitto with the plugin,
# the HTTP API with a token, the MCP server), 1,500 refused requests of one
# MCP client, 500 list_changed of one device and 1,200 refused requests of
# an HTTP client without credentials each leave a few lines; the lines
# left out are counted in /metrics, and the next line let through says how
# many of its source's went before it.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
command -v node >/dev/null || bail "node is installed (scripts/setup.sh)"

TOKEN=flood-test-token-7c1a
BOUND=100 # lines allowed for each flood: a burst and a few a second
start_plugin_broker broker || bail "the broker with the plugin starts"
start_backend backend
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"http\": { \"listen\": \"127.0.0.1\",
    \"port\": $HTTP_PORT, \"token\": \"$TOKEN\" }"
# Info, as shipped: the lines counted are those an operator sees.
jq '.log.level = "info"' "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
start_gateway gw "$cfg" || bail "the gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"

suppressed() { gw_metric "$BASE" hybridgw_log_lines_suppressed_total "$TOKEN"; }
flood() { node "$src/tests/mcp/flood.mjs" "$@" 2>&1 | tail -n 1; }
# summary_after RE WHAT ARGS...: sends one more request of flood.mjs ARGS
# each second (a bounded number of times) until a line matching RE says
# how many were not logged before it.
summary_after() {
    local re=$1 i
    shift
    for i in 1 2 3 4 5 6; do
        flood "$@" >/dev/null
        grep -qE "$re.*\(([0-9]+) more not logged before this\)" "$GW_LOG" && return 0
        sleep 1 # the source's bucket refills with time, not with an event
    done
    return 1
}

echo "# 1. 1,500 refused requests of one MCP client"
s0=$(suppressed)
r=$(flood --url "$BASE/mcp" --token "$TOKEN" --count 1500 \
    --mcp '{"jsonrpc":"2.0","id":{n},"method":"tasks/get","params":{}}')
echo "# $r"
check "all 1,500 answered" jq -e '.statuses["200"] == 1500' <<<"$r"
n=$(grep -c 'tasks/get refused (-32602): tasks/get needs a taskId' "$GW_LOG")
check "at most $BOUND lines of them ($n)" test "$n" -le "$BOUND"
s1=$(suppressed)
check "the rest counted in hybridgw_log_lines_suppressed_total ($((s1 - s0)))" \
    test $((s1 - s0)) -ge $((1500 - n))
check "the session's next line let through says how many went before it" \
    summary_after 'tasks/get refused' --url "$BASE/mcp" --token "$TOKEN" \
    --count 1 --session "$(jq -r .session <<<"$r")" \
    --mcp '{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}'
grep -E 'tasks/get refused.*more not logged before this' "$GW_LOG" | tail -n 1 |
    sed 's/^/# /'

echo "# 2. 500 list_changed of one device"
USER_NAME=eyJpcCI6IjEyNy4wLjAuMSJ9 # base64 of {"ip":"127.0.0.1"}
DEV=GID_test@@@02_00_00_00_05_01@@@flood
pass=$(printf '%s' "$DEV|$USER_NAME" |
    openssl dgst -sha256 -hmac "$PLUGIN_KEY" -binary | base64)
LC='{"type":"mcp","payload":{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}'
for i in $(seq 500); do echo "$LC"; done >"$GW_TMP/lc.txt"
changed0=$(gw_metric "$BASE" hybridgw_mcp_list_changed_total "$TOKEN")
s0=$(suppressed)
mosquitto_pub -p "$BROKER_PORT" -i "$DEV" -u "$USER_NAME" -P "$pass" \
    -t device-server -q 1 -l <"$GW_TMP/lc.txt"
seen() { [ "$(gw_metric "$BASE" hybridgw_mcp_list_changed_total "$TOKEN")" -ge $((changed0 + 500)) ]; }
check "all 500 reached the device's record" wait_until "$GW_WAIT_S" seen
n=$(grep -c "dev=$DEV" "$GW_LOG")
check "at most $BOUND lines about the device ($n)" test "$n" -le "$BOUND"
s1=$(suppressed)
check "the rest counted in hybridgw_log_lines_suppressed_total ($((s1 - s0)))" \
    test $((s1 - s0)) -ge $((500 - n))
grep "dev=$DEV.*more not logged" "$GW_LOG" | tail -n 1 | sed 's/^/# /'

echo "# 3. 1,200 refused requests without credentials"
s0=$(suppressed)
r=$(flood --url "$BASE/api/devices" --count 1200)
echo "# $r"
check "all 1,200 refused with 401" jq -e '.statuses["401"] == 1200' <<<"$r"
n=$(grep -c 'GET /api/devices from 127.0.0.1: 401' "$GW_LOG")
check "at most $BOUND lines of them ($n)" test "$n" -le "$BOUND"
s1=$(suppressed)
check "the rest counted in hybridgw_log_lines_suppressed_total ($((s1 - s0)))" \
    test $((s1 - s0)) -ge $((1200 - n))
check "the next line let through says how many went before it" \
    summary_after 'GET /api/devices from 127.0.0.1: 401' \
    --url "$BASE/api/devices" --count 1
grep -E '/api/devices from 127.0.0.1: 401.*more not logged' "$GW_LOG" |
    tail -n 1 | sed 's/^/# /'

stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
finish
