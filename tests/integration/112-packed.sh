#!/bin/bash
# Small objects packed into shared chunk files (issue 24): objects of up
# to pack_max (32K) bytes take a slot of a chunk in the store, not a file
# and a page each, and are read through objfsd.
#   - the first open of a packed object stores its bytes in the kernel's
#     page cache: reading it needs no READ request through objfsd; and
#     closing a sealed object sends it no FLUSH;
#   - mixed sizes on both sides of the threshold are byte-exact through
#     cat, cp, dd, tar and Python mmap (MAP_SHARED and MAP_PRIVATE), on
#     the writer's node and fetched by another over TCP, across a clean
#     remount and a kill -9 and restart;
#   - a packed object deleted while a reader and a mapping hold it keeps
#     its bytes for them, though new objects of its size come meanwhile;
#   - the capacity counts the chunks' pages: a node of 1 MiB holds about
#     1,000 objects of 1 KiB (a page each would be 256), then ENOSPC;
#   - writes on a full node evict fetched copies to make room, never an
#     object whose only copy it holds.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 tar
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)

SIZES="0 1 100 4095 4096 4097 20000 32768 32769 100000 1048577"
mkdir -p "$T/src"
small=0
for n in $SIZES; do
	mkdata "$T/src/f$n" "$n"
	[ "$n" -ge 1 ] && [ "$n" -le 32768 ] && small=$((small + 1))
done

# py_mmap MNT: each MNT/p/fN of SIZES mapped MAP_SHARED, and then
# MAP_PRIVATE, reads as $T/src/fN, a private mapping takes a write, and
# that write does not reach the file (one python3 for them all: a start
# takes 0.5 s here)
py_mmap() {
	local sizes
	read -ra sizes <<<"$SIZES"
	timeout -k 5 120 python3 - "$1/p" "$T/src" "${sizes[@]}" <<'EOF' || fail "mmap of $1/p"
import mmap, sys
d, src = sys.argv[1:3]
for n in sys.argv[3:]:
    path = "%s/f%s" % (d, n)
    data = open("%s/f%s" % (src, n), "rb").read()
    if not data:
        continue
    for flag in ("MAP_SHARED", "MAP_PRIVATE"):
        what = "%s (%s)" % (path, flag)
        with open(path, "rb") as f:
            if flag == "MAP_SHARED":
                m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
            else:
                m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE,
                              prot=mmap.PROT_READ | mmap.PROT_WRITE)
            if m[:] != data:
                sys.exit("%s: bytes differ" % what)
            if flag == "MAP_PRIVATE":
                m[0] = (data[0] + 1) % 256
                if m[0] == data[0]:
                    sys.exit("%s: a private mapping took no write" % what)
            m.close()
        with open(path, "rb") as f:
            if f.read() != data:
                sys.exit("%s: a private write reached the file" % what)
EOF
}

# py_files MODE SRC DIR FIRST LAST: in one python3 process, what a cp,
# cat or cmp per file would do to DIR/FIRST ... DIR/LAST, with the same
# system calls on each file:
#   write  each gets SRC's bytes (open O_CREAT|O_WRONLY|O_TRUNC, write,
#          close: the close seals it); stops at the first error and
#          prints "COUNT ERROR", COUNT the files written and ERROR empty
#          or "DIR/I: STRERROR" ("No space left on device")
#   read   each is read to its end (open, read, close), like cat
#   same   each is read and must hold SRC's bytes, like cmp
# read and same fail the test at the first file that cannot be read or
# differs.
py_files() {
	timeout -k 5 120 python3 - "$@" <<'EOF' || fail "py_files $*"
import os, sys
mode, src, d, first, last = sys.argv[1:6]
want = open(src, "rb").read()
n = 0
for i in range(int(first), int(last) + 1):
    path = "%s/%d" % (d, i)
    if mode == "write":
        fd = None
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o666)
            done = 0
            while done < len(want):
                done += os.write(fd, want[done:])
            sealing, fd = fd, None
            os.close(sealing)  # seals the object
        except OSError as e:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
            print(n, "%s: %s" % (path, os.strerror(e.errno)))
            sys.exit(0)
        n = i - int(first) + 1
        continue
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = []
            while True:
                b = os.read(fd, 131072)
                if not b:
                    break
                chunks.append(b)
        finally:
            os.close(fd)
    except OSError as e:
        sys.exit("cannot read %s: %s" % (path, os.strerror(e.errno)))
    if mode == "same" and b"".join(chunks) != want:
        sys.exit("%s differs from %s" % (path, src))
if mode == "write":
    print(n)
EOF
}

# first_reads NODE: on NODE's mount, read every small object opened
# there for the first time: its bytes came with the open, so objfsd sees
# no READ request; and closing a sealed object sends no FLUSH, packed or
# not
first_reads() {
	local node=$1 m r0 f0 n
	m=$(mnt_of "$1")
	r0=$(status_of "$node" read_requests)
	f0=$(status_of "$node" flush_requests)
	for n in $SIZES; do
		[ "$n" -ge 1 ] && [ "$n" -le 32768 ] && assert_same "$T/src/f$n" "$m/p/f$n"
	done
	assert_eq "$r0" "$(status_of "$node" read_requests)" "READ requests on $node for small objects opened afresh"
	assert_le "$small" "$(status_of "$node" cache_fills)" "cache fills on $node"
	for n in $SIZES; do assert_same "$T/src/f$n" "$m/p/f$n"; done
	assert_eq "$f0" "$(status_of "$node" flush_requests)" "FLUSH requests on $node for sealed objects"
}

