#!/usr/bin/env bash
# Calls between devices, as the manager-api drives them: mosquitto with the
# plugin, the gateway, the mock backend and simulated stock devices with
# the call behaviour (--call). A call is asked for, the callee is woken by
# self.remote_wakeup, the waiting caller hears silence, the accept bridges
# the two, numbered frames arrive bit-exact both ways and none reaches the
# backend, a hang-up gives the other side its goodbye; an unanswered call
# expires; bad requests get the Node gateway's answers and change nothing;
# two devices asking for each other are bridged at once; a stock callee
# refuses the wake-up; a caller leaving while ringing ends the call; two
# online devices with one MAC are refused as ambiguous, nobody woken; a
# shutdown during a call says goodbye to both and frees everything.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

MKEY=Call-Manager-Key-9
TOKEN=call-test-token
RING_MS=4000 # limits.call_ring_timeout_ms

start_plugin_broker broker || bail "broker with the plugin starts"
# Turns end only on listen stop: devices stream until the call takes them.
start_backend backend --turn-frames 0 --no-decode
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"limits\": { \"call_ring_timeout_ms\": $RING_MS }"
# write_gateway_config leaves the API off: give it a port and the keys.
sed -i "s|\"http\": { \"port\": 0 }|\"http\": { \"listen\": \"127.0.0.1\", \"port\": $HTTP_PORT, \"token\": \"$TOKEN\", \"manager_key\": \"$MKEY\" }|" "$cfg"
start_gateway gw "$cfg" || bail "gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"
peer_log "$GW_TMP/devices.err"

declare -A DEV_PID DEV_ID DEV_MAC
# device NAME MAC_LAST_BYTE ARGS...: a stock device in the background
# (transcript and result line in $GW_TMP/NAME.out).
device() {
    local name=$1 mac=$2
    shift 2
    DEV_MAC[$name]=02:00:00:00:0c:$mac
    DEV_ID[$name]=GID_test@@@02_00_00_00_0c_$mac@@@call-$name
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
        --client-id "${DEV_ID[$name]}" --json --call "$@" \
        >"$GW_TMP/$name.out" 2>>"$GW_TMP/devices.err" &
    DEV_PID[$name]=$!
    peer_log "$GW_TMP/$name.out"
}
# caller NAME MAC: a device in a conversation that never ends by itself.
caller() {
    device "$1" "$2" --frames 0 --turns 0 --turn-timeout 600000
}
# result NAME: its result line once it has exited.
result() {
    wait_for_exit "${DEV_PID[$1]}" >/dev/null
    tail -n 1 "$GW_TMP/$1.out"
}
# end_device NAME: SIGINT (an idle device's normal end); prints its result.
end_device() {
    kill -INT "${DEV_PID[$1]}" 2>/dev/null
    result "$1"
}
active() {
    wait_for_line "$GW_LOG" "dev=${DEV_ID[$1]} .*session active"
}
online() { # the gateway has read its tools: it is known to be online
    wait_for_line "$GW_LOG" "dev=${DEV_ID[$1]} mcp.* [0-9]+ tools? in [0-9]+ pages?"
}
# api PATH BODY [TOKEN]: POSTs as the manager-api; prints the status, the
# answer goes to $GW_TMP/api.json.
api() {
    curl -sS --max-time 10 -o "$GW_TMP/api.json" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer ${3:-$(daily_token "$MKEY")}" \
        -H 'Content-Type: application/json' --data "$2" "$BASE$1"
}
answer() { cat "$GW_TMP/api.json"; }
# metric NAME_WITH_LABELS: its value now.
metric() {
    curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE/metrics" |
        awk -v n="$1 " 'index($0, n) == 1 { print $NF }'
}
metric_at_least() { (($(metric "$1") >= $2)); }
# backend_closed MAC: the backend's last connection of that device closed.
backend_closed() {
    local conn
    conn=$(jq -r --arg m "$1" \
        'select(.ev == "connect" and .headers["device-id"] == $m) | .conn' \
        "$BACKEND_EVENTS" | tail -n 1)
    [ -n "$conn" ] && has_json "$BACKEND_EVENTS" ".ev == \"close\" and .conn == $conn"
}
request_body() {
    printf '{"caller_mac":"%s","target_mac":"%s","caller_nickname":"%s"}' \
        "$1" "$2" "$3"
}

echo "# 1. a caller in a conversation, a callee online with none"
caller a 01
device b 02 --idle
check "the caller's session becomes active" active a
check "the callee is online" online b

echo "# 2. bad requests: the Node gateway's answers, nothing changes"
st=$(api /api/call/request '{"caller_mac":"02:00:00:00:0c:01"}')
check "request without target_mac: 400" test "$st" = 400
check "naming the missing fields" \
    jq -e '.error | test("caller_mac, target_mac")' <<<"$(answer)"
