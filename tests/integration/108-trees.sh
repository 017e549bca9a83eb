#!/bin/bash
# Issue 23: trees as people copy them.  A tree with symbolic links
# (relative, absolute, dangling, to a directory), hard links, modes
# 0400-0755, two owners and old mtimes goes into the mount with cp -a,
# tar and rsync -aH, and comes back out; what comes out equals what went
# in (type, mode, owner, link count, mtime, target, size, and the bytes),
# on the writing node and on another.  A second rsync transfers no file.
# A tree shaped like the Hugging Face hub cache reads through its
# symlinks on another node, byte-exact.  Hard links: one name's unlink,
# rename and replace leave the others, on every node.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
need rsync
need tar
start_redis
# allow_overwrite: sealed files show the write bits they were given
mount_objfs a "$REDIS_URL" "capacity=128M,allow_other,allow_overwrite"
mount_objfs b "$REDIS_URL" "capacity=128M,allow_other,allow_overwrite"
A=$(mnt_of a)
B=$(mnt_of b)

# listing DIR: every entry below DIR, one line each, by path: type, mode,
# owner, group, links, mtime (ns), link target, size (a directory's size
# is the filesystem's own: left out)
listing() {
	(cd "$1" && find . -mindepth 1 -printf '%p %y %m %U %G %n %T@ %l %s\n' | sort |
		awk '$2 == "d" { $NF = "-" } { print }')
}
# same_tree FROM TO: listings equal, and every file's bytes
same_tree() {
	local want got
	want=$(listing "$1") got=$(listing "$2")
	if [ "$want" != "$got" ]; then
		diff <(echo "$want") <(echo "$got") | head -20
		return 1
	fi
	(cd "$1" && find . -type f -print0) | while IFS= read -r -d '' f; do
		cmp -s -- "$1/$f" "$2/$f" || { echo "bytes differ: $f"; return 1; }
	done
}

step "a source tree: symlinks of every kind, modes, two owners, old mtimes"
src=$T/src
mkdir -p "$src/sub/deeper" "$src/hub/blobs" "$src/hub/refs" "$src/hub/snapshots/abc123/nested"
head -c 70000 /dev/urandom >"$src/sub/big"
echo hello >"$src/plain"
echo secret >"$src/sub/mine"
printf 'x%.0s' $(seq 1 100) >"$src/sub/deeper/hundred"
for i in 1 2 3; do head -c $((i * 1000)) /dev/urandom >"$src/hub/blobs/blob$i"; done
echo abc123 >"$src/hub/refs/main"
ln -s ../../blobs/blob1 "$src/hub/snapshots/abc123/config.json"
ln -s ../../../blobs/blob2 "$src/hub/snapshots/abc123/nested/model.bin"
ln -s ../../blobs/blob3 "$src/hub/snapshots/abc123/tokenizer.json"
ln -s sub "$src/dirlink"
ln -s /nonexistent/target "$src/dangling"
ln -s /etc/hostname "$src/absolute"
ln -s "a name with spaces and ünïcödé" "$src/oddtarget"
ln "$src/sub/big" "$src/hardbig"
ln "$src/hub/blobs/blob2" "$src/sub/deeper/blob2-again"
ln "$src/hub/blobs/blob2" "$src/blob2-third"
chmod 0400 "$src/plain"
chmod 0640 "$src/sub/mine"
chmod 0755 "$src/sub/deeper/hundred"
chmod 0600 "$src/hub/blobs/blob2"
chmod 0700 "$src/sub/deeper"
chmod 0750 "$src/sub"
chown -R 1234:1234 "$src/sub"
chown -h 1235:1236 "$src/dangling"
find "$src" -mindepth 1 -exec touch -h -d '2019-05-06 07:08:09.123456789 UTC' {} +
touch -h -d '2018-01-02 03:04:05 UTC' "$src/sub/big" "$src/dirlink"
touch -d '2017-01-01 00:00:00 UTC' "$src/sub/deeper"
step "source tree: $(listing "$src" | wc -l) entries"

step "cp -a in, and back out"
assert_ok cp -a "$src" "$A/cp"
eventually 10 same_tree "$src" "$A/cp"
assert_ok cp -a "$A/cp" "$T/cp-back"
eventually 10 same_tree "$src" "$T/cp-back"
step "the other node sees the same tree"
eventually 15 same_tree "$src" "$B/cp"

step "tar in (create, extract, --compare), and back out"
assert_ok tar --format=posix -C "$src" -cf "$T/src.tar" .
mkdir "$A/tar"
assert_ok tar -C "$A/tar" -xpf "$T/src.tar"
eventually 10 same_tree "$src" "$A/tar"
assert_ok tar -C "$A/tar" --compare -f "$T/src.tar"
assert_ok tar --format=posix -C "$A/tar" -cf "$T/back.tar" .
mkdir "$T/tar-back"
assert_ok tar -C "$T/tar-back" -xpf "$T/back.tar"
same_tree "$src" "$T/tar-back" || fail "the tree tar took out differs"

