#!/bin/bash
# Issue 19, item 1 (the object limit) with eviction: node a runs with
# --nofile=300 (objects_max 188) and reads more objects written on node
# b than that.  Each read leaves a fetched copy; at objects_max, a fetch
# or a create gives up the least recently used copy that b also holds,
# so every read succeeds and a create on a still works.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 prlimit
start_redis
MOUNT_PREFIX="prlimit --nofile=300:300" mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)
max=$(status_of a objects_max)
step "objects_max of a: $max"
mkdir "$B/d"
for i in $(seq 1 $((max + 20))); do echo "obj $i" >"$B/d/f$i"; done

step "a reads every object of b once (open, read, close)"
python3 - "$A/d" $((max + 20)) >"$T/reads" <<'PY'
import collections, errno, os, sys
c = collections.Counter()
for i in range(1, int(sys.argv[2]) + 1):
    try:
        with open(os.path.join(sys.argv[1], "f%d" % i)) as f:
            f.read()
        c["ok"] += 1
    except OSError as e:
        c[errno.errorcode[e.errno]] += 1
print(dict(c))
PY
step "reads: $(cat "$T/reads")"
step "evictions: $(status_of a evictions), objects: $(status_of a objects)"
echo new >"$A/new" || fail "a create on a, which holds only copies of b's objects that nobody has open, failed"
