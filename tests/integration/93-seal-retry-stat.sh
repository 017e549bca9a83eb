#!/bin/bash
# Adversarial (rule 1 of "seal integrity"): an object whose seal at
# RELEASE failed stays pending with `sealing` set until a retry succeeds
# (78-seal-retry's setup).  Everything that waits for a running seal to
# end treats it as a seal still running: stat(2) of the name on its node
# blocks 60 s (SEAL_WAIT_NS) each time, open(2) blocks 60 s and fails
# with EBUSY, rm(2) blocks four times 60 s.  `ls -l` of the directory
# hangs a minute per such file.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

MAPWRITE=$OBJFS_BUILD/tests/objfs-mapwrite
need_built "$MAPWRITE"
start_redis
st=$T/store
mkdir "$st"
mount -t tmpfs -o size=64M,nr_inodes=48 objfs-test "$st" || skip "cannot mount a tmpfs here"
on_exit "umount -l '$st'"
mount_objfs a "$REDIS_URL" "capacity=32M,noprefault,store=$st"
A=$(mnt_of a)

mkdir -p "$st/fill"
i=0
while { : >"$st/fill/$i"; } 2>/dev/null; do
	i=$((i + 1))
	[ "$i" -lt 1000 ] || fail "the store's tmpfs has no inode limit"
done
rm "$st/fill/0"

step "a writer through a mapping whose seal at RELEASE fails"
capture 60 "$MAPWRITE" "$A/mapped" 65536 z || fail "objfs-mapwrite: $CAPTURED"
eventually 30 grep -q "cannot seal object .*'mapped'.*tried again" "$(log_of a)"

step "stat of the file while its seal is retried"
start=$(date +%s)
rc=0
timeout -k 5 10 stat -c %s "$A/mapped" >/dev/null || rc=$?
assert_eq 0 "$rc" "status of stat (124: still blocked after 10 s; it took $(($(date +%s) - start)) s)"
