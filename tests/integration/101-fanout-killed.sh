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

need cmp getfattr
start_redis
for n in a b c d e; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"; done
size=$((128 << 20))
block=$((8 << 20))
mkdata "$T/big" "$size"
want=$(sha256_of "$T/big")
cp "$T/big" "$(mnt_of a)/big"
for n in b c d e; do eventually 10 ls_has "$(mnt_of "$n")" big; done
id=$(rcli HGET '{objfs}:d:1' big | sed -n 's/^f\([0-9]*\) .*/\1/p')
[ -n "$id" ] || fail "no directory entry for big"

# read_bg NODE: cat big on NODE in the background, into $T/got.NODE
pids=()
read_bg() {
	(
		rc=0
		timeout -k 5 120 cat "$(mnt_of "$1")/big" >"$T/got.$1" 2>"$T/err.$1" || rc=$?
		echo "$rc" >"$T/rc.$1"
	) &
	pids+=("$!")
}

# fetched_of NODE: bytes of NODE's fetch of big in place so far
fetched_of() { xattr "$(mnt_of "$1")/big" user.objfs.fetch | awk '{ print ($1 == "fetching") ? $2 : 0 }'; }

step "b starts reading first"
read_bg b
b_pid=$!
# two fetches of 8 MiB run at once: 32 MiB in place is two whole blocks
for ((i = 0; i < 300; i++)); do
	[ "$(fetched_of b)" -lt $((32 << 20)) ] || break
	sleep 0.05
done
got=$(fetched_of b)
[ "$got" -ge $((32 << 20)) ] || fail "b's fetch did not get 32 MiB within 15 s (at $got)"
step "b has $got bytes in place; c, d and e read at once"
for n in c d e; do read_bg "$n"; done

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
[ "$served" -gt 0 ] && [ $((served % block)) -ne 0 ] ||
	fail "b never was in the middle of sending a block within 8 s (served $served bytes)"
kill_node b KILL
step "killed b with $served bytes served, its own fetch at: $state"
assert_match '^fetching ' "$state" "b's own fetch when it was killed (else b was no partial holder)"

for p in "${pids[@]}"; do
	[ "$p" = "$b_pid" ] || wait "$p" || true
done
for n in c d e; do
	assert_eq 0 "$(cat "$T/rc.$n")" "cat on $n ($(cat "$T/err.$n"))"
	assert_eq "$want" "$(sha256_of "$T/got.$n")" "sha256 of what $n read"
	rm -f "$T/got.$n"
done
wait "$b_pid" || true

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
	assert_eq "$want" "$(sha256_of "$(mnt_of "$n")/big")" "sha256 of $n's copy"
done

step "afterwards: no entry of a survivor in Redis, nothing pending on the live nodes"
eventually 10 [ -z "$(rcli HKEYS "{objfs}:o:$id" | grep -E '^~p:[^b]' || true)" ]
for n in a c d e; do eventually 10 status_is "$n" pending 0; done
umount -l "$(mnt_of b)" 2>/dev/null || true
