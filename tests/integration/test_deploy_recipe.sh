#!/usr/bin/env bash
# The deployment recipe (docker/, deploy/) checked without a container
# engine: the Dockerfile builds with the README's scripts and copies what
# the build really produces, its runtime stages run unprivileged with the
# libraries the binaries link, the compose file mounts the configs
# read-only and wires matching ports, names and secrets, the configs load
# (the gateway's --check-config, Mosquitto itself), the systemd unit
# verifies; and, once the broker plugin is built, the compose stack runs on
# 127.0.0.1 from the very files in docker/ with a stock device, which
# counts a reply's audio that overtakes its tts start as lost.
# scripts/container-test.sh runs the images themselves under Docker.
GW=$(realpath "$1")
src=$(realpath "$2")
SIM=$(realpath "$3")
. "$src/tests/integration/lib.sh"

non_root() { # USER[:GROUP]: set, and neither root nor uid 0
    [ -n "$1" ] && [[ ! ${1%%:*} =~ ^(root|0)$ ]]
}

dockerfile=$src/docker/Dockerfile
compose=$src/docker/compose.yaml
docker_mosq=$src/docker/mosquitto.conf
docker_gw=$src/docker/hybridgw.json
unit=$src/deploy/hybridgw.service
deploy_mosq=$src/deploy/mosquitto-hybridgw.conf
builddir=$(cd "$(dirname "$GW")/.." && pwd)
plugin=$builddir/broker/hybridgw_broker.so
plugin_opts="device_key device_topic gateway_username gateway_password topic_prefix"

# ---- the Dockerfile -----------------------------------------------------

# One line per instruction, continuations joined, comments dropped:
# STAGE<TAB>KEYWORD<TAB>ARGS. STAGE is the FROM's "AS" name (or its index).
df_records() {
    awk '
        /^[[:space:]]*#/ || /^[[:space:]]*$/ { next }
        {
            line = $0
            if (sub(/\\[[:space:]]*$/, "", line)) { cont = cont line " "; next }
            line = cont line; cont = ""
            sub(/^[[:space:]]+/, "", line)
            kw = line; sub(/[[:space:]].*/, "", kw); kw = toupper(kw)
            args = line; sub(/^[^[:space:]]+[[:space:]]*/, "", args)
            gsub(/[[:space:]]+/, " ", args)
            if (kw == "FROM") {
                n++; stage = n
                if (match(args, / [Aa][Ss] [^ ]+$/)) {
                    stage = substr(args, RSTART + 4)
                }
            }
            printf "%s\t%s\t%s\n", stage, kw, args
        }' "$1"
}

# apt_packages RUN_ARGS: the package names an "apt-get install" installs.
apt_packages() {
    local cmd w
    local -a words
    while IFS= read -r cmd; do
        [[ $cmd == *"apt-get install"* ]] || continue
        read -r -a words <<<"${cmd#*apt-get install}"
        for w in "${words[@]}"; do
            [[ $w == -* ]] || echo "$w"
        done
    done < <(sed 's/&&/\n/g; s/;/\n/g' <<<"$1")
}

declare -A base user workdir pkgs cmd expose
stages=()
copies=() # STAGE<TAB>SOURCE<TAB>DEST of every COPY --from=build
plain_copies=()
build_runs=""
while IFS=$'\t' read -r st kw args; do
    case $kw in
    FROM)
        stages+=("$st")
        base[$st]=$(awk '{for (i = 1; i <= NF; i++) if ($i !~ /^--/) {
            print $i; exit }}' <<<"$args")
        ;;
    USER) user[$st]=$args ;;
    WORKDIR) workdir[$st]=$args ;;
    CMD) cmd[$st]=$args ;;
    EXPOSE) expose[$st]="${expose[$st]:-} $args" ;;
    RUN)
        [ "$st" = build ] && build_runs+="$args"$'\n'
        pkgs[$st]="${pkgs[$st]:-} $(apt_packages "$args" | tr '\n' ' ')"
        ;;
    COPY)
        read -r -a w <<<"$args"
        from="" files=()
        for x in "${w[@]}"; do
            case $x in
            --from=*) from=${x#--from=} ;;
            --*) ;;
            *) files+=("$x") ;;
            esac
        done
        dest=${files[-1]}
        for s in "${files[@]:0:${#files[@]}-1}"; do
            if [ "$from" = build ]; then
                copies+=("$st"$'\t'"$s"$'\t'"$dest")
            elif [ -z "$from" ]; then
                plain_copies+=("$s")
            fi
        done
        ;;
    esac
