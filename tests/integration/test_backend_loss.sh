#!/usr/bin/env bash
# No silent loss (docs/protocol.md section 6.4): the mistake a new user
# makes, a backend url without ?from=mqtt_gateway while the gateway speaks
# v2, makes the xiaozhi server (here the mock, which does the same) send
# bare Opus packets. The gateway cannot play them: it must say so once per
# connection, at warning level, with the likely cause, count every frame
# per backend and reason, and --check-config must warn about the url.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

start_broker broker || bail "the broker starts"
# --framing auto: raw Opus, as the server, since the query is missing.
start_backend mock --turn-frames 5 --tts-frames 6 --tts-stop-delay-ms 100
events=$BACKEND_EVENTS
http_port=$(free_port)
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"limits\": { \"backend_hello_timeout_ms\": 3000 }"
# The user's url: the path is right, the query is not there.
# The broker and the backend by name: their lookups show in /metrics.
sed -i "s|/xiaozhi/v1/?from=mqtt_gateway|/xiaozhi/v1/|;
        s|ws://127.0.0.1:|ws://localhost:|;
        s|\"host\": \"127.0.0.1\"|\"host\": \"localhost\"|;
        s|\"http\": { \"port\": 0 }|\"http\": { \"port\": $http_port }|;
        s|\"level\": \"debug\"|\"level\": \"info\"|" "$cfg"
grep -q '"url": "ws://localhost:[0-9]*/xiaozhi/v1/"' "$cfg" ||
    bail "the config has the url without the query"

echo "# 1. --check-config warns about the url but accepts the config"
out=$("$GW" -c "$cfg" --check-config 2>&1)
rc=$?
while IFS= read -r l; do echo "#   $l"; done <<<"$out"
check "the config is still valid (exit 0)" test "$rc" -eq 0
check "a warning names the backend and the missing query" \
    grep -Eq 'warn.*backends\[0\].*mock.*\?from=mqtt_gateway' <<<"$out"

echo "# 1b. backends[].headers: values are secrets, bad ones are refused"
jq '.backends[0].headers = {"X-Proxy-Token": "tok-secret-1"}' "$cfg" \
    >"$GW_TMP/headers.json"
out=$("$GW" -c "$GW_TMP/headers.json" --check-config 2>&1)
check "a config with headers is valid" test $? -eq 0
check "and the check does not print the value" not grep -q tok-secret <<<"$out"
jq '.backends[0].headers = {"Host": "tok-secret-2", "X-A": "a\r\nX-B: 1"}' \
    "$cfg" >"$GW_TMP/bad-headers.json"
out=$("$GW" -c "$GW_TMP/bad-headers.json" --check-config 2>&1)
rc=$?
echo "$out" | grep headers | sed 's/^/#   /'
check "a header the gateway sets is refused (exit 1)" test "$rc" -eq 1
check "naming it" grep -q 'backends\[0\].headers.Host: is set by the gateway' \
    <<<"$out"
check "so is a value with CR LF" \
    grep -q 'backends\[0\].headers.X-A: must be printable ASCII' <<<"$out"
check "without printing either value" not grep -q 'tok-secret\|X-B' <<<"$out"

start_gateway gw "$cfg" || bail "the gateway starts"
peer_log "$GW_TMP/devices.err"

device() {
    plain_device "$1" --turns 2 --fast --frames 5 --turn-timeout 3000
}
warn_re=' warn .*backend mock \(framing v2\): dropped'

echo "# 2. a conversation with the backend sending bare Opus"
r=$(device 'GID_test@@@02_00_00_00_00_01@@@loss-1')
echo "#   device: $(jq -c '{ok, reason, downlink: .downlink.played}' <<<"$r")"
check "the device heard nothing" jq_is "$r" .downlink.played 0
check "and says so" jq_is "$r" .ok false
sent=$(grep '"ev":"tts"' "$events" | jq -s 'map(.frames) | add // 0')
check "the backend did send audio ($sent frames)" test "$sent" -ge 6
check "the gateway warns" wait_for_line "$GW_LOG" "$warn_re" 10
line=$(grep -E "$warn_re" "$GW_LOG" | head -n 1)
echo "#   $line"
check "the warning says what came (length and first bytes in hex)" \
    grep -Eq '[0-9]+ bytes \(([0-9a-f]{2} ){7,}' <<<"$line"
check "the warning gives the likely cause" \
    grep -q 'lacks ?from=mqtt_gateway' <<<"$line"
check "once for the connection, though more frames were dropped" \
    test "$(grep -cE "$warn_re" "$GW_LOG")" -eq 1

echo "# 3. a second connection warns again, once"
r=$(device 'GID_test@@@02_00_00_00_00_02@@@loss-2')
check "the second device heard nothing either" jq_is "$r" .downlink.played 0
check "one more warning" wait_for_lines "$GW_LOG" "$warn_re" 2 10
sent=$(grep '"ev":"tts"' "$events" | jq -s 'map(.frames) | add // 0')
check "no third one" test "$(grep -cE "$warn_re" "$GW_LOG")" -eq 2

echo "# 4. every dropped frame is counted per backend and reason"
metrics=$(curl -fsS --max-time 5 "http://127.0.0.1:$http_port/metrics")
sample='hybridgw_backend_frames_dropped_total{backend="mock",reason="bare_opus"}'
n=$(awk -v s="$sample" '$1 == s { print $2 }' <<<"$metrics")
echo "#   $sample ${n:-absent}; the backend sent $sent"
check "the counter holds every frame the backend sent" \
    test "${n:-0}" -eq "$sent"

echo "# 5. names were looked up off the loop, and cached"
dns() { awk -v s="hybridgw_dns_$1_total{resolver=\"$2\"}" \
    '$1 == s { print $2 }' <<<"$metrics"; }
echo "#   lookups: backends $(dns lookups backends), broker $(dns lookups broker);" \
    "cache hits: backends $(dns cache_hits backends)"
check "the broker's name was looked up once" test "$(dns lookups broker)" = 1
check "the backend's name at least once" test "$(dns lookups backends)" -ge 1
check "no lookup failed" test "$(dns failures backends)$(dns failures broker)" = 00
finish
