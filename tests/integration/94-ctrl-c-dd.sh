#!/bin/bash
# Adversarial (rule 3 of "seal integrity"; README: "A writer killed by a
# signal (kill -9, Ctrl-C, timeout, ...) ... is not published under its
# name").  dd handles SIGINT: it closes its output, then re-raises the
# signal and dies by it (status 130).  Python's `with open()` closes the
# file while KeyboardInterrupt unwinds, then dies by SIGINT too.  The
# daemon sees a close from a live process and publishes the cut-short
# object under its name.  Ctrl-C of `dd of=f` (or `timeout -s INT`)
# leaves a truncated f on every node.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need dd python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=256M"
mount_objfs b "$REDIS_URL" "capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)
slow() { while head -c 65536 /dev/zero; do sleep 0.02; done; }
settled() { [ -e "$B/$1" ] || ls "$B/lost+found" 2>/dev/null | grep -q "^$1\.objfs-"; }

step "dd from a slow source, interrupted with SIGINT (Ctrl-C) after 1 s"
# a background job of a script ignores SIGINT: give dd the default
slow | env --default-signal=INT dd of="$A/dd" bs=64k iflag=fullblock status=none &
pid=$!
sleep 1
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
assert_eq 130 "$rc" "dd's status (killed by SIGINT)"
eventually 30 settled dd
assert_absent "$B/dd"
