#!/bin/bash
# Restart after a crash needs no manual step.  A daemon killed with SIGKILL
# leaves a dead mount (ENOTCONN) and, for a moment, a zombie whose node
# card is still live in Redis.  Mounting again at once, with no sleep and
# no umount, must work:
#   - mount.objfs (what mount -t objfs runs), an fstab line with mount -a,
#     and objfsd -f -o restart under a service manager's readiness
#     protocol (NOTIFY_SOCKET, as contrib/systemd/objfs@.service runs it);
#   - with an external Redis and with `local`;
#   - every object sealed before the crash is back, byte-exact, with the
#     same checksum;
#   - with -o restart, a live card of another host (which this host cannot
#     judge) is waited for until it expires;
#   - with `local`, a redis-server of the dead daemon that is still on its
#     way out is waited for (as it exits it unlinks its socket path).
# A live objfs mount on the same mount point is refused, and a dead mount
# of another FUSE filesystem is left alone, and the systemd unit that runs
# objfsd this way is valid.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need mount umount python3 getfattr
use_built_mount_helper
start_redis

mkdata "$T/big" $(((3 << 20) + 5))
mkdata "$T/small" 4097
mkdata "$T/one" 1

# fill MNT: four objects, one in a subdirectory
fill() {
	cp "$T/big" "$1/big"
	mkdir -p "$1/d"
	cp "$T/small" "$1/d/small"
	cp "$T/one" "$1/one"
	: >"$1/empty"
}

# sealed NAME N: N objects in the store, none pending or unpublished
sealed() {
	local st
	st=$(xattr "$(mnt_of "$1")" user.objfs.status) || return 1
	if [ "$(field objects <<<"$st")" = "$2" ] && [ "$(field pending <<<"$st")" = 0 ] &&
		[ "$(field unpublished <<<"$st")" = 0 ]; then
		return 0
	fi
	echo "$st"
	return 1
}

# checksums MNT: path and checksum of every file
checksums() {
	(cd "$1" && find . -type f | sort | while read -r f; do
		printf '%s %s\n' "$f" "$(getfattr --only-values -n user.objfs.checksum "$f")"
	done)
}

# check_back NAME: every object is back, byte-exact, same checksums
check_back() {
	local m
	m=$(mnt_of "$1")
	assert_same "$T/big" "$m/big"
	assert_same "$T/small" "$m/d/small"
	assert_same "$T/one" "$m/one"
	assert_eq 0 "$(stat -c %s "$m/empty")" "size of empty"
	assert_eq "big d empty one" "$(ls_of "$m")" "root listing after the restart"
	checksums "$m" >"$T/sums.$1.after"
	diff "$T/sums.$1" "$T/sums.$1.after" >&2 || fail "$1: checksums changed across the restart"
}

# gives_enotconn PATH: stat PATH fails with ENOTCONN (for eventually).
# AT_STATX_FORCE_SYNC asks the daemon: plain stat(2) may be answered from
# the attributes the kernel still caches.
gives_enotconn() {
	local e
	e=$(py_errno 'import ctypes
libc = ctypes.CDLL(None, use_errno=True)
if libc.statx(-100, A[0].encode(), 0x2000, 1, ctypes.create_string_buffer(256)) != 0:
    raise OSError(ctypes.get_errno(), "statx")' "$1")
	[ "$e" = ENOTCONN ] || {
		echo "statx $1: $e"
		return 1
	}
}

# crash NAME: SIGKILL the daemon; the mount must now give ENOTCONN.  No
# wait: the daemon may still be a zombie when the caller mounts again.
crash() {
	local m p
	m=$(mnt_of "$1")
	KILLED=
	for p in ${MOUNT_PIDS[$1]}; do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = objfsd ] && KILLED=$p
	done
	[ -n "$KILLED" ] || fail "no objfsd found for $1"
	kill_node "$1" KILL
	eventually 10 gives_enotconn "$m"
	is_mounted "$m" || fail "$m is no longer mounted after the crash"
	step "killed objfsd $KILLED; $m gives ENOTCONN; the daemon is $(daemon_state)"
	MOUNT_PIDS[$1]=
}

# daemon_state: what is left of the daemon crash() killed
daemon_state() {
	local st
	st=$(awk '{print $3}' "/proc/$KILLED/stat" 2>/dev/null) || st=
	case $st in
	'') echo "reaped" ;;
	Z) echo "a zombie" ;;
	*) echo "in state $st" ;;
	esac
}

# mounts_at PATH: how many mounts are stacked on PATH
mounts_at() {
	awk -v m="$1" '$5 == m { n++ } END { print n + 0 }' /proc/self/mountinfo
}

