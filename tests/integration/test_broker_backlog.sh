#!/usr/bin/env bash
# The plugin raises the broker's listen backlog (plugin_opt_listen_backlog):
# Mosquitto 2.0.11 listens with 100, and a fleet reconnecting at once after
# a restart overflows that queue. Checked on the kernel's own figure: `ss`
# shows a listening socket's backlog in its Send-Q column. A unix socket
# listener keeps the broker's own.
GW=$1
src=$2
SIM=$3
. "$src/tests/integration/lib.sh"

need_plugin
command -v ss >/dev/null || bail "ss (iproute2) is installed"
SOMAXCONN=$(cat /proc/sys/net/core/somaxconn)
# Mosquitto started as root runs as its own user: the unix sockets go
# where that user may create them.
SOCK_DIR=$GW_TMP/sock
mkdir -p "$SOCK_DIR"
chmod 0711 "$GW_TMP"
chmod 1777 "$SOCK_DIR"

# tcp_backlog PORT: the Send-Q of the TCP listener on PORT.
tcp_backlog() {
    ss -Hltn "sport = :$1" | awk '{print $3}' | head -n 1
}

# unix_backlog PATH: the Send-Q of the unix listener at PATH.
unix_backlog() {
    ss -Hlx | awk -v p="$1" '$5 == p {print $4}' | head -n 1
}

# backlog_case NAME EXPECTED LOG_TEXT [OPTION_LINE]: a broker with the
# plugin (and OPTION_LINE) on two TCP listeners and a unix one; once the
# plugin logs LOG_TEXT both TCP listeners show EXPECTED, the unix one 10.
backlog_case() {
    local name=$1 want=$2 text=$3 opt=${4:-} port2 sock
    port2=$(free_port)
    sock=$SOCK_DIR/$name.sock
    start_plugin_broker "$name" "$opt
listener $port2 127.0.0.1
listener 0 $sock" || bail "$name: the broker starts with the plugin"
    check "$name: the plugin logs what it did" \
        wait_for_line "$GW_TMP/$name.log" "hybridgw_broker: $text"
    check "$name: first listener's backlog $want (ss: $(tcp_backlog "$BROKER_PORT"))" \
        test "$(tcp_backlog "$BROKER_PORT")" = "$want"
    check "$name: second listener's backlog $want (ss: $(tcp_backlog "$port2"))" \
        test "$(tcp_backlog "$port2")" = "$want"
    check "$name: the unix listener keeps 10 (ss: $(unix_backlog "$sock"))" \
        test "$(unix_backlog "$sock")" = 10
    check "$name: a client still gets in" \
        mosquitto_sub -h 127.0.0.1 -p "$BROKER_PORT" -i hybridgw-backlog \
        -u "$PLUGIN_GW_USER" -P "$PLUGIN_GW_PASS" -t "devices/\$broker/presence" \
        -C 1 -W 10
    kill -TERM "$BROKER_PID"
    wait_for_exit "$BROKER_PID" || kill -KILL "$BROKER_PID"
}

echo "# 1. by default, the kernel's net.core.somaxconn ($SOMAXCONN)"
backlog_case default "$SOMAXCONN" \
    "listen backlog $SOMAXCONN on 2 TCP listeners \\(net.core.somaxconn $SOMAXCONN caps it\\)"

echo "# 2. a value of its own"
backlog_case set 512 "listen backlog 512 on 2 TCP listeners" \
    "plugin_opt_listen_backlog 512"

echo "# 3. 0 leaves Mosquitto's own 100"
backlog_case off 100 "listen backlog left as the broker set it" \
    "plugin_opt_listen_backlog 0"

echo "# 4. an unusable value stops the broker at start"
port=$(free_port)
cat >"$GW_TMP/bad.conf" <<CONF
listener $port 127.0.0.1
allow_anonymous false
persistence false
log_dest stderr
plugin $PLUGIN
plugin_opt_device_key $PLUGIN_KEY
plugin_opt_gateway_username $PLUGIN_GW_USER
plugin_opt_gateway_password $PLUGIN_GW_PASS
plugin_opt_listen_backlog lots
CONF
mosquitto -c "$GW_TMP/bad.conf" >"$GW_TMP/bad.log" 2>&1 &
pid=$!
check "bad value: mosquitto exits" wait_for_exit "$pid"
check "bad value: the log says why" grep -qF \
    "hybridgw_broker: plugin_opt_listen_backlog must be somaxconn or a count" \
    "$GW_TMP/bad.log"
kill -KILL "$pid" 2>/dev/null

finish
