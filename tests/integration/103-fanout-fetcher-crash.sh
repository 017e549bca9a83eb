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

need getfattr
start_redis
for n in a b c d; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"; done
put_object a big $((128 << 20)) b c d
id=$OBJ_ID

step "b, c and d read it at once"
for n in b c d; do cat_bg "$n" big; done
# b is mid-fetch with a few blocks, and has an entry
wait_fetched "$(mnt_of b)/big" $((24 << 20))
state=$(xattr "$(mnt_of b)/big" user.objfs.fetch)
assert_match '^fetching ' "$state" "b's fetch before the kill"
kill_node b KILL
step "killed b, its fetch at: $state; entries then: $(fan_entries "$id")"
# its last renewal may have landed just before the kill
deadline=$(rcli HGET "{objfs}:x:$id" "~p:b")
assert_match '^[0-9]+$' "$deadline" "b's fetcher entry after the kill"

cat_wait c d b
for n in c d; do cat_read "$n" "$OBJ_SHA"; done

left=$((deadline - $(redis_ms)))
step "c and d are done; b's entry lapses in $left ms (entries: $(fan_entries "$id"))"
[ "$left" -le 60000 ] || fail "b's entry has a deadline $left ms away (more than a minute)"
for ((i = 0; i < 700; i++)); do
	[ "$(redis_ms)" -le "$deadline" ] || break
	sleep 0.1
done
[ "$(redis_ms)" -gt "$deadline" ] || fail "Redis's clock did not pass b's deadline"

step "past the deadline: no fetcher entry is left"
# no_fetchers: no fetcher entry of big, in its record or in the index of
# entries; for eventually
no_fetchers() {
	local f
	f=$(fan_entries "$id")
	[ -z "$f" ] || { echo "entries of big: $f (Redis time $(redis_ms))"; return 1; }
}
eventually 10 no_fetchers

step "b mounted again: nothing of the half-fetched object"
umount -l "$(mnt_of b)" 2>/dev/null || true
mount_objfs b "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"
status_is b pending 0 || fail "$(status_is b pending 0)"
status_is b objects 0 || fail "$(status_is b objects 0)"
left=$(ls -A "$(store_of b)/data" | grep -E "^($(printf %016x "$id")|\.gone-.*)\$" || true)
[ -z "$left" ] || fail "b's store still has: $left"
assert_no_match '(^|,)b(,|$)' "$(xattr "$(mnt_of c)/big" user.objfs.locations)" "holders of big"
no_fetchers || fail "$(no_fetchers)"
for n in a c d; do status_is "$n" pending 0 || fail "$(status_is "$n" pending 0)"; done
