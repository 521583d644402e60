#!/usr/bin/env bash
# MCP end to end on real parts: mosquitto with the plugin, the gateway
# with its HTTP API, stock simulated devices (most of them online with no
# conversation) and the mock backend as the xiaozhi server's MCP client;
# MCP clients are the official SDK (tests/mcp/client.mjs), raw HTTP checks
# (tests/mcp/http_checks.mjs), curl for the manager-api routes, and
# unauthenticated connections announcing big bodies
# (tests/mcp/http_memory.mjs).
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
mcp_tools_ready ||
    bail "node and tests/mcp's npm packages are installed (scripts/setup.sh)"

TOKEN=it-bearer-7f3c9a
MKEY=It-Manager-Zq7Hw3
VISION_URL=http://127.0.0.1:8003/mcp/vision/explain
SHORT_MS=2000 # mcp.call_timeout_ms for the timeout cases
LONG_MS=30000 # after a reload: no call may time out on a busy machine

start_plugin_broker broker || bail "broker with the plugin starts"
start_backend backend --mcp --mcp-list-delay-ms 0 --turn-frames 10 \
    --tts-frames 4 --mcp-call 'self.sim.echo:{"text":"from-backend"}'
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
udp_port=$(free_port --udp)

# write_config CALL_TIMEOUT_MS: without discovery retries, so that a
# device that never answers stays failed (test_mcp_discovery_retry.sh
# has them).
write_config() {
    cat >"$cfg" <<JSON
{
  "instance": "mcp",
  "mqtt": { "host": "127.0.0.1", "port": $BROKER_PORT, "keepalive": 10,
            "username": "$GW_MQTT_USER", "password": "$GW_MQTT_PASS" },
  "udp": { "bind": "127.0.0.1", "port": $udp_port, "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock",
                  "url": "ws://127.0.0.1:$BACKEND_PORT/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $HTTP_PORT, "token": "$TOKEN",
            "manager_key": "$MKEY" },
  "mcp": { "call_timeout_ms": $1, "discover_retries": 0 },
  "log": { "level": "debug" }
}
JSON
}
write_config "$SHORT_MS"
start_gateway gw "$cfg" || bail "gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"
peer_log "$GW_TMP/sdk.err" "$GW_TMP/devices.err"

# ---- devices: stock firmware through the plugin ----
declare -A DEV_PID DEV_ID
# device NAME MAC_LAST_BYTE ARGS...: starts a device (transcript and
# result line in $GW_TMP/NAME.out); sets ID.
device() {
    local name=$1 mac=$2
    shift 2
    ID=$(printf 'GID_test@@@02_00_00_00_01_%s@@@mcp-%s' "$mac" "$name")
    DEV_ID[$name]=$ID
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
        --client-id "$ID" --json "$@" >"$GW_TMP/$name.out" \
        2>>"$GW_TMP/devices.err" &
    DEV_PID[$name]=$!
    peer_log "$GW_TMP/$name.out"
}
# prefix NAME: how the aggregated tool names of that device begin (its
# label starts with the 12 hex digits of its MAC).
prefix() {
    cut -d@ -f4 <<<"${DEV_ID[$1]}" | tr -d _ | sed 's/$/-/'
}
# discovered NAME: waits until the gateway has read the device's tools.
discovered() {
    wait_for_line "$GW_LOG" "dev=${DEV_ID[$1]} mcp.* [0-9]+ tools? in [0-9]+ pages?"
}
# pages_read NAME: pages of the gateway's last discovery of the device.
pages_read() {
    grep -E "dev=${DEV_ID[$1]} mcp.* [0-9]+ tools? in [0-9]+ pages?" "$GW_LOG" |
        tail -n 1 | sed -E 's/.* tools? in ([0-9]+) page.*/\1/'
}
sdk() {
    mcp_client --token "$TOKEN" "$@" 2>>"$GW_TMP/sdk.err"
}
tok=$(daily_token "$MKEY")
# mgr TOKEN PATH BODY: POSTs to the manager-api; prints the status, the
# body goes to $GW_TMP/mgr.json.
mgr() {
    curl -sS --max-time 30 -o "$GW_TMP/mgr.json" -w '%{http_code}' \
        -X POST -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' --data "$3" "$BASE$2"
}
mcp_cmd() { # METHOD PARAMS_JSON: a manager-api command body
    printf '{"type":"mcp","payload":{"method":"%s","params":%s}}' "$1" "$2"
}

