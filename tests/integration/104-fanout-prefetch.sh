#!/bin/bash
# Issue 22, the pre-staging case: `objfs prefetch` of one object on four
# nodes at once goes the fan-out way.  Five nodes, each serving at most
# 32 MiB/s; a writes a 128 MiB object; b, c, d and e prefetch it at the
# same moment.  Each ends with the whole object local and byte-exact,
# the prefetchers served at least half of all the bytes served, no node
# is left advertised as fetching it, and no store holds a pending object.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

start_redis
for n in a b c d e; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M"; done
put_object a big $((128 << 20)) b c d e

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

served_half a b c d e
# each copy is local now: this reads it, nothing is fetched
for n in b c d e; do
	assert_eq "$OBJ_SHA" "$(sha256_of "$(mnt_of "$n")/big")" "the bytes $n holds"
	assert_eq 0 "$(status_of "$n" checksum_failures)" "checksum failures on $n"
done

step "afterwards: no fetcher entry in Redis or its index, nothing pending"
eventually 10 [ -z "$(fan_entries "$OBJ_ID")" ]
for n in b c d e; do eventually 10 status_is "$n" pending 0; done
