#!/usr/bin/env bash
# Activation before credentials (docs/protocol.md section 9.3), with a real
# mosquitto loading our plugin and the gateway's SQLite bindings: an
# unknown device's check gets a code and no password; the operator binds
# it by that code; only then does a check carry credentials, and only
# once; an impostor naming the device's MAC gets nothing usable; unbinding
# closes the device's connection and the broker refuses its credentials,
# also after a broker restart; bindings survive the gateway's kill -9; a
# device with a factory serial number binds itself by its HMAC, a wrong
# one is refused; guessing codes is limited.
# shellcheck disable=SC2016 # jq filters
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

MAC=a0:85:e3:f4:49:34
UUID=0f8e1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b
BOARD=bread-compact-wifi
VERSION=2.4.2
TOKEN=activation-test-token-71c3
FLEET_KEY=fleet-serial-key-0123456789abcdef
BODY=$GW_TMP/body.json
printf '{"application":{"version":"%s"},"board":{"type":"%s"}}' \
    "$VERSION" "$BOARD" >"$BODY"

# ota_check OUT [MAC [UUID [SERIAL]]]: the firmware's check; the answer
# goes to OUT, the status is printed.
ota_check() {
    local out=$1 mac=${2:-$MAC} uuid=${3:-$UUID} serial=${4:-} sn=()
    [ -z "$serial" ] || sn=(-H "Serial-Number: $serial")
    curl -sS --max-time 5 -o "$out" -w '%{http_code}' -X POST \
        -H "Activation-Version: $([ -n "$serial" ] && echo 2 || echo 1)" \
        -H "Device-Id: $mac" -H "Client-Id: $uuid" "${sn[@]}" \
        -H "User-Agent: $BOARD/$VERSION" -H 'Content-Type: application/json' \
        --data-binary "@$BODY" "$OTA_URL"
}

# activate OUT BODY [MAC [UUID]]: POST <ota url>/activate as the firmware.
activate() {
    local out=$1 body=$2 mac=${3:-$MAC} uuid=${4:-$UUID}
    curl -sS --max-time 5 -o "$out" -w '%{http_code}' -X POST \
        -H "Device-Id: $mac" -H "Client-Id: $uuid" \
        -H 'Content-Type: application/json' --data "$body" \
        "${OTA_URL}activate"
}

# api METHOD PATH [BODY]: the operator API with the token; the answer in
# $GW_TMP/api.json, the status printed.
api() {
    curl -sS --max-time 5 -o "$GW_TMP/api.json" -w '%{http_code}' \
        -X "$1" -H "Authorization: Bearer $TOKEN" \
        ${3:+-H 'Content-Type: application/json' --data "$3"} "$API$2"
}

# connects ID USER PASS: whether the broker takes these credentials.
connects() {
    mosquitto_pub -p "$BROKER_PORT" -i "$1" -u "$2" -P "$3" \
        -t device-server -m '{}' >/dev/null 2>&1
}

start_plugin_broker broker || bail "the broker starts with the plugin"
start_backend mock --turn-frames 5 --tts-frames 6
http_port=$(free_port)
API=http://127.0.0.1:$http_port
OTA_URL=$API/xiaozhi/ota/
DB=$GW_TMP/bindings.db
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"ota\": { \"enabled\": true,
    \"mqtt_endpoint\": \"127.0.0.1:$BROKER_PORT\",
    \"device_key\": \"$PLUGIN_KEY\", \"group\": \"GID_{board}\",
    \"activation_ttl_s\": 120 },
  \"bindings\": { \"store\": \"sqlite\", \"path\": \"$DB\" }"
sed -i "s|\"http\": { \"port\": 0 }|\"http\": { \"port\": $http_port, \"token\": \"$TOKEN\" }|" "$cfg"
start_gateway gw "$cfg" || bail "the gateway starts"
wait_for_http "$API/healthz" || bail "the API answers"
check "it says where the bindings are" \
    grep -q "activation on: bindings in sqlite at $DB" "$GW_LOG"

echo "# 1. an unknown device gets an activation code and no credentials"
st=$(ota_check "$GW_TMP/a1.json")
a=$(cat "$GW_TMP/a1.json")
echo "# answer: $a"
check "200" test "$st" = 200
check "no mqtt section" jq -e 'has("mqtt") | not' <<<"$a"
check "an activation with a 6-digit code, a challenge and its timeout" \
    jq -e '.activation.code | test("^[0-9]{6}$")' <<<"$a"
check "a 32-hex-digit challenge" \
    jq -e '.activation.challenge | test("^[0-9a-f]{32}$")' <<<"$a"
