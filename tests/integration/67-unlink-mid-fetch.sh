#!/bin/bash
# An unlink on the only holder while another node is fetching the object:
#   - the reader on b that has the file open reads every byte, exactly,
#     from a's deleted copy (a keeps serving a fetch that began before
#     the delete);
#   - a new open of the name, on either node, gets ENOENT at once;
#   - b's copy goes when its reader closes, and a's pages go once b has
#     stopped asking for them (status "used" comes back down, "draining"
#     to 0);
#   - if b dies mid-fetch after the delete, a frees the pages anyway, in
#     bounded time.
# a serves at 32 MiB/s so that the fetch of 256 MiB takes about 8 s: the
# delete always lands while it runs.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=640M,serve_bwlimit=32M"
mount_objfs b "$REDIS_URL" "capacity=640M"
A=$(mnt_of a)
B=$(mnt_of b)
size=$((256 << 20))

# fetched_of FILE: bytes of FILE's fetch in place so far (0 if none)
fetched_of() { xattr "$1" user.objfs.fetch | awk '{ print ($1 == "fetching") ? $2 : 0 }'; }

# status_at_most NAME KEY MAX, status_above NAME KEY MIN: for eventually
status_at_most() {
	local v
	v=$(status_of "$1" "$2")
	[ "$v" -le "$3" ] || { echo "$1: $2 is $v, more than $3"; return 1; }
}
status_above() {
	local v
	v=$(status_of "$1" "$2")
	[ "$v" -gt "$3" ] || { echo "$1: $2 is $v, not above $3"; return 1; }
}

step "b opens a 256 MiB object held only by a and reads its head"
mkdata "$T/obj" "$size"
cp "$T/obj" "$A/obj"
eventually 10 ls_has "$B" obj
used_a0=$(status_of a used)
used_b0=$(status_of b used)
start_reader r1 "$B/obj"
state=$(xattr "$B/obj" user.objfs.fetch)
step "fetch state on b before the delete: $state"
assert_match '^fetching ' "$state" "the fetch on b is still running (else the test proves nothing)"

step "a deletes it while b's fetch runs"
rm "$A/obj"
assert_errno ENOENT 'open(A[0])' "$A/obj"
eventually 5 bash -c "! ls -A '$B' | grep -qx obj"
assert_errno ENOENT 'open(A[0])' "$B/obj"
draining=$(status_of a draining)
step "a: used $(status_of a used), draining $draining"

step "b's reader reads the whole object from its open file"
assert_eq "$(sha256_of "$T/obj")" "$(release_reader r1)" "sha256 read by b's reader"
[ "${draining:-0}" -gt 0 ] || fail "a did not count the deleted copy it served as draining ($draining)"
assert_eq 0 "$(status_of b fetches_failed)" "failed fetches on b"
assert_errno ENOENT 'open(A[0])' "$B/obj"

step "b's copy goes with its reader, a's pages once b stopped fetching"
eventually 10 status_at_most b used "$used_b0"
assert_eq 0 "$(status_of b draining)" "draining bytes on b"
eventually 40 status_at_most a used $((used_a0 - size))
assert_eq 0 "$(status_of a draining)" "draining bytes on a"
assert_eq 0 "$(status_of a objects)" "objects on a"

step "b dies mid-fetch after the delete: a frees the pages anyway"
mkdata "$T/obj2" $((128 << 20))
cp "$T/obj2" "$A/obj2"
eventually 10 ls_has "$B" obj2
used_a1=$(status_of a used)
start_reader r2 "$B/obj2"
[ "$(fetched_of "$B/obj2")" -gt 0 ] || fail "the fetch of obj2 on b is not running"
rm "$A/obj2"
eventually 5 status_above a draining 0
kill_node b KILL
t0=$(now)
eventually 40 status_at_most a used $((used_a1 - (128 << 20)))
step "a freed the pages $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s after b died"
assert_eq 0 "$(status_of a draining)" "draining bytes on a after b died"
umount -l "$B" 2>/dev/null || true
