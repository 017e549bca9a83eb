#!/bin/bash
# Soft-RoCE works in the VM: rxe0 is up with its RoCE v2 IPv4 GID, and
# perftest (RDMA READ bandwidth, SEND latency) and rping (rdma_cm connect
# and SEND/RECV, data validated) complete over it.  The numbers are only
# noted (vm_metric): under TCG they are ~1/100 of real hardware.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need ibv_devinfo rdma rping
dev=$OBJFS_VM_RDMA_DEV

step "$dev is there and active"
[ -d "/sys/class/infiniband/$dev" ] || fail "no /sys/class/infiniband/$dev"
assert_match "link $dev/1 state ACTIVE" "$(rdma link show "$dev/1")" "rdma link show $dev/1"
assert_match 'PORT_ACTIVE' "$(timeout -k 5 30 ibv_devinfo -d "$dev")" "ibv_devinfo -d $dev"
gid=$(cat "/sys/class/infiniband/$dev/ports/1/gids/$OBJFS_VM_GID_INDEX")
assert_match ':ffff:' "$gid" "GID $OBJFS_VM_GID_INDEX of $dev"

# perf_number OUT COLUMN: the COLUMN-th field of the result line (the
# first line that starts with a number after the "#bytes" header)
perf_number() {
	awk -v c="$2" '/^ *#bytes/ { h = 1; next } h && $1 ~ /^[0-9]+$/ { print $c; exit }' <<<"$1"
}

step "ib_read_bw"
vm_perftest_pair read_bw ib_read_bw -n 200 -s 65536
bw=$(perf_number "$PERFTEST_OUT" 4)
[[ $bw =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v b="$bw" 'BEGIN { exit !(b > 0) }' ||
	fail "no average bandwidth in ib_read_bw's output: $PERFTEST_OUT"
vm_metric ib_read_bw_MBps "$bw"

step "ib_send_lat"
vm_perftest_pair send_lat ib_send_lat -n 200 -s 64
lat=$(perf_number "$PERFTEST_OUT" 3)
[[ $lat =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v l="$lat" 'BEGIN { exit !(l > 0) }' ||
	fail "no latency in ib_send_lat's output: $PERFTEST_OUT"
vm_metric ib_send_lat_min_us "$lat"

step "rping"
vm_bg rping-server rping -s -a "$OBJFS_VM_IP" -p 7175 -C 5 -V
server=$BG_PID
sleep 1
vm_retry 30 rping -c -a "$OBJFS_VM_IP" -p 7175 -C 5 -V -v >"$T/rping-client.log" 2>&1 ||
	fail "rping client failed: $(tail -n 20 "$T/rping-client.log")"
rc=0
vm_wait_bg "$server" 60 || rc=$?
[ "$rc" = 0 ] || fail "rping server failed (status $rc): $(tail -n 20 "$T/rping-server.log")"
assert_eq 5 "$(grep -c 'ping data: rdma-ping-' "$T/rping-client.log")" "pings echoed by rping -c -C 5 -v"
