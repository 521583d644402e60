#!/usr/bin/env bash
# Pushing to idle devices on real parts: mosquitto with the plugin, the
# gateway's HTTP API, stock simulated devices online with no conversation.
# Every message type the firmware takes while idle reaches the device (one
# device, and fanned out to ids, a group, all); bad bodies are refused
# with what is missing named and nothing else touched; API requests end
# before the manager-api's 10 s; /api/devices tells what is known of a
# device; the gateway's own initialize carries the configured vision
# capability; /mcp answers browser pages (CORS).
# shellcheck disable=SC2016 # jq programs name their own $variables
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

TOKEN=it-push-bearer-5d1e
MKEY=It-Push-Manager-Kq2Lm
VISION_URL=http://127.0.0.1:8003/mcp/vision/explain
VISION_TOKEN=vision-secret-8c41f2
ORIGIN=https://ops.example.test

start_plugin_broker broker || bail "broker with the plugin starts"
start_backend backend --turn-frames 10 --tts-frames 4
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
udp_port=$(free_port --udp)
cat >"$cfg" <<JSON
{
  "instance": "push",
  "mqtt": { "host": "127.0.0.1", "port": $BROKER_PORT, "keepalive": 10,
            "username": "$GW_MQTT_USER", "password": "$GW_MQTT_PASS" },
  "udp": { "bind": "127.0.0.1", "port": $udp_port, "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock",
                  "url": "ws://127.0.0.1:$BACKEND_PORT/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $HTTP_PORT, "token": "$TOKEN",
            "manager_key": "$MKEY", "allowed_origins": ["$ORIGIN"] },
  "mcp": { "client_capabilities": { "vision": {
             "url": "$VISION_URL", "token": "$VISION_TOKEN" } } },
  "limits": { "max_downlink_bytes": 8192 },
  "log": { "level": "debug" }
}
JSON
check "the config loads (--check-config)" "$GW" --check-config -c "$cfg"
start_gateway gw "$cfg" || bail "gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"
peer_log "$GW_TMP/devices.err"

declare -A DEV_PID DEV_ID
# device NAME MAC_LAST_BYTE ARGS...: a stock device through the plugin.
device() { named_device push "$@"; }
discovered() {
    wait_for_line "$GW_LOG" "dev=${DEV_ID[$1]} mcp.* [0-9]+ tools? in [0-9]+ pages?"
}
# post AUTH PATH BODY: prints the status; the answer goes to $GW_TMP/ans.json.
post() {
    curl -sS --max-time 30 -o "$GW_TMP/ans.json" -w '%{http_code}' \
        -X POST -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' --data "$3" "$BASE$2"
}
# jqt ARGS...: jq -e without printing the value (for check).
jqt() { jq -e "$@" >/dev/null; }
mgr_tok=$(daily_token "$MKEY")

device a 0a --idle --mcp-echo-tool
device b 0b --idle
device s 0c --idle --mcp-silent
A=${DEV_ID[a]} B=${DEV_ID[b]} S=${DEV_ID[s]}
OFF='GID_test@@@02_00_00_00_02_ff@@@push-offline'
check "device a's tools are read while it has no session" discovered a
check "device b's tools are read" discovered b
check "device s is online (it never answers MCP)" \
    wait_for_line "$GW_LOG" "dev=$S.*online from"

