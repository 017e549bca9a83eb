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
#   - the capacity counts the chunks' pages: a node of 2 MiB holds about
#     2,000 objects of 1 KiB (a page each would be 512), then ENOSPC;
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

# py_mmap FILE WANT FLAG: FILE mapped with FLAG (MAP_SHARED or
# MAP_PRIVATE) reads as WANT, and a private mapping takes a write
py_mmap() {
	python3 - "$1" "$2" "$3" <<'EOF' || fail "mmap ($3) of $1"
import mmap, sys
path, want, flag = sys.argv[1:4]
data = open(want, "rb").read()
if not data:
    sys.exit(0)
with open(path, "rb") as f:
    if flag == "MAP_SHARED":
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    else:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
    assert m[:] == data, "bytes differ"
    if flag == "MAP_PRIVATE":
        m[0] = (data[0] + 1) % 256
        assert m[0] != data[0]
    m.close()
with open(path, "rb") as f:
    assert f.read() == data, "a private write reached the file"
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
		py_mmap "$m/p/f$n" "$T/src/f$n" MAP_SHARED
		py_mmap "$m/p/f$n" "$T/src/f$n" MAP_PRIVATE
	done
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

step "a node of 2 MiB holds about 2,000 objects of 1 KiB, then says ENOSPC"
mount_objfs c "$REDIS_URL" "capacity=2M,prefix=pc"
C=$(mnt_of c)
mkdata "$T/k" 1024
mkdir "$C/k"
n=0
err=
for i in $(seq 1 3000); do
	if ! err=$(cp "$T/k" "$C/k/$i" 2>&1); then
		break
	fi
	n=$i
done
assert_match "No space left on device" "$err" "the error once full"
step "c took $n objects of 1 KiB in 2 MiB: used $(status_of c used), chunk_bytes $(status_of c chunk_bytes)"
assert_le 1900 "$n" "objects of 1 KiB in a store of 2 MiB"
assert_le "$(status_of c used)" $((2 << 20)) "used within the capacity"
for i in 1 500 $n; do assert_same "$T/k" "$C/k/$i"; done
umount_objfs c

step "writes on a full node evict fetched copies, never its own"
mount_objfs d "$REDIS_URL" "capacity=2M,prefix=pd"
mount_objfs e "$REDIS_URL" "capacity=256M,prefix=pd"
D=$(mnt_of d)
E=$(mnt_of e)
mkdir "$E/r"
for i in $(seq 1 1000); do cp "$T/k" "$E/r/$i"; done
eventually 10 ls_has "$D/r" 1000
for i in $(seq 1 1000); do cat "$D/r/$i" >/dev/null || fail "d cannot read r/$i"; done
eventually 10 status_is d packed 1000
mkdir "$D/own"
n=0
for i in $(seq 1 3000); do
	cp "$T/k" "$D/own/$i" 2>/dev/null || break
	n=$i
done
step "d wrote $n objects of its own; evictions $(status_of d evictions)"
assert_le 1500 "$n" "objects d wrote while evicting copies"
assert_le 500 "$(status_of d evictions)" "copies d evicted"
for i in $(seq 1 "$n"); do cmp -s "$T/k" "$D/own/$i" || fail "d's own/$i differs"; done
for i in 1 500 1000; do assert_same "$T/k" "$E/r/$i"; done
