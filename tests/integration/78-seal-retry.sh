#!/bin/bash
# Issue 19, item 1: a seal that fails is never a silent loss.  The store
# lives on a tmpfs of the test's own with few inodes; each object takes
# one for its bytes and one for its catalog record at the seal.  With one
# inode left, an object's bytes get it and its seal cannot write the
# record:
#   - sealed at close(2) (a plain writer): close(2) fails, and the name
#     does not stay;
#   - sealed at the RELEASE that follows the last munmap (a writer through
#     a mapping it made before close): its close(2) returned 0 long
#     before, so nothing is discarded; the seal is tried again, and once
#     an inode is free the object is published with every byte.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

MAPWRITE=$OBJFS_BUILD/tests/objfs-mapwrite
need_built "$MAPWRITE"
need python3 cmp
start_redis
st=$T/store
mkdir "$st"
mount -t tmpfs -o size=64M,nr_inodes=48 objfs-test "$st" || skip "cannot mount a tmpfs here"
on_exit "umount -l '$st'"
mount_objfs a "$REDIS_URL" "capacity=32M,noprefault,store=$st"
mount_objfs b "$REDIS_URL" "capacity=32M"
A=$(mnt_of a)
B=$(mnt_of b)
echo first >"$A/first"

step "a plain writer whose seal cannot write its record: close(2) fails"
fill_inodes "$st"
free_inodes "$st" 1
rc=0
python3 - "$A/plain" <<'PY' >"$T/plain.out" 2>&1 || rc=$?
import errno, os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
os.write(fd, b"plain\n")
try:
    os.close(fd)
except OSError as e:
    print("close:", errno.errorcode[e.errno])
    sys.exit(3)
print("close: ok")
PY
assert_eq 3 "$rc" "status of the plain writer ($(cat "$T/plain.out"))"
assert_match 'close: (ENOSPC|EIO)' "$(cat "$T/plain.out")" "what close(2) returned"
assert_absent "$A/plain"

step "a writer through a mapping, sealed at RELEASE, whose seal fails: kept and retried"
fill_inodes "$st"
free_inodes "$st" 1
capture 60 "$MAPWRITE" "$A/mapped" 65536 z || fail "objfs-mapwrite: $CAPTURED"
eventually 30 grep -q "cannot seal object .*'mapped'.*tried again" "$(log_of a)"
assert_absent "$B/mapped"
free_inodes "$st" 5
eventually 30 test -e "$B/mapped"
head -c 65536 /dev/zero | tr '\0' z >"$T/want"
cmp "$T/want" "$B/mapped" || fail "node b reads other bytes than were written"
cmp "$T/want" "$A/mapped" || fail "node a reads other bytes than were written"
assert_eq 0 "$(status_of a killed_writers)" "killed_writers"
[ "$(status_of a seal_failed)" -ge 2 ] || fail "seal_failed: $(status_of a seal_failed)"
