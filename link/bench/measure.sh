#!/usr/bin/env bash
# Measures oscil-link itself: idle RTT (ping), then one bulk TCP flow (iperf3) through it,
# and prints configured vs delivered rate, configured vs measured RTT, queue drops and the
# emulator's CPU. Root only; needs iperf3, ping and python3.
#   link/bench/measure.sh RATE RTT [SECONDS] [CC] [FLOWS]   e.g.  link/bench/measure.sh 1gbit 466ms 40 cubic 4
# MEASURE_JSON=FILE: also append the figures of the run as one JSON line (link/bench/table.sh).
# OSCIL_LINK: the oscil-link binary (default: target/release/oscil-link); OSCIL_LINK_ARGS: more flags.
set -euo pipefail
rate=${1:?rate, e.g. 100mbit}; rtt=${2:?rtt, e.g. 100ms}; secs=${3:-20}; cc=${4:-bbr}; flows=${5:-1}
[[ $(id -u) == 0 ]] || { echo "measure.sh: needs root (network namespaces, TUN)" >&2; exit 1; }
rtt_ms=${rtt%ms}; delay_us=$((rtt_ms * 500))
dir=$(mktemp -d)
source "$(dirname "$0")/netns.sh"
trap link_down EXIT INT TERM
# shellcheck disable=SC2086
link_up "$rate" "$delay_us" "$dir/link.json" ${OSCIL_LINK_ARGS:-}
echo "== $rate, RTT $rtt (one-way ${delay_us}us each direction), ${flows} flow(s) of ${secs}s with $cc"
ip netns exec "$a" ping -q -c 10 -i 0.2 10.77.0.2 | tail -1 | tee "$dir/idle.txt" | sed 's/^/idle ping: /'
ip netns exec "$b" iperf3 -s -1 -D; sleep 0.3
ip netns exec "$a" iperf3 -c 10.77.0.2 -t 4 -b 200K -l 1000 -J > "$dir/paced.json"
ip netns exec "$b" iperf3 -s -1 -p 5202 -J --logfile "$dir/server.json" -D
sleep 0.3
ip netns exec "$a" ping -q -i 0.5 -w "$secs" 10.77.0.2 > "$dir/ping.txt" &
ping_pid=$!
cp "$dir/link.json" "$dir/link0.json" 2>/dev/null || true
( sleep $((secs / 2)); cp "$dir/link.json" "$dir/link_mid.json" ) &
ip netns exec "$a" iperf3 -c 10.77.0.2 -p 5202 -t "$secs" -C "$cc" -P "$flows" -J > "$dir/client.json"
cp "$dir/link.json" "$dir/link_end.json"
# Drops inside the endpoints' own stacks (a full socket backlog, receive queue pruning...)
# are losses neither the link nor the emulator counts; the namespaces are new, so their
# counters start at zero.
for n in "$a" "$b"; do
  echo "kernel drop counters in $([[ $n == "$a" ]] && echo A || echo B): $(ip netns exec "$n" nstat -az 2>/dev/null \
    | awk '$1 ~ /Drop|Prune|Collapse|InDiscards|RcvbufErrors|TCPLossProbes$|TCPSpuriousRTOs|TCPTimeouts/ && $2 > 0 {printf "%s=%s ", $1, $2}')"
