#!/bin/bash
# Issue 22: a fetcher crashes mid-broadcast.  Four nodes, each serving at
# most 32 MiB/s; a writes a 128 MiB object; b, c and d read it at once,
# and b's daemon is killed (SIGKILL) while every fetch runs: its entry
# as a fetcher (~p:b in the object's record, with a deadline) stays
# behind in Redis, and its store keeps the half-fetched object's file.
# Then:
#   - c and d read the object byte for byte all the same;
#   - once the entry's deadline (on Redis's clock, read from the entry)
#     has passed, no ~p:b field is left in the object's record, nor any
#     other fetcher entry;
#   - b mounted again (as after a crash: same name, same store) has
#     nothing pending, no file of the object in its store, no copy of
#     it, and is not listed as a holder; its entry does not come back.
# It would catch: an entry that outlives its deadline (nothing removes
# it once no fetch of the object runs any more), a restart that adopts
# or keeps the half-fetched object, or that advertises it again.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp getfattr
start_redis
for n in a b c d; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"; done
size=$((128 << 20))
mkdata "$T/big" "$size"
want=$(sha256_of "$T/big")
cp "$T/big" "$(mnt_of a)/big"
for n in b c d; do eventually 10 ls_has "$(mnt_of "$n")" big; done
id=$(rcli HGET '{objfs}:d:1' big | sed -n 's/^f\([0-9]*\) .*/\1/p')
[ -n "$id" ] || fail "no directory entry for big"
hexid=$(printf %016x "$id")

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
# redis_ms: Redis's clock, in ms (the entries' deadlines are on it)
redis_ms() {
	local t
	t=$(rcli TIME | paste -sd' ')
	echo $((${t% *} * 1000 + ${t#* } / 1000))
}
# fetchers: the fetcher entries of big's record, "~p:NODE=DEADLINE ..."
fetchers() { rcli HGETALL "{objfs}:o:$id" | paste - - | awk -F'\t' '$1 ~ /^~p:/ { printf "%s=%s ", $1, $2 }'; }

step "b, c and d read it at once"
for n in b c d; do read_bg "$n"; done
b_pid=${pids[0]}
# b is mid-fetch with a few blocks, and has an entry
for ((i = 0; i < 300; i++)); do
	[ "$(fetched_of b)" -lt $((24 << 20)) ] || break
	sleep 0.05
done
state=$(xattr "$(mnt_of b)/big" user.objfs.fetch)
assert_match '^fetching ' "$state" "b's fetch before the kill"
deadline=$(rcli HGET "{objfs}:o:$id" "~p:b")
kill_node b KILL
step "killed b, its fetch at: $state; entries then: $(fetchers)"
# its last renewal may have landed just before the kill
deadline=$(rcli HGET "{objfs}:o:$id" "~p:b")
assert_match '^[0-9]+$' "$deadline" "b's fetcher entry after the kill"

for p in "${pids[@]}"; do
	[ "$p" = "$b_pid" ] || wait "$p" || true
done
wait "$b_pid" || true
for n in c d; do
	assert_eq 0 "$(cat "$T/rc.$n")" "cat on $n ($(cat "$T/err.$n"))"
	assert_eq "$want" "$(sha256_of "$T/got.$n")" "sha256 of what $n read"
	rm -f "$T/got.$n"
done

left=$((deadline - $(redis_ms)))
step "c and d are done; b's entry lapses in $left ms (entries: $(fetchers))"
[ "$left" -le 60000 ] || fail "b's entry has a deadline $left ms away (more than a minute)"
for ((i = 0; i < 700; i++)); do
	[ "$(redis_ms)" -le "$deadline" ] || break
	sleep 0.1
done
[ "$(redis_ms)" -gt "$deadline" ] || fail "Redis's clock did not pass b's deadline"

step "past the deadline: no fetcher entry is left"
# no_fetchers: no fetcher entry of big in its record, nor in the index
# of entries ({objfs}:fan, "ID NODE" by deadline); for eventually
no_fetchers() {
	local f
	f=$(fetchers)
	[ -z "$f" ] || { echo "entries of big: $f (Redis time $(redis_ms))"; return 1; }
	f=$(rcli ZRANGE '{objfs}:fan' 0 -1 | grep "^$id " || true)
	[ -z "$f" ] || { echo "index members of big: $f"; return 1; }
}
eventually 10 no_fetchers

step "b mounted again: nothing of the half-fetched object"
umount -l "$(mnt_of b)" 2>/dev/null || true
mount_objfs b "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"
status_is b pending 0 || fail "$(status_is b pending 0)"
status_is b objects 0 || fail "$(status_is b objects 0)"
left=$(ls -A "$(store_of b)/data" | grep -E "^($hexid|\.gone-.*)\$" || true)
[ -z "$left" ] || fail "b's store still has: $left"
assert_no_match '(^|,)b(,|$)' "$(xattr "$(mnt_of c)/big" user.objfs.locations)" "holders of big"
no_fetchers || fail "$(no_fetchers)"
for n in a c d; do status_is "$n" pending 0 || fail "$(status_is "$n" pending 0)"; done
