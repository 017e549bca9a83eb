#!/bin/bash
# A node holds more objects than the soft limit on open files it was
# started with: objfsd takes the hard limit, so no create fails at its
# seal ("Too many open files") and every object reads back.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge 2000 ] || skip "the hard limit on open files is $hard"
# the daemon inherits a soft limit of 256 (the shell's stays as it was)
MOUNT_PREFIX="prlimit --nofile=256:$hard" mount_objfs n1 "$REDIS_URL"
M=$(mnt_of n1)
mkdir "$M/d"

step "600 objects through a daemon started with a soft limit of 256 open files"
python3 - "$M/d" <<'PY' || fail "creating 600 objects failed"
import os, sys
d = sys.argv[1]
for i in range(600):
    fd = os.open(os.path.join(d, "f%d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os.write(fd, b"object %d\n" % i)
    os.close(fd)  # raises if the seal failed
PY
for i in 0 255 599; do assert_eq "object $i" "$(cat "$M/d/f$i")" "f$i"; done
assert_eq 600 "$(ls "$M/d" | wc -l)" "names in d"
assert_no_match 'Too many open files' "$(cat "$(log_of n1)")" "the daemon's log"

# issue 21: a sealed object holds no descriptor at rest, so a hard limit
# of 256 open files opens a store of 600 objects, and every one reads back
step "a daemon whose hard limit is 256 open files opens a store of 600 objects"
umount_objfs n1 || fail "unmount failed"
MOUNT_PREFIX="prlimit --nofile=256:256" mount_objfs n1 "$REDIS_URL"
assert_eq 600 "$(status_of n1 objects)" "objects adopted under a hard limit of 256"
for i in 0 255 599; do assert_eq "object $i" "$(cat "$M/d/f$i")" "f$i after the remount"; done
assert_no_match 'Too many open files' "$(cat "$(log_of n1)")" "the daemon's log"
