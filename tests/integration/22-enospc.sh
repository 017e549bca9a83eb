#!/bin/bash
# Writing past capacity gives ENOSPC to the writer; the partial object is
# discarded (never published, space given back) and every other object
# stays intact.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need dd python3
start_redis
mount_objfs n1 "$REDIS_URL" "capacity=32M"
M=$(mnt_of n1)

mkdata "$T/a" $((8 << 20))
mkdata "$T/b" $((8 << 20))
mkdata "$T/big" $((40 << 20))
cp "$T/a" "$M/a"
mkdir "$M/dir"
cp "$T/b" "$M/dir/b"

NOSPC='No space left on device'

step "dd past capacity fails with ENOSPC"
assert_fails_with "$NOSPC" dd if="$T/big" of="$M/c" bs=1M status=none
assert_absent "$M/c"
if ls_has "$M" c; then fail "ls shows the failed object c"; fi
[ -z "$(rcli HGET '{objfs}:d:1' c)" ] || fail "the failed object c is linked in Redis"

step "cp past capacity fails with ENOSPC"
assert_fails_with "$NOSPC" cp "$T/big" "$M/dir/c2"
assert_absent "$M/dir/c2"

step "python sees ENOSPC from write or close"
python3 - "$M/c3" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
buf = os.urandom(1 << 20)
err = None
try:
    for i in range(64):
        os.write(fd, buf)
except OSError as e:
    err = e
try:
    os.close(fd)
except OSError as e:
    err = err or e
if err is None:
    sys.exit("64 MiB written into a 32 MiB store without an error")
if err.errno != errno.ENOSPC:
    sys.exit("expected ENOSPC, got " + errno.errorcode.get(err.errno, str(err.errno)))
PY
assert_absent "$M/c3"

step "the other objects are intact"
assert_same "$T/a" "$M/a"
assert_same "$T/b" "$M/dir/b"
assert_eq "a dir" "$(ls_of "$M")" "listing of the root"

step "the space of the failed writes was given back"
mkdata "$T/d" $((12 << 20))
assert_ok cp "$T/d" "$M/d"
assert_same "$T/d" "$M/d"
rm "$M/d"
assert_ok cp "$T/d" "$M/d2"
assert_same "$T/d" "$M/d2"
assert_same "$T/a" "$M/a"
assert_same "$T/b" "$M/dir/b"
