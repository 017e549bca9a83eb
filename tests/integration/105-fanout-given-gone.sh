#!/bin/bash
# Issue 22, given out: a sealed holder sends each block once to fan-out
# fetches and tells a later fetcher to ask the one it gave the block to.
# When that one is gone, the later fetcher must still get every block:
# a block that every holder gave out and that no fetcher it knows has or
# fetches is asked of a holder plainly after fanpick's given_ms (2 s);
# io_timeout=30000 makes the wait meant for a live fetcher (5 x
# io_timeout) 150 s, so that only the short one fits the bound below.
# (Without given_ms the holder's own memory of what it gave out, 10 s,
# bounded it: c's read took about 12 s rather than 6; that difference is
# timing, printed here, not asserted.)
#
# a writes a 32 MiB object (4 blocks); b reads it (a gives b every
# block) and unmounts; c then reads it at once.  c's copy is byte-exact,
# within 60 s; a refused c at least once as "given out" (checked when
# less than 8 s passed between b's read and c's: a forgets after 10 s).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

start_redis
for n in a b c; do mount_objfs "$n" "$REDIS_URL" "capacity=128M,io_timeout=30000"; done
put_object a big $((32 << 20)) b c

step "b reads it, then goes away"
assert_eq "$OBJ_SHA" "$(sha256_of "$(mnt_of b)/big")" "the bytes b read"
t_read=$(date +%s)
umount_objfs b || fail "unmounting b failed"

step "c reads it: every block was given out to b, who is gone"
refused0=$(status_of a given_refused)
rc=0
sum=$(timeout -k 5 60 sha256sum "$(mnt_of c)/big" | cut -d' ' -f1) || rc=$?
assert_eq 0 "$rc" "c's read (within 60 s)"
echo "(c's read ended $(($(date +%s) - t_read)) s after b's)"
assert_eq "$OBJ_SHA" "$sum" "the bytes c read"
if [ $(($(date +%s) - t_read)) -lt 8 ]; then
	assert_le $((refused0 + 1)) "$(status_of a given_refused)" "a's fan-out GETs refused as given out"
else
	echo "(more than 8 s passed since b's read: a may have forgotten what it gave out; not checking its refusals)"
fi
eventually 10 [ -z "$(fan_entries "$OBJ_ID")" ]
