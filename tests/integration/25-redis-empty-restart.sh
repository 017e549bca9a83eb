#!/bin/bash
# Redis restarts empty (all its data lost) while mounted.  meta/meta.h:
# the node sees the epoch change and re-registers the objects in its
# store.  Within ~15 s, mutations work again and a fresh node on the same
# Redis sees the old names with the same sizes and checksums.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

start_redis
mount_objfs n1 "$REDIS_URL" "capacity=64M"
M=$(mnt_of n1)

mkdata "$T/a" 300000
mkdata "$T/b" 7000
mkdata "$T/r" 4000
cp "$T/a" "$M/a"
mkdir -p "$M/d/e"
cp "$T/b" "$M/d/e/b"
cp "$T/r" "$M/r-old"
mv "$M/r-old" "$M/d/r-new"
csum_a=$(xattr "$M/a" user.objfs.checksum)

step "a writer keeps 'late' open across the outage"
mkdata "$T/late" 50000
python3 - "$T/late" "$M/late" "$T/go" <<'PY' &
import errno, os, sys, time
src, dst, go = sys.argv[1:4]
f = open(dst, "wb")
f.write(open(src, "rb").read())
for _ in range(600):
    if os.path.exists(go):
        break
    time.sleep(0.05)
try:
    f.close()
    sys.exit("close of 'late' while Redis is down: expected EIO, got success")
except OSError as e:
    # sealed and kept here; published when Redis is back
    if e.errno != errno.EIO:
        raise
PY
writer=$!
eventually 10 test -e "$M/late" || fail "the writer did not create late"

step "redis restarts empty; 'late' is closed while it is down: close(2) gives EIO"
# a key of the test's own, which no daemon writes: its absence after the
# restart shows Redis lost its data, however quickly n1 registers its
# objects again (counting keys raced with that)
rcli SET objfs-test-marker 1 >/dev/null
stop_redis nosave
touch "$T/go"
wait "$writer" || fail "the writer failed"
restart_redis
assert_eq 0 "$(rcli EXISTS objfs-test-marker)" "the test's marker key in the restarted Redis"

step "mutations work again within 15 s"
ok=0
for ((i = 0; i < 150; i++)); do
	if mkdir "$M/after" 2>/dev/null; then
		ok=1
		break
	fi
	sleep 0.1
done
[ "$ok" = 1 ] || fail "mkdir still fails 15 s after Redis came back empty: $(mkdir "$M/after" 2>&1)"

step "the objects are registered again"
ok=0
for ((i = 0; i < 150; i++)); do
	if [ -n "$(rcli HGET '{objfs}:d:1' a)" ]; then
		ok=1
		break
	fi
	sleep 0.1
done
[ "$ok" = 1 ] || fail "a is not in Redis 15 s after the restart (root: $(rcli HGETALL '{objfs}:d:1' | tr '\n' ' '))"
mount_objfs n2 "$REDIS_URL" "capacity=64M"
M2=$(mnt_of n2)
# n1 registers its objects one after another: 'a' there says nothing of
# the others yet
eventually 15 ls_has "$M2" a
eventually 15 ls_has "$M2/d/e" b
eventually 15 ls_has "$M2/d" r-new
eventually 15 ls_has "$M2" late || fail "'late', sealed while Redis was down, is not published"
ls_has "$M2" lost+found && fail "an object was registered twice (lost+found: $(ls "$M2/lost+found"))"
assert_same "$T/late" "$M/late"
ls_has "$M2" r-old && fail "a file renamed before the loss came back under its old name"
assert_eq 300000 "$(stat -c %s "$M2/a")" "size of a seen from n2"
assert_eq 7000 "$(stat -c %s "$M2/d/e/b")" "size of d/e/b seen from n2"
assert_eq "$csum_a" "$(xattr "$M2/a" user.objfs.checksum)" "checksum of a seen from n2"
assert_eq n1 "$(xattr "$M2/a" user.objfs.locations)" "holders of a seen from n2"
assert_same "$T/a" "$M/a"
assert_same "$T/b" "$M/d/e/b"
