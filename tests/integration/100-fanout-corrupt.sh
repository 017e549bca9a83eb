#!/bin/bash
# Issue 22: a partial holder that serves a corrupted block.  Five nodes,
# each serving at most 32 MiB/s; a writes a 128 MiB object (16 blocks).
# b runs with the test hook test_corrupt_serve: every range it serves of
# the object while it is still fetching it goes out with its first byte
# flipped (its own copy stays right).  b starts reading first, so that
# it holds verified blocks when c, d and e start reading at once and
# find it as a fetcher.  Then:
#   - b did serve corrupted bytes (its log names each range and peer);
#   - every peer b sent one to blamed b for it (checksum_failures_by_peer
#     names b, at most as often as b sent it bad ranges), and nobody
#     blamed anyone else: no bad block was served onward by c, d or e;
#   - every reader, b too, read the object byte for byte, and its copy
#     in the store is the object's bytes (read again, locally);
#   - afterwards no node is left advertised as fetching it, and no store
#     holds a pending object.
# It would catch: a block checked after it was served or handed to
# readers, a failed block kept or served onward, a failure not blamed
# on its sender, a fetch that fails instead of fetching the block again.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"
mount_objfs b "$REDIS_URL" "capacity=256M,serve_bwlimit=32M,test_corrupt_serve"
for n in c d e; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"; done
put_object a big $((128 << 20)) b c d e
assert_match '^23:[0-9a-f]{256}$' "$(rcli HGET "{objfs}:x:$OBJ_ID" bsum)" "16 block sums of big"

step "b starts reading first"
cat_bg b big
# two fetches of 8 MiB run at once: 32 MiB in place is two whole blocks
wait_fetched "$(mnt_of b)/big" $((32 << 20))
step "b has $(fetched_bytes "$(mnt_of b)/big") bytes in place; c, d and e read at once"
for n in c d e; do cat_bg "$n" big; done
cat_wait b c d e
for n in b c d e; do cat_read "$n" "$OBJ_SHA"; done

step "b served corrupted ranges, and their receivers blamed b"
grep 'test_corrupt_serve: object' "$(log_of b)" >"$T/corrupted" || true
sent=$(wc -l <"$T/corrupted")
[ "$sent" -ge 1 ] || fail "b served no corrupted range (the test proves nothing): $(status_of b served_bytes) bytes served"
sed 's/^/  /' "$T/corrupted" >&2
[ "$(status_of b served_bytes)" -gt 0 ] || fail "b's served_bytes is 0 although it logged corrupted ranges"
blamed=0
for n in c d e; do
	by=$(status_of "$n" checksum_failures_by_peer)
	fails=$(status_of "$n" checksum_failures)
	to_n=$(grep -c "sent to '$n'\$" "$T/corrupted" || true)
	step "$n: checksum_failures $fails, by peer: $by; b sent it $to_n corrupted ranges"
	# every failure was a block from b, and none came from anyone else
	assert_match '^(-|b=[0-9]+)$' "$by" "peers $n blamed"
	k=$(sed -n 's/^b=//p' <<<"$by")
	k=${k:-0}
	assert_eq "$fails" "$k" "checksum failures on $n against those blamed on b"
	assert_le "$k" "$to_n" "blocks $n blamed on b, against the corrupted ranges b sent it"
	if [ "$to_n" -gt 0 ] && [ "$k" -lt 1 ]; then
		fail "b sent $n $to_n corrupted ranges and $n blamed it for none"
	fi
	blamed=$((blamed + k))
done
[ "$blamed" -ge 1 ] || fail "nobody blamed b for the $sent corrupted ranges it sent"
assert_eq 0 "$(status_of b checksum_failures)" "checksum failures on b"

step "every copy is the object's bytes"
for n in b c d e; do
	eventually 10 fetch_state_is "$(mnt_of "$n")/big" '^local '
	assert_eq "$OBJ_SHA" "$(sha256_of "$(mnt_of "$n")/big")" "sha256 of $n's copy"
done
assert_eq "$OBJ_SHA" "$(sha256_of "$(mnt_of a)/big")" "sha256 of a's copy"

step "afterwards: no fetcher entry in Redis, nothing pending"
eventually 10 [ -z "$(fan_entries "$OBJ_ID")" ]
for n in a b c d e; do eventually 10 status_is "$n" pending 0; done
