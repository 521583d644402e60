#!/usr/bin/env bash
# Stock firmware on a standard broker, gateway side: Debian's mosquitto
# loading the built plugin, the gateway on its own account, simulated
# devices that never subscribe (and one that does). Checks that presence
# reaches the gateway (x-forwarded-for, a session ended at once when its
# device drops) and that devices stay usable across a gateway restart.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

start_plugin_broker broker || bail "broker with the plugin starts"
start_backend backend --turn-frames 10 --tts-frames 8
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg"
start_gateway gw "$cfg" || bail "gateway starts"

n_dev=0
# new_id: sets ID to a fresh device client id.
new_id() {
    n_dev=$((n_dev + 1))
    ID=$(printf 'GID_stock@@@02_00_00_00_00_%02x@@@stock-%d' "$n_dev" "$n_dev")
}

peer_log "$GW_TMP/devices.err"
# device CLIENT_ID ARGS...: a stock device (device-server, no
# subscription, xiaozhi password); prints its JSON result line.
device() {
    local id=$1
    shift
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
        --client-id "$id" --json "$@" 2>>"$GW_TMP/devices.err" |
        tail -n 1
}

# connect_event CLIENT_ID: the backend's connect event of that device.
connect_event() {
    local mac
    mac=$(cut -d@ -f4 <<<"$1" | tr _ :)
    wait_for_line "$BACKEND_EVENTS" "\"ev\":\"connect\".*$mac" >/dev/null &&
        grep '"ev":"connect"' "$BACKEND_EVENTS" | grep "$mac" | tail -n 1
}

echo "# 1. a stock device: a whole conversation through the plugin"
new_id
r=$(device "$ID" --turns 2 --fast)
device_ok "the stock device completes two turns" "$r"
check "one server hello" jq_is "$r" .hellos 1
check "downlink audio played" jq -e '.downlink.played > 0' <<<"$r"
ev=$(connect_event "$ID")
check "the backend hears the device's address (x-forwarded-for)" \
    jq_is "$ev" '.headers["x-forwarded-for"]' 127.0.0.1

echo "# 2. a subscribing device gets every message exactly once"
new_id
r=$(device "$ID" --turns 2 --fast --subscribing)
device_ok "the subscribing device completes two turns" "$r"
check "one server hello, no duplicate" \
    jq -e '.hellos == 1 and .hello_duplicate == 0' <<<"$r"
check "one stt, one tts start and one tts stop per turn" \
    jq -e '.messages.stt == 2 and .messages.tts_start == 2 and
           .messages.tts_stop == 2' <<<"$r"

echo "# 3. a device that drops its connection ends its session at once"
new_id
drop_id=$ID
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "$drop_id" --frames 0 --turns 1 --turn-timeout 60000 \
    >"$GW_TMP/drop.out" 2>&1 &
drop_pid=$!
peer_log "$GW_TMP/drop.out"
check "its session becomes active" \
    wait_for_line "$GW_LOG" "dev=$drop_id.*session active"
kill -KILL "$drop_pid"
wait "$drop_pid" 2>/dev/null
# udp_idle_timeout_ms is 120 s: only presence can end it this soon.
check "the gateway ends it: device offline" \
    wait_for_line "$GW_LOG" "dev=$drop_id.*session ended: device offline"
drop_sid=$(connect_event "$drop_id" | jq -r .sid)
check "and closes its backend WebSocket" \
    wait_for_line "$BACKEND_EVENTS" "\"ev\":\"close\".*\"sid\":\"$drop_sid\""
check "without a goodbye to a device that is gone" \
    not grep -q "dev=$drop_id.*goodbye" "$GW_LOG"

echo "# 4. the gateway restarts while devices stay connected"
new_id
stay_id=$ID
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "$stay_id" --sessions 2 --frames 0 --turns 1 --fast --json \
    >"$GW_TMP/stay.out" 2>&1 &
stay_pid=$!
peer_log "$GW_TMP/stay.out"
check "the device's first session is active" \
    wait_for_line "$GW_LOG" "dev=$stay_id.*session active"
stop_pid "$GW_PID"
check "the old gateway drained with exit 0" test "$EXIT_CODE" -eq 0
check "the device got the goodbye and sleeps, still connected" \
    wait_for_line "$GW_TMP/stay.out" "waiting for a wake-up"
