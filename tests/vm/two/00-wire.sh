#!/bin/bash
# Two VMs on a real (virtual) wire: ping crosses it, and RDMA READs from
# VM 1 to VM 0 complete over rxe, also while VM 0's NIC loses 1% of its
# packets and delays each by 1 ms (netem): rxe's retransmission works.
# Runs in both VMs.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

[ "$OBJFS_VM_COUNT" = 2 ] || fail "needs two VMs (tests/vm/two)"
peer=$OBJFS_VM_PEER_IP

step "ping $peer"
out=$(timeout -k 5 30 busybox ping -c 3 -W 2 "$peer" 2>&1) || fail "ping $peer failed: $out"
assert_match ' 0% packet loss' "$out" "ping $peer"

step "ib_read_bw across the wire"
vm_perftest_pair read_bw ib_read_bw -n 200 -s 65536
bw=$(awk '/^ *#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ { print $4; exit }' <<<"$PERFTEST_OUT")
awk -v b="$bw" 'BEGIN { exit !(b > 0) }' || fail "no bandwidth in ib_read_bw's output: $PERFTEST_OUT"
vm_metric ib_read_bw_MBps "$bw"

step "ib_read_bw with 1% loss and 1 ms delay on vm0's NIC"
[ "$OBJFS_VM_INDEX" != 0 ] || vm_netem loss 1% delay 1ms
vm_barrier netem-on
vm_perftest_pair read_bw_lossy ib_read_bw -n 100 -s 65536
bw=$(awk '/^ *#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ { print $4; exit }' <<<"$PERFTEST_OUT")
awk -v b="$bw" 'BEGIN { exit !(b > 0) }' || fail "no bandwidth in ib_read_bw's output with netem: $PERFTEST_OUT"
vm_metric ib_read_bw_lossy_MBps "$bw"
if [ "$OBJFS_VM_INDEX" = 0 ]; then
	tc -s qdisc show dev "$OBJFS_VM_NETDEV" >&2
fi
