#!/bin/bash
# Every common writer seals its file at its own close: right after the
# writer returns, node B (which never sees a file before it is published)
# reads it byte-exact.  cp, dd, tar x, rsync, shell redirections, Python
# `with open`, a process's exit, a C program that dup()s its descriptor.
# Then what a write
# after the seal gets: a descriptor another process inherited and still
# uses after the opener closed its own; a forked child that the opener
# handed the file to (the seal waits for it); a grandchild that outlives
# its parent (its late write gets EACCES).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp tar python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=512M"
mount_objfs b "$REDIS_URL" "capacity=512M"
A=$(mnt_of a)
B=$(mnt_of b)

# 32 MiB: big enough that a seal left to the asynchronous RELEASE would
# still be running when B looks
mkdata "$S/src" $((32 << 20))
mkdata "$S/src2" $((5 << 20))
printf 'hi\n' >"$S/hi"

# on_b NAME EXPECTED-FILE: B reads NAME byte-exact, now
on_b() {
	local out
	out=$(timeout -k 5 60 cmp "$2" "$B/$1" 2>&1) || fail "right after the writer returned, B says: $out"
}

# mark; ...; sealed_at_close N WHAT: the writer's close(2) sealed N
# objects itself (A counts the seals that a close waited for), so the
# checks on B above did not just win a race
MARK=0
mark() { MARK=$(status_of a sealed_at_close); }
sealed_at_close() {
	assert_eq "$((MARK + $1))" "$(status_of a sealed_at_close)" "objects sealed by the close of $2"
}

step "cp"
mark
cp "$S/src" "$A/cp" && on_b cp "$S/src"
sealed_at_close 1 cp

step "dd"
mark
dd if="$S/src" of="$A/dd" bs=1M status=none && on_b dd "$S/src"
dd if="$S/src" of="$A/dd4k" bs=4k status=none && on_b dd4k "$S/src"
sealed_at_close 2 dd

step "tar x"
mkdir "$T/tree" "$A/tar"
cp "$S/src" "$T/tree/one"
cp "$S/src2" "$T/tree/two"
tar -C "$T/tree" -cf "$T/tree.tar" one two
mark
tar -C "$A/tar" -xf "$T/tree.tar" && on_b tar/one "$S/src" && on_b tar/two "$S/src2"
sealed_at_close 2 "tar x"

step "rsync"
if command -v rsync >/dev/null; then
	mark
	rsync "$S/src" "$A/rsync" && on_b rsync "$S/src"
	mkdir "$A/rs"
	rsync -r "$T/tree/" "$A/rs/" && on_b rs/one "$S/src" && on_b rs/two "$S/src2"
	sealed_at_close 3 rsync
else
	step "rsync is not installed: skipped"
fi

step "shell redirections"
mark
echo hi >"$A/echo" && on_b echo "$S/hi"
cat "$S/src" >"$A/cmd" && on_b cmd "$S/src"
{
	echo a
	/bin/echo b
	cat "$S/src"
} >"$A/group" && on_b group <(printf 'a\nb\n' && cat "$S/src")
exec 3>"$A/exec3"
echo a >&3
cat "$S/src" >&3
echo b >&3
exec 3>&-
on_b exec3 <(echo a && cat "$S/src" && echo b)
bash -c 'head -c 1000000 "$1" > "$2"' _ "$S/src" "$A/subshell" && on_b subshell <(head -c 1000000 "$S/src")
sealed_at_close 5 "shell redirections"

step "python with open"
mark
timeout -k 5 60 python3 - "$S/src" "$A/py" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
with open(sys.argv[2], "wb") as f:
    f.write(data)
PY
on_b py "$S/src"
sealed_at_close 1 "python with open"

step "a process that exits without closing: its exit seals"
mark
timeout -k 5 60 python3 - "$S/src" "$A/exit" <<'PY'
import os, sys
data = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, data)
os._exit(0)
PY
on_b exit "$S/src"
sealed_at_close 1 "the exit of the writer"

