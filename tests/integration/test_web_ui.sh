#!/usr/bin/env bash
# The operator page on real parts: mosquitto with the plugin, the gateway
# serving web/ at /ui/ (http.ui_dir), a stock simulated device online with
# no conversation and an echo tool. Headless Chromium (tests/web/ui.mjs)
# signs in with the token, finds the device, calls its tools through the
# page's form and reads the answers shown; screenshots are kept under the
# build directory (test-artifacts/web_ui). curl checks the static file
# server: types and headers, GET/HEAD only, and every way out of the
# directory (dot segments, hidden files, symbolic links) refused. A device
# provisioning itself (hybridgw-sim device --ota) waits for activation and
# the page binds it by the code it shows, then unbinds it.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
if ! command -v node >/dev/null ||
    [ ! -f "$src/tests/web/node_modules/playwright-core/package.json" ]; then
    bail "node and tests/web's npm packages are installed (scripts/setup.sh)"
fi
CHROMIUM=${GW_CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || bail "Chromium is installed at $CHROMIUM (scripts/setup.sh)"

TOKEN=it-ui-bearer-51d0e2
ARTIFACTS=$(cd "$(dirname "$GW")/.." && pwd)/test-artifacts/web_ui
rm -rf "$ARTIFACTS"
mkdir -p "$ARTIFACTS"

start_plugin_broker broker || bail "broker with the plugin starts"
# A turn ends only on the device's listen stop: a device that never stops
# speaking keeps its session live while the page looks at it.
start_backend backend --turn-frames 0
HTTP_PORT=$(free_port)
BASE=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json

# OTA on, so that a device can wait for activation, with the bindings
# store in the test's directory.
OTA_JSON="\"ota\": { \"enabled\": true, \"mqtt_endpoint\": \"127.0.0.1:$BROKER_PORT\",
          \"device_key\": \"$PLUGIN_KEY\", \"group\": \"GID_test\" },"
STORE_JSON="\"bindings\": { \"path\": \"$GW_TMP/bindings.db\" },"

# write_config UI_DIR
write_config() {
    GW_UDP_PORT=${GW_UDP_PORT:-$(free_port --udp)}
    cat >"$cfg" <<JSON
{
  "instance": "webui",
  $OTA_JSON
  $STORE_JSON
  "mqtt": { "host": "127.0.0.1", "port": $BROKER_PORT, "keepalive": 10,
            "username": "$GW_MQTT_USER", "password": "$GW_MQTT_PASS" },
  "udp": { "bind": "127.0.0.1", "port": $GW_UDP_PORT, "public_host": "127.0.0.1",
           "doctor_after_s": 1 },
  "backends": [ { "name": "mock",
                  "url": "ws://127.0.0.1:$BACKEND_PORT/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": $HTTP_PORT, "token": "$TOKEN",
            "ui_dir": "$1" },
  "log": { "level": "debug" }
}
JSON
}
# reload UI_DIR: the new http.ui_dir, live.
reload() {
    local before
    before=$(count_lines "$GW_LOG" 'config.*reloaded')
    write_config "$1"
    kill -HUP "$GW_PID"
    wait_for_lines "$GW_LOG" 'config.*reloaded' $((before + 1))
}
write_config "$src/web"
start_gateway gw "$cfg" || bail "gateway starts"
check "the HTTP API answers /healthz" wait_for_http "$BASE/healthz"
peer_log "$GW_TMP/devices.err" "$GW_TMP/ui.out"

ID='GID_test@@@02_00_00_00_0a_01@@@web-ui'
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "$ID" --json --idle --mcp-echo-tool >"$GW_TMP/dev.out" \
    2>>"$GW_TMP/devices.err" &
DEV_PID=$!
peer_log "$GW_TMP/dev.out"
check "the gateway reads the device's tools" \
    wait_for_line "$GW_LOG" "dev=$ID mcp.* [0-9]+ tools? in [0-9]+ pages?"

# get PATH [CURL ARGS...]: status, content type and size of the answer
# ("200 text/html; charset=utf-8 1234"); headers in $GW_TMP/h, body in
# $GW_TMP/b.
get() {
    local path=$1
    shift
    curl -sS --path-as-is --max-time 10 -D "$GW_TMP/h" -o "$GW_TMP/b" \
        -w '%{http_code} %{content_type} %{size_download}' "$@" "$BASE$path"
}
header() { # NAME: the value of a response header in $GW_TMP/h
    grep -i "^$1:" "$GW_TMP/h" | head -n 1 | cut -d' ' -f2- | tr -d '\r'
}

echo "# a. the page's files"
r=$(get /ui)
check "/ui redirects to /ui/ ($r)" \
    test "${r%% *}" = 301 -a "$(header Location)" = /ui/
r=$(get /ui/)
check "/ui/ is web/index.html as text/html ($r)" \
    test "$r" = "200 text/html; charset=utf-8 $(stat -c %s "$src/web/index.html")"
check "byte for byte" cmp -s "$GW_TMP/b" "$src/web/index.html"
check "with a Content-Security-Policy that allows only the page's own files" \
    grep -qi "^Content-Security-Policy: default-src 'none'; script-src 'self';" "$GW_TMP/h"
check "nosniff, no framing, no cache without revalidation" \
    test "$(header X-Content-Type-Options)" = nosniff -a \
    "$(header X-Frame-Options)" = DENY -a "$(header Cache-Control)" = no-cache
r=$(get /ui/app.js)
check "app.js is text/javascript ($r)" \
    test "$r" = "200 text/javascript; charset=utf-8 $(stat -c %s "$src/web/app.js")"
r=$(get /ui/style.css)
check "style.css is text/css ($r)" test "${r% *}" = "200 text/css; charset=utf-8"
r=$(get /ui/favicon.svg)
check "favicon.svg is image/svg+xml ($r)" test "${r% *}" = "200 image/svg+xml"
r=$(get /ui/ -I)
check "HEAD gets the headers and no body ($r)" \
    test "$r" = "200 text/html; charset=utf-8 0" -a \
    "$(header Content-Length)" = "$(stat -c %s "$src/web/index.html")"
r=$(get /ui/index.html -X POST --data x)
check "POST gets 405 with Allow: GET, HEAD ($r)" \
    test "${r%% *}" = 405 -a "$(header Allow)" = "GET, HEAD"
r=$(get /ui/ -X DELETE)
check "DELETE gets 405 too (${r%% *})" test "${r%% *}" = 405
r=$(get /api/devices)
check "the files came without a token, the API they call does not (${r%% *})" \
    test "${r%% *}" = 401

echo "# b. nothing outside the directory, nothing hidden"
for path in /ui/../README.md /ui/..%2fREADME.md /ui/%2e%2e/README.md \
    /ui/./index.html /ui/.gitignore /ui//etc/passwd /ui/a\\..\\b.html \
    /ui/index.html%00.css /ui/missing.html /ui/README /ui/x.exe; do
    r=$(get "$path")
    code=${r%% *}
    # lws resolves some dot segments before the gateway sees them: such a
    # path lands on another route (404 there) or back on the page itself.
    if [ "$code" = 200 ]; then
        check "$path: if served, only the page's own index" \
            cmp -s "$GW_TMP/b" "$src/web/index.html"
    else
        # A NUL lws refuses itself: 400 or the connection closed (000).
        check "$path is refused (404, or 400/closed by lws: $code)" \
            test "$code" = 404 -o "$code" = 400 -o "$code" = 000
    fi
done
check "refused paths are logged with the client" \
    wait_for_line "$GW_LOG" 'GET /ui/.* from 127\.0\.0\.1: 404 not served'

echo "# c. links, special files and size, in a directory of traps"
traps=$GW_TMP/traps
mkdir -p "$traps/sub" "$traps/dir.html"
cp "$src/web/index.html" "$traps/index.html"
echo 'inner' >"$traps/sub/page.html"
echo 'secret outside' >"$GW_TMP/outside.html"
ln -s "$GW_TMP/outside.html" "$traps/link.html"
ln -s "$GW_TMP" "$traps/out"
ln -s "$traps/sub" "$traps/linkdir"
mkfifo "$traps/fifo.html"
echo 'hidden' >"$traps/.hidden.html"
head -c $((1024 * 1024 + 1)) /dev/zero >"$traps/big.js"
head -c $((1024 * 1024)) /dev/zero >"$traps/cap.js"
reload "$traps" || bail "the gateway reloads with http.ui_dir $traps"
r=$(get /ui/sub/page.html)
check "a file in a subdirectory is served ($r)" test "${r% *}" = "200 text/html; charset=utf-8"
r=$(get /ui/sub/)
check "a directory without index.html is 404 (${r%% *})" test "${r%% *}" = 404
for path in /ui/link.html /ui/out/outside.html /ui/linkdir/page.html; do
    r=$(get "$path")
    check "$path (through a symbolic link) is 404 (${r%% *})" test "${r%% *}" = 404
    check "and holds nothing of the target" not grep -q 'secret outside\|inner' "$GW_TMP/b"
done
check "a symbolic link is logged as such" \
    wait_for_line "$GW_LOG" 'from 127\.0\.0\.1: 404 not served: a symbolic link'
r=$(get /ui/.hidden.html)
check "a hidden file that exists is 404 (${r%% *})" test "${r%% *}" = 404
check "and holds nothing of it" not grep -q hidden "$GW_TMP/b"
r=$(get /ui/fifo.html)
check "a FIFO is 404, and does not hang the read (${r%% *})" test "${r%% *}" = 404
r=$(get /ui/dir.html)
check "a directory named like a file is 404 (${r%% *})" test "${r%% *}" = 404
r=$(get /ui/cap.js)
check "a file of exactly 1 MiB is served whole ($r)" \
    test "$r" = "200 text/javascript; charset=utf-8 1048576"
r=$(get /ui/big.js)
check "a file over 1 MiB is refused with 500 (${r%% *})" test "${r%% *}" = 500
check "saying why" wait_for_line "$GW_LOG" '500 file over the size cap'
reload "$GW_TMP/none" || bail "the gateway reloads with a missing http.ui_dir"
r=$(get /ui/)
check "a missing directory is 404 (${r%% *})" test "${r%% *}" = 404
check "and logged, naming the key" \
    wait_for_line "$GW_LOG" "404 the page's directory \(http.ui_dir\) cannot be opened"
reload "" || bail "the gateway reloads with http.ui_dir empty"
r=$(get /ui/)
check "http.ui_dir empty turns the page off (${r%% *})" test "${r%% *}" = 404
check "saying so" grep -q 'the page is off' "$GW_TMP/b"
jq '.http.ui_dir = "web"' "$cfg" >"$GW_TMP/bad.json"
"$GW" --check-config -c "$GW_TMP/bad.json" >"$GW_TMP/check.out" 2>&1
check "--check-config refuses a relative http.ui_dir" \
    grep -q 'http.ui_dir.*must be an absolute path' "$GW_TMP/check.out"
reload "$src/web" || bail "the gateway reloads with http.ui_dir back on web/"

echo "# d. the page in headless Chromium"
# A second device in a conversation that lasts: a live session on "mock".
TALK='GID_test@@@02_00_00_00_0a_02@@@web-talk'
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "$TALK" --json --frames 0 --turn-timeout 600000 \
    >"$GW_TMP/talk.out" 2>>"$GW_TMP/devices.err" &
TALK_PID=$!
peer_log "$GW_TMP/talk.out"
talk_active() {
    curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "$BASE/api/devices/$TALK" |
        jq -e '.session.state == "ACTIVE" and .session.backend == "mock"' \
            >/dev/null 2>&1
}
check "device talk is in a live session on backend mock" wait_until "" talk_active
# A third whose UDP never arrives: the doctor's cause is on the page.
MUTE='GID_test@@@02_00_00_00_0a_04@@@web-mute'
"$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
    --client-id "$MUTE" --json --frames 0 --turn-timeout 600000 --no-udp \
    >"$GW_TMP/mute.out" 2>>"$GW_TMP/devices.err" &
MUTE_PID=$!
peer_log "$GW_TMP/mute.out"
mute_diagnosed() {
    curl -sS --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "$BASE/api/devices/$MUTE" |
        jq -e '.udp.diagnosis.cause == "nothing"' >/dev/null 2>&1
}
check "device mute's missing audio is diagnosed" wait_until "" mute_diagnosed
alert=()
# POST /api/devices/{id}/commands: the alert form's route, when this
# gateway has it.
code=$(curl -sS -o "$GW_TMP/alert.json" -w '%{http_code}' --max-time 10 \
    -X POST -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    --data '{"type":"alert"}' "$BASE/api/devices/$ID/commands")
if [ "$code" = 400 ]; then
    alert=(--alert)
else
    echo "# the alert route answers $code: the page's alert form is not driven"
fi
# The Bindings panel: a device provisioning itself waits for
# activation, showing its code.
BIND_MAC=02:00:00:00:0a:03
BIND_ID='GID_test@@@02_00_00_00_0a_03@@@web-bind'
"$SIM" device --ota "$BASE/xiaozhi/ota/" --mac "$BIND_MAC" --uuid web-bind \
    --activate-pending-ms 300 --activate-retry-ms 1000 --idle --json \
    >"$GW_TMP/bind.out" 2>>"$GW_TMP/devices.err" &
BIND_PID=$!
peer_log "$GW_TMP/bind.out"
check "a provisioning device waits for activation with a code" \
    wait_for_line "$GW_TMP/bind.out" '^activation code [0-9]{6}$'
bind=(--bindings --bind-code "$(grep -m1 '^activation code' "$GW_TMP/bind.out" | cut -d' ' -f3)"
    --bind-mac "$BIND_MAC" --bind-id "$BIND_ID")
# Bounded below ctest's 120 s: a browser that hangs still gets reported.
timeout 90 node "$src/tests/web/ui.mjs" --base "$BASE" --token "$TOKEN" --device "$ID" \
    --tools 4 --session "$TALK" --backend mock --out "$ARTIFACTS" \
    --udp-device "$MUTE" --udp-cause nothing \
    --chromium "$CHROMIUM" "${alert[@]}" "${bind[@]}" \
    >"$GW_TMP/ui.out" 2>&1
rc=$?
while IFS= read -r line; do
    case $line in
    "ok - "*) ok "page: ${line#ok - }" ;;
    "not ok - "*) not_ok "page: ${line#not ok - }" ;;
    "# "*) echo "$line" ;;
    esac
