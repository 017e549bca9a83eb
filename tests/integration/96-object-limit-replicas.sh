#!/bin/bash
# Issue 21 (it replaces issue 19's object limit): node a runs with a hard
# limit of 300 open files and reads 600 objects written on node b.  Each
# read leaves a fetched copy, and a sealed copy holds no descriptor at
# rest, so every read succeeds, a keeps all 600 copies without evicting
# any, its descriptors stay flat, and a create on a still works.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 prlimit
start_redis
MOUNT_PREFIX="prlimit --nofile=300:300" mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)
for p in ${MOUNT_PIDS[a]}; do
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = objfsd ] && PA=$p
done
[ -n "${PA:-}" ] || fail "no objfsd found for a"
mkdir "$B/d"
for i in $(seq 1 600); do echo "obj $i" >"$B/d/f$i"; done
echo warm >"$A/warm"
fds0=$(ls "/proc/$PA/fd" | wc -l)

step "a reads every object of b once (open, read, close)"
python3 - "$A/d" 600 >"$T/reads" <<'PY'
import collections, errno, os, sys
c = collections.Counter()
for i in range(1, int(sys.argv[2]) + 1):
    try:
        with open(os.path.join(sys.argv[1], "f%d" % i)) as f:
            c["ok" if f.read() == "obj %d\n" % i else "wrong bytes"] += 1
    except OSError as e:
        c[errno.errorcode[e.errno]] += 1
print(dict(c))
PY
step "reads: $(cat "$T/reads"); a holds $(status_of a objects) objects"
assert_eq "{'ok': 600}" "$(cat "$T/reads")" "reads on a of b's objects"
assert_eq 601 "$(status_of a objects)" "objects on a (600 copies and its own)"
assert_eq 0 "$(status_of a evictions)" "copies a gave up"
fds=$(ls "/proc/$PA/fd" | wc -l)
step "a's descriptors: $fds0 before the reads, $fds after"
assert_le "$fds" $((fds0 + 16)) "a's descriptors after 600 fetched copies"
echo new >"$A/new" || fail "a create on a, which holds 600 copies, failed"
assert_eq new "$(cat "$A/new")" "the new object on a"
