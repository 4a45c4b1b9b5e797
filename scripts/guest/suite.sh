# The kernel matrix's default suite (scripts/kernel-matrix runs it in every guest; the
# functions are scripts/guest/lib.sh's). Each step is a row of the kernel's table.

kernel_facts

# Stage 1: the static binaries in a guest with no shared library.
step static-binaries no_shared_libraries
# A host that blacklists tcp_diag (or a container): sessions go on, sampled by getsockopt.
daemon_up
session no-tcp-diag
need inet_diag
session inet-diag-only
need tcp_diag
session loopback
# A host name, resolved by the static binaries (/etc/hosts; glibc's static NSS).
CONNECT=localhost
session by-name --may-fail
CONNECT=
# The per-ACK trace. Under TCG a tracefs instance takes about 2 s to set up (text
# patching): a fast phase of 4 s still moves data once it is up.
session trace --trace --fast 4s --slow 2s --cycles 1
daemon_down

# Stage 2: iproute2 for the lab.
with_libs
need sch_netem tun veth
LAB="--rate 10mbit --rtt 20ms --lowat default,131072 --fast 1s --slow 2s --cycles 1 --marker-every off --order grouped"
lab lab-netem --link netem $LAB
lab lab-tun --link tun $LAB
# The traced run's report: its time-sequence picture (the campaigns have their own).
report report "$OUT/trace/run"
