#!/usr/bin/env bash
# The whole MCP surface end to end on real parts: mosquitto with the
# plugin, the gateway, simulated devices in the esp-mcp-like profile
# (resources, prompts, completion, logging, progress, tasks, requests to
# their client) next to a stock one, the official SDK as the MCP client
# (tests/mcp/surface.mjs) and the mock backend in a conversation.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
mcp_tools_ready ||
    bail "node and tests/mcp's npm packages are installed (scripts/setup.sh)"

TOKEN=it-bearer-5e1d7b
MKEY=It-Manager-Kp4Rv8
BIG_BYTES=4096 # the esp device's device://big.txt
BIG_LIMIT=2048 # mcp.max_resource_bytes: the big resource is over it
CHANGE_MS=4000 # device l adds a tool, a resource, a prompt this late
DEVREQ_MS=3000 # mcp.device_request_timeout_ms: a client that never answers

start_plugin_broker broker || bail "broker with the plugin starts"
start_backend backend --mcp --mcp-list-delay-ms 0 --turn-frames 10 \
    --tts-frames 4 --mcp-call 'self.sim.echo:{"text":"from-backend"}' \
    --mcp-call 'self.sim.ask:{"question":"backend asks"}'
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
cat >"$cfg" <<JSON
{
  "instance": "mcp-surface",
  "mqtt": { "host": "127.0.0.1", "port": $BROKER_PORT, "keepalive": 10,
            "username": "$GW_MQTT_USER", "password": "$GW_MQTT_PASS" },
  "udp": { "bind": "127.0.0.1", "port": $(free_port --udp), "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock",
                  "url": "ws://127.0.0.1:$BACKEND_PORT/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $HTTP_PORT, "token": "$TOKEN",
            "manager_key": "$MKEY" },
  "mcp": { "max_resource_bytes": $BIG_LIMIT, "device_request_timeout_ms": $DEVREQ_MS },
  "log": { "level": "debug" }
}
JSON
start_gateway gw "$cfg" || bail "gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"
peer_log "$GW_TMP/devices.err"

declare -A DEV_PID DEV_ID
# device NAME MAC_LAST_BYTE ARGS...: starts a device.
device() { named_device surface "$@"; }
# discovered NAME: waits until the gateway has read the device's tools.
discovered() {
    wait_for_line "$GW_LOG" "dev=${DEV_ID[$1]} mcp.* [0-9]+ tools? in [0-9]+ pages?"
}
# catalog_read NAME: waits until it has read the rest of an esp device's
# catalog too (prompts/list is the last list of a discovery).
catalog_read() {
    wait_for_line "$GW_LOG" "dev=${DEV_ID[$1]} mcp.* prompts/list: [0-9]+ items? in [0-9]+ pages?"
}
# surface OUT ARGS...: tests/mcp/surface.mjs, its lines to OUT; it ends
# in time for the rest of the test to report within the budget.
surface() {
    local out=$1 left=$((GW_DEADLINE - SECONDS - 25))
    shift
    ((left < 10)) && left=10
    node "$src/tests/mcp/surface.mjs" --base "$BASE" --token "$TOKEN" \
        --deadline-ms $((left * 1000)) "$@" >"$out" 2>&1
}

echo "# devices: an esp-mcp-like one and a stock one, no voice session"
# e behaves exactly as esp-mcp's engine: a numeric progress token echoed
# as a string, no request to a client that did not declare it, requests
# refused until notifications/initialized after every initialize.
device e 21 --idle --mcp-engine esp-mcp --mcp-echo-tool \
    --mcp-big-resource-bytes "$BIG_BYTES" --turns 0 --frames 20
device s 22 --idle --mcp-echo-tool
check "the esp device's tools are read while it has no session" discovered e
check "and its resources, templates and prompts" catalog_read e
check "the stock device's tools are read" discovered s
E=${DEV_ID[e]} S=${DEV_ID[s]}

echo "# list_changed: a client on /mcp before device l comes"
surface "$GW_TMP/changes.out" --part changes --device \
    "GID_test@@@02_00_00_00_02_23@@@surface-l" --wait-ms 40000 &
cpid=$!
check "the watching client holds the /mcp GET stream" \
    wait_for_line "$GW_TMP/changes.out" '^# (stream_open|no stream)'
device l 23 --idle --mcp-profile esp --mcp-change-after-ms "$CHANGE_MS"

echo "# the SDK client on the esp and the stock device"
surface "$GW_TMP/main.out" --part main --esp "$E" --stock "$S" \
    --manager-key "$MKEY" --big-bytes "$BIG_BYTES" --big-limit "$BIG_LIMIT" \
    --device-request-ms "$DEVREQ_MS"
report_lines "$GW_TMP/main.out" $? "surface.mjs --part main"
check "the gateway is still up after the cancellations" \
    curl -fsS -o /dev/null --max-time 5 "$BASE/healthz"
