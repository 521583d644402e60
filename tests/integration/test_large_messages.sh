#!/usr/bin/env bash
# Large messages to devices on real parts: mosquitto with the plugin and
# the shipped configs' size limits, the gateway, mock backends sending
# firmware 2.4 sentence_starts with glyph_push bitmaps (90 KB, and 100 of
# 120 KB), the push API to an idle device (120 KB). Each arrives byte for
# byte (SHA-256 on both sides), the gateway's memory comes back after the
# stream, the device hello's features and text_font reach the backend
# unchanged, and a device's own publishes stay bounded at 64 KiB by the
# plugin.
# shellcheck disable=SC2016 # jq programs name their own $variables
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

TOKEN=it-large-bearer-77c1
USER_NAME=eyJpcCI6IjEyNy4wLjAuMSJ9 # base64 of {"ip":"127.0.0.1"}

echo "# the shipped broker configs' limits"
limit_of() { awk -v k="$1" '$1 == k { print $2 }' "$src/$2"; }
msl=$(limit_of message_size_limit docker/mosquitto.conf)
for f in deploy/mosquitto-hybridgw.conf docker/mosquitto.conf; do
    check "$f: message_size_limit ${msl:-?} takes 128 KiB" \
        test "$(limit_of message_size_limit "$f")" = "$msl" -a "${msl:-0}" -ge 131072
    check "$f: max_packet_size, 1 KiB above it" \
        test "$(limit_of max_packet_size "$f")" = "$((msl + 1024))"
done
BROKER_SIZE_LIMIT=$msl
start_plugin_broker broker || bail "the broker with the plugin starts"
check "the test broker has the shipped limits" \
    grep -qx "max_packet_size $((msl + 1024))" "$GW_TMP/broker.conf"

start_backend glyph90 --glyph-bytes 92160 --turn-frames 10 --tts-frames 4 ||
    bail "the 90 KB backend starts"
B90=$BACKEND_PORT B90_EVENTS=$BACKEND_EVENTS
start_backend stream --glyph-bytes 122880 --glyph-messages 100 \
    --turn-frames 10 --tts-frames 4 || bail "the streaming backend starts"
BSTREAM=$BACKEND_PORT STREAM_EVENTS=$BACKEND_EVENTS
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
# The stream goes to the devices of MAC ...:b1, everyone else gets 90 KB.
write_gateway_config "$GW_TMP/gw.in" \
    "\"http\": { \"listen\": \"127.0.0.1\", \"port\": $HTTP_PORT, \"token\": \"$TOKEN\" }"
jq --arg a "ws://127.0.0.1:$B90/xiaozhi/v1/?from=mqtt_gateway" \
    --arg b "ws://127.0.0.1:$BSTREAM/xiaozhi/v1/?from=mqtt_gateway" \
    '.backends = [{name: "g90", url: $a}, {name: "stream", url: $b}]
     | .routes = [{match: {macs: ["02:00:00:00:02:b1"]}, backends: ["stream"]},
                  {match: {}, backends: ["g90"]}]
' "$GW_TMP/gw.in" >"$GW_TMP/gw.json"
check "the config loads (--check-config)" "$GW" --check-config -c "$GW_TMP/gw.json"
# AddressSanitizer keeps freed memory in quarantine (256 MB), which would
# read as growth: without it, what the gateway keeps is what it holds.
if ldd "$GW" | grep -q libasan; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0
fi
start_gateway gw "$GW_TMP/gw.json" || bail "the gateway starts"
peer_log "$GW_TMP/devices.err"

