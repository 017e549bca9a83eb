#!/bin/bash
# Changes on one node reach the others through Redis pub/sub:
#   - a delete on a is seen on b at once (its kernel cache is dropped), and
#     b frees its copy once no reader has it open (a reader keeps reading);
#   - a rename on a is seen on b;
#   - a replace (allow_overwrite) on a gives b the new bytes.
# Eviction: with a small store, replicas are evicted least recently used
# first, never the last copy, and every object stays readable somewhere.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M,allow_overwrite"
mount_objfs b "$REDIS_URL" "capacity=24M"
A=$(mnt_of a)
B=$(mnt_of b)

step "a delete on a is seen on b, and b's copy goes when its reader closes"
mkdata "$T/d" $((4 << 20))
cp "$T/d" "$A/d"
eventually 10 ls_has "$B" d
assert_ok cmp "$T/d" "$B/d"			# b holds a copy now, and caches the name
stat "$B/d" >/dev/null
did=$(xattr "$B/d" user.objfs.id)
used0=$(status_of b used)
start_reader r1 "$B/d"
rm "$A/d"
# the kernel's entry on b was invalidated: not there at once (no 1 h cache)
eventually 3 bash -c "! ls -A '$B' | grep -qx d"
assert_absent "$B/d"
assert_eq "$(sha256_of "$T/d")" "$(release_reader r1)" "a reader of the deleted object on b"
eventually 10 bash -c "[ \"\$(getfattr --only-values -n user.objfs.status '$B' | awk '/^used:/ {print \$2}')\" -lt $used0 ]"
assert_eq 0 "$(rec_exists "$did")" "the record (and holders) of the deleted object"

step "a rename on a is seen on b"
mkdata "$T/r" 10000
cp "$T/r" "$A/r"
eventually 10 ls_has "$B" r
assert_ok cmp "$T/r" "$B/r"
mv "$A/r" "$A/r2"
eventually 3 bash -c "[ ! -e '$B/r' ] && [ -e '$B/r2' ]"
assert_ok cmp "$T/r" "$B/r2"

step "a replace on a gives b the new bytes"
mkdata "$T/v1" 5000
mkdata "$T/v2" 7000
cp "$T/v1" "$A/v"
eventually 10 ls_has "$B" v
assert_ok cmp "$T/v1" "$B/v"
cp "$T/v2" "$A/v"
eventually 3 cmp -s "$T/v2" "$B/v"
assert_eq 7000 "$(stat -c %s "$B/v")" "size of the replaced object on b"

step "eviction: b (24 MiB) reads 10 objects of 4 MiB"
for i in $(seq 1 10); do
	mkdata "$T/e$i" $((4 << 20))
	cp "$T/e$i" "$A/e$i"
done
for i in $(seq 1 10); do
	eventually 10 ls_has "$B" "e$i"
	assert_ok cmp "$T/e$i" "$B/e$i"
done
ev=$(status_of b evictions)
[ "$ev" -ge 4 ] || fail "b evicted $ev objects, expected at least 4"
step "b evicted $ev replicas; the newest stay on b"
# (the fetch of e10 leaves the table after its reader got the bytes)
eventually 10 fetch_state_is "$B/e10" '^local '
assert_match '^remote ' "$(xattr "$B/e1" user.objfs.fetch)" "e1 on b (least recently used)"
for i in $(seq 1 10); do
	assert_match 'a' "$(xattr "$A/e$i" user.objfs.locations)" "holders of e$i"
	assert_ok cmp "$T/e$i" "$B/e$i"
done

step "the last copy is never evicted: b's own objects stay, writes get ENOSPC"
umount_objfs b || fail "unmount b"
mount_objfs b "$REDIS_URL" "capacity=24M"
for i in 1 2 3 4 5; do
	mkdata "$T/own$i" $((4 << 20))
	cp "$T/own$i" "$B/own$i"
done
mkdata "$T/eight" $((8 << 20))
assert_fails_with 'No space left' cp "$T/eight" "$B/own-too-much"
for i in 1 2 3 4 5; do assert_ok cmp "$T/own$i" "$B/own$i"; done
assert_match '^b$' "$(xattr "$B/own1" user.objfs.locations)" "holders of b's own object"
