#!/bin/bash
# Issue 19, item 1: an object whose seal failed at RELEASE waits for its
# retry (78-seal-retry's setup) without making anything else wait:
# stat(2), open(2), ls -l and rm of its name answer at once (not after
# the 60 s a running seal is waited for), a write open gets EACCES, and
# rm discards it at the next retry.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

MAPWRITE=$OBJFS_BUILD/tests/objfs-mapwrite
need_built "$MAPWRITE"
need python3
start_redis
st=$T/store
small_catalog_store "$st"
mount_objfs a "$REDIS_URL" "capacity=32M,noprefault,store=$st"
A=$(mnt_of a)

fill_space "$st"
step "the catalog's last page filled: $(wedge_catalog "$A" "$st")"

step "a writer through a mapping whose seal at RELEASE fails"
capture 60 "$MAPWRITE" "$A/mapped" 65536 z || fail "objfs-mapwrite: $CAPTURED"
eventually 30 grep -q "cannot seal object .*'mapped'.*tried again" "$(log_of a)"

step "stat of the file while its seal is retried"
start=$(date +%s)
rc=0
timeout -k 5 10 stat -c %s "$A/mapped" >/dev/null || rc=$?
assert_eq 0 "$rc" "status of stat (124: still blocked after 10 s; it took $(($(date +%s) - start)) s)"

step "read it, then rm it, while its seal is retried"
head -c 65536 /dev/zero | tr '\0' z >"$T/want"
timeout -k 5 10 cmp "$T/want" "$A/mapped" || fail "reading the object whose seal is retried failed or blocked"
rc=0
timeout -k 5 10 sh -c "echo more >>'$A/mapped'" 2>/dev/null || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a write open of it: status $rc (124: blocked)"
timeout -k 5 10 rm "$A/mapped" || fail "rm of the object whose seal is retried failed or blocked"
assert_absent "$A/mapped"
step "with room again, the retry discards it rather than publishing it"
free_space "$st"
eventually 30 status_is a pending 0
assert_absent "$A/mapped"
