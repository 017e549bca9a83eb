#!/bin/bash
# Bad records in Redis are reported as bad records, one log line each
# naming the key or the object, field and value, never as "Redis
# unreachable"; Redis is not marked down for them.  A bad entry in a
# directory hides that entry only: ls lists the others, and lookups of
# the good names work.  A flood of requests for bad records does not
# flood the log.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

start_redis
mount_objfs n1 "$REDIS_URL" "capacity=64M"
M=$(mnt_of n1)
LOG=$(log_of n1)

mkdir "$M/sub"
echo good >"$M/sub/good"
echo fine >"$M/fine"
EIO='Input/output error'
CSUM=00112233445566778899aabbccddeeff

# new_log: the log lines since the last call
lines0=$(wc -l <"$LOG")
new_log() {
	local n
	n=$(wc -l <"$LOG")
	tail -n +"$((lines0 + 1))" "$LOG" | head -n "$((n - lines0))"
	lines0=$n
}

# redis_up: the status says Redis is up
redis_up() {
	assert_match '^up ' "$(status_of n1 redis)" "redis status"
}

# wrong_type WHAT NAME KEY ENTRY CMD: KEY is a string where a hash belongs;
# the root's entry NAME is ENTRY; CMD of NAME must fail with EIO, the log
# must name KEY, and Redis must stay up
wrong_type() {
	local what=$1 name=$2 key=$3 entry=$4 cmd=$5 out
	step "$what that is a string"
	rcli SET "$key" astring >/dev/null
	rcli HSET '{objfs}:d:1' "$name" "$entry" >/dev/null
	assert_fails_with "$EIO" "$cmd" "$M/$name"
	out=$(new_log)
	assert_match "corrupt record.*'${key//[\{\}]/.}'.*wrong type" "$out" "log of a wrong-type $what"
	assert_no_match 'unreachable' "$out" "log of a wrong-type $what"
	redis_up
}

wrong_type "an object record's bucket" wrongtype '{objfs}:r:7001' f777001 stat
wrong_type "a directory hash" wrongdir '{objfs}:d:777002' d777002 stat
# its entry has the attributes (stat works); a read needs the record,
# where the holders are
wrong_type "an object record's bucket under a whole entry" wrongholders '{objfs}:r:7003' \
	"f777003 5 1 $CSUM n2" cat
assert_eq 5 "$(stat -c %s "$M/wrongholders")" "size of wrongholders"

step "a size that no file can have"
rcli HSET '{objfs}:r:7004' 777004 1/hugesize >/dev/null
rcli HSET '{objfs}:d:1' hugesize "f777004 18446744073709551615 1 $CSUM n2" >/dev/null
assert_fails_with "$EIO" stat "$M/hugesize"
out=$(new_log)
assert_match "corrupt record.*object 777004.*'size'.*'18446744073709551615'" "$out" "log of a bad size"

step "every rejected field is named with its value"
rcli HSET '{objfs}:r:7005' 777005 1/badcsum >/dev/null
rcli HSET '{objfs}:d:1' badcsum "f777005 5 1 abc n2" >/dev/null
assert_fails_with "$EIO" stat "$M/badcsum"
rcli HSET '{objfs}:r:7006' 777006 1/badorigin >/dev/null
rcli HSET '{objfs}:d:1' badorigin "f777006 5 1 $CSUM a/b" >/dev/null
assert_fails_with "$EIO" stat "$M/badorigin"
out=$(new_log)
assert_match "corrupt record.*object 777005.*'csum'.*'abc'" "$out" "log of a bad csum"
assert_match "corrupt record.*object 777006.*'origin'.*'a/b'" "$out" "log of a bad origin"

step "a bad entry in a directory hides that entry only"
sub=$(rcli HGET '{objfs}:d:1' sub)
rcli HSET "{objfs}:d:${sub#d}" badentry garbage >/dev/null
rcli HSET "{objfs}:d:${sub#d}" badid f12abc >/dev/null
echo other >"$M/sub/other"
assert_eq "good other" "$(ls_of "$M/sub")" "listing of sub"
assert_eq good "$(cat "$M/sub/good")" "content of sub/good"
assert_fails_with "$EIO" stat "$M/sub/badentry"
out=$(new_log)
assert_match "corrupt record.*directory ${sub#d}.*'badentry'.*'garbage'" "$out" "log of a bad entry"
assert_match "corrupt record.*directory ${sub#d}.*'badid'.*'f12abc'" "$out" "log of a bad id"
# the root has bad entries of every kind above, and still lists
ls_has "$M" fine || fail "ls of the root does not list 'fine'"
ls_has "$M" sub || fail "ls of the root does not list 'sub'"
redis_up

step "a corrupt epoch does not take Redis down"
rcli DEL '{objfs}:epoch' >/dev/null
rcli HSET '{objfs}:epoch' not astring >/dev/null
# every connection of the pool has to be made again, and runs the init
rcli CLIENT KILL TYPE normal SKIPME yes >/dev/null
mkdir "$M/after-epoch"
echo x >"$M/after-epoch/f"
assert_eq x "$(cat "$M/after-epoch/f")" "a file written after the epoch broke"
redis_up
# the ticker reads the epoch every 5 s
has_epoch_line() { grep -qE "corrupt record.*'\{objfs\}:epoch'.*wrong type" "$LOG"; }
eventually 15 has_epoch_line
assert_no_match 'unreachable' "$(new_log)" "log after the epoch broke"

step "a loop over a bad record does not flood the log"
for ((i = 0; i < 300; i++)); do
	stat "$M/hugesize" >/dev/null 2>&1 || true
done
n=$(new_log | grep -c 'corrupt record' || true)
assert_le "$n" 60 "log lines after 300 stats of a bad record"
