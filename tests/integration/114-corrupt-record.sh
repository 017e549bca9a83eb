#!/bin/bash
# Corrupt records in Redis give EIO (not a crash, not garbage) and an
# error line in the daemon's log; the rest of the mount keeps working.  A
# bad entry hides only itself from a listing (26-bad-records.sh has the
# log lines and the keys of the wrong type).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

start_redis
mount_objfs n1 "$REDIS_URL" "capacity=64M"
M=$(mnt_of n1)
LOG=$(log_of n1)

mkdir "$M/ok"
echo fine >"$M/ok/file"
mkdir "$M/sub"
echo good >"$M/sub/good"

EIO='Input/output error'
lines0=$(wc -l <"$LOG" 2>/dev/null || echo 0)

step "a directory entry with a garbage value"
rcli HSET '{objfs}:d:1' somename garbage >/dev/null
assert_fails_with "$EIO" stat "$M/somename"
assert_eq "ok sub" "$(ls_of "$M")" "listing of the root with a bad entry"
assert_fails_with "$EIO" cat "$M/somename"

step "entries with malformed ids in a subdirectory"
sub_id=$(rcli HGET '{objfs}:d:1' sub)
assert_match '^d[0-9]+$' "$sub_id" "Redis entry of sub"
rcli HSET "{objfs}:d:${sub_id#d}" badid f12abc >/dev/null
assert_fails_with "$EIO" stat "$M/sub/badid"
rcli HSET "{objfs}:d:${sub_id#d}" badkind x42 >/dev/null
assert_fails_with "$EIO" stat "$M/sub/badkind"

step "a file whose object record is garbage"
# an object id the daemon has never seen, so it must read the record
oid=999999
rcli HSET "$(rec_key "$oid")" "$oid" "size notanumber" >/dev/null
id=$(rcli HGET '{objfs}:d:1' ok)
rcli HSET "{objfs}:d:${id#d}" victim "f$oid" >/dev/null
assert_fails_with "$EIO" stat "$M/ok/victim"
assert_fails_with "$EIO" cat "$M/ok/victim"

step "the log names the problem"
lines1=$(wc -l <"$LOG")
[ "$lines1" -gt "$lines0" ] || fail "nothing was logged to $LOG"
new=$(tail -n +"$((lines0 + 1))" "$LOG")
assert_match '[Ee]rr|[Cc]orrupt|[Mm]alformed|[Bb]ad|[Ii]nvalid' "$new" "new log lines"

step "the rest of the mount still works"
assert_eq fine "$(cat "$M/ok/file")" "content of ok/file"
assert_eq good "$(cat "$M/sub/good")" "content of sub/good"
mkdir "$M/ok/more"
echo more >"$M/ok/more/f"
assert_eq more "$(cat "$M/ok/more/f")" "content of a new file"

step "after the bad entries are removed, ls lists the same"
rcli HDEL '{objfs}:d:1' somename >/dev/null
assert_eq "ok sub" "$(ls_of "$M")" "listing of the root"
