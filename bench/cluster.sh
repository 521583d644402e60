#!/usr/bin/env bash
# hybridgw benchmark, several instances: for each N, N devices streaming
# Opus through ONE gateway instance, then the same N devices
# through TWO instances in cluster.mode "hash" on one mosquitto (each
# device answered by its owner, docs/protocol.md section 10), in the same
# invocation, with the same load generator, mock backend and network as
# bench/run.sh. Prints a table per configuration: CPU of both gateways
# summed per relayed packet, each instance's share of the sessions, loss
# both ways, relay delay from each instance's own histogram, RSS per
# session, and the CPU of everything else on the machine (the load
# generator, mosquitto, the mock backend, the kernel's receive threads),
# since on a small machine they all share the cores. One line per
# configuration goes to stderr as it ends, the tables to stdout at the end.
#
#   bench/cluster.sh [N ...]       default: 1000 2000
#   BENCH_SECONDS=30               the steady window, in seconds (default
#                                  30): every device streams through all of
#                                  it, after the ramp and before the stop
#   BENCH_SWEEP=1 bench/cluster.sh [N ...]
#                                  sessions held at zero loss: N from 500
#                                  by 500 up to BENCH_SWEEP_CAP (4000)
#                                  unless listed; each configuration stops
#                                  at its first N with loss or a session
#                                  not held; the largest clean N is
#                                  printed for each (BENCH_SECONDS 20 by
#                                  default here)
#   BENCH_ONE_MODE=hash            the single instance in cluster.mode
#                                  "hash" (alone in its cluster) instead
#                                  of "off"
#   BENCH_NAPI_FIFO=1              the veth ends' NAPI threads in SCHED_FIFO
#                                  (see napi_fifo below; not bench/run.sh's
#                                  setup, so say so with its figures)
#   BENCH_SYSCALLS=1               also count the gateways' system calls per
#                                  relayed packet over the window (perf stat
#                                  on the syscalls:sys_enter_* tracepoints;
#                                  this costs them CPU, so read the CPU
#                                  figures of such a run as a pair only)
#   BENCH_NET=loopback             everything on 127.0.0.1 (the default as
#                                  root is network namespaces, as in
#                                  bench/run.sh)
#   BENCH_BUILD=build/xyz          binaries of that build directory instead
#                                  of build/plain (which is then not rebuilt)
#   BENCH_REPORT=file              also write the tables there
#
# Uplink loss is counted over the steady window from both sides' packet
# logs (a packet a device sent in the window that the backend never got):
# the stop of the run is left out, where a goodbye can overtake the last
# datagrams; the whole run's count is shown beside it. Downlink loss is the
# whole run's: the mock backend answers once per session (a device in
# realtime mode never sends a second listen start), 20 frames soon after
# its hello, so the downlink flows during the ramp, not in the window.
set -euo pipefail
cd "$(dirname "$0")/.."