st=$(api /api/call/request '{"caller_mac":"02:00:00:00:0c:01","target_mac":"nope"}')
check "request with a target that is no MAC: 400" test "$st" = 400
st=$(api /api/call/request "$(request_body "${DEV_MAC[a]}" 02:00:00:00:0c:99 A)")
check "request for an unknown target: 200" test "$st" = 200
check "with status offline" jq_is "$(answer)" .status offline
st=$(api /api/call/accept '{}')
check "accept without mac: 400" test "$st" = 400
st=$(api /api/call/accept "{\"mac\":\"${DEV_MAC[b]}\"}")
check "accept with nothing pending: 200" test "$st" = 200
check "with status no_pending" jq_is "$(answer)" .status no_pending
st=$(api /api/call/request "$(request_body "${DEV_MAC[a]}" "${DEV_MAC[b]}" A)" \
    0000000000000000000000000000000000000000000000000000000000000000)
check "a wrong daily token: 401" test "$st" = 401
st=$(api /api/call/request 'not json')
check "a body that is no JSON: 400" test "$st" = 400
check "each refusal is logged" \
    test "$(grep -cE 'call (request|accept) .*(400|offline|no_pending)' "$GW_LOG")" -ge 5
check "no call was started by any of them" \
    test "$(metric hybridgw_calls_started_total)" = 0
check "the caller's conversation goes on" \
    not grep -q "dev=${DEV_ID[a]} .*session ended" "$GW_LOG"
check "/healthz still answers" answers "$BASE/healthz"

echo "# 3. the call: ringing, the callee woken, silence for the caller"
st=$(api /api/call/request "$(request_body "${DEV_MAC[a]}" "${DEV_MAC[b]}" Alice)")
check "request: 200" test "$st" = 200
check "with status pending" jq_is "$(answer)" .status pending
check "the caller's backend connection closes" \
    wait_until 20 backend_closed "${DEV_MAC[a]}"
check "the caller got no goodbye for it" \
    not grep -q '"goodbye' "$GW_TMP/a.out"
check "the callee is woken by self.remote_wakeup" \
    wait_for_line "$GW_TMP/b.out" 'self.remote_wakeup'
check "and opens a conversation" active b
check "the waiting caller hears Opus silence" \
    wait_for_line "$GW_TMP/a.out" 'silence frame \(call keepalive\)'
check "counted as keepalive" metric_at_least hybridgw_calls_silence_packets_total 1
check "one call rings" test "$(metric hybridgw_calls_ringing)" = 1

echo "# 4. accepted: audio both ways, bit-exact, none to the backend"
st=$(api /api/call/accept "{\"mac\":\"${DEV_MAC[b]}\"}")
check "accept: 200" test "$st" = 200
check "with status bridged and the caller as peerMac" \
    jq -e --arg m "${DEV_MAC[a]}" '.status == "bridged" and .peerMac == $m' <<<"$(answer)"
to_backend=$(metric 'hybridgw_audio_packets_total{direction="device_to_backend"}')
check "the caller gets call_accepted" wait_for_line "$GW_TMP/a.out" 'call_accepted from 02:00:00:00:0c:02'
check "the callee's backend connection closes" \
    wait_until 20 backend_closed "${DEV_MAC[b]}"
check "audio reaches the callee" wait_for_line "$GW_TMP/b.out" 'call audio: first frame'
check "audio reaches the caller" wait_for_line "$GW_TMP/a.out" 'call audio: first frame'
check "3 s of audio are relayed both ways" \
    wait_until 30 metric_at_least hybridgw_calls_relayed_packets_total 120
check "one call is bridged" test "$(metric hybridgw_calls_bridged)" = 1
check "the backend got no audio since the call was bridged" \
    test "$(metric 'hybridgw_audio_packets_total{direction="device_to_backend"}')" = "$to_backend"

echo "# 5. the callee hangs up: the caller gets its goodbye"
rb=$(end_device b)
ra=$(result a)
check "the callee received the caller's frames bit-exact and in order" \
    jq -e '.call.rx_frames >= 40 and .call.rx_bad == 0 and .call.rx_gaps == 0' <<<"$rb"
check "the caller received the callee's frames bit-exact and in order" \
    jq -e '.call.rx_frames >= 40 and .call.rx_bad == 0 and .call.rx_gaps == 0' <<<"$ra"
check "each got only frames the other sent" \
    jq -e --argjson t "$(jq .call.tx_frames <<<"$ra")" '.call.rx_last <= $t' <<<"$rb"
check "the callee was woken once, the caller accepted once" \
    test "$(jq .call.wakeups <<<"$rb")/$(jq .call.accepted <<<"$ra")" = 1/1
