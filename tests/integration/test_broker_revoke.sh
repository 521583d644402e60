#!/usr/bin/env bash
# Unbinding reaches the broker plugin (docs/protocol.md section 1): the
# gateway account's {"revoke":[[id,below]]} on plugin_opt_revoke_topic
# ends a connected device whose credentials' binding id is below, within
# 10 s and without a broker restart; those credentials are refused from
# then on, newer ones accepted; nobody else may publish revocations and
# nobody receives them; device ids in the gateways' group are refused.
# Real mosquitto with the plugin; device credentials made as the OTA
# endpoint makes them (username base64 of {"ip":...,"b":N}, password the
# HMAC of client id "|" username).
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
REVOKE_TOPIC=hybridgw/broker/revoke

start_plugin_broker broker || bail "the broker starts with the plugin"
BLOG=$GW_TMP/broker.log

# user N: the username of binding id N (0: the lab form, without "b").
user() {
    if [ "$1" -eq 0 ]; then
        printf '{"ip":"127.0.0.1"}' | base64 -w0
    else
        printf '{"ip":"127.0.0.1","b":%s}' "$1" | base64 -w0
    fi
}

# password CLIENT_ID USERNAME: the xiaozhi password the OTA endpoint issues.
password() {
    printf '%s' "$1|$2" | openssl dgst -sha256 -hmac "$PLUGIN_KEY" -binary |
        base64
}

# creds CLIENT_ID N: sets LOGIN to the mosquitto_pub/sub options that log
# in as that device with the credentials of binding id N.
creds() {
    local u
    u=$(user "$2")
    LOGIN=(-p "$BROKER_PORT" -i "$1" -u "$u" -P "$(password "$1" "$u")")
}
GW_LOGIN=(-p "$BROKER_PORT" -u "$PLUGIN_GW_USER" -P "$PLUGIN_GW_PASS")

# sub_bg NAME CLIENT_ID ARGS...: mosquitto_sub ARGS in the background,
# output in $GW_TMP/NAME.out, once the broker sent its SUBACK; SUB_PID.
sub_bg() {
    local name=$1 id=$2
    shift 2
    mosquitto_sub "$@" >"$GW_TMP/$name.out" 2>&1 &
    SUB_PID=$!
    peer_log "$GW_TMP/$name.out"
    wait_for_line "$BLOG" "Sending SUBACK to $id\$"
}

# connects CLIENT_ID N: a publish with binding N's credentials gets in.
connects() {
    creds "$1" "$2"
    mosquitto_pub "${LOGIN[@]}" -q 1 -t device-server -m '{"type":"hello"}'
}

# refused_as CLIENT_ID N REASON: the same is refused ("not authorised")
# and the broker logs REASON for it (an ERE) once more than before. The
# ids here hold no ERE characters.
refused_as() {
    local id=$1 re before out
    re="hybridgw_broker: refused client '$id' from 127\\.0\\.0\\.1: $3"
    before=$(count_lines "$BLOG" "$re")
    creds "$id" "$2"
    if out=$(mosquitto_pub "${LOGIN[@]}" -q 1 -t device-server -m x 2>&1); then
        echo "# connected: $out"
        return 1
    fi
    grep -q 'not authorised' <<<"$out" || {
        echo "# $out"
        return 1
    }
    # The refusal is logged before the CONNACK is sent.
    has_lines "$BLOG" "$re" $((before + 1))
}

# same_lines FILE EXPECTED: true when FILE holds exactly the EXPECTED lines.
same_lines() {
    if [ "$(cat "$1")" = "$2" ]; then
        return 0
    fi
    echo "# $1 holds:" >&2
    sed 's/^/#   /' "$1" >&2
    return 1
}

dev=GID_it@@@02_00_00_00_00_51@@@revoke
other=GID_it@@@02_00_00_00_00_52@@@kept

# Watchers from before the first device: presence, and a gateway-account
# subscriber of the revoke topic (with a marker topic), which must never
# get a revocation.
PRES=$GW_TMP/presence.out
sub_bg presence it-gw-presence "${GW_LOGIN[@]}" -i it-gw-presence -v \
    -t 'devices/+/presence' || bail "the presence watcher subscribes"
SPY=$GW_TMP/spy.out
sub_bg spy it-gw-spy "${GW_LOGIN[@]}" -i it-gw-spy -v -t "$REVOKE_TOPIC" \
    -t 'hybridgw/#' -t it/mark || bail "a spy on the revoke topic subscribes"

echo "# 1. a connected device with binding 5 is kicked by below 6"
creds "$dev" 5
sub_bg dev "$dev" "${LOGIN[@]}" -t "devices/$dev/down" ||
    bail "the device (binding 5) connects and subscribes"
dev_pid=$SUB_PID
creds "$other" 5
sub_bg other "$other" "${LOGIN[@]}" -t "devices/$other/down" ||
    bail "another device (binding 5) connects"
other_pid=$SUB_PID
check "both are online" wait_for_lines "$PRES" '"state":"online"' 2

t0=$(date +%s%N)
check "the gateway account publishes the revocation (QoS 1)" \
    mosquitto_pub "${GW_LOGIN[@]}" -i it-gw-revoke -q 1 -t "$REVOKE_TOPIC" \
    -m "{\"revoke\":[[\"$dev\",6]]}"
