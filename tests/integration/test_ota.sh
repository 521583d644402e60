#!/usr/bin/env bash
# Provisioning without the xiaozhi manager (docs/protocol.md section 9):
# the firmware's OTA check, sent as the firmware sends it (its headers, its
# system-information body), answered with MQTT credentials that a real
# mosquitto loading our plugin accepts, good enough for a whole
# conversation; a tampered password is refused. Also: --check-config
# explains bad ota values, malformed checks get a 400 that says why and are
# counted with nothing else disturbed, secrets stay out of the log, and the
# endpoint is a 404 while ota.enabled is false (also after a reload).
# shellcheck disable=SC2016 # $id and $p in the jq filters are jq's
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

MAC=a0:85:e3:f4:49:34
UUID=0f8e1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b
BOARD=bread-compact-wifi
VERSION=2.4.2

# firmware_body [MAC] [UUID]: the system information as 2.4.2 builds it
# (Board::GetSystemInfoJson, WifiBoard::GetBoardJson): no spaces but the
# one after "partition_table":.
firmware_body() {
    local mac=${1:-$MAC} uuid=${2:-$UUID}
    printf '%s' '{"version":2,"language":"zh-CN","flash_size":16777216,' \
        '"minimum_free_heap_size":"7265024","mac_address":"'"$mac"'",' \
        '"uuid":"'"$uuid"'","chip_model_name":"esp32s3",' \
        '"chip_info":{"model":9,"cores":2,"revision":2,"features":18},' \
        '"application":{"name":"xiaozhi","version":"'"$VERSION"'",' \
        '"compile_time":"Aug  8 2026T08:33:45Z","idf_version":"v5.5.1",' \
        '"elf_sha256":"4e1a9d0f2c3b5a6978e1d2c3b4a5968778e1d2c3b4a5968778e1d2c3b4a59687"},' \
        '"partition_table": [{"label":"nvs","type":1,"subtype":2,"address":36864,"size":16384},' \
        '{"label":"otadata","type":1,"subtype":0,"address":53248,"size":8192},' \
        '{"label":"phy_init","type":1,"subtype":1,"address":61440,"size":4096},' \
        '{"label":"ota_0","type":0,"subtype":16,"address":131072,"size":4128768},' \
        '{"label":"ota_1","type":0,"subtype":17,"address":4259840,"size":4128768},' \
        '{"label":"assets","type":162,"subtype":0,"address":8388608,"size":8388608}],' \
        '"ota":{"label":"ota_0"},' \
        '"display":{"monochrome":false,"width":240,"height":240},' \
        '"board":{"type":"'"$BOARD"'","name":"'"$BOARD"'","manufacturer":"",' \
        '"ssid":"lab","rssi":-51,"channel":6,"ip":"127.0.0.1","mac":"'"$mac"'"}}'
}

# ota_check OUT BODY_FILE: POST to the OTA URL with the firmware's
# headers (Ota::SetupHttp), Device-Id and Client-Id from DEVICE_ID and
# CLIENT_ID (default MAC and UUID; "-" leaves the header out); the answer
# goes to OUT, the status is printed.
ota_check() {
    local out=$1 body=$2 id=() dev=${DEVICE_ID:-$MAC} cid=${CLIENT_ID:-$UUID}
    [ "$dev" = - ] || id+=(-H "Device-Id: $dev")
    [ "$cid" = - ] || id+=(-H "Client-Id: $cid")
    curl -sS --max-time 5 -o "$out" -w '%{http_code}' -X POST \
        -H 'Accept:' \
        -H 'Activation-Version: 1' \
        "${id[@]}" \
        -H "User-Agent: $BOARD/$VERSION" \
        -H 'Accept-Language: zh-CN' \
        -H 'Content-Type: application/json' \
        --data-binary "@$body" "$OTA_URL"
}

echo "# 1. --check-config explains bad ota values, and never prints the key"
start_plugin_broker broker || bail "the broker starts with the plugin"
start_backend mock --turn-frames 5 --tts-frames 6
http_port=$(free_port)
OTA_URL=http://127.0.0.1:$http_port/xiaozhi/ota/
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"ota\": { \"enabled\": true,
    \"mqtt_endpoint\": \"127.0.0.1:$BROKER_PORT\",
    \"device_key\": \"$PLUGIN_KEY\", \"group\": \"GID_{board}\",
    \"activation\": \"off\" }"
