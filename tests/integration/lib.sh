# Shared helpers for the shell integration tests: bounded waits on events
# (a log line, a process exit) instead of fixed sleeps, and TAP-like output.
set -u

GW_TEST_FAILS=0
GW_TEST_PASSES=0
GW_TEST_TMP=$(mktemp -d)
trap 'gw_test_cleanup' EXIT

gw_test_cleanup() {
    local pids
    pids=$(jobs -p)
    if [ -n "$pids" ]; then
        kill $pids 2>/dev/null || true
        wait 2>/dev/null || true
    fi
    if [ -n "${GW_TEST_KEEP:-}" ]; then
        echo "# kept $GW_TEST_TMP"
    else
        rm -rf "$GW_TEST_TMP"
    fi
}

ok() {
    GW_TEST_PASSES=$((GW_TEST_PASSES + 1))
    echo "ok - $*"
}

not_ok() {
    GW_TEST_FAILS=$((GW_TEST_FAILS + 1))
    echo "not ok - $*"
}

# check DESCRIPTION COMMAND...: passes when the command succeeds.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# device_ok WHAT RESULT: checks that a simulated device's JSON result line
# says ok, and prints its reason when it does not.
device_ok() {
    if jq_is "$2" .ok true; then
        ok "$1"
    else
        not_ok "$1"
        echo "#   device: $(jq -r '.reason // "no result"' <<<"$2" 2>/dev/null ||
            echo "no result")"
    fi
}

# wait_for_line FILE REGEX [SECONDS]: true once FILE has a matching line.
wait_for_line() {
    local file=$1 re=$2 limit=${3:-10}
    local deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        if grep -qE "$re" "$file" 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "# timed out waiting for /$re/ in $file" >&2
    sed 's/^/# /' "$file" >&2 || true
    return 1
}

# wait_for_exit PID [SECONDS]: true once PID is gone; sets EXIT_CODE.
wait_for_exit() {
    local pid=$1 limit=${2:-10}
    local deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            EXIT_CODE=$?
            return 0
        fi
        sleep 0.05
    done
    return 1
}

finish() {
    echo "$GW_TEST_PASSES passed, $GW_TEST_FAILS failed"
    [ "$GW_TEST_FAILS" -eq 0 ]
}

# ---- real parts on 127.0.0.1 ----
# Callers set GW (the hybridgw binary) and SIM (hybridgw-sim) first.

free_port() {
    "$SIM" free-port "$@"
}

# start_broker NAME [PORT]: a mosquitto of our own, logging to
# $GW_TEST_TMP/NAME.log; sets BROKER_PORT and BROKER_PID.
start_broker() {
    local name=$1
    BROKER_PORT=${2:-$(free_port)}
    cat >"$GW_TEST_TMP/$name.conf" <<CONF
listener $BROKER_PORT 127.0.0.1
allow_anonymous true
persistence false
set_tcp_nodelay true
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
CONF
    mosquitto -c "$GW_TEST_TMP/$name.conf" >>"$GW_TEST_TMP/$name.log" 2>&1 &
    BROKER_PID=$!
    wait_for_line "$GW_TEST_TMP/$name.log" "Opening ipv4 listen socket on port $BROKER_PORT" 10
}

