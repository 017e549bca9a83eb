#!/bin/bash
# Close-to-open consistency: when close(2) of a new file returns 0, the
# object is sealed, published and durable.
#   - cp to node A, and at once open and compare on node B: never ENOENT,
#     byte-exact (4 KiB, 1 MiB, 64 MiB, 256 MiB, 10 times each);
#   - cp to node C, then kill -9 its daemon at once: after a remount the
#     object is there, byte-exact.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp
start_redis
# A keeps a deleted object that B fetched for some seconds (it serves
# fetches that began before the delete), so the 256 MiB rounds need room
# for all ten; the store takes memory only as it is written
mount_objfs a "$REDIS_URL" "capacity=4G"
mount_objfs b "$REDIS_URL" "capacity=1G"
A=$(mnt_of a)
B=$(mnt_of b)

# the sources live in tmpfs ($S), so that cp measures the mount
for size in 4K 1M 64M 256M; do
	mkdata "$S/src.$size" "$(numfmt --from=iec "$size")"
done

for size in 4K 1M 64M 256M; do
	step "cp $size to A, then at once cmp on B (10 times)"
	for i in $(seq 10); do
		cp "$S/src.$size" "$A/x.$size.$i"
		out=$(timeout -k 5 60 cmp "$S/src.$size" "$B/x.$size.$i" 2>&1) ||
			fail "round $i of $size: right after cp returned on A, B says: $out"
		# keep the stores small: the 256 MiB copies come and go
		rm -f "$A/x.$size.$i"
	done
done

step "cp 64M to C, kill -9 C's daemon at once, remount: the object is there"
mount_objfs c "$REDIS_URL" "capacity=512M"
C=$(mnt_of c)
cp "$S/src.64M" "$C/crash" && kill_node c KILL
# no waiting and no umount: the mount cleans up the dead mount, and the
# dead daemon (maybe still a zombie) does not hold the node name
mount_objfs c "$REDIS_URL" "capacity=512M"
assert_same "$S/src.64M" "$C/crash"
assert_same "$S/src.64M" "$B/crash"