echo "# detail: what the gateway knows of a device"
d=$(curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE/api/devices/$A")
check "online since: an ISO 8601 UTC time, and seconds online" \
    jqt '(.online_since | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$"))
        and .online_s >= 0' <<<"$d"
check "its address, as the broker saw it" jq_is "$d" .address 127.0.0.1
check "firmware and board from its MCP serverInfo" \
    jqt '.firmware == "2.4.2" and .board == "hybridgw-sim"' <<<"$d"
check "its tool count, and no live session" \
    jqt '.tool_count >= 4 and .tool_count == .mcp.tools and .session == null' <<<"$d"
l=$(curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE/api/devices")
check "GET /api/devices carries the same for each device" \
    jqt --arg a "$A" '[.devices[] | select(.client_id == $a)][0] |
        .firmware == "2.4.2" and .address == "127.0.0.1"' <<<"$l"
code=$(post "$mgr_tok" /api/devices/status "{\"clientIds\":[\"$A\",\"$OFF\"]}")
check "POST /api/devices/status: 200 ($code)" test "$code" = 200
check "it keeps isAlive/exists and adds the detail" \
    jqt --arg a "$A" --arg o "$OFF" '.[$a].exists and (.[$a].isAlive | not)
        and .[$a].board == "hybridgw-sim" and .[$a].tool_count >= 4
        and .[$a].backend == null and (.[$o].exists | not)' "$GW_TMP/ans.json"

echo "# the gateway's own initialize: configured client capabilities"
check "the gateway never logged the vision token" \
    not grep -qF "$VISION_TOKEN" "$GW_LOG"

echo "# push: each type to an idle device"
code=$(post "$mgr_tok" "/api/commands/$A" \
    '{"type":"alert","status":"Warn","message":"Door open","emotion":"sad"}')
check "an alert through /api/commands answers 200 ($code)" test "$code" = 200
check "published" jqt '.success and .data.published' "$GW_TMP/ans.json"
check "device a got it while idle" \
    wait_for_line "$GW_TMP/a.out" '< alert status=Warn message=Door open emotion=sad \(idle\)'
code=$(post "$TOKEN" "/api/devices/$B/commands" '{"type":"system","command":"reboot"}')
check "system reboot through /api/devices/{id}/commands: 200 ($code)" test "$code" = 200
check "device b got the reboot while idle" \
    wait_for_line "$GW_TMP/b.out" '< system command=reboot \(idle\)'
code=$(post "$TOKEN" "/api/devices/$A/commands" \
    '{"type":"custom","payload":{"k":"v","n":[1,2]}}')
check "custom: 200 ($code)" test "$code" = 200
check "device a got the payload" \
    wait_for_line "$GW_TMP/a.out" '< custom payload=\{"k":"v","n":\[1,2\]\}'
code=$(post "$TOKEN" "/api/devices/$A/commands" \
    '{"type":"mcp","payload":{"method":"tools/call","params":{"name":"self.sim.echo","arguments":{"text":"pushed"}}}}')
check "mcp through the token route: 200 with the device's answer ($code)" \
    jqt '.success and .data.content[0].text == "pushed"' "$GW_TMP/ans.json"

echo "# refused: 400 naming what is missing, nothing sent"
bad() { # WHAT STATUS REGEX PATH AUTH BODY
    local code
    code=$(post "$5" "$4" "$6")
    check "$1: $2 ($code)" test "$code" = "$2"
    check "  the answer says why" jqt --arg re "$3" \
        '(.success == false) and (.error | test($re))' "$GW_TMP/ans.json"
}
bad "an alert without emotion" 400 '"emotion"' "/api/commands/$A" "$mgr_tok" \
    '{"type":"alert","status":"s","message":"m"}'
bad "an alert with an empty message" 400 '"message"' "/api/devices/$A/commands" \
    "$TOKEN" '{"type":"alert","status":"s","message":"","emotion":"e"}'
bad "system shutdown" 400 'reboot' "/api/devices/$A/commands" "$TOKEN" \
    '{"type":"system","command":"shutdown"}'
bad "custom with an array payload" 400 '"payload"' "/api/devices/$A/commands" \
    "$TOKEN" '{"type":"custom","payload":[1]}'
bad "an unknown type" 400 'unknown "type"' "/api/devices/$A/commands" \
    "$TOKEN" '{"type":"tts","state":"start"}'
bad "a body that is not JSON" 400 'JSON object' "/api/devices/$A/commands" \
    "$TOKEN" '{"type":'
big=$(head -c 9000 /dev/zero | tr '\0' x)
bad "a custom message past limits.max_downlink_bytes (8192 here)" 413 \
    '8192 bytes \(limits.max_downlink_bytes\)' "/api/devices/$A/commands" \
    "$TOKEN" "{\"type\":\"custom\",\"payload\":{\"t\":\"$big\"}}"
bad "an alert to an offline device" 500 'offline' "/api/commands/$OFF" \
    "$mgr_tok" '{"type":"alert","status":"s","message":"m","emotion":"e"}'
code=$(post wrong-token "/api/devices/$A/commands" '{"type":"system","command":"reboot"}')
check "the token route without the token: 401 ($code)" test "$code" = 401
code=$(post "$TOKEN" "/api/commands/$A" '{"type":"system","command":"reboot"}')
check "/api/commands with http.token instead of the daily token: 401 ($code)" \
    test "$code" = 401
check "the gateway logged each refusal" \
    wait_for_line "$GW_LOG" 'POST /api/devices/.*/commands from .*: 400 alert needs "message"'

echo "# fan-out: ids, a group, every device"
code=$(post "$TOKEN" /api/broadcast "{\"to\":{\"client_ids\":[\"$A\",\"$B\",\"$OFF\",\"$A\"]},
    \"message\":{\"type\":\"alert\",\"status\":\"Fleet\",\"message\":\"to ids\",\"emotion\":\"happy\"}}")
check "to ids: 200 ($code)" test "$code" = 200
check "a result per device, the offline one failed, a repeated id once" \
    jqt --arg a "$A" --arg b "$B" --arg o "$OFF" '.sent == 2 and .failed == 1
        and (.results | length) == 3 and .results[$a].success
        and .results[$b].data.published and (.results[$o].success | not)
        and (.results[$o].error | test("offline"))' "$GW_TMP/ans.json"
check "device b got the fleet alert" \
    wait_for_line "$GW_TMP/b.out" '< alert status=Fleet message=to ids'
code=$(post "$TOKEN" /api/broadcast \
    '{"to":{"group":"GID_test"},"message":{"type":"custom","payload":{"g":1}}}')
check "to a group: every online device of it ($code)" \
    jqt --arg a "$A" --arg b "$B" --arg s "$S" '.sent == 3 and .failed == 0
        and (.results | keys | sort) == ([$a, $b, $s] | sort)' "$GW_TMP/ans.json"
check "device s got the group's message" \
    wait_for_line "$GW_TMP/s.out" '< custom payload=\{"g":1\}'
code=$(post "$TOKEN" /api/broadcast \
    '{"to":{"group":"GID_none"},"message":{"type":"custom","payload":{}}}')
check "a group with nobody online: 200, no results ($code)" \
    jqt '.sent == 0 and .failed == 0 and .results == {}' "$GW_TMP/ans.json"
bad "a fan-out without its target" 400 '"to"' /api/broadcast "$TOKEN" \
    '{"message":{"type":"system","command":"reboot"}}'
bad "a fan-out of an incomplete alert" 400 '"status"' /api/broadcast "$TOKEN" \
    '{"to":{"all":true},"message":{"type":"alert"}}'

echo "# timing: API requests end before the manager-api's 10 s"
t0=$(date +%s%N)
post "$TOKEN" /api/broadcast \
    '{"to":{"all":true},"message":{"type":"mcp","payload":{"method":"tools/list","params":{}}}}' \
    >"$GW_TMP/fan.code" &
fan=$!
mgr_all=$GW_TMP/mgr_s.json
curl -sS --max-time 30 -o "$mgr_all" -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $mgr_tok" -H 'Content-Type: application/json' \
    --data '{"type":"mcp","payload":{"method":"tools/list","params":{}}}' \
    "$BASE/api/commands/$S" >"$GW_TMP/mgr_s.code" &
one=$!
# While both wait for device s, the loop serves everything else.
wait_for_line "$GW_LOG" "tools/list from [^ ]+ for $S" >/dev/null
t1=$(date +%s%N)
check "/healthz answers while the fan-out waits" answers "$BASE/healthz"
t2=$(date +%s%N)
check "  at once ($(((t2 - t1) / 1000000)) ms)" test $(((t2 - t1) / 1000000)) -lt 1000
wait "$one"
t3=$(date +%s%N)
wait "$fan"
t4=$(date +%s%N)
ms_one=$(((t3 - t0) / 1000000)) ms_fan=$(((t4 - t0) / 1000000))
check "/api/commands to a silent device: 500 ($(cat "$GW_TMP/mgr_s.code"))" \
    test "$(cat "$GW_TMP/mgr_s.code")" = 500
check "  after the 8000 ms default, below 10 s ($ms_one ms)" \
    test "$ms_one" -ge 7500 -a "$ms_one" -lt 10000
check "  saying it timed out" jqt '(.success | not) and (.error | test("time"))' "$mgr_all"
check "the fan-out to all answers below 10 s too ($ms_fan ms)" test "$ms_fan" -lt 10000
check "  with the answers of a and b and the timeout of s" \
    jqt --arg a "$A" --arg b "$B" --arg s "$S" '.sent == 2 and .failed == 1
        and (.results[$a].data.tools | length) >= 1
        and (.results[$b].data.tools | length) >= 1
        and (.results[$s].success | not)' "$GW_TMP/ans.json"

echo "# CORS on /mcp for a browser MCP client"
hdr=$GW_TMP/cors.h
code=$(curl -sS --max-time 5 -o /dev/null -D "$hdr" -w '%{http_code}' -X OPTIONS \
    -H "Origin: $ORIGIN" -H 'Access-Control-Request-Method: POST' \
    -H 'Access-Control-Request-Headers: authorization, content-type, mcp-session-id' \
    "$BASE/mcp")
check "a preflight without a token: 204 ($code)" test "$code" = 204
check "  allowing the origin" grep -qi "^Access-Control-Allow-Origin: $ORIGIN" "$hdr"
check "  and the transport's request headers" \
    grep -qiE '^Access-Control-Allow-Headers:.*Authorization.*Mcp-Session-Id.*MCP-Protocol-Version' "$hdr"
check "  and methods" grep -qiE '^Access-Control-Allow-Methods:.*POST.*DELETE' "$hdr"
code=$(curl -sS --max-time 5 -o /dev/null -D "$hdr" -w '%{http_code}' -X OPTIONS \
    -H 'Origin: https://evil.example.test' -H 'Access-Control-Request-Method: POST' \
    "$BASE/mcp")
check "a preflight from another origin: 403 ($code)" test "$code" = 403
check "  without CORS headers" not grep -qi '^Access-Control-Allow-Origin' "$hdr"
code=$(curl -sS --max-time 5 -o "$GW_TMP/init.json" -D "$hdr" -w '%{http_code}' \
    -X POST -H "Origin: $ORIGIN" -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    --data '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}' \
    "$BASE/mcp")
check "initialize from the page: 200 ($code)" test "$code" = 200
check "  readable by it" grep -qi "^Access-Control-Allow-Origin: $ORIGIN" "$hdr"
check "  with Mcp-Session-Id and MCP-Protocol-Version exposed" \
    grep -qiE '^Access-Control-Expose-Headers:.*Mcp-Session-Id.*MCP-Protocol-Version' "$hdr"
check "  and the session id header there" grep -qi '^Mcp-Session-Id: ' "$hdr"
code=$(curl -sS --max-time 5 -o /dev/null -D "$hdr" -w '%{http_code}' -X POST \
    -H "Origin: $ORIGIN" -H 'Content-Type: application/json' --data '{}' "$BASE/mcp")
check "without the token: 401 ($code), readable by the page" \
    grep -qi "^Access-Control-Allow-Origin: $ORIGIN" "$hdr"

echo "# counted"
m=$(curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE/metrics")
metric() { # NAME{LABELS}: its value
    awk -v k="$1" '$1 == k { print $2 }' <<<"$m"
}
check "alerts: 3 published, 2 to an offline device" test \
    "$(metric 'hybridgw_pushes_total{type="alert",result="published"}')/$(
        metric 'hybridgw_pushes_total{type="alert",result="offline"}')" = 3/2
check "custom: 4 published (one, then the group of 3); system: 1" test \
    "$(metric 'hybridgw_pushes_total{type="custom",result="published"}')/$(
        metric 'hybridgw_pushes_total{type="system",result="published"}')" = 4/1
check "the 9 refused bodies" test "$(metric hybridgw_push_refused_total)" = 9
check "the 4 fan-outs" test "$(metric hybridgw_push_broadcasts_total)" = 4

echo "# shutdown with a fan-out waiting for device s"
post "$TOKEN" /api/broadcast "{\"to\":{\"client_ids\":[\"$S\"]},
    \"message\":{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/list\"}}}" \
    >"$GW_TMP/last.code" &
last=$!
check "the fan-out waits" wait_for_line "$GW_LOG" "fan-out of mcp to 1 device from"
check "the gateway stops at once on SIGTERM" stop_pid "$GW_PID" 10
check "  exit code 0 ($EXIT_CODE)" test "$EXIT_CODE" = 0
check "  with no sanitizer report" \
    not grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$GW_LOG"
wait "$last"
check "the waiting client got no answer, the connection closed" \
    test "$(cat "$GW_TMP/last.code")" = 000

echo "# what each device took, at its end"
ra=$(end_device a)
rb=$(end_device b)
rs=$(end_device s)
check "device a: the alert and the fleet alert, nothing refused reached it" \
    jqt '.messages.alert == 2 and .messages.alert_ignored == 0
        and .messages.custom == 2 and .messages.custom_ignored == 0
        and .messages.system == 0 and .pushed.alert.message == "to ids"' <<<"$ra"
check "device a's initialize carried the vision url and token" \
    jqt --arg u "$VISION_URL" --arg t "$VISION_TOKEN" \
    '.mcp.vision and .mcp.vision_url == $u and .mcp.vision_token == $t' <<<"$ra"
check "device b: one reboot, the fleet alert, the group message" \
    jqt '.messages.reboots == 1 and .messages.alert == 1
        and .messages.custom == 1 and .messages.system_ignored == 0' <<<"$rb"
check "device s: the group message" jqt '.messages.custom == 1' <<<"$rs"
check "no device ever had a conversation" \
    jqt -s 'all(.[]; .sessions == 0)' <<<"$ra$rb$rs"
finish
