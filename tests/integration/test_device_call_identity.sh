#!/usr/bin/env bash
# Device calls find the callee by its binding (docs/protocol.md sections
# 8.4 and 9.3): with OTA activation on, a device online under a client id
# that carries the target MAC but is not bound is not woken (the call
# answers "offline"); bound, it is; and once a second identity with that
# MAC is bound, the MAC is ambiguous even with one of them online. Real
# mosquitto with the plugin, the gateway, simulated stock devices.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

MKEY=Call-Identity-Key-3
TOKEN=call-identity-token

start_plugin_broker broker || bail "broker with the plugin starts"
start_backend backend --turn-frames 0 --no-decode
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"ota\": { \"enabled\": true,
    \"mqtt_endpoint\": \"127.0.0.1:$BROKER_PORT\",
    \"device_key\": \"$PLUGIN_KEY\", \"group\": \"GID_test\" },
  \"bindings\": { \"path\": \"$GW_TMP/bindings.db\" }"
sed -i "s|\"http\": { \"port\": 0 }|\"http\": { \"listen\": \"127.0.0.1\", \"port\": $HTTP_PORT, \"token\": \"$TOKEN\", \"manager_key\": \"$MKEY\" }|" "$cfg"
start_gateway gw "$cfg" || bail "gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"
peer_log "$GW_TMP/devices.err"

declare -A DEV_PID DEV_ID DEV_MAC
# device NAME MAC_LAST_BYTE ARGS...: a stock device in the background.
device() {
    local name=$1 mac=$2
    shift 2
    DEV_MAC[$name]=02:00:00:00:0d:$mac
    DEV_ID[$name]=GID_test@@@02_00_00_00_0d_$mac@@@id-$name
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
        --client-id "${DEV_ID[$name]}" --json --call "$@" \
        >"$GW_TMP/$name.out" 2>>"$GW_TMP/devices.err" &
    DEV_PID[$name]=$!
    peer_log "$GW_TMP/$name.out"
}
end_device() {
    kill -INT "${DEV_PID[$1]}" 2>/dev/null
    wait_for_exit "${DEV_PID[$1]}" >/dev/null
    tail -n 1 "$GW_TMP/$1.out"
}
active() {
    wait_for_line "$GW_LOG" "dev=${DEV_ID[$1]} .*session active"
}
online() {
    wait_for_line "$GW_LOG" "dev=${DEV_ID[$1]} mcp.* [0-9]+ tools? in [0-9]+ pages?"
}
api() {
    curl -sS --max-time 10 -o "$GW_TMP/api.json" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $(daily_token "$MKEY")" \
        -H 'Content-Type: application/json' --data "$2" "$BASE$1"
}
request_body() {
    printf '{"caller_mac":"%s","target_mac":"%s","caller_nickname":"%s"}' \
        "$1" "$2" "$3"
}

device k 01 --frames 0 --turns 0 --turn-timeout 600000
device m 02 --idle
check "the caller's session becomes active" active k
check "the callee-to-be is online" online m
check "the caller is bound" test "$(bind_identity "$BASE" "$TOKEN" "${DEV_MAC[k]}" id-k)" = 201

echo "# 1. the callee online but not bound: not woken"
st=$(api /api/call/request "$(request_body "${DEV_MAC[k]}" "${DEV_MAC[m]}" Kim)")
check "200, status offline ($st $(cat "$GW_TMP/api.json"))" \
    jq -e '.status == "offline"' "$GW_TMP/api.json"
check "logged: online but not bound" \
    grep -q "${DEV_ID[m]} is online but not bound to MAC ${DEV_MAC[m]}" "$GW_LOG"

echo "# 2. bound, it is woken"
check "the callee is bound" test "$(bind_identity "$BASE" "$TOKEN" "${DEV_MAC[m]}" id-m)" = 201
st=$(api /api/call/request "$(request_body "${DEV_MAC[k]}" "${DEV_MAC[m]}" Kim)")
check "the request rings ($st)" jq -e '.status == "pending"' "$GW_TMP/api.json"
check "the callee is woken" wait_until 10 grep -q 'self.remote_wakeup' "$GW_TMP/m.out"
rm_=$(end_device m)
check "the woken callee left" test -n "$rm_"

echo "# 3. a second identity bound with the callee's MAC: ambiguous"
device m2 02 --idle
wait_until 10 grep -q "call ended" "$GW_LOG"
check "a second identity with that MAC is bound" \
    test "$(bind_identity "$BASE" "$TOKEN" "${DEV_MAC[m]}" id-m2)" = 201
check "the twin comes online" wait_for_line "$GW_LOG" "dev=GID_test@@@02_00_00_00_0d_02@@@id-m2 mcp.* [0-9]+ tools? in"
st=$(api /api/call/request "$(request_body "${DEV_MAC[k]}" "${DEV_MAC[m]}" Kim)")
check "409 ambiguous, with one of them online ($st)" \
    jq -e '.status == "ambiguous"' "$GW_TMP/api.json"
r=$(end_device m2)
check "the twin was not woken" test "$(jq .call.wakeups <<<"$r")" = 0
kill -INT "${DEV_PID[k]}"
finish
