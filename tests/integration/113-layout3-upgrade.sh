#!/bin/bash
# Issue 24: the namespace's layout 3 (no Redis key per object: records
# are fields of bucket hashes {objfs}:r:<last 4 digits>, and hard links,
# block sums and fetchers a hash x:<id> while an object has any), and the
# upgrade from layout 2 with the real objfsd of layout 2 (commit $OLD,
# built from this repository's history):
#   - old nodes write a tree (files of several sizes, one of several
#     8 MiB blocks, an empty directory and an empty one inside another,
#     a renamed object, a hard link, a symbolic link, a chmod) and hold
#     copies on two nodes;
#   - a new node is refused while an old one is live, with the reason;
#   - the old nodes stop; new nodes mount their stores: the namespace is
#     migrated, every name, size, mode and checksum intact, no record key
#     left, and the objects are fetched from their holders (the block
#     sums checked);
#   - an old node refuses the migrated namespace, with the reason;
#   - kill -9 and a restart of a new node change nothing.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

OLD=5dc684b
need git meson ninja python3 sha256sum

step "objfsd of layout 2 ($OLD)"
OLD_OBJFSD=$(old_objfsd "$OLD" "the last objfsd of layout 2")
NEW_OBJFSD=$OBJFSD

start_redis
OBJFSD=$OLD_OBJFSD
mount_objfs a "$REDIS_URL" "capacity=96M"
mount_objfs b "$REDIS_URL" "capacity=96M"
OBJFSD=$NEW_OBJFSD
A=$(mnt_of a)
B=$(mnt_of b)
assert_eq 2 "$(rcli GET '{objfs}:layout')" "the old nodes' layout"

step "old nodes write a tree"
upgrade_tree "$A" "$B" $((17 << 20))
tree_snapshot "$A" >"$T/before"
[ "$(wc -l <"$T/before")" -ge 17 ] || fail "the tree is too small: $(cat "$T/before")"
big_id=$(xattr "$A/d/e/big" user.objfs.id)
f100_id=$(xattr "$A/d/f100" user.objfs.id)
eventually 10 [ "$(rcli HKEYS "{objfs}:o:$big_id" | grep '^@' | sort | paste -sd,)" = "@a,@b" ]
sums=$(rcli HGET "{objfs}:o:$big_id" bsum)
assert_match '^23:[0-9a-f]{48}$' "$sums" "big's block sums in layout 2"
nrec=$(rcli --scan --pattern '{objfs}:o:*' | wc -l)
step "layout 2: $nrec record keys"

step "a new node is refused while the old ones are live"
rc=0
try_mount c "$REDIS_URL" "capacity=96M" || rc=$?
[ "$rc" != 0 ] || fail "a new node mounted a namespace of layout 2 with old nodes live"
assert_match "layout 2 and node '(a|b)'.*is live" "$MOUNT_OUT$(cat "$(log_of c)" 2>/dev/null)" \
	"why the new node was refused"
step "refused: $(grep -o "namespace.*" <<<"$MOUNT_OUT$(cat "$(log_of c)" 2>/dev/null)" | head -1)"
assert_eq 2 "$(rcli GET '{objfs}:layout')" "nothing migrated while old nodes are live"

step "the old nodes stop; new nodes mount their stores"
umount_objfs a || fail "unmount a"
umount_objfs b || fail "unmount b"
mount_objfs a "$REDIS_URL" "capacity=96M"
assert_match "migrated to layout 3.*[^0-9]$nrec records" "$(cat "$(log_of a)")" "a's log"
step "$(grep -o "namespace.*migrated to layout.*" "$(log_of a)")"
mount_objfs b "$REDIS_URL" "capacity=96M"
assert_eq 3 "$(rcli GET '{objfs}:layout')" "the layout key"
assert_eq "" "$(rcli --scan --pattern '{objfs}:o:*' | head -3)" "record keys left"
tree_snapshot "$A" >"$T/after.a"
diff "$T/before" "$T/after.a" >&2 || fail "the tree on a changed across the migration"
tree_snapshot "$B" >"$T/after.b"
diff "$T/before" "$T/after.b" >&2 || fail "the tree on b changed across the migration"
assert_eq "a,b" "$(holders_of "$big_id")" "holders of big in layout 3"
assert_eq "$sums" "$(rcli HGET "{objfs}:x:$big_id" bsum)" "big's block sums in layout 3"
assert_eq 1 "$(rcli HKEYS "{objfs}:x:$f100_id" | grep -c '^=')" "f100's hard link"

step "a third new node fetches everything from the holders"
mount_objfs c "$REDIS_URL" "capacity=96M"
tree_snapshot "$(mnt_of c)" >"$T/after.c"
diff "$T/before" "$T/after.c" >&2 || fail "the tree read on c differs"
assert_eq 0 "$(status_of c checksum_failures)" "checksum failures on c"
holders_is() { [ "$(holders_of "$1")" = "$2" ] || { echo "holders of $1: $(holders_of "$1")"; return 1; }; }
eventually 15 holders_is "$big_id" a,b,c

step "new writes, a rename and an unlink on the migrated namespace"
echo new >"$A/d/new"
eventually 10 ls_has "$(mnt_of c)/d" new
assert_eq new "$(cat "$(mnt_of c)/d/new")" "a new file, read on c"
mv "$A/d/f4096" "$A/d/e/moved"
eventually 10 ls_has "$(mnt_of c)/d/e" moved
rm "$A/d/f100"
assert_eq 0 "$(rcli EXISTS "{objfs}:x:$f100_id")" "f100's extras once it has one name"
cmp "$A/hard" "$B/hard" || fail "the hard link's bytes after its other name went"

step "an old node refuses the migrated namespace"
OBJFSD=$OLD_OBJFSD
rc=0
try_mount old "$REDIS_URL" "capacity=96M" || rc=$?
OBJFSD=$NEW_OBJFSD
[ "$rc" != 0 ] || fail "an objfsd of layout 2 mounted a namespace of layout 3"
assert_match "layout '3'.*upgrade" "$MOUNT_OUT$(cat "$(log_of old)" 2>/dev/null)" \
	"why the old node was refused"
step "the old node: $(grep -ho "namespace.*layout '3'.*" "$(log_of old)" <<<"$MOUNT_OUT" | head -1)"

step "kill -9 and a restart of a"
kill_node a KILL
eventually 10 bash -c "! ls '$A' >/dev/null 2>&1"
umount -l "$A" || true
mount_objfs a "$REDIS_URL" "capacity=96M"
tree_snapshot "$A" | grep -v '^\./d/new \|^\./d/f4096 \|^\./d/f100 \|^\./d/e/moved \|^\./hard ' >"$T/after.restart"
grep -v '^\./d/f4096 \|^\./d/f100 \|^\./hard ' "$T/before" >"$T/before.left"
diff "$T/before.left" "$T/after.restart" >&2 || fail "the tree on a changed across kill -9 and restart"
cmp "$T/big" "$A/d/e/big" || fail "big after the restart"
