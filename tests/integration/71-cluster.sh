#!/bin/bash
# objfs on Redis Cluster (issue 12): 3 masters, 3 replicas.  The whole
# namespace lives in one slot (hash tag {objfs}), and objfs follows that
# slot wherever it goes, with no remount and nothing that close()
# acknowledged lost:
#   - basic operations on two nodes, a fetch from one to the other;
#   - kill -9 of the slot's master during a create loop (its replica is
#     promoted after cluster-node-timeout);
#   - CLUSTER FAILOVER (graceful) and CLUSTER FAILOVER TAKEOVER on the
#     slot's replica during create loops;
#   - the slot migrated by hand to another master (MIGRATING/IMPORTING,
#     MIGRATE in small batches: ASK and TRYAGAIN on the way) during a
#     create loop: no entry lost or listed twice;
#   - the cluster down (the slot's master and replica both gone): calls
#     fail with EIO, none hangs, sealed files stay readable; once they
#     are back, objfs works again.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
topology_pair cluster
SLOT=$(topo_cluster_keyslot "$TOPO_NS_KEY")
EIO='Input/output error'

# masters: the ports of the masters now
masters() {
	local p
	for p in $TOPO_PORTS; do
		[[ $(tcli "$p" ROLE 2>/dev/null | head -n 1) == master ]] && echo "$p"
	done
	return 0
}

step "basic operations (the namespace is slot $SLOT, on $(topo_cluster_slot_owner "$TOPO_NS_KEY"))"
mkdata "$T/x" $((3 << 20))
mkdata "$T/y" 7000
cp "$T/x" "$A/x"
assert_same "$T/x" "$A/x"
mkdir -p "$A/d/e"
cp "$T/y" "$A/d/e/y"
mkdir "$A/loop"
assert_eq "d loop x" "$(ls_of "$A")" "listing of a's root"
mv "$A/d/e/y" "$A/d/y2"
assert_same "$T/y" "$A/d/y2"
assert_absent "$A/d/e/y"
cp "$T/y" "$A/d/gone"
rm "$A/d/gone"
assert_absent "$A/d/gone"
eventually 10 listing_is "$B/d" "e y2"
step "b reads a's files (fetched from a)"
assert_same "$T/x" "$B/x"
assert_same "$T/y" "$B/d/y2"
# (b registers as a holder after its reader got the bytes)
eventually 10 holders_are "$B/x" a,b
cp "$T/y" "$B/from-b"
eventually 10 ls_has "$A" from-b
assert_same "$T/y" "$A/from-b"

step "every key objfs wrote is in slot $SLOT"
owner=$(topo_cluster_slot_owner "$TOPO_NS_KEY")
n=$(tcli "$owner" CLUSTER COUNTKEYSINSLOT "$SLOT")
assert_eq "$n" "$(tcli "$owner" DBSIZE)" "keys in slot $SLOT on $owner, out of all its keys"
for p in $(masters); do
	[ "$p" = "$owner" ] || assert_eq 0 "$(tcli "$p" DBSIZE)" "keys on master $p, which does not have slot $SLOT"
done

# loop_across ID WHAT CMD...: run CMD (which moves the slot somehow) while
# loop ID creates files on a; then a must have files acknowledged again,
# and every acknowledged file must be on a and b with its bytes
loop_across() {
	local id=$1 what=$2 t0
	shift 2
	start_create_loop "$id" "$A/loop"
	wait_loop_acks "$id" 15 30
	step "$what"
	t0=$(now)
	"$@"
	step "$what: done after $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
	wait_loop_acks "$id" 15 60
	stop_create_loop "$id"
	verify_create_loop "$id" "$A/loop"
	verify_create_loop "$id" "$B/loop"
	if [ "$LOOP_FAILED" != 0 ]; then
		step "$LOOP_FAILED creates failed, the last one $(awk -v a="$t0" -v b="$LOOP_LAST_ERR" \
			'BEGIN { printf "%.1f", b - a }') s after the start of: $what"
		awk -v f="$LOOP_FIRST_ERR" -v k="$t0" 'BEGIN { exit !(f >= k) }' ||
			fail "a create failed before: $what"
	fi
}

# kill_owner: kill -9 the slot's master; wait for its replica to take
# over; bring the dead one back (a replica now) so that the slot has a
# replica again
kill_owner() {
	local old new
	old=$(topo_cluster_slot_owner "$TOPO_NS_KEY")
	topo_kill9 "$old"
	new=$(topo_cluster_wait_owner "$TOPO_NS_KEY" "$old" 30) || fail "no failover of slot $SLOT"
	step "slot $SLOT moved from $old to $new"
	topo_restart "$old"
	topo_wait_replica "$old" "$new" 30
}
loop_across k "kill -9 of the slot's master" kill_owner