echo "# a. the SDK client on /mcp and /mcp/devices/{clientId}, no voice session"
device a 0a --idle --mcp-echo-tool
device b 0b --idle --mcp-extra-tools 100
check "device a's tools are read while it has no session" discovered a
check "device b's tools are read, every page" discovered b
A=${DEV_ID[a]} B=${DEV_ID[b]}
pa=$(prefix a) pb=$(prefix b)
r=$(sdk --url "$BASE/mcp")
check "the SDK client connects over Streamable HTTP and lists every page" \
    jq_is "$r" .ok true
check "it negotiates protocol 2025-11-25" jq_is "$r" .protocolVersion 2025-11-25
check "device a's 4 AI tools are there under its label ($pa...)" \
    jq -e --arg p "$pa" '[.tools[] | select(startswith($p))] | length == 4' <<<"$r"
check "device b's 103 AI tools are there under its label ($pb...)" \
    jq -e --arg p "$pb" '[.tools[] | select(startswith($p))] | length == 103' <<<"$r"
check "user-only tools are hidden" \
    jq -e '[.tools[] | select(test("[.]self[.](reboot|get_system_info)$"))] == []' <<<"$r"
check "every name is a valid MCP tool name" \
    jq -e 'all(.tools[]; test("^[A-Za-z0-9_.-]{1,128}$"))' <<<"$r"
la=$(jq -r --arg p "$pa" '[.tools[] | select(startswith($p))][0] | split(".")[0]' <<<"$r")
r=$(sdk --url "$BASE/mcp" --no-list \
    --call "$la.self.audio_speaker.set_volume:{\"volume\":33}" \
    --call "$la.self.get_device_status")
check "set_volume 33 through /mcp succeeds" \
    jq -e '.calls[0].ok and .calls[0].text == "true"' <<<"$r"
check "get_device_status then shows volume 33" \
    jq -e '.calls[1].text | fromjson | .audio_speaker.volume == 33' <<<"$r"
r=$(sdk --url "$BASE/mcp/devices/$A" --call 'self.sim.echo:{"text":"hello a"}')
check "/mcp/devices/{clientId} lists the device's tools by their own names" \
    jq -e '.tools | sort == ["self.audio_speaker.set_volume",
        "self.get_device_status", "self.screen.set_brightness",
        "self.sim.echo"]' <<<"$r"
check "and calls them" jq -e '.calls[0].text == "hello a"' <<<"$r"

echo "# g. paging: device b's tools/list spans several 8000-byte pages"
pages=$(pages_read b)
check "the gateway read device b in several pages (${pages:-?})" \
    test "${pages:-0}" -ge 3
