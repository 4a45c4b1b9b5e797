# The collapse and prune probes leave nothing behind (issue 32), in a kernel-matrix guest
# (kprobe events exist there, not on the development kernel):
#   probes-after-run   a traced session ends: no oscil_reader_* probe is left in
#                      kprobe_events
#   probes-after-kill  a traced reader killed (SIGKILL) mid-run leaves its group; the next
#                      traced session removes it (and its own at the end)
#
#   scripts/kernel-matrix --kernels 6.12 --suite scripts/guest/probes.sh --smp 2
# About 1.5 min in a guest.

KPROBES=/sys/kernel/tracing/kprobe_events
traced() { read_session --trace --fast 4s --slow 1s --cycles 1 "$@"; }
no_probes_left() { ! grep -q oscil_reader_ "$KPROBES"; }

after_run() {
    traced > "$STEP/summary.json" || return 1
    cat "$KPROBES" > "$STEP/kprobe_events"
    no_probes_left
}

after_kill() {
    oscil-reader --connect 127.0.0.1 --key-file "$KEY" --out "$STEP/killed" --quiet --trace \
        --fast 30s --slow 1s --cycles 1 > /dev/null 2>&1 &
    pid=$!
    i=0
    until grep -q "oscil_reader_$pid/" "$KPROBES"; do
        i=$((i + 1)); [ $i -lt 300 ] || return 1; sleep 0.1
    done
    kill -KILL "$pid"; wait "$pid"
    cat "$KPROBES" > "$STEP/left-by-the-killed"
    grep -q "oscil_reader_$pid/" "$STEP/left-by-the-killed" || return 1
    STEP_RUN=$STEP; STEP=$STEP/next; mkdir -p "$STEP"
    traced > "$STEP/summary.json"; rc=$?
    STEP=$STEP_RUN
    cat "$KPROBES" > "$STEP/after-the-next"
    [ $rc = 0 ] && no_probes_left
}

with_libs
need inet_diag tcp_diag
daemon_up
step probes-after-run after_run
step probes-after-kill after_kill
daemon_down
