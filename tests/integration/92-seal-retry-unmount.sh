#!/bin/bash
# Adversarial (rule 1 of "seal integrity"): a seal that fails at RELEASE,
# after close(2) returned 0, "is never given up".  The setup of
# 78-seal-retry: a store on a tmpfs with few inodes, so the seal of an
# object written through a mapping (sealed at the RELEASE after munmap)
# cannot write its catalog record and is retried by the tick.  Unmounting
# the node meanwhile (fusermount -u, a reboot, a service restart) frees
# the pending object with no catalog record; the next mount of the same
# store, with room, has it nowhere: not under its name, not in
# /lost+found, on neither node.  The writer's close(2) and munmap(2)
# returned 0.  The log says nothing of the loss.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

MAPWRITE=$OBJFS_BUILD/tests/objfs-mapwrite
need_built "$MAPWRITE"
start_redis
st=$T/store
mkdir "$st"
mount -t tmpfs -o size=64M,nr_inodes=48 objfs-test "$st" || skip "cannot mount a tmpfs here"
on_exit "umount -l '$st'"
mount_objfs a "$REDIS_URL" "capacity=32M,noprefault,store=$st"
mount_objfs b "$REDIS_URL" "capacity=32M"
A=$(mnt_of a)
B=$(mnt_of b)

fill() {
	local i=0
	mkdir -p "$st/fill"
	while { : >"$st/fill/$i"; } 2>/dev/null; do
		i=$((i + 1))
		[ "$i" -lt 1000 ] || fail "the store's tmpfs has no inode limit"
	done
}
free() { ls "$st/fill" | head -n "$1" | while read -r f; do rm "$st/fill/$f"; done; }

step "a writer through a mapping whose seal at RELEASE fails"
fill
free 1
capture 60 "$MAPWRITE" "$A/mapped" 65536 z || fail "objfs-mapwrite: $CAPTURED"
eventually 30 grep -q "cannot seal object .*'mapped'.*tried again" "$(log_of a)"

step "unmount node a while the seal is retried, give the store room, mount it again"
umount_objfs a || fail "unmounting a failed"
free 10
mount_objfs a "$REDIS_URL" "capacity=32M,noprefault,store=$st"
found() {
	[ -e "$A/mapped" ] || ls "$A/lost+found" 2>/dev/null | grep -q . ||
		ls "$B/lost+found" 2>/dev/null | grep -q . || {
		echo "the object whose writer got 0 from close(2) and munmap(2) is gone:" \
			"a holds '$(ls "$A" | tr '\n' ' ')', a's /lost+found '$(ls "$A/lost+found" 2>&1 | tr '\n' ' ')'"
		return 1
	}
}
eventually 20 found
