#!/bin/bash
# Every binary answers --help with a usage text and exit status 0.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need_built "$OBJFSD" "$MOUNT_HELPER" "$OBJFS_CLI"

for b in "$OBJFSD" "$MOUNT_HELPER" "$OBJFS_CLI"; do
	step "$(basename "$b") --help"
	rc=0
	out=$(timeout -k 5 10 "$b" --help 2>&1) || rc=$?
	assert_eq 0 "$rc" "exit status of $(basename "$b") --help"
	assert_match '[Uu]sage' "$out" "$(basename "$b") --help output"
done

# The daemon's usage names its options, so a user can find them.
out=$(timeout -k 5 10 "$OBJFSD" --help 2>&1)
for opt in capacity store node allow_overwrite transport rdma_eager_max rdma_poll; do
	assert_match "$opt" "$out" "objfsd --help mentions $opt"
done

# The CLI's usage names its commands.
out=$(timeout -k 5 10 "$OBJFS_CLI" --help 2>&1)
assert_match 'status' "$out" "objfs --help mentions status"
assert_match 'stat' "$out" "objfs --help mentions stat"
