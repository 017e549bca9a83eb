#!/bin/bash
# Holders that die or stall mid-transfer:
#   - the only holder killed mid-transfer: the reader gets EIO within 5 s,
#     and the daemon is fine afterwards;
#   - one of two holders killed mid-transfer: the copy still completes,
#     byte-exact, from the other;
#   - a stalled holder (SIGSTOP) is detected and the fetch fails over;
#   - a holder whose node card expired is skipped and its entry cleaned.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
slow="capacity=512M,serve_bwlimit=16M,io_timeout=1000"
mount_objfs a "$REDIS_URL" "$slow"
mount_objfs b "$REDIS_URL" "capacity=512M,io_timeout=1000"
A=$(mnt_of a)
B=$(mnt_of b)

step "the only holder dies mid-transfer: EIO within 5 s"
mkdata "$T/x" $((64 << 20))
cp "$T/x" "$A/x"
eventually 10 ls_has "$B" x
timed_cat "$B/x" "$T/x.out" >"$T/x.res" &
reader=$!
eventually 10 bash -c "[ \"\$(getfattr --only-values -n user.objfs.fetch '$B/x' | cut -d' ' -f2)\" -gt 0 ]"
kt=$(now)
kill_node a KILL
wait "$reader" || true
read -r rc secs <"$T/x.res"
et=$(now)
step "reader ended with status $rc after $secs s ($(awk -v a="$kt" -v b="$et" 'BEGIN { printf "%.2f", b - a }') s after the kill): $(cat "$T/x.out.err")"
assert_ne 0 "$rc" "status of a read whose only holder died"
assert_match 'Input/output error' "$(cat "$T/x.out.err")" "error of the read"
assert_le "$(awk -v a="$kt" -v b="$et" 'BEGIN { printf "%d", b - a }')" 5 "seconds from kill to EIO"
# counted after the reader got EIO
eventually 10 status_is b fetches_failed 1
assert_fails_with 'Input/output error' cat "$B/x"
# reads of local objects still work on b
echo local >"$B/local"
assert_eq local "$(cat "$B/local")" "a local object on b"
umount -l "$A" 2>/dev/null || true

step "one of two holders dies mid-transfer: the copy completes from the other"
mount_objfs a2 "$REDIS_URL" "$slow"
mount_objfs c "$REDIS_URL" "$slow"
A2=$(mnt_of a2)
C=$(mnt_of c)
mkdata "$T/y" $((96 << 20))
cp "$T/y" "$A2/y"
eventually 10 ls_has "$C" y
assert_ok cmp "$T/y" "$C/y"	# c becomes the second holder
# (registered after its reader got the bytes)
eventually 10 holders_are "$B/y" a2,c
timed_cat "$B/y" "$T/y.out" >"$T/y.res" &
reader=$!
eventually 10 bash -c "[ \"\$(getfattr --only-values -n user.objfs.fetch '$B/y' | cut -d' ' -f2)\" -gt 0 ]"
kill_node a2 KILL
wait "$reader" || true
read -r rc secs <"$T/y.res"
step "reader ended with status $rc after $secs s"
assert_eq 0 "$rc" "status of a read that lost one of two holders: $(cat "$T/y.out.err")"
assert_same "$T/y" "$T/y.out"
fo=$(status_of b failovers)
[ "$fo" -ge 1 ] || fail "b counted no failover ($fo)"
umount -l "$A2" 2>/dev/null || true

step "a stalled holder (SIGSTOP) is detected and the fetch fails over"
mount_objfs d "$REDIS_URL" "$slow"
D=$(mnt_of d)
mkdata "$T/z" $((48 << 20))
cp "$T/z" "$C/z"
eventually 10 ls_has "$D" z
assert_ok cmp "$T/z" "$D/z"	# d holds z too
timed_cat "$B/z" "$T/z.out" >"$T/z.res" &
reader=$!
eventually 10 bash -c "[ \"\$(getfattr --only-values -n user.objfs.fetch '$B/z' | cut -d' ' -f2)\" -gt 0 ]"
kill_node c STOP
on_exit "kill -CONT ${MOUNT_PIDS[c]} 2>/dev/null"
wait "$reader" || true
kill_node c CONT
read -r rc secs <"$T/z.res"
step "reader ended with status $rc after $secs s"
assert_eq 0 "$rc" "status of a read with a stalled holder: $(cat "$T/z.out.err")"
assert_same "$T/z" "$T/z.out"

step "a holder whose card expired is skipped and its entry removed"
mkdata "$T/w" $((2 << 20))
cp "$T/w" "$D/w"
wid=$(xattr "$D/w" user.objfs.id)
rcli HSET "$(rec_key "$wid")" "$wid" "$(rec_of "$wid")/@ghost" >/dev/null
assert_eq "d,ghost" "$(holders_of "$wid")" "holders with a ghost"
eventually 10 ls_has "$B" w
assert_ok cmp "$T/w" "$B/w"
# b registers (and drops the ghost) after its reader got the bytes
eventually 10 fetch_state_is "$B/w" '^local '
assert_eq "b,d" "$(holders_of "$wid")" "holders after the fetch"
n=$(status_of b stale_holders_dropped)
[ "$n" -ge 1 ] || fail "b dropped no stale holder entry ($n)"
