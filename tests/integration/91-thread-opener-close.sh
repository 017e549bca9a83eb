#!/bin/bash
# Issue 19, item 1: close(2) returns 0 only once the object is sealed,
# and EIO when Redis does not answer within io_timeout, also when the
# thread that opened the file has ended and another thread of its
# process closes it (a thread pool, an executor): FLUSH compares the
# processes (Tgid), not only the opener's thread id.  A one-thread writer
# is the control.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
needs_single_redis
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M,io_timeout=1000"
A=$(mnt_of a)

# writer PATH THREAD FIFO: open and write PATH (in a thread that then
# exits, if THREAD=1), print "opened", wait for a line from FIFO, close,
# print what close(2) returned
writer() {
	python3 - "$1" "$2" "$3" <<'PY'
import errno, os, sys, threading
path, thread, fifo = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
box = {}
def opener():
    box["fd"] = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os.write(box["fd"], b"w" * 65536)
if thread:
    t = threading.Thread(target=opener); t.start(); t.join()
else:
    opener()
print("opened", flush=True)
open(fifo).readline()
try:
    os.close(box["fd"])
    print("close: ok", flush=True)
except OSError as e:
    print("close:", errno.errorcode[e.errno], flush=True)
PY
}

for thread in 0 1; do
	step "writer (opener in a thread that exited: $thread), Redis stopped at close"
	rm -f "$T/in$thread"
	mkfifo "$T/in$thread"
	writer "$A/w$thread" "$thread" "$T/in$thread" >"$T/out$thread" 2>&1 &
	pid=$!
	eventually 30 grep -q opened "$T/out$thread"
	kill -STOP "$REDIS_PID"
	timeout 10 sh -c 'echo go >"$1"' _ "$T/in$thread"
	wait "$pid" || true
	kill -CONT "$REDIS_PID"
	step "$(cat "$T/out$thread")"
	assert_match 'close: EIO' "$(cat "$T/out$thread")" \
		"what close(2) returned with Redis stopped (opener thread gone: $thread)"
done
