#!/bin/bash
# Issue 19, item 2: a writable shared mapping of a new file, written after
# the descriptor is closed and then unmapped (open, ftruncate, mmap,
# close, memset, munmap), loses nothing: the object is sealed when the
# last mapping goes, with the bytes written through it, and every node
# reads them.  A C program, since Python's mmap keeps a duplicate of the
# descriptor.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

MAPWRITE=$OBJFS_BUILD/tests/objfs-mapwrite
need_built "$MAPWRITE"
need cmp
start_redis
mount_objfs a "$REDIS_URL" "capacity=128M"
mount_objfs b "$REDIS_URL" "capacity=128M"
A=$(mnt_of a)
B=$(mnt_of b)

for size in 65536 4194304; do
	step "$size bytes written through a mapping after close"
	capture 60 "$MAPWRITE" "$A/m$size" "$size" y || fail "objfs-mapwrite: $CAPTURED"
	head -c "$size" /dev/zero | tr '\0' y >"$T/want$size"
	cmp "$T/want$size" "$A/m$size" || fail "node a reads other bytes than were written"
	cmp "$T/want$size" "$B/m$size" || fail "node b reads other bytes than were written"
	assert_eq 0444 "$(stat -c %a "$A/m$size" | sed 's/^/0/')" "mode of the sealed object"
done
assert_no_match 'sealed object' "$(cat "$(log_of a)")" "node a's log"