# With an API token: the firmware sends none, and needs none.
TOKEN=ota-test-token-5f2c
sed -i "s|\"http\": { \"port\": 0 }|\"http\": { \"port\": $http_port, \"token\": \"$TOKEN\" }|" "$cfg"
jq '.ota.enabled = true | .ota.mqtt_endpoint = "mqtt://broker" |
    .ota.firmware = {"version": "2.x"} | .ota.device_key = "never-print-me"' \
    "$cfg" >"$GW_TMP/bad.json"
out=$("$GW" -c "$GW_TMP/bad.json" --check-config 2>&1)
rc=$?
grep ota <<<"$out" | sed 's/^/#   /'
check "a bad ota section is refused (exit 1)" test "$rc" -eq 1
check "naming the endpoint and what it must be" \
    grep -q 'ota.mqtt_endpoint: must be host or host:port' <<<"$out"
check "naming the firmware version" \
    grep -q 'ota.firmware.version: must be dot-separated numbers' <<<"$out"
check "without printing the device key" not grep -q never-print-me <<<"$out"
jq 'del(.ota.device_key)' "$cfg" >"$GW_TMP/nokey.json"
out=$("$GW" -c "$GW_TMP/nokey.json" --check-config 2>&1)
check "enabled without a key is refused, and says which key" \
    grep -q 'ota.device_key: must be set when ota.enabled is true' <<<"$out"
out=$("$GW" -c "$cfg" --check-config 2>&1)
check "the test config itself is valid" test $? -eq 0
check "with a warning that devices cannot reach a loopback listener" \
    grep -q 'ota.enabled: http.listen is a loopback address' <<<"$out"
check "and one for the loopback broker address it hands out" \
    grep -q 'ota.mqtt_endpoint: a loopback address' <<<"$out"

start_gateway gw "$cfg" || bail "the gateway starts"
wait_for_http "http://127.0.0.1:$http_port/healthz" || bail "the API answers"
check "activation off (a lab): the start says the endpoint is open" \
    grep -q 'warn.*ota.activation is off: the OTA endpoint hands MQTT credentials to anyone' "$GW_LOG"

echo "# 2. the firmware's check gets MQTT credentials, time and firmware"
firmware_body >"$GW_TMP/body.json"
before_ms=$(($(date +%s%3N) - 1000))
status=$(ota_check "$GW_TMP/answer.json" "$GW_TMP/body.json")
after_ms=$(($(date +%s%3N) + 1000))
a=$(cat "$GW_TMP/answer.json")
echo "# answer: $(jq -c '.mqtt.password = "(hidden)"' <<<"$a" 2>/dev/null || echo "$a")"
check "200, without the API's token (the firmware sends none)" \
    test "$status" = 200
ID="GID_$BOARD@@@${MAC//:/_}@@@$UUID"
check "client id: group from the board, the MAC, the device's uuid" \
    jq_is "$a" .mqtt.client_id "$ID"
check "endpoint: the broker as configured" \
    jq_is "$a" .mqtt.endpoint "127.0.0.1:$BROKER_PORT"
check "username: base64 of the address the gateway saw" \
    test "$(jq -r .mqtt.username <<<"$a" | base64 -d)" = '{"ip":"127.0.0.1"}'
check "publish_topic: the plugin's device topic" \
    jq_is "$a" .mqtt.publish_topic device-server
check "subscribe_topic: the device's down topic (old firmware)" \
    jq_is "$a" .mqtt.subscribe_topic "devices/$ID/down"
check "keepalive 240" jq_is "$a" .mqtt.keepalive 240
check "server_time: now, in milliseconds" jq -e >/dev/null \
    ".server_time.timestamp >= $before_ms and .server_time.timestamp <= $after_ms and .server_time.timezone_offset == 0" \
    <<<"$a"
check "firmware: its own version and no url (no upgrade)" \
    jq -e '.firmware == {"version":"'"$VERSION"'","url":""}' <<<"$a" >/dev/null
check "no websocket section (the device would pick MQTT anyway)" \
    jq -e 'has("websocket") | not' <<<"$a"
USER_B64=$(jq -r .mqtt.username <<<"$a")
PASS=$(jq -r .mqtt.password <<<"$a")