api=$(curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE/api/devices")
nb=$(jq --arg id "$B" '[.. | objects | select((.clientId? // .client_id?) == $id)][0] |
    (.tools | if type == "array" then length else . end) //
    (.mcp.tools | if type == "array" then length else . end)' <<<"$api" 2>/dev/null)
check "GET /api/devices: its cache holds every tool (${nb:-?} of 105)" \
    test "${nb:-0}" = 105
r=$(sdk --url "$BASE/mcp/devices/$B")
check "the SDK sees all 103 AI tools of device b" \
    jq -e '(.tools | length) == 103 and
        ([.tools[] | select(startswith("self.sim.tool_"))] | length) == 100' <<<"$r"

echo "# f. manager-api: commands and status with the daily token"
code=$(mgr "$tok" "/api/commands/$A" "$(mcp_cmd tools/list '{"withUserTools":true}')")
m=$(cat "$GW_TMP/mgr.json")
check "tools/list withUserTools answers 200 ($code)" test "$code" = 200
check "with the user-only tools" \
    jq -e '.success and ([.data.tools[].name] | index("self.reboot") and
        index("self.get_system_info"))' <<<"$m"
all=() cursor=
for _ in 1 2 3 4 5 6; do
    params='{"withUserTools":true}'
    [ -n "$cursor" ] && params="{\"withUserTools\":true,\"cursor\":\"$cursor\"}"
    [ "$(mgr "$tok" "/api/commands/$B" "$(mcp_cmd tools/list "$params")")" = 200 ] || break
    mapfile -t -O "${#all[@]}" all < <(jq -r '.data.tools[].name' "$GW_TMP/mgr.json")
    cursor=$(jq -r '.data.nextCursor // empty' "$GW_TMP/mgr.json")
    [ -z "$cursor" ] && break
done
check "paged by cursor, manager-api sees all 105 tools of device b (${#all[@]})" \
    test "${#all[@]}" -eq 105
code=$(mgr "$tok" "/api/commands/$A" \
    "$(mcp_cmd tools/call '{"name":"self.audio_speaker.set_volume","arguments":{"volume":44}}')")
check "tools/call set_volume 44 answers 200 ($code)" test "$code" = 200
check "with success and the device's result" \
    jq -e '.success and .data.content[0].text == "true"' "$GW_TMP/mgr.json"
code=$(mgr "$tok" "/api/commands/$A" \
    "$(mcp_cmd tools/call '{"name":"self.get_device_status","arguments":{}}')")
check "the device now says volume 44" \
    jq -e '.data.content[0].text | fromjson | .audio_speaker.volume == 44' \
    "$GW_TMP/mgr.json"
code=$(mgr "$(daily_token "$MKEY" -1)" "/api/devices/status" \
    "{\"clientIds\":[\"$A\",\"GID_none@@@00_00_00_00_00_00@@@none\"]}")
check "POST /api/devices/status with yesterday's token answers 200 ($code)" \
    test "$code" = 200
# isAlive means a live voice session, as in the Node gateway: device a,
# online with none, only exists.
check "device a exists but is not alive (no session), an unknown one neither" \
    jq -e --arg a "$A" '(.[$a] | {isAlive, exists}) ==
        {"isAlive":false,"exists":true} and
        .["GID_none@@@00_00_00_00_00_00@@@none"] ==
        {"isAlive":false,"exists":false}' "$GW_TMP/mgr.json"
code=$(mgr "$(daily_token "$MKEY" -3)" "/api/commands/$A" "$(mcp_cmd tools/list '{}')")
check "an invalid daily token is refused with 401 ($code)" test "$code" = 401

echo "# b. a device that never answers"
device s 0c --idle --mcp-silent
S=${DEV_ID[s]}
check "its discovery times out" \
    wait_for_line "$GW_LOG" "dev=$S mcp.*initialize failed"
# With no tool list the allow-list cannot say yes: AI callers are refused
# with the reason, while the operator's path still reaches the device.
r=$(sdk --url "$BASE/mcp/devices/$S" --no-list --call self.get_device_status)
check "an SDK call is refused: its tool list could not be read" \
    jq -e '.calls[0].error.code == -32602 and
        (.calls[0].error.message | test("could not be read"))' <<<"$r"
device t 10 --idle --mcp-call-delay-ms 600000
check "device t's tools are read" discovered t
T=${DEV_ID[t]}
r=$(sdk --url "$BASE/mcp/devices/$T" --no-list --call self.get_device_status)
check "an SDK call to a device that answers too late times out with -32001" \
    jq_is "$r" '.calls[0].error.code' -32001
# Well under the SDK's own 30 s request timeout: the gateway's timer ended
# it, however late a busy machine ran it.
check "after mcp.call_timeout_ms ($(jq .calls[0].ms <<<"$r") ms)" \
    jq -e ".calls[0].ms >= $SHORT_MS - 100 and .calls[0].ms < $SHORT_MS + 15000" <<<"$r"
kill "${DEV_PID[t]}"
wait "${DEV_PID[t]}" 2>/dev/null || true
code=$(mgr "$tok" "/api/commands/$S" \
    "$(mcp_cmd tools/call '{"name":"self.get_device_status","arguments":{}}')")
check "POST /api/commands answers 500 on the timeout ($code)" test "$code" = 500
check "with success false and an error" \
    jq -e '.success == false and (.error | type == "string" and length > 0)' \
    "$GW_TMP/mgr.json"
check "the gateway stays healthy" curl -fsS -o /dev/null --max-time 5 "$BASE/healthz"
r=$(sdk --url "$BASE/mcp/devices/$A" --no-list --call 'self.sim.echo:{"text":"still"}')
check "and other devices still answer" jq -e '.calls[0].text == "still"' <<<"$r"

echo "# c. a device that goes offline in the middle of a call"
# The long timeout from here on: the device's end, not the gateway's timer,
# must be what ends a call, however slowly a busy machine tells of it.
write_config "$LONG_MS"
kill -HUP "$GW_PID"
check "the gateway reloads with mcp.call_timeout_ms $LONG_MS" \
    wait_for_line "$GW_LOG" "config.*reloaded"
device d 0d --idle --mcp-echo-tool --mcp-call-delay-ms 60000
check "device d's tools are read" discovered d
D=${DEV_ID[d]}
sdk --url "$BASE/mcp/devices/$D" --no-list \
    --call 'self.sim.echo:{"text":"never"}' >"$GW_TMP/c.json" &
cpid=$!
check "the slow call reaches device d" \
    wait_for_line "$GW_TMP/d.out" 'tools/call queued'
kill -KILL "${DEV_PID[d]}"
wait "${DEV_PID[d]}" 2>/dev/null
check "the SDK client returns" wait_for_exit "$cpid"
r=$(tail -n 1 "$GW_TMP/c.json")
check "with -32002 (device offline)" jq_is "$r" '.calls[0].error.code' -32002
check "well before the timeout ($(jq .calls[0].ms <<<"$r") ms < $((LONG_MS / 2)))" \
    jq -e ".calls[0].ms < $LONG_MS / 2" <<<"$r"

echo "# d. the backend and an SDK client call one device at once"
device v 0e --idle --mcp-echo-tool --mcp-extra-tools 100 \
    --mcp-call-delay-ms 2500 --turns 0 --frames 20
V=${DEV_ID[v]}
check "device v's tools are read" discovered v
kill -USR1 "${DEV_PID[v]}" # a button press: a voice session begins
check "the backend sends its tools/call" \
    wait_for_line "$BACKEND_EVENTS" '"ev":"mcp_tx".*"method":"tools/call"'
# The device answers a call 2.5 s after it came. Frozen as soon as it has
# the backend's, it answers nothing until the SDK's call is in the gateway
# too: events, not that delay, make the two calls wait at once.
check "the backend's call reaches device v" \
    wait_for_line "$GW_TMP/v.out" 'tools/call queued'
kill -STOP "${DEV_PID[v]}"
check "and is still unanswered when the device is frozen" \
    not grep -q 'tools/call > reply' "$GW_TMP/v.out"
# The SDK's ids start at 0 (initialize 0, this call 1); the backend's
# tools/call ids start at 1: both calls wait with id 1 at once.
sdk --url "$BASE/mcp/devices/$V" --no-list \
    --call 'self.sim.echo:{"text":"from-sdk"}' >"$GW_TMP/d.json" &
spid=$!
check "the SDK's call reaches the gateway" \
    wait_for_line "$GW_LOG" "tools/call self\.sim\.echo on $V"
check "while the backend's call still waits" \
    not grep -q '"ev":"mcp".*"matched":"tools/call"' "$BACKEND_EVENTS"
code=$(mgr "$tok" "/api/devices/status" "{\"clientIds\":[\"$V\"]}")
check "device v in its voice session is alive for /api/devices/status" \
    jq -e --arg v "$V" '(.[$v] | {isAlive, exists}) ==
        {"isAlive":true,"exists":true} and .[$v].backend == "mock"' \
    "$GW_TMP/mgr.json"
kill -CONT "${DEV_PID[v]}"
check "the backend gets its answer" \
    wait_for_line "$BACKEND_EVENTS" '"ev":"mcp".*"matched":"tools/call"'
check "the SDK client returns" wait_for_exit "$spid"
r=$(tail -n 1 "$GW_TMP/d.json")
check "the SDK client gets its own answer" jq -e '.calls[0].text == "from-sdk"' <<<"$r"
ev=$(grep '"ev":"mcp"' "$BACKEND_EVENTS" | grep '"matched":"tools/call"' | tail -n 1)
check "its own: the backend's text under the backend's id 1" \
    jq -e '.payload.id == 1 and
        .payload.result.content[0].text == "from-backend"' <<<"$ev"

echo "# e. the backend's MCP client through the gateway"
ev=$(grep '"ev":"mcp"' "$BACKEND_EVENTS" | grep '"matched":"initialize"' | tail -n 1)
check "the backend's initialize is answered (id 1)" \
    jq -e '.payload.id == 1 and .payload.result.protocolVersion != null' <<<"$ev"
ev=$(grep '"ev":"mcp_tools"' "$BACKEND_EVENTS" | tail -n 1)
check "its tools/list is answered from the cache in one page" jq_is "$ev" .pages 1
check "with all 104 AI tools of device v" jq_is "$ev" .count 104
check "and no user-only tool" \
    jq -e '.names | (index("self.reboot") or index("self.get_system_info")) | not' <<<"$ev"
vpages=$(pages_read v)
r=$(end_device v)
device_ok "device v ends well" "$r"
check "the backend's initialize reached device v with its vision capability" \
    jq -e --arg u "$VISION_URL" '.mcp.vision and .mcp.vision_url == $u' <<<"$r"
check "device v saw two initializes (the gateway's and the backend's)" \
    jq_is "$r" .mcp.initializes 2
check "it answered only the gateway's ${vpages:-?} tools/list pages" \
    jq_is "$r" .mcp.lists "${vpages:-x}"
check "and both calls" jq_is "$r" .mcp.calls 2

echo "# h. list_changed on the /mcp GET stream"
mcp_client --token "$TOKEN" --url "$BASE/mcp" --wait-list-changed 100 \
    --wait-ms 60000 >"$GW_TMP/h.json" 2>"$GW_TMP/h.err" &
hpid=$!
peer_log "$GW_TMP/h.err"
check "the SDK client holds the GET stream" \
    wait_for_line "$GW_TMP/h.err" '"event":"stream_open"'
device c 0f --idle
pc=$(prefix c)
check "a device coming online is announced (list_changed)" \
    wait_for_jq "$GW_TMP/h.err" \
    ".event == \"list_changed\" and any(.tools[]?; startswith(\"$pc\"))"
n0=$(jq -R 'fromjson? | select(.event == "list_changed") | .n' \
    "$GW_TMP/h.err" | tail -n 1)
r=$(end_device c)
device_ok "device c ends well" "$r"
check "a device going offline is announced too" \
    wait_for_jq "$GW_TMP/h.err" \
    ".event == \"list_changed\" and .n > $n0 and
     all(.tools[]?; startswith(\"$pc\") | not)"
stop_pid "$hpid"

echo "# i. the HTTP surface, raw"
node "$src/tests/mcp/http_checks.mjs" --base "$BASE" --token "$TOKEN" \
    --manager-key "$MKEY" --device "$A" >"$GW_TMP/i.out" 2>&1
rc=$?
peer_log "$GW_TMP/i.out"
while IFS= read -r line; do
    case $line in
    "ok - "*) ok "http: ${line#ok - }" ;;
    "not ok - "*) not_ok "http: ${line#not ok - }" ;;
    esac
done <"$GW_TMP/i.out"
check "http_checks.mjs ran every check and passed (exit $rc)" test "$rc" -eq 0

echo "# j. what clients without credentials can make the gateway hold"
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -H 'Host: evil.example' \
    -H "Authorization: Bearer $TOKEN" "$BASE/api/devices")