done <"$GW_TMP/ui.out"
check "ui.mjs ran every check and passed (exit $rc)" test "$rc" -eq 0
check "its screenshots are kept in $ARTIFACTS" \
    test -s "$ARTIFACTS/03-tool-call.png"

echo "# the end"
if [ -n "$BIND_PID" ]; then
    check "the bound device got its credentials and came online" \
        grep -q "provisioned: $BIND_ID" "$GW_TMP/bind.out"
    kill -INT "$BIND_PID" 2>/dev/null
    wait_for_exit "$BIND_PID" >/dev/null
fi
stop_pid "$TALK_PID"
stop_pid "$MUTE_PID"
kill -INT "$DEV_PID" 2>/dev/null
wait_for_exit "$DEV_PID" >/dev/null
r=$(tail -n 1 "$GW_TMP/dev.out")
check "the device answered the page's calls, without a conversation" \
    jq -e '.ok and .sessions == 0 and .mcp.calls >= 3 and .mcp.answered >= 6' <<<"$r"
if [ ${#alert[@]} -gt 0 ]; then
    check "the device got the page's alert, as typed" \
        jq -e '.pushed.alert == {"status":"Notice",
            "message":"Battery low, from the page","emotion":"sad"}' <<<"$r"
fi
stop_pid "$GW_PID"
check "the gateway exits 0 after SIGTERM" test "${EXIT_CODE:-1}" -eq 0
check "the gateway logged no error" \
    not grep -E ' error |ERROR|AddressSanitizer|runtime error' "$GW_LOG"
finish
