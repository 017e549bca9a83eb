#!/bin/bash
# Issue 19, item 3: the "killed writer" mark comes from the process that
# wrote last, not from whichever one closes the last descriptor.
#   1. A writer writes 1 MiB, forks a helper that inherits the descriptor
#      and never writes (a background job, a subprocess that inherits
#      stdout), closes it and exits 0; the helper is later stopped with
#      SIGTERM: the complete object is published under its name.
#   2. The other way round: a writer that forked such a helper is killed
#      by SIGKILL halfway; the helper exits normally later: the cut-short
#      object goes to /lost+found.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=128M"
mount_objfs b "$REDIS_URL" "capacity=128M"
A=$(mnt_of a)
B=$(mnt_of b)
settled() { [ -e "$B/$1" ] || ls "$B/lost+found" 2>/dev/null | grep -q "^$1\.objfs-"; }

step "1. a complete write; the helper that inherited the descriptor is killed later"
python3 - "$A/done" >"$T/helper" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
os.write(fd, b"d" * (1 << 20))
pid = os.fork()
if pid == 0:
    os.setsid()
    time.sleep(120)
    os._exit(0)
os.close(fd)
print(pid)
PY
helper=$(cat "$T/helper")
kill -TERM "$helper"
wait_gone 10 "$helper" || fail "helper $helper did not exit"
eventually 30 settled done
assert_exists "$B/done"
assert_eq $((1 << 20)) "$(stat -c %s "$B/done")" "size of done"

step "2. the writer is killed halfway; its helper exits normally later"
python3 - "$A/cut" >"$T/writer" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
os.write(fd, b"c" * (1 << 20))
if os.fork() == 0:
    os.setsid()
    time.sleep(2)
    os._exit(0)
print("ready", flush=True)
time.sleep(120)
PY
pid=$!
eventually 30 grep -q ready "$T/writer"
kill -KILL "$pid"
wait "$pid" || true
sleep 3
eventually 30 settled cut
assert_absent "$B/cut"
