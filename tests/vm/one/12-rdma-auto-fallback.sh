#!/bin/bash
# transport=auto against a node without RDMA (transport=tcp: it serves
# TCP only and its card says so): the fetch goes over TCP, byte-exact;
# and between two auto nodes it goes over RDMA.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp
start_redis
base="capacity=128M,secret_file=$(vm_cluster_secret)"
mount_objfs plain "$REDIS_URL" "$base,transport=tcp,listen=$OBJFS_VM_IP:$(free_port)"
mount_objfs a1 "$REDIS_URL" "$base,listen=$OBJFS_VM_IP:$(free_port)"
mount_objfs a2 "$REDIS_URL" "$base,listen=$OBJFS_VM_IP:$(free_port)"
assert_match '^off' "$(status_of plain rdma)" "rdma state of the transport=tcp node"
assert_eq on "$(status_of a1 rdma)" "rdma state of an auto node"

mkdata "$T/x" $((5 << 20))
mkdata "$T/y" 5000
cp "$T/x" "$(mnt_of plain)/x"
cp "$T/y" "$(mnt_of plain)/y"
eventually 10 ls_has "$(mnt_of a1)" y
step "auto node fetches from the TCP-only node"
assert_same "$T/x" "$(mnt_of a1)/x"
assert_same "$T/y" "$(mnt_of a1)/y"
assert_le 2 "$(status_of a1 fetch_tcp)" "fetches over TCP on a1"
assert_eq 0 "$(status_of a1 fetch_eager)" "eager fetches on a1"
assert_eq 0 "$(status_of a1 fetch_rdv)" "rendezvous fetches on a1"

step "between two auto nodes: RDMA"
mkdata "$T/z" $((2 << 20))
cp "$T/z" "$(mnt_of a1)/z"
eventually 10 ls_has "$(mnt_of a2)" z
assert_same "$T/z" "$(mnt_of a2)/z"
assert_le 1 "$(status_of a2 fetch_rdv)" "rendezvous fetches on a2"
