#!/bin/bash
# A node's own objects stay readable while Redis hangs (SIGSTOP), after the
# kernel dropped its cached names: objects published before the hang, one
# sealed during an earlier outage (kept unpublished), and the same object
# once it was published late.  Its own publish invalidations must not make
# it forget what its names mean.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M"
A=$(mnt_of a)

resume_redis() { kill -CONT "$REDIS_PID" 2>/dev/null || true; }
on_exit "kill -CONT $REDIS_PID 2>/dev/null"

# read_all NAME...: every name reads back byte-exact on a, from a cold
# kernel cache
read_all() {
	local f
	sync
	echo 2 >/proc/sys/vm/drop_caches
	for f in "$@"; do
		timeout -k 5 60 cmp "$T/data.$f" "$A/$f" || fail "$f is not readable on a while Redis hangs"
	done
}

names=()
for i in $(seq 1 20); do
	mkdata "$T/data.f$i" $((1000 + i * 4099))
	cp "$T/data.f$i" "$A/f$i"
	names+=("f$i")
done
# root_entries_at_least N: the root's hash in Redis has N fields or more
root_entries_at_least() {
	local n
	n=$(rcli HLEN '{objfs}:d:1')
	[ "$n" -ge "$1" ] || { echo "the root has $n fields in Redis"; return 1; }
}
eventually 10 root_entries_at_least 24
sleep 1 # the publish invalidations reach a

step "Redis hangs: a's own objects stay readable"
kill -STOP "$REDIS_PID"
read_all "${names[@]}"
resume_redis

step "an object sealed while Redis hangs is readable then, and after it is published"
# the daemon's Redis connections may be in their reconnect backoff (up to
# 5 s): wait until a change goes through again
eventually 20 mkdir "$A/ready"
mkdata "$T/data.late" 300000
python3 - "$A/late" "$T/data.late" "$REDIS_PID" <<'EOF' || fail "writing 'late' while Redis hangs failed"
import os, signal, sys
f = open(sys.argv[1], "wb")           # Redis is up: the name is created
os.kill(int(sys.argv[3]), signal.SIGSTOP)
f.write(open(sys.argv[2], "rb").read())
try:
    f.close()                         # sealed; its publish fails
except OSError as e:
    print("close: %s (Redis hangs)" % e, file=sys.stderr)
EOF
read_all late "${names[@]}"
resume_redis
late_in_redis() { [ -n "$(rcli HGET '{objfs}:d:1' late)" ] || { echo "late is not in Redis"; return 1; }; }
eventually 30 late_in_redis
sleep 1
kill -STOP "$REDIS_PID"
read_all late "${names[@]}"
resume_redis
