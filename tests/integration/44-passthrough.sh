#!/bin/bash
# Kernel-served reads (FUSE passthrough, passthrough=auto):
# - a sealed local object is read and mapped by the kernel itself: for
#   cat, cp, dd, tar and python mmap (MAP_SHARED and MAP_PRIVATE) the
#   node's passthrough_opens rises, its read_requests does not, and the
#   bytes are exact;
# - readers that opened an object while it was being fetched from another
#   node (direct I/O, one of them with a MAP_SHARED mapping) keep reading
#   correctly after the seal, opens beside them get no EIO, and the first
#   open after they close is a passthrough open;
# - with passthrough=off the daemon answers every read.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr tar dd
start_redis
# a serves slowly, so that b's readers open the object mid-fetch
mount_objfs a "$REDIS_URL" "capacity=512M,serve_bwlimit=16M"
A=$(mnt_of a)

mode=$(status_of a passthrough)
[ "$mode" = on ] || skip "passthrough is $mode"

# ctr NODE KEY: a counter of NODE's status
ctr() { status_of "$1" "$2"; }

# in_passthrough NODE FILE: read FILE with cat and succeed if that open
# was a passthrough open (for eventually: the first open after a writer
# may come before the writer's asynchronous RELEASE, and be cached)
in_passthrough() {
	local before
	before=$(ctr "$1" passthrough_opens)
	timeout -k 5 30 cat "$2" >/dev/null || return 1
	[ "$(ctr "$1" passthrough_opens)" -gt "$before" ] ||
		{ echo "open of $2 was not a passthrough open"; return 1; }
}

step "sealed local objects on a"
mkdata "$T/f" $((8 << 20))
# small, but more than pack_max (32K): a file of its own to pass through
mkdata "$T/small" 40000
: >"$T/empty"
cp "$T/f" "$A/f"
cp "$T/small" "$A/small"
cp "$T/empty" "$A/empty"
# PT_FILES=0: the store keeps objects in one shared arena, so no object
# has a file of its own to pass through, and sealed objects are served by
# the daemon; the direct-I/O and passthrough=off checks still run
PT_FILES=1
if ! in_passthrough a "$A/f" >/dev/null; then
	# not a guessed second: up to 10 s for a passthrough open
	for ((i = 0; i < 50; i++)); do
		in_passthrough a "$A/f" >/dev/null && break
		sleep 0.2
	done
	if ! in_passthrough a "$A/f" >/dev/null; then
		[ -e "$(store_of a)/arena" ] ||
			fail "a sealed local object is not opened in passthrough mode: $(xattr "$A" user.objfs.status)"
		step "the store keeps objects in one arena: no passthrough of local objects to check"
		PT_FILES=0
	fi
fi

