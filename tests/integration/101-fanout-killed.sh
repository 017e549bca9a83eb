#!/bin/bash
# Issue 22: a partial holder killed mid-fetch.  Five nodes, each serving
# at most 32 MiB/s; a writes a 128 MiB object.  b starts reading first;
# once it holds verified blocks, c, d and e read at once and fetch
# blocks from b too.  While b is sending them a block (its served bytes
# stand between two block boundaries) and is still fetching the object
# itself, b's daemon is killed (SIGKILL).  Then:
#   - c, d and e each read the object byte for byte: the blocks b was
#     sending them are fetched again, whole, from another source;
#   - a dead sender is not taken for a bad one: no checksum failure and
#     no peer blamed on c, d or e;
#   - afterwards none of them is left advertised as fetching it, and no
#     store of the live nodes holds a pending object.
# It would catch: a fetch that fails (or hangs) when a partial source
# dies, a block cut short by the death kept as if whole, a death counted
# as corruption, entries or pending objects left by the survivors.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need getfattr
start_redis
for n in a b c d e; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"; done
block=$((8 << 20))
put_object a big $((128 << 20)) b c d e

step "b starts reading first"
cat_bg b big
# two fetches of 8 MiB run at once: 32 MiB in place is two whole blocks
wait_fetched "$(mnt_of b)/big" $((32 << 20))
step "b has $(fetched_bytes "$(mnt_of b)/big") bytes in place; c, d and e read at once"
for n in c d e; do cat_bg "$n" big; done

# kill b while it is sending a block: its served bytes are not a whole
# number of blocks (a piece is counted just before it is sent), and its
# own fetch still runs
served=0
for ((i = 0; i < 400; i++)); do
	served=$(status_of b served_bytes)
	[ "$served" -eq 0 ] || [ $((served % block)) -eq 0 ] || break
	sleep 0.02
done
state=$(xattr "$(mnt_of b)/big" user.objfs.fetch)
if [ "$served" -eq 0 ] || [ $((served % block)) -eq 0 ]; then
	fail "b never was in the middle of sending a block within 8 s (served $served bytes)"
fi
kill_node b KILL
step "killed b with $served bytes served, its own fetch at: $state"
assert_match '^fetching ' "$state" "b's own fetch when it was killed (else b was no partial holder)"

cat_wait c d e b
for n in c d e; do cat_read "$n" "$OBJ_SHA"; done

step "nobody took b's death for corruption"
failed_b=0
for n in c d e; do
	assert_eq 0 "$(status_of "$n" checksum_failures)" "checksum failures on $n"
	assert_eq - "$(status_of "$n" checksum_failures_by_peer)" "peers blamed on $n"
	k=$(grep -c "fetcher 'b' .* at offset" "$(log_of "$n")" || true)
	step "$n: $k blocks from b failed, $(status_of "$n" failovers) failovers"
	failed_b=$((failed_b + k))
done
# the kill landed mid-block: someone lost a block from b and got it elsewhere
[ "$failed_b" -ge 1 ] || fail "no reader lost a block from b (b died between blocks: the test proves nothing)"

step "every survivor's copy is the object's bytes"
for n in c d e; do
	eventually 10 fetch_state_is "$(mnt_of "$n")/big" '^local '
	assert_eq "$OBJ_SHA" "$(sha256_of "$(mnt_of "$n")/big")" "sha256 of $n's copy"
done

step "afterwards: no entry of a survivor in Redis, nothing pending on the live nodes"
# (b's own entry is 103-fanout-fetcher-crash's)
eventually 10 [ -z "$(fan_entries "$OBJ_ID" | tr ' ' '\n' | grep -vE '^(~p:b=|index:b$)' || true)" ]
for n in a c d e; do eventually 10 status_is "$n" pending 0; done
umount -l "$(mnt_of b)" 2>/dev/null || true
