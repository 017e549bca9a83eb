#!/bin/bash
# Redis loses its data (FLUSHALL) and two nodes register their objects
# again a batch at a time (meta_reregister_batch()): the namespace comes
# back as it was, byte for byte, with names that have spaces, UTF-8,
# '%' and ':' in them and a name of 255 bytes, in nested directories
# shared by both nodes; first with both nodes up (a resync), then with
# both restarted.  A name two objects want (the catalog of a node that
# was away still has the object another node replaced) goes to the
# first that registers, and the other to /lost+found, never over it.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)

step "a and b write objects in nested directories with odd names"
python3 - "$A" "$B" <<'PY' || fail "writing the tree failed"
import os, sys
names = ["plain", "with space", "ütf-8 ✓ ñ", "pct%20%s%%", "co:lon:", "a b:c%d é",
         "é" * 127 + "x"]  # 255 bytes
for root, who, n in ((sys.argv[1], "a", 1200), (sys.argv[2], "b", 300)):
    for i in range(n):
        d = os.path.join(root, names[i % 6], names[(i // 6) % 6], "lvl %d" % (i % 4))
        os.makedirs(d, exist_ok=True)
        name = names[i % 7] if i < 7 and who == "a" else "%s %d:%s%%" % (who, i, names[i % 6])
        with open(os.path.join(d, name), "w") as f:
            f.write("%s object %d %s\n" % (who, i, name) * (1 + i % 5))
PY
eventually 30 status_is a objects 1200
eventually 30 status_is b objects 300

# snapshot MNT: every directory and file under MNT, a file with its
# size and the sha256 of its bytes, sorted
snapshot() {
	python3 - "$1" <<'PY'
import hashlib, os, sys
root = sys.argv[1]
out = []
for d, dirs, files in os.walk(root):
    rel = os.path.relpath(d, root)
    out.append("d %s" % rel)
    for f in files:
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            data = fh.read()
        out.append("f %s %d %s" % (os.path.join(rel, f), len(data),
                                   hashlib.sha256(data).hexdigest()))
print("\n".join(sorted(out)))
PY
}
step "b reads a third of a's objects (a copy of each on b too)"
python3 - "$B" <<'PY' || fail "reading on b failed"
import os, sys
k = 0
for d, dirs, files in os.walk(sys.argv[1]):
    for f in files:
        k += 1
        if k % 3 == 0:
            open(os.path.join(d, f), "rb").read()
PY
snapshot "$A" >"$T/before.a" || fail "snapshot of a failed"
snapshot "$B" >"$T/before.b" || fail "snapshot of b failed"
cmp -s "$T/before.a" "$T/before.b" || fail "a and b see different namespaces before FLUSHALL"
assert_eq 1500 "$(grep -c '^f ' "$T/before.a")" "files before FLUSHALL"

reconciles() { grep -c 'reconciled .* objects with Redis' "$(log_of "$1")"; }
# reconciled_since NAME N: NAME reconciled more than N times
reconciled_since() { [ "$(reconciles "$1")" -gt "$2" ]; }
# same NAME FILE: NAME's namespace is FILE's, and no error was logged
same() {
	snapshot "$(mnt_of "$1")" >"$T/now.$1" || return 1
	cmp -s "$T/now.$1" "$2" || { diff "$2" "$T/now.$1" | head -20; return 1; }
}

step "FLUSHALL with both nodes up: both register their objects again"
ra=$(reconciles a)
rb=$(reconciles b)
rcli FLUSHALL >/dev/null || fail "FLUSHALL failed"
eventually 60 reconciled_since a "$ra" || fail "a did not reconcile after FLUSHALL"
eventually 60 reconciled_since b "$rb" || fail "b did not reconcile after FLUSHALL"
eventually 20 same a "$T/before.a" || fail "a's namespace after FLUSHALL is not what it was"
eventually 20 same b "$T/before.a" || fail "b's namespace after FLUSHALL is not what it was"
assert_absent "$A/lost+found"

step "both restart after FLUSHALL"
umount_objfs a || fail "unmount of a failed"
umount_objfs b || fail "unmount of b failed"
rcli FLUSHALL >/dev/null || fail "FLUSHALL failed"
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
eventually 60 reconciled_since a 0 || fail "a did not reconcile after its restart"
eventually 60 reconciled_since b 0 || fail "b did not reconcile after its restart"
eventually 20 same a "$T/before.a" || fail "a's namespace after restart and FLUSHALL is not what it was"
eventually 20 same b "$T/before.a" || fail "b's namespace after restart and FLUSHALL is not what it was"

step "a name two objects want: the one registered first keeps it"
echo "old bytes" >"$A/contested"
echo "other bytes" >"$A/other"
eventually 15 ls_has "$B" contested
umount_objfs a || fail "unmount of a failed"
# b replaces it while a is away: a's catalog still names the old object
rm "$B/contested"
echo "new bytes" >"$B/contested"
rcli FLUSHALL >/dev/null || fail "FLUSHALL failed"
rb=$(reconciles b)
eventually 60 reconciled_since b "$rb" || fail "b did not reconcile after FLUSHALL"
eventually 15 test -e "$B/plain" || fail "b's objects are not back"
mount_objfs a "$REDIS_URL" "capacity=256M"
eventually 60 reconciled_since a 0 || fail "a did not reconcile after its restart"
assert_eq "new bytes" "$(cat "$B/contested")" "the contested name on b"
assert_eq "new bytes" "$(cat "$A/contested")" "the contested name on a"
assert_eq "other bytes" "$(cat "$B/other")" "an object a registered again, on b"
lf=$(ls "$A/lost+found" 2>/dev/null)
assert_match '^contested\.objfs-[0-9]+$' "$lf" "what went to /lost+found"
assert_eq "old bytes" "$(cat "$A/lost+found/$lf")" "the old object in /lost+found"