step "rsync -aH in; a second run transfers no file"
assert_ok rsync -aH "$src/" "$A/rs/"
eventually 10 same_tree "$src" "$A/rs"
assert_ok rsync -aH --stats "$src/" "$A/rs/"
assert_match 'Number of regular files transferred: 0' "$CAPTURED" "the second rsync -aH"
assert_ok rsync -aH "$B/rs/" "$T/rs-back/"
same_tree "$src" "$T/rs-back" || fail "the tree rsync took out of b differs"

step "a Hugging Face hub cache, read through its symlinks on the other node"
for f in config.json nested/model.bin tokenizer.json; do
	assert_same "$(readlink -f "$src/hub/snapshots/abc123/$f")" "$B/cp/hub/snapshots/abc123/$f"
done
assert_eq "../../blobs/blob1" "$(readlink "$B/cp/hub/snapshots/abc123/config.json")" "a relative target"
assert_eq "$(cat "$src/plain")" "$(cat "$B/cp/plain")" "plain on b"
assert_eq "$(ls "$src/sub" | tr '\n' ' ')" "$(ls "$B/cp/dirlink/" | tr '\n' ' ')" "a link to a directory, followed"
assert_fails_with "No such file or directory" cat "$B/cp/dangling"

step "hard links: one name's unlink, rename and replace leave the others, on every node"
assert_eq 3 "$(stat -c %h "$A/cp/blob2-third")" "names of blob2"
assert_eq "$(stat -c %i "$A/cp/hub/blobs/blob2")" "$(stat -c %i "$B/cp/sub/deeper/blob2-again")" "one inode, on both nodes"
rm "$A/cp/hub/blobs/blob2"
eventually 10 sh -c "[ \"\$(stat -c %h '$B/cp/blob2-third')\" = 2 ]"
assert_same "$src/blob2-third" "$B/cp/blob2-third"
mv "$A/cp/sub/deeper/blob2-again" "$A/cp/renamed"
eventually 10 sh -c "[ -e '$B/cp/renamed' ] && [ ! -e '$B/cp/sub/deeper/blob2-again' ]"
assert_same "$src/blob2-third" "$B/cp/renamed"
echo other >"$T/otherfile"
cp "$T/otherfile" "$A/cp/other"
mv -f "$A/cp/other" "$A/cp/renamed"
assert_eq "other" "$(cat "$B/cp/renamed")" "a file renamed over one name"
eventually 10 sh -c "[ \"\$(stat -c %h '$B/cp/blob2-third')\" = 1 ]"
assert_same "$src/blob2-third" "$B/cp/blob2-third"
chmod 0640 "$A/cp/hardbig"
eventually 15 sh -c "[ \"\$(stat -c %a '$B/cp/sub/big')\" = 640 ]"
assert_errno EPERM 'os.link(A[0], A[1])' "$A/cp/sub" "$A/cp/sublink"
assert_errno EPERM 'os.link(A[0], A[1], follow_symlinks=False)' "$A/cp/dirlink" "$A/cp/dirlink2"
assert_errno EEXIST 'os.link(A[0], A[1])' "$A/cp/plain" "$A/cp/hardbig"

step "symlinks: rename, unlink, replace, and what they may not do"
ln -s plain "$A/cp/l1"
mv "$A/cp/l1" "$A/cp/l2"
eventually 10 sh -c "[ \"\$(readlink '$B/cp/l2')\" = plain ]"
assert_absent "$B/cp/l1"
assert_fails_with "File exists" ln -s other "$A/cp/l2"
rm "$A/cp/l2"
eventually 10 sh -c "[ ! -L '$B/cp/l2' ]"
long=$(printf 'y%.0s' $(seq 1 4095))
assert_ok ln -s "$long" "$A/cp/long"
assert_eq 4095 "$(readlink "$B/cp/long" | tr -d '\n' | wc -c)" "a target of 4,095 bytes"
assert_errno ENAMETOOLONG 'os.symlink("z" * 4096, A[0])' "$A/cp/toolong"
assert_errno ELOOP 'os.open(A[0], os.O_RDONLY | os.O_NOFOLLOW)' "$A/cp/dirlink"
# a symlink's owner changes (lchown); no key is left behind by unlink
chown -h 1240:1241 "$A/cp/absolute"
eventually 15 sh -c "[ \"\$(stat -c '%u %g' '$B/cp/absolute')\" = '1240 1241' ]"
nlinks=$(rcli --raw KEYS '{objfs}:s:*' | grep -c . || true)
rm -rf "$A/cp" "$A/tar" "$A/rs"
left=$(rcli --raw KEYS '{objfs}:s:*' | grep -c . || true)
assert_eq 0 "$left" "symbolic links' keys left after rm -rf"
step "removed $nlinks symbolic links' keys with their trees"
