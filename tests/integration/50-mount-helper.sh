#!/bin/bash
# mount -t objfs (through /sbin/mount.objfs) and an fstab line mounted with
# mount -T; umount(8) stops everything the mount started.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need mount umount
use_built_mount_helper

mkdata "$T/data" 300000

# mounted_ok NAME: the mount is there, is FUSE, and round-trips data
mounted_ok() {
	local m
	m=$(mnt_of "$1")
	wait_mounted "$m" 10 || fail "$m is not mounted"
	_remember_mount "$1"
	assert_match '^fuse(\.objfs)?$' "$(mount_fstype "$m")" "fstype of $m"
	cp "$T/data" "$m/f"
	assert_same "$T/data" "$m/f"
	assert_eq 444 "$(stat -c %a "$m/f")" "mode of a sealed file"
}

step "mount -t objfs local MNT -o capacity=1G,..."
mkdir -p "$(mnt_of h1)"
assert_ok mount -t objfs local "$(mnt_of h1)" -o "capacity=1G,$(default_opts h1)"
mounted_ok h1
df_size=$(df -B1 --output=size "$(mnt_of h1)" | tail -n 1 | tr -d ' ')
assert_le $((1 << 29)) "$df_size" "df size of a capacity=1G mount"
assert_le "$df_size" $((1 << 30)) "df size of a capacity=1G mount"

step "umount(8) stops the daemon and its redis-server"
umount_objfs h1 umount || fail "umount left processes behind"

step "mount(8) passes a bad option's error through"
mkdir -p "$(mnt_of h2)"
rc=0
capture 60 mount -t objfs local "$(mnt_of h2)" -o "$(default_opts h2),bogus_opt" || rc=$?
out=$CAPTURED
assert_ne 0 "$rc" "exit status of mount -t objfs with a bogus option"
assert_match bogus_opt "$out" "mount's error message"
if is_mounted "$(mnt_of h2)"; then fail "mounted with a bogus option"; fi

step "an fstab line, mounted with mount -T"
mkdir -p "$(mnt_of h3)"
printf '# objfs test fstab\nlocal %s objfs %s 0 0\n' "$(mnt_of h3)" \
	"capacity=256M,$(default_opts h3),noatime,nosuid,nodev,_netdev,nofail" >"$T/fstab"
cat "$T/fstab" >&2
assert_ok mount -T "$T/fstab" "$(mnt_of h3)"
mounted_ok h3
step "umount(8) of the fstab mount"
umount_objfs h3 umount || fail "umount left processes behind"

step "an fstab line with an external redis and mount -a -T"
start_redis
mkdir -p "$(mnt_of h4)"
printf '%s %s objfs %s 0 0\n' "$REDIS_URL" "$(mnt_of h4)" \
	"capacity=64M,$(default_opts h4),defaults" >"$T/fstab2"
assert_ok mount -a -T "$T/fstab2"
mounted_ok h4
[ -n "$(rcli HGET '{objfs}:d:1' f)" ] || fail "the fstab mount did not use the redis from its fstab line"
umount_objfs h4 umount || fail "umount left processes behind"

step "mount.objfs SPEC MNT -o A -o B takes both lists, as mount(8) does (issue 19)"
mkdir -p "$(mnt_of h5)"
assert_ok "$MOUNT_HELPER" local "$(mnt_of h5)" -o capacity=64M,allow_overwrite \
	-o "$(default_opts h5)"
wait_mounted "$(mnt_of h5)" 10 || fail "$(mnt_of h5) is not mounted"
_remember_mount h5
st=$(objfs_cli status "$(mnt_of h5)") || fail "objfs status failed: $st"
assert_eq $((64 << 20)) "$(field capacity <<<"$st")" "capacity: of a mount with capacity=64M in the first -o"
echo v1 >"$(mnt_of h5)/g"
echo v2 >"$(mnt_of h5)/g" || fail "overwrite refused on a mount with allow_overwrite in the first -o"
assert_eq v2 "$(cat "$(mnt_of h5)/g")" "content after an overwrite"
umount_objfs h5 umount || fail "umount left processes behind"

step "mount.objfs refuses an option given twice with different values"
rc=0
capture 60 "$MOUNT_HELPER" local "$(mnt_of h5)" -o capacity=64M -o "capacity=128M,$(default_opts h5)" || rc=$?
assert_eq 1 "$rc" "exit status of mount.objfs with capacity=64M and capacity=128M ($CAPTURED)"
assert_match "capacity.*'64M'.*'128M'" "$CAPTURED" "mount.objfs's error message"
if is_mounted "$(mnt_of h5)"; then fail "mounted with capacity given twice"; fi
