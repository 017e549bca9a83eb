#!/bin/bash
# A holder keeps at most rdma_regs= objects registered for RDMA: serving
# more objects than that by rendezvous gives the idle registrations back
# (the least recently served first) and registers again on demand, and
# every byte still arrives exact. A large object fetched as several
# ranges is registered once and its registration used again.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp
start_redis
opts="capacity=256M,transport=rdma,secret_file=$(vm_cluster_secret)"
mount_objfs n1 "$REDIS_URL" "$opts,rdma_regs=4,listen=$OBJFS_VM_IP:$(free_port)"
mount_objfs n2 "$REDIS_URL" "$opts,listen=$OBJFS_VM_IP:$(free_port)"
M1=$(mnt_of n1)
M2=$(mnt_of n2)
assert_eq on "$(status_of n1 rdma)" "rdma state of n1"
assert_eq 4 "$(status_of n1 regs_max)" "registrations n1 keeps"

N=24
step "n1 writes $N objects of 64 KiB (above rdma_eager_max: rendezvous) and one of 24 MiB"
for ((i = 0; i < N; i++)); do
	mkdata "$T/src.$i" 65536
	cp "$T/src.$i" "$M1/o.$i"
done
mkdata "$T/big" $((24 << 20))
cp "$T/big" "$M1/big"
eventually 10 ls_has "$M2" big

step "n2 reads them all from n1"
for ((i = 0; i < N; i++)); do
	timeout -k 5 60 cat "$M2/o.$i" >"$T/got.$i" || fail "cat of o.$i on n2 failed"
	assert_same "$T/src.$i" "$T/got.$i"
done
timeout -k 5 120 cat "$M2/big" >"$T/got.big" || fail "cat of big on n2 failed"
assert_same "$T/big" "$T/got.big"
assert_le "$N" "$(status_of n2 fetch_rdv)" "fetches by rendezvous on n2"
assert_eq 0 "$(status_of n2 fetch_tcp)" "fetches over TCP on n2"

live=$(status_of n1 rdma_regs_live)
dropped=$(status_of n1 rdma_regs_dropped)
reused=$(status_of n1 rdma_regs_reused)
pinned=$(status_of n1 mapped_pinned)
step "n1: rdma_regs_live=$live dropped=$dropped reused=$reused mapped_pinned=$pinned regs_dropped=$(status_of n1 regs_dropped)"
# the last few served may still be in use when the last one is hung
assert_le "$live" 6 "registrations n1 keeps (rdma_regs=4)"
assert_le "$pinned" 6 "objects n1 keeps mapped for RDMA"
assert_le $((N + 1 - 6)) "$dropped" "registrations n1 gave back"
assert_le 1 "$reused" "GETs of the 24 MiB object that found its registration"

step "a third node reads them again: registered anew where they were dropped"
mount_objfs n3 "$REDIS_URL" "$opts,listen=$OBJFS_VM_IP:$(free_port)"
M3=$(mnt_of n3)
eventually 10 ls_has "$M3" big
for ((i = 0; i < N; i++)); do
	timeout -k 5 60 cat "$M3/o.$i" >"$T/again.$i" || fail "cat of o.$i on n3 failed"
	assert_same "$T/src.$i" "$T/again.$i"
done
assert_le "$(status_of n1 rdma_regs_live)" 6 "registrations n1 keeps after n3's reads"
