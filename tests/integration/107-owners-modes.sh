#!/bin/bash
# Issue 23: files and directories have owners, modes and times of their
# own.  A file or directory records its creator's uid and gid and the
# mode it was made with; chmod, chown and touch change them, on every
# node; the kernel enforces them (default_permissions), so a user writes
# where it may and gets EACCES elsewhere.  A sealed object shows no write
# bits (its bytes never change, nor its checksum).  Entries written
# before owners existed show the mount's uid=, gid= and umask=.  mknod,
# mkfifo and bind get EPERM, an open with access mode 3 (O_WRONLY | O_RDWR) EINVAL, never
# ENOSYS.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
need setpriv
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M,allow_other"
mount_objfs b "$REDIS_URL" "capacity=64M,allow_other"
A=$(mnt_of a)
B=$(mnt_of b)
# the users below must reach the mounts
chmod 755 "$T"

# "$AS" UID:GID CMD...: CMD as that user (no supplementary groups), with
# umask 022; a program, so that assert_ok and eventually can run it
AS=$T/as-user
cat >"$AS" <<'EOF'
#!/bin/sh
who=$1
shift
exec setpriv --reuid="${who%:*}" --regid="${who#*:}" --clear-groups \
	sh -c 'umask 022; exec "$@"' sh "$@"
EOF
chmod 755 "$AS"
owner_mode() { stat -c '%u %g %a' -- "$1"; }
is_owner_mode() { [ "$(owner_mode "$1")" = "$2" ] || { echo "$1: $(owner_mode "$1")"; return 1; }; }

step "mkdir and create record their creator and mode"
mkdir "$A/d"
assert_eq "0 0 755" "$(owner_mode "$A/d")" "a new directory of root"
mkdir -m 0750 "$A/m"
assert_eq "0 0 750" "$(owner_mode "$A/m")" "mkdir -m 0750"
assert_errno OK 'os.close(os.open(A[0], os.O_CREAT | os.O_WRONLY, 0o600))' "$A/p600"
assert_eq "0 0 400" "$(owner_mode "$A/p600")" "a sealed file made with 0600 (no write bits once sealed)"

step "chown gives a user a place to write"
chown 1234:1234 "$A/d"
assert_eq "1234 1234 755" "$(owner_mode "$A/d")" "d after chown"
assert_ok "$AS" 1234:1234 sh -c "echo one > '$A/d/x'"
assert_eq "one" "$(cat "$A/d/x")" "x as written by 1234"
assert_eq "1234 1234 444" "$(owner_mode "$A/d/x")" "x, sealed, of its writer"
assert_ok "$AS" 1234:1234 mkdir "$A/d/sub"
assert_eq "1234 1234 755" "$(owner_mode "$A/d/sub")" "a directory 1234 made"
assert_fails_with "Permission denied" "$AS" 1235:1235 sh -c "echo two > '$A/d/y'"
assert_fails_with "Permission denied" "$AS" 1235:1235 mkdir "$A/d/z"
assert_fails_with "Permission denied" "$AS" 1235:1235 rm -f "$A/d/x"
assert_fails_with "Operation not permitted" "$AS" 1235:1235 chmod 777 "$A/d"
assert_exists "$A/d/x"

step "the other node sees owners and modes, and enforces them"
eventually 15 is_owner_mode "$B/d" "1234 1234 755"
eventually 15 is_owner_mode "$B/d/x" "1234 1234 444"
assert_eq "one" "$("$AS" 1235:1235 cat "$B/d/x")" "x read by 1235 on b"
assert_fails_with "Permission denied" "$AS" 1235:1235 sh -c "echo two > '$B/d/y'"

step "chmod on one node is seen on the other"
sum_before=$(getfattr --only-values -n user.objfs.checksum "$A/d/x")
assert_ok "$AS" 1234:1234 chmod 0700 "$A/d"
assert_ok "$AS" 1234:1234 chmod 0640 "$A/d/x"
assert_eq "1234 1234 700" "$(owner_mode "$A/d")" "d after chmod 0700"
assert_eq "1234 1234 440" "$(owner_mode "$A/d/x")" "x after chmod 0640 (sealed: no write bit)"
eventually 15 is_owner_mode "$B/d" "1234 1234 700"
eventually 15 is_owner_mode "$B/d/x" "1234 1234 440"
assert_fails_with "Permission denied" "$AS" 1235:1235 ls "$B/d"
assert_fails_with "Permission denied" "$AS" 1235:1235 cat "$A/d/x"
assert_eq "one" "$("$AS" 1234:1234 cat "$B/d/x")" "x read by its owner on b"
assert_eq "$sum_before" "$(getfattr --only-values -n user.objfs.checksum "$B/d/x")" \
	"x's checksum after chmod, on b"

step "a directory all may write: 1235 writes there from b"
assert_ok "$AS" 1234:1234 chmod 0777 "$A/d"
eventually 15 is_owner_mode "$B/d" "1234 1234 777"
assert_ok "$AS" 1235:1235 sh -c "echo two > '$B/d/y'"
eventually 15 is_owner_mode "$A/d/y" "1235 1235 444"
assert_eq "two" "$(cat "$A/d/y")" "y on a"

