#!/usr/bin/env bash
# Cluster messages fit the broker (docs/protocol.md section 10.7): two
# gateways in cluster.mode "hash" on mosquitto with the plugin and the
# shipped configs' packet limits, one device with a catalog larger than a
# packet. The owner sends it in parts, the other instance has all of it,
# and neither loses its broker connection (the broker cuts off the sender
# of an oversize packet, whose will then says "gone"). A catalog from an
# instance that does not own the device, or on another instance's topic,
# is refused and counted; a request carried to the owner for a tool its
# caller may not call is refused there, by the owner's own rules.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin

TOKEN=it-bearer-c4t4
NAMES=(gw-a gw-b)
TOOLS=120  # synthetic tools of the device
DESC=600   # bytes of each one's description

# The test broker's limits are the shipped ones.
for f in deploy/mosquitto-hybridgw.conf docker/mosquitto.conf; do
    shipped=$(awk '$1 == "max_packet_size" { print $2 }' "$src/$f")
    check "$f: max_packet_size $shipped, as the test broker's" \
        test "$shipped" = "$((BROKER_SIZE_LIMIT + 1024))"
done

start_plugin_broker broker || bail "the broker starts"
start_backend mock --no-decode || bail "the backend starts"

declare -A HTTP PID LOGF DEV_ID DEV_PID
for n in "${NAMES[@]}"; do
    write_gateway_config "$GW_TMP/$n.in"
    HTTP[$n]=$(free_port)
    jq --arg n "$n" --argjson h "${HTTP[$n]}" --arg t "$TOKEN" \
        '.mqtt.client_id = "hybridgw-" + $n | .log.level = "debug"
         | .http = { "port": $h, "token": $t }
         | .cluster = { "mode": "hash", "instance": $n }' \
        "$GW_TMP/$n.in" >"$GW_TMP/$n.json"
    start_gateway "$n" "$GW_TMP/$n.json" || bail "instance $n starts"
    PID[$n]=$GW_PID
    LOGF[$n]=$GW_LOG
done
base() { echo "http://127.0.0.1:${HTTP[$1]}"; }
metric() { gw_metric "$(base "$1")" "$2" "$TOKEN"; }
sees2() {
    [ "$(metric "$1" 'hybridgw_cluster_instances{state="running"}')" = 2 ]
}
for n in "${NAMES[@]}"; do
    check "$n runs and sees two running instances" wait_until 20 sees2 "$n"
done
tool_count() {
    curl -s --max-time 5 -H "Authorization: Bearer $TOKEN" \
        "$(base "$1")/api/devices/$2" | jq -r '.tool_count // 0'
}

echo "# 1. a device whose catalog is larger than one broker packet"
named_device big d1 41 --idle --mcp-extra-tools "$TOOLS" \
    --mcp-tool-bytes "$DESC"
id=${DEV_ID[d1]}
check "its owner reads its tools" wait_until 20 grep -qE \
    "dev=$id mcp.* [0-9]+ tools? in" "${LOGF[gw-a]}" "${LOGF[gw-b]}"
if grep -qE "dev=$id mcp.* [0-9]+ tools? in" "${LOGF[gw-a]}"; then
    owner=gw-a other=gw-b
else
    owner=gw-b other=gw-a
fi
n_owner=$(tool_count "$owner" "$id")
echo "#   owner $owner: $n_owner tools"
check "the owner has all $TOOLS synthetic tools and the stock ones" \
    test "$n_owner" -gt "$TOOLS"
whole() { [ "$(tool_count "$other" "$id")" = "$n_owner" ]; }
check "the other instance has the whole catalog" wait_until 20 whole
check "from the owner: the device was initialized once" \
    test "$(grep -c '< mcp initialize ' "$GW_TMP/d1.out")" = 1
check "and the other instance never read its tools itself" \
    not grep -qE "dev=$id mcp.* [0-9]+ tools? in" "${LOGF[$other]}"
check "the owner sent it in parts" \
    grep -qE "catalog of $id sent in [0-9]+ parts" "${LOGF[$owner]}"
