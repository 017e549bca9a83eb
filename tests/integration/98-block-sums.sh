#!/bin/bash
# Issue 22: an object of more than one block (8 MiB) carries a sum per
# block in its record (field bsum), written by the seal that checksums
# it; a node that fetches it checks each block as it lands.  An object
# of one block has none.  An object recorded without them (by an older
# node, here: the field deleted) gets them from the first node that
# fetches it, the same as the writer's.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp
start_redis
for n in a b c; do mount_objfs "$n" "$REDIS_URL" "capacity=128M"; done
A=$(mnt_of a)

# id_of NAME: the object id of /NAME, from its directory entry
id_of() { rcli HGET '{objfs}:d:1' "$1" | sed -n 's/^f\([0-9]*\) .*/\1/p'; }

step "a writes an object of three blocks and one of one block"
mkdata "$T/big" $(((20 << 20) + 123))
mkdata "$T/small" $((8 << 20))
cp "$T/big" "$A/big"
cp "$T/small" "$A/small"
big=$(id_of big)
small=$(id_of small)
[ -n "$big" ] && [ -n "$small" ] || fail "no directory entries for big and small"
sums=$(rcli HGET "{objfs}:x:$big" bsum)
assert_match '^23:[0-9a-f]{48}$' "$sums"
assert_eq 0 "$(rcli HEXISTS "{objfs}:x:$small" bsum)" "block sums of a one-block object"

step "b fetches both; every block checks out"
eventually 10 ls_has "$(mnt_of b)" big
cmp "$T/big" "$(mnt_of b)/big" || fail "b read other bytes of big"
cmp "$T/small" "$(mnt_of b)/small" || fail "b read other bytes of small"
assert_eq 0 "$(status_of b checksum_failures)" "checksum failures on b"
assert_eq - "$(status_of b checksum_failures_by_peer)" "peers blamed on b"

step "without sums in its record (an older node's object), c's fetch records them"
rcli HDEL "{objfs}:x:$big" bsum >/dev/null
eventually 10 ls_has "$(mnt_of c)" big
cmp "$T/big" "$(mnt_of c)/big" || fail "c read other bytes of big"
eventually 10 [ "$(rcli HGET "{objfs}:x:$big" bsum)" = "$sums" ]

step "unlinked: the record goes, sums and all"
rm "$A/big"
eventually 10 [ "$(rec_exists "$big")$(rcli EXISTS "{objfs}:x:$big")" = 00 ]