check "the caller heard silence while it waited" jq -e '.call.rx_silence > 0' <<<"$ra"
check "the caller's conversation ended with the gateway's goodbye" \
    jq -e '.goodbye_received == true and .goodbye_sent == false' <<<"$ra"
check "no downlink broke the firmware's rules" \
    jq -e '[.downlink.drops | to_entries[] | select(.key != "idle") | .value] | add == 0' <<<"$ra"
check "the gateway logs the hang-up" wait_for_line "$GW_LOG" 'call=1 .*call ended: hangup'
check "the backend heard exactly what the gateway sent it, no call audio" \
    test "$(jq -s '[.[] | select(.ev == "close") | .uplink.frames] | add' "$BACKEND_EVENTS")" = "$to_backend"

echo "# 6. an unanswered call expires and the caller gets a goodbye"
caller c 03
device d 04 --idle
check "the second caller's session becomes active" active c
check "the second callee is online" online d
st=$(api /api/call/request "$(request_body "${DEV_MAC[c]}" "${DEV_MAC[d]}" Carol)")
check "request: pending" jq_is "$(answer)" .status pending
check "the callee is woken" wait_for_line "$GW_TMP/d.out" 'self.remote_wakeup'
rc=$(result c)
check "after limits.call_ring_timeout_ms the caller gets its goodbye" \
    jq -e '.goodbye_received == true and .call.accepted == 0' <<<"$rc"
check "the gateway logs the expiry" wait_for_line "$GW_LOG" 'call=2 .*call ended: expired'
st=$(api /api/call/accept "{\"mac\":\"${DEV_MAC[d]}\"}")
check "a late accept: no_pending" jq_is "$(answer)" .status no_pending
rd=$(end_device d)
check "the callee got no call audio" jq -e '.call.rx_frames == 0' <<<"$rd"

echo "# 7. call metrics"
check "two calls started, one accepted" \
    test "$(metric hybridgw_calls_started_total)/$(metric hybridgw_calls_accepted_total)" = 2/1
check "ended: one hangup, one expired" \
    test "$(metric 'hybridgw_calls_ended_total{reason="hangup"}')/$(metric 'hybridgw_calls_ended_total{reason="expired"}')" = 1/1
check "answers by route and status" \
    test "$(metric 'hybridgw_calls_answers_total{route="request",status="pending"}')/$(metric 'hybridgw_calls_answers_total{route="request",status="offline"}')/$(metric 'hybridgw_calls_answers_total{route="request",status="bad_request"}')/$(metric 'hybridgw_calls_answers_total{route="accept",status="bridged"}')/$(metric 'hybridgw_calls_answers_total{route="accept",status="no_pending"}')/$(metric 'hybridgw_calls_answers_total{route="accept",status="bad_request"}')" = 2/1/3/1/2/1
check "nothing rings or is bridged now" \
    test "$(metric hybridgw_calls_ringing)/$(metric hybridgw_calls_bridged)" = 0/0
check "sessions ended by a call: the caller twice" \
    test "$(metric 'hybridgw_sessions_ended_total{reason="call ended"}')" = 2
check "no relayed packet was refused" test "$(metric hybridgw_calls_relay_refused_total)" = 0

echo "# 8. both ask for each other: bridged at once; the caller hangs up"
caller e 05
caller f 06
check "both sessions become active" active e
check "(the second too)" active f
st=$(api /api/call/request "$(request_body "${DEV_MAC[e]}" "${DEV_MAC[f]}" Eve)")
check "the first request rings" jq_is "$(answer)" .status pending
st=$(api /api/call/request "$(request_body "${DEV_MAC[f]}" "${DEV_MAC[e]}" Frank)")
check "the second, the other way round, is bridged" jq_is "$(answer)" .status bridged
check "the first caller gets call_accepted from the second" \
    wait_for_line "$GW_TMP/e.out" 'call_accepted from 02:00:00:00:0c:06'
check "audio reaches both" wait_for_line "$GW_TMP/f.out" 'call audio: first frame'
check "(and the other way)" wait_for_line "$GW_TMP/e.out" 'call audio: first frame'
kill -INT "${DEV_PID[e]}"
rf=$(result f)
check "the caller hung up: the callee gets its goodbye" \
    jq -e '.goodbye_received == true and .call.rx_bad == 0 and .call.rx_gaps == 0' <<<"$rf"
check "logged as a hang-up" wait_for_line "$GW_LOG" 'call=3 .*call ended: hangup'
result e >/dev/null

echo "# 9. a stock callee cannot be woken; the caller leaves while ringing"
caller i 09
DEV_MAC[j]=02:00:00:00:0c:0a
DEV_ID[j]=GID_test@@@02_00_00_00_0c_0a@@@call-j
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "${DEV_ID[j]}" --json --idle >"$GW_TMP/j.out" \
    2>>"$GW_TMP/devices.err" &
