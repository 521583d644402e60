# Helpers of the shell integration tests, on top of scripts/lib.sh (the
# temporary directory, cleanup and bounded waits every script shares):
# TAP-like output where a failed check shows the end of every peer's
# output, and the real parts (broker, mock backend, gateway) on 127.0.0.1.
# shellcheck shell=bash disable=SC2034,SC2154 # variables shared with callers
set -u
# shellcheck source-path=SCRIPTDIR source=../../scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

GW_TEST_FAILS=0
GW_TEST_PASSES=0
# ctest gives each test 120 s: its waits end before that, so it reports.
GW_DEADLINE=$((SECONDS + ${GW_TEST_BUDGET_S:-105}))
GW_PEERS=() # output files of the parts under test, shown with a failure

# peer_log FILE...: shows the end of each FILE with every failed check.
peer_log() {
    local f
    for f in "$@"; do
        [[ " ${GW_PEERS[*]} " == *" $f "* ]] || GW_PEERS+=("$f")
    done
}

show_peers() {
    local f
    for f in "${GW_PEERS[@]}"; do
        show_tail "$f" 25
    done
}

ok() {
    GW_TEST_PASSES=$((GW_TEST_PASSES + 1))
    echo "ok - $*"
}

not_ok() {
    GW_TEST_FAILS=$((GW_TEST_FAILS + 1))
    echo "not ok - $*"
    show_peers
}

# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# not COMMAND...: true when the command fails (for check).
not() {
    ! "$@"
}

# device_ok WHAT RESULT: checks that a simulated device's JSON result line
# says ok, and prints its reason when it does not.
device_ok() {
    if jq_is "$2" .ok true; then
        ok "$1"
    else
        echo "#   device: $(jq -r '.reason // "no result"' <<<"$2" 2>/dev/null ||
            echo "no result")"
        not_ok "$1"
    fi
}

finish() {
    echo "$GW_TEST_PASSES passed, $GW_TEST_FAILS failed"
    [ "$GW_TEST_FAILS" -eq 0 ]
}

# bail WHAT: a failed check that the rest of the test cannot do without.
bail() {
    not_ok "$@"
    finish
    exit 1
}

# jq_is JSON FILTER EXPECTED: true when the filter gives EXPECTED.
jq_is() {
    [ "$(jq -r "$2" <<<"$1")" = "$3" ]
}

# ---- real parts on 127.0.0.1 ----
# Callers set GW (the hybridgw binary) and SIM (hybridgw-sim) first.

free_port() {
    "$SIM" free-port "$@"
}

# run_mosquitto NAME CONF PORT: mosquitto with CONF, logging to
# $GW_TMP/NAME.log; sets MOSQ_PID and waits until it listens on PORT (a
# restart with the same NAME waits for its own listener, not the last).
run_mosquitto() {
    local log=$GW_TMP/$1.log re="Opening ipv4 listen socket on port $3([^0-9]|\$)"
    local before
    before=$(count_lines "$log" "$re")
    peer_log "$log"
    mosquitto -c "$2" >>"$log" 2>&1 &
    MOSQ_PID=$!
    wait_for_ready "$MOSQ_PID" "$log" "$re" $((before + 1))
}

# The test brokers' message_size_limit and max_packet_size, as the shipped
# configs set them (deploy/mosquitto-hybridgw.conf); BROKER_SIZE_LIMIT=
# leaves both out.
BROKER_SIZE_LIMIT=${BROKER_SIZE_LIMIT-131072}

# size_limit_line: the two lines, or nothing.
size_limit_line() {
    if [ -n "$BROKER_SIZE_LIMIT" ]; then
        echo "message_size_limit $BROKER_SIZE_LIMIT"
        echo "max_packet_size $((BROKER_SIZE_LIMIT + 1024))"
    fi
}

# start_broker NAME [PORT]: a mosquitto of our own, logging to
# $GW_TMP/NAME.log; sets BROKER_PORT and BROKER_PID.
start_broker() {
    local name=$1 rc
    BROKER_PORT=${2:-$(free_port)}
    cat >"$GW_TMP/$name.conf" <<CONF
listener $BROKER_PORT 127.0.0.1
allow_anonymous true
persistence false
set_tcp_nodelay true
$(size_limit_line)
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
log_type subscribe
CONF
    run_mosquitto "$name" "$GW_TMP/$name.conf" "$BROKER_PORT"
    rc=$?
    BROKER_PID=$MOSQ_PID
    return "$rc"
}

