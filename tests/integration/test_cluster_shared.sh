#!/usr/bin/env bash
# cluster.mode "shared" (docs/emqx.md, docs/protocol.md section 10.8) on
# mosquitto with the plugin. Mosquitto hands a shared subscription's
# messages round-robin, with no device affinity (EMQX's hash_clientid
# gives it), so conversations are checked with one member; what must not
# depend on affinity is checked with two: each device's MCP client runs on
# its owner only, and the device's answers that the broker hands to the
# other member are carried to the owner, so API calls through either
# instance reach every device.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
TOKEN=it-bearer-sh4r
MKEY=It-Manager-Sh9q

start_plugin_broker broker || bail "the broker starts"
start_backend mock --turn-frames 3 --tts-frames 3 --no-decode ||
    bail "the backend starts"

declare -A HTTP PID LOGF DEV_ID DEV_PID
config() {
    write_gateway_config "$GW_TMP/$1.in"
    HTTP[$1]=$(free_port)
    jq --arg n "$1" --argjson h "${HTTP[$1]}" --arg t "$TOKEN" --arg m "$MKEY" \
        '.mqtt.client_id = "hybridgw-" + $n | .log.level = "debug"
         | .http = { "port": $h, "token": $t, "manager_key": $m }
         | .cluster = { "mode": "shared", "instance": $n }' \
        "$GW_TMP/$1.in" >"$GW_TMP/$1.json"
}
start() {
    start_gateway "$1" "$GW_TMP/$1.json" || bail "instance $1 starts"
    PID[$1]=$GW_PID
    LOGF[$1]=$GW_LOG
}
base() { echo "http://127.0.0.1:${HTTP[$1]}"; }
metric() {
    curl -s --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "$(base "$1")/metrics" |
        awk -v k="$2" 'index($0, k " ") == 1 { v = $NF } END { print v + 0 }'
}
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
for n in sh-a sh-b; do
    stop_pid "${PID[$n]}"
    check "$n stops cleanly (exit $EXIT_CODE)" test "$EXIT_CODE" = 0
done
finish
