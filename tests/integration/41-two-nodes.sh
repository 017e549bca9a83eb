#!/bin/bash
# Two daemons (different node= and store=) sharing one redis-server see
# each other's names and read each other's objects byte-exact (fetched
# on open; tests 6x cover fetching in depth), and never hang.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need getfattr
start_redis
mount_objfs n1 "$REDIS_URL" "capacity=64M"
mount_objfs n2 "$REDIS_URL" "capacity=64M"
M1=$(mnt_of n1)
M2=$(mnt_of n2)

mkdata "$T/x" $((2 << 20))
mkdata "$T/y" 3000
cp "$T/x" "$M1/x"
mkdir "$M1/dir1"
cp "$T/y" "$M2/y"

step "each node sees the other's names"
eventually 10 ls_has "$M2" x
eventually 10 ls_has "$M2" dir1
eventually 10 ls_has "$M1" y
assert_eq $((2 << 20)) "$(stat -c %s "$M2/x")" "size of x seen from n2"
assert_eq 3000 "$(stat -c %s "$M1/y")" "size of y seen from n1"
assert_eq 444 "$(stat -c %a "$M2/x")" "mode of x seen from n2"
[ -d "$M2/dir1" ] || fail "dir1 is not a directory seen from n2"
assert_eq n1 "$(xattr "$M2/x" user.objfs.locations)" "holders of x seen from n2"
assert_eq n2 "$(xattr "$M1/y" user.objfs.locations)" "holders of y seen from n1"
assert_eq "$(xattr "$M1/x" user.objfs.checksum)" "$(xattr "$M2/x" user.objfs.checksum)" "checksum of x on both nodes"

step "a name made on one node in the other's directory"
cp "$T/y" "$M2/dir1/from-n2"
eventually 10 ls_has "$M1/dir1" from-n2

# xread MNT FILE SRC: read across nodes, bounded
xread() {
	local rc=0 t0 t1 out
	t0=$(date +%s)
	out=$(timeout -k 5 30 cat "$2/$3" 2>&1 >"$T/xread") || rc=$?
	t1=$(date +%s)
	step "cross-node read of $3 through $(basename "$2"): status $rc in $((t1 - t0)) s: $out"
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then fail "cross-node read of $3 hung (killed after 30 s)"; fi
	assert_le "$((t1 - t0))" 20 "seconds for a cross-node read of $3"
	assert_eq 0 "$rc" "status of a cross-node read of $3 ($out)"
	assert_same "$1" "$T/xread"
}
tcp0=$(status_of n2 fetch_tcp)
btcp0=$(status_of n2 bytes_tcp)
xread "$T/x" "$M2" x
xread "$T/y" "$M1" y

step "the fetches went over TCP, and were counted so"
if [ "$(status_of n2 rdma)" != on ]; then
	[ "$(status_of n2 fetch_tcp)" -gt "$tcp0" ] || fail "fetch_tcp of n2 did not grow"
	assert_eq $((btcp0 + (2 << 20))) "$(status_of n2 bytes_tcp)" "bytes_tcp of n2"
	assert_eq 3000 "$(status_of n1 bytes_tcp)" "bytes_tcp of n1"
	assert_eq 0 "$(status_of n2 fetch_eager)" "fetch_eager of n2"
fi

step "both nodes still work afterwards"
assert_same "$T/x" "$M1/x"
assert_same "$T/y" "$M2/y"
echo after >"$M2/after"
eventually 10 ls_has "$M1" after

step "a second daemon cannot claim a node name that is in use"
rc=0
mkdir -p "$(mnt_of dup)"
capture 60 "$OBJFSD" "$REDIS_URL" "$(mnt_of dup)" \
	-o "node=n1,store=$(store_of dup),rundir=$(rundir_of dup),log=$(log_of dup),listen=127.0.0.1:$(free_port)" || rc=$?
out=$CAPTURED
if is_mounted "$(mnt_of dup)"; then
	MOUNTS+=("$(mnt_of dup)")
	fail "a second daemon mounted with node=n1 while n1 is live"
fi
assert_eq 1 "$rc" "exit status of a mount with a node name in use (output: $out)"
assert_match '\bn1\b' "$out" "message names the node"