done < <(df_records "$dockerfile")

check "the Dockerfile has a build stage FROM debian:12" \
    test "${base[build]:-}" = debian:12
# A syntax directive makes BuildKit fetch that frontend from a registry.
check "the Dockerfile has no syntax directive (it builds offline)" \
    not grep -qiE '^#[[:space:]]*syntax[[:space:]]*=' "$dockerfile"
for st in "${stages[@]}"; do
    check "stage $st starts from a local Debian base (${base[$st]})" \
        grep -qxE 'debian:12(-slim)?' <<<"${base[$st]}"
done
check "the build stage runs scripts/setup.sh" \
    grep -qE '(^|[ /])scripts/setup\.sh( |$)' <<<"$build_runs"
flavour=$(grep -oE 'scripts/build\.sh [a-z]+' <<<"$build_runs" |
    awk '{print $2; exit}')
check "the build stage runs scripts/build.sh with a flavour (${flavour:-none})" \
    test -n "$flavour"
check "scripts/build.sh builds flavour '$flavour' into build/$flavour" \
    grep -qE -- "-B build/$flavour( |$)" "$src/scripts/build.sh"

# The scripts the image runs are the ones users and CI run.
ci_chain=$(cat "$src/.ci/run")
for s in $(grep -oE 'scripts/[a-z_-]+\.sh' "$src/.ci/run" | sort -u); do
    ci_chain+=$(cat "$src/$s")
done
for s in setup.sh build.sh; do
    check "scripts/$s exists and is executable" test -x "$src/scripts/$s"
    check "README.md names $s" grep -q "$s" "$src/README.md"
    check "CI (.ci/run and the scripts it runs) runs scripts/$s" \
        grep -q "scripts/$s" <<<"$ci_chain"
done
check "README.md shows the build command scripts/build.sh" \
    grep -qE '^scripts/build\.sh' "$src/README.md"

