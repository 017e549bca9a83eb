#!/bin/bash
# Open objects outlive their deletion (issue 10).  A 40 MiB object is held
# by a reader (an open descriptor, its head read) and by a python mmap
# (64 KiB of it touched, the rest never), both passthrough opens when
# passthrough is on (counter); then its name is unlinked, renamed, or
# overwritten (allow_overwrite), and the store is churned with new
# objects of the same size, written and deleted, so that a store that
# reused the held object's file too early would hand the holders other
# bytes.  The reader and the mapping still get every original byte; the
# name shows what the operation left; and once everything is closed and
# deleted the store's space all comes back.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

# the passthrough lines of the status report (issue 10): their keys, here only
PT_MODE=passthrough # "on", "off (why)", "unavailable (why)"
PT_OPENS=passthrough_opens # opens that the kernel serves from the store file

need python3 getfattr
mount_objfs a local "capacity=1G,allow_overwrite"
M=$(mnt_of a)
pt=$(passthrough_mode a "$PT_MODE")
step "passthrough: $pt ($(status_of a "$PT_MODE"))"
# not a multiple of 64 MiB (the store's prefault files): a freed file of
# this size is the best fit for a new object of the same size
size=$(((40 << 20) + 12345))

# hold OP: a reader and a mapper of $M/x.OP (passthrough opens, if on)
hold() {
	local opens=
	if [ "$pt" = on ]; then
		eventually 10 opens_in_passthrough a "$M/x.$1" "$PT_OPENS"
		opens=$(status_of a "$PT_OPENS")
	fi
	start_reader "r-$1" "$M/x.$1"
	start_mapper "m-$1" "$M/x.$1"
	if [ "$pt" = on ]; then
		assert_le $((opens + 2)) "$(status_of a "$PT_OPENS")" "$PT_OPENS after the reader's and the mapper's opens"
	fi
}

# released OP: the reader and the mapper of x.OP got the original bytes
released() {
	assert_eq "$(sha256_of "$T/x.$1")" "$(release_reader "r-$1")" "sha256 read by the reader of x.$1 after the $1"
	assert_eq "$(sha256_of "$T/x.$1")" "$(release_reader "m-$1")" "sha256 of the mapping of x.$1 after the $1"
}

for op in unlink rename overwrite; do
	mkdata "$T/x.$op" "$size"
	cp "$T/x.$op" "$M/x.$op"
done

step "unlink while held"
hold unlink
rm "$M/x.unlink"
assert_absent "$M/x.unlink"
churn_store "$M" "$size"
released unlink
assert_absent "$M/x.unlink"

step "rename while held"
hold rename
mv "$M/x.rename" "$M/x.renamed"
churn_store "$M" "$size"
released rename
assert_absent "$M/x.rename"
assert_same "$T/x.rename" "$M/x.renamed"

step "overwrite while held"
hold overwrite
mkdata "$T/y" $((size - 12345))
cp "$T/y" "$M/x.overwrite"
assert_same "$T/y" "$M/x.overwrite"
churn_store "$M" "$size"
released overwrite
assert_same "$T/y" "$M/x.overwrite"

step "unlink while only a mapping holds the object (its descriptor closed at once)"
mkdata "$T/x.maponly" "$size"
cp "$T/x.maponly" "$M/x.maponly"
[ "$pt" != on ] || eventually 10 opens_in_passthrough a "$M/x.maponly" "$PT_OPENS"
start_mapper m-maponly "$M/x.maponly"
rm "$M/x.maponly"
churn_store "$M" "$size"
assert_eq "$(sha256_of "$T/x.maponly")" "$(release_reader m-maponly)" "sha256 of the mapping after the unlink"

step "everything deleted and closed: the store's space all comes back"
rm -f "$M"/*
# store_empty: for eventually
store_empty() {
	local st
	st=$(xattr "$M" user.objfs.status)
	if [ "$(field used <<<"$st")" != 0 ] || [ "$(field draining <<<"$st")" != 0 ] ||
		[ "$(field objects <<<"$st")" != 0 ]; then
		grep -E '^(used|draining|objects):' <<<"$st" | tr '\n' ' '
		return 1
	fi
}
eventually 20 store_empty

[ "$pt" != absent ] ||
	skip "objfsd has no passthrough (no '$PT_MODE:' line in its status): the checks of every mode passed, the passthrough ones were not run"
