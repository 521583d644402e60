#!/usr/bin/env bash
# The data plane end to end on real parts, all on 127.0.0.1: a mosquitto
# broker, the gateway, mock backends (routed by device group) and
# simulated devices that hold the gateway to the firmware's checks.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

start_broker broker || bail "the broker starts"
start_backend normal --turn-frames 10 --tts-frames 10
normal_port=$BACKEND_PORT normal_events=$BACKEND_EVENTS
start_backend closer --turn-frames 10 --tts-frames 5 --close-after-turns 1
closer_port=$BACKEND_PORT
start_backend silent --no-hello
silent_port=$BACKEND_PORT silent_events=$BACKEND_EVENTS
start_backend long --turn-frames 50 --tts-frames 5
long_port=$BACKEND_PORT long_events=$BACKEND_EVENTS

url() { echo "ws://127.0.0.1:$1/xiaozhi/v1/?from=mqtt_gateway"; }
cfg=$GW_TMP/gw.json
udp_port=$(free_port --udp)
cat >"$cfg" <<JSON
{
  "instance": "it",
  "mqtt": { "host": "127.0.0.1", "port": $BROKER_PORT, "keepalive": 10 },
  "udp": { "bind": "127.0.0.1", "port": $udp_port, "public_host": "127.0.0.1" },
  "backends": [
    { "name": "normal", "url": "$(url "$normal_port")" },
    { "name": "closer", "url": "$(url "$closer_port")" },
    { "name": "silent", "url": "$(url "$silent_port")" },
    { "name": "long", "url": "$(url "$long_port")" }
  ],
  "routes": [
    { "match": { "groups": ["GID_close"] }, "backends": ["closer"] },
    { "match": { "groups": ["GID_silent"] }, "backends": ["silent"] },
    { "match": { "groups": ["GID_long"] }, "backends": ["long"] },
    { "match": {}, "backends": ["normal"] }
  ],
  "http": { "port": 0 },
  "limits": { "backend_hello_timeout_ms": 2000, "max_sessions": 1000 },
  "log": { "level": "debug" }
}
JSON
start_gateway gw "$cfg" || bail "the gateway starts"
peer_log "$GW_TMP/devices.err"

n_dev=0
# new_id GROUP: sets ID to a fresh client id in that group.
new_id() {
    n_dev=$((n_dev + 1))
    ID=$(printf '%s@@@02_00_00_00_%02x_%02x@@@dev-%d' "$1" $((n_dev / 256)) \
        $((n_dev % 256)) "$n_dev")
}

# device CLIENT_ID ARGS...: lib.sh's plain_device.
device() { plain_device "$@"; }

# backend_event FILE SID EV: waits for and prints that backend event.
backend_event() {
    local file=$1 sid=$2 ev=$3
    wait_for_line "$file" "\"ev\":\"$ev\".*\"sid\":\"$sid\"" >/dev/null &&
        grep "\"ev\":\"$ev\"" "$file" | grep "\"sid\":\"$sid\"" | tail -n 1
}

echo "# 1. a whole conversation, audio bit-exact both ways"
new_id GID_test
r=$(device "$ID" --turns 1 --fast)
device_ok "the device completes a conversation" "$r"
sid=$(jq -r .session_id <<<"$r")
close=$(backend_event "$normal_events" "$sid" close)
tts=$(backend_event "$normal_events" "$sid" tts)
check "uplink arrives bit-exact at the backend" \
    jq_is "$close" .uplink.sha256 "$(jq -r .uplink.sha256 <<<"$r")"
check "downlink is played bit-exact by the device" \
    jq_is "$tts" .sha256 "$(jq -r .downlink.sha256 <<<"$r")"
check "every downlink frame is played" jq_is "$r" .downlink.played 10
check "no downlink frame broke a firmware check" \
    jq_is "$r" '[.downlink.drops[]] | add' 0
echo "# 2. the device's goodbye closes the backend WebSocket"
check "the gateway closed the WebSocket normally" jq_is "$close" .code 1000
check "the close came from the gateway" jq_is "$close" .by peer

echo "# 3. a backend close gives the device a goodbye with its session id"
new_id GID_close
r=$(device "$ID" --turns 1 --fast --end server)
device_ok "the device ends on the server's goodbye" "$r"
check "the goodbye carried the current session id" \
    jq_is "$r" .goodbye_received true