check "the broker saw no disconnect of the device" \
    not grep -q "Client $stay_id .*disconnected" "$GW_TMP/broker.log"
start_gateway gw2 "$cfg" || not_ok "the new gateway starts"
# Retained presence tells the new instance who is online.
check "the new gateway learns the device is online from retained presence" \
    wait_for_line "$GW_LOG" "dev=$stay_id.*online from 127.0.0.1"
kill -USR1 "$stay_pid"
check "the device finishes its second conversation" wait_for_exit "$stay_pid"
check "with exit 0" test "${EXIT_CODE:-1}" -eq 0
r=$(tail -n 1 "$GW_TMP/stay.out")
check "two sessions on one MQTT connection" jq_is "$r" .sessions 2
check "the second one had its replies" \
    jq -e '.messages.tts_stop >= 1 and .downlink.played > 0' <<<"$r"

echo "# 5. nothing refused along the way"
stats=$(gateway_stats)
echo "# $stats"
check "no refusals" not grep -q 'refused\[' <<<"$stats"

# ---- bad input from devices (mosquitto_pub logged in as a device) ----
USER_NAME=eyJpcCI6IjEyNy4wLjAuMSJ9 # base64 of {"ip":"127.0.0.1"}
HELLO='{"type":"hello","version":3,"transport":"udp","audio_params":{"format":"opus","sample_rate":16000,"channels":1,"frame_duration":60}}'
# as_device CLIENT_ID ARGS...: mosquitto_pub on the device topic as that
# device, with its xiaozhi password.
as_device() {
    local id=$1 pass
    shift
    pass=$(printf '%s' "$id|$USER_NAME" |
        openssl dgst -sha256 -hmac "$PLUGIN_KEY" -binary | base64)
    mosquitto_pub -p "$BROKER_PORT" -i "$id" -u "$USER_NAME" -P "$pass" \
        -t device-server "$@"
}
# stat NAME: one counter of the gateway's stats line (0 when absent).
stat() {
    local v
    v=$(gateway_stats | grep -o " $1=[0-9]*" | cut -d= -f2)
    echo "${v:-0}"
}
# stat_is NAME N: true when that counter is N.
stat_is() { [ "$(stat "$1")" = "$2" ]; }
# connects CLIENT_ID: the backend's connect events of that device.
connects() {
    local mac
    mac=$(cut -d@ -f4 <<<"$1" | tr _ :)
    grep '"ev":"connect"' "$BACKEND_EVENTS" | grep -c "$mac"
}

echo "# 6. 64 MiB from a device never reaches the gateway"
new_id
big_id=$ID
head -c $((64 << 20)) /dev/zero | tr '\0' x >"$GW_TMP/huge.bin"
as_device "$big_id" -f "$GW_TMP/huge.bin" 2>>"$GW_TMP/devices.err"
rm -f "$GW_TMP/huge.bin"
# The device's next message is the marker: it comes after the big one.
as_device "$big_id" -m '{"type":"listen","state":"detect"}'
check "the device's next message arrives" \
    wait_for_line "$GW_LOG" "dev=$big_id.*listen without a session"
check "nothing of the 64 MiB reached the gateway (no refusal, no line)" \
    not grep -q "dev=$big_id.*refused" "$GW_LOG"
check "the broker is up" kill -0 "$BROKER_PID"
check "the gateway is up" kill -0 "$GW_PID"
# max_packet_size refuses it at its header: the broker never holds it.
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$BROKER_PID/status")
check "the broker's peak memory stayed small (${hwm:-?} kB < 32768)" \
    test "${hwm:-99999999}" -lt 32768
new_id
r=$(device "$ID" --turns 1 --fast)
device_ok "another device still holds a conversation" "$r"

