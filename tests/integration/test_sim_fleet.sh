#!/usr/bin/env bash
# The load tool's idle fleet (hybridgw-sim load --idle-devices, what
# bench/fleet.sh runs) through Mosquitto with the plugin and the gateway:
# every idle device logs in as stock firmware, is discovered, comes back
# after a broker restart, and the tool's counts say so; two conversations
# beside the fleet complete.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
start_plugin_broker broker || bail "broker with the plugin starts"
broker_conf=$GW_TMP/broker.conf
start_backend backend --turn-frames 10 --tts-frames 8
write_gateway_config "$GW_TMP/gw0.json"
http_port=$(free_port)
base=http://127.0.0.1:$http_port
jq --argjson p "$http_port" '.http = {listen: "127.0.0.1", port: $p}' \
    "$GW_TMP/gw0.json" >"$GW_TMP/gw.json"
start_gateway gw "$GW_TMP/gw.json" || bail "gateway starts"
wait_for_http "$base/healthz" || bail "the gateway's HTTP API answers"
# metric_at_least NAME VALUE: the gateway's metric has reached VALUE.
metric_at_least() { (($(gw_metric "$base" "$1") >= $2)); }

n=40
status=$GW_TMP/fleet.status
echo "# 1. $n idle devices and 2 conversations from one process"
"$SIM" load --idle-devices "$n" --devices 2 --turns 1 --fast --ramp 200 \
    --duration 60 --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --keepalive 30 --status-file "$status" --json >"$GW_TMP/fleet.out" \
    2>"$GW_TMP/fleet.err" &
fleet=$!
peer_log "$GW_TMP/fleet.err"
check "every idle device is discovered (its initialize answered)" \
    wait_for_jq "$status" ".idle.discovered == $n and .idle.online == $n"
check "the gateway completed $n discoveries (or more: the conversations)" \
    wait_until 30 metric_at_least hybridgw_mcp_discoveries_total "$n"
check "the conversations beside the fleet are over" \
    wait_for_jq "$status" '.conversations_started == 2 and
        .conversations_finished == 2'
s=$(cat "$status")
check "each idle device answered one tools/list at least" \
    jq -e ".idle.lists >= $n and .idle.connects == $n" <<<"$s"
check "no idle device reconnected yet" jq_is "$s" .idle.reconnected 0
check "the discovery times are on the wall clock" \
    jq -e '.idle.last_initialize_unix_ms > .unix_ms - 60000 and
           .idle.last_initialize_unix_ms <= .unix_ms' <<<"$s"

echo "# 2. the broker restarts: every idle device comes back"
stop_pid "$BROKER_PID"
run_mosquitto broker "$broker_conf" "$BROKER_PORT" || bail "broker restarts"
BROKER_PID=$MOSQ_PID
check "every idle device reconnected, counted once each" \
    wait_for_jq "$status" ".idle.reconnected == $n and .idle.online == $n and
        .idle.connects == $((2 * n))"
# The discovery to compare with is the one before the restart.
# shellcheck disable=SC2016 # $d is jq's
check "the last reconnect is after the discovery" \
    jq -e --argjson d "$(jq .idle.last_initialize_unix_ms <<<"$s")" \
    '.idle.last_connect_unix_ms > $d' "$status"
check "the gateway initializes every idle device again on its new connection" \
    wait_for_jq "$status" ".idle.reinitialized == $n"
check "the last initialize is after the last reconnect" \
    jq -e '.idle.last_initialize_unix_ms >= .idle.last_connect_unix_ms' \
    "$status"

echo "# 3. the end: a signal stops the fleet, the report adds up"
kill -INT "$fleet"
check "the tool exits" wait_for_exit "$fleet"
check "with 0: every conversation ok, every idle device was online" \
    test "$EXIT_CODE" -eq 0
r=$(tail -n 1 "$GW_TMP/fleet.out")
check "the report counts the fleet" \
    jq -e ".idle.requested == $n and .idle.connected == $n and
           .idle.discovered == $n and .idle.reconnected == $n" <<<"$r"
check "and the conversations apart from it" \
    jq -e '.devices.requested == 2 and .devices.ok == 2' <<<"$r"
finish
