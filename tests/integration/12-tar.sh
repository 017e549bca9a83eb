#!/bin/bash
# A tree (nested directories, many files, odd names and sizes) goes in
# with tar and comes back out with tar identical (diff -r).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need tar diff
start_redis_or_local
mount_objfs n1 "$REDIS_URL" "capacity=256M"
M=$(mnt_of n1)

step "make a source tree"
src=$T/src
mkdir -p "$src/a/b/c" "$src/a/empty-dir" "$src/x y" "$src/ünï"
mkdata "$src/top" 100
: >"$src/a/empty-file"
mkdata "$src/a/one" 1
mkdata "$src/a/b/page" 4096
mkdata "$src/a/b/c/big" $((3 << 20))
mkdata "$src/a/b/c/odd" 123457
mkdata "$src/x y/with space" 999
mkdata "$src/ünï/ñame" 5000
for i in $(seq 1 40); do mkdata "$src/a/b/many.$i" $((i * 1000)); done

step "tar into the mount"
mkdir "$M/tree"
# --touch/--no-same-*: the data is what is under test here, not utimes
# or chmod of sealed files.
tar -C "$src" -cf - . | timeout -k 5 120 tar -C "$M/tree" -xf - --no-same-owner --no-same-permissions --touch ||
	fail "tar extraction into the mount failed"
diff -r "$src" "$M/tree" || fail "tree in the mount differs from the source"

step "tar out of the mount"
timeout -k 5 120 tar -C "$M" -cf "$T/out.tar" tree || fail "tar of the mounted tree failed"
mkdir "$T/out"
tar -C "$T/out" -xf "$T/out.tar" || fail "extracting the archive made from the mount failed"
diff -r "$src" "$T/out/tree" || fail "tree extracted from the mount's archive differs"

step "the listing matches"
(cd "$src" && find . | sort) >"$T/list.src"
(cd "$M/tree" && find . | sort) >"$T/list.mnt"
diff "$T/list.src" "$T/list.mnt" || fail "find listings differ"
