#!/usr/bin/env bash
# Activation across instances (docs/protocol.md section 9.3): two gateways
# in cluster mode hash share their bindings in a real PostgreSQL (Debian's
# server, started for this test by tests/unit/binding/with_postgres.sh).
# A device checks in at one instance, the operator binds it at the other,
# the first hands out its credentials, and neither hands them out again;
# unbinding at either closes the device's connection; a cluster with
# activation on and SQLite is refused by --check-config.
# shellcheck disable=SC2016 # jq filters
GW=$1
src=$2
SIM=$3
if [ -z "${GW_TEST_PG_CONNINFO:-}" ]; then
    exec bash "$src/tests/unit/binding/with_postgres.sh" bash "$0" "$@"
fi
. "$src/tests/integration/lib.sh"

need_plugin

TOKEN=cluster-activation-token-9e2a
NAMES=(gw-a gw-b)
MAC=a0:85:e3:f4:49:35
UUID=5d1e0c2b-3a49-4f58-8a6b-7c8d9e0f1a2c
ID="GID_test@@@${MAC//:/_}@@@$UUID"

# ota_check INSTANCE OUT: the firmware's check at one instance.
ota_check() {
    curl -sS --max-time 5 -o "$2" -w '%{http_code}' -X POST \
        -H 'Activation-Version: 1' -H "Device-Id: $MAC" -H "Client-Id: $UUID" \
        -H 'User-Agent: bread-compact-wifi/2.4.2' \
        -H 'Content-Type: application/json' --data '{}' \
        "$(base "$1")/xiaozhi/ota/"
}
# api INSTANCE METHOD PATH [BODY]: the operator API at one instance.
api() {
    curl -sS --max-time 5 -o "$GW_TMP/api.json" -w '%{http_code}' \
        -X "$2" -H "Authorization: Bearer $TOKEN" \
        ${4:+-H 'Content-Type: application/json' --data "$4"} \
        "$(base "$1")$3"
}
connects() {
    mosquitto_pub -p "$BROKER_PORT" -i "$ID" -u "$1" -P "$2" \
        -t device-server -m '{}' >/dev/null 2>&1
}

start_plugin_broker broker || bail "the broker starts"
start_backend mock --no-decode || bail "the backend starts"

declare -A HTTP PID LOGF
for n in "${NAMES[@]}"; do
    write_gateway_config "$GW_TMP/$n.in"
    HTTP[$n]=$(free_port)
    jq --arg n "$n" --argjson h "${HTTP[$n]}" --arg t "$TOKEN" \
        --arg ep "127.0.0.1:$BROKER_PORT" --arg key "$PLUGIN_KEY" \
        --arg pg "$GW_TEST_PG_CONNINFO" \
        '.mqtt.client_id = "hybridgw-" + $n
         | .http = { "port": $h, "token": $t }
         | .cluster = { "mode": "hash", "instance": $n }
         | .ota = { "enabled": true, "mqtt_endpoint": $ep, "device_key": $key,
                    "group": "GID_test" }
         | .bindings = { "store": "postgresql", "conninfo": $pg }' \
        "$GW_TMP/$n.in" >"$GW_TMP/$n.json"
done
base() { echo "http://127.0.0.1:${HTTP[$1]}"; }

echo "# 0. several instances need a shared store"
jq '.bindings = { "store": "sqlite", "path": "/tmp/x.db" }' "$GW_TMP/gw-a.json" \
    >"$GW_TMP/sqlite.json"
out=$("$GW" -c "$GW_TMP/sqlite.json" --check-config 2>&1)
check "cluster mode hash with SQLite bindings is refused" test $? -eq 1
check "saying why" grep -q 'bindings.store' <<<"$out"

for n in "${NAMES[@]}"; do
    start_gateway "$n" "$GW_TMP/$n.json" || bail "instance $n starts"
    PID[$n]=$GW_PID
    LOGF[$n]=$GW_LOG
    check "$n keeps its bindings in postgresql" \
        grep -q 'activation on: bindings in postgresql' "$GW_LOG"
done

echo "# 1. checked in at gw-a, bound at gw-b"
ota_check gw-a "$GW_TMP/a1.json" >/dev/null
CODE=$(jq -r .activation.code "$GW_TMP/a1.json")
check "gw-a gives a code" test "${#CODE}" = 6
ota_check gw-b "$GW_TMP/b1.json" >/dev/null
check "gw-b gives the same code (one pending activation)" \
    jq_is "$(cat "$GW_TMP/b1.json")" .activation.code "$CODE"
st=$(api gw-b POST /api/bindings "{\"code\":\"$CODE\"}")
check "gw-b binds it: 201" test "$st" = 201
st=$(api gw-a GET /api/bindings)
check "gw-a lists the binding" \
    jq -e --arg id "$ID" '.bindings | map(.client_id) | index($id) != null' \
    "$GW_TMP/api.json"

echo "# 2. credentials once, whichever instance is asked"
ota_check gw-a "$GW_TMP/a2.json" >/dev/null
USER=$(jq -r '.mqtt.username // empty' "$GW_TMP/a2.json")
PASS=$(jq -r '.mqtt.password // empty' "$GW_TMP/a2.json")
check "gw-a hands out the credentials" test -n "$PASS"
ota_check gw-b "$GW_TMP/b2.json" >/dev/null
check "gw-b then does not" jq -e '.mqtt | has("password") | not' "$GW_TMP/b2.json"
ota_check gw-a "$GW_TMP/a3.json" >/dev/null
check "nor gw-a again" jq -e '.mqtt | has("password") | not' "$GW_TMP/a3.json"
check "the broker takes them" connects "$USER" "$PASS"

echo "# 3. unbound at gw-a: the device's connection closes"
mosquitto_sub -p "$BROKER_PORT" -i "$ID" -u "$USER" -P "$PASS" \
    -t "devices/$ID/down" >"$GW_TMP/sub.out" 2>&1 &
SUB=$!
wait_for_line "$GW_TMP/broker.log" "New client connected .* as $ID" ||
    not_ok "the device's connection is up"
st=$(api gw-a DELETE "/api/bindings/$ID")
check "DELETE at gw-a: 200" test "$st" = 200
wait_until 10 gone "$SUB"
check "the connection closed within 10 s" gone "$SUB"
check "the credentials are refused" not connects "$USER" "$PASS"
st=$(api gw-b GET /api/bindings)
check "gw-b no longer lists it" \
    jq -e --arg id "$ID" '.bindings | map(.client_id) | index($id) == null' \
    "$GW_TMP/api.json"

finish
