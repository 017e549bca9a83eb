#!/bin/bash
# The RDMA backend on a real kernel RDMA stack (Soft-RoCE), transport
# level: tests/test-rdma.c (eager and rendezvous at 0, 1, 4 KiB, 32 KiB-1,
# 32 KiB, 32 KiB+1, 1 MiB and 64 MiB; ranges; ENOENT/ERANGE; one
# registration per object and per destination; many fetches in flight on
# one connection, more than it has credits; forced paths; a wrong secret;
# auto falling back to TCP; a client that never sends FIN; the server
# gone in the middle of a READ).  Its plain build and its ASan+UBSan
# build, when there is one.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

run_one() {
	local bin=$1 rc=0
	[ -x "$bin" ] || return 0
	step "$bin"
	timeout -k 5 240 "$bin" >"$T/out" 2>&1 || rc=$?
	cat "$T/out" >&2
	if [ "$rc" = 77 ] || grep -q '^skip:' "$T/out"; then
		fail "$bin skipped (part of) its cases inside the VM: $(grep '^skip:' "$T/out")"
	fi
	assert_eq 0 "$rc" "exit status of $bin"
}
run_one "$OBJFS_BUILD/tests/test-rdma"
asan=$(dirname "$OBJFS_BUILD")/build-asan/tests/test-rdma
if [ -x "$asan" ]; then
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 run_one "$asan"
fi
