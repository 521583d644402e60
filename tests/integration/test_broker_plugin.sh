#!/usr/bin/env bash
# The broker plugin on its own, seen by plain MQTT clients (mosquitto_pub
# and mosquitto_sub as devices and as the gateway account): start-up option
# checks, auth refusals and their log lines, ACLs, the uplink rewrite,
# direct downlink delivery, and retained presence across clean and unclean
# ends, keepalive timeouts and session take-over. The gateway's side of the
# same broker is test_stock_devices.sh.
#
# "Nothing arrives" is checked without fixed waits: a marker is published
# after the message that must not arrive, and the receiver's output is
# compared once the marker is there (the broker keeps the order).
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
USER_NAME=eyJpcCI6IjEyNy4wLjAuMSJ9 # base64 of {"ip":"127.0.0.1"}

# port_closed PORT: true when nothing accepts a connection on it.
port_closed() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# refused_start NAME OPTION_LINES LOG_TEXT: mosquitto loading the plugin
# with these plugin_opt_ lines must exit non-zero at start, log LOG_TEXT
# and never listen.
refused_start() {
    local name=$1 opts=$2 text=$3 port pid
    port=$(free_port)
    cat >"$GW_TMP/$name.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous false
persistence false
log_dest stderr
log_type all
plugin $PLUGIN
$opts
CONF
    mosquitto -c "$GW_TMP/$name.conf" >"$GW_TMP/$name.log" 2>&1 &
    pid=$!
    EXIT_CODE=0
    check "$name: mosquitto exits" wait_for_exit "$pid"
    check "$name: with a non-zero status" test "$EXIT_CODE" -ne 0
    check "$name: the log says why" \
        grep -qF "hybridgw_broker: $text" "$GW_TMP/$name.log"
    check "$name: nothing listens on its port" port_closed "$port"
    kill -KILL "$pid" 2>/dev/null
}

echo "# 1. the broker refuses to start without a required option"
refused_start no-device-key "plugin_opt_gateway_username $PLUGIN_GW_USER
plugin_opt_gateway_password $PLUGIN_GW_PASS" \
    "plugin_opt_device_key is required; refusing to start"
refused_start unknown-option "plugin_opt_device_key $PLUGIN_KEY
plugin_opt_gateway_username $PLUGIN_GW_USER
plugin_opt_gateway_password $PLUGIN_GW_PASS
plugin_opt_device_keys $PLUGIN_KEY" \
    "unknown option plugin_opt_device_keys"
refused_start status-under-prefix "plugin_opt_device_key $PLUGIN_KEY
plugin_opt_gateway_username $PLUGIN_GW_USER
plugin_opt_gateway_password $PLUGIN_GW_PASS
plugin_opt_gateway_status_topic devices/gw/presence" \
    "plugin_opt_gateway_status_topic 'devices/gw/presence' must not be under"

start_plugin_broker broker "plugin_opt_gateway_status_topic hybridgw/it/status" ||
    bail "the broker starts with the plugin"
BLOG=$GW_TMP/broker.log
# The broker's run, in every presence message (docs/protocol.md 2.3).
RUN=$(grep -oE 'hybridgw_broker: run [0-9]+' "$BLOG" | head -n 1 | awk '{print $3}')
check "the plugin names its run ($RUN)" test -n "$RUN"

# password CLIENT_ID [USERNAME]: the xiaozhi password of a device.
password() {
    printf '%s' "$1|${2:-$USER_NAME}" |
        openssl dgst -sha256 -hmac "$PLUGIN_KEY" -binary | base64
}

# login CLIENT_ID: sets LOGIN to the mosquitto_pub/sub options that log in
# as that device; GW_LOGIN logs in on the gateway account.
login() {
    LOGIN=(-p "$BROKER_PORT" -i "$1" -u "$USER_NAME" -P "$(password "$1")")
}
GW_LOGIN=(-p "$BROKER_PORT" -u "$PLUGIN_GW_USER" -P "$PLUGIN_GW_PASS")

# dev_pub / dev_sub CLIENT_ID ARGS...: mosquitto_pub / mosquitto_sub as
# that device.
dev_pub() {
    login "$1"
    shift
    mosquitto_pub "${LOGIN[@]}" "$@"
}
dev_sub() {
    login "$1"
    shift
    mosquitto_sub "${LOGIN[@]}" "$@"
}