check "a Host the gateway does not know (DNS rebinding) gets 421 ($code)" \
    test "$code" = 421
ids=$(jq -nc '{clientIds: [range(4097) | "d\(.)"]}')
code=$(mgr "$tok" "/api/devices/status" "$ids")
check "POST /api/devices/status with 4097 ids gets 413 ($code)" test "$code" = 413
check "saying the cap" \
    jq -e '.error == "at most 4096 clientIds per request"' "$GW_TMP/mgr.json"
# 200 connections at once, each announcing a 256 KiB body to /mcp without
# a token and sending 200 KiB of it (this held ~40 MB before the head was
# checked first and bodies grew as they came).
node "$src/tests/mcp/http_memory.mjs" --port "$HTTP_PORT" --pid "$GW_PID" \
    >"$GW_TMP/j.json" 2>&1
m=$(tail -n 1 "$GW_TMP/j.json")
echo "# $m"
check "every unauthenticated connection was answered 401 or refused, none held" \
    jq -e '.ends.open == 0 and ((.ends["401"] // 0) + (.ends.closed // 0)) == 200
        and (.ends["401"] // 0) >= 1' <<<"$m"
check "the gateway grew by less than 16 MiB ($(jq .growth_kib <<<"$m") KiB)" \
    jq -e '.growth_kib < 16384' <<<"$m"
check "connections over http.max_connections_per_address were refused and logged" \
    wait_for_line "$GW_LOG" 'connection from 127\.0\.0\.1 refused: http\.max_connections_per_address'

echo "# k. without http.token the MCP server is off"
# Its broker port is a closed one: it never joins the devices' broker.
p2=$(free_port)
dead=$(free_port)
jq --argjson p "$p2" --argjson d "$dead" \
    '.http.token = "" | .http.port = $p | .mqtt.port = $d | .udp.port = 0 |
        .instance = "mcp-off"' \
    "$cfg" >"$GW_TMP/gw-off.json"
"$GW" -c "$GW_TMP/gw-off.json" >"$GW_TMP/gw-off.log" 2>&1 &
off_pid=$!
peer_log "$GW_TMP/gw-off.log"
check "a gateway without a token says at start that the MCP server is off and how to enable it" \
    wait_for_line "$GW_TMP/gw-off.log" 'MCP server off: http.token is not set.*"token"'
check "its API listens" wait_for_line "$GW_TMP/gw-off.log" "API on 127.0.0.1 port $p2 "
code=$(curl -sS -o "$GW_TMP/off.json" -w '%{http_code}' --max-time 5 -X POST \
    -H 'Content-Type: application/json' --data '{"jsonrpc":"2.0","id":1,"method":"ping"}' \
    "http://127.0.0.1:$p2/mcp")
check "and /mcp refuses with 403 ($code)" test "$code" = 403
check "saying to set http.token" grep -q 'set http.token' "$GW_TMP/off.json"
stop_pid "$off_pid"

echo "# the end: devices' own counts, a clean stop"
r=$(end_device s)
check "the silent device was told of each expired request (notifications/cancelled: $(jq .mcp.cancelled <<<"$r"))" \
    jq -e '.mcp.cancelled >= 2' <<<"$r"
r=$(end_device b)
check "device b answered its pages and ends well" \
    jq -e '.ok and .mcp.lists >= 3' <<<"$r"
r=$(end_device a)
check "device a ends well, without a conversation" \
    jq -e '.ok and .sessions == 0 and .mcp.calls >= 6' <<<"$r"
stats=$(gateway_stats)
echo "# $stats"
stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
check "the gateway logged no error" \
    not grep -E ' error |ERROR|AddressSanitizer|runtime error' "$GW_LOG"
finish
