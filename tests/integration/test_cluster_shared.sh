#!/usr/bin/env bash
# cluster.mode "shared" (docs/emqx.md, docs/protocol.md section 10.8) on
# mosquitto with the plugin. Mosquitto hands a shared subscription's
# messages round-robin, with no device affinity (EMQX's hash_clientid
# gives it), so conversations are checked with one member; what must not
# depend on affinity is checked with two: each device's MCP client runs on
# its owner only, and the device's answers that the broker hands to the
# other member are carried to the owner, so API calls through either
# instance reach every device. Last, a draining member that still gets
# its share carries new hellos and their conversations to the running
# one: every conversation holds although Mosquitto has no affinity.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
TOKEN=it-bearer-sh4r
MKEY=It-Manager-Sh9q

start_plugin_broker broker || bail "the broker starts"
start_backend hold --turn-frames 0 --no-decode ||
    bail "the holding backend starts"
HOLD_PORT=$BACKEND_PORT
start_backend mock --turn-frames 3 --tts-frames 3 --no-decode ||
    bail "the backend starts"

declare -A HTTP PID LOGF DEV_ID DEV_PID
config() {
    write_gateway_config "$GW_TMP/$1.in"
    HTTP[$1]=$(free_port)
    # GID_keep talks to a backend that never ends a turn: its device
    # sends nothing over MQTT after its listen start.
    jq --arg n "$1" --argjson h "${HTTP[$1]}" --arg t "$TOKEN" --arg m "$MKEY" \
        --arg hold "ws://127.0.0.1:$HOLD_PORT/xiaozhi/v1/" \
        '.mqtt.client_id = "hybridgw-" + $n | .log.level = "debug"
         | .backends += [{ "name": "hold", "url": $hold }]
         | .routes = [{ "match": { "groups": ["GID_keep"] }, "backends": ["hold"] },
                      { "match": {}, "backends": ["mock"] }]
         | .http = { "port": $h, "token": $t, "manager_key": $m }
         | .cluster = { "mode": "shared", "instance": $n,
                        "drain_deadline_s": 60 }' \
        "$GW_TMP/$1.in" >"$GW_TMP/$1.json"
}
start() {
    start_gateway "$1" "$GW_TMP/$1.json" || bail "instance $1 starts"
    PID[$1]=$GW_PID
    LOGF[$1]=$GW_LOG
}
base() { echo "http://127.0.0.1:${HTTP[$1]}"; }
metric() { gw_metric "$(base "$1")" "$2" "$TOKEN"; }
sees() {
    [ "$(metric "$1" 'hybridgw_cluster_instances{state="running"}')" = "$2" ]
}

echo "# 1. one member: the broker's group hands it every conversation"
config sh-a
check "the config check takes mode shared" "$GW" --check-config -c "$GW_TMP/sh-a.json"
start sh-a
check "sh-a runs" wait_until 20 sees sh-a 1
named_device sh c1 31 --turns 2 --fast
wait "${DEV_PID[c1]}"
r=$(tail -n 1 "$GW_TMP/c1.out")
check "a device holds two turns through \$share/hybridgw/devices/+/up" \
    jq -e '.ok == true' <<<"$r"
check "and sh-a started its session" test "$(metric sh-a hybridgw_sessions_started_total)" -ge 1

echo "# 2. two members: MCP reaches every device through either instance"
config sh-b
start sh-b
check "both run and see two running" wait_until 20 sees sh-a 2
check "sh-b too" wait_until 20 sees sh-b 2
devs=(m1 m2 m3 m4 m5 m6)
i=0
for d in "${devs[@]}"; do
    i=$((i + 1))
    named_device sh "$d" "4$i" --idle --mcp-echo-tool
done
read_by() { # DEVICE INSTANCE
    grep -qE "dev=${DEV_ID[$1]} mcp.* [0-9]+ tools? in" "${LOGF[$2]}"
}
read_once() {
    local d=$1
    read_by "$d" sh-a || read_by "$d" sh-b
}
bad=0
for d in "${devs[@]}"; do
    wait_until 20 read_once "$d" || bad=$((bad + 1))
    if read_by "$d" sh-a && read_by "$d" sh-b; then bad=$((bad + 1)); fi
done
check "each device's tools were read by exactly one instance" test "$bad" = 0
inits=0
for d in "${devs[@]}"; do
    [ "$(grep -c '< mcp initialize ' "$GW_TMP/$d.out")" = 1 ] || inits=$((inits + 1))
