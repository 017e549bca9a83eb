#!/bin/bash
# Issue 19, items 2 and 3 together: a writer that stores through a
# writable shared mapping after close(2) and is killed by SIGKILL before
# it unmaps.  The mapping held the object open, so its last writer is the
# killed process: the object may be cut short and goes to
# /lost+found/NAME.objfs-ID, not under its name.  No FLUSH comes for a
# mapping; the daemon sees the death in the WRITEs of the mapped pages
# that the kernel sends as the process exits (a C writer: Python's mmap
# keeps a dup() of the descriptor, whose close at exit would show it).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cc
start_redis
mount_objfs a "$REDIS_URL" "capacity=128M"
mount_objfs b "$REDIS_URL" "capacity=128M"
A=$(mnt_of a)
B=$(mnt_of b)

# (Python's mmap keeps a dup() of the descriptor, whose close at exit
# would show the kill: a C writer has none, as most programs.)
cat >"$T/mapkill.c" <<'C'
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	size_t size = 4 << 20;
	int fd = open(argv[1], O_CREAT | O_EXCL | O_RDWR, 0644);
	char *p;

	if (fd < 0 || ftruncate(fd, size) < 0)
		return 1;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED || close(fd) < 0)
		return 1;
	memset(p, 'm', size / 2);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
C
cc -o "$T/mapkill" "$T/mapkill.c" || fail "cannot compile the writer"

step "open, ftruncate 4 MiB, mmap shared, close, store 2 MiB, then SIGKILL"
"$T/mapkill" "$A/mapped" >"$T/writer.out" &
pid=$!
eventually 30 grep -q ready "$T/writer.out"
kill -KILL "$pid"
wait "$pid" || true

settled() { [ -e "$B/mapped" ] || ls "$B/lost+found" 2>/dev/null | grep -q '^mapped\.objfs-'; }
eventually 30 settled
assert_absent "$B/mapped"
assert_absent "$A/mapped"
ls "$A/lost+found" | grep -q '^mapped\.objfs-' || fail "no mapped.objfs-ID in a's /lost+found"
assert_match "mapped.*SIGKILL" "$(cat "$(log_of a)")" "node a's log"
assert_eq 1 "$(status_of a killed_writers)" "killed_writers in a's status"