# gw_pub / gw_sub ARGS...: the same on the gateway account.
gw_pub() { mosquitto_pub "${GW_LOGIN[@]}" "$@"; }
gw_sub() { mosquitto_sub "${GW_LOGIN[@]}" "$@"; }

# dev_id N: the client id of test device N.
dev_id() {
    printf 'GID_it@@@02_00_00_00_00_%02x@@@plugin-%d' "$1" "$1"
}

# sub_bg NAME CLIENT_ID ARGS...: mosquitto_sub ARGS (logging in as
# CLIENT_ID) in the background, output in $GW_TMP/NAME.out; waits for
# the broker's SUBACK to it. Sets SUB_PID, the client's own pid (not a
# subshell's), so that signals reach it.
sub_bg() {
    local name=$1 id=$2
    shift 2
    mosquitto_sub "$@" >"$GW_TMP/$name.out" 2>&1 &
    SUB_PID=$!
    wait_for_line "$BLOG" "Sending SUBACK to $id\$"
}

# kill_quietly SIGNAL PID: signals a background client and reaps it
# without the shell's "Killed" notice.
kill_quietly() {
    kill "-$1" "$2" 2>/dev/null
    wait "$2" 2>/dev/null
}

# same FILE EXPECTED: true when FILE holds exactly the EXPECTED lines.
same() {
    if [ "$(cat "$1")" = "$2" ]; then
        return 0
    fi
    echo "# $1 holds:" >&2
    sed 's/^/#   /' "$1" >&2
    return 1
}

# A gateway's view of presence, from before the first device.
PRES=$GW_TMP/presence.out
sub_bg presence it-gw-presence "${GW_LOGIN[@]}" -i it-gw-presence \
    -t 'devices/+/presence' -v ||
    not_ok "the presence watcher subscribes"

# presence CLIENT_ID: the presence payloads seen for that device, in order.
presence() {
    grep -F "devices/$1/presence " "$PRES" | cut -d' ' -f2-
}

# presence_count CLIENT_ID N: true once N presence messages of it arrived.
presence_count() {
    [ "$(presence "$1" | wc -l)" -ge "$2" ]
}

# wait_state CLIENT_ID STATE CONN: waits for that presence message.
wait_state() {
    wait_for_line "$PRES" \
        "^devices/$1/presence \\{\"state\":\"$2\".*\"conn\":$3,\"run\":$RUN\\}\$"
}