counts=("$@")
sweep=${BENCH_SWEEP:-}
if [[ -n $sweep ]]; then
    seconds=${BENCH_SECONDS:-20}
    if ((${#counts[@]} == 0)); then
        for ((n = 500; n <= ${BENCH_SWEEP_CAP:-4000}; n += 500)); do
            counts+=("$n")
        done
    fi
else
    seconds=${BENCH_SECONDS:-30}
    if ((${#counts[@]} == 0)); then
        counts=(1000 2000)
    fi
fi
one_mode=${BENCH_ONE_MODE:-off}
case $one_mode in
off | hash) ;;
*)
    echo "bench: BENCH_ONE_MODE is off or hash, not $one_mode" >&2
    exit 2
    ;;
esac
net=${BENCH_NET:-}
if [[ -z $net ]]; then
    net=loopback
    if ((EUID == 0)) && command -v ip >/dev/null; then
        net=netns
    fi
fi

GW_SETUP_NODE=0 scripts/setup.sh >/dev/null
if [[ -n ${BENCH_BUILD:-} ]]; then
    build=$BENCH_BUILD
else
    build=build/plain
    scripts/build.sh plain >/dev/null
fi
gw=$build/gateway/hybridgw
sim=$build/tools/hybridgw-sim
hz=$(getconf CLK_TCK)
cores=$(nproc)
# The load generator's sockets, the backend's and mosquitto's connections.
ulimit -n 65536 2>/dev/null || true

# shellcheck source-path=SCRIPTDIR source=../scripts/lib.sh
. scripts/lib.sh
# shellcheck source-path=SCRIPTDIR source=lib.sh
. bench/lib.sh
tmp=$GW_TMP

# BENCH_NAPI_FIFO=1: the veth ends' NAPI threads in SCHED_FIFO, so that
# they preempt every process as a network card's interrupt and softirq
# work does on a real host, instead of queueing behind the load generator
# and the backend for a time slice while their receive rings overflow.
napi_fifo() {
    local pid
    if [[ -n ${BENCH_NAPI_FIFO:-} && $net == netns ]]; then
        for pid in $(pgrep '^napi/hbc' || true); do
            chrt -f -p 50 "$pid"
        done
    fi
}

# The same layout as bench/run.sh, in namespaces of their own so that
# both can run at once.
if [[ $net == netns ]]; then
    bench_netns_up hbclu hbc
    napi_fifo
fi

# veth_drop_list: "ifname rx_dropped tx_dropped" of each veth end, to
# tell which receiver was starved.
veth_drop_list() {
    local ns
    if [[ $net == netns ]]; then
        for ns in "${ns_names[@]}"; do
            ip -n "$ns" -s -j link show | jq -r '.[] |
                select(.ifname != "lo") |
                "\(.ifname) \(.stats64.rx.dropped) \(.stats64.tx.dropped)"'
        done
    fi
}

# wakeups PID: the context switches of the process's main thread (the
# gateway's loop): each is a wait in epoll, or a preemption.
wakeups() {
    awk '/^(non)?voluntary_ctxt_switches/ { n += $2 } END { print n + 0 }' \
        "/proc/$1/status" 2>/dev/null || echo 0
}

# The machine's CPU so far: "busy steal total" in ticks over all cores
# (busy: user, nice, system, irq and softirq; total includes idle).
machine_ticks() {
    awk '$1 == "cpu" { busy = $2 + $3 + $4 + $7 + $8
        print busy, $9, busy + $5 + $6 + $9 }' /proc/stat
}

# proc_snapshot FILE: "pid comm ticks" of every process and kernel thread,
# ticks with the children it reaped (utime, stime, cutime, cstime), so the
# short-lived compilers and tests of other work show in their parent.
proc_snapshot() {
    cat /proc/[0-9]*/stat 2>/dev/null | awk '{
        i = index($0, "("); j = length($0)
        while (substr($0, j, 1) != ")") j--
        comm = substr($0, i + 1, j - i - 1); gsub(/[ \t]/, "_", comm)
        split(substr($0, j + 2), f, " ")
        print $1, comm, f[12] + f[13] + f[14] + f[15] }' >"$1"
}

# others BEFORE AFTER SECONDS PID...: CPU of the processes alive at both
# snapshots other than the PIDs given (the benchmark's), in % of one core:
# "total top1:pct,top2:pct,top3:pct".
others() {
    local before=$1 after=$2 secs=$3
    shift 3
    awk -v hz="$hz" -v s="$secs" -v mine=" $* " '
        FNR == 1 { file++ }
        file == 1 { t[$1] = $3; next }
        ($1 in t) && index(mine, " " $1 " ") == 0 {
            d = $3 - t[$1]
            if (d > 0) { sum += d; by[$2] += d }
        }
        END {
            printf "%.1f %%", sum * 100 / hz / s
            for (k = 0; k < 3; k++) {
                best = ""; bv = 0
                for (c in by) if (by[c] > bv) { bv = by[c]; best = c }
                if (best == "") break
                printf "%s%s %.0f%%", (k ? ", " : " ("), best, bv * 100 / hz / s
                delete by[best]
            }
            if (k) printf ")"
            print "" }' "$before" "$after"
}

# metrics HTTP_PORT FILE: one instance's /metrics.
metrics() {
    "${in_gw[@]}" curl -fsS --max-time 10 -H 'Authorization: Bearer bench' \
        "http://127.0.0.1:$1/metrics" >"$2"
}

# metric FILE KEY: the value of KEY (name and labels) in a /metrics file.
metric() {
    awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' "$1"
}

relayed() { # FILE: audio packets relayed, both directions
    echo $(($(metric "$1" 'hybridgw_audio_packets_total{direction="device_to_backend"}') + \
        $(metric "$1" 'hybridgw_audio_packets_total{direction="backend_to_device"}')))
}

# relay_hist FILE...: the relay delay histogram ("le count" lines,
# cumulative) summed over the /metrics files given.
relay_hist() {
    sed -nE 's/^hybridgw_udp_relay_seconds_bucket\{le="([^"]+)"\} ([0-9]+)$/\1 \2/p' \
        "$@" | awk '{ if (!($1 in c)) o[++n] = $1; c[$1] += $2 }
            END { for (i = 1; i <= n; i++) print o[i], c[o[i]] }'
}

# window_edge ARRAY: the CPU ticks (and each gateway's wakeups) of every
# process of the run at one edge of the steady window, into ARRAY; reads
# run_config's names, pid, mq, be and load.
# shellcheck disable=SC2034 # at: the caller's array, by name
window_edge() {
    local -n at=$1
    local name
    for name in "${names[@]}"; do
        at["$name"]=$(cpu_ticks "${pid[$name]}")
        at["w$name"]=$(wakeups "${pid[$name]}")
    done
    at["mq"]=$(cpu_ticks "$mq")
    at["be"]=$(cpu_ticks "$be")
    at["load"]=$(cpu_ticks "$load")
    at["napi_gw"]=$(napi_ticks '^napi/hbcgw-')
    at["napi"]=$(napi_ticks '^napi/hbc')
}

# relay_p50p99 BEFORE AFTER: "p50/p99" of the window in ms.
relay_p50p99() {
    relay_percentiles "$1" "$2" |
        awk '{ print ($1 == "-") ? "-" : $1 "/" $2 }'
}

# uplink_loss DEVICE_CSV BACKEND_CSV W0 W1: "lost sent lost_all sent_all"
# of the uplink: over the window [W0, W1] (unix us, by send time) and over
# the whole run. The backend does not see the devices' sequence numbers,
# only the payloads, which repeat every 50 frames: both logs, each in time
# order, are merged by time, and each frame the backend got is matched
# with the oldest frame its device sent with that payload hash; the ones
# passed over on the way were lost (one path per device keeps the order).
# A frame logged by the backend before its sender's own log line (the
# sender logs after the send) is held until that line comes.
uplink_loss() {
    sort -m -t, -k1,1n -k2,2n \
        <(awk -F, '$1 == "up" { split($2, p, "@@@")
            print $4 ",0," p[3] "," $6 }' "$1") \
        <(awk -F, '$1 == "up" { print $6 ",1," $4 "," $9 }' "$2") |
        awk -F, -v w0="$3" -v w1="$4" '
        $2 == 0 {
            id = $3; sent++
            if ($1 >= w0 && $1 <= w1) wsent++
            if (early[id, $4] > 0) { early[id, $4]--; next }
            n = ++tail[id]; h[id, n] = $4; t[id, n] = $1
            next
        }
        {
            id = $3; found = 0
            while (head[id] < tail[id]) {
                n = ++head[id]; x = h[id, n]; y = t[id, n]
                delete h[id, n]; delete t[id, n]
                if (x == $4) { found = 1; break }
                lost++
                if (y >= w0 && y <= w1) wlost++
            }
            if (!found) early[id, $4]++
        }
        END {
            for (k in t) { lost++; if (t[k] >= w0 && t[k] <= w1) wlost++ }
            print wlost + 0, wsent + 0, lost + 0, sent + 0
        }'
}

# pct TICKS SECONDS: the CPU of TICKS over SECONDS, in % of one core.
pct() {
    echo "scale=1; $1 * 100 / $hz / $2" | bc
}

rows=()
declare -A held=()   # configuration -> largest N held at zero loss
declare -A failed=() # configuration -> first N that was not
declare -A us_of=()  # "N config" -> us per packet, for the ratio

# run_config N one|two: one run of N devices through that configuration;
# appends its row to rows; sets CLEAN (1 when every session was held and
# nothing was lost in the window).
run_config() {
    local n=$1 cfg=$2 dir=$tmp/n$1-$2
    mkdir -p "$dir"
    local names=(bench-one)
    [[ $cfg == two ]] && names=(bench-a bench-b)
    local bp wp
    # Ports free where they are bound: the gateways' namespace holds
    # thousands of connections' ports from the configurations before.
    bp=$("${in_gw[@]}" "$sim" free-port)
    wp=$("${in_be[@]}" "$sim" free-port)
    printf 'listener %s %s\nallow_anonymous true\npersistence false\nset_tcp_nodelay true\nmax_queued_messages 10000\nlog_dest stderr\nlog_type information\n' \
        "$bp" "$([[ $net == netns ]] && echo 0.0.0.0 || echo 127.0.0.1)" \
        >"$dir/mosquitto.conf"
    "${in_gw[@]}" mosquitto -c "$dir/mosquitto.conf" 2>"$dir/mosquitto.log" &
    local mq=$!
    GW_PIDS+=("$mq")
    wait_for_ready "$mq" "$dir/mosquitto.log" "listen socket on port $bp" ||
        exit 1
    "${in_be[@]}" "$sim" backend --listen "$be_ip:$wp" \
        --events "$dir/backend.events" --max-conns 20000 \
        --turn-frames 20 --tts-frames 20 --no-decode --log-level warn \
        --latency-log "$dir/backend.csv" 2>"$dir/backend.log" &
    local be=$!
    GW_PIDS+=("$be")
    wait_for_ready "$be" "$dir/backend.events" '"ev":"ready"' || exit 1

    local name mode=hash g
    [[ $cfg == one ]] && mode=$one_mode
    local -A hp=() pid=()
    for name in "${names[@]}"; do
        hp[$name]=$("${in_gw[@]}" "$sim" free-port)
        cat >"$dir/$name.json" <<EOF
{ "instance": "$name",
  "mqtt": { "host": "127.0.0.1", "port": $bp, "client_id": "hybridgw-$name" },
  "udp": { "bind": "$gw_ip", "port": $("${in_gw[@]}" "$sim" free-port --udp),
           "public_host": "$gw_ip" },
  "backends": [ { "name": "mock",
    "url": "ws://$be_ip:$wp/xiaozhi/v1/?from=mqtt_gateway" } ],
  "http": { "listen": "127.0.0.1", "port": ${hp[$name]}, "token": "bench" },
  "limits": { "max_sessions": 100000 },
  "cluster": { "mode": "$mode", "instance": "$name" },
  "log": { "level": "info" } }
EOF
        "${in_gw[@]}" "$gw" -c "$dir/$name.json" 2>"$dir/$name.log" &
        pid[$name]=$!
        GW_PIDS+=("${pid[$name]}")
        wait_for_ready "${pid[$name]}" "$dir/$name.log" 'broker link up' ||
            exit 1
    done
    # Every instance sees the others running before a device says hello,
    # so that each hello has its owner already.
    local want=${#names[@]}
    running_all() {
        local x
        [[ $mode == off ]] && return 0
        for x in "${names[@]}"; do
            metrics "${hp[$x]}" "$dir/m.$x" || return 1
            [[ $(metric "$dir/m.$x" 'hybridgw_cluster_instances{state="running"}') == "$want" ]] ||
                return 1
        done
    }
    wait_until 30 running_all || {
        echo "bench: the instances do not see each other running" >&2
        exit 1
    }
    local -A rss0=()
    for name in "${names[@]}"; do
        rss0[$name]=$(rss_kb "${pid[$name]}")
    done

    # The ramp: at least 200 hellos a second as bench/run.sh, faster for
    # large N so that it stays within about 15 s.
    local ramp=$(((n + 14) / 15))
    ((ramp < 200)) && ramp=200
    ((ramp > n)) && ramp=$n
    local ramp_s=$(((n + ramp - 1) / ramp + 2))
    local vd0 rb0
    vd0=$(veth_drops)
    veth_drop_list >"$dir/veth0"
    rb0=$(rcvbuf_errors)
    "${in_dev[@]}" "$sim" load --devices "$n" --ramp "$ramp" \
        --duration $((ramp_s + seconds + 60)) --mode realtime \
        --broker "$gw_ip:$bp" --seed "$n" --subscribing \
        --publish-topic 'devices/{client_id}/up' --no-decode \
        --stats-json "$dir/load.json" --packet-log "$dir/device.csv" \
        >"$dir/load.out" 2>&1 &
    local load=$!
    GW_PIDS+=("$load")
    # The window starts once every session is open (or the ramp and 30 s
    # more have passed: then the row shows the sessions missing), and the
    # hellos' burst of backend connections has settled.
    all_open() {
        local x open=0
        for x in "${names[@]}"; do
            metrics "${hp[$x]}" "$dir/m.$x" || return 1
            open=$((open + $(metric "$dir/m.$x" hybridgw_sessions)))
        done
        ((open >= n))
    }
    wait_until $((ramp_s + 30)) all_open || true
    sleep 2

    # The steady window.
    local t0 t1 w0 w1 m0 m1 la0 la1
    local -A c0=() c1=()
    for name in "${names[@]}"; do
        metrics "${hp[$name]}" "$dir/m0.$name"
    done
    window_edge c0
    local vw0 vw1
    vw0=$(veth_drops)
    m0=$(machine_ticks)
    proc_snapshot "$dir/procs0"
    la0=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    w0=$(date +%s%6N)
    if [[ -n ${BENCH_SYSCALLS:-} ]]; then
        local gpids=()
        for name in "${names[@]}"; do
            gpids+=("${pid[$name]}")
        done
        perf stat -x, -e 'syscalls:sys_enter_*' \
            -p "$(IFS=,; echo "${gpids[*]}")" -o "$dir/syscalls" \
            -- sleep "$seconds" >/dev/null 2>&1 || true
    else
        sleep "$seconds"
    fi
    w1=$(date +%s%6N)
    t1=$(date +%s.%N)
    m1=$(machine_ticks)
    proc_snapshot "$dir/procs1"
    la1=$(cut -d' ' -f1 /proc/loadavg)
    window_edge c1
    for name in "${names[@]}"; do
        metrics "${hp[$name]}" "$dir/m1.$name"
    done
    vw1=$(veth_drops)
    local -A rss1=()
    for name in "${names[@]}"; do
        rss1[$name]=$(rss_kb "${pid[$name]}")
    done
    # Frames the backend sent at the window's end are paced out by the
    # gateway for up to a reply's length (20 x 60 ms): let them arrive.
    sleep 3
    kill -INT "$load" 2>/dev/null || true
    wait_until 60 gone "$load" || kill -KILL "$load" 2>/dev/null || true
    wait "$load" || echo "bench: load exited $? (see $dir/load.out)" >&2
    local vdrops rbdrops
    vdrops=$(($(veth_drops) - vd0))
    veth_drop_list >"$dir/veth1"
    local vwhere
    vwhere=$(paste -d' ' "$dir/veth0" "$dir/veth1" | awk '{
        rx = $5 - $2; tx = $6 - $3
        if (rx + tx > 0) printf "%s%s rx %d tx %d", sep, $1, rx, tx
        if (rx + tx > 0) sep = ", " }')
    rbdrops=$(($(rcvbuf_errors) - rb0))

    # A gateway that died under the load is a finding, not a figure.
    local crashed=()
    for name in "${names[@]}"; do
        if gone "${pid[$name]}"; then
            crashed+=("$name")
        fi
    done
    for name in "${names[@]}" mq be; do
        case $name in
        mq) g=$mq ;;
        be) g=$be ;;
        *) g=${pid[$name]} ;;
        esac
        kill -TERM "$g" 2>/dev/null || true
    done
    local rc
    for name in "${names[@]}"; do
        rc=0
        wait "${pid[$name]}" 2>/dev/null || rc=$?
        if ((rc != 0)); then
            echo "bench: $name exited $rc (log: $dir/$name.log)" >&2
            crashed+=("$name")
        fi
    done
    wait "$mq" "$be" 2>/dev/null || true
    if ((${#crashed[@]} > 0)); then
        echo "bench: gateway ${crashed[*]} died under the load; kept $dir" >&2
        tail -n 20 "$dir/${crashed[0]}.log" >&2
        # shellcheck disable=SC2034 # read by gw_cleanup (scripts/lib.sh)
        GW_KEEP=1
    fi

    # Figures.
    local dt packets=0 gticks=0 wk=0 shares="" p50p99="" rssp="" r s sess=0 kb=0
    dt=$(echo "$t1 - $t0" | bc)
    for name in "${names[@]}"; do
        r=$(($(relayed "$dir/m1.$name") - $(relayed "$dir/m0.$name")))
        packets=$((packets + r))
        gticks=$((gticks + c1[$name] - c0[$name]))
        wk=$((wk + ${c1[w$name]} - ${c0[w$name]}))
        s=$(metric "$dir/m0.$name" hybridgw_sessions)
        sess=$((sess + s))
        kb=$((kb + rss1[$name] - rss0[$name]))
        shares+="${shares:+ / }$s"
        relay_hist "$dir/m0.$name" >"$dir/h0.$name"
        relay_hist "$dir/m1.$name" >"$dir/h1.$name"
        p50p99+="${p50p99:+ ; }$(relay_p50p99 "$dir/h0.$name" "$dir/h1.$name")"
        rssp+="${rssp:+ / }$(echo "scale=1; (${rss1[$name]} - ${rss0[$name]}) / $((s > 0 ? s : 1))" | bc)"
    done
    if [[ $cfg == two ]]; then
        # Both instances' windows together.
        relay_hist "$dir"/m0.bench-* >"$dir/h0.all"
        relay_hist "$dir"/m1.bench-* >"$dir/h1.all"
        p50p99+=" (both: $(relay_p50p99 "$dir/h0.all" "$dir/h1.all"))"
        rssp+=" (both: $(echo "scale=1; $kb / $n" | bc))"
    fi
    local us_per_packet pps gcpu
    if ((packets > 0)); then
        us_per_packet=$(echo "scale=3; $gticks * 1000000 / $hz / $packets" | bc)
    else
        us_per_packet=-
    fi
    us_of["$n $cfg"]=$us_per_packet
    pps=$(echo "scale=0; $packets / $dt" | bc)
    # Packets relayed per context switch of a gateway's main thread (a wait
    # in epoll, or a preemption), and per system call when counted.
    local per_wake=- sc=-
    if [[ -s $dir/syscalls ]]; then
        # "total name:n name:n name:n" per relayed packet.
        sc=$(awk -F, -v p="$packets" '$3 ~ /^syscalls:sys_enter_/ &&
                $1 ~ /^[0-9]+$/ && $1 > 0 {
                name = $3; sub(/^syscalls:sys_enter_/, "", name)
                n[name] += $1; total += $1 }
            END {
                if (p <= 0 || total == 0) { print "-"; exit }
                out = sprintf("%.2f", total / p)
                for (k = 0; k < 3; k++) {
                    best = ""; bv = 0
                    for (x in n) if (n[x] > bv) { bv = n[x]; best = x }
                    if (best == "") break
                    out = out sprintf(" %s:%.2f", best, bv / p)
                    delete n[best]
                }
                print out }' "$dir/syscalls")
    fi
    ((wk > 0)) && per_wake=$(printf '%.1f' "$(echo "scale=2; $packets / $wk" | bc)")
    gcpu=$(pct "$gticks" "$dt")
    local lcpu mcpu bcpu ncpu ngw busy steal total other
    lcpu=$(pct $((c1[load] - c0[load])) "$dt")
    mcpu=$(pct $((c1[mq] - c0[mq])) "$dt")
    bcpu=$(pct $((c1[be] - c0[be])) "$dt")
    ncpu=$(pct $((c1[napi] - c0[napi])) "$dt")
    ngw=$(pct $((c1[napi_gw] - c0[napi_gw])) "$dt")
    local b0 s0 tt0 b1 s1 tt1
    read -r b0 s0 tt0 <<<"$m0"
    read -r b1 s1 tt1 <<<"$m1"
    total=$((tt1 - tt0))
    # In % of one core, as the processes' figures; the machine has $cores.
    busy=$(echo "scale=1; ($b1 - $b0) * 100 * $cores / $total" | bc)
    steal=$(echo "scale=1; ($s1 - $s0) * 100 * $cores / $total" | bc)
    other=$(echo "scale=1; $busy - $gcpu - $lcpu - $mcpu - $bcpu - $ncpu" | bc)
    # Of that rest, what other processes took (the benchmark's own: this
    # script with the tools it ran, its parts, the NAPI threads of its
    # veth pairs).
    local mine=($$ "$mq" "$be" "$load") others_cpu
    for name in "${names[@]}"; do
        mine+=("${pid[$name]}")
    done
    if [[ $net == netns ]]; then
        # shellcheck disable=SC2207 # pids are numbers
        mine+=($(pgrep '^napi/hbc' || true))
    fi
    others_cpu=$(others "$dir/procs0" "$dir/procs1" "$dt" "${mine[@]}")
    [[ $net == netns ]] || ncpu=- ngw=-

    local ul us ua up_sent down_sent down_recv
    read -r ul us ua up_sent < <(uplink_loss "$dir/device.csv" \
        "$dir/backend.csv" "$w0" "$w1")
    down_sent=$(grep -c '^down,' "$dir/backend.csv" || true)
    down_recv=$(grep -c '^down,' "$dir/device.csv" || true)
    local ok dup
    ok=$(jq -r '"\(.devices.ok)/\(.devices.requested)"' "$dir/load.json" \
        2>/dev/null || echo "?/$n")
    dup=$(jq -r '.devices.hello_duplicate + .devices.hello_invalid' \
        "$dir/load.json" 2>/dev/null || echo "?")
    local why
    why=$(jq -r '[.failures[] | "\(.count) x \(.reason)"] | join("; ")' \
        "$dir/load.json" 2>/dev/null || true)
    CLEAN=0
    # A device that heard two server hellos, or a bad one, is a wrong
    # answer (it fails too; said here in case the load's rules change).
    if [[ $ok == "$n/$n" && $sess == "$n" && $ul == 0 && $dup == 0 &&
        $down_sent == "$down_recv" &&
        ${#crashed[@]} == 0 ]]; then
        CLEAN=1
    fi
    local label="one ($mode)"
    [[ $cfg == two ]] && label="two (hash)"
    rows+=("| $n | $label | $ok${why:+ ($why)} | $shares | $pps | $per_wake | $sc | $gcpu % | **$us_per_packet** | $p50p99 | **$ul** of $us / $ua of $up_sent | **$((down_sent - down_recv))** of $down_sent | $((vw1 - vw0)) / $vdrops / $rbdrops | $rssp | $lcpu % | $mcpu % | $bcpu % | $ncpu % ($ngw %) | $busy % / $steal % | $other %: other processes $others_cpu | $la0 → $la1 |")
    echo "bench: $n devices, $label: ${us_per_packet} us/packet, $per_wake packets per wakeup, system calls per packet $sc (gateways $gcpu %, load $lcpu %, mosquitto $mcpu %, backend $bcpu %, napi $ncpu %, machine $busy % + steal $steal %, other processes $others_cpu), sessions $shares, relay p50/p99 $p50p99 ms, window loss up $ul of $us, whole run up $ua of $up_sent down $((down_sent - down_recv)) of $down_sent (veth $((vw1 - vw0)) in the window, $vdrops in all${vwhere:+: $vwhere}, rcvbuf $rbdrops), duplicate/invalid hellos $dup${why:+, failed: $why}, load average $la0 -> $la1" >&2
}

ratios=()
for n in "${counts[@]}"; do
    for cfg in one two; do
        if [[ -n $sweep && -n ${failed[$cfg]:-} ]]; then
            continue
        fi
        run_config "$n" "$cfg"
        if ((CLEAN)); then
            held[$cfg]=$n
        else
            failed[$cfg]=$n
        fi
    done
    if [[ -n ${us_of["$n one"]:-} && -n ${us_of["$n two"]:-} &&
        ${us_of["$n one"]} != - && ${us_of["$n two"]} != - ]]; then
        ratios+=("| $n | ${us_of["$n one"]} | ${us_of["$n two"]} | $(printf '%.2f' "$(echo "scale=3; ${us_of["$n two"]} / ${us_of["$n one"]}" | bc)") |")
    fi
    if [[ -n $sweep && -n ${failed[one]:-} && -n ${failed[two]:-} ]]; then
        break
    fi
done

{
    echo "Generated by \`$([[ -n $sweep ]] && echo 'BENCH_SWEEP=1 ')$([[ -n ${BENCH_NAPI_FIFO:-} ]] && echo 'BENCH_NAPI_FIFO=1 ')BENCH_NET=$net bench/cluster.sh ${counts[*]}\` (steady window ${seconds} s, single instance in mode $one_mode$([[ -n ${BENCH_NAPI_FIFO:-} ]] && echo ', NAPI threads in SCHED_FIFO')) on $(date -u '+%Y-%m-%d %H:%M') UTC, $cores cores."
    echo
    echo "| devices | instances | ok | sessions per instance | packets/s through the gateways | packets per wakeup of a gateway | gateways' system calls per packet | gateways' CPU (summed) | **gateway CPU us per relayed packet** | relay delay ms p50/p99 per instance | uplink lost: window / whole run | downlink lost (whole run) | dropped by veth: window / whole run; by the gateways' socket buffers | RSS KiB per session | load generator CPU | mosquitto CPU | mock backend CPU | NAPI threads CPU (gateway side) | machine busy / steal | rest of the machine | load average start → end |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    if ((${#ratios[@]} > 0)); then
        echo
        echo "| devices | one instance, us per packet | two instances | two / one |"
        echo "|---|---|---|---|"
        printf '%s\n' "${ratios[@]}"
    fi
    if [[ -n $sweep ]]; then
        echo
        for cfg in one two; do
            echo "- $([[ $cfg == one ]] && echo 'one instance' || echo 'two instances'): held at zero loss up to ${held[$cfg]:-none} devices$([[ -n ${failed[$cfg]:-} ]] && echo "; first not held: ${failed[$cfg]}" || echo "; held at every N tried")"
        done
    fi
    echo
    echo "CPU figures are % of one core over the steady window (the machine"
    echo "has $cores); machine busy is user+system+irq+softirq of all cores;"
    echo "the rest of the machine is that minus the processes listed, of"
    echo "which \"other processes\" is what the machine's other processes took"
    echo "(their own CPU and that of the children they reaped in the window;"
    echo "the three largest by name); what remains is kernel work outside any"
    echo "process (softirq on an idle core) and processes that came and went."
} >"$tmp/report.md"
if [[ -n ${BENCH_REPORT:-} ]]; then
    cp "$tmp/report.md" "$BENCH_REPORT"
fi
cat "$tmp/report.md"