# The host's build trees and the deployment configs (secrets, once edited)
# stay out of the build context: BuildKit reads Dockerfile.dockerignore,
# the classic builder (Debian's docker.io and docker-compose) only the
# root .dockerignore.
ignored() { # FILE NAME: true if a pattern of the ignore file matches NAME
    local p
    [ -f "$1" ] || return 1
    while IFS= read -r p; do
        [[ -z $p || $p == \#* || $p == !* ]] && continue
        # shellcheck disable=SC2053
        [[ $2 == $p ]] && return 0
    done <"$1"
    return 1
}
patterns() { grep -vE '^[[:space:]]*(#|$)' "$1" 2>/dev/null | sort; }
for ignore in "$src/docker/Dockerfile.dockerignore" "$src/.dockerignore"; do
    iname=${ignore#"$src"/}
    for d in build build-asan .git docker/hybridgw.json \
        docker/mosquitto.conf deploy/mosquitto-hybridgw.conf; do
        check "$iname keeps $d out of the context" ignored "$ignore" "$d"
    done
done
check "the root .dockerignore has the patterns of Dockerfile.dockerignore" \
    test "$(patterns "$src/.dockerignore")" = \
    "$(patterns "$src/docker/Dockerfile.dockerignore")"

for s in "${plain_copies[@]}"; do
    [ "$s" = . ] && continue
    check "COPY source $s exists in the repository" test -e "$src/$s"
done

# What the runtime stages copy is what this build tree holds.
gw_rel=${GW#"$builddir"/}
sim_rel=${SIM#"$builddir"/}
prefix="${workdir[build]:-/}/build/$flavour/"
prefix=${prefix#//}
copied=""
for c in "${copies[@]}"; do
    IFS=$'\t' read -r st s dest <<<"$c"
    rel=${s#"$prefix"}
    copied+="$rel"$'\n'
    check "$st copies $s, under build/$flavour" test "$rel" != "$s"
    if [ -f "$builddir/$rel" ]; then
        ok "$st: $rel is built by this tree"
    elif [ "$rel" = broker/hybridgw_broker.so ]; then
        echo "# note: $rel is not built in $builddir yet; its path is" \
            "the broker/ contract"
    else
        not_ok "$st: $rel is built by this tree"
    fi
done
check "the Dockerfile copies the gateway ($gw_rel)" \
    grep -qxF "$gw_rel" <<<"$copied"
check "the Dockerfile copies the simulator ($sim_rel)" \
    grep -qxF "$sim_rel" <<<"$copied"
check "the Dockerfile copies the plugin (broker/hybridgw_broker.so)" \
    grep -qxF broker/hybridgw_broker.so <<<"$copied"

# Runtime stages: slim base, no build tools, an unprivileged user.
runtime=()
for st in "${stages[@]}"; do
    [ "$st" != build ] && runtime+=("$st")
done
check "there are runtime stages gateway and broker" \
    test "${#runtime[@]}" -ge 2 -a -n "${base[gateway]:-}" -a \
    -n "${base[broker]:-}"
check "the gateway is the default (last) target" test "${stages[-1]}" = gateway
for st in "${runtime[@]}"; do
    check "$st is FROM debian:12-slim" test "${base[$st]}" = debian:12-slim
    u=${user[$st]:-}
    check "$st runs as a non-root USER (${u:-none})" non_root "$u"
    check "$st installs no build tools or -dev packages" \
        not grep -qE '(-dev|build-essential|cmake|clang|gcc)( |$)' \
        <<<"${pkgs[$st]} "
done

# Every library the copied binaries link comes with the packages the stage
# installs (their dependency closure, as apt resolves it on Debian 12).
closure() { # PACKAGES...: every package they pull in, one per line
    apt-cache depends --recurse --no-recommends --no-suggests \
        --no-conflicts --no-breaks --no-replaces --no-enhances "$@" \
        2>/dev/null | grep -v '^ '
}
lib_package() { # LIBRARY_PATH: the Debian package that ships it
    local p pkg
    # dpkg knows each file by one spelling: /lib or /usr/lib (merged /usr).
    for p in "$1" "$(readlink -f "$1")" "/usr$1"; do
        pkg=$(dpkg -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1)
        if [ -n "$pkg" ]; then
            echo "$pkg"
            return 0
        fi
    done
    return 1
}
libs_covered() { # STAGE FILE
    local have lib pkg bad=0
    # shellcheck disable=SC2086
    have=$(closure ${pkgs[$1]})
    while read -r lib; do
        pkg=$(lib_package "$lib") || pkg=""
        if [ -z "$pkg" ] || ! grep -qxF "$pkg" <<<"$have"; then
            echo "# $1: $lib (package ${pkg:-unknown}) is not installed"
            bad=1
        fi
    done < <(ldd "$2" | awk '/=> \// {print $3} /not found/ {print $1}')
    return "$bad"
}
# libwebsockets loads its event loop from a plugin at run time (dlopen:
# ldd does not list it); the programs run lws on libuv.
evlib_ok() { # STAGE FILE: the stage has the libuv event-lib plugin
    local lws plugin pkg
    lws=$(ldd "$2" | awk '/libwebsockets\.so/ {print $3; exit}')
    if [ -z "$lws" ] || ! grep -qa 'evlib_uv' "$lws"; then
        return 0 # no lws, or one with the event loops built in
    fi
    plugin=$(find "$(dirname "$(readlink -f "$lws")")" -maxdepth 1 \
        -name 'libwebsockets-evlib_uv.so*' | head -n 1)
    pkg=$(lib_package "${plugin:-none}") || {
        echo "# no libwebsockets-evlib_uv.so on this host to name its package"
        return 1
    }
    # shellcheck disable=SC2086
    grep -qxF "$pkg" <<<"$(closure ${pkgs[$1]})" || {
        echo "# $1: $pkg (libwebsockets-evlib_uv.so) is not installed"
        return 1
    }
}
if command -v apt-cache >/dev/null && command -v dpkg >/dev/null; then
    for c in "${copies[@]}"; do
        IFS=$'\t' read -r st s dest <<<"$c"
        f=$builddir/${s#"$prefix"}
        [ -f "$f" ] || continue
        if ldd "$f" | grep -q libasan; then
            # The image ships the plain build; the sanitizer runtimes pull
            # in libraries that build does not link.
            echo "# skip: $(basename "$f") is a sanitizer build"
            continue
        fi
        check "$st has every library $(basename "$f") links" \
            libs_covered "$st" "$f"
        check "$st has the lws event-loop plugin $(basename "$f") loads" \
            evlib_ok "$st" "$f"
    done
else
    echo "# skip: no apt-cache/dpkg to map libraries to packages"
fi

# ---- configs: what the images, the compose file and the configs agree on -

jqr() { jq -r "$1" "$docker_gw"; }
mosq_value() { # FILE KEY: the value of a mosquitto.conf line
    awk -v k="$2" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "$1"
}
udp_port=$(jqr '.udp.port')
public_port=$(jqr '.udp.public_port // .udp.port')
broker_port=$(awk '$1 == "listener" {print $2; exit}' "$docker_mosq")

check "the gateway image EXPOSEs udp.port $udp_port/udp" \
    grep -qw "$udp_port/udp" <<<"${expose[gateway]:-}"
check "the broker image EXPOSEs the listener port $broker_port" \
    grep -qw "$broker_port" <<<"${expose[broker]:-}"
check "the gateway image runs hybridgw -c /etc/hybridgw/hybridgw.json" \
    grep -qF '"hybridgw", "-c", "/etc/hybridgw/hybridgw.json"' \
    <<<"${cmd[gateway]:-}"
check "the broker image runs mosquitto -c /etc/mosquitto/mosquitto.conf" \
    grep -qF '"-c", "/etc/mosquitto/mosquitto.conf"' <<<"${cmd[broker]:-}"

plugin_dest=$(printf '%s\n' "${copies[@]}" |
    awk -F'\t' '$2 ~ /hybridgw_broker\.so$/ {print $3; exit}')
for conf in "$docker_mosq" "$deploy_mosq"; do
    name=${conf#"$src"/}
    check "$name loads the plugin exactly once" \
        test "$(grep -c '^plugin ' "$conf")" -eq 1
    check "$name loads it from $plugin_dest (where the image puts it)" \
        test "$(mosq_value "$conf" plugin)" = "$plugin_dest"
    for o in $(grep -oE '^plugin_opt_[a-z_]+' "$conf" | sort | uniq -d); do
        not_ok "$name gives plugin_opt_${o#plugin_opt_} once"
    done
    for o in $(grep -oE '^plugin_opt_[a-z_]+' "$conf"); do
        check "$name: $o is an option of the plugin" \
            grep -qw "${o#plugin_opt_}" <<<"$plugin_opts"
    done
    for o in device_key gateway_username gateway_password; do
        check "$name sets plugin_opt_$o" \
            test -n "$(mosq_value "$conf" "plugin_opt_$o")"
    done
    check "$name sets the options after the plugin line" \
        awk '/^plugin / {p = NR} /^plugin_opt_/ && !p {bad = 1}
             END {exit bad || !p}' "$conf"
    check "$name listens on all interfaces" \
        grep -qE '^listener [0-9]+ 0\.0\.0\.0$' "$conf"
    check "$name refuses anonymous clients" \
        grep -qx 'allow_anonymous false' "$conf"
    # Nagle would hold a tts start behind the broker's previous write to
    # the device (about 40 ms): the reply's first frames overtake it over
    # UDP and the device drops them.
    check "$name sets set_tcp_nodelay true" \
        grep -qx 'set_tcp_nodelay true' "$conf"
    check "$name logs to stderr" grep -qx 'log_dest stderr' "$conf"
    for o in device_key gateway_password; do
        check "$name ships a change-me placeholder, not a secret ($o)" \
            grep -q 'change-me' <<<"$(mosq_value "$conf" "plugin_opt_$o")"
    done
done

check "docker/mosquitto.conf logs to stderr only (the container log)" \
    test "$(grep -E '^log_dest ' "$docker_mosq")" = "log_dest stderr"
# The demo's broker too: every broker config that ships.
demo_conf=$(sed -n '/^cat >"$tmp\/mosquitto.conf" <<EOF$/,/^EOF$/p' \
    "$src/scripts/demo.sh")
check "scripts/demo.sh's broker sets set_tcp_nodelay true" \
    grep -qx 'set_tcp_nodelay true' <<<"$demo_conf"
check "scripts/demo.sh's broker logs to stderr" \
    grep -qx 'log_dest stderr' <<<"$demo_conf"

check "docker/hybridgw.json passes --check-config" \
    "$GW" -c "$docker_gw" --check-config
check "mqtt.username equals plugin_opt_gateway_username" \
    test "$(jqr .mqtt.username)" = \
    "$(mosq_value "$docker_mosq" plugin_opt_gateway_username)"
check "mqtt.password equals plugin_opt_gateway_password" \
    test "$(jqr .mqtt.password)" = \
    "$(mosq_value "$docker_mosq" plugin_opt_gateway_password)"
topic_prefix=$(mosq_value "$docker_mosq" plugin_opt_topic_prefix)
topic_prefix=${topic_prefix:-devices}
check "the gateway's topics sit under plugin_opt_topic_prefix" \
    test "$(jqr '[.mqtt.up_topic // "devices/+/up",
                  .mqtt.down_topic // "devices/{client_id}/down",
                  .mqtt.presence_topic // "devices/+/presence"] | join(" ")')" \
    = "$topic_prefix/+/up $topic_prefix/{client_id}/down $topic_prefix/+/presence"
check "udp.bind is 0.0.0.0 (a published port reaches the container)" \
    test "$(jqr .udp.bind)" = 0.0.0.0

# ---- compose --------------------------------------------------------------

# SERVICE<TAB>LINE for every line of each service under services:.
services() {
    awk '/^[^ #]/ {top = $1} top == "services:" && /^  [a-z0-9_-]+:$/ {
            svc = $1; sub(/:$/, "", svc); next }
         top == "services:" && svc != "" && /^    / {print svc "\t" $0}' \
        "$compose"
}
svc_lines() { services | awk -F'\t' -v s="$1" '$1 == s {print $2}'; }
list_items() { # SERVICE KEY: the "- item" entries of KEY, unquoted
    svc_lines "$1" | awk -v k="$2" '
        $0 ~ "^    " k ":" {on = 1; next}
        on && /^      - / {x = $0; sub(/^      - /, "", x); sub(/ *#.*/, "", x)
                          gsub(/"/, "", x); print x; next}
        {on = 0}'
}
for s in mosquitto gateway backend; do
    check "compose has the service $s" test -n "$(svc_lines "$s")"
done
# Debian 12's docker-compose (1.29) validates against its compose spec:
# these top-level keys and x- extensions, nothing else (no "name").
top_ok() {
    local k bad=0
    while IFS= read -r k; do
        case $k in
        version | services | networks | volumes | secrets | configs | x-*) ;;
        *)
            echo "# top-level key $k: docker-compose 1.29 refuses it"
            bad=1
            ;;
        esac
    done < <(grep -oE '^[A-Za-z0-9_-]+:' "$compose" | tr -d :)
    return "$bad"
}
check "compose.yaml has only top-level keys docker-compose 1.29 accepts" top_ok
if command -v docker-compose >/dev/null; then
    dcv=$(docker-compose version --short 2>/dev/null)
    check "docker-compose $dcv accepts compose.yaml" \
        docker-compose -f "$compose" config -q
else
    echo "# skip: no docker-compose to validate compose.yaml with"
fi
check "the gateway's config is mounted read-only" \
    grep -qxF ./hybridgw.json:/etc/hybridgw/hybridgw.json:ro \
    <<<"$(list_items gateway volumes)"
check "Mosquitto's config is mounted read-only" \
    grep -qxF ./mosquitto.conf:/etc/mosquitto/mosquitto.conf:ro \
    <<<"$(list_items mosquitto volumes)"
for s in mosquitto gateway backend; do
    while IFS= read -r v; do
        [ -n "$v" ] || continue
        check "$s mounts ${v%%:*} read-only" test "${v##*:}" = ro
        check "$s mounts ${v%%:*}, which exists" test -e "$src/docker/${v%%:*}"
    done < <(list_items "$s" volumes)
done
check "compose publishes UDP $public_port:$udp_port for device audio" \
    grep -qxF "$public_port:$udp_port/udp" <<<"$(list_items gateway ports)"
check "compose publishes MQTT on the listener port $broker_port" \
    grep -qE "^([0-9.]+:)?[0-9]+:$broker_port$" \
    <<<"$(list_items mosquitto ports)"
check "mqtt.host/port name the broker service (mosquitto:$broker_port)" \
    test "$(jqr .mqtt.host):$(jqr .mqtt.port)" = "mosquitto:$broker_port"
be_listen=$(svc_lines backend | grep -oE '"--listen", "[^"]+"' |
    grep -oE '[0-9]+"$' | tr -d '"')
check "the backend URL names the backend service (backend:$be_listen)" \
    grep -qE "^wss?://backend:${be_listen:-none}/" <<<"$(jqr '.backends[0].url')"
for t in $(grep -oE 'target: [a-z0-9_-]+' "$compose" | awk '{print $2}' |
    sort -u); do
    check "compose's build target $t is a Dockerfile stage" \
        grep -qw "$t" <<<"${stages[*]}"
done
check "compose builds with docker/Dockerfile from the repository root" \
    test "$(grep -c 'dockerfile: docker/Dockerfile$' "$compose")" -ge 1 -a \
    -f "$src/docker/Dockerfile"

# The stop timeouts outlast the gateway's drain.
drain_ms=$(grep -oE 'define DRAIN_TIMEOUT_MS +[0-9]+' \
    "$src/gateway/instance.c" | awk '{print $3}')
grace=$(svc_lines gateway | awk '$1 == "stop_grace_period:" {print $2}')
check "compose's stop_grace_period ($grace) outlasts the ${drain_ms} ms drain" \
    test "$((${grace%s} * 1000))" -gt "$((drain_ms + 1000))"

if python3 -c 'import yaml' 2>/dev/null; then
    check "compose.yaml parses, and every service is read-only without caps" \
        python3 - "$compose" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for name, svc in doc["services"].items():
    assert svc.get("read_only") is True, name
    assert svc.get("cap_drop") == ["ALL"], name
    assert "build" in svc, name
PY
else
    echo "# skip: no python3 yaml module for a full parse of compose.yaml"
fi

# ---- the systemd unit -----------------------------------------------------

unit_value() { awk -F= -v k="$1" '$1 == k {sub(/^[^=]*=/, ""); print}' "$unit"; }
check "the unit is Type=simple (hybridgw has no sd_notify)" \
    test "$(unit_value Type)" = simple
u=$(unit_value User)
check "the unit runs as a dedicated user (${u:-none})" non_root "$u"
check "ExecStart runs hybridgw -c /etc/hybridgw/hybridgw.json" \
    grep -qE '^/[^ ]*/hybridgw -c /etc/hybridgw/hybridgw.json$' \
    <<<"$(unit_value ExecStart)"
check "ExecReload sends SIGHUP to the main process" \
    grep -qE 'kill -HUP \$MAINPID' <<<"$(unit_value ExecReload)"
check "KillSignal is SIGTERM" test "$(unit_value KillSignal)" = SIGTERM
stop=$(unit_value TimeoutStopSec)
check "TimeoutStopSec ($stop) outlasts the ${drain_ms} ms drain" \
    test "$((${stop%s} * 1000))" -gt "$((drain_ms + 1000))"
for kv in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes \
    PrivateTmp=yes PrivateDevices=yes RestrictNamespaces=yes \
    RestrictSUIDSGID=yes LockPersonality=yes CapabilityBoundingSet=; do
    check "the unit sets $kv" grep -qx "$kv" "$unit"
done
check "the unit restricts address families to IP, UNIX and netlink" \
    test "$(unit_value RestrictAddressFamilies)" = \
    "AF_INET AF_INET6 AF_UNIX AF_NETLINK"

if command -v systemd-analyze >/dev/null; then
    # The binary path is this build's, so that only the unit is judged.
    mkdir -p "$GW_TMP/unit"
    sed "s#/usr/local/bin/hybridgw#$GW#g" "$unit" \
        >"$GW_TMP/unit/hybridgw.service"
    systemd-analyze verify "$GW_TMP/unit/hybridgw.service" \
        >"$GW_TMP/verify.out" 2>&1
    rc=$?
    sed 's/^/# /' "$GW_TMP/verify.out"
    check "systemd-analyze verify accepts the unit" test "$rc" -eq 0
    check "systemd-analyze reports no line of the unit" \
        not grep -qE 'hybridgw\.service:[0-9]+:' "$GW_TMP/verify.out"
    if systemd-analyze security --offline=true \
        "$GW_TMP/unit/hybridgw.service" >"$GW_TMP/sec.out" 2>&1; then
        level=$(grep -oE 'Overall exposure level.*' "$GW_TMP/sec.out")
        echo "# $level"
        check "systemd-analyze security rates the unit OK or better" \
            grep -qE ': [0-9.]+ (OK|SAFE|PERFECT)' <<<"$level"
    else
        echo "# skip: this systemd-analyze has no offline security check"
    fi
else
    echo "# skip: no systemd-analyze; the key checks above stand alone"
fi

# ---- the broker's drop-in -------------------------------------------------

limits=$src/deploy/mosquitto-limits.conf
check "deploy/mosquitto-limits.conf is a [Service] drop-in" \
    test "$(grep -vE '^[[:space:]]*(#|$)' "$limits" | head -n 1)" = "[Service]"
check "deploy/mosquitto-limits.conf raises LimitNOFILE past 1024" \
    test "$(awk -F= '$1 == "LimitNOFILE" {print $2}' "$limits")" -gt 100000
if command -v systemd-analyze >/dev/null; then
    # A stand-in mosquitto.service with the drop-in beside it.
    mkdir -p "$GW_TMP/dropin/mosquitto.service.d"
    printf '[Service]\nExecStart=%s\n' "$(command -v true)" \
        >"$GW_TMP/dropin/mosquitto.service"
    cp "$limits" "$GW_TMP/dropin/mosquitto.service.d/limits.conf"
    systemd-analyze verify "$GW_TMP/dropin/mosquitto.service" \
        >"$GW_TMP/dropin.out" 2>&1
    rc=$?
    sed 's/^/# /' "$GW_TMP/dropin.out"
    check "systemd-analyze verify accepts the drop-in" test "$rc" -eq 0
    check "systemd-analyze reports no line of the drop-in" \
        not grep -qF 'limits.conf:' "$GW_TMP/dropin.out"
fi

# ---- documentation -------------------------------------------------------

for f in docker/Dockerfile docker/compose.yaml docker/mosquitto.conf \
    docker/hybridgw.json deploy/hybridgw.service \
    deploy/mosquitto-hybridgw.conf deploy/mosquitto-limits.conf; do
    check "docs/deploy.md covers $f" grep -qF "$f" "$src/docs/deploy.md"
done

# ---- install layout: the paths the unit, configs and images use ----------

inst=$GW_TMP/prefix
if cmake --install "$builddir" --prefix "$inst" >"$GW_TMP/install.out" 2>&1; then
    ok "cmake --install works on this build tree"
    for p in "$(unit_value ExecStart | awk '{print $1}')" \
        "$(printf '%s\n' "${copies[@]}" | awk -F'\t' '{print $3}')"; do
        while IFS= read -r f; do
            [[ $f == /usr/local/* ]] || continue
            if [[ $f == */hybridgw_broker.so && ! -f $plugin ]]; then
                echo "# note: $f not checked, the plugin is not built yet"
                continue
            fi
            check "$f is where cmake --install puts a file" \
                test -e "$inst/${f#/usr/local/}"
        done <<<"$p"
    done
else
    sed 's/^/# /' "$GW_TMP/install.out"
    if [ -f "$plugin" ]; then
        not_ok "cmake --install works on this build tree"
    else
        echo "# skip: cmake --install needs the plugin, not built yet"
    fi
fi

# ---- Mosquitto reads the configs ----------------------------------------

# adapt_mosq FILE OUT PORT: the file for a broker on 127.0.0.1:PORT, with
# the plugin from this build tree, or without plugin lines if absent.
adapt_mosq() {
    if [ -f "$plugin" ]; then
        sed -E "s#^listener [0-9]+ .*#listener $3 127.0.0.1#;
                s#^plugin .*#plugin $plugin#; s#^log_dest .*#log_dest stderr#" \
            "$1" >"$2"
    else
        sed -E "s#^listener [0-9]+ .*#listener $3 127.0.0.1#;
                /^plugin/d; s#^log_dest .*#log_dest stderr#" "$1" >"$2"
    fi
    echo "log_dest stderr" >>"$2"
}
if [ -f "$plugin" ]; then
    what="with the plugin"
else
    what="without its plugin lines"
    echo "# note: $plugin is not built yet: Mosquitto reads the configs" \
        "without their plugin lines, and the stack run is skipped"
fi
port=$(free_port)
adapt_mosq "$docker_mosq" "$GW_TMP/docker-mosq.conf" "$port"
check "Mosquitto starts from docker/mosquitto.conf $what" \
    run_mosquitto docker-mosq "$GW_TMP/docker-mosq.conf" "$port"
docker_mosq_pid=$MOSQ_PID

# deploy/'s file is a conf.d snippet: include it as Debian's config does.
dport=$(free_port)
mkdir -p "$GW_TMP/conf.d"
adapt_mosq "$deploy_mosq" "$GW_TMP/conf.d/hybridgw.conf" "$dport"
printf 'persistence false\ninclude_dir %s\n' "$GW_TMP/conf.d" \
    >"$GW_TMP/deploy-main.conf"
check "Mosquitto starts with deploy/mosquitto-hybridgw.conf in conf.d $what" \
    run_mosquitto deploy-mosq "$GW_TMP/deploy-main.conf" "$dport"
stop_pid "$MOSQ_PID"

# ---- the compose stack on 127.0.0.1, from the files in docker/ ----------

if [ -f "$plugin" ]; then
    start_backend backend
    gw_udp=$(free_port --udp)
    be_url=$(jqr '.backends[0].url' |
        sed -E "s#^(wss?://)[^/]+#\1127.0.0.1:$BACKEND_PORT#")
    jq --argjson mp "$port" --argjson up "$gw_udp" --arg url "$be_url" '
        .mqtt.host = "127.0.0.1" | .mqtt.port = $mp |
        .udp.bind = "127.0.0.1" | .udp.port = $up | .udp.public_port = $up |
        .udp.public_host = "127.0.0.1" | .backends[0].url = $url' \
        "$docker_gw" >"$GW_TMP/stack.json"
    check "the gateway logs in with docker/hybridgw.json's credentials" \
        start_gateway gateway "$GW_TMP/stack.json"
    key=$(mosq_value "$docker_mosq" plugin_opt_device_key)
    timeout 60 "$SIM" device --broker "127.0.0.1:$port" --key "$key" \
        --turns 1 --frames 10 --fast --json >"$GW_TMP/device.out" 2>&1
    rc=$?
    grep -v '^{' "$GW_TMP/device.out" | sed 's/^/# /'
    check "a stock device completes a conversation through docker/'s files" \
        test "$rc" -eq 0
    check "it lost no downlink frame" \
        jq_is "$(grep '^{' "$GW_TMP/device.out")" .downlink.lost 0

    # What a broker without set_tcp_nodelay does to a reply, made certain:
    # the broker is held (SIGSTOP) while the first turn's reply goes out,
    # so its tts start reaches the device after the audio, which the
    # firmware drops as it is not speaking yet. The device must count those
    # frames lost and fail the run; the second turn is whole.
    held=$GW_TMP/held.out
    listens=$(count_lines "$BACKEND_EVENTS" '"ev":"listen"')
    timeout 60 "$SIM" device --broker "127.0.0.1:$port" --key "$key" \
        --turns 2 --frames 10 --json >"$held" 2>"$held.err" &
    dev=$!
    check "the held device's listen start reaches the backend" \
        wait_for_lines "$BACKEND_EVENTS" '"ev":"listen"' "$((listens + 1))"
    kill -STOP "$docker_mosq_pid"
    check "the reply's 10 frames reach the device before its tts start" \
        wait_for_line "$held" 'downlink dropped: idle \(10 so far\)' 20
    kill -CONT "$docker_mosq_pid"
    check "the held device ends" wait_for_exit "$dev"
    grep -v '^{' "$held" | sed 's/^/# /'
    r=$(grep '^{' "$held")
    check "the device fails the run (exit $EXIT_CODE)" test "$EXIT_CODE" -eq 1
    check "its reason: audio before tts start" \
        grep -q 'before tts start' <<<"$(jq -r .reason <<<"$r")"
    check "the 10 frames dropped before tts start count as lost" \
        jq_is "$r" '[.downlink.lost, .downlink.drops.idle] | join(" ")' "10 10"
    check "the second turn played" jq_is "$r" '.turns_done' 2
    stop_pid "$GW_PID"
    check "the gateway stops on SIGTERM with status 0" test "$EXIT_CODE" -eq 0
fi
stop_pid "$docker_mosq_pid"

finish