echo "# 4. a backend that never says hello"
new_id GID_silent
r=$(device "$ID" --turns 1 --fast --hello-timeout 5000)
check "the device gets no server hello" jq_is "$r" .ok false
check "the gateway ends the session on its hello timeout" \
    wait_for_line "$GW_LOG" 'session ended: backend hello timeout'
check "and closes that WebSocket" \
    wait_for_line "$silent_events" '"ev":"close"'

echo "# 5. replayed and forged datagrams"
new_id GID_test
r=$(device "$ID" --turns 1 --fast --frames 12 \
    --replay-every 3 --forge-every 4)
device_ok "the conversation still succeeds" "$r"
sid=$(jq -r .session_id <<<"$r")
close=$(backend_event "$normal_events" "$sid" close)
check "the backend got each uplink packet exactly once" \
    jq_is "$close" .uplink.frames "$(jq -r .uplink.packets <<<"$r")"
check "and bit-exact" \
    jq_is "$close" .uplink.sha256 "$(jq -r .uplink.sha256 <<<"$r")"
check "the forgeries did not move the downlink" jq_is "$r" .downlink.played 10
stats=$(gateway_stats)
replayed=$(jq -r .uplink.replayed <<<"$r")
drops=$(grep -o 'udp_drop\[replay\]=[0-9]*' <<<"$stats" | cut -d= -f2)
check "replays are dropped and counted ($drops >= $replayed)" \
    test "${drops:-0}" -ge "$replayed"
forged=$(jq -r .uplink.forged <<<"$r")
fdrops=$(grep -oE 'udp_drop\[(opus|address|ahead)\]=[0-9]*' <<<"$stats" |
    cut -d= -f2 | paste -sd+ | bc)
check "forgeries are dropped and counted (${fdrops:-0} >= $forged)" \
    test "${fdrops:-0}" -ge "$forged"

echo "# 6. malformed and oversized JSON"
bad=GID_bad@@@02_00_00_00_ff_01@@@bad
pub() { mosquitto_pub -p "$BROKER_PORT" -t "devices/$bad/up" "$@"; }
pub -m 'not json at all'
pub -m '{"type":"listen","state":"start"'
printf '{"type":"listen","text":"\xff\xfe"}' >"$GW_TMP/utf8.bin"
pub -f "$GW_TMP/utf8.bin"
head -c 9000 /dev/zero | tr '\0' a | sed 's/^/{"type":"listen","x":"/; s/$/"}/' \
    >"$GW_TMP/big.json"
pub -f "$GW_TMP/big.json"
pub -m '{"type":"hello","version":"three","transport":"udp"}'
mosquitto_pub -p "$BROKER_PORT" -t 'devices/no-delimiters/up' \
    -m '{"type":"hello","version":3,"transport":"udp"}'
check "the last of them is refused" \
    wait_for_line "$GW_LOG" 'message refused \(topic\)'
stats=$(gateway_stats)
for what in malformed too_big bad_hello topic; do
    check "refusals are counted: $what" grep -qE "refused\[$what\]=[1-9]" \
        <<<"$stats"
done
check "the gateway is still running" kill -0 "$GW_PID"
new_id GID_test
r=$(device "$ID" --turns 1 --fast)
device_ok "and other devices are not affected" "$r"

echo "# 7. a second hello replaces the session cleanly"
dup=GID_test@@@02_00_00_00_ff_02@@@dup
hello='{"type":"hello","version":3,"transport":"udp","features":{"mcp":true},"audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}'
# The gateway's MCP discovery talks to the device on this topic too, so
# the hellos are counted among whatever else arrives.
mosquitto_sub -p "$BROKER_PORT" -t "devices/$dup/down" -W "$GW_WAIT_S" \
    >"$GW_TMP/dup.out" &
sub=$!
peer_log "$GW_TMP/dup.out"
# The broker logs a subscription (log_type subscribe) once it is in place.
wait_for_line "$GW_TMP/broker.log" " devices/$dup/down\$" >/dev/null
mosquitto_pub -p "$BROKER_PORT" -t "devices/$dup/up" -m "$hello"
# The second hello once the first session is up, so that both are
# answered whatever the machine's load.
wait_for_line "$GW_TMP/dup.out" '"type":"hello"' >/dev/null
mosquitto_pub -p "$BROKER_PORT" -t "devices/$dup/up" -m "$hello"
wait_for_lines "$GW_TMP/dup.out" '"type":"hello"' 2 >/dev/null
stop_pid "$sub" >/dev/null
sids=$(jq -r 'select(.type == "hello") | .session_id' "$GW_TMP/dup.out")
check "each hello got exactly one server hello" \
    test "$(wc -l <<<"$sids")" -eq 2