done > "$dir/nstat.txt"
wait "$ping_pid" || true
sleep 1.2
kill "$link_pid"; wait "$link_pid" || true; link_pid=
tail -1 "$dir/ping.txt" | sed 's/^/ping under load: /'
cat "$dir/nstat.txt"
python3 - "$dir" "$rate" "$rtt_ms" "$secs" "$flows" "${MEASURE_JSON:-}" <<'PY'
import json, sys
d, rate_s, rtt_ms, secs, flows, summary = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
link = json.load(open(f"{d}/link.json")); rate = link["rate_bps"]
server = json.load(open(f"{d}/server.json")); client = json.load(open(f"{d}/client.json"))
paced = json.load(open(f"{d}/paced.json"))["end"]["streams"][0]["sender"]
iv = [i["sum"] for i in server["intervals"]]
# steady state: the last half of the flow
half = iv[len(iv) // 2:]
goodput = sum(i["bytes"] for i in half) * 8 / sum(i["seconds"] for i in half)
mss = 1448
wire_equiv = goodput * (mss + 52 + 14) / mss
s = client["end"]["streams"][0]["sender"]
mid, end = (json.load(open(f"{d}/link_{w}.json")) for w in ("mid", "end"))
busy = (end["a_to_b"]["link"]["wire_bytes_forwarded"] - mid["a_to_b"]["link"]["wire_bytes_forwarded"]) * 8 / (
    end["elapsed_s"] - mid["elapsed_s"]) / rate
print(f"link utilisation (wire bytes forwarded / rate, 2nd half, stats written each second): {100*busy:.1f}%")
print(f"configured rate {rate/1e6:.1f} Mbit/s; receiver goodput (2nd half) {goodput/1e6:.2f} Mbit/s;"
      f" wire-equivalent {wire_equiv/1e6:.2f} Mbit/s = {100*wire_equiv/rate:.1f}% of configured")
print(f"configured RTT {rtt_ms:.1f} ms; TCP_INFO srtt of the bulk flow: min {s['min_rtt']/1e3:.2f} ms,"
      f" mean {s['mean_rtt']/1e3:.2f} ms, max {s['max_rtt']/1e3:.2f} ms; retransmits (all flows) {client['end']['sum_sent']['retransmits']}")
print("receiver goodput per second, Gbit/s: " + " ".join(f"{i['bits_per_second']/1e9:.2f}" for i in iv))
print("sender retransmits per second: " + " ".join(str(i["sum"].get("retransmits", 0)) for i in client["intervals"]))
cu = client["end"].get("cpu_utilization_percent", {})
print(f"iperf3 CPU (% of one core, user+sys): sender {cu.get('host_total', 0):.0f}%, receiver {cu.get('remote_total', 0):.0f}%")
print(f"TCP_INFO srtt of a paced 0.2 Mbit/s flow on the idle link: min {paced['min_rtt']/1e3:.2f} ms,"
      f" mean {paced['mean_rtt']/1e3:.2f} ms")
for k in ("a_to_b", "b_to_a"):
    l, e = link[k]["link"], link[k]["emulator"]
    print(f"{k}: in {l['packets_in']} pkts/{l['segments_in']} segs, dropped at queue {l['packets_dropped_queue']} pkts + cut {l['packets_truncated_queue']} pkts/"
          f"{l['segments_dropped_queue']} segs, max queue {l['max_queue_segments']}/{link['queue_limit']} segs;"
          f" emulator: tun tx_dropped {e['tun_tx_dropped']}, late>1ms {e['packets_late_over_1ms']},"
          f" max late {e['max_late_us']} us, max write {e['max_write_us']} us, ring full {e['ring_full_waits']}, realtime {e['realtime']}")
c = link["cpu"]
print(f"emulator CPU {c['user_s']:.2f}s user + {c['system_s']:.2f}s sys over {link['elapsed_s']:.1f}s"
      f" = {100*(c['user_s']+c['system_s'])/link['elapsed_s']:.0f}% of one core")
def ping_avg_ms(path):
    # "rtt min/avg/max/mdev = 466.0/466.1/466.3/0.1 ms"
    try:
        return float(open(path).read().split("=")[1].split("/")[1])
    except (IndexError, ValueError, OSError):
        return None
if summary:
    late = sum(link[k]["emulator"]["packets_late_over_1ms"] for k in ("a_to_b", "b_to_a"))
    frames = sum(link[k]["link"]["packets_in"] for k in ("a_to_b", "b_to_a"))
    row = {"rate": rate_s, "rtt_ms": rtt_ms, "flows": flows, "late": late, "frames": frames,
           "late_pct": 100 * late / max(frames, 1),
           "worst_late_ms": max(link[k]["emulator"]["max_late_us"] for k in ("a_to_b", "b_to_a")) / 1e3,
           "idle_rtt_ms": ping_avg_ms(f"{d}/idle.txt"), "loaded_rtt_ms": ping_avg_ms(f"{d}/ping.txt"),
           "srtt_mean_ms": s["mean_rtt"] / 1e3, "delivered_pct": 100 * wire_equiv / rate,
           "tun_tx_dropped": sum(link[k]["emulator"]["tun_tx_dropped"] for k in ("a_to_b", "b_to_a")),
           "emulator_cpu_pct": 100 * (c["user_s"] + c["system_s"]) / link["elapsed_s"],
           "load": open("/proc/loadavg").read().split()[0]}
    with open(summary, "a") as f:
        f.write(json.dumps(row) + "\n")
PY