# start_backend NAME ARGS...: the mock backend; sets BACKEND_PORT,
# BACKEND_PID and BACKEND_EVENTS (its JSON event lines).
start_backend() {
    local name=$1
    shift
    BACKEND_PORT=$(free_port)
    BACKEND_EVENTS=$GW_TMP/$name.events
    peer_log "$GW_TMP/$name.log" "$BACKEND_EVENTS"
    "$SIM" backend --listen "127.0.0.1:$BACKEND_PORT" \
        --events "$BACKEND_EVENTS" "$@" >"$GW_TMP/$name.log" 2>&1 &
    BACKEND_PID=$!
    wait_for_ready "$BACKEND_PID" "$BACKEND_EVENTS" '"ev":"ready"'
}

# write_gateway_config FILE [EXTRA_JSON_MEMBERS]: a config for the broker
# and backend started above, UDP on a free port; the broker account is
# GW_MQTT_USER / GW_MQTT_PASS when set.
write_gateway_config() {
    local file=$1 extra=${2:-} account=
    GW_UDP_PORT=$(free_port --udp)
    if [ -n "${GW_MQTT_USER:-}" ]; then
        account=", \"username\": \"$GW_MQTT_USER\", \"password\": \"$GW_MQTT_PASS\""
    fi
    cat >"$file" <<JSON
{
  "instance": "test",
  "mqtt": { "host": "127.0.0.1", "port": $BROKER_PORT, "keepalive": 10$account },
  "udp": { "bind": "127.0.0.1", "port": $GW_UDP_PORT,
           "public_host": "127.0.0.1" },
  "backends": [ { "name": "mock",
                  "url": "ws://127.0.0.1:$BACKEND_PORT/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "port": 0 },
  "log": { "level": "debug" }${extra:+,
  $extra}
}
JSON
}

# start_gateway NAME CONFIG: sets GW_PID and GW_LOG; waits until it is
# subscribed.
start_gateway() {
    local name=$1 cfg=$2
    GW_LOG=$GW_TMP/$name.log
    peer_log "$GW_LOG"
    "$GW" -c "$cfg" >>"$GW_LOG" 2>&1 &
    GW_PID=$!
    wait_for_ready "$GW_PID" "$GW_LOG" 'broker link up'
}

# start_gateway_api NAME EXTRA: a gateway (write_gateway_config's EXTRA)
# whose HTTP API listens on a free port with http.token TOKEN and
# http.manager_key MKEY; sets HTTP_PORT and BASE, waits for /healthz.
start_gateway_api() {
    local name=$1 extra=${2:-}
    HTTP_PORT=$(free_port)
    BASE=http://127.0.0.1:$HTTP_PORT
    write_gateway_config "$GW_TMP/$name.base.json" "$extra"
    jq --argjson p "$HTTP_PORT" --arg t "$TOKEN" --arg k "$MKEY" \
        '.http = {listen: "127.0.0.1", port: $p, token: $t, manager_key: $k}' \
        "$GW_TMP/$name.base.json" >"$GW_TMP/$name.json"
    start_gateway "$name" "$GW_TMP/$name.json" &&
        wait_for_http "$BASE/healthz"
}

# ---- the broker plugin ----
PLUGIN_KEY=it-device-key
PLUGIN_GW_USER=hybridgw
PLUGIN_GW_PASS=gateway-secret

# need_plugin: sets PLUGIN to the hybridgw_broker.so built beside GW, or
# ends the test if it is not built.
need_plugin() {
    PLUGIN=$(cd "$(dirname "$GW")/../broker" 2>/dev/null && pwd)/hybridgw_broker.so
    [ -f "$PLUGIN" ] || bail "the plugin is built ($PLUGIN)"
}

# start_plugin_broker NAME [LINES]: mosquitto loading the plugin (device
# key PLUGIN_KEY, gateway account PLUGIN_GW_USER/PASS, then the config
# LINES); sets BROKER_PORT, BROKER_PID, and GW_MQTT_USER/PASS for
# write_gateway_config.
start_plugin_broker() {
    local name=$1 rc
    BROKER_PORT=$(free_port)
    cat >"$GW_TMP/$name.conf" <<CONF
listener $BROKER_PORT 127.0.0.1
allow_anonymous false
persistence false
set_tcp_nodelay true
$(size_limit_line)
log_dest stderr
log_type all
plugin $PLUGIN
plugin_opt_device_key $PLUGIN_KEY
plugin_opt_gateway_username $PLUGIN_GW_USER
plugin_opt_gateway_password $PLUGIN_GW_PASS
${2:-}
CONF
    GW_MQTT_USER=$PLUGIN_GW_USER
    GW_MQTT_PASS=$PLUGIN_GW_PASS
    run_mosquitto "$name" "$GW_TMP/$name.conf" "$BROKER_PORT"
    rc=$?
    BROKER_PID=$MOSQ_PID
    return "$rc"
}

# named_device TAG NAME MAC_LAST_BYTE ARGS...: a stock device through the
# plugin, in the background: its client id
# GID_test@@@02_00_00_00_02_<MAC_LAST_BYTE>@@@<TAG>-<NAME> goes to
# DEV_ID[NAME] and its pid to DEV_PID[NAME] (associative arrays the test
# declares); transcript and result line in $GW_TMP/NAME.out.
named_device() {
    local tag=$1 name=$2 mac=$3
    shift 3
    DEV_ID[$name]=$(printf 'GID_test@@@02_00_00_00_02_%s@@@%s-%s' "$mac" \
        "$tag" "$name")
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --key "$PLUGIN_KEY" \
        --client-id "${DEV_ID[$name]}" --json "$@" >"$GW_TMP/$name.out" \
        2>>"$GW_TMP/devices.err" &
    DEV_PID[$name]=$!
    peer_log "$GW_TMP/$name.out"
}

# end_device NAME: SIGINT (an idle device's normal end) to a device of
# named_device (or one kept the same way); prints its result line.
end_device() {
    kill -INT "${DEV_PID[$1]}" 2>/dev/null
    wait_for_exit "${DEV_PID[$1]}" >/dev/null
    tail -n 1 "$GW_TMP/$1.out"
}

# plain_device CLIENT_ID ARGS...: one simulated device on a broker without
# the plugin (subscribing, since nothing rewrites its topics); prints its
# JSON result line.
plain_device() {
    local id=$1
    shift
    "$SIM" device --broker "127.0.0.1:$BROKER_PORT" --subscribing \
        --publish-topic 'devices/{client_id}/up' --client-id "$id" --json \
        "$@" 2>>"$GW_TMP/devices.err" | tail -n 1
}

# ---- HTTP API and MCP (tests/mcp: Node.js and the official MCP SDK) ----

# daily_token KEY [DAYS]: the manager-api bearer, sha256 hex of the UTC
# date (DAYS from today, default 0) followed by KEY.
daily_token() {
    local day
    day=$(date -u -d "${2:-0} days" +%F)
    printf '%s%s' "$day" "$1" | sha256sum | cut -d' ' -f1
}

# gw_metric URL KEY [TOKEN]: the value of KEY in the /metrics at URL (a
# gateway's HTTP base), 0 if absent; TOKEN when http.token guards it.
gw_metric() {
    curl -s --max-time 5 ${3:+-H "Authorization: Bearer $3"} "$1/metrics" |
        awk -v k="$2" 'index($0, k " ") == 1 { v = $NF } END { print v + 0 }'
}

# mcp_tools_ready: true when node and the SDK of tests/mcp are installed
# (scripts/setup.sh does it). Callers set src (the source tree).
mcp_tools_ready() {
    command -v node >/dev/null &&
        [ -f "$src/tests/mcp/node_modules/@modelcontextprotocol/sdk/package.json" ]
}

# report_lines OUT RC WHAT: the "ok - "/"not ok - " checks a script of
# tests/mcp wrote to OUT, as our own, then that it exited RC 0.
report_lines() {
    local line
    peer_log "$1"
    while IFS= read -r line; do
        case $line in
        "ok - "*) ok "${line#ok - }" ;;
        "not ok - "*) not_ok "${line#not ok - }" ;;
        "# "*) echo "$line" ;;
        esac
    done <"$1"
    check "$3 ran every check and passed (exit $2)" test "$2" -eq 0
}

# mcp_client ARGS...: tests/mcp/client.mjs (the SDK client); its result
# line on stdout, progress lines on stderr.
mcp_client() {
    node "$src/tests/mcp/client.mjs" "$@"
}

# ---- OTA activation (docs/protocol.md section 9.3) ----

# bind_identity BASE TOKEN MAC UUID: the device's OTA check at the gateway
# whose HTTP base is BASE, then the operator's bind by the code it got;
# prints the bind's status (201 bound).
bind_identity() {
    local code
    code=$(curl -sS --max-time 5 -X POST -H "Device-Id: $3" -H "Client-Id: $4" \
        -H 'User-Agent: b/2.4.2' --data '{}' "$1/xiaozhi/ota/" |
        jq -r .activation.code)
    curl -sS --max-time 5 -o /dev/null -w '%{http_code}' -X POST \
        -H "Authorization: Bearer $2" -H 'Content-Type: application/json' \
        --data "{\"code\":\"$code\"}" "$1/api/bindings"
}