# local_reads: every tool reads a's sealed local objects in passthrough
# mode, byte-exact, and a's daemon serves no READ
local_reads() {
	local pt0 pt1 rd0 dio0 n
	pt0=$(ctr a passthrough_opens)
	rd0=$(ctr a read_requests)
	dio0=$(ctr a direct_io_opens) # the writers' handles

	step "cat, cp, dd, tar"
	cat "$A/f" >"$T/f.cat"
	assert_same "$T/f" "$T/f.cat"
	cp "$A/f" "$T/f.cp"
	assert_same "$T/f" "$T/f.cp"
	dd if="$A/f" of="$T/f.dd" bs=1M status=none
	assert_same "$T/f" "$T/f.dd"
	dd if="$A/f" of="$T/f.dd4k" bs=4k skip=7 status=none
	assert_ok cmp -i $((7 * 4096)):0 "$T/f" "$T/f.dd4k"
	mkdir "$T/untar"
	tar -C "$A" -cf - f small empty | tar -C "$T/untar" -xf -
	for n in f small empty; do assert_same "$T/$n" "$T/untar/$n"; done

	step "python mmap, MAP_SHARED and MAP_PRIVATE"
	timeout -k 5 120 python3 - "$A" "$T" <<'PY'
import mmap, sys
mnt, tmp = sys.argv[1], sys.argv[2]
bad = []
for name in ("f", "small"):
    want = open(f"{tmp}/{name}", "rb").read()
    with open(f"{mnt}/{name}", "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        if m[:] != want:
            bad.append(f"{name}: MAP_SHARED mapping differs")
        m.close()
    with open(f"{mnt}/{name}", "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        if m[:] != want:
            bad.append(f"{name}: MAP_PRIVATE mapping differs")
        m[0] = (want[0] + 1) % 256
        m.close()
    # a mapping outlives its descriptor
    f = open(f"{mnt}/{name}", "rb")
    m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    f.close()
    if m[:] != want:
        bad.append(f"{name}: mapping differs after its descriptor was closed")
    m.close()
    if open(f"{mnt}/{name}", "rb").read() != want:
        bad.append(f"{name}: changed after a private mapping was written")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

	pt1=$(ctr a passthrough_opens)
	# cat, cp, dd twice, tar of two non-empty files, python's 8 opens
	[ "$((pt1 - pt0))" -ge 12 ] || fail "passthrough opens on a: $((pt1 - pt0)) over 12 reads"
	assert_eq "$rd0" "$(ctr a read_requests)" "READ requests a served for sealed local objects"
	assert_eq "$dio0" "$(ctr a direct_io_opens)" "direct-I/O opens on a for reads"
	eventually 10 status_is a backing_ids_open 0
}

if [ "$PT_FILES" = 1 ]; then local_reads; fi

step "readers that opened an object while b fetched it"
mount_objfs b "$REDIS_URL" "capacity=512M"
B=$(mnt_of b)
mkdata "$T/big" $((64 << 20))
cp "$T/big" "$A/big"
eventually 10 ls_has "$B" big
want=$(sha256_of "$T/big")
dio0=$(ctr b direct_io_opens)
start_reader r1 "$B/big"
# a second reader maps the object shared while it is being fetched
start_mapper m1 "$B/big"
assert_match '^fetching ' "$(xattr "$B/big" user.objfs.fetch)" "fetch state while the readers opened"
assert_eq $((dio0 + 2)) "$(ctr b direct_io_opens)" "direct-I/O opens of readers mid-fetch"

eventually 60 sh -c "getfattr --only-values -n user.objfs.fetch '$B/big' | grep -q '^local '"
step "after the seal, with the mid-fetch readers still open"
pt0=$(ctr b passthrough_opens)
cat "$B/big" >"$T/big.during"
assert_same "$T/big" "$T/big.during"
timeout -k 5 60 python3 -c '
import mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    sys.exit(0 if m[:] == open(sys.argv[2], "rb").read() else 1)
' "$B/big" "$T/big" || fail "a mapping beside the mid-fetch readers differs"
assert_eq "$pt0" "$(ctr b passthrough_opens)" "passthrough opens beside the mid-fetch readers"
assert_eq "$want" "$(release_reader r1)" "the mid-fetch reader after the seal"
assert_eq "$want" "$(release_reader m1)" "the mid-fetch mapping after the seal"

if [ "$PT_FILES" = 1 ]; then
	step "the first open after they close is a passthrough open"
	eventually 10 in_passthrough b "$B/big"
	rd0=$(ctr b read_requests)
	cat "$B/big" >"$T/big.after"
	assert_same "$T/big" "$T/big.after"
	assert_eq "$rd0" "$(ctr b read_requests)" "READ requests b served once the object is local"
	eventually 10 status_is b backing_ids_open 0
fi

if [ "$PT_FILES" = 1 ]; then
	step "a mapping outlives its handle: deleted, its file is not given to a new object"
	# C programs close the descriptor after mmap (python's mmap keeps a
	# dup of it): the kernel releases the handle at close(2), and the
	# mapping goes on mapping the store file itself
	mkdata "$T/x" $((8 << 20))
	mkdata "$T/z" $((8 << 20))
	cp "$T/x" "$A/x"
	cp "$T/z" "$B/z"
	eventually 10 in_passthrough a "$A/x"
	python3 - "$A/x" "$T/x" "$T/mapx" <<'PY' &
import ctypes, os, sys, time
path, want_path, base = sys.argv[1:]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
want = open(want_path, "rb").read()
fd = os.open(path, os.O_RDONLY)
addr = libc.mmap(None, len(want), 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
os.close(fd)
ok = addr not in (None, ctypes.c_void_p(-1).value) and ctypes.string_at(addr, len(want)) == want
open(base + ".ready", "w").write("ok" if ok else "bad")
while not os.path.exists(base + ".go"):
    time.sleep(0.02)
same = ctypes.string_at(addr, len(want)) == want
open(base + ".result", "w").write("ok" if same else "DIFFERS")
PY
	BG_PIDS+=("$!")
	eventually 20 test -s "$T/mapx.ready"
	assert_eq ok "$(cat "$T/mapx.ready")" "the mapping of x"
	rm "$A/x"
	# a fetch of the same size takes a pooled file if one fits
	assert_same "$T/z" "$A/z"
	touch "$T/mapx.go"
	eventually 20 test -s "$T/mapx.result"
	assert_eq ok "$(cat "$T/mapx.result")" "the mapping of deleted x after a fetch landed on a"
fi

step "passthrough=off: the daemon answers every read"
mount_objfs c "$REDIS_URL" "capacity=512M,passthrough=off"
C=$(mnt_of c)
assert_eq "off (passthrough=off)" "$(status_of c passthrough)" "status of c"
mkdata "$T/g" $((4 << 20))
cp "$T/g" "$C/g"
rd0=$(ctr c read_requests)
echo 3 >/proc/sys/vm/drop_caches
assert_same "$T/g" "$C/g"
[ "$(ctr c read_requests)" -gt "$rd0" ] || fail "no READ reached c's daemon with passthrough=off"
eventually 10 ls_has "$C" f
assert_same "$T/f" "$C/f" # fetched from a: no direct I/O either
assert_eq 0 "$(ctr c passthrough_opens)" "passthrough opens on c"
assert_eq 0 "$(ctr c direct_io_opens)" "direct-I/O opens on c"
assert_eq 0 "$(ctr c backing_ids_open)" "backing ids on c"