check "the esp device got the client's cancellation (notifications/cancelled)" \
    grep -q '< mcp notifications/cancelled' "$GW_TMP/e.out"
wait_for_exit "$cpid" >/dev/null
report_lines "$GW_TMP/changes.out" "${EXIT_CODE:-1}" "surface.mjs --part changes"

echo "# the mock backend's tools flow with the esp device in a conversation"
kill -USR1 "${DEV_PID[e]}" # a button press: a voice session begins
check "the backend gets its two tools/call answers" \
    wait_for_lines "$BACKEND_EVENTS" '"ev":"mcp".*"matched":"tools/call"' 2
ev=$(grep '"ev":"mcp"' "$BACKEND_EVENTS" | grep '"matched":"initialize"' | tail -n 1)
check "its initialize is answered by the esp device ($(jq -c .payload.result.serverInfo <<<"$ev"))" \
    jq -e '.payload.result.protocolVersion != null and
        .payload.result.serverInfo.name == "sim-esp"' <<<"$ev"
ev=$(grep '"ev":"mcp_tools"' "$BACKEND_EVENTS" | tail -n 1)
check "its tools/list has the esp device's tools ($(jq -c .count <<<"$ev"))" \
    jq -e '.names | index("self.sim.count") and index("self.sim.echo")' <<<"$ev"
calls=$(grep '"ev":"mcp"' "$BACKEND_EVENTS" | grep '"matched":"tools/call"')
check "self.sim.echo answers the backend" \
    jq -se 'any(.[]; .payload.result.content[0].text == "from-backend")' <<<"$calls"
check "self.sim.ask from the backend, no MCP client: isError with -32006" \
    jq -se 'any(.[]; .payload.result.isError == true and
        (.payload.result.content[0].text | test("-32006|no MCP client")))' <<<"$calls"

echo "# the end: the devices' own counts, a clean stop"
r=$(end_device e)
device_ok "the esp device ends well (no MCP violation, every request of it answered)" "$r"
check "it had its conversation" jq -e '.sessions >= 1' <<<"$r"
# Each request of surface.mjs's checks and the backend's once: sampling 7
# from the SDK sessions and 1 from the backend's call, elicitation 2,
# roots 3; tasks: two jobs on its endpoint and one through /mcp.
check "it sent 8 sampling, 2 elicitation and 3 roots requests ($(jq -c \
    '[.mcp_samplings, .mcp_elicitations, .mcp_roots]' <<<"$r"))" \
    jq -e '.mcp_samplings == 8 and .mcp_elicitations == 2 and .mcp_roots == 3' <<<"$r"
# 5 + 3 + 3 steps counted to the end, and the 50 of the cancelled count
# stopped after its first (or second, on a slow machine). Tasks: two on
# its endpoint, two on /mcp (one for another session to try).
check "it sent progress, stopped counting on the cancel, made tasks, logged ($(jq -c \
    '[.mcp_progress_sent, .mcp_tasks, .mcp_logs_sent]' <<<"$r"))" \
    jq -e '.mcp_progress_sent >= 12 and .mcp_progress_sent < 23 and .mcp_tasks == 4 and
        .mcp_logs_sent >= 1' <<<"$r"
# Two sessions on its endpoint shared one subscription of device://status
# (the device was subscribed by the first and unsubscribed after the
# last), then a session on /mcp subscribed again: two requests reached it.
check "the gateway subscribed it once per first subscriber ($(jq .mcp_subscribed <<<"$r") of 2)" \
    jq -e '.mcp_subscribed == 2' <<<"$r"
check "it was told of the cancelled call ($(jq .mcp.cancelled <<<"$r"))" \
    jq -e '.mcp.cancelled >= 1' <<<"$r"
check "no answer came for the request it withdrew (mcp_late $(jq .mcp_late <<<"$r"))" \
    jq -e '.mcp_late == 0 and .mcp_unanswered == 0' <<<"$r"
check "and unsubscribed once no one was left, twice ($(count_lines "$GW_TMP/e.out" '< mcp resources/unsubscribe'))" \
    test "$(count_lines "$GW_TMP/e.out" '< mcp resources/unsubscribe')" -eq 2
r=$(end_device l)
device_ok "device l ends well" "$r"
check "device l sent its three list_changed ($(jq .mcp_list_changed_sent <<<"$r"))" \
    jq -e '.mcp_list_changed_sent == 3' <<<"$r"
r=$(end_device s)
device_ok "the stock device ends well" "$r"
check "the stock device answered its calls" jq -e '.mcp.calls >= 2' <<<"$r"
stats=$(gateway_stats)
echo "# $stats"
stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
check "the gateway logged no error" \
    not grep -E ' error |ERROR|AddressSanitizer|runtime error' "$GW_LOG"
finish
