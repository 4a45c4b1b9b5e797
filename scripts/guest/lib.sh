# The guest's toolkit (busybox sh), sourced before every suite: the default one
# (scripts/guest/suite.sh) or one given with `scripts/kernel-matrix --suite FILE`.
# Everything a suite writes under $OUT comes back to the host as <out>/<kernel>/, and each
# `step` becomes one row of the kernel's table.
#
#   need MOD...              modprobe each module (depmod -a ran at boot), unless built in
#   step NAME [--may-fail] CMD...
#                            runs CMD with $OUT/NAME as its directory: cmd, stdout,
#                            stderr, rc; a step whose CMD fails fails the matrix unless
#                            --may-fail. CMD may write into "$STEP" (= $OUT/NAME).
#   daemon_up [ARGS...]      oscil-daemon on 127.0.0.1:5250 with the matrix's key (its
#                            output in $OUT/daemon-N.log); daemon_down stops it
#   session NAME [--may-fail] [ARGS...]
#                            a step: one keyed loopback session, oscil-reader -J into
#                            $OUT/NAME/run ($SHORT unless ARGS give --fast)
#   lab NAME [ARGS...]       a step: an oscil-lab campaign (and its report) into
#                            $OUT/NAME/campaign
#   report NAME DIR...       a step: oscil-report over DIRs into $OUT/NAME/report
#   with_libs                unpacks iproute2 (ip, tc, ss), nsenter and the shared libraries they
#                            needs; before it the guest holds no shared library
#   no_shared_libraries      fails unless no shared library or loader is in the guest
#   kernel_facts             $OUT/facts/: tcp tracepoints, their format files, sysctls
#
# $BIN holds the oscil binaries, $KEY the key file, $KERNEL the matrix's name of this
# kernel (5.10, 6.1, ...) and $SHORT the short reading pattern of the default suite.

BIN=/oscil/bin
KEY=/matrix/key
SHORT="--fast 1s --slow 2s --cycles 1"
export PATH=$BIN:/bin:/sbin:/usr/bin:/usr/sbin

say() { echo "matrix: $*"; }

need() {
    for mod in "$@"; do
        if grep -q "/$mod.ko" "/lib/modules/$(uname -r)/modules.builtin" 2>/dev/null; then
            echo "$mod built-in" >> "$OUT/modules.txt"
        elif modprobe "$mod"; then
            echo "$mod loaded" >> "$OUT/modules.txt"
        else
            say "modprobe $mod failed"
            echo "$mod failed" >> "$OUT/modules.txt"
            return 1
        fi
    done
}

step() {
    name=$1; shift
    may_fail=no
    if [ "${1:-}" = --may-fail ]; then may_fail=yes; shift; fi
    STEP=$OUT/$name
    mkdir -p "$STEP"
    echo "$*" > "$STEP/cmd"
    started=$(date +%s)
    "$@" > "$STEP/stdout" 2> "$STEP/stderr"
    rc=$?
    echo "$rc" > "$STEP/rc"
    printf '%s\t%s\t%s\t%s\n' "$name" "$may_fail" "$rc" "$(( $(date +%s) - started ))" >> "$OUT/steps.tsv"
    say "step $name: exit $rc after $(( $(date +%s) - started )) s"
    if [ "$rc" != 0 ]; then tail -n 5 "$STEP/stderr" | sed 's/^/  | /'; fi
    return 0
}

DAEMONS=0
daemon_up() {
    DAEMONS=$((DAEMONS + 1))
    oscil-daemon --key-file "$KEY" "$@" > "$OUT/daemon-$DAEMONS.log" 2>&1 &
    DAEMON_PID=$!
    # Ready once it listens (5250 is 1482 in hex; no ss before with_libs).
    i=0
    while ! grep -q ':1482 00000000:0000 0A' /proc/net/tcp; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            say "oscil-daemon did not start:"; cat "$OUT/daemon-$DAEMONS.log"; return 1
        fi
        sleep 0.1
    done
}

daemon_down() {
    [ -n "${DAEMON_PID:-}" ] || return 0
    kill -INT "$DAEMON_PID" 2>/dev/null
    wait "$DAEMON_PID" 2>/dev/null
    DAEMON_PID=
}

# oscil-reader -J; its JSON summary is the step's stdout.
read_session() {
    oscil-reader --connect "${CONNECT:-127.0.0.1}" --key-file "$KEY" --out "$STEP/run" --quiet --json "$@"
}
session() {
    name=$1; shift
    flag=
    if [ "${1:-}" = --may-fail ]; then flag=--may-fail; shift; fi
    case " $* " in
        *" --fast "*) step "$name" $flag read_session "$@" ;;
        *) step "$name" $flag read_session $SHORT "$@" ;;
    esac
}

run_lab() { oscil-lab --out "$STEP/campaign" "$@"; }
lab() { name=$1; shift; step "$name" run_lab "$@"; }

run_report() { oscil-report "$@" --out "$STEP/report"; }
report() { name=$1; shift; step "$name" run_report "$@"; }

with_libs() { tar -x -f /opt/libs.tar -C /; }

no_shared_libraries() {
    found=$(find / -xdev \( -name '*.so' -o -name '*.so.*' -o -name 'ld-linux*' \) 2>/dev/null)
    if [ -n "$found" ]; then say "shared libraries present: $found"; return 1; fi
    # And each oscil binary starts where no loader could serve it.
    for b in "$BIN"/oscil-*; do "$b" --version > /dev/null || return 1; done
}

kernel_facts() {
    mkdir -p "$OUT/facts"
    uname -a > "$OUT/facts/uname"
    tracing=/sys/kernel/tracing
    [ -d $tracing/events ] || mount -t tracefs tracefs $tracing 2>/dev/null
    ls $tracing/events/tcp > "$OUT/facts/tcp-events" 2>&1
    for event in $tracing/events/tcp/* $tracing/events/sock/inet_sock_set_state; do
        [ -f "$event/format" ] && cp "$event/format" "$OUT/facts/format-$(basename "$event")"
    done
    for s in tcp_shrink_window tcp_rcvbuf_low_rtt tcp_adv_win_scale tcp_rmem tcp_moderate_rcvbuf tcp_congestion_control \
        tcp_available_congestion_control tcp_child_ehash_entries; do
        printf '%s = %s\n' "$s" "$(cat /proc/sys/net/ipv4/$s 2>&1)"
    done > "$OUT/facts/sysctls"
}
