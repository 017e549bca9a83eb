#!/bin/bash
# Issue 22: the origin unlinks the object mid-broadcast.  Five nodes,
# each serving at most 32 MiB/s; a writes a 128 MiB object; b, c, d and
# e open it at once (each a reader that keeps it open) and fetch it from
# a and from each other.  While every one of those fetches runs, and the
# readers have begun serving each other blocks, a deletes it.  Then:
#   - a new open of the name gets ENOENT, on a at once and on every
#     reader's node once the deletion reached it;
#   - every reader that had it open reads the whole object, byte for
#     byte (as 67-unlink-mid-fetch requires of a plain fetch: a keeps
#     serving the fetches that began, and the fetchers each other);
#   - once they are done nothing of the object is left in Redis but its
#     tombstone: no record (and so no fetcher entry), no holder set, no
#     directory entry, no other key naming its id, no member of the
#     index of fetcher entries;
#   - once the readers have closed it, no store holds anything of it:
#     nothing pending, no object, nothing draining, no file of it (by its
#     id, or deleted and still kept) in any store's data directory.
# It would catch: a fetch that fails when its record goes (a renewal
# that gets ENOENT, a source that no longer serves it), a script that
# writes the record back (a fetcher entry or a holder added after the
# delete), a fetched copy registered or kept after the delete, pages
# that never go.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
for n in a b c d e; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"; done
put_object a big $((128 << 20)) b c d e
id=$OBJ_ID
hexid=$(printf %016x "$id")

# served_by_readers: bytes b, c, d and e served so far
served_by_readers() {
	local n sum=0
	for n in b c d e; do sum=$((sum + $(status_of "$n" served_bytes))); done
	echo "$sum"
}
# some_served: for eventually
some_served() { [ "$(served_by_readers)" -gt 0 ]; }

step "b, c, d and e open it at once"
starts=()
for n in b c d e; do
	start_reader "$n" "$(mnt_of "$n")/big" &
	starts+=("$!")
done
for p in "${starts[@]}"; do wait "$p" || fail "a reader could not open big"; done
# (started in subshells: the cleanup must know the readers)
for n in b c d e; do BG_PIDS+=("$(cat "$T/reader-$n.pid")"); done
eventually 10 some_served
for n in b c d e; do
	state=$(xattr "$(mnt_of "$n")/big" user.objfs.fetch)
	step "$n: $state"
	assert_match '^fetching ' "$state" "$n's fetch before the delete (else the test proves nothing)"
done

step "a deletes it mid-broadcast (the readers served $(served_by_readers) bytes so far)"
rm "$(mnt_of a)/big"
assert_errno ENOENT 'open(A[0])' "$(mnt_of a)/big"
# enoent_on NODE: a new open of big on NODE gets ENOENT (for eventually)
enoent_on() { [ "$(py_errno 'open(A[0])' "$(mnt_of "$1")/big")" = ENOENT ]; }
for n in b c d e; do eventually 5 enoent_on "$n"; done

step "every reader reads the whole object"
for n in b c d e; do
	assert_eq "$OBJ_SHA" "$(release_reader "$n")" "sha256 read by $n's reader"
done
for n in b c d e; do
	assert_eq 0 "$(status_of "$n" fetches_failed)" "failed fetches on $n"
	assert_errno ENOENT 'open(A[0])' "$(mnt_of "$n")/big"
done

step "nothing of it in Redis but its tombstone"
# nothing_in_redis: for eventually (a fetch ends a little after its
# reader has the last byte, and its end may still talk to Redis)
nothing_in_redis() {
	local keys
	keys=$(rcli --scan --pattern "*$id*" | sort | paste -sd' ')
	[ "$keys" = "{objfs}:t:$id" ] || { echo "keys naming $id: $keys"; return 1; }
	[ "$(rcli HEXISTS '{objfs}:d:1' big)" = 0 ] || { echo "the directory entry is back"; return 1; }
	# nor a member of the index of fetcher entries
	keys=$(fan_entries "$id")
	[ -z "$keys" ] || { echo "fetcher entries of $id: $keys"; return 1; }
}
eventually 10 nothing_in_redis
for n in b c d e; do eventually 10 status_is "$n" pending 0; done
# after the fetches' ends: still nothing (no late script wrote it back)
nothing_in_redis || fail "something of the object came back to Redis: $(nothing_in_redis)"

step "no store holds anything of it"
# store_clean NODE: nothing of big in NODE's store (for eventually)
store_clean() {
	local n=$1 k left
	for k in pending objects draining; do status_is "$n" "$k" 0 || return 1; done
	left=$(ls -A "$(store_of "$n")/data" | grep -E "^($hexid|\.gone-.*)\$" || true)
	[ -z "$left" ] || { echo "$n's store still has: $left"; return 1; }
}
# a's pages go once no fetcher has asked for them for 10 s (its leases)
for n in b c d e a; do eventually 40 store_clean "$n"; done
nothing_in_redis || fail "something of the object came back to Redis: $(nothing_in_redis)"