# raw_check: the same check framed byte for byte as the firmware's HTTP
# client (esp-ml307 HttpClient::BuildHttpRequest) writes it, on a plain
# socket; prints the whole response.
raw_check() {
    local len
    len=$(stat -c %s "$GW_TMP/body.json")
    exec 3<>"/dev/tcp/127.0.0.1/$http_port" || return 1
    {
        printf 'POST /xiaozhi/ota/ HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n' "$http_port"
        printf 'Activation-Version: 1\r\nDevice-Id: %s\r\nClient-Id: %s\r\n' \
            "$MAC" "$UUID"
        printf 'User-Agent: %s/%s\r\nAccept-Language: zh-CN\r\n' "$BOARD" "$VERSION"
        printf 'Content-Type: application/json\r\nContent-Length: %s\r\n' "$len"
        printf 'Connection: close\r\n\r\n'
        cat "$GW_TMP/body.json"
    } >&3
    timeout 5 cat <&3
    exec 3<&-
}
raw=$(raw_check)
check "framed as the firmware's HTTP client frames it: 200" \
    grep -q '^HTTP/1.1 200' <<<"$raw"
check "with the same credentials" \
    jq -e --arg id "$ID" --arg p "$PASS" \
    '.mqtt.client_id == $id and .mqtt.password == $p' \
    <<<"$(sed '1,/^\r$/d' <<<"$raw")" >/dev/null

echo "# 3. the credentials log in: a stock device has a conversation"
peer_log "$GW_TMP/devices.err"
r=$("$SIM" device --broker "$(jq -r .mqtt.endpoint <<<"$a")" \
    --client-id "$ID" --username "$USER_B64" --password "$PASS" \
    --publish-topic "$(jq -r .mqtt.publish_topic <<<"$a")" \
    --turns 1 --fast --json 2>>"$GW_TMP/devices.err" | tail -n 1)
device_ok "the provisioned device completes a turn" "$r"
check "the gateway served it (its session became active)" \
    grep -q "dev=$ID.*session active" "$GW_LOG"

echo "# 4. a tampered password is refused by the broker"
# last=${PASS: -2:1} is a base64 digit; any other one breaks the HMAC.
last=${PASS: -2:1}
if [ "$last" = A ]; then flip=B; else flip=A; fi
BAD_PASS="${PASS:0:${#PASS}-2}$flip="
out=$(mosquitto_pub -p "$BROKER_PORT" -i "$ID" -u "$USER_B64" \
    -P "$BAD_PASS" -t device-server -m '{}' 2>&1)
rc=$?
refused_login() { [ "$rc" -ne 0 ] && grep -q "not authorised" <<<"$out"; }
check "the connection is refused" refused_login
check "the broker logs a bad password for that client" \
    grep -qF "hybridgw_broker: refused client '$ID' from 127.0.0.1: bad password" \
    "$GW_TMP/broker.log"
out=$(mosquitto_pub -p "$BROKER_PORT" -i "$ID" -u "$USER_B64" -P "$PASS" \
    -t device-server -m '{}' 2>&1)
check "while the issued one still connects" test $? -eq 0

echo "# 5. malformed checks: 400 saying why, counted, nothing else affected"
# refused_400 WHAT WHY BODY_FILE: the check (DEVICE_ID, CLIENT_ID as for
# ota_check) is a 400 whose error says WHY.
refused_400() {
    local what=$1 why=$2 body=$3 st
    st=$(ota_check "$GW_TMP/err.json" "$body")
    if [ "$st" = 400 ] && grep -qF "$why" "$GW_TMP/err.json"; then
        ok "$what: 400 \"$why\""
    else
        not_ok "$what: got $st $(cat "$GW_TMP/err.json")"
    fi
}
DEVICE_ID=- refused_400 "no Device-Id" "Device-Id header missing" \
    "$GW_TMP/body.json"
DEVICE_ID=a0-85-e3-f4-49-34 refused_400 "a Device-Id that is no MAC" \
    "Device-Id is not a MAC address" "$GW_TMP/body.json"
CLIENT_ID='a@@@b' refused_400 "a Client-Id that would break the client id" \
    "Client-Id must be" "$GW_TMP/body.json"