# failover_to_replica [TAKEOVER]: CLUSTER FAILOVER on a replica of the
# slot's master; wait until it serves the slot
failover_to_replica() {
	local old rep new
	old=$(topo_cluster_slot_owner "$TOPO_NS_KEY")
	rep=$(topo_cluster_replica_of "$old" | head -n 1)
	[ -n "$rep" ] || fail "the slot's master $old has no replica"
	assert_eq OK "$(tcli "$rep" CLUSTER FAILOVER "$@")" "CLUSTER FAILOVER $* on $rep"
	new=$(topo_cluster_wait_owner "$TOPO_NS_KEY" "$old" 30) || fail "CLUSTER FAILOVER $* did not move slot $SLOT"
	assert_eq "$rep" "$new" "the slot's master after CLUSTER FAILOVER $*"
	topo_wait_replica "$old" "$new" 30
}
loop_across g "CLUSTER FAILOVER on the slot's replica" failover_to_replica
loop_across t "CLUSTER FAILOVER TAKEOVER on the slot's replica" failover_to_replica TAKEOVER

# migrate: move the slot to another master, 10 keys at a time with a
# pause between batches, so that the loop meets the slot half-moved
MOVED=0
migrate() {
	local from to
	from=$(topo_cluster_slot_owner "$TOPO_NS_KEY")
	to=$(masters | grep -vx "$from" | head -n 1)
	MOVED=$(topo_cluster_migrate_slot "$SLOT" "$from" "$to" 0.05) || fail "migration of slot $SLOT failed"
	topo_cluster_wait_ok 30
	assert_eq "$to" "$(topo_cluster_slot_owner "$TOPO_NS_KEY")" "the slot's master after the migration"
	assert_eq 0 "$(tcli "$from" CLUSTER COUNTKEYSINSLOT "$SLOT")" "keys of slot $SLOT left on $from"
	step "slot $SLOT moved from $from to $to: $MOVED keys"
}
loop_across m "slot $SLOT migrated to another master" migrate
[ "$MOVED" -gt 0 ] || fail "the migration moved no key"
verify_create_loop k "$B/loop"
verify_create_loop g "$B/loop"
verify_create_loop t "$B/loop"
assert_same "$T/x" "$B/x"

# read once, so that the daemons know the names: each failover above was
# a gap in their invalidations, after which they dropped every cached
# name, and a name is resolved without Redis only from that cache
assert_same "$T/x" "$A/x"
assert_same "$T/x" "$B/x"
assert_same "$T/y" "$A/d/y2"
step "the cluster goes down: slot $SLOT's master and replica stop (their data saved)"
owner=$(topo_cluster_slot_owner "$TOPO_NS_KEY")
rep=$(topo_cluster_replica_of "$owner" | head -n 1)
[ -n "$rep" ] || fail "the slot's master $owner has no replica"
# the replica first, or it would take over
topo_shutdown "$rep" save
topo_shutdown "$owner" save
cluster_is_down() {
	local p st
	for p in $TOPO_PORTS; do
		if [ "$p" = "$owner" ] || [ "$p" = "$rep" ]; then continue; fi
		st=$(tcli "$p" CLUSTER INFO | awk -F: '$1 == "cluster_state" { print $2 }' | tr -d '\r')
		[ "$st" = fail ] || { echo "$p: cluster_state $st"; return 1; }
	done
}
eventually 20 cluster_is_down
step "sealed files stay readable"
assert_same "$T/x" "$A/x"
assert_same "$T/x" "$B/x"
assert_same "$T/y" "$A/d/y2"
step "mutations fail with EIO, none hangs"
t0=$(date +%s)
assert_fails_with "$EIO" touch "$A/new"
assert_fails_with "$EIO" mkdir "$A/newdir"
assert_fails_with "$EIO" rm "$A/x"
assert_fails_with "$EIO" mv "$A/d/y2" "$A/d/y3"
assert_fails_with "$EIO" cp "$T/y" "$B/d/c"
t1=$(date +%s)
assert_le "$((t1 - t0))" 40 "seconds for five mutations while the cluster is down"
assert_match '^down' "$(status_of a redis)" "redis line of a's status while the cluster is down"

step "the two nodes come back: objfs works again, with no remount"
topo_restart "$owner"
topo_restart "$rep"
topo_cluster_wait_ok 30
assert_eq "$owner" "$(topo_cluster_slot_owner "$TOPO_NS_KEY")" "the slot's master after the restart"
eventually 30 creates_in "$A"
mkdir "$A/newdir"
cp "$T/y" "$B/newdir/c"
eventually 10 ls_has "$A/newdir" c
assert_same "$T/y" "$A/newdir/c"
mv "$A/d/y2" "$A/d/y3"
assert_same "$T/y" "$B/d/y3"
rm "$A/x"
eventually 10 test ! -e "$B/x"
verify_create_loop m "$B/loop"
assert_match '^up' "$(status_of a redis)" "redis line of a's status after the cluster is back"
assert_match '^up' "$(status_of b redis)" "redis line of b's status after the cluster is back"
