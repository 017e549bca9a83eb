#!/bin/bash
# Issue 23 (found by an attack on it): times before 1970 with a fraction
# of a second (utimensat takes them, Redis keeps them exactly) read back
# as set, on every node: a timespec's tv_nsec is never negative, so such
# a time's seconds round down.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M"
mount_objfs b "$REDIS_URL" "capacity=64M"
A=$(mnt_of a)
B=$(mnt_of b)

step "a file's times set to 1.5 s and 2.5 s before the epoch"
echo x >"$A/f"
python3 -c 'import os, sys; os.utime(sys.argv[1], ns=(-1500000000, -2500000001))' "$A/f"
got() { python3 -c 'import os, sys; s = os.stat(sys.argv[1]); print(s.st_atime_ns, s.st_mtime_ns)' "$1"; }
assert_match ' -2500000001$' "$(rcli --raw HGET '{objfs}:d:1' f | cut -d' ' -f1-3)" "the mtime in Redis"
assert_eq "-1500000000 -2500000001" "$(got "$A/f")" "atime and mtime on a"
assert_eq "-3" "$(stat -c %Y "$A/f")" "whole seconds of the mtime on a"
eventually 10 sh -c "[ \"\$(stat -c %Y '$B/f')\" = -3 ]"
assert_eq "-1500000000 -2500000001" "$(got "$B/f")" "atime and mtime on b"
