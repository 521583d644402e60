#!/usr/bin/env bash
# mcp_servers[].allow by MAC or group is matched against the device's
# binding (docs/protocol.md sections 7.11 and 9.3), never against what its
# client id claims: with OTA activation on, a device online under a client
# id carrying an allowed MAC or group but not bound reaches nothing; bound,
# it reaches the server; once a second identity with its MAC is bound, the
# MAC names nobody. Devices are played by mosquitto_pub / mosquitto_sub on
# a plain broker (what the broker lets in is the plugin's business and
# tested elsewhere), the server is the SDK's (tests/mcp/outbound_server.mjs).
# shellcheck disable=SC2016 # jq filters
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

mcp_tools_ready ||
    bail "node and tests/mcp's npm packages are installed (scripts/setup.sh)"

TOKEN=identity-token-41d7
MAC=a0:85:e3:f4:49:51
DEV="GID_test@@@${MAC//:/_}@@@uuid-real"
TWIN="GID_test@@@${MAC//:/_}@@@uuid-twin"
VIP="GID_vip@@@a0_85_e3_f4_49_52@@@uuid-vip"

peer_log "$GW_TMP/srv.log"
node "$src/tests/mcp/outbound_server.mjs" --port 0 --json >"$GW_TMP/srv.log" 2>&1 &
wait_for_ready $! "$GW_TMP/srv.log" '^listening [0-9]+' || bail "the MCP server starts"
SRV_PORT=$(awk '/^listening/{print $2; exit}' "$GW_TMP/srv.log")

start_broker broker || bail "the broker starts"
start_backend backend || bail "the backend starts"
HTTP_PORT=$(free_port)
API=http://127.0.0.1:$HTTP_PORT
cfg=$GW_TMP/gw.json
write_gateway_config "$cfg" "\"ota\": { \"enabled\": true,
    \"mqtt_endpoint\": \"127.0.0.1:$BROKER_PORT\", \"device_key\": \"k\",
    \"group\": \"GID_test\" },
  \"bindings\": { \"path\": \"$GW_TMP/bindings.db\" },
  \"mcp_servers\": [
    { \"name\": \"bymac\", \"url\": \"http://127.0.0.1:$SRV_PORT/mcp\",
      \"allow\": { \"macs\": [\"$MAC\"] } },
    { \"name\": \"bygroup\", \"url\": \"http://127.0.0.1:$SRV_PORT/mcp\",
      \"allow\": { \"groups\": [\"GID_vip\"] } } ]"
sed -i "s/\"http\": { \"port\": 0 }/\"http\": { \"port\": $HTTP_PORT, \"token\": \"$TOKEN\" }/" "$cfg"
start_gateway gw "$cfg" || bail "the gateway starts"
wait_for_http "$API/healthz" || bail "the API answers"

# listen ID: the device's down topic, one message a line, to $GW_TMP/ID.down.
listen() {
    mosquitto_sub -p "$BROKER_PORT" -i "listen-$1" -t "devices/$1/down" \
        >"$GW_TMP/$1.down" 2>&1 &
    wait_for_line "$GW_TMP/broker.log" "listen-$1 0 devices/" ||
        bail "listening for $1"
}
# ask ID ENDPOINT N: the device's initialize to ENDPOINT with id N; waits
# for the answer and prints "result" or the error's message.
ask() {
    mosquitto_pub -p "$BROKER_PORT" -i "$1" -t "devices/$1/up" \
        -m "{\"type\":\"mcp\",\"endpoint\":\"$2\",\"payload\":{\"jsonrpc\":\"2.0\",\"id\":$3,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"d\",\"version\":\"1\"}}}}"
    wait_until 10 grep -q "\"id\":$3[,}]" "$GW_TMP/$1.down" || {
        echo timeout
        return
    }
    grep "\"id\":$3[,}]" "$GW_TMP/$1.down" | tail -n 1 |
        jq -r 'if .payload.result then "result" else .payload.error.message end'
}

listen "$DEV"
listen "$TWIN"
listen "$VIP"

echo "# 1. a client id carrying the allowed MAC, not bound: refused"
r=$(ask "$DEV" bymac 1)
check "refused as if no such server ($r)" grep -q 'no MCP server named bymac' <<<"$r"
check "logged: not bound" grep -q "dev=$DEV.*not allowed to MCP server bymac: not bound" "$GW_LOG"
r=$(ask "$VIP" bygroup 2)
check "a client id claiming the allowed group, not bound: refused ($r)" \
    grep -q 'no MCP server named bygroup' <<<"$r"

echo "# 2. bound, the device reaches the server its MAC is allowed"
check "bound by the operator" test "$(bind_identity "$API" "$TOKEN" "$MAC" uuid-real)" = 201
r=$(ask "$DEV" bymac 3)
check "its initialize is answered by the server ($r)" test "$r" = result
r=$(ask "$DEV" bygroup 4)
check "not the server of a group it is not bound in ($r)" \
    grep -q 'no MCP server named bygroup' <<<"$r"

echo "# 3. a second identity bound with the same MAC: the MAC names nobody"
r=$(ask "$TWIN" bymac 5)
check "the twin, not bound, is refused ($r)" grep -q 'no MCP server named' <<<"$r"
check "the twin bound too" test "$(bind_identity "$API" "$TOKEN" "$MAC" uuid-twin)" = 201
r=$(ask "$TWIN" bymac 6)
check "now the twin is refused: its MAC is bound twice ($r)" \
    grep -q 'no MCP server named' <<<"$r"
r=$(ask "$DEV" bymac 7)
check "and so is the first ($r)" grep -q 'no MCP server named' <<<"$r"
check "logged: bound to another identity too" \
    grep -q "not allowed to MCP server bymac: its MAC is bound to another identity too" "$GW_LOG"

finish
