#!/bin/bash
# The mount's bdi read_ahead_kb is 4096 as soon as objfsd returns, and
# stays 4096 once the kernel has applied the INIT reply (which sets
# ra_pages to the smaller of the bdi value and the reply's max_readahead).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

mount_objfs n1 local "capacity=256M"
M=$(mnt_of n1)

# bdi_ra_kb MOUNTPOINT: read_ahead_kb of the mount's bdi (maj:min from
# mountinfo; the last match is the top mount)
bdi_ra_kb() {
	local dev
	dev=$(awk -v m="$1" '$5 == m { d = $3 } END { print d }' /proc/self/mountinfo)
	[ -n "$dev" ] || { echo "no mountinfo entry for $1"; return 1; }
	cat "/sys/class/bdi/$dev/read_ahead_kb"
}

step "read_ahead_kb right after the mount returns"
ra=$(bdi_ra_kb "$M") || fail "$ra"
assert_eq 4096 "$ra" "read_ahead_kb of $M before any request"

step "read_ahead_kb once INIT has been answered"
# statfs always goes to the daemon, and a request is only sent once the
# INIT reply has been processed (ra_pages is set before the connection is
# marked initialized)
assert_ok stat -f "$M"
ra=$(bdi_ra_kb "$M") || fail "$ra"
assert_eq 4096 "$ra" "read_ahead_kb of $M after INIT"

step "still 4096 after reading a file back"
mkdata "$T/src" $((8 << 20))
cp "$T/src" "$M/f"
assert_same "$T/src" "$M/f"
ra=$(bdi_ra_kb "$M") || fail "$ra"
assert_eq 4096 "$ra" "read_ahead_kb of $M after a read"
