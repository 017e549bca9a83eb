#!/bin/bash
# Unmount stops the daemon (no objfsd or redis-server left), and a new
# mount with the same store= finds every object again, byte-exact, with
# the same checksums and mtimes: with an external Redis (which kept the
# names) and with `local` (whose Redis starts empty, so the daemon
# re-registers the objects from its store).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
mkdata "$T/a" $((1 << 20))
mkdata "$T/b" $(((3 << 20) + 5))
mkdata "$T/c" 1

fill() {
	local m=$1
	cp "$T/a" "$m/a"
	mkdir -p "$m/d/e"
	cp "$T/b" "$m/d/e/b"
	cp "$T/c" "$m/d/c"
	: >"$m/empty"
}

# snapshot MNT: path, size, mtime (ns), checksum of every file
snapshot() {
	(cd "$1" && find . -type f | sort | while read -r f; do
		printf '%s %s %s\n' "$f" "$(stat -c '%s %.9Y' "$f")" \
			"$(getfattr --only-values -n user.objfs.checksum "$f")"
	done)
}

check_same() {
	local m=$1
	assert_same "$T/a" "$m/a"
	assert_same "$T/b" "$m/d/e/b"
	assert_same "$T/c" "$m/d/c"
	assert_eq 0 "$(stat -c %s "$m/empty")" "size of empty"
	assert_eq "a d empty" "$(ls_of "$m")" "root listing"
	assert_eq "c e" "$(ls_of "$m/d")" "listing of d"
}

for kind in external local; do
	if [ "$kind" = external ]; then
		start_redis_tcp
		spec=$REDIS_URL
		name=ext
	else
		spec=local
		name=loc
	fi
	step "$kind: first mount"
	mount_objfs "$name" "$spec" "capacity=64M"
	M=$(mnt_of "$name")
	[ -n "${MOUNT_PIDS[$name]}" ] || fail "no objfsd process found for the mount $M"
	if [ "$kind" = local ]; then
		found=
		for p in ${MOUNT_PIDS[$name]}; do
			[ "$(cat "/proc/$p/comm")" = redis-server ] && found=$p
		done
		[ -n "$found" ] || fail "no redis-server found for the local mount (expected one on $(rundir_of "$name")/redis.sock)"
	fi
	fill "$M"
	check_same "$M"
	snapshot "$M" >"$T/snap.$name.1"

	step "$kind: unmount leaves no processes"
	umount_objfs "$name" || fail "$kind: unmount did not stop the mount's processes"
	if is_mounted "$M"; then fail "$M is still mounted"; fi

	step "$kind: mount again with the same store"
	mount_objfs "$name" "$spec" "capacity=64M"
	check_same "$M"
	snapshot "$M" >"$T/snap.$name.2"
	diff "$T/snap.$name.1" "$T/snap.$name.2" >&2 || fail "$kind: sizes, mtimes or checksums changed across the remount"

	step "$kind: still writable after the remount"
	cp "$T/c" "$M/after"
	assert_same "$T/c" "$M/after"
	umount_objfs "$name" || fail "$kind: second unmount did not stop the mount's processes"
	stop_redis
done

step "local: the remounted daemon's Redis is new, not left over"
mount_objfs loc local "capacity=64M"
assert_same "$T/c" "$(mnt_of loc)/after"
