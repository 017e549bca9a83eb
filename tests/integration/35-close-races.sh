#!/bin/bash
# close(2) returns before the daemon seals the file (FUSE sends RELEASE
# asynchronously).  A rename or unlink that arrives while the seal runs
# must wait for it: no crash, no lost rename, and an unlinked name must
# not come back.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
mount_objfs n1 local "capacity=256M"
M=$(mnt_of n1)

step "write, close, rename at once (200 times)"
timeout -k 5 120 python3 - "$M" <<'PY' || fail "close-then-rename loop failed"
import os, sys
m = sys.argv[1]
os.mkdir(f"{m}/r")
data = os.urandom(65536)
for i in range(200):
    with open(f"{m}/r/t{i}", "wb") as f:
        f.write(data)
    os.rename(f"{m}/r/t{i}", f"{m}/r/f{i}")
names = sorted(os.listdir(f"{m}/r"))
want = sorted(f"f{i}" for i in range(200))
if names != want:
    sys.exit(f"after renames: {len(names)} names, first odd ones: {[n for n in names if n not in want][:5]}")
for i in (0, 99, 199):
    with open(f"{m}/r/f{i}", "rb") as f:
        if f.read() != data:
            sys.exit(f"f{i}: bytes differ")
PY

step "write, close, unlink at once (200 times)"
timeout -k 5 120 python3 - "$M" <<'PY' || fail "close-then-unlink loop failed"
import os, sys, time
m = sys.argv[1]
os.mkdir(f"{m}/u")
data = os.urandom(1 << 20)
for i in range(200):
    with open(f"{m}/u/x{i}", "wb") as f:
        f.write(data)
    os.unlink(f"{m}/u/x{i}")
time.sleep(1)
left = os.listdir(f"{m}/u")
if left:
    sys.exit(f"{len(left)} unlinked names came back, e.g. {left[:5]}")
PY
assert_eq 200 "$(objfs_cli status "$M" | field objects)" "objects in the store (only the renamed ones)"
mountpoint -q "$M" || fail "the mount died"
