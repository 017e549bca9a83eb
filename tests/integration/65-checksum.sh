#!/bin/bash
# A holder whose copy went bad (one byte flipped in its shared memory, as
# bit rot or a stray write would do) serves bytes that do not match the
# object's checksum.  The fetching node must notice, for a small object
# (fetched inside open()) and for a big one (fetched in ranges, checksummed
# as the bytes arrive): reads get EIO, the copy is discarded (the store
# gives its pages back), the node does not become a holder, and the
# failure is counted (for a block, against the holder that sent it:
# issue 22).  Once the holder's bytes are right again, the next
# open fetches afresh and gets the right bytes.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=128M"
mount_objfs b "$REDIS_URL" "capacity=128M"
A=$(mnt_of a)
B=$(mnt_of b)
DATA=$(store_of a)/data

# flip FILE [COPY]: flip (xor 0xff) the byte in the middle of a's copy of
# FILE: the file in a's store that holds the same bytes, or COPY.  Prints
# the copy's path.  Flipping twice restores the byte.
flip() {
	timeout -k 5 60 python3 - "$DATA" "$@" <<'PY'
import mmap, os, sys
data_dir, src = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
if len(sys.argv) > 3:
    copy = sys.argv[3]
else:
    copy = None
    for name in os.listdir(data_dir):
        path = os.path.join(data_dir, name)
        if len(name) == 16 and os.path.getsize(path) == len(data):
            with open(path, "rb") as f:
                if f.read() == data:
                    copy = path
    if copy is None:
        sys.exit("no file in the store holds the object's bytes")
fd = os.open(copy, os.O_RDWR)
m = mmap.mmap(fd, os.fstat(fd).st_size)
m[len(data) // 2] ^= 0xFF
m.flush()
print(copy)
PY
}

n=0
for size in 100000 $((40 << 20)); do
	n=$((n + 1))
	step "object of $size bytes, a's copy corrupted"
	mkdata "$T/o$n" "$size"
	cp "$T/o$n" "$A/o$n"
	at=$(flip "$T/o$n") || fail "could not corrupt a's copy of o$n"
	eventually 10 ls_has "$B" "o$n"
	used0=$(status_of b used)

	assert_fails_with 'Input/output error' sh -c 'cat "$1" >/dev/null' cat "$B/o$n"
	assert_eq "$n" "$(status_of b checksum_failures)" "checksum failures counted on b"
	# a whole-object mismatch blames no one; a block's (issue 22: the
	# big object's record has block sums) blames its sender
	if [ "$n" = 1 ]; then
		assert_eq - "$(status_of b checksum_failures_by_peer)" "peers blamed on b"
	else
		assert_eq a=1 "$(status_of b checksum_failures_by_peer)" "peers blamed on b"
	fi
	assert_eq a "$(xattr "$B/o$n" user.objfs.locations)" "holders after the failed fetch"
	# the failed fetch leaves the table and gives its pages back after
	# its reader got EIO
	eventually 10 fetch_state_is "$B/o$n" '^remote '
	eventually 10 status_is b used "$used0"
	assert_match "checksum|discarding" "$(cat "$(log_of b)")" "b's log says why"

	step "a's copy repaired: the next open fetches it again, byte-exact"
	flip "$T/o$n" "$at" >/dev/null || fail "could not repair a's copy of o$n"
	assert_ok cmp "$T/o$n" "$B/o$n"
	eventually 10 fetch_state_is "$B/o$n" '^local '
	assert_eq "$n" "$(status_of b checksum_failures)" "no new checksum failure"
done