DEV_PID[j]=$!
peer_log "$GW_TMP/j.out"
check "the caller's session becomes active" active i
check "the stock device is online" online j
st=$(api /api/call/request "$(request_body "${DEV_MAC[i]}" "${DEV_MAC[j]}" Ivy)")
check "request: pending" jq_is "$(answer)" .status pending
check "the stock firmware refuses the unknown tool: counted" \
    wait_until 20 metric_at_least hybridgw_calls_wakeups_failed_total 1
st=$(api /api/call/accept "{\"mac\":\"${DEV_MAC[j]}\"}")
check "an accept for a callee without a voice session: error" \
    jq -e '.status == "error" and (.message | test("no active voice session"))' <<<"$(answer)"
check "the call still rings" test "$(metric hybridgw_calls_ringing)" = 1
kill -INT "${DEV_PID[i]}"
ri=$(result i)
check "the caller left with its own goodbye" jq_is "$ri" .goodbye_sent true
check "the call ends: caller_left" wait_for_line "$GW_LOG" 'call=4 .*call ended: caller_left'
st=$(api /api/call/accept "{\"mac\":\"${DEV_MAC[j]}\"}")
check "then an accept finds nothing pending" jq_is "$(answer)" .status no_pending
rj=$(end_device j)
check "the stock device saw no goodbye and no call audio" \
    jq -e '.goodbye_received == false and .downlink.datagrams == 0' <<<"$rj"

echo "# 10. two online devices with one MAC: refused as ambiguous, nobody woken"
caller k 0b
device l1 0c --idle
device l2 0c --idle
check "the caller's session becomes active" active k
check "the first holder of the MAC is online" online l1
check "the second holder of the MAC is online" online l2
started=$(metric hybridgw_calls_started_total)
st=$(api /api/call/request "$(request_body "${DEV_MAC[k]}" 02:00:00:00:0c:0c Kim)")
check "a request for the shared MAC: 409" test "$st" = 409
check "status ambiguous, saying how many devices have it" \
    jq -e '.status == "ambiguous" and (.message | test("2 devices"))' <<<"$(answer)"
st=$(api /api/call/request "$(request_body 02:00:00:00:0c:0c "${DEV_MAC[k]}" Lee)")
check "the shared MAC as the caller: 409 as well" test "$st" = 409
st=$(api /api/call/accept '{"mac":"02:00:00:00:0c:0c"}')
check "an accept for the shared MAC: 409" test "$st" = 409
check "no call was started" test "$(metric hybridgw_calls_started_total)" = "$started"
check "nothing rings" test "$(metric hybridgw_calls_ringing)" = 0
check "counted" test "$(metric 'hybridgw_calls_answers_total{route="request",status="ambiguous"}')/$(metric 'hybridgw_calls_answers_total{route="accept",status="ambiguous"}')" = 2/1
check "logged" wait_for_line "$GW_LOG" 'call request .*409 ambiguous: 2 devices'
check "the caller's conversation goes on" \
    not grep -q "dev=${DEV_ID[k]} .*session ended" "$GW_LOG"
r1=$(end_device l1)
r2=$(end_device l2)
check "neither holder of the MAC was woken" \
    test "$(jq .call.wakeups <<<"$r1")/$(jq .call.wakeups <<<"$r2")" = 0/0
check "neither saw a wake-up" \
    not grep -q 'self.remote_wakeup' "$GW_TMP/l1.out" "$GW_TMP/l2.out"
kill -INT "${DEV_PID[k]}"
check "the caller leaves with its own goodbye" jq_is "$(result k)" .goodbye_sent true

echo "# 11. shutdown during a bridged call: both get a goodbye, all is freed"
caller g 07
device h 08 --idle
check "the caller's session becomes active" active g
check "the callee is online" online h
st=$(api /api/call/request "$(request_body "${DEV_MAC[g]}" "${DEV_MAC[h]}" Gus)")
check "ringing" jq_is "$(answer)" .status pending
check "the callee is woken and talks" active h
st=$(api /api/call/accept "{\"mac\":\"${DEV_MAC[h]}\"}")
check "bridged" jq_is "$(answer)" .status bridged
check "audio flows" wait_for_line "$GW_TMP/h.out" 'call audio: first frame'
kill -TERM "$GW_PID"
wait_for_exit "$GW_PID"
check "the gateway stops cleanly" test "$EXIT_CODE" = 0
check "the caller gets a goodbye" jq_is "$(result g)" .goodbye_received true
check "the callee gets a goodbye" \
    wait_for_line "$GW_TMP/h.out" '< goodbye: channel closed'
check "ended as shutdown, then the call as a hang-up" \
    wait_for_line "$GW_LOG" 'call=5 .*call ended: hangup'
check "no sanitizer report" not grep -qE 'Sanitizer|runtime error' "$GW_LOG"
end_device h >/dev/null

finish