sizes=$(grep -E "Received PUBLISH from hybridgw-$owner .*/catalog'" \
    "$GW_TMP/broker.log" | grep -oE '[0-9]+ bytes' | tr '\n' ' ')
echo "#   catalog messages from $owner: $sizes"
parts=$(metric "$owner" 'hybridgw_cluster_catalog_parts_total{direction="out"}')
check "counted: $parts parts out" test "$parts" -ge 2
check "and as many in at the other" \
    test "$(metric "$other" 'hybridgw_cluster_catalog_parts_total{direction="in"}')" = "$parts"
check "the broker cut nobody off for an oversize packet" \
    not grep -qiE 'oversize|packet too large|exceeds' "$GW_TMP/broker.log"
for n in "${NAMES[@]}"; do
    check "$n kept its broker connection (connected once, never lost)" \
        test "$(grep -cE 'mqtt.*connected to ' "${LOGF[$n]}")/$(grep -cE 'mqtt.*( lost: |reconnecting)' "${LOGF[$n]}")" = 1/0
    check "$n still sees two running instances" sees2 "$n"
    check "$n refused nothing and sent nothing oversize" \
        test "$(metric "$n" hybridgw_cluster_messages_refused_total)/$(metric "$n" hybridgw_cluster_messages_oversize_total)" = 0/0
done

echo "# 2. a catalog from an instance that does not own the device: refused"
# As a gateway account may publish under the prefix (the plugin's rule).
forge() {
    mosquitto_pub -h 127.0.0.1 -p "$BROKER_PORT" -q 1 -i "hybridgw-forger" \
        -u "$PLUGIN_GW_USER" -P "$PLUGIN_GW_PASS" -t "$1" -m "$2"
}
fake_cat() {
    printf '{"t":"cat","from":"%s","cid":"%s","catalog":{"tools":{"state":"complete","tools":[{"name":"self.fake","description":"x","inputSchema":{"type":"object"}}]}}}' "$1" "$id"
}
forge "hybridgw/instances/$other/catalog" "$(fake_cat "$other")"
check "the catalog of a non-owner is refused by the owner" wait_until 10 \
    grep -qE "catalog of $id from $other refused: the device is not that instance's" "${LOGF[$owner]}"
forge "hybridgw/instances/$other/catalog" "$(fake_cat "$owner")"
check "one under the owner's name on another's topic is refused" \
    wait_until 10 grep -qE "catalog of $id from $owner refused: sent on another instance's topic" "${LOGF[$other]}"
check "counted at the other" \
    test "$(metric "$other" hybridgw_cluster_catalogs_foreign_total)" -ge 1
check "counted at the owner" \
    test "$(metric "$owner" hybridgw_cluster_catalogs_foreign_total)" -ge 1
check "the other instance's catalog is unchanged" whole

echo "# 3. a carried request the owner's rules refuse"
# A tools/call of a user-only tool for an MCP client, as if another
# instance had let it through: the owner decides by its own lists.
forge "hybridgw/instances/$owner/rpc" "$(printf '{"t":"req","from":"%s","cid":"%s","id":7,"method":"tools/call","params":{"name":"self.reboot","arguments":{}},"timeout_ms":5000,"origin":"client","progress":false}' "$other" "$id")"
check "refused at the owner" wait_until 10 grep -qE \
    "tools/call from $other for $id \(origin client\) refused: Unknown tool: self.reboot" "${LOGF[$owner]}"
check "counted" \
    test "$(metric "$owner" hybridgw_cluster_requests_refused_total)" = 1
check "the device never got the call" \
    not grep -q 'self.reboot' "$GW_TMP/d1.out"

rd=$(end_device d1)
check "the device's run was clean" jq_is "$rd" .ok true
for n in "${NAMES[@]}"; do
    kill -TERM "${PID[$n]}"
    wait_for_exit "${PID[$n]}"
    check "$n stops cleanly" test "$EXIT_CODE" = 0
    check "no sanitizer report in $n" \
        not grep -qE 'Sanitizer|runtime error' "${LOGF[$n]}"
done
finish
