#!/usr/bin/env bash
# The turn timing of /metrics and the operator page's charts, on real
# parts: mosquitto with the plugin, the gateway, the mock backend and a
# simulated push-to-talk device (listen stop ends each turn). Each turn
# must be counted once in each hybridgw_turn_*_seconds histogram, with
# sums that are plausible (no timing bound that a loaded machine could
# break); /api/series must carry the turns; headless Chromium
# (tests/web/charts.mjs) must draw the charts with those figures.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

TURNS=3
need_plugin
start_plugin_broker broker || bail "broker with the plugin starts"
# A turn ends on the device's listen stop; the reply is a tts start and
# 5 audio frames.
start_backend backend --turn-frames 0 --tts-frames 5
TOKEN=it-turns-bearer-7c1f
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
GW_UDP_PORT=$(free_port --udp)
cat >"$cfg" <<JSON
{
  "instance": "turns",
  "mqtt": { "host": "127.0.0.1", "port": $BROKER_PORT, "keepalive": 10,
            "username": "$GW_MQTT_USER", "password": "$GW_MQTT_PASS" },
  "udp": { "bind": "127.0.0.1", "port": $GW_UDP_PORT, "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock",
                  "url": "ws://127.0.0.1:$BACKEND_PORT/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $HTTP_PORT, "token": "$TOKEN",
            "ui_dir": "$src/web" },
  "log": { "level": "debug" }
}
JSON
start_gateway gw "$cfg" || bail "gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"

metric() { gw_metric "$BASE" "$1" "$TOKEN"; }
for h in listen_stop tts_start first_audio tts_to_audio; do
    check "hybridgw_turn_${h}_seconds is 0 before any turn" \
        test "$(metric "hybridgw_turn_${h}_seconds_count")" = 0
done

echo "# a conversation of $TURNS push-to-talk turns"
ID='GID_test@@@02_00_00_00_0b_01@@@turns'
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "$ID" --json --mode manual --turns $TURNS --frames 10 \
    --fast >"$GW_TMP/dev.out" 2>"$GW_TMP/dev.err"
peer_log "$GW_TMP/dev.err"
r=$(tail -n 1 "$GW_TMP/dev.out")
device_ok "the device completes $TURNS turns" "$r"
check "the backend heard $TURNS listen stops" \
    test "$(grep -c '"ev":"tts"' "$BACKEND_EVENTS")" = "$TURNS"

curl -s --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE/metrics" \
    >"$GW_TMP/metrics.txt"
peer_log "$GW_TMP/metrics.txt"
# value NAME: the sample NAME (with its labels) of the scrape.
value() { awk -v k="$1" 'index($0, k " ") == 1 { print $NF }' "$GW_TMP/metrics.txt"; }
for h in listen_stop tts_start first_audio tts_to_audio; do
    name=hybridgw_turn_${h}_seconds
    check "$name is a histogram" grep -qx "# TYPE $name histogram" "$GW_TMP/metrics.txt"
    check "$name counts each turn once ($(value "${name}_count"))" \
        test "$(value "${name}_count")" = "$TURNS"
    check "$name's +Inf bucket is its count" \
        test "$(value "${name}_bucket{le=\"+Inf\"}")" = "$TURNS"
    # Generous: a second per turn is far beyond any healthy share, and
    # never reached on a loaded test machine.
    check "$name's sum is plausible ($(value "${name}_sum") s)" \
        awk -v s="$(value "${name}_sum")" -v n="$TURNS" \
        'BEGIN { exit !(s != "" && s >= 0 && s < n) }'
done
check "the first audio waits at least for its tts start's head start" \
    awk -v s="$(value hybridgw_turn_first_audio_seconds_sum)" -v n="$TURNS" \
    'BEGIN { exit !(s > 0) }'

series() {
    curl -s --max-time 5 -H "Authorization: Bearer $TOKEN" "$BASE/api/series"
}
r=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/api/series")
check "/api/series wants the token ($r)" test "$r" = 401
s=$(series)
check "/api/series carries the $TURNS turns of each histogram" \
    jq -e --argjson n "$TURNS" '[.samples[].listen_stop_n] | add == $n' <<<"$s"
check "with their means" \
    jq -e '[.samples[] | select(.tts_start_n > 0) | .tts_start_ms >= 0] | all' <<<"$s"
check "and the packets the device and the gateway sent" \
    jq -e '[.samples[].udp_rx_per_s] | add > 0' <<<"$s"

echo "# the charts in headless Chromium"
if ! command -v node >/dev/null ||
    [ ! -f "$src/tests/web/node_modules/playwright-core/package.json" ]; then
    bail "node and tests/web's npm packages are installed (scripts/setup.sh)"
fi
CHROMIUM=${GW_CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || bail "Chromium is installed at $CHROMIUM (scripts/setup.sh)"
ARTIFACTS=$(cd "$(dirname "$GW")/.." && pwd)/test-artifacts/turn_charts
rm -rf "$ARTIFACTS"
timeout 90 node "$src/tests/web/charts.mjs" --base "$BASE" --token "$TOKEN" \
    --turns "$TURNS" --out "$ARTIFACTS" --chromium "$CHROMIUM" \
    >"$GW_TMP/charts.out" 2>&1
rc=$?
while IFS= read -r line; do
    case $line in
    "ok - "*) ok "page: ${line#ok - }" ;;
    "not ok - "*) not_ok "page: ${line#not ok - }" ;;
    "# "*) echo "$line" ;;
    esac
done <"$GW_TMP/charts.out"
check "charts.mjs ran every check and passed (exit $rc)" test "$rc" -eq 0

stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
check "the gateway logged no error" \
    not grep -E ' error |ERROR|AddressSanitizer|runtime error' "$GW_LOG"
finish
