#!/bin/bash
# mkdir, rmdir (ENOTEMPTY), rename of files and of directories with
# children, and the POSIX errors of each.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs n1 "$REDIS_URL" "capacity=64M"
M=$(mnt_of n1)

step "mkdir -p and files at every level"
mkdir -p "$M/a/b/c"
mkdata "$T/f1" 1000
mkdata "$T/f2" 200000
mkdata "$T/f3" 1
cp "$T/f1" "$M/a/f1"
cp "$T/f2" "$M/a/b/f2"
cp "$T/f3" "$M/a/b/c/f3"
[ -d "$M/a/b/c" ] || fail "a/b/c is not a directory"
assert_eq "b f1" "$(ls_of "$M/a")" "listing of a"
assert_fails_with 'File exists' mkdir "$M/a"
assert_fails_with 'File exists' mkdir "$M/a/f1"
assert_fails_with 'No such file or directory' mkdir "$M/nope/x"

step "rmdir of non-empty directories fails with ENOTEMPTY"
assert_fails_with 'Directory not empty' rmdir "$M/a"
assert_fails_with 'Directory not empty' rmdir "$M/a/b/c"
assert_errno 'ENOTEMPTY' 'os.rmdir(A[0])' "$M/a/b"
assert_errno 'ENOTDIR' 'os.rmdir(A[0])' "$M/a/f1"
assert_errno 'ENOENT' 'os.rmdir(A[0])' "$M/a/nope"
assert_errno 'EISDIR|EPERM' 'os.unlink(A[0])' "$M/a/b"
assert_same "$T/f3" "$M/a/b/c/f3"

step "rename a directory with children"
mv "$M/a" "$M/z"
assert_absent "$M/a"
assert_same "$T/f1" "$M/z/f1"
assert_same "$T/f2" "$M/z/b/f2"
assert_same "$T/f3" "$M/z/b/c/f3"

step "move a directory into another directory"
mkdir "$M/other"
mv "$M/z/b" "$M/other/bb"
assert_absent "$M/z/b"
assert_same "$T/f2" "$M/other/bb/f2"
assert_same "$T/f3" "$M/other/bb/c/f3"
assert_eq "f1" "$(ls_of "$M/z")" "listing of z after the move"

step "rename errors"
assert_errno 'EINVAL' 'os.rename(A[0], A[1])' "$M/other" "$M/other/bb/inside"
mkdir "$M/emptydir"
assert_errno 'EISDIR' 'os.rename(A[0], A[1])' "$M/z/f1" "$M/emptydir"
assert_errno 'ENOTDIR' 'os.rename(A[0], A[1])' "$M/emptydir" "$M/z/f1"
assert_errno 'ENOTEMPTY|EEXIST' 'os.rename(A[0], A[1])' "$M/emptydir" "$M/other"
assert_errno 'ENOENT' 'os.rename(A[0], A[1])' "$M/nope" "$M/nope2"
assert_errno 'ENOENT' 'os.rename(A[0], A[1])' "$M/z/f1" "$M/nope/f1"

step "a directory may replace an empty directory"
mkdir "$M/target"
mv -T "$M/emptydir" "$M/target"
assert_absent "$M/emptydir"
[ -d "$M/target" ] || fail "target is not a directory after the rename"
mkdir "$M/e2"
cp "$T/f1" "$M/e2/x"
python3 -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$M/e2" "$M/target"
assert_same "$T/f1" "$M/target/x"
assert_absent "$M/e2"

step "rename a file within and across directories"
mv "$M/z/f1" "$M/z/f1-new"
assert_absent "$M/z/f1"
assert_same "$T/f1" "$M/z/f1-new"
mv "$M/z/f1-new" "$M/other/bb/c/"
assert_same "$T/f1" "$M/other/bb/c/f1-new"
assert_eq "f1-new f3" "$(ls_of "$M/other/bb/c")" "listing of other/bb/c"

step "the same, seen from Redis after the kernel caches are bypassed"
mount_objfs n2 "$REDIS_URL" "capacity=64M"
M2=$(mnt_of n2)
assert_eq "other target z" "$(ls_of "$M2")" "root listing from a second mount"
assert_eq "f1-new f3" "$(ls_of "$M2/other/bb/c")" "other/bb/c from a second mount"
assert_eq 200000 "$(stat -c %s "$M2/other/bb/f2")" "size of other/bb/f2 from a second mount"

step "rm -r removes a whole tree; rmdir of empty directories works"
rm -r "$M/other"
assert_absent "$M/other"
rm "$M/target/x"
rmdir "$M/target"
rmdir "$M/z"
assert_eq "" "$(ls_of "$M")" "root listing at the end"
eventually 10 listing_is "$M2" ""
