#!/usr/bin/env bash
# Faults in the middle of conversations, with the real parts: mosquitto
# with the plugin, the gateway, mock backends and stock devices.
#   a) the broker restarts during a reply: what the gateway had for the
#      device meanwhile arrives after the reconnect, in order;
#   b) a backend is killed: its device gets a goodbye, the counters
#      balance, a device on another backend does not notice, a new hello
#      works once the backend is back;
#   c) the gateway is killed with -9 and restarted: devices are served
#      again and /api/devices shows who is online;
#   d) a reload with a broken file keeps the running config.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

# The plugin lets the gateway's will through to its status topic alone.
start_plugin_broker broker "plugin_opt_gateway_status_topic hybridgw/test/status" ||
    bail "broker with the plugin starts"
BCONF=$GW_TMP/broker.conf
# The main backend: a long paced reply (60 frames, 3.6 s) so that the
# broker can go and come back inside it.
start_backend main --turn-frames 25 --tts-frames 60
MAIN_PORT=$BACKEND_PORT MAIN_PID=$BACKEND_PID MAIN_EVENTS=$BACKEND_EVENTS
start_backend other --turn-frames 10 --tts-frames 8
OTHER_PORT=$BACKEND_PORT

OTHER_ID='GID_faults@@@02_00_00_00_01_01@@@other'
HTTP_PORT=$(free_port)
TOKEN=faults-test-token
cfg=$GW_TMP/gw.json
BACKEND_PORT=$MAIN_PORT # the first backend, "mock"
write_gateway_config "$cfg" "\"routes\": [
    { \"match\": { \"client_ids\": [\"$OTHER_ID\"] }, \"backends\": [\"other\"] },
    { \"backends\": [\"mock\"] } ]"
# A second backend and the HTTP API (write_gateway_config leaves it off).
jq --arg url "ws://127.0.0.1:$OTHER_PORT/xiaozhi/v1/?from=mqtt_gateway" \
    --argjson port "$HTTP_PORT" --arg token "$TOKEN" \
    '.backends += [{name: "other", url: $url}] |
     .http = {port: $port, listen: "127.0.0.1", token: $token} |
     .mqtt.status_topic = "hybridgw/test/status"' \
    "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
start_gateway gw "$cfg" || bail "gateway starts"

peer_log "$GW_TMP/devices.err"
# device CLIENT_ID OUT ARGS...: a stock device in the background, its
# transcript in $GW_TMP/OUT.out (the JSON result is the last line); sets
# DEV_PID.
device_bg() {
    local id=$1 out=$GW_TMP/$2.out
    shift 2
    peer_log "$out"
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
        --client-id "$id" --json --log-level info "$@" >"$out" 2>&1 &
    DEV_PID=$!
}

# result NAME: the JSON result line of a device that has exited.
result() {
    grep '^{' "$GW_TMP/$1.out" | tail -n 1
}

# in_order FILE PATTERN...: true when FILE has a line for each PATTERN
# (fixed strings), in that order.
in_order() {
    local file=$1 line=0 n
    shift
    for p in "$@"; do
        n=$(tail -n "+$((line + 1))" "$file" | grep -nF -- "$p" | head -n 1 |
            cut -d: -f1)
        [ -n "$n" ] || {
            gw_note "no '$p' after line $line of $file"
            return 1
        }
        line=$((line + n))
    done
}

# gateway_status: the gateway's own retained state, as the broker holds it.
gateway_status() {
    mosquitto_sub -p "$BROKER_PORT" -u "$PLUGIN_GW_USER" -P "$PLUGIN_GW_PASS" \
        -i "faults-status-$RANDOM" -t hybridgw/test/status -C 1 -W 2 \
        2>/dev/null | jq -r .state
}

# status_is STATE: true when the retained state is STATE.
status_is() {
    [ "$(gateway_status)" = "$1" ]
}

api() {
    curl -fsS --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "http://127.0.0.1:$HTTP_PORT$1"
}

echo "# a) the broker restarts while the backend replies"
A_ID='GID_faults@@@02_00_00_00_00_0a@@@restart'
# Endless speech: the backend ends the turn after 25 frames (1.5 s).
device_bg "$A_ID" a --turns 1 --frames 0 --turn-timeout 40000
a_pid=$DEV_PID
wait_for_line "$MAIN_EVENTS" '"ev":"listen"' ||
    bail "a: the device is listening (the backend has its listen)"
stop_pid "$BROKER_PID"
check "a: the gateway sees the broker go" \
    wait_for_line "$GW_LOG" 'broker link down'
check "a: the backend's reply starts while the broker is away" \
    wait_for_line "$MAIN_EVENTS" '"ev":"turn"'
# stt, tts start, llm, sentence_start: held for the device.
check "a: the gateway holds the reply's messages" \
    wait_for_lines "$GW_LOG" "dev=$A_ID.*message held" 4 10
run_mosquitto broker "$BCONF" "$BROKER_PORT" || bail "a: the broker restarts"
BROKER_PID=$MOSQ_PID
check "a: the held messages go out once the device is back" \
    wait_for_line "$GW_LOG" "dev=$A_ID.*held messages? sent" 15
check "a: the device finishes its turn" wait_for_exit "$a_pid" 30
r=$(result a)
# Audio keeps flowing over UDP while the broker is away: the session holds
# it while its tts start waits in the outbox, so none of it overtakes the
# late tts start (the firmware would drop it).
device_ok "a: the device's turn is whole" "$r"
check "a: every reply frame played, none lost" \
    jq -e '.downlink.lost == 0 and .downlink.played == 60' <<<"$r"
tts_sha=$(jq -r 'select(.ev == "tts" and .conn == 1) | .sha256' "$MAIN_EVENTS")
check "a: the device played the backend's reply as sent" \
    jq_is "$r" .downlink.sha256 "$tts_sha"
check "a: the session held its audio for the late tts start" \
    grep -q "dev=$A_ID.*tts start sent after .*: downlink audio goes" "$GW_LOG"
check "a: stt, tts start, sentence_start and tts stop arrived in order" \
    in_order "$GW_TMP/a.out" '< stt' '< tts start' '< tts sentence_start' \
    '< tts stop'
check "a: each exactly once" \
    jq -e '.messages.stt == 1 and .messages.tts_start == 1 and
           .messages.tts_stop == 1' <<<"$r"
check "a: reply audio played after the late tts start" \
    jq -e '.downlink.played > 0' <<<"$r"
check "a: nothing was dropped for age" \
    not grep -q "dev=$A_ID.*held messages\? dropped" "$GW_LOG"

echo "# a2) the outbox is bounded: 2 messages, 1 s"
jq '.limits = {outbox_messages: 2, outbox_age_ms: 1000}' "$cfg" >"$cfg.small"
cp "$cfg" "$cfg.normal"
cp "$cfg.small" "$cfg"
reloads=$(count_lines "$GW_LOG" 'reloaded ')
kill -HUP "$GW_PID"
wait_for_lines "$GW_LOG" 'reloaded ' $((reloads + 1)) ||
    bail "a2: the gateway reloads small outbox limits"
A2_ID='GID_faults@@@02_00_00_00_00_a2@@@bounded'
device_bg "$A2_ID" a2 --turns 1 --frames 0 --no-reply --turn-timeout 20000 \
    --end none
a2_pid=$DEV_PID
wait_for_lines "$MAIN_EVENTS" '"ev":"listen"' 2 ||
    bail "a2: the device is listening"
ups=$(count_lines "$GW_LOG" 'broker link up')
stop_pid "$BROKER_PID"
check "a2: two messages are held" \
    wait_for_lines "$GW_LOG" "dev=$A2_ID.*message held" 2 10
check "a2: the rest are refused, with one warning" \
    wait_for_line "$GW_LOG" 'outbox full \(2 messages, [0-9]+ bytes\)' 10
# The age bound is a span of time: nothing but time can show it passed.
sleep 1.2
run_mosquitto broker "$BCONF" "$BROKER_PORT" ||
    bail "a2: the broker restarts"
BROKER_PID=$MOSQ_PID
check "a2: what waited past 1 s is dropped with a warning" \
    wait_for_line "$GW_LOG" "dev=$A2_ID.*2 held messages dropped: older than 1000 ms" 15
# The drop may come from a publish before the link is back: the next
# step's hellos need the gateway subscribed again.
check "a2: the gateway is back on the broker" \
    wait_for_lines "$GW_LOG" 'broker link up' $((ups + 1)) 20
kill -INT "$a2_pid" 2>/dev/null
wait_for_exit "$a2_pid" 20
check "a2: the device never got them" not grep -q '< stt' "$GW_TMP/a2.out"
stats=$(gateway_stats)
echo "# $stats"
# The two held at the outage expire; a message made while the link comes
# back (its reconnect backoff is jittered) may wait past 1 s too.
check "a2: counted: 2 or more expired, overflow" \
    grep -Eq 'outbox\[expired\]=([2-9]|[1-9][0-9]+) outbox\[overflow\]=[1-9]' <<<"$stats"
metrics=$(api /metrics)
# metric NAME: the value of the sample NAME (with its labels) in /metrics.
metric() {
    awk -v n="$1" '$1 == n { print $2 }' <<<"$metrics"
}
echo "# $(grep '^hybridgw_outbox' <<<"$metrics" | tr '\n' ' ')"
overflow=$(sed -n 's/.*outbox\[overflow\]=\([0-9]*\).*/\1/p' <<<"$stats")
expired=$(sed -n 's/.*outbox\[expired\]=\([0-9]*\).*/\1/p' <<<"$stats")
check "a2: /metrics: $expired expired, $overflow refused as overflow (as in stats)" \
    test "$(metric 'hybridgw_outbox_messages_total{outcome="expired"}')" = \
    "${expired:-none}" \
    -a "$(metric 'hybridgw_outbox_messages_total{outcome="overflow"}')" = \
    "${overflow:-none}"
held=$(metric 'hybridgw_outbox_messages_total{outcome="held"}')
sent=$(metric 'hybridgw_outbox_messages_total{outcome="sent"}')
depth=$(metric hybridgw_outbox_depth_messages)
depth_bytes=$(metric hybridgw_outbox_depth_bytes)
check "a2: /metrics: held ($held) = sent ($sent) + expired ($expired) + waiting ($depth)" \
    test "${held:-0}" -ge 6 -a \
    "${held:-0}" -eq "$((${sent:-0} + ${expired:-99} + ${depth:--99}))"
check "a2: /metrics: waiting bytes ($depth_bytes) only with waiting messages" \
    test "${depth_bytes:--1}" -ge 0 -a \
    "$((${depth:-0} == 0))" -eq "$((${depth_bytes:--1} == 0))"
cp "$cfg.normal" "$cfg"
reloads=$(count_lines "$GW_LOG" 'reloaded ')
kill -HUP "$GW_PID"
wait_for_lines "$GW_LOG" 'reloaded ' $((reloads + 1)) ||
    bail "a2: the gateway reloads its normal limits"

echo "# b) the backend is killed in the middle of a conversation"
B_ID='GID_faults@@@02_00_00_00_00_0b@@@killed'
device_bg "$OTHER_ID" other --turns 6 --fast --end goodbye
other_pid=$DEV_PID
device_bg "$B_ID" b --turns 1 --frames 0 --no-reply --turn-timeout 40000 \
    --end server
b_pid=$DEV_PID
check "b: the device is listening" \
    wait_for_lines "$MAIN_EVENTS" '"ev":"listen"' 3
{
    kill -KILL "$MAIN_PID"
    wait "$MAIN_PID"
} 2>/dev/null
check "b: the session ends: backend closed" \
    wait_for_line "$GW_LOG" "dev=$B_ID.*session ended: backend closed"
check "b: the device gets a goodbye" \
    wait_for_line "$GW_TMP/b.out" '< goodbye: channel closed'
wait_for_exit "$b_pid" 30
check "b: the device on the other backend completes its six turns" \
    wait_for_exit "$other_pid" 45
device_ok "b: and its result is whole" "$(result other)"
stats=$(gateway_stats)
echo "# $stats"
started=$(sed -n 's/.* started=\([0-9]*\).*/\1/p' <<<"$stats")
ended=$(grep -o 'ended\[[^]]*\]=[0-9]*' <<<"$stats" | cut -d= -f2 |
    awk '{ n += $1 } END { print n + 0 }')
live=$(sed -n 's/.* sessions=\([0-9]*\).*/\1/p' <<<"$stats")
check "b: sessions started = ended ($started = ${ended:-0}), none live" \
    test "$started" -eq "${ended:-0}" -a "$live" -eq 0
# Back on the same port, as a restarted service would be.
BACKEND_EVENTS=$GW_TMP/main2.events
peer_log "$GW_TMP/main2.log" "$BACKEND_EVENTS"
"$SIM" backend --listen "127.0.0.1:$MAIN_PORT" --events "$BACKEND_EVENTS" \
    --turn-frames 10 --tts-frames 8 >"$GW_TMP/main2.log" 2>&1 &
MAIN_PID=$!
wait_for_ready "$MAIN_PID" "$BACKEND_EVENTS" '"ev":"ready"' ||
    bail "b: the backend restarts on its port"
MAIN_EVENTS=$BACKEND_EVENTS
device_bg "$B_ID" b2 --turns 1 --fast
check "b: a new hello works once the backend is back" \
    wait_for_exit "$DEV_PID" 30
device_ok "b: its conversation is whole" "$(result b2)"

echo "# c) the gateway is killed with -9 and restarted"
C_ID='GID_faults@@@02_00_00_00_00_0c@@@sleeper'
D_ID='GID_faults@@@02_00_00_00_00_0d@@@leaver'
device_bg "$C_ID" c --sessions 2 --turns 1 --fast
c_pid=$DEV_PID
device_bg "$D_ID" d --idle
d_pid=$DEV_PID
check "c: the first conversation ends, the device sleeps" \
    wait_for_line "$GW_TMP/c.out" 'waiting for a wake-up'
check "c: the other device is online" \
    wait_for_line "$GW_LOG" "dev=$D_ID.*online from"
check "c: the gateway's retained state is online" wait_until 10 status_is online
{
    kill -KILL "$GW_PID"
    wait "$GW_PID"
} 2>/dev/null
# The broker sees the socket close at once; a silent network would take
# it 1.5 keepalives. The plugin lets the gateway account's will through
# to plugin_opt_gateway_status_topic.
keepalive=$(jq .mqtt.keepalive "$cfg")
check "c: its will sets the retained state offline" \
    wait_until $((keepalive * 3 / 2 + 2)) status_is offline
check "c: the broker let the gateway's will through" \
    grep -q "gateway's will on 'hybridgw/test/status' let through" \
    "$GW_TMP/broker.log"
# The idle device leaves while no gateway runs: only the retained
# presence can tell the next one.
kill -INT "$d_pid"
wait_for_exit "$d_pid" 10
check "c: the broker publishes the leaver's offline presence" \
    wait_for_line "$GW_TMP/broker.log" "$D_ID.*disconnected"
start_gateway gw2 "$cfg" || bail "c: the gateway restarts"
check "c: the API answers" wait_for_http "http://127.0.0.1:$HTTP_PORT/healthz"
check "c: restarted, online again" wait_until 10 status_is online
check "c: /healthz: the broker link is up" \
    jq -e '.broker == "up"' <<<"$(api /healthz)"
devs=$(api /api/devices)
echo "# $devs"
# shellcheck disable=SC2016 # $id is jq's
check "c: /api/devices: the sleeping device is online" \
    jq -e --arg id "$C_ID" \
    '[.. | objects | select(.client_id? == $id and .online == true)] |
     length == 1' <<<"$devs"
# shellcheck disable=SC2016 # $id is jq's
check "c: /api/devices: the device that left is not" \
    jq -e --arg id "$D_ID" \
    '[.. | objects | select(.client_id? == $id and .online == true)] |
     length == 0' <<<"$devs"
kill -USR1 "$c_pid"
check "c: the sleeping device's next hello is answered" \
    wait_for_exit "$c_pid" 30
r=$(result c)
device_ok "c: its second conversation is whole" "$r"
check "c: two sessions on one MQTT connection" jq_is "$r" .sessions 2

echo "# d) a reload with a broken file keeps the running config"
E_ID='GID_faults@@@02_00_00_00_00_0e@@@reload'
device_bg "$E_ID" e --turns 3 --fast
e_pid=$DEV_PID
check "d: the conversation is active" \
    wait_for_line "$GW_LOG" "dev=$E_ID.*session active"
cp "$cfg" "$cfg.good"
printf '{ "instance": "test", "mqtt": { "port": 70000 }, ' >"$cfg"
kill -HUP "$GW_PID"
check "d: the gateway logs the failed reload" \
    wait_for_line "$GW_LOG" 'reload of .* failed; the running configuration stays'
check "d: with the reason" wait_for_line "$GW_LOG" 'gw.json:[0-9]+:[0-9]+: '
check "d: the conversation goes on to its end" wait_for_exit "$e_pid" 30
device_ok "d: three whole turns" "$(result e)"
device_bg "$E_ID" e2 --turns 1 --fast
check "d: a new hello is answered on the old config" \
    wait_for_exit "$DEV_PID" 30
device_ok "d: its conversation is whole" "$(result e2)"
check "d: the gateway still runs" not gone "$GW_PID"
mv "$cfg.good" "$cfg"

stop_pid "$GW_PID"
check "the gateway drained with exit 0" test "$EXIT_CODE" -eq 0
check "and left its state offline" wait_until 10 status_is offline
finish
