#!/bin/bash
# The only holder of an object stalls (SIGSTOP) past io_timeout while its
# node card is live (issue 19, item 10): a stall of a live holder is not
# its death.
#   - it stalls, then resumes (SIGCONT once the reader's node has seen
#     the stall): the fetch retries it on a fresh connection and the read
#     completes, byte-exact;
#   - it stays stalled: the retries end within their bound and the read
#     gets EIO, never a hang;
#   - its card goes away while it stalls: it is given up at the next
#     retry, and the read gets EIO.
# Nothing here rests on a timing margin: the holder resumes only after b
# has logged the stall, and b retries for several io_timeouts after that.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M,io_timeout=1000"
mount_objfs b "$REDIS_URL" "capacity=256M,io_timeout=1000"
A=$(mnt_of a)
B=$(mnt_of b)
on_exit "kill -CONT ${MOUNT_PIDS[a]} 2>/dev/null"

# put NAME: a 24 MiB object on a, known to b; sets ID (a may be stopped
# later, when its mount no longer answers)
put() {
	mkdata "$T/$1" $((24 << 20))
	cp "$T/$1" "$A/$1"
	ID=$(xattr "$A/$1" user.objfs.id)
	eventually 10 ls_has "$B" "$1"
}

# stalls ID: how many times b's log says holder a stalled on object ID
stalls() { grep -c "object $1: holder 'a' .* stalled" "$(log_of b)" || true; }

# has_stalled ID: for eventually
has_stalled() { [ "$(stalls "$1")" -ge 1 ] || { echo "b saw no stall of a yet"; return 1; }; }

step "the only holder stalls, then resumes: the read completes"
put x
kill_node a STOP
timed_cat "$B/x" "$T/x.out" 120 >"$T/x.res" &
reader=$!
eventually 60 has_stalled "$ID"
kill_node a CONT
wait "$reader" || true
read -r rc secs <"$T/x.res"
step "reader ended with status $rc after $secs s ($(stalls "$ID") stall(s) logged): $(cat "$T/x.out.err")"
assert_eq 0 "$rc" "status of a read whose only holder stalled and resumed: $(cat "$T/x.out.err")"
assert_same "$T/x" "$T/x.out"
assert_eq 0 "$(status_of b fetches_failed)" "failed fetches on b"

step "the only holder stays stalled: EIO once the retries are spent, no hang"
put y
kill_node a STOP
timed_cat "$B/y" "$T/y.out" 120 >"$T/y.res"
kill_node a CONT
read -r rc secs <"$T/y.res"
step "reader ended with status $rc after $secs s ($(stalls "$ID") stall(s) logged): $(cat "$T/y.out.err")"
assert_ne 0 "$rc" "status of a read whose only holder stayed stalled"
assert_ne 124 "$rc" "status of a read whose only holder stayed stalled (a hang)"
assert_match 'Input/output error' "$(cat "$T/y.out.err")" "error of the read"
assert_le 2 "$(stalls "$ID")" "stalls of a retried holder logged"

step "the stalled holder's card goes away: given up at the next retry"
put z
kill_node a STOP
timed_cat "$B/z" "$T/z.out" 120 >"$T/z.res" &
reader=$!
eventually 60 has_stalled "$ID"
rcli DEL '{objfs}:node:a' >/dev/null
wait "$reader" || true
read -r rc secs <"$T/z.res"
step "reader ended with status $rc after $secs s ($(stalls "$ID") stall(s) logged): $(cat "$T/z.out.err")"
assert_ne 0 "$rc" "status of a read whose stalled holder's card went away"
assert_match 'Input/output error' "$(cat "$T/z.out.err")" "error of the read"
assert_match "object $ID: .*'a'.*card" "$(cat "$(log_of b)")" "b's log says a's card is gone"
kill_node a CONT