step "a user deletes its own file, and renames in a directory it may write"
assert_ok "$AS" 1235:1235 sh -c "echo three > '$B/d/z'"
assert_ok "$AS" 1235:1235 mv "$B/d/z" "$B/d/z2"
assert_ok "$AS" 1235:1235 rm "$B/d/z2"
eventually 15 sh -c "[ ! -e '$A/d/z2' ]"
assert_ok "$AS" 1234:1234 mkdir "$A/d/sub/own"
assert_ok "$AS" 1234:1234 rmdir "$A/d/sub/own"

step "chown of a file, by root; a user may not give a file away"
chown 1236:1237 "$A/d/y"
assert_eq "1236 1237 444" "$(owner_mode "$A/d/y")" "y after chown"
eventually 15 is_owner_mode "$B/d/y" "1236 1237 444"
assert_fails_with "Operation not permitted" "$AS" 1234:1234 chown 1235 "$A/d/x"

step "times: touch -d sets mtime and atime of files and directories, on every node"
touch -d '2020-01-01 00:00:00 UTC' "$A/d/x"
assert_eq "1577836800" "$(stat -c %Y "$A/d/x")" "x's mtime"
assert_eq "1577836800" "$(stat -c %X "$A/d/x")" "x's atime"
eventually 15 sh -c "[ \"\$(stat -c %Y '$B/d/x')\" = 1577836800 ]"
assert_eq "one" "$(cat "$B/d/x")" "x's bytes after touch"
touch -m -d '2021-06-01 12:00:00 UTC' "$A/m"
assert_eq "1622548800" "$(stat -c %Y "$A/m")" "m's mtime"
eventually 15 sh -c "[ \"\$(stat -c %Y '$B/m')\" = 1622548800 ]"
ctime_before=$(stat -c %Z "$A/d/x")
sleep 1.1
chmod 0644 "$A/d/x"
assert_le $((ctime_before + 1)) "$(stat -c %Z "$A/d/x")" "x's ctime moved on with chmod"
assert_eq "1577836800" "$(stat -c %Y "$A/d/x")" "x's mtime after chmod"

step "what a tool may try gets a documented errno, never ENOSYS"
assert_errno EPERM 'os.mkfifo(A[0])' "$A/fifo"
assert_errno EPERM 'os.mknod(A[0], 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 3))' "$A/chr"
assert_errno EPERM 'import socket; socket.socket(socket.AF_UNIX).bind(A[0])' "$A/sock"
assert_absent "$A/fifo"
# (O_RDONLY is 0 on Linux: O_RDONLY | O_RDWR is O_RDWR, which a sealed
# file refuses with EACCES; the access mode that is neither is 3)
assert_errno EINVAL 'os.open(A[0], os.O_RDWR | os.O_WRONLY)' "$A/d/x"
assert_errno EACCES 'os.open(A[0], os.O_RDONLY | os.O_RDWR)' "$A/d/x"

step "entries from before owners show the mount's uid=, gid= and umask="
# an old namespace: no /attr on the directory, and an entry without its
# owner (the format of older versions)
dir_id=$(stat -c %i "$A/m")
echo old >"$A/m/old"
file_id=$(stat -c %i "$A/m/old")
pfx='{objfs}'
v=$(rcli --raw HGET "$pfx:d:$dir_id" old)
assert_match '^f[0-9]+ [0-9]+ -?[0-9]+ [0-9a-f]+ [^ ]* [0-9]+ [0-9]+ [0-7]+( -?[0-9]+ -?[0-9]+)?$' "$v" \
	"an entry with its owner, mode and times"
rcli HSET "$pfx:d:$dir_id" old "$(cut -d' ' -f1-5 <<<"$v")" >/dev/null
rcli HDEL "$pfx:d:$dir_id" /attr >/dev/null
umount_objfs b || fail "unmount b"
mount_objfs b "$REDIS_URL" "capacity=64M,allow_other,uid=1234,gid=1240,umask=027"
assert_eq "1234 1240 750" "$(owner_mode "$B/m")" "a directory without an owner, with uid/gid/umask"
assert_eq "1234 1240 440" "$(owner_mode "$B/m/old")" "a file without an owner"
assert_eq "old" "$("$AS" 1234:1240 cat "$B/m/old")" "read by the mount's owner"
assert_fails_with "Permission denied" "$AS" 1299:1299 cat "$B/m/old"
assert_eq "1234 1234 444" "$(owner_mode "$B/d/x")" "a file with an owner keeps it"

step "bad options are refused"
mkdir -p "$T/c"
for bad in uid=abc gid=-1 umask=0999 umask=12345 uid=4294967295; do
	rc=0
	capture 20 "$OBJFSD" "$REDIS_URL" "$T/c" -o "$(with_opts "$(default_opts c)" "$bad")" || rc=$?
	[ "$rc" != 0 ] || fail "objfsd accepted -o $bad"
	grep -q "invalid option '${bad%%=*}=" <<<"$CAPTURED" || fail "no clear message for $bad: $CAPTURED"
done