check "a timeout within the code's lifetime" \
    jq -e '.activation.timeout_ms > 0 and .activation.timeout_ms <= 120000' <<<"$a"
CODE=$(jq -r .activation.code <<<"$a")
st=$(ota_check "$GW_TMP/a2.json")
check "checking again gets the same code" \
    jq_is "$(cat "$GW_TMP/a2.json")" .activation.code "$CODE"
st=$(activate "$GW_TMP/act.json" '{}')
check "/activate while not bound: 202 pending" test "$st" = 202
check "the pending activation is listed, without its code" \
    sh -c "test \"\$(curl -s -H 'Authorization: Bearer $TOKEN' $API/api/bindings |
        jq -r '.pending[0].mac + \" \" + (.pending[0] | has(\"code\") | tostring)')\" = '$MAC false'"

echo "# 2. the operator binds it by its code; then one check gets credentials"
wrong=$(printf '%06d' $(((10#$CODE + 1) % 1000000)))
st=$(api POST /api/bindings "{\"code\":\"$wrong\"}")
check "a wrong code: 404" test "$st" = 404
st=$(api POST /api/bindings "{\"code\":\"$CODE\"}")
b=$(cat "$GW_TMP/api.json")
echo "# bound: $b"
ID="GID_$BOARD@@@${MAC//:/_}@@@$UUID"
check "the code: 201 with the binding" test "$st" = 201
check "its client id" jq_is "$b" .binding.client_id "$ID"
check "bound by the operator" jq_is "$b" .binding.by operator
B1=$(jq -r .binding.id <<<"$b")
st=$(api POST /api/bindings "{\"code\":\"$CODE\"}")
check "the code is single-use: 404 the second time" test "$st" = 404
st=$(activate "$GW_TMP/act.json" '{}')
check "/activate now: 200 bound" test "$st" = 200
st=$(ota_check "$GW_TMP/c1.json")
c=$(cat "$GW_TMP/c1.json")
check "the next check: credentials" jq -e '.mqtt.password | length > 0' <<<"$c"
check "and no activation (the firmware's loop ends)" \
    jq -e 'has("activation") | not' <<<"$c"
USER=$(jq -r .mqtt.username <<<"$c")
PASS=$(jq -r .mqtt.password <<<"$c")
check "the username carries the binding id" \
    test "$(base64 -d <<<"$USER")" = "{\"ip\":\"127.0.0.1\",\"b\":$B1}"
check "the broker takes them" connects "$ID" "$USER" "$PASS"

echo "# 3. later checks of the same identity get no password"
issued=0
for _ in $(seq 1 30); do
    ota_check "$GW_TMP/again.json" >/dev/null
    if jq -e '.mqtt | has("password")' "$GW_TMP/again.json" >/dev/null; then
        issued=$((issued + 1))
    fi
done
check "30 more checks: none carries a password (was: every one)" \
    test "$issued" = 0
check "they still name the client id and broker (the device keeps its pair)" \
    jq -e --arg id "$ID" '.mqtt.client_id == $id and (.mqtt | has("username") | not)' \
    "$GW_TMP/again.json"
st=$(ota_check "$GW_TMP/imp.json" "$MAC" "11111111-2222-4333-8444-555555555555")
check "an impostor with the device's MAC and another uuid: a code, no mqtt" \
    jq -e '(has("mqtt") | not) and (.activation.code | length == 6)' "$GW_TMP/imp.json"
check "listed pending with its MAC already bound once (for the operator)" \
    sh -c "curl -s -H 'Authorization: Bearer $TOKEN' $API/api/bindings |
        jq -e '.pending[] | select(.uuid == \"11111111-2222-4333-8444-555555555555\") |
            .mac_bindings == 1' >/dev/null"
check "counted: issued 1" test "$(gw_metric "$API" \
    'hybridgw_ota_requests_total{result="issued"}' "$TOKEN")" = 1

echo "# 4. a stock device with those credentials has a conversation"
peer_log "$GW_TMP/devices.err"
r=$("$SIM" device --broker "127.0.0.1:$BROKER_PORT" --client-id "$ID" \
    --username "$USER" --password "$PASS" --turns 1 --fast --json \
    2>>"$GW_TMP/devices.err" | tail -n 1)
device_ok "the bound device completes a turn" "$r"

echo "# 5. unbinding closes its connection and the broker refuses it"
mosquitto_sub -p "$BROKER_PORT" -i "$ID" -u "$USER" -P "$PASS" \
    -t "devices/$ID/down" >"$GW_TMP/sub.out" 2>&1 &
SUB=$!
wait_for_line "$GW_TMP/broker.log" "New client connected .* as $ID" ||
    not_ok "the device's connection is up"
t0=$(date +%s%3N)
st=$(api DELETE "/api/bindings/$ID")
check "DELETE: 200" test "$st" = 200
check "below: the binding id + 1" jq_is "$(cat "$GW_TMP/api.json")" .below $((B1 + 1))
wait_until 10 gone "$SUB"
t1=$(date +%s%3N)
echo "# connection closed $((t1 - t0)) ms after the unbinding"
check "its live connection closed within 10 s" gone "$SUB"
check "its credentials are refused now" not connects "$ID" "$USER" "$PASS"
check "the broker says why" grep -q "refused client '$ID'.*revoked" "$GW_TMP/broker.log"
st=$(api DELETE "/api/bindings/$ID")
check "unbinding again: 404" test "$st" = 404

echo "# 6. bound again: a new binding id, new credentials; the old stay refused"
ota_check "$GW_TMP/r1.json" >/dev/null
CODE2=$(jq -r .activation.code "$GW_TMP/r1.json")
st=$(api POST /api/bindings "{\"code\":\"$CODE2\"}")
B2=$(jq -r .binding.id "$GW_TMP/api.json")
check "201, with a higher id" test "$st" = 201 -a "$B2" -gt "$B1"
ota_check "$GW_TMP/r2.json" >/dev/null
USER2=$(jq -r .mqtt.username "$GW_TMP/r2.json")
PASS2=$(jq -r .mqtt.password "$GW_TMP/r2.json")
check "the new credentials connect" connects "$ID" "$USER2" "$PASS2"
check "the old ones do not" not connects "$ID" "$USER" "$PASS"

echo "# 7. a broker restart: the plugin hears the revocations again"
told=$(count_lines "$GW_LOG" 'told the broker the 1 binding')
kill "$BROKER_PID"
wait_for_exit "$BROKER_PID" >/dev/null
run_mosquitto broker "$GW_TMP/broker.conf" "$BROKER_PORT" ||
    bail "the broker restarts"
BROKER_PID=$MOSQ_PID
wait_for_lines "$GW_LOG" 'told the broker the 1 binding' $((told + 1)) ||
    not_ok "the gateway republished the revocation"
check "after the restart the old credentials are still refused" \
    not connects "$ID" "$USER" "$PASS"
check "and the current ones connect" connects "$ID" "$USER2" "$PASS2"

echo "# 8. the bindings survive the gateway's kill -9"
kill -KILL "$GW_PID"
wait_for_exit "$GW_PID" >/dev/null
start_gateway gw "$cfg" || bail "the gateway starts again"
wait_for_http "$API/healthz" || bail "the API answers again"
st=$(ota_check "$GW_TMP/k.json")
check "its check: known (no activation, no password)" \
    jq -e '(has("activation") | not) and (.mqtt | has("password") | not)' "$GW_TMP/k.json"
check "the binding is listed" sh -c "curl -s -H 'Authorization: Bearer $TOKEN' \
    $API/api/bindings | jq -e '.bindings | map(.client_id) | index(\"$ID\") != null' >/dev/null"

echo "# 9. guessing codes is limited per address and overall"
limited=0
for i in $(seq 1 40); do
    st=$(api POST /api/bindings "{\"code\":\"$(printf '%06d' "$i")\"}")
    [ "$st" != 429 ] || limited=$((limited + 1))
done
echo "# $limited of 40 wrong codes refused with 429"
check "after 10 tries from one address the rest are 429" test "$limited" -ge 29
check "counted" test "$(gw_metric "$API" \
    'hybridgw_bindings_requests_total{result="limited"}' "$TOKEN")" -ge 29
# Other addresses (127.0.0.2, ...) share the bound over all of them: 30 at
# once, of which the first address took 10.
others=0
for a in 2 3 4; do
    for i in $(seq 1 10); do
        st=$(curl -sS --max-time 5 --interface "127.0.0.$a" -o /dev/null \
            -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
            -H 'Content-Type: application/json' \
            --data "{\"code\":\"$(printf '%06d' "$((a * 100 + i))")\"}" \
            "$API/api/bindings")
        [ "$st" != 429 ] || others=$((others + 1))
    done
done
echo "# $others of 30 wrong codes from three other addresses refused with 429"
check "the overall bound holds across addresses" test "$others" -ge 8

echo "# 10. new devices from one address are limited too"
limited=0
for i in $(seq 1 70); do
    st=$(ota_check /dev/null "02:00:00:00:09:$(printf %02x "$i")" "$UUID")
    [ "$st" != 429 ] || limited=$((limited + 1))
done
echo "# $limited of 70 new devices from one address refused with 429"
check "beyond 60 at once from one address: 429" test "$limited" -ge 5
check "counted" test "$(gw_metric "$API" \
    'hybridgw_ota_requests_total{result="limited"}' "$TOKEN")" = "$limited"

echo "# 11. a device with a factory serial number binds itself by its HMAC"
kill "$GW_PID"
wait_for_exit "$GW_PID" >/dev/null
jq --arg k "$FLEET_KEY" '.ota.serial_key = $k' "$cfg" >"$GW_TMP/gw2.json"
start_gateway gw "$GW_TMP/gw2.json" || bail "the gateway starts with a fleet key"
wait_for_http "$API/healthz" || bail "the API answers"
SN=SN20261129A7
MAC3=a0:85:e3:f4:49:77
UUID3=7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d
ota_check "$GW_TMP/s1.json" "$MAC3" "$UUID3" "$SN" >/dev/null
CH=$(jq -r .activation.challenge "$GW_TMP/s1.json")
devkey=$(printf '%s' "$SN" | openssl dgst -sha256 -mac HMAC \
    -macopt "key:$FLEET_KEY" | awk '{print $NF}')
proof=$(printf '%s' "$CH" | openssl dgst -sha256 -mac HMAC \
    -macopt "hexkey:$devkey" | awk '{print $NF}')
bad=$(printf '%s' "$CH" | openssl dgst -sha256 -mac HMAC \
    -macopt "key:not-the-device-key" | awk '{print $NF}')
body() {
    printf '{"algorithm":"hmac-sha256","serial_number":"%s","challenge":"%s","hmac":"%s"}' \
        "$SN" "$CH" "$1"
}
st=$(activate "$GW_TMP/s2.json" "$(body "$bad")" "$MAC3" "$UUID3")
check "a wrong HMAC: 403" test "$st" = 403
st=$(ota_check "$GW_TMP/s3.json" "$MAC3" "$UUID3" "$SN")
check "and still no credentials" jq -e 'has("mqtt") | not' "$GW_TMP/s3.json"
st=$(activate "$GW_TMP/s4.json" "$(body "$proof")" "$MAC3" "$UUID3")
check "the right HMAC: 200, bound" test "$st" = 200
st=$(ota_check "$GW_TMP/s5.json" "$MAC3" "$UUID3" "$SN")
check "its next check: credentials" jq -e '.mqtt.password | length > 0' "$GW_TMP/s5.json"
check "listed as bound by its hmac" sh -c "curl -s -H 'Authorization: Bearer $TOKEN' \
    $API/api/bindings | jq -e '.bindings[] | select(.mac == \"$MAC3\") | .by == \"hmac\"' >/dev/null"
check "activations counted" test "$(gw_metric "$API" \
    'hybridgw_ota_activations_total{result="denied"}' "$TOKEN")" = 1

echo "# 12. one serial number binds one identity; a reissue needs its own"
MAC4=a0:85:e3:f4:49:78
UUID4=8b7c6d5e-4f3a-4b2c-9d0e-1f2a3b4c5d6e
ota_check "$GW_TMP/t1.json" "$MAC4" "$UUID4" "$SN" >/dev/null
CH=$(jq -r .activation.challenge "$GW_TMP/t1.json")
proof=$(printf '%s' "$CH" | openssl dgst -sha256 -mac HMAC \
    -macopt "hexkey:$devkey" | awk '{print $NF}')
st=$(activate "$GW_TMP/t2.json" "$(body "$proof")" "$MAC4" "$UUID4")
check "the same serial's proof for another identity: 403 ($(cat "$GW_TMP/t2.json"))" \
    test "$st" = 403
ota_check "$GW_TMP/s6.json" "$MAC3" "$UUID3" "$SN" >/dev/null
CH=$(jq -r '.activation.challenge // empty' "$GW_TMP/s6.json")
check "the bound serial device's later check: no password, a challenge, no code" \
    jq -e '(.mqtt | has("password") | not) and (.activation | has("code") | not)' \
    "$GW_TMP/s6.json"
proof=$(printf '%s' "$CH" | openssl dgst -sha256 -mac HMAC \
    -macopt "hexkey:$devkey" | awk '{print $NF}')
st=$(activate "$GW_TMP/s7.json" "$(body "$proof")" "$MAC3" "$UUID3")
check "its proof: 200" test "$st" = 200
ota_check "$GW_TMP/s8.json" "$MAC3" "$UUID3" "$SN" >/dev/null
check "then its credentials again, once" jq -e '.mqtt.password | length > 0' "$GW_TMP/s8.json"
ota_check "$GW_TMP/s9.json" "$MAC3" "$UUID3" >/dev/null
check "and not without a proof" jq -e '.mqtt | has("password") | not' "$GW_TMP/s9.json"

finish
