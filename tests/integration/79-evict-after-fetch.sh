#!/bin/bash
# A copy that another node has just fetched may be evicted at once
# (issue 19, item 6).  Every GET takes a serving lease on the copy it
# reads, and a lease used to keep the copy from eviction until it
# lapsed (10 s after the peer's last GET, swept every 5 s): a node that
# wrote 40 MiB into a 64 MiB store, had it read by another node and
# wrote 40 MiB more got ENOSPC for about 20 s.  An idle lease no longer
# pins: eviction takes it back (a peer that comes back for more fails
# over to another holder).
#   - a writes x1 (40 MiB; capacity 64M), b reads it all and is a holder:
#     a writes x2 (40 MiB) and must succeed on the first try, evicting x1;
#   - when room really cannot be made, a's log says why, naming the
#     object that stays: the only copy in the cluster; open here;
#   - 10 rounds of writing on a and reading on b: every write succeeds.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M"
mount_objfs b "$REDIS_URL" "capacity=64M"
A=$(mnt_of a)
B=$(mnt_of b)
SIZE=$((40 << 20))

# holders_are FILE "a,b": FILE's holders (sorted), for eventually
holders_are() {
	local got
	got=$(xattr "$1" user.objfs.locations | tr ',' '\n' | sort | paste -sd, -)
	[ "$got" = "$2" ] || {
		echo "holders of $1: $got"
		return 1
	}
}

# read_on_b NAME: b reads NAME whole (byte-exact), and is registered as
# its holder (the registration follows the last byte, off the reader's
# path)
read_on_b() {
	eventually 10 ls_has "$B" "$1"
	assert_ok cmp "$T/$1" "$B/$1"
	eventually 10 holders_are "$A/$1" a,b
}

# write_on_a NAME: a writes NAME ($SIZE random bytes), first try
write_on_a() {
	local rc=0 t0
	mkdata "$T/$1" "$SIZE"
	t0=$(now)
	capture 30 cp "$T/$1" "$A/$1" || rc=$?
	step "a wrote $1 in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s: status $rc $CAPTURED; a: used $(status_of a used), draining $(status_of a draining), evictions $(status_of a evictions)"
	[ "$rc" = 0 ] || fail "a could not write $1 (status $rc): $CAPTURED"
}

# new_log_lines NODE MARK: the lines of NODE's log after line MARK
new_log_lines() { tail -n +"$(($2 + 1))" "$(log_of "$1")"; }
log_mark() { wc -l <"$(log_of "$1")"; }

step "a writes x1, b reads it"
write_on_a x1
read_on_b x1

step "a writes x2: x1, which b holds now, makes room at once"
ev0=$(status_of a evictions)
write_on_a x2
assert_ok cmp "$T/x2" "$A/x2"
[ "$(status_of a evictions)" -gt "$ev0" ] || fail "a evicted nothing for x2"
assert_match '^remote ' "$(xattr "$A/x1" user.objfs.fetch)" "x1 on a"
assert_eq b "$(xattr "$A/x1" user.objfs.locations)" "holders of x1"
assert_ok cmp "$T/x1" "$B/x1"

step "no room for x3 beside x2, the only copy: the log names it"
x2id=$(xattr "$A/x2" user.objfs.id)
mark=$(log_mark a)
mkdata "$T/x3" "$SIZE"
assert_fails_with 'No space left' cp "$T/x3" "$A/x3"
lines=$(new_log_lines a "$mark")
step "a's log: $lines"
grep -E "object $x2id .*only copy in the cluster" <<<"$lines" >/dev/null ||
	fail "a's log does not say that x2 (object $x2id) is the only copy in the cluster: $lines"

step "no room for x3 beside x2 open on a: the log says so"
rm "$B/x1" # b's copy is the last one now: it would take b's room for x2
read_on_b x2
start_reader r1 "$A/x2"
mark=$(log_mark a)
assert_fails_with 'No space left' cp "$T/x3" "$A/x3"
lines=$(new_log_lines a "$mark")
step "a's log: $lines"
grep -E "object $x2id .*open here" <<<"$lines" >/dev/null ||
	fail "a's log does not say that x2 (object $x2id) is open on a: $lines"
assert_eq "$(sha256_of "$T/x2")" "$(release_reader r1)" "sha256 read by x2's reader on a"

step "closed, x2 makes room for x3"
write_on_a x3
assert_ok cmp "$T/x2" "$B/x2"

step "10 rounds: a writes, b reads; every write succeeds at once"
rm "$B/x2"
read_on_b x3
prev=x3
for i in $(seq 1 10); do
	write_on_a "r$i"
	rm "$B/$prev" # b's copy was the last one: a gave up its own for r$i
	read_on_b "r$i"
	prev=r$i
done
assert_ok cmp "$T/r10" "$B/r10"
assert_ok cmp "$T/r10" "$A/r10"
assert_eq 0 "$(status_of b fetches_failed)" "failed fetches on b"
