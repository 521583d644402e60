#!/usr/bin/env bash
# The simulated device provisions itself as the firmware does
# (hybridgw-sim device --ota, docs/protocol.md section 9): its OTA check
# against the real gateway, the MQTT settings it stores (--nvs) carrying
# it through the plugin broker into a conversation, and a second boot from
# what it stored. Then the activation loop: an unbound device shows a
# code, an operator binds it through /api/bindings and the device goes on
# by itself; a device with a factory serial number binds itself with its
# HMAC; unbinding sends the device back to its code.
# shellcheck disable=SC2016 # $x in the jq filters are jq's
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

MAC=a0:85:e3:00:5a:01
UUID=5a0e1b2c-3d4e-4f50-8a6b-7c8d9e0f5a01
BOARD=bread-compact-wifi
TOKEN=sim-ota-token-3e1f
SERIAL_KEY=fleet-secret-for-tests-0123
PEND=(--activate-pending-ms 200 --activate-retry-ms 400)

start_plugin_broker broker || bail "the broker starts with the plugin"
start_backend mock --turn-frames 5 --tts-frames 6
http_port=$(free_port)
BASE=http://127.0.0.1:$http_port
OTA_URL=$BASE/xiaozhi/ota/
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"ota\": { \"enabled\": true,
    \"mqtt_endpoint\": \"127.0.0.1:$BROKER_PORT\",
    \"device_key\": \"$PLUGIN_KEY\", \"group\": \"GID_{board}\" }"
sed -i "s|\"http\": { \"port\": 0 }|\"http\": { \"port\": $http_port, \"token\": \"$TOKEN\" }|" "$cfg"

# Part 1 in lab mode (credentials to every check), part 2 with activation.
jq --arg db "$GW_TMP/bindings.db" \
    '.ota.activation = "off" | .bindings = {"path": $db}' "$cfg" >"$GW_TMP/lab.json"
cp "$GW_TMP/lab.json" "$cfg"
start_gateway gw "$cfg" || bail "the gateway starts"
wait_for_http "$BASE/healthz" || bail "the API answers"
peer_log "$GW_TMP/devices.err"

echo "# 1. the firmware's check, the stored settings, a conversation"
NVS=$GW_TMP/nvs-1.json
out=$GW_TMP/dev1.out
"$SIM" device --ota "$OTA_URL" --mac "${MAC^^}" --uuid "$UUID" --nvs "$NVS" \
    --board "$BOARD" --turns 1 --fast --json >"$out" 2>>"$GW_TMP/devices.err"
rc=$?
peer_log "$out"
ID="GID_$BOARD@@@${MAC//:/_}@@@$UUID"
device_ok "the device provisioned by OTA completes a turn (exit $rc)" \
    "$(tail -n 1 "$out")"
check "it connected as the client id the gateway issued" \
    jq_is "$(tail -n 1 "$out")" .client_id "$ID"
check "it showed no activation code (none was asked for)" \
    not grep -q '^activation' "$out"
check "the gateway saw the firmware's check: board and version from it" \
    grep -q "$ID from 127.0.0.1: credentials issued (board $BOARD, firmware 2.4.2" "$GW_LOG"
check "the settings are stored: endpoint, client id, username, password, topic" \
    jq -e --arg id "$ID" --arg ep "127.0.0.1:$BROKER_PORT" \
    '.mqtt.endpoint == $ep and .mqtt.client_id == $id and
     (.mqtt.username | length > 0) and (.mqtt.password | length > 0) and
     .mqtt.publish_topic == "device-server" and .mqtt.keepalive == 240' "$NVS"
check "with the MAC (lowercase) and uuid it used" \
    jq -e --arg m "$MAC" --arg u "$UUID" '.sim.mac == $m and .board.uuid == $u' "$NVS"

# The second boot names neither MAC nor uuid: both come from the file.
"$SIM" device --ota "$OTA_URL" --nvs "$NVS" --board "$BOARD" --turns 1 --fast \
    --json >"$GW_TMP/dev1b.out" 2>>"$GW_TMP/devices.err"
r=$(tail -n 1 "$GW_TMP/dev1b.out")
device_ok "a second boot from the stored file completes a turn" "$r"
check "as the same device" jq_is "$r" .client_id "$ID"

# A check that cannot reach a gateway: ten tries, then what is stored.
"$SIM" device --ota "http://127.0.0.1:$(free_port)/xiaozhi/ota/" --nvs "$NVS" \
    --activate-retry-ms 1 --turns 1 --fast --json >"$GW_TMP/dev1c.out" \
    2>>"$GW_TMP/devices.err"
r=$(tail -n 1 "$GW_TMP/dev1c.out")
check "with the OTA server down it retries ten times" \
    test "$(grep -c 'ota check failed' "$GW_TMP/dev1c.out")" -eq 10
device_ok "then goes on with the stored settings, as the firmware" "$r"

"$SIM" device --ota "$OTA_URL" --serial SN1 >/dev/null 2>"$GW_TMP/usage.err"
check "--serial without --serial-key is a usage error (exit 2)" test $? -eq 2
"$SIM" device --ota "$OTA_URL" --key k >/dev/null 2>"$GW_TMP/usage.err"
check "--ota with --key is refused: the answers give the credentials" \
    grep -q 'come from the OTA answers' "$GW_TMP/usage.err"

