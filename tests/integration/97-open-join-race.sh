#!/bin/bash
# CI once saw 46-mixed-modes fail under ASan: of four processes opening
# one small remote object at once, one got EBUSY.  The opens that join a
# fetch get the fetch's object while it is still being filled; the open
# read "not sealed" before it took the filesystem's lock, and by then the
# fetch had sealed the object and another open had passed it through, so
# the late one looked like an open of a copy that was set aside.  Here
# many processes open each of many small remote objects at the same
# moment, several times over: every open reads the right bytes, none
# fails.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)
N=60 # objects
P=8  # processes opening each at once
mkdir "$A/d"
python3 - "$A/d" "$N" <<'PY'
import os, sys
for i in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], "f%d" % i), "wb") as f:
        f.write((b"%d." % i) * (4095 // len(b"%d." % i)))
PY
eventually 10 ls_has "$B/d" "f$((N - 1))"

step "$P processes open each of $N small objects of a on b at once"
timeout -k 5 300 python3 - "$B/d" "$N" "$P" >"$T/opens" 2>&1 <<'PY'
import collections, errno, os, sys
d, n, p = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c = collections.Counter()
for i in range(n):
    want = (b"%d." % i) * (4095 // len(b"%d." % i))
    gate_r, gate_w = os.pipe()  # the children start when it closes
    pids = []
    for _ in range(p):
        pid = os.fork()
        if pid == 0:
            os.close(gate_w)
            os.read(gate_r, 1)
            try:
                with open(os.path.join(d, "f%d" % i), "rb", buffering=0) as f:
                    os._exit(0 if f.read() == want else 2)
            except OSError as e:
                os.write(2, ("f%d: %s\n" % (i, errno.errorcode.get(e.errno, e.errno))).encode())
                os._exit(3)
        pids.append(pid)
    os.close(gate_r)
    os.close(gate_w)
    for pid in pids:
        st = os.waitpid(pid, 0)[1]
        c[{0: "ok", 2: "wrong bytes", 3: "error"}.get(os.waitstatus_to_exitcode(st), "died")] += 1
print(dict(c))
PY
step "opens: $(cat "$T/opens")"
if [ "$(tail -1 "$T/opens")" != "{'ok': $((N * P))}" ]; then
	step "what b logged"
	tail -n 30 "$(log_of b)" >&2
fi
assert_eq "{'ok': $((N * P))}" "$(tail -1 "$T/opens")" "opens of objects being fetched"
