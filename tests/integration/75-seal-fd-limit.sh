#!/bin/bash
# Issue 19, item 1: a node at its limit on open files.  objfsd runs with
# a hard limit of 400 descriptors and gets 600 creates of 11 bytes.  Every
# close(2) that returns 0 must leave a sealed object that reads back; an
# object that cannot be held fails at open, write or close with ENOSPC or
# EIO (never EMFILE, which is no error of the writer's own), and then does
# not exist; `objfs status` counts what was sealed.  Removing objects makes
# room again.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 prlimit
start_redis
MOUNT_PREFIX="prlimit --nofile=400:400" mount_objfs n1 "$REDIS_URL" "capacity=256M"
M=$(mnt_of n1)
mkdir "$M/d"

step "600 creates of 11 bytes through a daemon limited to 400 descriptors"
python3 - "$M/d" >"$T/result" <<'PY' || fail "the create loop failed: $(cat "$T/result")"
import errno, os, sys
d = sys.argv[1]
ok, errs = [], {}
for i in range(600):
    path, stage = os.path.join(d, "f%03d" % i), "open"
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        stage = "write"
        try:
            os.write(fd, b"object %03d\n" % i)
        finally:
            stage = "close"
            os.close(fd)
        ok.append(i)
    except OSError as e:
        k = "%s:%s" % (stage, errno.errorcode.get(e.errno, e.errno))
        errs[k] = errs.get(k, 0) + 1
print("ok %d" % len(ok))
print("errors " + " ".join("%s=%d" % kv for kv in sorted(errs.items())))
print("sealed " + " ".join(str(i) for i in ok))
PY
step "$(head -2 "$T/result")"
nok=$(awk '$1 == "ok" { print $2 }' "$T/result")
errs=$(awk '$1 == "errors" { $1 = ""; print }' "$T/result")
assert_no_match 'EMFILE|ENFILE' "$errs" "errors seen by the writer"
for e in $errs; do
	assert_match '^(open|write|close):(ENOSPC|EIO)=' "$e" "an error seen by the writer"
done
[ "$nok" -gt 100 ] || fail "only $nok of 600 creates succeeded"

step "every object whose close(2) returned 0 exists and reads back"
python3 - "$M/d" "$T/result" <<'PY' || fail "objects whose close returned 0 are missing or wrong"
import os, sys
d = sys.argv[1]
want = next(l for l in open(sys.argv[2]) if l.startswith("sealed ")).split()[1:]
bad = []
for i in map(int, want):
    try:
        with open(os.path.join(d, "f%03d" % i), "rb") as f:
            if f.read() != b"object %03d\n" % i:
                bad.append("f%03d: wrong bytes" % i)
    except OSError as e:
        bad.append("f%03d: %s" % (i, e.strerror))
if bad:
    print("%d of %d bad: %s" % (len(bad), len(want), ", ".join(bad[:10])), file=sys.stderr)
    sys.exit(1)
PY
assert_eq "$nok" "$(ls "$M/d" | wc -l)" "names in d (one per successful close)"
assert_eq "$nok" "$(status_of n1 sealed)" "sealed in objfs status"
assert_no_match 'discarding it' "$(cat "$(log_of n1)")" "the daemon's log"

step "removing objects makes room for new ones"
rm -f "$M"/d/f00*
echo again >"$M/d/again" || fail "a create after removing objects failed"
assert_eq again "$(cat "$M/d/again")" "the new object"