done
check "each device was initialized once" test "$inits" = 0
tok=$(daily_token "$MKEY")
fails=0
for n in sh-a sh-b; do
    for d in "${devs[@]}"; do
        code=$(curl -sS --max-time 30 -o "$GW_TMP/mgr.json" -w '%{http_code}' \
            -X POST -H "Authorization: Bearer $tok" \
            -H 'Content-Type: application/json' \
            --data "{\"type\":\"mcp\",\"payload\":{\"method\":\"tools/call\",\"params\":{\"name\":\"self.sim.echo\",\"arguments\":{\"text\":\"$n-$d\"}}}}" \
            "$(base "$n")/api/commands/${DEV_ID[$d]}")
        if [ "$code" != 200 ] || ! grep -q "$n-$d" "$GW_TMP/mgr.json"; then
            fails=$((fails + 1))
            echo "#   $n -> $d: $code $(head -c 200 "$GW_TMP/mgr.json")"
        fi
    done
done
check "12 of 12 commands answered with the device's echo" test "$fails" = 0
up=$(($(metric sh-a 'hybridgw_cluster_device_messages_total{direction="out"}') +
    $(metric sh-b 'hybridgw_cluster_device_messages_total{direction="out"}')))
down=$(($(metric sh-a 'hybridgw_cluster_device_messages_total{direction="in"}') +
    $(metric sh-b 'hybridgw_cluster_device_messages_total{direction="in"}')))
echo "#   device answers carried to their owner: $up sent, $down taken"
check "answers the broker gave the other member reached the owner" \
    test "$up" -gt 0 -a "$up" = "$down"
for n in sh-a sh-b; do
    check "$n refused no message from the other" \
        test "$(metric "$n" hybridgw_cluster_messages_refused_total)" = 0
done
for d in "${devs[@]}"; do end_device "$d" >/dev/null; done

echo "# 3. a draining member carries new conversations to the running one"
stop_pid "${PID[sh-a]}"
check "sh-a stops cleanly (exit $EXIT_CODE)" test "$EXIT_CODE" = 0
check "sh-b sees itself alone" wait_until 20 sees sh-b 1
KEEP=GID_keep@@@02_00_00_00_05_01@@@keeper
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "$KEEP" --frames 0 --turns 1 --json >"$GW_TMP/keeper.out" \
    2>>"$GW_TMP/devices.err" &
keeper=$!
peer_log "$GW_TMP/keeper.out"
live_on() { [ "$(metric "$1" hybridgw_sessions)" = "$2" ]; }
check "a long conversation runs on sh-b" wait_until 20 live_on sh-b 1
code=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $TOKEN" "$(base sh-b)/api/drain")
check "sh-b drains ($code)" test "$code" = 202
start sh-a
check "sh-b sees sh-a running again" wait_until 20 sees sh-b 1
check "and sh-a sees itself the only running one" wait_until 20 sees sh-a 1
started_b=$(metric sh-b hybridgw_sessions_started_total)
short=(s1 s2 s3 s4 s5 s6 s7 s8)
i=0
for d in "${short[@]}"; do
    i=$((i + 1))
    named_device sh "$d" "5$i" --turns 1 --fast
done
bad=0
for d in "${short[@]}"; do
    wait "${DEV_PID[$d]}" || true
    r=$(tail -n 1 "$GW_TMP/$d.out")
    jq -e '.ok == true' <<<"$r" >/dev/null || {
        bad=$((bad + 1))
        echo "#   $d: $r"
    }
done
check "8 of 8 conversations complete, each hello answered once" test "$bad" = 0
out=$(metric sh-b 'hybridgw_cluster_device_messages_total{direction="out"}')
in=$(metric sh-a 'hybridgw_cluster_device_messages_total{direction="in"}')
echo "#   carried by sh-b: $out; taken by sh-a: $in"
check "sh-b carried its share to sh-a" test "$out" -gt 0
check "sh-b took no new conversation" \
    test "$(metric sh-b hybridgw_sessions_started_total)" = "$started_b"
check "sh-b's long conversation is still there" \
    test "$(metric sh-b hybridgw_sessions)" = 1
kill -INT "$keeper" 2>/dev/null
wait_for_exit "$keeper" >/dev/null || kill -KILL "$keeper" 2>/dev/null
wait_for_exit "${PID[sh-b]}" 30
check "with its last conversation over, sh-b exits 0 ($EXIT_CODE)" \
    test "$EXIT_CODE" = 0
stop_pid "${PID[sh-a]}"
check "sh-a stops cleanly (exit $EXIT_CODE)" test "$EXIT_CODE" = 0
finish
