#!/bin/bash
# A mount whose Redis cannot be reached fails (exit 1) within a bounded
# time, with a message that names the Redis URL (but not its password),
# and leaves nothing mounted or running.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need_built "$OBJFSD"

# unreachable NAME SPEC MUST-MATCH [MUST-NOT-MATCH]
unreachable() {
	local name=$1 spec=$2 re=$3 not=${4:-} rc=0 t0 t1 left
	step "mount with unreachable $spec"
	t0=$(date +%s)
	try_mount "$name" "$spec" || rc=$?
	t1=$(date +%s)
	assert_eq 1 "$rc" "exit status of a mount with unreachable Redis (output: $MOUNT_OUT)"
	assert_match "$re" "$MOUNT_OUT" "error message"
	[ -z "$not" ] || assert_no_match "$not" "$MOUNT_OUT" "error message"
	assert_le "$((t1 - t0))" 20 "seconds until the failed mount returned"
	if is_mounted "$(mnt_of "$name")"; then fail "$(mnt_of "$name") is mounted"; fi
	left=$(_procs_matching "$(mnt_of "$name")" "$(rundir_of "$name")" "$(store_of "$name")")
	[ -z "$left" ] || fail "processes left after the failed mount: $(describe_pids "$left")"
}

port=$(free_port)
unreachable n1 "redis://127.0.0.1:$port" "redis://127\.0\.0\.1:$port"
unreachable n2 "redis://127.0.0.1:$port/3" "127\.0\.0\.1:$port"
unreachable n3 "redis://:sekrit-pw@127.0.0.1:$port" "127\.0\.0\.1:$port" "sekrit-pw"
unreachable n4 "unix:$T/no-such.sock" "unix:$T/no-such\.sock"

step "a path that is not a socket"
: >"$T/not-a-socket"
unreachable n5 "unix:$T/not-a-socket" "$T/not-a-socket"
