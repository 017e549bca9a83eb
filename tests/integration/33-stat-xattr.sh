#!/bin/bash
# stat fields of sealed files and directories, the user.objfs.* extended
# attributes (checked against an independent xxh3-128), and `objfs stat`.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
mount_objfs n1 "$REDIS_URL" "capacity=64M"
M=$(mnt_of n1)

mkdata "$T/f" $(((1 << 20) + 17))
mkdata "$T/g" 4096
: >"$T/empty"
t0=$(python3 -c 'import time; print(time.time_ns())')
cp "$T/f" "$M/f"
t1=$(python3 -c 'import time; print(time.time_ns())')
cp "$T/g" "$M/g"
cp "$T/empty" "$M/empty"
mkdir "$M/dir"

step "stat fields"
python3 - "$M" "$t0" "$t1" <<'PY'
import os, stat, sys, time
m, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = []
def check(cond, msg):
    if not cond:
        bad.append(msg)
for name, size in (("f", (1 << 20) + 17), ("g", 4096), ("empty", 0)):
    st = os.stat(f"{m}/{name}")
    check(stat.S_ISREG(st.st_mode), f"{name}: not a regular file (mode {oct(st.st_mode)})")
    check(stat.S_IMODE(st.st_mode) == 0o444, f"{name}: mode {oct(stat.S_IMODE(st.st_mode))}, want 0o444")
    check(st.st_size == size, f"{name}: size {st.st_size}, want {size}")
    check(st.st_nlink == 1, f"{name}: nlink {st.st_nlink}, want 1")
    check(st.st_blocks * 512 >= size, f"{name}: {st.st_blocks} blocks cannot hold {size} bytes")
    check(st.st_blocks * 512 <= size + (1 << 20), f"{name}: {st.st_blocks} blocks for {size} bytes")
    check(st.st_uid == 0 and st.st_gid == 0, f"{name}: owner {st.st_uid}:{st.st_gid}, want 0:0 (root wrote it)")
st = os.stat(f"{m}/f")
# mtime: between the start of the cp and the end of its close (1 s slack
# for clock granularity), and stable afterwards
check(t0 - 10**9 <= st.st_mtime_ns <= t1 + 10**9,
      f"f: mtime {st.st_mtime_ns} not within [{t0}, {t1}] (the write window)")
time.sleep(1.1)
st2 = os.stat(f"{m}/f")
check(st2.st_mtime_ns == st.st_mtime_ns, f"f: mtime changed from {st.st_mtime_ns} to {st2.st_mtime_ns} with nothing written")
d = os.stat(f"{m}/dir")
check(stat.S_ISDIR(d.st_mode), f"dir: not a directory (mode {oct(d.st_mode)})")
check(d.st_nlink >= 1, f"dir: nlink {d.st_nlink}")
r = os.stat(m)
check(stat.S_ISDIR(r.st_mode), "root: not a directory")
check(os.stat(f"{m}/f").st_ino != os.stat(f"{m}/g").st_ino, "f and g have the same inode number")
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

step "extended attributes"
for n in f g empty; do
	id=$(xattr "$M/$n" user.objfs.id) || fail "getfattr user.objfs.id of $n failed"
	assert_match '^[0-9]+$' "$id" "user.objfs.id of $n"
	assert_eq "$id" "$(stat -c %i "$M/$n")" "inode number of $n (meta.h: the inode is the object id)"
	sum=$(xattr "$M/$n" user.objfs.checksum) || fail "getfattr user.objfs.checksum of $n failed"
	assert_match '^[0-9a-f]{32}$' "$sum" "user.objfs.checksum of $n"
	assert_eq "$(xxh3_128 "$T/$n")" "$sum" "checksum of $n against an independent xxh3-128"
	assert_eq n1 "$(xattr "$M/$n" user.objfs.locations)" "user.objfs.locations of $n"
done
assert_ne "$(xattr "$M/f" user.objfs.id)" "$(xattr "$M/g" user.objfs.id)" "ids of f and g"

step "objfs stat"
need_built "$OBJFS_CLI"
out=$(objfs_cli stat "$M/f") || fail "objfs stat failed: $out"
assert_eq "$M/f" "$(field path <<<"$out")" "path: of objfs stat"
assert_eq "$(xattr "$M/f" user.objfs.id)" "$(field id <<<"$out")" "id: of objfs stat"
assert_eq $(((1 << 20) + 17)) "$(field size <<<"$out")" "size: of objfs stat"
assert_eq "$(xxh3_128 "$T/f")" "$(field checksum <<<"$out")" "checksum: of objfs stat"
assert_eq n1 "$(field holders <<<"$out")" "holders: of objfs stat"

out=$(objfs_cli stat "$M/f" "$M/g" "$M/empty") || fail "objfs stat of three files failed: $out"
assert_eq 3 "$(grep -c '^id:' <<<"$out")" "id: lines for three paths"
assert_eq 3 "$(grep -c '^checksum:' <<<"$out")" "checksum: lines for three paths"
grep -q "^checksum: *$(xxh3_128 "$T/g")\$" <<<"$out" || fail "objfs stat does not show g's checksum: $out"

rc=0
out=$(objfs_cli stat "$M/no-such-file" 2>&1) || rc=$?
assert_ne 0 "$rc" "exit status of objfs stat on a missing file"
assert_match 'no-such-file' "$out" "objfs stat error names the path"
