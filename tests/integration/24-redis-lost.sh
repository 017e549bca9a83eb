#!/bin/bash
# Redis goes away while mounted: sealed objects stay readable, mutations
# fail with EIO (quickly, not hanging), `objfs status` says redis is down.
# When Redis comes back on the same port, mutations work again within
# ~10 s.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis_tcp
mount_objfs n1 "$REDIS_URL" "capacity=64M"
M=$(mnt_of n1)

mkdata "$T/a" $((1 << 20))
mkdata "$T/b" 5000
cp "$T/a" "$M/a"
mkdir "$M/d"
cp "$T/b" "$M/d/b"
# read once, so the names are known to the kernel and the daemon
assert_same "$T/a" "$M/a"
assert_same "$T/b" "$M/d/b"

step "redis stops (its data saved for the restart)"
stop_redis save

EIO='Input/output error'
step "sealed objects stay readable"
assert_same "$T/a" "$M/a"
assert_same "$T/b" "$M/d/b"
assert_eq $((1 << 20)) "$(stat -c %s "$M/a")" "size of a while Redis is down"

step "still readable after the kernel dropped its cached names"
sync
echo 2 >/proc/sys/vm/drop_caches
assert_same "$T/a" "$M/a"
assert_same "$T/b" "$M/d/b"

step "mutations fail with EIO, quickly"
t0=$(date +%s)
assert_fails_with "$EIO" touch "$M/new"
assert_fails_with "$EIO" mkdir "$M/newdir"
assert_fails_with "$EIO" rm "$M/a"
assert_fails_with "$EIO" mv "$M/d/b" "$M/d/b2"
assert_fails_with "$EIO" cp "$T/b" "$M/d/c"
t1=$(date +%s)
assert_le "$((t1 - t0))" 40 "seconds for five mutations while Redis is down"
assert_same "$T/a" "$M/a"
assert_same "$T/b" "$M/d/b"

if [ -x "$OBJFS_CLI" ]; then
	st=$(objfs_cli status "$M") || fail "objfs status failed while Redis is down: $st"
	assert_match '^down' "$(field redis <<<"$st")" "redis line of objfs status while down"
fi

step "redis comes back; mutations work again within 15 s"
restart_redis
ok=0
for ((i = 0; i < 150; i++)); do
	if touch "$M/new" 2>/dev/null; then
		ok=1
		break
	fi
	sleep 0.1
done
[ "$ok" = 1 ] || fail "touch still fails 15 s after Redis came back: $(touch "$M/new" 2>&1)"
step "mutations work again after $((i / 10)).$((i % 10)) s"
mkdir "$M/newdir"
cp "$T/b" "$M/newdir/c"
assert_same "$T/b" "$M/newdir/c"
mv "$M/d/b" "$M/d/b2"
assert_same "$T/b" "$M/d/b2"
rm "$M/a"
assert_absent "$M/a"
[ -n "$(rcli HGET '{objfs}:d:1' newdir)" ] || fail "newdir is not in Redis"

if [ -x "$OBJFS_CLI" ]; then
	st=$(objfs_cli status "$M")
	assert_match '^up' "$(field redis <<<"$st")" "redis line of objfs status after reconnecting"
fi
