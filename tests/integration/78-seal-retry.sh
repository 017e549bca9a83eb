#!/bin/bash
# Issue 19, item 1: a seal that fails is never a silent loss.  The store's
# catalog lives on a tmpfs of the test's own, which the test fills
# (small_catalog_store); objects still find room on their own tmpfs, but
# a seal cannot append the object's line to the catalog log once the
# log's last page is full:
#   - sealed at close(2) (a plain writer): close(2) fails, and the name
#     does not stay;
#   - sealed at the RELEASE that follows the last munmap (a writer through
#     a mapping it made before close): its close(2) returned 0 long
#     before, so nothing is discarded; the seal is tried again, and once
#     the catalog has room the object is published with every byte.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

MAPWRITE=$OBJFS_BUILD/tests/objfs-mapwrite
need_built "$MAPWRITE"
need python3 cmp
start_redis
st=$T/store
small_catalog_store "$st"
mount_objfs a "$REDIS_URL" "capacity=32M,noprefault,store=$st"
mount_objfs b "$REDIS_URL" "capacity=32M"
A=$(mnt_of a)
B=$(mnt_of b)
echo first >"$A/first"

step "plain writers whose seal cannot append to the catalog: close(2) fails"
fill_space "$st"
read -r n err <<<"$(wedge_catalog "$A" "$st")"
step "create $n failed at close(2) with $err"
assert_match '^(ENOSPC|EIO)$' "$err" "what close(2) returned"
assert_absent "$A/wedge$n"
[ "$n" = 0 ] || assert_eq "wedge $((n - 1))" "$(cat "$A/wedge$((n - 1))")" "the create before it"

step "a writer through a mapping, sealed at RELEASE, whose seal fails: kept and retried"
capture 60 "$MAPWRITE" "$A/mapped" 65536 z || fail "objfs-mapwrite: $CAPTURED"
eventually 30 grep -q "cannot seal object .*'mapped'.*tried again" "$(log_of a)"
assert_absent "$B/mapped"
free_space "$st"
eventually 30 test -e "$B/mapped"
head -c 65536 /dev/zero | tr '\0' z >"$T/want"
cmp "$T/want" "$B/mapped" || fail "node b reads other bytes than were written"
cmp "$T/want" "$A/mapped" || fail "node a reads other bytes than were written"
assert_eq 0 "$(status_of a killed_writers)" "killed_writers"
[ "$(status_of a seal_failed)" -ge 2 ] || fail "seal_failed: $(status_of a seal_failed)"
