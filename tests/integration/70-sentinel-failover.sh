#!/bin/bash
# objfs on Redis Sentinel (issue 12): a master, a replica and three
# sentinels.  The master dies (kill -9) while node a creates files one
# after another; the sentinels promote the replica and objfs follows
# them, with no remount: every file whose close() succeeded reads back
# byte-exact on a and on b, and calls fail only for a short while after
# the kill.  The dead master then comes back as a replica of the new one
# and objfs keeps working; a second failover, back to it, is followed too.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
topology_pair sentinel

step "objfs works on the sentinels' master ($TOPO_MASTER_PORT)"
assert_match "^up" "$(status_of a redis)" "redis line of a's status"
mkdata "$T/x" 100000
cp "$T/x" "$A/x"
mkdir "$A/loop"
eventually 10 ls_has "$B" x
assert_same "$T/x" "$B/x"
assert_ne 0 "$(tcli "$TOPO_MASTER_PORT" DBSIZE)" "keys on the master"

# failover_during_loop ID: kill -9 the master while loop ID runs on a;
# wait for the sentinels' failover and for a to have files acknowledged
# again; check that nothing acknowledged is missing or wrong on a and b,
# and that calls failed only in a window after the kill.  Sets OLD, NEW.
failover_during_loop() {
	local id=$1 t_kill window
	start_create_loop "$id" "$A/loop"
	wait_loop_acks "$id" 20 30
	OLD=$(topo_sentinel_master)
	step "kill -9 the master ($OLD) mid-loop"
	t_kill=$(now)
	topo_kill9 "$OLD"
	NEW=$(topo_sentinel_wait_failover "$OLD" 30) || fail "no failover within 30 s"
	step "the sentinels promoted $NEW after $(awk -v a="$t_kill" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
	# objfs follows without a remount: new files are acknowledged again
	wait_loop_acks "$id" 20 60
	stop_create_loop "$id"
	verify_create_loop "$id" "$A/loop"
	verify_create_loop "$id" "$B/loop"
	[ "$LOOP_FAILED" = 0 ] || {
		# errors only after the kill, and not for long
		awk -v f="$LOOP_FIRST_ERR" -v k="$t_kill" 'BEGIN { exit !(f >= k) }' ||
			fail "a create failed before the master was killed (at $LOOP_FIRST_ERR, kill at $t_kill)"
		window=$(awk -v l="$LOOP_LAST_ERR" -v k="$t_kill" 'BEGIN { printf "%.1f", l - k }')
		step "$LOOP_FAILED creates failed, the last one $window s after the kill"
		# down-after 1 s, a failover of 1-3 s, objfs's reconnect
		# backoff (at most 5 s) and an io_timeout: far less than 30 s
		assert_le "${window%.*}" 30 "seconds from the kill to the last failed create"
	}
	[ "$LOOP_FAILED" != 0 ] || step "no create failed"
}

OLD="" NEW=""
failover_during_loop f1
assert_match '^up' "$(status_of a redis)" "redis line of a's status after the failover"
assert_same "$T/x" "$A/x"
assert_same "$T/x" "$B/x"

step "the old master ($OLD) comes back: the sentinels make it a replica of $NEW"
topo_restart "$OLD"
topo_wait_replica "$OLD" "$NEW" 60
mkdata "$T/y" 50000
cp "$T/y" "$A/y"
eventually 10 ls_has "$B" y
assert_same "$T/y" "$B/y"
assert_eq 1 "$(tcli "$NEW" WAIT 1 5000)" "replicas of the new master that have every write"
assert_match '^up' "$(status_of a redis)" "redis line of a's status"
assert_match '^up' "$(status_of b redis)" "redis line of b's status"
if [ -x "$OBJFS_CLI" ]; then
	st=$(objfs_cli status "$A") || fail "objfs status failed: $st"
	assert_match '^up' "$(field redis <<<"$st")" "redis line of objfs status"
fi

step "a second failover, back to $OLD"
first=$OLD
failover_during_loop f2
assert_eq "$first" "$NEW" "the master after the second failover"
assert_match '^up' "$(status_of a redis)" "redis line of a's status after the second failover"
verify_create_loop f1 "$B/loop"
