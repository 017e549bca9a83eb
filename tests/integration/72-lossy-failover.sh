#!/bin/bash
# A lossy failover (split brain) under Redis Sentinel (issue 12): the
# replica stops replicating, the old master goes on taking writes that
# nodes a and b saw succeed (close() returned 0), then the old master
# dies and the replica, which never got those writes, becomes the master.
# objfs must not lose or mix up anything: every acknowledged object reads
# back byte-exact on both nodes (a and b re-register what Redis lost:
# docs/design.md, "Redis outages and recovery"), no object id is handed
# out twice (new objects made after the failover get ids unlike every
# earlier one), and nothing lands in lost+found (no name was taken).
#
# How the split is made, and why so: SENTINEL FAILOVER never loses a
# write (it waits for the replica to catch up), and a replica left with
# REPLICAOF NO ONE while the sentinels watch is turned back into a
# replica by them within ~20 s, which would resync it and undo the split.
# So the sentinels first forget the master (SENTINEL REMOVE: objfs keeps
# its connections to the old master, which works on), the replica leaves
# (REPLICAOF NO ONE: it keeps what it has), the nodes write more, the old
# master is killed, and the sentinels are told to monitor the replica
# (SENTINEL MONITOR): what a failover to a lagging replica gives, with
# the loss certain instead of a race.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
topology_pair sentinel
OLD=$TOPO_MASTER_PORT
REP=$TOPO_REPLICA_PORT
NAMES=()

# put NODE NAME: write fresh bytes to NAME on NODE (cp: its close()
# must succeed) and remember them
put() {
	local m
	m=$(mnt_of "$1")
	mkdata "$T/data.${2//\//_}" $((1000 + RANDOM % 300000))
	assert_ok cp "$T/data.${2//\//_}" "$m/$2"
	NAMES+=("$2")
}

# same_on DIR NAME...: every NAME reads back byte-exact in DIR
same_on() {
	local d=$1 f
	shift
	for f in "$@"; do
		cmp -s "$T/data.${f//\//_}" "$d/$f" || {
			echo "$d/$f: $(cmp "$T/data.${f//\//_}" "$d/$f" 2>&1)"
			return 1
		}
	done
}

step "before the split: a and b write; the replica ($REP) has it all"
mkdir "$A/dir"
for i in 1 2 3 4 5 6; do put a "p$i"; done
put a dir/p7
for i in 1 2 3; do put b "q$i"; done
eventually 15 same_on "$B" "${NAMES[@]}"
assert_eq 1 "$(tcli "$OLD" WAIT 1 5000)" "replicas that acknowledged every write"
keys_before=$(tcli "$REP" DBSIZE)

step "the split: the sentinels forget the master, the replica stops replicating"
topo_sentinel_remove
assert_eq OK "$(tcli "$REP" REPLICAOF NO ONE)" "REPLICAOF NO ONE on the replica"
for i in 8 9 10 11 12; do put a "p$i"; done
put a dir/p13
put b q4
put b q5
# the old master has what the replica lacks: the loss is real
late_keys=$(($(tcli "$OLD" DBSIZE) - $(tcli "$REP" DBSIZE)))
step "the old master has $late_keys keys more than the replica"
[ "$late_keys" -gt 0 ] || fail "the writes after the split reached the replica too"

step "the old master ($OLD) dies; the sentinels now name the replica ($REP)"
t_kill=$(now)
topo_kill9 "$OLD"
topo_sentinel_monitor "$REP" 30
step "the sentinels agree on $REP after $(awk -v a="$t_kill" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"

step "objfs works again, with no remount"
eventually 60 creates_in "$A"
step "a creates again $(awk -v a="$t_kill" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s after the kill"
put a after-a
eventually 30 creates_in "$B"
put b after-b

step "every acknowledged object reads back byte-exact on a and b"
# a and b re-register what Redis lost as soon as they see the loss
eventually 60 same_on "$A" "${NAMES[@]}"
eventually 60 same_on "$B" "${NAMES[@]}"
[ "$(tcli "$REP" DBSIZE)" -gt "$keys_before" ] || fail "Redis did not get the lost records back"

step "new objects after the failover; no id handed out twice"
for i in 1 2 3 4 5 6 7 8; do put a "n$i"; done
for i in 1 2 3 4; do put b "m$i"; done
eventually 15 same_on "$B" "${NAMES[@]}"
eventually 15 same_on "$A" "${NAMES[@]}"
ids=()
for f in "${NAMES[@]}"; do
	id=$(xattr "$A/$f" user.objfs.id) || fail "no id for $f on a"
	assert_eq "$id" "$(xattr "$B/$f" user.objfs.id)" "id of $f on b"
	ids+=("$id")
done
dup=$(printf '%s\n' "${ids[@]}" | sort | uniq -d)
[ -z "$dup" ] || fail "ids handed out twice: $(tr '\n' ' ' <<<"$dup") (of ${#ids[@]}: ${ids[*]})"
step "${#ids[@]} objects, ${#ids[@]} distinct ids"

step "nothing went to lost+found"
for m in "$A" "$B"; do
	if [ -d "$m/lost+found" ]; then
		assert_eq "" "$(ls_of "$m/lost+found")" "$m/lost+found"
	fi
done
assert_match '^up' "$(status_of a redis)" "redis line of a's status"
assert_match '^up' "$(status_of b redis)" "redis line of b's status"