sid1=$(head -n 1 <<<"$sids")
sid2=$(tail -n 1 <<<"$sids")
check "with two different sessions" test "$sid1" != "$sid2"
check "the first WebSocket is closed" backend_event "$normal_events" "$sid1" close
check "the first session ended as replaced" \
    grep -q "dev=$dup sid=$sid1.*session ended: replaced by a new hello" "$GW_LOG"
mosquitto_pub -p "$BROKER_PORT" -t "devices/$dup/up" \
    -m "{\"session_id\":\"$sid2\",\"type\":\"listen\",\"state\":\"start\",\"mode\":\"auto\"}"
check "the second session is alive after the first closed" \
    wait_for_line "$normal_events" "\"ev\":\"listen\".*\"sid\":\"$sid2\""
check "and it was never ended" not grep -q "sid=$sid2.*session ended" "$GW_LOG"
mosquitto_pub -p "$BROKER_PORT" -t "devices/$dup/up" \
    -m "{\"session_id\":\"$sid2\",\"type\":\"goodbye\"}"

echo "# 8. the broker restarts in the middle of a conversation"
new_id GID_long
id=$ID
device "$id" --turns 1 --frames 50 >"$GW_TMP/long.json" &
dev=$!
peer_log "$GW_TMP/long.json"
check "the long conversation starts" \
    wait_for_line "$GW_LOG" "dev=$id sid=.* session active"
stop_pid "$BROKER_PID"
check "the gateway sees the broker go" \
    wait_for_line "$GW_LOG" 'broker link down'
check "the broker restarts" start_broker broker "$BROKER_PORT"
# Its first connection logged the same line: the second one counts.
check "the gateway reconnects" wait_for_lines "$GW_LOG" 'broker link up' 2
check "the device ends" wait_for_exit "$dev"
r=$(tail -n 1 "$GW_TMP/long.json")
device_ok "the conversation completes across the restart" "$r"
check "all its uplink audio reached the backend" \
    jq_is "$(backend_event "$long_events" "$(jq -r .session_id <<<"$r")" turn)" \
    .frames 50

echo "# 9. 200 devices at once"
# One whole turn each (not a clock: a clock would cut replies short on a
# loaded machine and leave frames unplayed that were not lost).
"$SIM" load --devices 200 --broker "127.0.0.1:$BROKER_PORT" --subscribing \
    --publish-topic 'devices/{client_id}/up' --turns 1 --duration 60 \
    --stats-json "$GW_TMP/load.json" >"$GW_TMP/load.out" 2>&1
rc=$?
peer_log "$GW_TMP/load.out"
check "all 200 devices complete (exit $rc)" test "$rc" -eq 0
load=$(cat "$GW_TMP/load.json")
check "200 hellos answered" jq_is "$load" .devices.hellos_answered 200
check "no downlink lost" jq_is "$load" .downlink.lost 0
# A frame that overtakes its "tts start" (which goes through the broker)
# is dropped by the firmware as idle: limits.tts_start_guard_ms makes that
# rare, but with 200 turns at once on a loaded machine the broker and the
# simulator's own loop (it may read a socket's audio before another
# socket's JSON) can lose the race. Those are the only frames allowed not
# to play.
check "every other downlink frame played, none overflowed the queue" \
    jq_is "$load" '.downlink.played + .downlink.drops.idle ==
                   .downlink.datagrams and .downlink.drops.queue == 0' true
check "most frames played" \
    jq_is "$load" '.downlink.played * 2 >= .downlink.datagrams' true
jq -c '{devices, downlink}' <<<"$load" | sed 's/^/# /'

echo "# 10. shutdown: every device gets its goodbye"
new_id GID_long
id=$ID
device "$id" --turns 1 --frames 0 --end server >"$GW_TMP/drain.json" &
dev=$!
peer_log "$GW_TMP/drain.json"
check "a conversation is running" \
    wait_for_line "$GW_LOG" "dev=$id sid=.* session active"
stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "$EXIT_CODE" -eq 0
check "the device ends" wait_for_exit "$dev"
r=$(tail -n 1 "$GW_TMP/drain.json")
check "the device got a goodbye with its session id" \
    jq_is "$r" .goodbye_received true
check "the gateway logged no error" \
    not grep -E ' error |ERROR|AddressSanitizer' "$GW_LOG"

finish
