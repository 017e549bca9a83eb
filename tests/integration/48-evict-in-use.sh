#!/bin/bash
# Eviction never pulls the bytes out from under a reader or a live mmap
# (issue 10).  Node b (capacity 48M) holds fetched copies of 10 MiB
# objects; e1 is held by a reader (an open descriptor) and a python
# mmap, e2 by a mmap alone (its descriptor closed), both passthrough
# opens when passthrough is on (counter).  Then b reads six more objects
# and must evict to make room:
#   - it evicts (counter), but never e1, held open: it stays local on b
#     (user.objfs.fetch) while held; nor e2 without passthrough (the
#     kernel holds a FUSE mapping's handle until munmap).  With
#     passthrough a mapping maps the store's file itself and the kernel
#     lets the handle go at close(2): the daemon cannot see that e2 is in
#     use and may evict it;
#   - the reader and the mappings still get every byte, exactly (an
#     evicted e2 too: its file must not be given to the objects fetched
#     next);
#   - every object still reads right on b;
#   - once released, e1 and e2 may go like any other copy: reading the
#     others again evicts them (the holds were let go, not leaked).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

# the passthrough lines of the status report (issue 10): their keys, here only
PT_MODE=passthrough # "on", "off (why)", "unavailable (why)"
PT_OPENS=passthrough_opens # opens that the kernel serves from the store file

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=48M"
A=$(mnt_of a)
B=$(mnt_of b)
pt=$(passthrough_mode b "$PT_MODE")
step "passthrough on b: $pt ($(status_of b "$PT_MODE"))"

for i in $(seq 1 8); do
	mkdata "$T/e$i" $((10 << 20))
	cp "$T/e$i" "$A/e$i"
done
for i in $(seq 1 8); do eventually 10 ls_has "$B" "e$i"; done

# local_on_b FILE: b holds its own copy of FILE
local_on_b() { xattr "$B/$1" user.objfs.fetch | grep -q '^local '; }

step "b fetches e1 and e2; a reader and a mapping hold e1, a mapping alone holds e2"
assert_ok cmp "$T/e1" "$B/e1"
assert_ok cmp "$T/e2" "$B/e2"
# (a fetch leaves the table after its reader got the bytes)
eventually 10 local_on_b e1
eventually 10 local_on_b e2
if [ "$pt" = on ]; then
	eventually 10 opens_in_passthrough b "$B/e1" "$PT_OPENS"
	eventually 10 opens_in_passthrough b "$B/e2" "$PT_OPENS"
	opens=$(status_of b "$PT_OPENS")
fi
start_reader r1 "$B/e1"
start_mapper m1 "$B/e1"
start_mapper m2 "$B/e2"
if [ "$pt" = on ]; then
	assert_le $((opens + 3)) "$(status_of b "$PT_OPENS")" "$PT_OPENS on b after the three holders' opens"
fi

step "b reads e3..e8: it must evict, but not e1 (nor e2 without passthrough)"
ev0=$(status_of b evictions)
for i in $(seq 3 8); do
	assert_ok cmp "$T/e$i" "$B/e$i"
	local_on_b e1 || fail "e1, held open and mapped, was evicted (after reading e$i)"
	[ "$pt" = on ] || local_on_b e2 || fail "e2, held by a mapping, was evicted (after reading e$i)"
done
ev=$(status_of b evictions)
[ "$ev" -ge $((ev0 + 3)) ] || fail "b evicted $((ev - ev0)) copies reading e3..e8, expected at least 3"
step "b evicted $((ev - ev0)) copies; e1 stayed; e2: $(xattr "$B/e2" user.objfs.fetch); b's store: $(xattr "$B" user.objfs.status | grep -E "^(used|pool|files_[a-z]+):" | tr "\n" " ")"

step "the reader and the mappings got every byte"
assert_eq "$(sha256_of "$T/e1")" "$(release_reader r1)" "sha256 read by e1's reader"
assert_eq "$(sha256_of "$T/e1")" "$(release_reader m1)" "sha256 of e1's mapping"
assert_eq "$(sha256_of "$T/e2")" "$(release_reader m2)" "sha256 of e2's mapping"
for i in $(seq 1 8); do assert_ok cmp "$T/e$i" "$B/e$i"; done

step "released, e1 and e2 are evicted like any other copy"
# evicted_both: read e3..e8 again (their copies come and go); e1 and e2,
# now least recently used, must be gone
evicted_both() {
	local i
	for i in $(seq 3 8); do cmp -s "$T/e$i" "$B/e$i" || echo "e$i differs on b"; done
	if local_on_b e1 || local_on_b e2; then
		echo "e1: $(xattr "$B/e1" user.objfs.fetch); e2: $(xattr "$B/e2" user.objfs.fetch)"
		return 1
	fi
}
eventually 30 evicted_both
assert_ok cmp "$T/e1" "$B/e1"
assert_ok cmp "$T/e2" "$B/e2"

[ "$pt" != absent ] ||
	skip "objfsd has no passthrough (no '$PT_MODE:' line in its status): the checks of every mode passed, the passthrough ones were not run"
