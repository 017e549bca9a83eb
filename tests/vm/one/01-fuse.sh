#!/bin/bash
# A single objfs node works inside the VM (kernel 6.1: no FUSE
# passthrough, objfsd falls back by itself): files written through the
# mount read back byte-exact.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp
step "kernel $(uname -r)"
start_redis
mount_objfs n1 "$REDIS_URL" "capacity=64M"
M=$(mnt_of n1)
for size in 0 1 4096 1048576 $((8 << 20)); do
	step "round trip of $size bytes"
	mkdata "$T/src.$size" "$size"
	assert_ok cp "$T/src.$size" "$M/f.$size"
	assert_eq "$size" "$(stat -c %s "$M/f.$size")" "size of f.$size"
	assert_same "$T/src.$size" "$M/f.$size"
done
step "after a remount"
umount_objfs n1 || fail "unmount failed"
mount_objfs n1 "$REDIS_URL" "capacity=64M"
ls_has "$M" "f.$((8 << 20))" || fail "f.$((8 << 20)) is gone after a remount: $(ls_of "$M")"
