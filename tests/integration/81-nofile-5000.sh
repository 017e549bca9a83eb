#!/bin/bash
# Issue 21: nothing held per object at rest.  objfsd started under an
# open-files hard limit of 256 stores 5,000 objects (sizes log-uniform up
# to 4 MiB, some empty, at most 1 GiB in all), every one byte-exact after
# a clean remount and after kill -9 and a restart; its descriptors and
# mappings stay within a small constant of their count at 100 objects.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 prlimit
start_redis
OPTS="capacity=2G,map_cache=64"
MOUNT_PREFIX="prlimit --nofile=256:256" mount_objfs n1 "$REDIS_URL" "$OPTS"
M=$(mnt_of n1)

# daemon_pid NAME: the objfsd of mount NAME
daemon_pid() {
	local p
	for p in ${MOUNT_PIDS[$1]:-}; do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = objfsd ] && echo "$p" && return 0
	done
	fail "no objfsd found for $1"
}

# held NAME: "FDS MAPS STORE_FDS STORE_MAPS" of its objfsd now: all its
# descriptors and mappings, and those of files in its store's data/
held() {
	local p d
	p=$(daemon_pid "$1")
	d=$(store_of "$1")/data/
	echo "$(ls "/proc/$p/fd" | wc -l) $(wc -l <"/proc/$p/maps")" \
		"$(find "/proc/$p/fd" -lname "$d*" 2>/dev/null | wc -l)" \
		"$(awk -v d="$d" 'index($6, d) == 1' "/proc/$p/maps" | wc -l)"
}

# write FROM TO: objects FROM..TO-1 as d<i/1000>/f<i>, their sizes and
# sha256 appended to $T/manifest; stops at 1 GiB in all
write() {
	python3 - "$M" "$1" "$2" "$T/manifest" <<'PY' || fail "writing objects $1..$2 failed"
import hashlib, math, os, random, sys
m, lo, hi, man = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
total = 0
if os.path.exists(man):
    with open(man) as f:
        total = sum(int(l.split()[1]) for l in f)
budget = 1 << 30
with open(man, "a") as out:
    for i in range(lo, hi):
        r = random.Random(21 * 1000003 + i)
        size = 0 if i % 50 == 0 else int(math.exp(r.uniform(0, math.log(4 << 20))))
        size = min(size, max(0, budget - total) // max(1, 5000 - i))
        data = r.randbytes(size)
        d = os.path.join(m, "d%d" % (i // 1000))
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "f%d" % i)
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        try:
            os.write(fd, data) == size or sys.exit("short write to %s" % p)
        finally:
            os.close(fd)  # raises if the seal failed
        total += size
        out.write("d%d/f%d %d %s\n" % (i // 1000, i, size, hashlib.sha256(data).hexdigest()))
PY
}

# check WHEN: every object of the manifest reads back byte-exact
check() {
	python3 - "$M" "$T/manifest" <<'PY' || fail "$1: objects did not read back"
import hashlib, sys
m, bad, n = sys.argv[1], [], 0
for line in open(sys.argv[2]):
    name, size, sha = line.split()
    with open("%s/%s" % (m, name), "rb") as f:
        data = f.read()
    n += 1
    if len(data) != int(size) or hashlib.sha256(data).hexdigest() != sha:
        bad.append("%s (%d bytes, want %s)" % (name, len(data), size))
if bad:
    sys.exit("%d of %d objects differ: %s" % (len(bad), n, ", ".join(bad[:5])))
print("%d objects byte-exact" % n)
PY
	step "$1: every object read back byte-exact"
}

# flat WHEN: descriptors and mappings are within a constant of their
# count at 100 objects: of the store's files, at most the 64 idle
# mappings map_cache keeps and the chunks of packed objects; in all, what threads started since add (a
# FUSE worker's stack and guard page: 64 workers at most)
flat() {
	local fds maps sfds smaps chunks
	read -r fds maps sfds smaps <<<"$(held n1)"
	step "$1: objfsd holds $fds descriptors and $maps mappings, of which $sfds and $smaps" \
		"of store files (at 100 objects: $FDS0, $MAPS0, $SFDS0, $SMAPS0)"
	assert_le "$sfds" 4 "$1: objfsd's descriptors of store files"
	# and one for each chunk of packed objects (2 MiB of them, or a
	# size class with few)
	chunks=$(status_of n1 chunks)
	assert_le "$smaps" $((64 + 4 + chunks)) "$1: objfsd's mappings of store files ($chunks chunks)"
	assert_le "$fds" $((FDS0 + 16)) "$1: objfsd's descriptors"
	# ASan's allocator maps more as the heap grows
	[ -n "${OBJFS_SANITIZE:-}" ] || assert_le "$maps" $((MAPS0 + 2 * 64 + chunks)) "$1: objfsd's mappings"
}

step "100 objects, then the daemon's descriptors and mappings"
write 0 100
check "at 100"
read -r FDS0 MAPS0 SFDS0 SMAPS0 <<<"$(held n1)"
step "at 100 objects: $FDS0 descriptors, $MAPS0 mappings ($SFDS0, $SMAPS0 of store files)"

step "4,900 more"
write 100 5000
assert_eq 5000 "$(wc -l <"$T/manifest")" "objects written"
step "store: $(status_of n1 objects) objects, $(status_of n1 used) bytes used"
check "at 5,000"
flat "at 5,000"

step "a clean remount under the same limit"
umount_objfs n1 || fail "unmount failed"
MOUNT_PREFIX="prlimit --nofile=256:256" mount_objfs n1 "$REDIS_URL" "$OPTS"
assert_eq 5000 "$(status_of n1 objects)" "objects adopted after the remount"
check "after the remount"
flat "after the remount"

step "kill -9 and a restart under the same limit"
kill_node n1 KILL
MOUNT_PIDS[n1]=
MOUNT_PREFIX="prlimit --nofile=256:256" mount_objfs n1 "$REDIS_URL" "$OPTS"
assert_eq 5000 "$(status_of n1 objects)" "objects adopted after kill -9"
check "after kill -9 and a restart"
flat "after kill -9 and a restart"