# ---- mount.objfs, external Redis ----

A=$(mnt_of a)
mkdir -p "$A"
opts_a="capacity=64M,$(default_opts a)"
step "mount.objfs $REDIS_URL $A"
assert_ok "$MOUNT_HELPER" "$REDIS_URL" "$A" -o "$opts_a"
_remember_mount a
fill "$A"
eventually 15 sealed a 4
checksums "$A" >"$T/sums.a"

step "kill -9, then mount.objfs again at once"
crash a
rc=0
capture 60 "$MOUNT_HELPER" "$REDIS_URL" "$A" -o "$opts_a" || rc=$?
[ "$rc" = 0 ] || fail "mount.objfs on the dead mount failed (status $rc): $CAPTURED$(_log_tail a)"
_remember_mount a
assert_eq 1 "$(mounts_at "$A")" "mounts on $A (the dead one must be gone, not stacked under)"
check_back a

step "a live objfs mount on the same point is refused"
assert_fails_with "already mounted|live objfsd" \
	"$MOUNT_HELPER" "$REDIS_URL" "$A" -o "capacity=64M,$(default_opts a-other)"
assert_fails_with "already mounted|live objfsd" \
	"$MOUNT_HELPER" "$REDIS_URL" "$A" -o "$opts_a"
assert_eq 1 "$(mounts_at "$A")" "mounts on $A after the refused mounts"
check_back a

# ---- an fstab line and mount -a ----

step "kill -9, then mount -a -T FSTAB at once"
printf '%s %s objfs %s 0 0\n' "$REDIS_URL" "$A" "$opts_a,_netdev" >"$T/fstab"
crash a
assert_ok mount -a -T "$T/fstab"
wait_mounted "$A" 10 || fail "$A is not mounted after mount -a"
_remember_mount a
assert_eq 1 "$(mounts_at "$A")" "mounts on $A after mount -a"
check_back a

# ---- objfsd -f -o restart, as a service manager runs it ----

# start_service NAME SPEC OPTS: objfsd in the foreground with -o restart
# and NOTIFY_SOCKET, as systemd runs contrib/systemd/objfs@.service; wait
# (30 s) for its READY=1
start_service() {
	local name=$1 spec=$2 opts=$3 m sock i
	m=$(mnt_of "$name")
	sock=$T/notify.$name.sock
	rm -f "$sock" "$sock.out"
	python3 - "$sock" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
with open(sys.argv[1] + ".out", "a") as out:
    while True:
        msg = s.recv(4096).decode()
        out.write(msg.replace("\n", " ") + "\n")
        out.flush()
        if "READY=1" in msg.split("\n"):
            break
EOF
	BG_PIDS+=("$!")
	for ((i = 0; i < 100; i++)); do
		[ -S "$sock" ] && break
		sleep 0.1
	done
	NOTIFY_SOCKET=$sock "$OBJFSD" "$spec" "$m" -f -o restart -o "$opts" \
		>>"$T/service.$name.out" 2>&1 </dev/null &
	for ((i = 0; i < 300; i++)); do
		grep -qx 'READY=1' "$sock.out" 2>/dev/null && break
		sleep 0.1
	done
	grep -qx 'READY=1' "$sock.out" 2>/dev/null ||
		fail "objfsd -f -o restart sent no READY=1 within 30 s: $(tail -n 20 "$T/service.$name.out")"
	is_mounted "$m" || fail "objfsd reported ready but $m is not mounted"
	_remember_mount "$name"
}

step "kill -9, then objfsd -f -o restart at once (the systemd unit's command)"
crash a
start_service a "$REDIS_URL" "$opts_a"
assert_eq 1 "$(mounts_at "$A")" "mounts on $A after the restart"
check_back a
step "the restarted daemon answers for its node"
assert_eq a "$(status_of a node)" "node of the restarted mount"

step "and again: a crash of the restarted daemon"
crash a
start_service a "$REDIS_URL" "$opts_a"
check_back a
umount_objfs a || fail "unmount after the restarts left processes behind"

# ---- restart waits for what this host cannot judge ----

step "a live card of node w from another host: refused at once, waited for with restart"
W=$(mnt_of w)
mkdir -p "$W"
rcli HSET {objfs}:node:w host elsewhere.invalid pid 1 listen 192.0.2.1:7419 instance feed0001 \
	started 1 capacity 1 used 0 caps tcp >/dev/null
rcli EXPIRE {objfs}:node:w 5 >/dev/null
opts_w="capacity=64M,$(default_opts w)"
assert_fails_with "node name 'w' is in use by a live objfsd .*elsewhere.invalid" \
	"$MOUNT_HELPER" "$REDIS_URL" "$W" -o "$opts_w"
