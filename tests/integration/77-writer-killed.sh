#!/bin/bash
# Issue 19, item 3: a writer killed by a signal mid-write does not publish
# a truncated object under its name.  The object stays on its node as
# /lost+found/NAME.objfs-ID (readable there and from the other nodes, its
# bytes as far as they got), the log names the signal, and `objfs status`
# counts it.  A writer that exits normally without closing still seals
# and publishes, as before.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=128M"
mount_objfs b "$REDIS_URL" "capacity=128M"
A=$(mnt_of a)
B=$(mnt_of b)

# writer PATH EXIT: write 4 MiB to PATH, then either wait to be killed
# (EXIT=wait) or leave without closing (EXIT=exit); replaces the shell
writer() {
	exec python3 - "$1" "$2" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
for i in range(4):
    os.write(fd, bytes([65 + i]) * (1 << 20))
if sys.argv[2] == "exit":
    os._exit(0)
time.sleep(120)
PY
}

size_is() { [ "$(stat -c %s "$1" 2>/dev/null)" = "$2" ]; }
# settled NAME: the object written as NAME is either published or in
# /lost+found, as node b sees it
settled() {
	[ -e "$B/$1" ] || ls "$B/lost+found" 2>/dev/null | grep -q "^$1\.objfs-"
}

for sig in KILL TERM; do
	name=killed-$sig
	step "a writer of $name killed with SIG$sig after 4 MiB"
	writer "$A/$name" wait &
	pid=$!
	eventually 30 size_is "$A/$name" $((4 << 20))
	kill "-$sig" "$pid"
	wait "$pid" || true
	eventually 30 settled "$name"
	assert_absent "$B/$name"
	assert_absent "$A/$name"
	kept=$(ls "$A/lost+found" | grep "^$name\.objfs-") || fail "no $name in a's /lost+found"
	assert_eq $((4 << 20)) "$(stat -c %s "$B/lost+found/$kept")" "size of what b reads of $kept"
	assert_match "$name.*SIG$sig" "$(cat "$(log_of a)")" "node a's log"
done
assert_eq 2 "$(status_of a killed_writers)" "killed_writers in a's status"

step "a writer that exits without closing still publishes"
(writer "$A/exited" exit)
eventually 30 size_is "$B/exited" $((4 << 20))
assert_eq 0 "$(ls "$A/lost+found" | grep -c '^exited' || true)" "exited in /lost+found"