# start_backend NAME ARGS...: the mock backend; sets BACKEND_PORT,
# BACKEND_PID and BACKEND_EVENTS (its JSON event lines).
start_backend() {
    local name=$1
    shift
    BACKEND_PORT=$(free_port)
    BACKEND_EVENTS=$GW_TEST_TMP/$name.events
    "$SIM" backend --listen "127.0.0.1:$BACKEND_PORT" \
        --events "$BACKEND_EVENTS" "$@" >"$GW_TEST_TMP/$name.log" 2>&1 &
    BACKEND_PID=$!
    wait_for_line "$BACKEND_EVENTS" '"ev":"ready"' 10
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

# start_gateway NAME CONFIG: sets GW_PID; waits until it is subscribed.
start_gateway() {
    local name=$1 cfg=$2
    GW_LOG=$GW_TEST_TMP/$name.log
    "$GW" -c "$cfg" >>"$GW_LOG" 2>&1 &
    GW_PID=$!
    wait_for_line "$GW_LOG" 'broker link up' 10
}

# stop_pid PID: SIGTERM and wait; sets EXIT_CODE.
stop_pid() {
    kill -TERM "$1" 2>/dev/null
    wait_for_exit "$1" 15
}

# gateway_stats: asks the gateway for its counters and prints the line.
gateway_stats() {
    local before
    before=$(grep -c '\[stats\]' "$GW_LOG" || true)
    kill -USR1 "$GW_PID"
    local deadline=$((SECONDS + 5))
    while ((SECONDS < deadline)); do
        if (($(grep -c '\[stats\]' "$GW_LOG" || true) > before)); then
            grep '\[stats\]' "$GW_LOG" | tail -n 1
            return 0
        fi
        sleep 0.05
    done
    return 1
}

# ---- the broker plugin ----
# Callers set PLUGIN (the built hybridgw_broker.so) first.
PLUGIN_KEY=it-device-key
PLUGIN_GW_USER=hybridgw
PLUGIN_GW_PASS=gateway-secret

# start_plugin_broker NAME: mosquitto loading the plugin (device key
# PLUGIN_KEY, gateway account PLUGIN_GW_USER/PASS); sets BROKER_PORT,
# BROKER_PID, and GW_MQTT_USER/PASS for write_gateway_config.
start_plugin_broker() {
    local name=$1
    BROKER_PORT=$(free_port)
    cat >"$GW_TEST_TMP/$name.conf" <<CONF
listener $BROKER_PORT 127.0.0.1
allow_anonymous false
persistence false
set_tcp_nodelay true
log_dest stderr
log_type all
plugin $PLUGIN
plugin_opt_device_key $PLUGIN_KEY
plugin_opt_gateway_username $PLUGIN_GW_USER
plugin_opt_gateway_password $PLUGIN_GW_PASS
CONF
    mosquitto -c "$GW_TEST_TMP/$name.conf" >>"$GW_TEST_TMP/$name.log" 2>&1 &
    BROKER_PID=$!
    GW_MQTT_USER=$PLUGIN_GW_USER
    GW_MQTT_PASS=$PLUGIN_GW_PASS
    wait_for_line "$GW_TEST_TMP/$name.log" "Opening ipv4 listen socket on port $BROKER_PORT" 10
}

# jq_is JSON FILTER EXPECTED: true when the filter gives EXPECTED.
jq_is() {
    [ "$(jq -r "$2" <<<"$1")" = "$3" ]
}

# ---- HTTP API and MCP (tests/mcp: Node.js and the official MCP SDK) ----

# wait_for_http URL [SECONDS]: true once URL answers 2xx.
wait_for_http() {
    local url=$1 limit=${2:-10}
    local deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "# timed out waiting for $url" >&2
    return 1
}

# wait_for_jq FILE FILTER [SECONDS]: true once a JSON line of FILE makes
# FILTER true (lines that are not JSON are skipped).
wait_for_jq() {
    local file=$1 filter=$2 limit=${3:-10}
    local deadline=$((SECONDS + limit))
    while ((SECONDS < deadline)); do
        if jq -R "fromjson? | select($filter)" "$file" 2>/dev/null |
            grep -q .; then
            return 0
        fi
        sleep 0.05
    done
    echo "# timed out waiting for a line of $file with: $filter" >&2
    sed 's/^/# /' "$file" >&2 || true
    return 1
}

# daily_token KEY [DAYS]: the manager-api bearer, sha256 hex of the UTC
# date (DAYS from today, default 0) followed by KEY.
daily_token() {
    local day
    day=$(date -u -d "${2:-0} days" +%F)
    printf '%s%s' "$day" "$1" | sha256sum | cut -d' ' -f1
}

# mcp_tools_ready: true when node and the SDK of tests/mcp are installed
# (scripts/setup.sh does it). Callers set src (the source tree).
mcp_tools_ready() {
    command -v node >/dev/null &&
        [ -f "$src/tests/mcp/node_modules/@modelcontextprotocol/sdk/package.json" ]
}

# mcp_client ARGS...: tests/mcp/client.mjs (the SDK client); its result
# line on stdout, progress lines on stderr.
mcp_client() {
    node "$src/tests/mcp/client.mjs" "$@"
}
