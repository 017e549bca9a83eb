#!/bin/bash
# close(2) reports what became of a new file:
#   - Redis unreachable (stopped with SIGSTOP) at close: EIO, within about
#     io_timeout; the bytes are kept, `objfs status` counts the object as
#     unpublished, and it is published (visible on another node) once
#     Redis answers again;
#   - the store full: ENOSPC from close even when the writer ignored the
#     failed write, and the name is gone.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M,io_timeout=1000"
mount_objfs b "$REDIS_URL" "capacity=64M"
A=$(mnt_of a)
B=$(mnt_of b)
mkdata "$T/src" $((3 << 20))
unpublished_is() {
	local n
	n=$(status_of a unpublished)
	[ "$n" = "$1" ] || { echo "unpublished: $n"; return 1; }
}
cp "$T/src" "$A/before"
assert_eq 0 "$(status_of a unpublished)" "unpublished objects at the start"

step "Redis stops answering between the last write and close: close gives EIO"
on_exit "kill -CONT $REDIS_PID 2>/dev/null"
timeout -k 5 60 python3 - "$T/src" "$A/outage" "$T/outage" <<'PY' &
import errno, os, sys, time
src, path, base = sys.argv[1:4]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, open(src, "rb").read())
open(base + ".written", "w").close()
while not os.path.exists(base + ".go"):
    time.sleep(0.01)
t0 = time.monotonic()
try:
    os.close(fd)
    res = "OK"
except OSError as e:
    res = errno.errorcode.get(e.errno, str(e.errno))
with open(base + ".tmp", "w") as f:
    f.write("%s %.3f\n" % (res, time.monotonic() - t0))
os.rename(base + ".tmp", base + ".result")
PY
writer=$!
BG_PIDS+=("$writer")
eventually 20 test -e "$T/outage.written"
kill -STOP "$REDIS_PID"
touch "$T/outage.go"
eventually 30 test -e "$T/outage.result"
read -r res secs <"$T/outage.result"
step "close returned $res after $secs s"
assert_eq EIO "$res" "close(2) of a new file while Redis does not answer"
# io_timeout=1000: one Redis call bounded by it, and some slack for a
# loaded machine; a hang would be far beyond
assert_le "$(awk -v s="$secs" 'BEGIN { printf "%d", s * 10 }')" 50 "tenths of a second close(2) took"
assert_eq 1 "$(status_of a unpublished)" "unpublished objects while Redis is stopped"
assert_match 'Redis unreachable.*outage' "$(cat "$(log_of a)")" "the log of a"

step "Redis answers again: the object is published"
kill -CONT "$REDIS_PID"
eventually 30 cmp "$T/src" "$B/outage"
assert_same "$T/src" "$A/outage"
eventually 20 unpublished_is 0

step "the store is full: close gives ENOSPC even when the writer ignored the failed write"
timeout -k 5 60 python3 - "$A/full" <<'PY' || fail "ENOSPC was not reported by close"
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
buf = os.urandom(1 << 20)
for i in range(96):
    try:
        os.write(fd, buf)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
try:
    os.close(fd)
except OSError as e:
    if e.errno == errno.ENOSPC:
        sys.exit(0)
    sys.exit("close: expected ENOSPC, got " + errno.errorcode.get(e.errno, str(e.errno)))
sys.exit("close: expected ENOSPC, got success")
PY
assert_absent "$A/full"
assert_absent "$B/full"
assert_same "$T/src" "$A/before"
