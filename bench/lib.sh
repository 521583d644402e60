# shellcheck shell=bash disable=SC2034,SC2154 # the callers' variables
# Shell helpers shared by bench/run.sh and bench/cluster.sh: the network
# namespaces they run in and the counters they read. Source it after
# setting net (netns or loopback); bench_netns_up sets in_gw, in_dev,
# in_be, gw_ip, be_ip and ns_names.
#
# The layout: the gateway (and mosquitto) in one namespace, the devices
# and the backend each in their own, joined by veth pairs in the benchmark
# range 198.18.0.0/15. Each veth end receives in its own NAPI kernel
# thread, so the work of delivering a packet is not charged to its sender,
# as with a real network card and a real peer.

in_gw=() in_dev=() in_be=()
gw_ip=127.0.0.1 be_ip=127.0.0.1
ns_names=()

bench_netns_down() {
    local ns
    for ns in "${ns_names[@]}"; do
        ip netns del "$ns" 2>/dev/null || true
    done
}

# bench_veth A-NS A-IF A-IP B-NS B-IF B-IP
bench_veth() {
    ip link add "$2" netns "$1" type veth peer name "$5" netns "$4"
    ip -n "$1" addr add "$3/30" dev "$2"
    ip -n "$4" addr add "$6/30" dev "$5"
    local ns dev ns_dev
    for ns_dev in "$1:$2" "$4:$5"; do
        ns=${ns_dev%%:*} dev=${ns_dev#*:}
        ip -n "$ns" link set "$dev" up
        # GRO gives the end its NAPI; without TSO/GSO every TCP segment
        # is eligible for it; threaded moves the NAPI into a kthread.
        ip netns exec "$ns" ethtool -K "$dev" gro on tso off gso off \
            >/dev/null
        ip netns exec "$ns" sh -c "echo 1 >/sys/class/net/$dev/threaded"
    done
}

# bench_netns_up NS IF: namespaces NS-gw, NS-dev and NS-be, the veth ends
# IFgw-dev / IFdev and IFgw-be / IFbe (two scripts with different names
# can run at once). Removes them on exit.
bench_netns_up() {
    local ns=$1 if=$2
    command -v ethtool >/dev/null || apt-get install -y ethtool >/dev/null
    ns_names=("$ns-gw" "$ns-dev" "$ns-be")
    bench_netns_down
    trap 'gw_cleanup; bench_netns_down' EXIT
    local n
    for n in "${ns_names[@]}"; do
        ip netns add "$n"
        ip -n "$n" link set lo up
    done
    bench_veth "$ns-gw" "${if}gw-dev" 198.18.0.1 "$ns-dev" "${if}dev" 198.18.0.2
    bench_veth "$ns-gw" "${if}gw-be" 198.18.1.1 "$ns-be" "${if}be" 198.18.1.2
    in_gw=(ip netns exec "$ns-gw")
    in_dev=(ip netns exec "$ns-dev")
    in_be=(ip netns exec "$ns-be")
    gw_ip=198.18.0.1 be_ip=198.18.1.2
}

# Packets the veth pairs dropped so far (their ends' rx and tx drops).
veth_drops() {
    if [[ $net != netns ]]; then
        echo 0
        return
    fi
    local ns
    for ns in "${ns_names[@]}"; do
        ip -n "$ns" -s -j link show | jq '[.[] | select(.ifname != "lo") |
            .stats64.rx.dropped + .stats64.tx.dropped] | add // 0'
    done | awk '{ t += $1 } END { print t + 0 }'
}

# UDP datagrams the gateway's side dropped on a full socket buffer.
rcvbuf_errors() {
    # shellcheck disable=SC2016 # awk's own $6
    "${in_gw[@]}" awk '/^Udp:/ { if (h) { print $6; exit } h = 1 }' \
        /proc/net/snmp
}

cpu_ticks() { # PID: utime + stime, 0 once it is gone
    awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0
}

rss_kb() {
    awk '/^VmRSS/ { print $2 }' "/proc/$1/status"
}

# napi_ticks PATTERN: CPU ticks of the NAPI threads whose name matches.
napi_ticks() {
    local t=0 pid
    if [[ $net == netns ]]; then
        for pid in $(pgrep "$1" || true); do
            t=$((t + $(cpu_ticks "$pid")))
        done
    fi
    echo "$t"
}

# relay_percentiles BEFORE AFTER: "p50 p99 share<=1ms" of the window, p50
# and p99 in ms, interpolated within buckets, from two relay histograms
# ("le count" lines, cumulative).
relay_percentiles() {
    paste "$1" "$2" | awk '{ le[NR] = $1; c[NR] = $4 - $2 } END {
        n = c[NR]
        if (n == 0) { print "- - -"; exit }
        for (i = 1; i <= NR; i++) if (le[i] == "0.001") share = c[i] / n
        split("0.5 0.99", qs, " ")
        for (k = 1; k <= 2; k++) {
            want = qs[k] * n; lo = 0; prev = 0
            for (i = 1; i <= NR; i++) {
                if (c[i] >= want && le[i] == "+Inf") {
                    q[k] = sprintf(">%g", lo * 1000) # past the last bound
                    break
                }
                if (c[i] >= want) {
                    f = (c[i] > prev) ? (want - prev) / (c[i] - prev) : 1
                    q[k] = sprintf("%.3f", (lo + (le[i] - lo) * f) * 1000)
                    break
                }
                lo = le[i]; prev = c[i]
            }
        }
        printf "%s %s %.2f\n", q[1], q[2], share * 100 }'
}
