#!/usr/bin/env bash
# Sets up the machine, builds hybridgw and runs one real conversation on
# 127.0.0.1: a mosquitto broker with the hybridgw plugin, the gateway, a
# mock xiaozhi backend and a simulated stock device (hello, listen, audio up, stt, tts with audio down,
# goodbye). Prints the device's transcript with per-step latency, stops
# everything it started, and exits 0 when the conversation succeeded.
# With --ui it then keeps running with an idle simulated device online and
# prints the address and token of the operator page (web/, at /ui/) until
# Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
ui=0
if [ "${1:-}" = --ui ]; then
    ui=1
fi

scripts/setup.sh
echo "demo: building"
scripts/build.sh plain >/dev/null
gw=build/plain/gateway/hybridgw
sim=build/plain/tools/hybridgw-sim

. scripts/lib.sh
tmp=$GW_TMP

broker_port=$("$sim" free-port)
backend_port=$("$sim" free-port)
udp_port=$("$sim" free-port --udp)
http_port=$("$sim" free-port)
# The page's token: a fresh one each run (it guards the API and /mcp).
http_token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

# Debian's mosquitto with the hybridgw plugin (broker/): device logins
# with the xiaozhi password scheme, device-server rewritten to
# devices/<client_id>/up, downlink delivered without a subscription,
# presence for the gateway. The key and the gateway password are demo
# values; a deployment sets its own.
device_key=demo-device-key
gw_password=demo-gateway-secret
cat >"$tmp/mosquitto.conf" <<EOF
listener $broker_port 127.0.0.1
allow_anonymous false
persistence false
set_tcp_nodelay true
log_dest stderr
log_type information
plugin $PWD/build/plain/broker/hybridgw_broker.so
plugin_opt_device_key $device_key
plugin_opt_gateway_username hybridgw
plugin_opt_gateway_password $gw_password
EOF
mosquitto -c "$tmp/mosquitto.conf" 2>"$tmp/mosquitto.log" &
GW_PIDS+=($!)
wait_for_ready $! "$tmp/mosquitto.log" "listen socket on port $broker_port" || exit 1
echo "demo: mosquitto with the hybridgw plugin on 127.0.0.1:$broker_port"

"$sim" backend --listen "127.0.0.1:$backend_port" --events "$tmp/backend.events" \
    --turn-frames 20 --tts-frames 15 2>"$tmp/backend.log" &
GW_PIDS+=($!)
wait_for_ready $! "$tmp/backend.events" '"ev":"ready"' || exit 1
echo "demo: mock backend on ws://127.0.0.1:$backend_port/xiaozhi/v1/"

cat >"$tmp/hybridgw.json" <<EOF
{
  "instance": "demo",
  "mqtt": { "host": "127.0.0.1", "port": $broker_port,
            "username": "hybridgw", "password": "$gw_password" },
  "udp": { "bind": "127.0.0.1", "port": $udp_port, "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock",
    "url": "ws://127.0.0.1:$backend_port/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $http_port, "token": "$http_token",
            "ui_dir": "$PWD/web" },
  "log": { "level": "info" }
}
EOF
"$gw" -c "$tmp/hybridgw.json" 2>"$tmp/gateway.log" &
gw_pid=$!
GW_PIDS+=("$gw_pid")
wait_for_ready "$gw_pid" "$tmp/gateway.log" 'broker link up' || exit 1
echo "demo: gateway subscribed, audio on udp 127.0.0.1:$udp_port"

echo
echo "== the device's side of the conversation"
status=0
# A stock device: it publishes to device-server and never subscribes.
"$sim" device --broker "127.0.0.1:$broker_port" --key "$device_key" \
    --turns 1 --frames 20 || status=$?

if ((ui == 1 && status == 0)); then
    # An idle device with a tool that answers with its text, to call from
    # the page.
    "$sim" device --broker "127.0.0.1:$broker_port" --key "$device_key" \
        --client-id 'GID_demo@@@02_00_00_00_00_01@@@demo-ui' --idle \
        --mcp-echo-tool >"$tmp/ui-device.log" 2>&1 &
    GW_PIDS+=($!)
    echo
    echo "== the operator page: http://127.0.0.1:$http_port/ui/"
    echo "   token: $http_token"
    echo "   (Ctrl-C stops everything)"
    wait "$gw_pid" || true
fi

echo
echo "== the gateway's log"
if ! stop_pid "$gw_pid" || ((EXIT_CODE != 0)); then
    status=1
fi
cat "$tmp/gateway.log"
echo
if ((status == 0)); then
    echo "demo: conversation completed"
else
    echo "demo: FAILED (status $status)"
fi
exit "$status"
