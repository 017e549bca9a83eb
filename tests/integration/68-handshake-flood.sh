#!/bin/bash
# A flood of failed handshakes (garbage, a bad magic, a hang-up half-way,
# a GET before HELLO, nothing at all) does not flood the log: at most one line a second
# for each reason, then "N more suppressed".  The node keeps serving.
# Loopback only; the flood is bounded in count and in time.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M"
mount_objfs b "$REDIS_URL" "capacity=64M"
A=$(mnt_of a)
B=$(mnt_of b)
LOG=$(log_of a)
mkdata "$T/obj" 100000
cp "$T/obj" "$A/obj"
port=$(status_of a listen | sed 's/.*://')
lines0=$(wc -l <"$LOG")
bad0=$(status_of a bad_frames)

step "2000 bad handshakes against a (port $port)"
t0=$(date +%s)
timeout -k 5 60 python3 - "$port" <<'PY'
import os, socket, struct, sys, time

port = int(sys.argv[1])
hdr = lambda typ, magic=b"OBJF", length=0: magic + struct.pack("<BBHiIQQQ", 1, typ, 0, 0, 0, 0, 0, length)
kinds = [
    os.urandom(64),                        # garbage
    hdr(1, magic=b"XXXX", length=40),      # bad magic
    hdr(1, length=40)[:17],                # half a header, then hang up
    hdr(5, length=10),                     # GET before HELLO
    b"",                                   # nothing at all
]
deadline = time.monotonic() + 30
n = 0
while n < 2000 and time.monotonic() < deadline:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(kinds[n % len(kinds)])
        s.shutdown(socket.SHUT_WR)
        s.recv(100)
    except OSError:
        pass
    s.close()
    n += 1
print("sent", n, "bad handshakes")
if n < 2000:
    sys.exit("only %d bad handshakes in 30 s" % n)
PY
secs=$(($(date +%s) - t0 + 1))

step "the node counted them all"
bad=$(status_of a bad_frames)
[ "$((bad - bad0))" -ge 1000 ] || fail "a counted $((bad - bad0)) bad frames, expected at least 1000"

step "but logged only a few lines, then how many it suppressed"
has_suppressed() { tail -n +"$((lines0 + 1))" "$LOG" | grep -q 'more suppressed'; }
eventually 5 has_suppressed
new=$(tail -n +"$((lines0 + 1))" "$LOG" | grep -c 'transport:' || true)
# one line a second for each of the two reasons the flood makes
# (bad frames, failed handshakes), a report of each, and some slack
max=$((4 * secs + 10))
step "$new transport lines in ${secs}s (at most $max)"
assert_le "$new" "$max" "transport log lines after 2000 bad handshakes"

step "a still serves"
eventually 10 ls_has "$B" obj
assert_same "$T/obj" "$B/obj"
