#!/bin/bash
# A node that was away (unmounted) comes back to an intact Redis:
#   - an object deleted by another node meanwhile is dropped from its store
#     (Redis keeps a tombstone for it);
#   - an object Redis knows nothing about, although the epoch is unchanged
#     (Redis restored from an older snapshot), is registered again, never
#     deleted: absence alone must not lose data.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
mkdata "$T/gone" 100000
mkdata "$T/kept" 200000
mkdata "$T/forgotten" 300000

start_redis
mount_objfs n1 "unix:$REDIS_SOCK" "capacity=64M"
M1=$(mnt_of n1)
cp "$T/gone" "$M1/gone"
cp "$T/kept" "$M1/kept"
cp "$T/forgotten" "$M1/forgotten"
fid=$(xattr "$M1/forgotten" user.objfs.id)
[ -n "$fid" ] || fail "no id for forgotten"
umount_objfs n1 || fail "unmount of n1 did not stop its processes"

step "while n1 is away, n2 deletes 'gone'"
mount_objfs n2 "unix:$REDIS_SOCK" "capacity=64M"
M2=$(mnt_of n2)
ls_has "$M2" gone || fail "n2 does not see 'gone'"
rm "$M2/gone"
umount_objfs n2 || fail "unmount of n2 did not stop its processes"

step "and Redis 'forgets' 'forgotten' as a restore from an old snapshot would"
rcli HDEL '{objfs}:d:1' forgotten >/dev/null
rcli HDEL "$(rec_key "$fid")" "$fid" >/dev/null
assert_eq 0 "$(rcli EXISTS "{objfs}:t:$fid")" "a tombstone for the forgotten object"

step "n1 comes back"
mount_objfs n1 "unix:$REDIS_SOCK" "capacity=64M"
assert_absent "$M1/gone"
assert_same "$T/kept" "$M1/kept"
assert_same "$T/forgotten" "$M1/forgotten"
assert_eq "$fid" "$(xattr "$M1/forgotten" user.objfs.id)" "id of the re-registered object"
assert_eq 2 "$(objfs_cli status "$M1" | field objects)" "objects in n1's store"
assert_match "deleted while this node was away" "$(cat "$(log_of n1)")"
assert_match "does not know object $fid" "$(cat "$(log_of n1)")"
