#!/bin/bash
# Once closed, a file is sealed: mode 0444, and every way of changing its
# bytes fails with EACCES (or EPERM), even for root, even after chmod.
# Without allow_overwrite, cp onto an existing name fails too.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 truncate dd
start_redis
mount_objfs n1 "$REDIS_URL" "capacity=128M"
M=$(mnt_of n1)
f=$M/sealed

mkdata "$T/src" 100000
cp "$T/src" "$f"
assert_eq 444 "$(stat -c %a "$f")" "mode of a sealed file"
assert_eq 0 "$(id -u)" "this test runs as root"

DENIED='EACCES|EPERM'
TXT='Permission denied|Operation not permitted'

step "open for writing"
assert_errno "$DENIED" 'os.open(A[0], os.O_WRONLY)' "$f"
assert_errno "$DENIED" 'os.open(A[0], os.O_RDWR)' "$f"
assert_errno "$DENIED" 'os.open(A[0], os.O_WRONLY | os.O_APPEND)' "$f"
assert_errno "$DENIED" 'os.open(A[0], os.O_WRONLY | os.O_TRUNC)' "$f"
assert_errno "$DENIED" 'os.open(A[0], os.O_RDONLY | os.O_TRUNC)' "$f"
assert_errno "$DENIED|EEXIST" 'os.open(A[0], os.O_WRONLY | os.O_CREAT)' "$f"

step "truncate"
assert_errno "$DENIED" 'os.truncate(A[0], 0)' "$f"
assert_errno "$DENIED" 'os.truncate(A[0], 1)' "$f"
assert_errno "$DENIED" 'os.truncate(A[0], 200000)' "$f"
assert_fails_with "$TXT" truncate -s 0 "$f"

step "shell and coreutils writers"
# shellcheck disable=SC2016
assert_fails_with "$TXT" sh -c 'echo x >>"$1"' sh "$f"
# shellcheck disable=SC2016
assert_fails_with "$TXT" sh -c 'echo x >"$1"' sh "$f"
assert_fails_with "$TXT" dd if=/dev/zero of="$f" bs=1 count=1 conv=notrunc status=none
mkdata "$T/other" 5000
assert_fails_with "$TXT" cp "$T/other" "$f"

step "chmod does not make it writable"
chmod 644 "$f" 2>/dev/null || true
chmod u+w "$f" 2>/dev/null || true
assert_errno "$DENIED" 'os.open(A[0], os.O_WRONLY)' "$f"
assert_errno "$DENIED" 'os.truncate(A[0], 0)' "$f"

step "the bytes never changed"
assert_same "$T/src" "$f"
assert_eq 100000 "$(stat -c %s "$f")" "size after the attempts"

step "a file still open for writing is writable until close"
python3 - "$M/pending" <<'PY'
import errno, os, sys
p = sys.argv[1]
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"hello ")
os.write(fd, b"world")
os.ftruncate(fd, 11)
os.close(fd)
try:
    os.open(p, os.O_WRONLY)
except OSError as e:
    if e.errno not in (errno.EACCES, errno.EPERM):
        sys.exit("reopen for write: unexpected " + errno.errorcode[e.errno])
else:
    sys.exit("reopen for write after close succeeded")
PY
assert_eq "hello world" "$(cat "$M/pending")" "content of the second file"
assert_eq 444 "$(stat -c %a "$M/pending")" "mode after close"

step "the files can still be removed"
rm "$f"
assert_absent "$f"
