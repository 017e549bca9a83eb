#!/bin/bash
# Two objfs nodes, one per VM, over TCP between the VMs, sharing a Redis
# in VM 0: each reads what the other wrote, byte-exact, and sees the
# writer as its holder.  Runs in both VMs.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

[ "$OBJFS_VM_COUNT" = 2 ] || fail "needs two VMs (tests/vm/two)"
need cmp getfattr
me=vm$OBJFS_VM_INDEX
other=vm$VM_PEER

if [ "$OBJFS_VM_INDEX" = 0 ]; then
	vm_start_redis
	vm_put redis-url "$REDIS_URL"
else
	REDIS_URL=$(vm_get redis-url)
fi
vm_mount_objfs "$me" "$REDIS_URL" "capacity=64M"
M=$(mnt_of "$me")

step "write a file on $me"
mkdata "$T/src" $(((3 << 20) + 4321))
cp "$T/src" "$OBJFS_VM_SHARED/src.$me"
cp "$T/src" "$M/from-$me"
vm_barrier written

step "read the file $other wrote"
eventually 30 ls_has "$M" "from-$other"
assert_eq "$(stat -c %s "$OBJFS_VM_SHARED/src.$other")" "$(stat -c %s "$M/from-$other")" "size of from-$other"
t0=$(date +%s)
timeout -k 5 60 cat "$M/from-$other" >"$T/got" || fail "reading from-$other across the VMs failed or hung"
step "read in $(($(date +%s) - t0)) s"
assert_same "$OBJFS_VM_SHARED/src.$other" "$T/got"
assert_same "$OBJFS_VM_SHARED/src.$other" "$M/from-$other"
assert_eq "$other" "$(xattr "$M/from-$other" user.objfs.locations | tr ',' '\n' | grep -vx "$me" | head -n 1)" \
	"holder of from-$other besides $me"
vm_barrier read

# vm1 leaves first: vm0 holds the Redis
if [ "$OBJFS_VM_INDEX" = 1 ]; then
	umount_objfs "$me" || fail "unmounting $me failed"
fi
vm_barrier done
