#!/bin/bash
# Issue 22: one writer, four readers at once.  Five nodes, each serving
# at most 32 MiB/s; a writes a 128 MiB object; b, c, d and e read it at
# the same moment.  Every reader gets it byte for byte, and the nodes
# that were fetching it served at least half of all the bytes served
# (today a alone would serve 4 x 128 MiB).  Afterwards no node is left
# advertised as fetching it, and no store holds a pending object.
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

step "b, c, d and e read it at once"
t0=$(now)
pids=()
for n in b c d e; do
	(timeout -k 5 120 cat "$(mnt_of "$n")/big" >"$T/got.$n" 2>"$T/err.$n"; echo $? >"$T/rc.$n") &
	pids+=("$!")
done
for p in "${pids[@]}"; do wait "$p" || true; done
step "all read in $(echo "$(now) - $t0" | bc) s (alone, a serves 128 MiB in 4 s)"
for n in b c d e; do
	assert_eq 0 "$(cat "$T/rc.$n")" "cat on $n ($(cat "$T/err.$n"))"
	cmp "$T/big" "$T/got.$n" || fail "$n read other bytes"
	rm -f "$T/got.$n"
done

served_half a b c d e
for n in b c d e; do
	assert_eq 0 "$(status_of "$n" checksum_failures)" "checksum failures on $n"
done

step "afterwards: no fetcher entry in Redis, nothing pending"
eventually 10 [ -z "$(rcli HKEYS "{objfs}:x:$id" | grep '^~p:' || true)" ]
for n in b c d e; do eventually 10 status_is "$n" pending 0; done