step "a C program writing through a dup()ed descriptor after closing the first"
mark
cat >"$T/dupw.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* dupw SRC DST: half through fd, close(fd), the rest through dup(fd) */
int main(int argc, char **argv)
{
	static char buf[64 << 20];
	int in = open(argv[1], O_RDONLY), fd, fd2;
	ssize_t n = read(in, buf, sizeof(buf));

	fd = open(argv[2], O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (in < 0 || n <= 0 || fd < 0 || (fd2 = dup(fd)) < 0)
		return perror("setup"), 1;
	if (write(fd, buf, n / 2) != n / 2 || close(fd) < 0)
		return perror("first half"), 1;
	if (write(fd2, buf + n / 2, n - n / 2) != n - n / 2)
		return perror("second half, through the dup"), 1;
	if (close(fd2) < 0)
		return perror("close of the dup"), 1;
	return 0;
}
C
if command -v cc >/dev/null && cc -O1 -o "$T/dupw" "$T/dupw.c" 2>"$T/cc.err"; then
	"$T/dupw" "$S/src" "$A/dup" && on_b dup "$S/src"
else
	step "no C compiler ($(head -c 200 "$T/cc.err" 2>/dev/null)): the same with python os.dup"
	timeout -k 5 60 python3 - "$S/src" "$A/dup" <<'PY'
import os, sys
data = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
fd2 = os.dup(fd)
os.write(fd, data[:len(data) // 2])
os.close(fd)
os.write(fd2, data[len(data) // 2:])
os.close(fd2)
PY
	on_b dup "$S/src"
fi
sealed_at_close 1 "the dup()ed descriptor"

step "the opener closes while a child it started still writes: the child's writes land"
mark
timeout -k 5 60 python3 - "$S/src" "$A/popen" <<'PY'
import subprocess, sys
with open(sys.argv[2], "wb") as f:
    p = subprocess.Popen(["sh", "-c", 'sleep 0.3; cat "$0"', sys.argv[1]], stdout=f)
# the opener's own descriptor is closed; the child still has one
rc = p.wait()
if rc != 0:
    sys.exit(f"the child writing through the inherited descriptor failed ({rc})")
PY
eventually 10 cmp "$S/src" "$B/popen"
# the child's exit (not the opener's process) ended it: RELEASE sealed it
sealed_at_close 0 "a child of the opener"

step "a grandchild writing after the opener's last close gets EACCES"
mark
timeout -k 5 60 python3 - "$A/late" "$T/late.result" <<'PY'
import errno, os, sys, time
path, result = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"sealed\n")
r, w = os.pipe()
child = os.fork()
if child == 0:
    if os.fork() == 0:
        # the grandchild: its parent is gone, so it is nobody's child here
        os.close(w)
        os.read(r, 1)
        try:
            os.write(fd, b"late\n")
            res = "OK"
        except OSError as e:
            res = errno.errorcode.get(e.errno, str(e.errno))
        try:
            os.close(fd)
            res += " close-OK"
        except OSError as e:
            res += " close-" + errno.errorcode.get(e.errno, str(e.errno))
        with open(result + ".tmp", "w") as f:
            f.write(res + "\n")
        os.rename(result + ".tmp", result)
        os._exit(0)
    os._exit(0)
os.waitpid(child, 0)
os.close(r)
os.close(fd)  # the opener's last descriptor: the seal
os.write(w, b"x")
os.close(w)
PY
on_b late <(echo sealed)
sealed_at_close 1 "the opener (before its grandchild)"
eventually 20 test -e "$T/late.result"
assert_eq "EACCES close-OK" "$(cat "$T/late.result")" "the late write, and its close"
on_b late <(echo sealed)
assert_match "write after the seal" "$(cat "$(log_of a)")" "the log of a"