echo "# 2. activation: a code the operator enters, an HMAC, an unbind"
jq --arg k "$SERIAL_KEY" '.ota.activation = "on" | .ota.serial_key = $k' \
    "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
stop_pid "$GW_PID"
start_gateway gw2 "$cfg" || bail "the gateway starts with activation on"
wait_for_http "$BASE/healthz" || bail "its API answers"
api() { # METHOD PATH [BODY]: prints the status; the answer in $GW_TMP/api.json
    curl -sS --max-time 10 -o "$GW_TMP/api.json" -w '%{http_code}' -X "$1" \
        -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        ${3:+--data "$3"} "$BASE$2"
}

MAC2=a0:85:e3:00:5a:02
UUID2=5a0e1b2c-3d4e-4f50-8a6b-7c8d9e0f5a02
ID2="GID_$BOARD@@@${MAC2//:/_}@@@$UUID2"
NVS2=$GW_TMP/nvs-2.json
out=$GW_TMP/dev2.out
peer_log "$out"
"$SIM" device --ota "$OTA_URL" --mac "$MAC2" --uuid "$UUID2" --nvs "$NVS2" \
    "${PEND[@]}" --turns 1 --fast --json >"$out" 2>>"$GW_TMP/devices.err" &
pid=$!
check "an unbound device shows a code" \
    wait_for_line "$out" '^activation code [0-9]+$'
code=$(grep -m1 '^activation code' "$out" | cut -d' ' -f3)
check "and keeps asking (202, pending)" wait_for_line "$out" 'activate [0-9]+/10: 202'
check "the operator sees it pending, without its code" \
    test "$(api GET /api/bindings)" = 200 -a \
    "$(jq --arg m "$MAC2" '[.pending[] | select(.mac == $m)] | length' "$GW_TMP/api.json")" = 1
check "nowhere in the listing" not grep -q "\"$code\"" "$GW_TMP/api.json"
check "binding it by the code is 201" \
    test "$(api POST /api/bindings "{\"code\":\"$code\"}")" = 201
wait_for_exit "$pid" 30
r=$(tail -n 1 "$out")
device_ok "the device then gets its credentials and completes a turn" "$r"
check "as its client id" jq_is "$r" .client_id "$ID2"
check "its activate saw 200" grep -q 'activate [0-9]*/10: 200' "$out"

MAC3=a0:85:e3:00:5a:03
UUID3=5a0e1b2c-3d4e-4f50-8a6b-7c8d9e0f5a03
ID3="GID_$BOARD@@@${MAC3//:/_}@@@$UUID3"
NVS3=$GW_TMP/nvs-3.json
SERIAL=SN00000000000000000000000005a03
"$SIM" device --ota "$OTA_URL" --mac "$MAC3" --uuid "$UUID3" --nvs "$NVS3" \
    --serial "$SERIAL" --serial-key "$SERIAL_KEY" "${PEND[@]}" --turns 1 --fast \
    --json >"$GW_TMP/dev3.out" 2>>"$GW_TMP/devices.err"
r=$(tail -n 1 "$GW_TMP/dev3.out")
device_ok "a device with a serial number binds itself by its HMAC" "$r"
check "binding by=hmac" test "$(api GET /api/bindings)" = 200 -a \
    "$(jq -r --arg id "$ID3" '.bindings[] | select(.client_id == $id) | .by' "$GW_TMP/api.json")" = hmac
"$SIM" device --ota "$OTA_URL" --nvs "$NVS3" --serial "$SERIAL" \
    --serial-key "$SERIAL_KEY" "${PEND[@]}" --turns 1 --fast --json \
    >"$GW_TMP/dev3b.out" 2>>"$GW_TMP/devices.err"
r=$(tail -n 1 "$GW_TMP/dev3b.out")
check "its next boot is asked for a challenge only" \
    grep -q '^activation challenge$' "$GW_TMP/dev3b.out"
device_ok "and, reissued after its HMAC, completes a turn" "$r"
"$SIM" device --ota "$OTA_URL" --nvs "$NVS3" --serial "$SERIAL" \
    --serial-key wrong-fleet-secret-0000 "${PEND[@]}" --turns 1 --fast \
    --json >"$GW_TMP/dev3c.out" 2>>"$GW_TMP/devices.err" &
pid=$!
check "a wrong device key gets 403" wait_for_line "$GW_TMP/dev3c.out" 'activate [0-9]+/10: 403'
kill -INT "$pid" 2>/dev/null
wait_for_exit "$pid"

check "unbinding the operator's device is 200" \
    test "$(api DELETE "/api/bindings/$ID2")" = 200
"$SIM" device --ota "$OTA_URL" --nvs "$NVS2" "${PEND[@]}" --turns 1 --fast \
    --json >"$GW_TMP/dev2b.out" 2>>"$GW_TMP/devices.err" &
pid=$!
check "and its next boot shows a code again" \
    wait_for_line "$GW_TMP/dev2b.out" '^activation code [0-9]+$'
kill -INT "$pid" 2>/dev/null
wait_for_exit "$pid"
check "interrupted while provisioning, it exits 1" test "$EXIT_CODE" -eq 1

stop_pid "$GW_PID"
check "the gateway stops cleanly" test "$EXIT_CODE" -eq 0
finish