# check_all MNT: every size, through each tool
check_all() {
	local m=$1 n
	for n in $SIZES; do
		assert_same "$T/src/f$n" "$m/p/f$n"
		cp "$m/p/f$n" "$T/cp.$n" && assert_same "$T/src/f$n" "$T/cp.$n"
		dd if="$m/p/f$n" of="$T/dd.$n" bs=4k status=none && assert_same "$T/src/f$n" "$T/dd.$n"
	done
	py_mmap "$m"
	rm -rf "$T/untar" && mkdir -p "$T/untar"
	tar -C "$m" -cf - p | tar -C "$T/untar" -xf - || fail "tar of $m/p"
	for n in $SIZES; do assert_same "$T/src/f$n" "$T/untar/p/f$n"; done
}

step "a writes $(echo "$SIZES" | wc -w) objects, $small of them small enough to pack"
mkdir "$A/p"
for n in $SIZES; do cp "$T/src/f$n" "$A/p/f$n"; done
assert_eq "$small" "$(status_of a packed)" "objects packed on a"
assert_le 1 "$(status_of a chunks)" "chunks on a"
check_all "$A"

step "b fetches them over TCP: the small ones land packed"
eventually 10 ls_has "$B/p" f1048577
first_reads b
check_all "$B"
eventually 10 status_is b packed "$small"

step "a packed object deleted while a reader and a mapping hold it"
mkdata "$T/held" 2000
cp "$T/held" "$A/held"
start_reader r1 "$A/held"
start_mapper m1 "$A/held" all
rm "$A/held"
# new objects of the same size: the held one's slot must not be theirs
for i in $(seq 1 20); do mkdata "$T/n$i" 2000 && cp "$T/n$i" "$A/n$i"; done
assert_eq "$(sha256_of "$T/held")" "$(release_reader r1)" "sha256 read by the reader"
assert_eq "$(sha256_of "$T/held")" "$(release_reader m1)" "sha256 of the mapping"
for i in $(seq 1 20); do assert_same "$T/n$i" "$A/n$i"; done

step "a clean remount adopts them"
umount_objfs a
mount_objfs a "$REDIS_URL" "capacity=256M"
assert_eq 0 "$(status_of a bad_records)" "bad records after the remount"
assert_eq $((small + 20)) "$(status_of a packed)" "objects packed on a after the remount"
first_reads a
check_all "$A"

step "kill -9 and a restart adopt them too"
mkdata "$T/late" 3000
cp "$T/late" "$A/late"
kill_node a KILL
MOUNT_PIDS[a]=
mount_objfs a "$REDIS_URL" "capacity=256M"
assert_eq 0 "$(status_of a bad_records)" "bad records after the restart"
check_all "$A"
assert_same "$T/late" "$A/late"
for i in $(seq 1 20); do assert_same "$T/n$i" "$A/n$i"; done
umount_objfs b

step "a node of 1 MiB holds about 1,000 objects of 1 KiB, then says ENOSPC"
mount_objfs c "$REDIS_URL" "capacity=1M,prefix=pc"
C=$(mnt_of c)
mkdata "$T/k" 1024
mkdir "$C/k"
out=$(py_files write "$T/k" "$C/k" 1 1500)
read -r n err <<<"$out"
assert_match "No space left on device" "$err" "the error once full"
step "c took $n objects of 1 KiB in 1 MiB: used $(status_of c used), chunk_bytes $(status_of c chunk_bytes)"
assert_le 950 "$n" "objects of 1 KiB in a store of 1 MiB"
assert_le "$(status_of c used)" $((1 << 20)) "used within the capacity"
for i in 1 250 $n; do assert_same "$T/k" "$C/k/$i"; done
umount_objfs c

step "writes on a full node evict fetched copies, never its own"
mount_objfs d "$REDIS_URL" "capacity=1M,prefix=pd"
mount_objfs e "$REDIS_URL" "capacity=256M,prefix=pd"
D=$(mnt_of d)
E=$(mnt_of e)
mkdir "$E/r"
out=$(py_files write "$T/k" "$E/r" 1 500)
read -r n err <<<"$out"
assert_eq 500 "$n" "objects e wrote ($err)"
eventually 10 ls_has "$D/r" 500
py_files read "$T/k" "$D/r" 1 500
eventually 10 status_is d packed 500
mkdir "$D/own"
out=$(py_files write "$T/k" "$D/own" 1 1500)
read -r n err <<<"$out"
step "d wrote $n objects of its own ($err); evictions $(status_of d evictions)"
assert_le 750 "$n" "objects d wrote while evicting copies"
assert_le 250 "$(status_of d evictions)" "copies d evicted"
py_files same "$T/k" "$D/own" 1 "$n"
for i in 1 250 500; do assert_same "$T/k" "$E/r/$i"; done