# talk NAME MAC_LAST_BYTE ARGS...: one conversation of a stock device in the
# foreground; transcript in $GW_TMP/NAME.out, prints its JSON result.
talk() {
    local name=$1 mac=$2
    shift 2
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
        --client-id "GID_test@@@02_00_00_00_02_${mac}@@@large-$name" --json \
        --turns 1 --fast "$@" >"$GW_TMP/$name.out" 2>>"$GW_TMP/devices.err"
    tail -n 1 "$GW_TMP/$name.out"
}
# received NAME: "bytes sha256" of each large message the device took.
received() {
    sed -n 's/.*< large message: \([0-9]*\) bytes, sha256 \([0-9a-f]*\)$/\1 \2/p' \
        "$GW_TMP/$1.out"
}
# sent EVENTS: the same of each the backend sent.
sent() {
    jq -r 'select(.ev == "big") | "\(.bytes) \(.sha256)"' "$1"
}
# same_text A B: true when the two texts are equal and not empty.
same_text() {
    [ -n "$1" ] && [ "$1" = "$2" ] && return 0
    echo "# got $(wc -l <<<"$1") lines, want $(wc -l <<<"$2"):" >&2
    diff <(echo "$1") <(echo "$2") | head -n 6 | sed 's/^/#   /' >&2
    return 1
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$GW_PID/status"; }

echo "# 1. a 90 KB sentence_start in a conversation; the hello's features"
r=$(talk g90 a0 --glyph-push --aec)
device_ok "the device's conversation succeeds" "$r"
check "it took one large message" jq_is "$r" .messages.oversize 1
check "byte for byte what the backend sent (90 KB)" \
    same_text "$(received g90)" "$(sent "$B90_EVENTS")"
check "  of about 90 KB" \
    test "$(sent "$B90_EVENTS" | cut -d' ' -f1)" -gt 90000
hello=$(jq -c 'select(.ev == "hello") | .msg' "$B90_EVENTS" | head -n 1)
check "features reach the backend unchanged" \
    jq_is "$hello" '.features | tojson' '{"aec":true,"mcp":true,"glyph_push":true}'
check "text_font reaches the backend unchanged" \
    jq_is "$hello" '.text_font | tojson' \
    '{"bundle":"noto-v1","charset":"common","size":20,"bpp":4}'
check "the backend connection closed normally (not 1009)" \
    not grep -q "message too big" "$GW_LOG"

echo "# 2. 100 sentence_starts of 120 KB, twice: each arrives, memory comes back"
rss0=$(rss_kb)
r=$(talk stream1 b1)
device_ok "the first streaming conversation succeeds" "$r"
check "it took 100 large messages" jq_is "$r" .messages.oversize 100
check "each byte for byte, in order" \
    same_text "$(received stream1)" "$(sent "$STREAM_EVENTS")"
rss1=$(rss_kb)
r=$(talk stream2 b1)
device_ok "the second streaming conversation succeeds" "$r"
check "each byte for byte again" \
    same_text "$(received stream2)" "$(sent "$STREAM_EVENTS" | tail -n 100)"
rss2=$(rss_kb)
mb=$(($(sent "$STREAM_EVENTS" | awk '{ s += $1 } END { print s }') / 1000000))
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$GW_PID/status")
gw_note "gateway VmRSS: ${rss0} kB before, ${rss1} kB after the first $((mb / 2)) MB, ${rss2} kB after the second (peak ${hwm} kB)"
# 100 messages kept would be 12 MB; the limit's worth for a buffer or two
# is what may stay.
check "after 12 MB the gateway grew by less than 4 MB ($((rss1 - rss0)) kB)" \
    test $((rss1 - rss0)) -lt 4096
check "the second 12 MB added less than 1 MB ($((rss2 - rss1)) kB)" \
    test $((rss2 - rss1)) -lt 1024

echo "# 3. the push API: 120 KB to an idle device"
DEV=GID_test@@@02_00_00_00_02_c0@@@large-idle
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "$DEV" --json --idle >"$GW_TMP/idle.out" 2>>"$GW_TMP/devices.err" &
IDLE_PID=$!
peer_log "$GW_TMP/idle.out"
check "the idle device is online" wait_for_line "$GW_LOG" "dev=$DEV.*online from"
# push BYTES: a custom message whose payload is BYTES of base64; the
# gateway sends it as given (compact, members as the firmware reads them).
push() {
    local bitmap
    bitmap=$(head -c "$1" /dev/urandom | base64 -w0 | head -c "$1")
    printf '{"type":"custom","payload":{"bitmap":"%s"}}' "$bitmap" >"$GW_TMP/push.json"
    curl -sS --max-time 10 -o "$GW_TMP/ans.json" -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        --data-binary "@$GW_TMP/push.json" "$BASE/api/devices/$DEV/commands"
}
code=$(push 122880)
check "120 KB: 200 ($code)" test "$code" = 200
check "  published" jq -e '.success and .data.published' "$GW_TMP/ans.json" >/dev/null
want="$(stat -c %s "$GW_TMP/push.json") $(sha256sum <"$GW_TMP/push.json" | cut -d' ' -f1)"
check "the idle device got it byte for byte" \
    wait_for_line "$GW_TMP/idle.out" "< large message: ${want% *} bytes, sha256 ${want#* }\$"
code=$(push 131072)
check "past limits.max_downlink_bytes: 413 ($code)" test "$code" = 413
check "  saying the limit" \
    jq -e '.error | test("131072 bytes \\(limits.max_downlink_bytes\\)")' "$GW_TMP/ans.json" >/dev/null

echo "# 4. a device's own publishes stay bounded at 64 KiB by the plugin"
UP=GID_test@@@02_00_00_00_02_c1@@@large-up
pass=$(printf '%s' "$UP|$USER_NAME" | openssl dgst -sha256 -hmac "$PLUGIN_KEY" -binary | base64)
# QoS 1: the client waits for the broker to take the whole publish.
up_pub() {
    timeout 10 mosquitto_pub -p "$BROKER_PORT" -i "$UP" -u "$USER_NAME" \
        -P "$pass" -q 1 -t device-server "$@" 2>>"$GW_TMP/devices.err"
}
# Padding inside a listen message: the gateway would say why it refused it.
big_listen() {
    printf '{"type":"listen","state":"detect","text":"%s"}' \
        "$(head -c "$1" /dev/zero | tr '\0' x)" >"$GW_TMP/up.json"
}
big_listen 102400
up_pub -f "$GW_TMP/up.json"
check "100 KB (under the broker's packet limit) is refused by the plugin" \
    wait_for_line "$GW_TMP/broker.log" \
    "device '$UP': publish of 1024[0-9][0-9] bytes refused, over plugin_opt_max_message_bytes 65536"
big_listen 204800
# Past max_packet_size: the broker disconnects it at the header, no PUBACK.
up_pub -f "$GW_TMP/up.json" -q 0
up_pub -m '{"type":"listen","state":"detect"}'
check "the device's next message reaches the gateway" \
    wait_for_line "$GW_LOG" "dev=$UP.*listen without a session"
check "neither big publish did" not grep -q "dev=$UP.*refused" "$GW_LOG"
check "the broker and the gateway are up" kill -0 "$BROKER_PID" "$GW_PID"

kill -INT "$IDLE_PID"
wait_for_exit "$IDLE_PID"
stop_pid "$GW_PID"
check "the gateway stops cleanly" test "${EXIT_CODE:-1}" -eq 0
stop_pid "$BROKER_PID"

echo "# 5. raised to 1 MiB (docs/deploy.md): 1 MB down, devices still at 64 KiB"
BROKER_SIZE_LIMIT=1048576 start_plugin_broker broker1m ||
    bail "a broker with 1 MiB limits starts"
start_backend glyph1m --glyph-bytes 1040000 --turn-frames 10 --tts-frames 4 ||
    bail "the 1 MB backend starts"
write_gateway_config "$GW_TMP/gw1m.json" '"limits": { "max_downlink_bytes": 1048576 }'
start_gateway gw1m "$GW_TMP/gw1m.json" || bail "the gateway starts"
r=$(talk g1m a1 --glyph-push)
device_ok "the device's conversation succeeds" "$r"
check "1 MB byte for byte" same_text "$(received g1m)" "$(sent "$BACKEND_EVENTS")"
big_listen 204800
up_pub -f "$GW_TMP/up.json"
check "200 KB from a device is refused by the plugin" \
    wait_for_line "$GW_TMP/broker1m.log" \
    "device '$UP': publish of 2048[0-9][0-9] bytes refused, over plugin_opt_max_message_bytes 65536"
up_pub -m '{"type":"listen","state":"detect"}'
check "the device's next message reaches the gateway" \
    wait_for_line "$GW_LOG" "dev=$UP.*listen without a session"
check "the big one did not" not grep -q "dev=$UP.*refused" "$GW_LOG"
stop_pid "$GW_PID"
check "the gateway stops cleanly" test "${EXIT_CODE:-1}" -eq 0
finish
