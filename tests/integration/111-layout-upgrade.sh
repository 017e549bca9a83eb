#!/bin/bash
# Issue 24: the namespace's layout 2 (holders folded into the object
# record, attributes in the entries only) and 3 (records in buckets), and
# the upgrade from layout 1 through 2 to 3 with the real objfsd of layout 1
# (commit $OLD, built from this repository's history):
#   - old nodes write a tree (files of several sizes, an empty directory
#     and an empty one inside another, a renamed object, a hard link, a
#     symbolic link, a chmod) and hold copies on two nodes;
#   - a new node is refused while an old one is live, with the reason;
#   - the old nodes stop; new nodes mount their stores: the namespace is
#     migrated, every name, size, mode and checksum intact, and the
#     objects are fetched from their holders;
#   - an old node refuses the migrated namespace;
#   - kill -9 and a restart of a new node change nothing.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

OLD=b70fc9d
need git meson ninja python3 sha256sum

step "objfsd of layout 1 ($OLD)"
OLD_OBJFSD=$(old_objfsd "$OLD" "the last objfsd of layout 1")
NEW_OBJFSD=$OBJFSD

start_redis
OBJFSD=$OLD_OBJFSD
mount_objfs a "$REDIS_URL" "capacity=64M"
mount_objfs b "$REDIS_URL" "capacity=64M"
OBJFSD=$NEW_OBJFSD
A=$(mnt_of a)
B=$(mnt_of b)

step "old nodes write a tree"
upgrade_tree "$A" "$B" $((3 << 20))
tree_snapshot "$A" >"$T/before"
[ "$(wc -l <"$T/before")" -ge 17 ] || fail "the tree is too small: $(cat "$T/before")"
holders_big=$(rcli SMEMBERS "{objfs}:h:$(xattr "$A/d/e/big" user.objfs.id)" | sort | paste -sd,)
assert_eq "a,b" "$holders_big" "holders of big in layout 1"
assert_eq 0 "$(rcli EXISTS '{objfs}:layout')" "layout 1 has no layout key"

step "a new node is refused while the old ones are live"
rc=0
try_mount c "$REDIS_URL" "capacity=64M" || rc=$?
[ "$rc" != 0 ] || fail "a new node mounted a namespace of layout 1 with old nodes live"
assert_match "layout 1.*node '(a|b)'.*is live" "$MOUNT_OUT$(cat "$(log_of c)" 2>/dev/null)" \
	"why the new node was refused"
step "refused: $(grep -o "namespace.*" <<<"$MOUNT_OUT$(cat "$(log_of c)" 2>/dev/null)" | head -1)"
assert_eq 0 "$(rcli EXISTS '{objfs}:layout')" "nothing migrated while old nodes are live"

step "the old nodes stop; new nodes mount their stores"
umount_objfs a || fail "unmount a"
umount_objfs b || fail "unmount b"
mount_objfs a "$REDIS_URL" "capacity=64M"
assert_match "migrated to layout 2" "$(cat "$(log_of a)")" "a's log"
assert_match "migrated to layout 3" "$(cat "$(log_of a)")" "a's log"
step "$(grep -o "namespace.*migrated to layout.*" "$(log_of a)" | paste -sd' ')"
mount_objfs b "$REDIS_URL" "capacity=64M"
assert_eq 3 "$(rcli GET '{objfs}:layout')" "the layout key"
assert_eq "" "$(rcli --scan --pattern '{objfs}:o:*' | head -3)" "record keys left"
assert_eq "" "$(rcli --scan --pattern '{objfs}:h:*' | head -3)" "holder sets left"
tree_snapshot "$A" >"$T/after.a"
diff "$T/before" "$T/after.a" >&2 || fail "the tree on a changed across the migration"
tree_snapshot "$B" >"$T/after.b"
diff "$T/before" "$T/after.b" >&2 || fail "the tree on b changed across the migration"
big_id=$(xattr "$A/d/e/big" user.objfs.id)
assert_eq 0 "$(rcli EXISTS "{objfs}:x:$big_id")" "big's extras (its entry has its size)"
assert_match "^[0-9]+/big/@" "$(rec_of "$big_id")" "big's record"
assert_eq "a,b" "$(holders_of "$big_id")" "holders of big in layout 3"

step "a third new node fetches everything from the holders"
mount_objfs c "$REDIS_URL" "capacity=64M"
tree_snapshot "$(mnt_of c)" >"$T/after.c"
diff "$T/before" "$T/after.c" >&2 || fail "the tree read on c differs"
holders_is() { [ "$(holders_of "$1")" = "$2" ] || { echo "holders of $1: $(holders_of "$1")"; return 1; }; }
eventually 15 holders_is "$big_id" a,b,c

step "new writes on the migrated namespace"
echo new >"$A/d/new"
eventually 10 ls_has "$(mnt_of c)/d" new
assert_eq new "$(cat "$(mnt_of c)/d/new")" "a new file, read on c"

step "an old node refuses the migrated namespace"
OBJFSD=$OLD_OBJFSD
rc=0
try_mount old "$REDIS_URL" "capacity=64M" || rc=$?
OBJFSD=$NEW_OBJFSD
[ "$rc" != 0 ] || fail "an objfsd of layout 1 mounted a namespace of layout 3"
assert_match "nodes.*wrong type|register node" "$MOUNT_OUT$(cat "$(log_of old)" 2>/dev/null)" \
	"why the old node was refused"
step "the old node: $(grep -ho "corrupt record.*nodes.*\|cannot register.*" "$(log_of old)" <<<"$MOUNT_OUT" | head -2 | paste -sd' ')"
assert_match "layout 2" "$(rcli GET '{objfs}:nodes')" "the key the old node's log names"

step "kill -9 and a restart of a"
kill_node a KILL
eventually 10 bash -c "! ls '$A' >/dev/null 2>&1"
umount -l "$A" || true
mount_objfs a "$REDIS_URL" "capacity=64M"
tree_snapshot "$A" | grep -v '^\./d/new ' >"$T/after.restart"
diff "$T/before" "$T/after.restart" >&2 || fail "the tree on a changed across kill -9 and restart"
