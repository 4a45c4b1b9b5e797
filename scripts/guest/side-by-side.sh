# Issue 32's side-by-side suite: the same lab campaigns over netem (veth + sch_netem) and
# over oscil-link (TUN), in a kernel-matrix guest, for the seed's figures:
#   f5   SO_SNDBUF 16 KiB against 64 KiB with the per-wake writer (the seed's 10 Mbit/s x
#        20 ms, queue 50)
#   f3   the urgent line (markers) for lowat default, 16384 and 131072 with 16 KiB
#        per-wake writes; f4 (unsent bytes at POLLOUT) from the same runs
#   f1   the slow phase's queue and the sender's namespace memory, lowat default against
#        131072
#   hold oscil-link's lateness at full speed at a few rates, to say what the guest holds
#   collapse  a small tcp_rmem, tcp_adv_win_scale 4 and a slow reader: the receiver's
#        collapse and prune calls timed by --trace's kprobes
#
#   scripts/kernel-matrix --kernels 6.1,6.12 --suite scripts/guest/side-by-side.sh --smp 2 \
#       --jobs 1 --timeout 5400
#   scripts/side-by-side target/kernel-matrix     # the table (link/README.md)
#
# Under TCG on a busy host neither link holds 10 Mbit/s x 20 ms (oscil-link delivered 64-80%
# of its packets more than 1 ms late, netem's idle probe saw 44-62 ms for 20), so the seed's
# path runs time-scaled by $SCALE: the rate divided, the RTT, the phases and the marker
# interval multiplied, which keeps the bandwidth-delay product (25 KB), the queue in packets
# and the number of round trips per run. SCALE=1 is the seed's path.

with_libs
# The samplers' sock_diag (without tcp_diag the daemon ends the session) and the links.
need inet_diag tcp_diag sch_netem tun veth

SCALE=${SCALE:-5}
REPEAT=${REPEAT:-3}
rate() { echo "$(( $1 * 1000 / SCALE ))kbit"; }
ms() { echo "$(( $1 * SCALE ))ms"; }
SEED_PATH="--rate $(rate 10) --rtt $(ms 20) --queue 50"
F1_PATH=${F1_PATH:-"--rate $(rate 20) --rtt $(ms 100)"}
SEED_WRITER="--write-size 16k --write-mode per-wake"
# The seed's reader reads as fast as it can; markers are its urgent line.
FULL="--pattern full-speed --slow 0 --cycles 1 --order grouped"

# Collapse: the window promises more than the buffer holds in small skbs (adv_win_scale 4,
# honoured before 6.6), and the slow phases stop reading.
lab collapse --link netem --rate 20mbit --rtt 40ms --rmem 4096:65536:65536 --adv-win-scale 4 \
    --lowat default --fast 2s --slow 4s --cycles 1 --trace --marker-every off
lab collapse-loss --link netem --rate 20mbit --rtt 40ms --loss 2 --rmem 4096:65536:65536 \
    --lowat default --fast 2s --slow 4s --cycles 1 --trace --marker-every off
for link in netem tun; do
    lab "$link-f5" --link "$link" $SEED_PATH $SEED_WRITER --sndbuf 16k,64k --lowat default \
        $FULL --fast "$(ms 6000)" --marker-every off --repeat "$REPEAT"
    lab "$link-f3" --link "$link" $SEED_PATH $SEED_WRITER --lowat default,16384,131072 \
        $FULL --fast "$(ms 8000)" --marker-every "$(ms 1000)"
    lab "$link-f1" --link "$link" $F1_PATH --lowat default,131072 --fast "$(ms 3000)" \
        --slow "$(ms 6000)" --cycles 2 --order grouped --marker-every off
done
for mbit in 1 2 5; do
    lab "hold-${mbit}mbit" --link tun --rate "${mbit}mbit" --rtt "$(ms 20)" --lowat default \
        $FULL --fast "$(ms 4000)" --marker-every off
done
