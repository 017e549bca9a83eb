#!/bin/bash
# Nodes fetch objects from each other on open(): every size class crosses
# byte-exact, the fetching node becomes a holder and later opens are
# local, concurrent opens share one transfer, the head of a big object
# arrives before the rest, mmap works on a fetched object, and the CLI
# shows nodes, holders and transfer counters.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=512M"
mount_objfs b "$REDIS_URL" "capacity=512M"
A=$(mnt_of a)
B=$(mnt_of b)

step "every size class, written on a, read on b"
sizes="0 1 4095 4096 4097 65536 1048575 1048576 1048577 8388608 9437185 67108864"
for n in $sizes; do
	mkdata "$T/s$n" "$n"
	cp "$T/s$n" "$A/s$n"
done
for n in $sizes; do
	eventually 10 ls_has "$B" "s$n"
	assert_eq "$n" "$(stat -c %s "$B/s$n")" "size of s$n on b"
	assert_ok cmp "$T/s$n" "$B/s$n"
done
assert_eq 12 "$(status_of b fetches)" "fetches on b"
# a fetch counts its end and its last bytes after its readers have them
eventually 10 status_is b fetches_done 12
assert_eq 0 "$(status_of b fetches_failed)" "failed fetches on b"
assert_eq auto "$(status_of b transport)" "transport"
total=0
for n in $sizes; do total=$((total + n)); done
eventually 10 status_is b fetch_bytes "$total"
eventually 10 status_is a served_bytes "$total"
# small objects from a node whose address b knows skip Redis
direct=$(status_of b fetches_direct)
[ "$direct" -ge 1 ] || fail "no fetch went straight to the origin node ($direct)"

step "b is a holder now, and a second read is local"
# (b registers as a holder after its readers got the bytes)
eventually 10 holders_are "$B/s65536" a,b
echo 3 >/proc/sys/vm/drop_caches
assert_ok cmp "$T/s9437185" "$B/s9437185"
assert_eq 12 "$(status_of b fetches)" "fetches on b after re-reading"
eventually 10 fetch_state_is "$B/s9437185" '^local '

step "objfs stat and objfs nodes"
assert_ok "$OBJFS_CLI" stat "$B/s4096"
assert_match 'holders: .*a' "$CAPTURED" "objfs stat holders"
assert_match 'here: local' "$CAPTURED" "objfs stat local state"
assert_ok "$OBJFS_CLI" nodes "$B"
assert_match '^a +live' "$CAPTURED" "objfs nodes lists a"
assert_match '^b +live' "$CAPTURED" "objfs nodes lists b"

step "the copy on b serves a third node c"
mount_objfs c "$REDIS_URL" "capacity=512M"
C=$(mnt_of c)
eventually 10 ls_has "$C" s1048577
assert_ok cmp "$T/s1048577" "$C/s1048577"

step "8 concurrent readers on b of one remote object: one transfer"
mkdata "$T/big" $((96 << 20))
cp "$T/big" "$A/big"
eventually 10 ls_has "$B" big
before=$(status_of b fetches)
pids=()
for i in 1 2 3 4 5 6 7 8; do
	timeout -k 5 60 sha256sum "$B/big" >"$T/sum$i" 2>&1 &
	pids+=("$!")
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent reader failed: $(cat "$T"/sum*)"; done
want=$(sha256_of "$T/big")
for i in 1 2 3 4 5 6 7 8; do
	assert_eq "$want" "$(cut -d' ' -f1 "$T/sum$i")" "sha256 read by reader $i"
done
assert_eq $((before + 1)) "$(status_of b fetches)" "fetches on b after 8 concurrent readers"

step "mmap of a fetched object (python, on c)"
eventually 10 ls_has "$C" big
got=$(timeout -k 5 60 python3 - "$C/big" <<'PY'
import hashlib, mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    print(hashlib.sha256(m).hexdigest())
PY
)
assert_eq "$want" "$got" "sha256 through mmap on c"

step "objfs prefetch of a big object while its progress grows at full speed"
# the progress text changes length as the fetch runs: the CLI's reads of
# it must not trip over that (ERANGE)
for i in 1 2 3; do
	mkdata "$T/g$i" $((96 << 20))
	cp "$T/g$i" "$A/g$i"
done
eventually 10 ls_has "$C" g3
for i in 1 2 3; do
	assert_ok "$OBJFS_CLI" prefetch -q "$C/g$i"
	assert_match '^local ' "$(xattr "$C/g$i" user.objfs.fetch)" "state of g$i after prefetch"
done
assert_ok cmp "$T/g2" "$C/g2"
rm -f "$A/g1" "$A/g2" "$A/g3" "$T/g1" "$T/g2" "$T/g3"

step "head of a big remote object returns before the transfer ends"
umount_objfs a || fail "unmount a"
mount_objfs a "$REDIS_URL" "capacity=512M,serve_bwlimit=32M"
step "a restarted on another port: b's remembered address is stale, the fetch still works"
mkdata "$T/after-restart" 5000
cp "$T/after-restart" "$A/after-restart"
eventually 10 ls_has "$B" after-restart
assert_ok cmp "$T/after-restart" "$B/after-restart"
mkdata "$T/huge" $((192 << 20))
cp "$T/huge" "$A/huge"
eventually 10 ls_has "$B" huge
t0=$(now)
head -c 100 "$B/huge" >"$T/head"
t1=$(now)
assert_eq "$(head -c 100 "$T/huge" | sha256sum)" "$(sha256sum <"$T/head")" "first 100 bytes"
state=$(xattr "$B/huge" user.objfs.fetch)
step "head took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s; fetch state then: $state"
assert_match '^fetching ' "$state" "the fetch is still running after head returned"
assert_ok cmp "$T/huge" "$B/huge"

step "objfs prefetch stages objects with progress"
mkdir "$A/batch"
for i in 1 2 3; do mkdata "$T/p$i" $((3 << 20)); cp "$T/p$i" "$A/batch/p$i"; done
eventually 10 ls_has "$C" batch
assert_ok "$OBJFS_CLI" prefetch "$C/batch"
assert_match '3 objects staged' "$CAPTURED" "prefetch summary"
for i in 1 2 3; do
	assert_match '^local ' "$(xattr "$C/batch/p$i" user.objfs.fetch)" "state of p$i after prefetch"
done
n=$(status_of c fetches)
for i in 1 2 3; do assert_ok cmp "$T/p$i" "$C/batch/p$i"; done
assert_eq "$n" "$(status_of c fetches)" "reads after prefetch fetch nothing"
assert_fails_with 'No such file' "$OBJFS_CLI" prefetch "$C/batch/nope"
