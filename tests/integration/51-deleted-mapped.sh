#!/bin/bash
# A deleted object that a process still maps holds store memory, and objfs
# says so (issue 19).  Node b (capacity 256M) writes x (150 MiB); a python
# mmap maps all of it, touches every page and closes its descriptor; then
# x is deleted.  With passthrough the mapping maps the store's file
# itself and the kernel let the daemon's handle go at close(2): only the
# store's tmpfs still knows of the pages.  Without passthrough the kernel
# holds the FUSE handle until munmap, and so the daemon holds the object.
# Either way:
#   - `objfs status` counts the pages as draining (and as used, once);
#     draining_mapped is the part the daemon holds no reference on;
#   - df's used includes them;
#   - a 200 MiB write to b, which cannot fit beside them, fails with
#     ENOSPC, and so does a fetch of a 200 MiB object from node a; the log
#     lines name what holds the room;
#   - once the mapping goes, draining is 0 again and the fetch fits.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr df dd
start_redis
mount_objfs a "$REDIS_URL" "capacity=512M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)
pt=$(passthrough_mode b passthrough)
step "passthrough on b: $pt ($(status_of b passthrough))"

MiB=$((1 << 20))
X=$((150 * MiB))
HELD='1[5-9][0-9] MiB held by deleted objects still mapped or open'
NOSPC='No space left on device'

df_used() { df -B1 --output=used "$1" | tail -n 1 | tr -d ' '; }
# st KEY: a field of b's status report
st() { status_of b "$1"; }

mkdata "$T/y" $((200 * MiB))
cp "$T/y" "$A/y"
eventually 10 ls_has "$B" y
mkdata "$T/x" "$X"
cp "$T/x" "$B/x"

step "x is mapped whole, then deleted"
[ "$pt" != on ] || eventually 10 opens_in_passthrough b "$B/x" passthrough_opens
start_mapper m "$B/x" all
assert_eq 0 "$(st draining)" "draining: while x has a name"
rm "$B/x"

step "objfs status and df count the mapped pages of deleted x"
# held_counted: for eventually (in passthrough the store lets go of x as
# soon as the unlink drops its last reference)
held_counted() {
	local d
	d=$(st draining)
	[ "$d" -ge "$X" ] || { echo "draining: $d, expected >= $X"; return 1; }
}
eventually 10 held_counted
used=$(st used)
assert_le "$X" "$used" "used: with x deleted but mapped"
assert_le "$used" $((X + 8 * MiB)) "used: x counted once"
assert_match '^[0-9]+$' "$(st draining_mapped)" "draining_mapped:"
if [ "$pt" = on ]; then
	assert_le "$X" "$(st draining_mapped)" "draining_mapped: (the kernel maps the store's file)"
fi
assert_le "$X" "$(df_used "$B")" "df used: with x deleted but mapped"
step "b: $(xattr "$B" user.objfs.status | grep -E '^(used|draining|draining_mapped|pool):' | tr '\n' ' ')"

step "a 200 MiB write to b fails with ENOSPC, and the log names what holds the room"
mkdata "$T/w" $((200 * MiB))
assert_fails_with "$NOSPC" dd if="$T/w" of="$B/w" bs=1M status=none
assert_absent "$B/w"
grep -E "store full.*$HELD" "$(log_of b)" >/dev/null ||
	fail "no log line of b names the room held by x: $(grep -iE 'full|room|ENOSPC|space' "$(log_of b)" | tail -n 5)"

step "a fetch of the 200 MiB y to b fails with ENOSPC, and the log names what holds the room"
assert_fails_with "$NOSPC" cat "$B/y"
grep -E "no room.*$HELD" "$(log_of b)" >/dev/null ||
	fail "no log line of b names the room held by x for the fetch: $(grep -iE 'room|evict|space|y' "$(log_of b)" | tail -n 5)"

step "the mapping goes: draining is 0 and y fits"
assert_eq "$(sha256_of "$T/x")" "$(release_reader m)" "sha256 of the mapping of deleted x"
# drained: for eventually
drained() {
	local d
	d=$(st draining)
	[ "$d" = 0 ] || { echo "draining: $d"; return 1; }
}
eventually 20 drained
assert_le "$(df_used "$B")" $((8 * MiB)) "df used: after the mapping went"
assert_ok cmp "$T/y" "$B/y"