t0=$(now)
assert_ok "$MOUNT_HELPER" "$REDIS_URL" "$W" -o "restart,$opts_w"
waited=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%d", b - a }')
_remember_mount w
step "mounted after waiting ${waited} s for the card to expire"
assert_le 1 "$waited" "seconds the restart waited"
assert_match "held by pid 1 on host elsewhere.invalid; waiting up to" "$(cat "$(log_of w)")" "log of w"
assert_eq w "$(status_of w node)" "node of the mount that waited"
umount_objfs w || fail "unmount of w left processes behind"

# ---- local ----

L=$(mnt_of l)
mkdir -p "$L"
opts_l="capacity=64M,$(default_opts l)"
step "local: mount.objfs, fill, kill -9, mount.objfs again at once"
assert_ok "$MOUNT_HELPER" local "$L" -o "$opts_l"
_remember_mount l
fill "$L"
eventually 15 sealed l 4
checksums "$L" >"$T/sums.l"
crash l
rc=0
capture 60 "$MOUNT_HELPER" local "$L" -o "$opts_l" || rc=$?
[ "$rc" = 0 ] || fail "local: mount.objfs on the dead mount failed (status $rc): $CAPTURED$(_log_tail l)"
_remember_mount l
check_back l
step "local: kill -9, then objfsd -f -o restart at once"
crash l
start_service l local "$opts_l"
check_back l
step "local: a redis-server of a dead daemon still on its way out is waited for"
# what a daemon killed a moment ago leaves: its redis-server, sent SIGTERM
# through PR_SET_PDEATHSIG, may still answer on the run directory's socket
# and would unlink the new server's socket as it exits
crash l
mkdir -p "$T/old-redis"
redis-server --port 0 --unixsocket "$(rundir_of l)/redis.sock" --unixsocketperm 700 \
	--save "" --appendonly no --dir "$T/old-redis" --logfile "$T/old-redis/log" \
	--daemonize no &
old_redis=$!
BG_PIDS+=("$old_redis")
eventually 10 redis-cli -s "$(rundir_of l)/redis.sock" PING
(sleep 1 && timeout 10 redis-cli -s "$(rundir_of l)/redis.sock" SHUTDOWN NOSAVE) >/dev/null 2>&1 &
BG_PIDS+=("$!")
assert_ok "$MOUNT_HELPER" local "$L" -o "$opts_l"
_remember_mount l
# the old server is gone (and its exit has unlinked whatever it was
# going to) before the new one is asked, not a guessed second later
wait_gone 20 "$old_redis" || fail "the old redis-server $old_redis did not exit"
assert_eq PONG "$(timeout 10 redis-cli -s "$(rundir_of l)/redis.sock" PING 2>&1)" \
	"the new local redis-server on its socket"
check_back l
umount_objfs l || fail "local: unmount after the restarts left processes behind"

# ---- a dead mount of another FUSE filesystem is not ours to clean ----

O=$T/other
mkdir -p "$O"
step "a dead FUSE mount of type fuse.other on $O"
if python3 - "$O" <<'EOF'; then
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("/dev/fuse", os.O_RDWR)
opts = "fd=%d,rootmode=40000,user_id=0,group_id=0" % fd
if libc.mount(b"other", sys.argv[1].encode(), b"fuse.other", 0, opts.encode()) != 0:
    sys.exit(os.strerror(ctypes.get_errno()))
os.close(fd)
EOF
	on_exit "umount -l '$O' 2>/dev/null"
	eventually 10 gives_enotconn "$O"
	assert_fails_with "dead fuse.other mount .*not touching it" \
		"$MOUNT_HELPER" "$REDIS_URL" "$O" -o "capacity=64M,$(default_opts o)"
	is_mounted "$O" || fail "the dead fuse.other mount on $O was unmounted"
	assert_eq fuse.other "$(mount_fstype "$O")" "type of the mount on $O"
else
	step "cannot make a dead FUSE mount here: not checked"
fi

# ---- the unit file that runs objfsd this way ----

if command -v systemd-analyze >/dev/null; then
	step "systemd-analyze verify contrib/systemd/objfs@.service"
	mkdir -p "$T/units"
	sed "s|/usr/local/bin/objfsd|$OBJFSD|" "$LIB_DIR/../contrib/systemd/objfs@.service" \
		>"$T/units/objfs@mnt-objfs.service"
	assert_ok systemd-analyze verify "$T/units/objfs@mnt-objfs.service"
	assert_match "ExecStart=.* -f -o restart " "$(cat "$T/units/objfs@mnt-objfs.service")" \
		"the unit's command"
else
	step "systemd-analyze is not installed: the unit file is not checked"
fi