# The firmware pastes the Wi-Fi name into its JSON unescaped: a network
# named with a '"' (or in GBK) breaks the body of a device that is fine.
sed 's/"ssid":"[^"]*"/"ssid":"lab "2""/' "$GW_TMP/body.json" >"$GW_TMP/ssid.json"
st=$(ota_check "$GW_TMP/ssid.json.out" "$GW_TMP/ssid.json")
check "a body broken by its Wi-Fi name is still answered (200)" test "$st" = 200
check "with the device's credentials" jq -e --arg id "$ID" \
    '.mqtt.client_id == $id' "$GW_TMP/ssid.json.out"
check "and a warning that the body was ignored" \
    grep -q "ota.*$ID from 127.0.0.1: body ignored (.*JSON object" "$GW_LOG"
firmware_body 02:00:00:00:00:01 >"$GW_TMP/other.json"
refused_400 "a body naming another device" \
    "mac_address is not the Device-Id header" "$GW_TMP/other.json"
# Under http.max_body_bytes (262144) but over the check's own 65536.
{ printf '{"pad":"'; head -c 70000 /dev/zero | tr '\0' x; printf '"}'; } \
    >"$GW_TMP/big.json"
st=$(ota_check "$GW_TMP/err.json" "$GW_TMP/big.json")
check "a body over 65536 bytes is 413" test "$st" = 413
st=$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "$OTA_URL")
check "a GET is 405" test "$st" = 405
metrics=$(curl -fsS --max-time 5 -H "Authorization: Bearer $TOKEN" \
    "http://127.0.0.1:$http_port/metrics")
grep '^hybridgw_ota' <<<"$metrics" | sed 's/^/#   /'
check "metrics: 5 malformed" \
    grep -qx 'hybridgw_ota_requests_total{result="malformed"} 5' <<<"$metrics"
check "metrics: 3 issued (curl, the raw socket, the broken body)" \
    grep -qx 'hybridgw_ota_requests_total{result="issued"} 3' <<<"$metrics"
check "metrics: 1 body ignored" \
    grep -qx 'hybridgw_ota_bodies_ignored_total 1' <<<"$metrics"
check "metrics: 1 wrong method" \
    grep -qx 'hybridgw_ota_requests_total{result="method"} 1' <<<"$metrics"
check "each refusal is a warning naming the reason" \
    test "$(grep -c 'ota.*POST /xiaozhi/ota/ from 127.0.0.1: 4[01][03]' "$GW_LOG")" -eq 5
status=$(ota_check "$GW_TMP/again.json" "$GW_TMP/body.json")
check "the next good check is answered" test "$status" = 200
check "with the same client id and password" jq -e \
    --arg id "$ID" --arg p "$PASS" '.mqtt.client_id == $id and .mqtt.password == $p' \
    "$GW_TMP/again.json"
check "the gateway is healthy" answers "http://127.0.0.1:$http_port/healthz"

echo "# 6. secrets stay out of the log"
check "no password in the gateway's log" not grep -qF "$PASS" "$GW_LOG"
check "no device key in the gateway's log" not grep -qF "$PLUGIN_KEY" "$GW_LOG"
check "the issue is logged with the client id" \
    grep -q "ota.*$ID from 127.0.0.1: credentials issued" "$GW_LOG"

echo "# 7. off unless configured: a reload with ota.enabled false gives 404"
jq '.ota.enabled = false' "$cfg" >"$cfg.new" && mv "$cfg.new" "$cfg"
n=$(count_lines "$GW_LOG" 'reloaded')
kill -HUP "$GW_PID"
check "the gateway reloads" wait_for_lines "$GW_LOG" 'reloaded' $((n + 1))
status=$(ota_check "$GW_TMP/off.json" "$GW_TMP/body.json")
check "the check is now a 404" test "$status" = 404
check "and carries no credentials" not grep -q mqtt "$GW_TMP/off.json"
jq 'del(.ota)' "$cfg" >"$GW_TMP/no-ota.json"
stop_pid "$GW_PID"
check "the gateway stops cleanly" test "$EXIT_CODE" -eq 0
start_gateway gw2 "$GW_TMP/no-ota.json" || bail "a gateway without ota starts"
wait_for_http "http://127.0.0.1:$http_port/healthz" || bail "its API answers"
status=$(ota_check "$GW_TMP/off2.json" "$GW_TMP/body.json")
check "with no ota section at all it is a 404 too" test "$status" = 404
stop_pid "$GW_PID"
check "which stops cleanly" test "$EXIT_CODE" -eq 0

finish