echo "# 2. auth: refusals are logged with the client id and the reason"
# refused WHAT CLIENT_ID REASON ARGS...: a mosquitto_pub as CLIENT_ID with
# ARGS (credentials) is refused, and the broker logs exactly one refusal of
# that id, whose reason matches the glob REASON.
refused() {
    local what=$1 id=$2 reason=$3 out rc reasons
    shift 3
    out=$(mosquitto_pub -p "$BROKER_PORT" -i "$id" "$@" -t device-server \
        -m hello 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q 'not authorised' <<<"$out"; then
        ok "$what: connection refused"
    else
        not_ok "$what: connection refused (exit $rc: $out)"
    fi
    # The refusal is logged before the CONNACK is sent.
    reasons=$(grep -F "hybridgw_broker: refused client '$id' from 127.0.0.1: " \
        "$BLOG" | sed 's/.* from 127\.0\.0\.1: //')
    # shellcheck disable=SC2053 # REASON is a glob
    if [[ $reasons == $reason ]]; then
        ok "$what: logged as '$reason'"
    else
        not_ok "$what: logged as '$reason' (got '$reasons')"
    fi
}

good=$(dev_id 1)
refused "wrong password" "$good" "bad password" \
    -u "$USER_NAME" -P "$(password "$(dev_id 2)")"
refused "password of another username" "$(dev_id 2)" "bad password" \
    -u "$USER_NAME" -P "$(password "$(dev_id 2)" eyJpcCI6IjEwLjAuMC4xIn0=)"
refused "no password" "$(dev_id 3)" "no password" -u "$USER_NAME"
slash_id='GID_it@@@02_00_00_00_00_04@@@a/b'
refused "client id with '/'" "$slash_id" "unusable client id (*" \
    -u "$USER_NAME" -P "$(password "$slash_id")"
plus_id='GID_it@@@02_00_00_00_00_05@@@a+b'
refused "client id with '+'" "$plus_id" "unusable client id (*" \
    -u "$USER_NAME" -P "$(password "$plus_id")"
refused "a client id that is no device's" sensor-7 \
    "not a device client id (*" -u "$USER_NAME" -P "$(password sensor-7)"
refused "a bad MAC part" 'GID_it@@@02:00:00:00:00:06@@@x' \
    "not a device client id (*" \
    -u "$USER_NAME" -P "$(password 'GID_it@@@02:00:00:00:00:06@@@x')"
refused "gateway account, wrong password" it-gw-bad \
    "bad password for the gateway account" -u "$PLUGIN_GW_USER" -P wrong
refused "gateway account, no password" it-gw-nopass "no password" \
    -u "$PLUGIN_GW_USER"

check "a device with the right password is accepted" \
    dev_pub "$good" -q 1 -t device-server -m '{"type":"hello"}'
check "... and logged as a device" grep -qF \
    "hybridgw_broker: client '$good' from 127.0.0.1 authenticated as device" \
    "$BLOG"
check "its end is announced" wait_state "$good" offline '[0-9]+'
check "refused clients and the gateway account announce no presence" \
    same <(cut -d/ -f2 "$PRES" | sort -u) "$(printf '%s\n' "$good" '$broker' | sort)"
check "the gateway account's login republishes the run, retained" \
    grep -qxF "devices/\$broker/presence {\"run\":$RUN}" "$PRES"

echo "# 3. ACLs: a device touches only its own topics"
dev_a=$(dev_id 10) dev_b=$(dev_id 11) dev_d=$(dev_id 12)
UP=$GW_TMP/up.out
sub_bg up it-gw-up "${GW_LOGIN[@]}" -i it-gw-up -v -t 'devices/+/up' \
    -t device-server ||
    not_ok "the gateway's uplink watcher subscribes"
login "$dev_b"
sub_bg dev-b "$dev_b" "${LOGIN[@]}" -t "devices/$dev_b/down" -v ||
    not_ok "device B subscribes to its down topic"
b_pid=$SUB_PID
# -d prints the SUBACK's granted QoS, 128 being a refusal.
login "$dev_a"
sub_bg dev-a "$dev_a" "${LOGIN[@]}" -d -v -t "devices/$dev_a/down" \
    -t "devices/$dev_b/down" -t 'devices/+/up' -t 'devices/+/presence' \
    -t 'devices/#' -t device-server ||
    not_ok "device A subscribes"
a_pid=$SUB_PID
check "the first denial is logged with the topic and the client id" \
    grep -qF "hybridgw_broker: denied subscribe of 'devices/$dev_b/down' \
to client '$dev_a'" "$BLOG"

# D tries to write where only the gateway or B may.
check "D publishes to B's up topic (the broker drops it)" \
    dev_pub "$dev_d" -q 1 -t "devices/$dev_b/up" -m forged-up
check "... to B's down topic" dev_pub "$dev_d" -q 1 -t "devices/$dev_b/down" \
    -m forged-down
check "... to B's presence topic, retained" dev_pub "$dev_d" -q 1 -r \
    -t "devices/$dev_b/presence" -m '{"state":"offline","conn":999}'
check "the write denial is logged" grep -qF \
    "hybridgw_broker: denied write of 'devices/$dev_b/up' to client '$dev_d'" \
    "$BLOG"

# Markers, each sent after everything its receiver must not see.
gw_pub -q 1 -t devices/it-mark/up -m mark-1
gw_pub -q 1 -t "devices/$dev_b/down" -m for-b
gw_pub -q 1 -t "devices/$dev_a/down" -m for-a
check "the gateway sees nothing of D's write to B's up topic" \
    wait_for_line "$UP" '^devices/it-mark/up mark-1$'
check "... its first message is the marker" \
    same <(head -n 1 "$UP") "devices/it-mark/up mark-1"
check "B gets the gateway's downlink" \
    wait_for_line "$GW_TMP/dev-b.out" 'for-b$'
check "... and not D's forged one" \
    same "$GW_TMP/dev-b.out" "devices/$dev_b/down for-b"
check "A gets its own downlink" \
    wait_for_line "$GW_TMP/dev-a.out" 'for-a$'
# Its debug lines are written out with the first message.
check "its SUBACK granted its own down topic only" grep -qE \
    '^Subscribed \(mid: [0-9]+\): 0, 128, 128, 128, 128, 128$' \
    "$GW_TMP/dev-a.out"
check "... and nothing else: not B's down, anyone's up or presence" \
    same <(grep -v -e '^Client ' -e '^Subscribed ' "$GW_TMP/dev-a.out") \
    "devices/$dev_a/down for-a"
check "D's fake presence of B was not published" \
    not grep -q 'conn":999' "$PRES"
kill_quietly TERM "$a_pid"
kill_quietly TERM "$b_pid"

echo "# 4. uplink: device-server becomes the device's own up topic"
dev_c=$(dev_id 13)
hello='{"type":"hello","version":3,"transport":"udp"}'
check "C publishes on device-server" \
    dev_pub "$dev_c" -q 1 -t device-server -m "$hello"
check "C publishes on its own up topic" \
    dev_pub "$dev_c" -q 1 -t "devices/$dev_c/up" -m '{"type":"goodbye"}'
gw_pub -q 1 -t device-server -m mark-2
check "the gateway's watcher gets both" \
    wait_for_line "$UP" '^device-server mark-2$'
check "device-server arrives as devices/<id>/up, own up as is, same payloads" \
    same "$UP" "devices/it-mark/up mark-1
devices/$dev_c/up $hello
devices/$dev_c/up {\"type\":\"goodbye\"}
device-server mark-2"

echo "# 5. downlink: to the device alone, exactly once, subscribed or not"
dev_s=$(dev_id 20) dev_n=$(dev_id 21)
login "$dev_s"
sub_bg dev-s "$dev_s" "${LOGIN[@]}" -q 1 -F '%q %r %t %p' \
    -t "devices/$dev_s/down" || not_ok "S subscribes to its down topic"
s_pid=$SUB_PID
# mosquitto_sub needs a topic: N subscribes and at once unsubscribes, so it
# stays connected without a subscription, like stock firmware.
login "$dev_n"
mosquitto_sub "${LOGIN[@]}" -F '%q %r %t %p' -t "devices/$dev_n/down" \
    -U "devices/$dev_n/down" >"$GW_TMP/dev-n.out" 2>&1 &
n_pid=$!
check "N is connected without a subscription" \
    wait_for_line "$BLOG" "Sending UNSUBACK to $dev_n\$"
sub_bg spy it-gw-spy "${GW_LOGIN[@]}" -i it-gw-spy -v -t 'devices/+/down' \
    -t it-spy/end || not_ok "a gateway-account spy subscribes"

gw_pub -q 1 -t "devices/$dev_s/down" -m '{"type":"tts","state":"start"}'
gw_pub -q 1 -r -t "devices/$dev_n/down" -m '{"type":"tts","state":"stop"}'
gw_pub -q 0 -t "devices/$dev_s/down" -m s-end
gw_pub -q 0 -t it-spy/end -m end
check "N, never subscribed, gets its downlink" \
    wait_for_line "$GW_TMP/dev-n.out" '"stop"'
check "... once, at the publisher's QoS 1, not retained" \
    same "$GW_TMP/dev-n.out" \
    "1 0 devices/$dev_n/down {\"type\":\"tts\",\"state\":\"stop\"}"
check "S, subscribed, gets its two downlinks" \
    wait_for_line "$GW_TMP/dev-s.out" 's-end$'
check "... each exactly once" same "$GW_TMP/dev-s.out" \
    "1 0 devices/$dev_s/down {\"type\":\"tts\",\"state\":\"start\"}
0 0 devices/$dev_s/down s-end"
check "the spy gets its marker" \
    wait_for_line "$GW_TMP/spy.out" '^it-spy/end end$'
check "... and no downlink: the original is not routed" \
    same "$GW_TMP/spy.out" "it-spy/end end"
sub_bg late it-gw-late "${GW_LOGIN[@]}" -i it-gw-late -C 1 -W "$GW_WAIT_S" -v \
    -t 'devices/+/down' -t it-spy/end ||
    not_ok "a later subscriber of every down topic subscribes"
late_pid=$SUB_PID
gw_pub -q 0 -t it-spy/end -m end-2
check "a later subscriber finds no retained downlink" \
    wait_for_exit "$late_pid"
check "... its one message is the marker" \
    same "$GW_TMP/late.out" "it-spy/end end-2"
kill_quietly TERM "$s_pid"
kill_quietly TERM "$n_pid"

echo "# 6. presence: retained, online with the address, offline at every end"
# conn_of CLIENT_ID: the conn of that device's latest presence message.
conn_of() {
    presence "$1" | tail -n 1 | jq -r .conn
}

dev_e=$(dev_id 30)
login "$dev_e"
sub_bg dev-e "$dev_e" "${LOGIN[@]}" -t "devices/$dev_e/down" ||
    not_ok "E connects"
e_pid=$SUB_PID
check "E is announced" wait_until "$GW_WAIT_S" presence_count "$dev_e" 1
e_online=$(presence "$dev_e" | head -n 1)
check "online" jq_is "$e_online" .state online
check "with the device's address" jq_is "$e_online" .address 127.0.0.1
check "and a conn number" \
    jq_is "$e_online" '.conn | type == "number" and . > 0' true
e_conn=$(conn_of "$dev_e")
kill_quietly TERM "$e_pid"
check "a clean disconnect is announced offline with the same conn" \
    wait_state "$dev_e" offline "$e_conn"
check "... it was one (DISCONNECT received)" \
    grep -q "Received DISCONNECT from $dev_e\$" "$BLOG"
check "and nothing more" \
    same <(presence "$dev_e" | jq -r .state) "online
offline"

dev_f=$(dev_id 31)
login "$dev_f"
sub_bg dev-f "$dev_f" "${LOGIN[@]}" -t "devices/$dev_f/down" ||
    not_ok "F connects"
f_pid=$SUB_PID
wait_until "$GW_WAIT_S" presence_count "$dev_f" 1
f_conn=$(conn_of "$dev_f")
check "F has a newer conn than E" test "${f_conn:-0}" -gt "${e_conn:-0}"
kill_quietly KILL "$f_pid"
check "a dropped TCP connection (kill -9) is announced offline" \
    wait_state "$dev_f" offline "$f_conn"
check "... the broker saw no DISCONNECT" \
    not grep -q "Received DISCONNECT from $dev_f\$" "$BLOG"

dev_g=$(dev_id 32)
login "$dev_g"
sub_bg dev-g "$dev_g" "${LOGIN[@]}" -k 5 -t "devices/$dev_g/down" ||
    not_ok "G connects with a 5 s keepalive"
g_pid=$SUB_PID
wait_until "$GW_WAIT_S" presence_count "$dev_g" 1
g_conn=$(conn_of "$dev_g")
kill -STOP "$g_pid"
# Mosquitto gives up after 1.5 keepalives without a packet.
check "a frozen client is dropped at its keepalive" \
    wait_for_line "$BLOG" "Client $dev_g has exceeded timeout"
check "... and announced offline" wait_state "$dev_g" offline "$g_conn"
kill_quietly KILL "$g_pid"

echo "# 7. take-over: the newer connection's state stays"
dev_h=$(dev_id 33)
login "$dev_h"
sub_bg dev-h1 "$dev_h" "${LOGIN[@]}" -v -t "devices/$dev_h/down" ||
    not_ok "H connects"
h1_pid=$SUB_PID
wait_until "$GW_WAIT_S" presence_count "$dev_h" 1
h1_conn=$(conn_of "$dev_h")
# Frozen, the old client cannot reconnect and take the id back.
kill -STOP "$h1_pid"
login "$dev_h"
mosquitto_sub "${LOGIN[@]}" -v -t "devices/$dev_h/down" \
    >"$GW_TMP/dev-h2.out" 2>&1 &
h2_pid=$!
check "mosquitto closes the old connection" wait_for_line "$BLOG" \
    "Client $dev_h already connected, closing old connection"
check "the new connection is announced" \
    wait_until "$GW_WAIT_S" presence_count "$dev_h" 2
h2_conn=$(conn_of "$dev_h")
check "online, with a newer conn ($h1_conn -> $h2_conn)" \
    test "${h2_conn:-0}" -gt "${h1_conn:-0}"
kill_quietly KILL "$h1_pid"

refused "a wrong password with the connected id" "$dev_h" "bad password" \
    -u "$USER_NAME" -P "$(password "$dev_e")"
check "the new connection is subscribed" \
    wait_for_lines "$BLOG" "Sending SUBACK to $dev_h\$" 2
gw_pub -q 1 -t "devices/$dev_h/down" -m after-refusal
check "the new connection still gets its downlink" \
    wait_for_line "$GW_TMP/dev-h2.out" 'after-refusal$'
check "a new subscriber reads the retained state: online, newer conn" \
    same <(gw_sub -i it-gw-fresh -C 1 -W "$GW_WAIT_S" -F '%r %p' \
        -t "devices/$dev_h/presence") \
    "1 {\"state\":\"online\",\"address\":\"127.0.0.1\",\"conn\":$h2_conn,\"run\":$RUN}"
kill_quietly TERM "$h2_pid"
check "the new connection's end is announced" \
    wait_state "$dev_h" offline "$h2_conn"
check "nothing for the replaced or the refused connection" \
    same <(presence "$dev_h") \
    "{\"state\":\"online\",\"address\":\"127.0.0.1\",\"conn\":$h1_conn,\"run\":$RUN}
{\"state\":\"online\",\"address\":\"127.0.0.1\",\"conn\":$h2_conn,\"run\":$RUN}
{\"state\":\"offline\",\"conn\":$h2_conn,\"run\":$RUN}"
all_ids=("$good" "$dev_a" "$dev_b" "$dev_d" "$dev_c" "$dev_s" "$dev_n" "$dev_e"
    "$dev_f" "$dev_g" "$dev_h")
check "a gateway subscribing now gets every device's last state and the run, retained" \
    same <(gw_sub -i it-gw-restart -C "$((${#all_ids[@]} + 1))" -W "$GW_WAIT_S" -F '%r %t %p' \
        -t 'devices/+/presence' | sort) \
    "$( (for id in "${all_ids[@]}"; do
        printf '1 devices/%s/presence %s\n' "$id" \
            "$(presence "$id" | tail -n 1)"
    done; printf '1 devices/$broker/presence {"run":%s}\n' "$RUN") | sort)"

echo "# 9. device publishes: never retained"
dev_r=$(dev_id 40)
dev_pub "$dev_r" -r -t device-server \
    -m '{"type":"hello","version":3,"transport":"udp"}'
check "the plugin logs the cleared retain flag" wait_for_line "$BLOG" \
    "device '$dev_r': retain flag cleared .1 from this connection"
# A new subscriber gets what is retained under the device's topics, then
# stops at the first live message: the marker published after it.
mosquitto_sub "${GW_LOGIN[@]}" -i it-gw-retained -F '%r %t' \
    -t "devices/$dev_r/+" --retained-only >"$GW_TMP/retained.out" 2>&1 &
ret_pid=$!
wait_for_line "$BLOG" 'Sending SUBACK to it-gw-retained$'
gw_pub -t "devices/$dev_r/marker" -m end
check "the subscriber ends at the live marker" wait_for_exit "$ret_pid"
check "only the device's presence is retained, not its hello" \
    same "$GW_TMP/retained.out" "1 devices/$dev_r/presence"

echo "# 9b. wills: the gateway account's to its status topic, nothing else"
# Each client is killed with -9: the broker then checks its will right
# after the plugin's disconnect event.
# will_bg CLIENT_ID WILL_TOPIC SUB_TOPIC LOGIN...: a subscriber to
# SUB_TOPIC (one it may read: a refused subscription ends mosquitto_sub
# cleanly, will discarded) with a retained QoS 1 will on WILL_TOPIC,
# killed with -9 once subscribed.
will_bg() {
    local id=$1 topic=$2 sub=$3
    shift 3
    sub_bg "will-$id" "$id" "$@" -i "$id" -t "$sub" \
        --will-topic "$topic" --will-payload '{"state":"offline"}' \
        --will-retain --will-qos 1 || not_ok "$id subscribes"
    kill_quietly KILL "$SUB_PID"
}
will_bg it-gw-will hybridgw/it/status it/will "${GW_LOGIN[@]}"
check "the gateway's will on its status topic is let through" \
    wait_for_line "$BLOG" "the gateway's will on 'hybridgw/it/status' let through"
will_bg it-gw-will2 hybridgw/it/other it/will "${GW_LOGIN[@]}"
check "a gateway-account will elsewhere is denied" \
    wait_for_line "$BLOG" "denied write of 'hybridgw/it/other' to client 'it-gw-will2'"
dev_w=$(dev_id 42)
login "$dev_w"
will_bg "$dev_w" "devices/$dev_w/up" "devices/$dev_w/down" "${LOGIN[@]}"
check "a device's will, even on its own up topic, is denied" \
    wait_for_line "$BLOG" "denied write of 'devices/$dev_w/up' to client '$dev_w'"
mosquitto_sub "${GW_LOGIN[@]}" -i it-gw-wills -F '%r %t %p' \
    -t 'hybridgw/it/#' -t "devices/$dev_w/up" --retained-only \
    >"$GW_TMP/wills.out" 2>&1 &
ret_pid=$!
wait_for_line "$BLOG" 'Sending SUBACK to it-gw-wills$'
gw_pub -t hybridgw/it/marker -m end
check "the will subscriber ends at the live marker" wait_for_exit "$ret_pid"
check "only the gateway's status will is retained" \
    same "$GW_TMP/wills.out" '1 hybridgw/it/status {"state":"offline"}'

stop_pid "$BROKER_PID"
check "mosquitto stops cleanly with the plugin" test "${EXIT_CODE:-1}" -eq 0

echo "# 10. device publishes: the plugin's size bound, without message_size_limit"
BROKER_SIZE_LIMIT='' start_plugin_broker big "plugin_opt_max_message_bytes 2048" ||
    bail "a broker without message_size_limit starts"
BLOG=$GW_TMP/big.log
GW_LOGIN=(-p "$BROKER_PORT" -u "$PLUGIN_GW_USER" -P "$PLUGIN_GW_PASS")
check "the broker has no message_size_limit" \
    not grep -q message_size_limit "$GW_TMP/big.conf"
sub_bg up it-gw-up "${GW_LOGIN[@]}" -i it-gw-up -t 'devices/+/up' -F '%t %l' ||
    not_ok "the up watcher subscribes"
dev_z=$(dev_id 41)
head -c 2049 /dev/zero | tr '\0' x >"$GW_TMP/over.bin"
head -c 2048 /dev/zero | tr '\0' y >"$GW_TMP/limit.bin"
dev_pub "$dev_z" -t device-server -f "$GW_TMP/over.bin"
dev_pub "$dev_z" -t device-server -f "$GW_TMP/limit.bin"
dev_pub "$dev_z" -t device-server -m marker
check "the marker arrives" wait_for_line "$GW_TMP/up.out" "/up 6\$"
check "the publish at the bound passes, the one over it does not" \
    same "$GW_TMP/up.out" "devices/$dev_z/up 2048
devices/$dev_z/up 6"
check "the refusal is logged with its size and count" grep -qF \
    "device '$dev_z': publish of 2049 bytes refused, over plugin_opt_max_message_bytes 2048 (1 from this connection, 1 in all)" \
    "$BLOG"
kill_quietly TERM "$SUB_PID"
stop_pid "$BROKER_PID"

echo "# 11. the default bound refuses 64 MiB from a device"
BROKER_SIZE_LIMIT='' start_plugin_broker huge ||
    bail "a broker with the default bound starts"
BLOG=$GW_TMP/huge.log
GW_LOGIN=(-p "$BROKER_PORT" -u "$PLUGIN_GW_USER" -P "$PLUGIN_GW_PASS")
sub_bg up2 it-gw-up2 "${GW_LOGIN[@]}" -i it-gw-up2 -t 'devices/+/up' -F '%t %l' ||
    not_ok "the up watcher subscribes"
head -c $((64 << 20)) /dev/zero | tr '\0' x >"$GW_TMP/huge.bin"
dev_pub "$dev_z" -t device-server -f "$GW_TMP/huge.bin"
rm -f "$GW_TMP/huge.bin"
dev_pub "$dev_z" -t device-server -m marker
check "the marker arrives" wait_for_line "$GW_TMP/up2.out" "/up 6\$"
check "nothing else does" same "$GW_TMP/up2.out" "devices/$dev_z/up 6"
check "the refusal is logged" grep -qF \
    "publish of 67108864 bytes refused, over plugin_opt_max_message_bytes 65536" \
    "$BLOG"
kill_quietly TERM "$SUB_PID"
stop_pid "$BROKER_PID"
check "mosquitto stops cleanly" test "${EXIT_CODE:-1}" -eq 0
finish
