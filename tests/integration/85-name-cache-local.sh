#!/bin/bash
# Issue 21: the name cache (which answers lookups of this node's objects
# while Redis is away) keeps the names of objects this node holds and of
# directories, not every name another node publishes: a node that holds
# none of 400 files published elsewhere keeps none of their names, and
# learns a name once it holds the object.  When invalidation messages
# were missed, the names its kernel looked up are dropped all the same.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)
base=$(status_of b name_cache)
python3 - "$A" <<'PY' || fail "writing 400 objects on a failed"
import os, sys
os.mkdir(os.path.join(sys.argv[1], "d"))
for i in range(400):
    with open(os.path.join(sys.argv[1], "d", "f%d" % i), "w") as f:
        f.write("object %d\n" % i)
PY
eventually 15 status_is a objects 400
# b has heard of every publish once its subscriber caught up: the last one
eventually 15 ls_has "$B/d" f399
assert_le 400 "$(status_of a name_cache)" "names a keeps (its own objects)"
after=$(status_of b name_cache)
step "b's name cache: $base before, $after after a published 400 files"
assert_le "$after" $((base + 10)) "names b keeps of files it does not hold"

step "b reads 5 of them: it holds them, and keeps their names"
for i in 0 1 2 3 4; do
	assert_eq "object $i" "$(cat "$B/d/f$i")" "d/f$i on b"
done
assert_le $((after + 5)) "$(status_of b name_cache)" "names b keeps once it holds 5 of the files"

step "messages missed: b drops the names its kernel looked up, held here or not"
for i in $(seq 100 119); do
	stat "$B/d/f$i" >/dev/null || fail "stat d/f$i on b"
done
stop_redis save
restart_redis
eventually 30 grep -q 'invalidation messages may have been missed; dropped' "$(log_of b)"
dropped=$(grep -o 'may have been missed; dropped [0-9]* cached names' "$(log_of b)" | tail -1 | awk '{ print $6 }')
assert_le 25 "$dropped" "names b dropped (20 files it looked up but does not hold, 5 it holds)"

step "offline: b still opens the 5 it holds by name, after its kernel forgot them"
stop_redis
sync
echo 2 >/proc/sys/vm/drop_caches
for i in 0 1 2 3 4; do
	assert_eq "object $i" "$(cat "$B/d/f$i")" "d/f$i on b with Redis away"
done