# The presence offline is the plugin's disconnect event of the device.
if wait_for_line "$PRES" "^devices/$dev/presence \\{\"state\":\"offline\"" 15; then
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "# the device's connection ended ${ms} ms after the revocation"
    check "... within 10 s" test "$ms" -lt 10000
else
    not_ok "the device's connection ends after the revocation"
fi
check "the kick is logged" grep -qF \
    "hybridgw_broker: device '$dev' kicked: credentials revoked (binding id below 6; 1 in all)" \
    "$BLOG"
check "the revocation is logged" grep -qF \
    "hybridgw_broker: revocation from 'it-gw-revoke': 1 entries, 1 kicked" \
    "$BLOG"
# mosquitto_sub reconnects by itself; refused, it gives up.
check "the device's own reconnection is refused: its client exits" \
    wait_for_exit "$dev_pid" 15
check "... not authorised" grep -q 'not authorised' "$GW_TMP/dev.out"
check "the other device (another client id) stays connected" \
    not gone "$other_pid"

echo "# 2. binding 5's credentials are refused from now on, 6's accepted"
check "binding 5 refused: credentials revoked" \
    refused_as "$dev" 5 'credentials revoked \(unbound\) \([0-9]+ in all\)$'
check "lab credentials (no binding id) of that id refused too" \
    refused_as "$dev" 0 'credentials revoked \(unbound\) \([0-9]+ in all\)$'
check "binding 6 accepted" connects "$dev" 6
check "binding 7 accepted" connects "$dev" 7
check "the other device's binding 5 still accepted" connects "$other" 5
# An older (lower) revocation does not undo a newer one.
mosquitto_pub "${GW_LOGIN[@]}" -q 1 -t "$REVOKE_TOPIC" \
    -m "{\"revoke\":[[\"$dev\",3],[\"$other\",1]]}"
check "a lower below is taken and changes nothing" \
    wait_for_line "$BLOG" 'revocation from .*: 2 entries, 0 kicked' 15
check "binding 5 still refused" \
    refused_as "$dev" 5 'credentials revoked \(unbound\) \([0-9]+ in all\)$'

echo "# 3. only the gateway account may revoke; nobody receives revocations"
creds "$dev" 6
check "a device's publish on the revoke topic goes out (the broker drops it)" \
    mosquitto_pub "${LOGIN[@]}" -q 1 -t "$REVOKE_TOPIC" \
    -m "{\"revoke\":[[\"$dev\",100],[\"$other\",100]]}"
check "... denied, and logged" grep -qF \
    "hybridgw_broker: denied write of '$REVOKE_TOPIC' to client '$dev'" "$BLOG"
check "... and not applied: binding 6 still accepted" connects "$dev" 6
check "... the other device still connected" not gone "$other_pid"
# A malformed one from the gateway is refused, counted, and not delivered.
mosquitto_pub "${GW_LOGIN[@]}" -i it-gw-bad -q 1 -t "$REVOKE_TOPIC" \
    -m '{"revoke":[["sensor-7",6]]}'
check "a malformed revocation is refused and logged" grep -qF \
    "hybridgw_broker: revocation from 'it-gw-bad' refused: protocol violation (1 in all)" \
    "$BLOG"
mosquitto_pub "${GW_LOGIN[@]}" -q 1 -r -t "$REVOKE_TOPIC" \
    -m "{\"revoke\":[[\"$other\",6]]}"
check "a retained revocation is applied (kicks the other device)" \
    wait_for_exit "$other_pid" 15
mosquitto_pub "${GW_LOGIN[@]}" -q 1 -t it/mark -m mark
check "the spy gets its marker" wait_for_line "$SPY" '^it/mark mark$'
check "... and never a revocation" same_lines "$SPY" "it/mark mark"
sub_bg late it-gw-late "${GW_LOGIN[@]}" -i it-gw-late -v -t "$REVOKE_TOPIC" \
    -t it/mark2 || not_ok "a later subscriber subscribes"
late_pid=$SUB_PID
mosquitto_pub "${GW_LOGIN[@]}" -q 1 -t it/mark2 -m mark
check "a later subscriber finds nothing retained there" \
    wait_for_line "$GW_TMP/late.out" '^it/mark2 mark$'
check "... its one message is the marker" same_lines "$GW_TMP/late.out" \
    "it/mark2 mark"
kill "$late_pid" 2>/dev/null

echo "# 4. device ids in the gateways' group are refused"
check "group 'HybridGW-lab' refused" refused_as \
    'HybridGW-lab@@@02_00_00_00_00_53@@@u' 6 \
    'client id group reserved for gateways \(1 in all\)$'
check "group 'hybridgw' refused" refused_as 'hybridgw@@@02_00_00_00_00_53' 6 \
    'client id group reserved for gateways \(2 in all\)$'
check "group 'my-hybridgw' accepted" connects \
    'my-hybridgw@@@02_00_00_00_00_53@@@u' 6

stop_pid "$BROKER_PID"
check "mosquitto stops cleanly" test "${EXIT_CODE:-1}" -eq 0
finish
