#!/bin/bash
# Eviction that cannot help does not happen:
#   - opening an object bigger than this node's whole store fails at once
#     with EFBIG, and every replica the node holds stays;
#   - one that fits the store but not even with every replica given up
#     (the rest is this node's own objects) fails with ENOSPC, and every
#     replica stays;
#   - neither does a corrupt record that claims a huge size;
#   - one that eviction can make room for evicts and is read byte-exact.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=24M"
A=$(mnt_of a)
B=$(mnt_of b)

step "b holds 2 replicas of 4 MiB and 3 objects of its own of 4 MiB"
for i in 1 2; do
	mkdata "$T/r$i" $((4 << 20))
	cp "$T/r$i" "$A/r$i"
	eventually 10 ls_has "$B" "r$i"
	assert_same "$T/r$i" "$B/r$i"
	# a replica once its fetch is over (after its reader got the bytes)
	eventually 10 fetch_state_is "$B/r$i" '^local '
done
for i in 1 2 3; do
	mkdata "$T/own$i" $((4 << 20))
	cp "$T/own$i" "$B/own$i"
done
used0=$(status_of b used)

step "an object bigger than b's store: EFBIG, nothing evicted"
mkdata "$T/huge" $((32 << 20))
cp "$T/huge" "$A/huge"
eventually 10 ls_has "$B" huge
assert_errno EFBIG 'open(A[0]).read(1)' "$B/huge"
assert_eq 0 "$(status_of b evictions)" "evictions on b"
assert_eq "$used0" "$(status_of b used)" "bytes used on b"
for i in 1 2; do
	assert_match '^local ' "$(xattr "$B/r$i" user.objfs.fetch)" "r$i on b"
	assert_match 'b' "$(xattr "$A/r$i" user.objfs.locations)" "holders of r$i"
done
grep -q "more than this node's whole store" "$(log_of b)" || fail "no log line for the oversized object"

step "an object eviction cannot make room for: ENOSPC, nothing evicted"
# 24 MiB: 20 used (8 of replicas), 4 free; 14 MiB would need 10 more
mkdata "$T/big" $((14 << 20))
cp "$T/big" "$A/big"
eventually 10 ls_has "$B" big
assert_errno ENOSPC 'open(A[0]).read(1)' "$B/big"
assert_eq 0 "$(status_of b evictions)" "evictions on b"
for i in 1 2; do
	assert_match '^local ' "$(xattr "$B/r$i" user.objfs.fetch)" "r$i on b"
	assert_match 'b' "$(xattr "$A/r$i" user.objfs.locations)" "holders of r$i"
	assert_same "$T/r$i" "$B/r$i"
done

step "a corrupt record claiming 1000 GiB: refused, nothing evicted"
mkdata "$T/liar" 4096
cp "$T/liar" "$A/liar"
lid=$(xattr "$A/liar" user.objfs.id)
# the directory entry carries the size (layout 2: the record leads there)
entry=$(rcli HGET '{objfs}:d:1' liar)
rcli HSET '{objfs}:d:1' liar "$(awk '{ $2 = "1073741824000"; print }' <<<"$entry")" >/dev/null
# before b lists it: a listing hands b the attributes it has then
eventually 10 ls_has "$B" liar
assert_errno 'EFBIG|EIO' 'open(A[0]).read(1)' "$B/liar"
assert_eq 0 "$(status_of b evictions)" "evictions on b"
for i in 1 2; do assert_match '^local ' "$(xattr "$B/r$i" user.objfs.fetch)" "r$i on b"; done

step "an object eviction can make room for: both replicas go, it is read"
mkdata "$T/fits" $((10 << 20))
cp "$T/fits" "$A/fits"
eventually 10 ls_has "$B" fits
assert_same "$T/fits" "$B/fits"
assert_eq 2 "$(status_of b evictions)" "evictions on b"
for i in 1 2 3; do assert_same "$T/own$i" "$B/own$i"; done
for i in 1 2; do assert_same "$T/r$i" "$B/r$i"; done	# from a again
