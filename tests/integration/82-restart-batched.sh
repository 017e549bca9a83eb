#!/bin/bash
# Issue 21: a restart at scale.  A node that comes back to the same Redis
# checks its objects in batches (one script call per 1,000 objects, where
# it used to make about three calls per object), and its mount waits for
# the store's adoption only: "mounted" comes before "reconciled" in its
# log.  Objects deleted while it was away are dropped, renamed ones get
# their new path in the catalog, and every other one is readable.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)
python3 - "$A" <<'PY' || fail "writing 3,000 objects failed"
import os, sys
for d in range(3):
    os.mkdir(os.path.join(sys.argv[1], "d%d" % d))
    for i in range(1000):
        with open(os.path.join(sys.argv[1], "d%d" % d, "f%d" % i), "w") as f:
            f.write("object %d %d\n" % (d, i))
PY
eventually 15 status_is a objects 3000
umount_objfs a || fail "unmount of a failed"

step "while a is away: b deletes one object and renames another"
rm "$B/d0/f7"
mv "$B/d1/f8" "$B/moved"

# script calls Redis ran (the calls they make count in commandstats too,
# so only the scripts are counted: a check cost two, and an EXISTS)
calls() { rcli INFO commandstats | awk -F'[=,:]' '/^cmdstat_evalsha:/ { n += $3 } END { print n + 0 }'; }
before=$(calls)
# the log holds the first mount's lines too: only what comes after counts
skip=$(wc -l <"$(log_of a)")
since() { tail -n +$((skip + 1)) "$(log_of a)"; }
reconciled_since() { since | grep -q 'reconciled .* objects with Redis'; }
mount_objfs a "$REDIS_URL" "capacity=256M"
eventually 30 reconciled_since
after=$(calls)
step "Redis script calls while a restarted and reconciled 3,000 objects: $((after - before))"
assert_le $((after - before)) 100 "Redis script calls for a's restart (2 per object before)"
log=$(since)
line_of() { grep -n "$1" <<<"$log" | tail -1 | cut -d: -f1; }
mounted=$(line_of "mounted $A")
reconciled=$(line_of 'reconciled .* objects with Redis')
[ -n "$mounted" ] && [ "$mounted" -lt "$reconciled" ] ||
	fail "the mount waited for the reconcile (mounted at line $mounted, reconciled at $reconciled)"
assert_match 'reconciled 3000 objects' "$log" "a's log"

step "what changed while a was away is seen"
eventually 15 status_is a objects 2999
assert_absent "$A/d0/f7"
assert_eq "object 1 8" "$(cat "$A/moved")" "the renamed object on a"
assert_eq "object 2 999" "$(cat "$A/d2/f999")" "an object on a"
holders_are "$A/d2/f999" a || fail "a is not a holder of d2/f999 again"

step "Redis loses its data while a is away: a registers its objects again in batches"
umount_objfs a || fail "second unmount of a failed"
rcli FLUSHALL >/dev/null || fail "FLUSHALL failed"
before=$(calls)
mount_objfs a "$REDIS_URL" "capacity=256M"
eventually 60 grep -q 'reconciled 2999 objects' "$(log_of a)"
after=$(calls)
step "Redis script calls while a registered 2,999 objects again: $((after - before))"
assert_le $((after - before)) 100 "Redis script calls for a's restart after FLUSHALL (1 per object before)"
assert_eq "object 2 999" "$(cat "$B/d2/f999")" "an object registered again, read on b"
assert_eq "object 1 8" "$(cat "$B/moved")" "the renamed object, under its new name, read on b"
assert_eq 999 "$(find "$B/d0" -type f | wc -l)" "names in d0 seen on b"
holders_are "$B/d1/f9" a || fail "a is not a holder of d1/f9 after FLUSHALL"
