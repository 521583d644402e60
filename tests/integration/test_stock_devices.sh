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

stop_pid "$GW_PID"
finish
