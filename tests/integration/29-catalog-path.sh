#!/bin/bash
# The store's catalog records where each object lives, so that a Redis
# that lost its data gets every object back under its real name.  The
# record must follow the name when it changes elsewhere (a rename on
# another node), and a reconcile must take the name Redis has over a
# stale or missing one (a crash between publishing and recording it).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M"
mount_objfs b "$REDIS_URL" "capacity=64M"
A=$(mnt_of a)
B=$(mnt_of b)

mkdata "$T/x" 123456
mkdir "$A/d"
cp "$T/x" "$A/d/x"

step "b renames a's object and its directory"
eventually 10 cmp -s "$T/x" "$B/d/x"
mv "$B/d/x" "$B/d/y"
mv "$B/d" "$B/e"

step "a comes back to the same Redis: its catalog learns the new path"
umount_objfs a || fail "unmount of a did not stop its processes"
mount_objfs a "$REDIS_URL" "capacity=64M"
assert_same "$T/x" "$A/e/y"
umount_objfs a || fail "unmount of a did not stop its processes"
umount_objfs b || fail "unmount of b did not stop its processes"

step "Redis loses everything; a comes back with the object under its real name"
rcli FLUSHALL >/dev/null
mount_objfs a "$REDIS_URL" "capacity=64M"
assert_same "$T/x" "$A/e/y"
ls_has "$A" d && fail "the old path came back: $(ls -R "$A")"
ls_has "$A" lost+found && fail "the object went to lost+found: $(ls -R "$A")"
exit 0