echo "# 7. 300 hellos at once from one device: the hello bucket's worth"
new_id
flood_id=$ID
started=$(stat started)
refused=$(stat 'refused\[hello_rate\]')
for _ in $(seq 300); do echo "$HELLO"; done >"$GW_TMP/hellos.txt"
t0=$SECONDS
# QoS 1: the client waits for each to be taken before it disconnects.
as_device "$flood_id" -q 1 -l <"$GW_TMP/hellos.txt"
# every_hello: true once all 300 are either a session or a refusal.
every_hello() {
    local s r
    s=$(stat started)
    r=$(stat 'refused\[hello_rate\]')
    [ $((s - started + r - refused)) -ge 300 ]
}
check "the gateway takes all 300" wait_until "$GW_WAIT_S" every_hello
n=$(($(stat started) - started))
# limits.hello_burst 20, plus what 20 a minute refills while they arrive.
bound=$((20 + (SECONDS - t0 + 1) / 3 + 1))
gw_note "sessions started: $n, backend connections: $(connects "$flood_id")"
check "at most the bucket's worth of sessions ($n <= $bound)" test "$n" -le "$bound"
check "at most as many backend connections" \
    test "$(connects "$flood_id")" -le "$bound"
check "the rest refused as hello_rate" \
    test $(($(stat 'refused\[hello_rate\]') - refused)) -ge $((300 - bound))
check "refusal lines rate-limited (<= 6)" \
    test "$(grep -c "dev=$flood_id.*refused (hello_rate)" "$GW_LOG")" -le 6

echo "# 8. 5,000 bad publishes from one device: counted, a few lines"
new_id
bad_id=$ID
malformed=$(stat 'refused\[malformed\]')
for i in $(seq 5000); do echo "not json $i"; done >"$GW_TMP/bad.txt"
as_device "$bad_id" -q 1 -l <"$GW_TMP/bad.txt"
check "all 5000 are counted" \
    wait_until "$GW_WAIT_S" stat_is 'refused\[malformed\]' $((malformed + 5000))
lines=$(grep -c "dev=$bad_id" "$GW_LOG")
refusals=$(grep -c "dev=$bad_id.*message refused" "$GW_LOG")
gw_note "log lines about the device: $lines, of them refusals: $refusals"
# A burst of 5, then one every 10 s; besides them presence lines.
check "refusals logged in a few lines ($refusals <= 6)" test "$refusals" -le 6
check "the device in a few lines at all ($lines <= 10)" test "$lines" -le 10

echo "# 9. a hello retained before a gateway restart starts nothing"
new_id
ret_id=$ID
as_device "$ret_id" -r -m "$HELLO"
check "the live hello was heard" \
    wait_for_line "$GW_LOG" "dev=$ret_id.*session ended: device offline"
before=$(connects "$ret_id")
stop_pid "$GW_PID"
start_gateway gw3 "$cfg" || not_ok "the gateway starts again"
# Retained messages come at the subscribe, before any later live one.
new_id
r=$(device "$ID" --turns 1 --fast)
device_ok "a device after the restart holds a conversation" "$r"
check "no session for the retained hello" not grep -q "dev=$ret_id" "$GW_LOG"
check "no backend connection for it" test "$(connects "$ret_id")" -eq "$before"
stop_pid "$GW_PID"

echo "# 10. the gateway alone (a broker without the plugin)"
stop_pid "$BROKER_PID"
unset GW_MQTT_USER GW_MQTT_PASS
start_broker plain || bail "a plain broker starts"
new_id
ret_id=$ID
mosquitto_pub -p "$BROKER_PORT" -r -t "devices/$ret_id/up" -m "$HELLO"
new_id
off_id=$ID
mosquitto_pub -p "$BROKER_PORT" -r -t "devices/$off_id/presence" \
    -m '{"state":"offline","conn":3}'
cfg2=$GW_TMP/gw-plain.json
write_gateway_config "$cfg2"
for round in 1 2; do
    start_gateway "plain$round" "$cfg2" || not_ok "gateway $round starts"
    check "round $round: the retained hello is refused as retained" \
        wait_for_line "$GW_LOG" "dev=$ret_id.*message refused .retained."
    mosquitto_pub -p "$BROKER_PORT" -t "devices/$off_id/up" -m "$HELLO"
    check "round $round: a hello of a device said offline is refused" \
        wait_for_line "$GW_LOG" "dev=$off_id.*message refused .offline."
    stats=$(gateway_stats)
    check "round $round: no session started" grep -q ' started=0 ' <<<"$stats"
    check "round $round: both counted" \
        grep -q 'refused\[retained\]=1 .*refused\[offline\]=1' <<<"$stats"
    stop_pid "$GW_PID"
done
check "no backend connection for either" \
    test "$(($(connects "$ret_id") + $(connects "$off_id")))" -eq 0
finish
