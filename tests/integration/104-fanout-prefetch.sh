#!/bin/bash
# Issue 22, the pre-staging case: `objfs prefetch` of one object on four
# nodes at once goes the fan-out way.  Five nodes, each serving at most
# 32 MiB/s; a writes a 128 MiB object; b, c, d and e prefetch it at the
# same moment.  Each ends with the whole object local and byte-exact,
# the prefetchers served at least half of all the bytes served, no node
# is left advertised as fetching it, and no store holds a pending object.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp
start_redis
for n in a b c d e; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"; done
mkdata "$T/big" $((128 << 20))
cp "$T/big" "$(mnt_of a)/big"
for n in b c d e; do eventually 10 ls_has "$(mnt_of "$n")" big; done
id=$(rcli HGET '{objfs}:d:1' big | sed -n 's/^f\([0-9]*\) .*/\1/p')
[ -n "$id" ] || fail "no directory entry for big"

step "b, c, d and e prefetch it at once"
pids=()
for n in b c d e; do
	(timeout -k 5 120 "$OBJFS_CLI" prefetch -q "$(mnt_of "$n")/big" >"$T/out.$n" 2>&1; echo $? >"$T/rc.$n") &
	pids+=("$!")
done
for p in "${pids[@]}"; do wait "$p" || true; done
for n in b c d e; do
	assert_eq 0 "$(cat "$T/rc.$n")" "objfs prefetch on $n ($(cat "$T/out.$n"))"
	assert_match '^local ' "$(xattr "$(mnt_of "$n")/big" user.objfs.fetch)" "state on $n after prefetch"
done

origin=$(status_of a served_bytes)
others=0
for n in b c d e; do others=$((others + $(status_of "$n" served_bytes))); done
step "served: a $origin bytes, the prefetchers $others bytes"
[ $((2 * others)) -ge $((origin + others)) ] ||
	fail "the prefetchers served $others of $((origin + others)) bytes, less than half"
# each copy is local now: this reads it, nothing is fetched
for n in b c d e; do
	cmp "$T/big" "$(mnt_of "$n")/big" || fail "$n holds other bytes"
	assert_eq 0 "$(status_of "$n" checksum_failures)" "checksum failures on $n"
done

step "afterwards: no fetcher entry in Redis, nothing pending"
eventually 10 [ -z "$(rcli HKEYS "{objfs}:o:$id" | grep '^~p:' || true)" ]
for n in b c d e; do eventually 10 status_is "$n" pending 0; done
