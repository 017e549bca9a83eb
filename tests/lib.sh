# shellcheck shell=bash
# shellcheck disable=SC2034 # variables here are used by the tests that source this file
#
# lib.sh: sourced by every integration test (tests/integration/NN-*.sh).
#
# Gives each test a work directory ($T, under /tmp) and a store directory
# ($S, under /dev/shm), private redis-servers, objfs mounts with a unique
# node, store, run directory and log each, assertions, and a cleanup on
# exit that unmounts everything and stops every process this test started
# (and only those).  A test exits 0 (pass), 77 (skip) or anything else
# (fail), and says what failed on stderr.
#
# Environment:
#   OBJFS_BUILD        build directory (default: <repo>/build)
#   OBJFS_TEST_TMPDIR  where to make $T (default /tmp); tests/run sets it
#   OBJFS_SANITIZE=1   the build is sanitized: collect ASan/UBSan reports
#                      from every process and fail the test if any appear
#   OBJFS_KEEP=1       keep $T and $S after the test (for debugging)
#   OBJFS_TEST_PASSTHROUGH=auto|off
#                      mount every daemon with passthrough=MODE (tests/run
#                      --passthrough; unset: objfsd's default)
#   OBJFS_TEST_ENGINE=single|sentinel|cluster
#                      what start_redis starts (default single: one
#                      redis-server): a Sentinel topology or a Redis
#                      Cluster of tests/redis-topo.sh, REDIS_URL its SPEC
#                      (tests/run's integration-cluster pass)
#
# Every wait is bounded.

set -Eeuo pipefail

TEST_NAME=$(basename "$0" .sh)
LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OBJFS_BUILD=$(cd "${OBJFS_BUILD:-$LIB_DIR/../build}" 2>/dev/null && pwd) || {
	echo "FAIL: build directory ${OBJFS_BUILD:-$LIB_DIR/../build} does not exist" >&2
	exit 1
}
# shellcheck disable=SC2034 # used by the tests
OBJFSD=$OBJFS_BUILD/daemon/objfsd
# shellcheck disable=SC2034
MOUNT_HELPER=$OBJFS_BUILD/mount-helpers/mount.objfs
OBJFS_CLI=$OBJFS_BUILD/cli/objfs

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: integration tests need root (FUSE mounts)" >&2
	exit 77
fi
if [ ! -c /dev/fuse ]; then
	echo "SKIP: /dev/fuse is missing" >&2
	exit 77
fi

# ---- reporting ----

_FAILED_CMD_REPORTED=0

# Print a progress line to the test's log.
step() { printf '== %s\n' "$*" >&2; }

# Fail the test now.  Never call from a $(...) subshell.
fail() {
	printf 'FAIL: %s: %s\n' "$TEST_NAME" "$*" >&2
	_FAILED_CMD_REPORTED=1
	exit 1
}

skip() {
	printf 'SKIP: %s: %s\n' "$TEST_NAME" "$*" >&2
	exit 77
}

_on_err() {
	local rc=$? line=$1 cmd=$2
	if [ "$_FAILED_CMD_REPORTED" = 0 ]; then
		printf 'FAIL: %s: line %s: command failed (status %s): %s\n' \
			"$TEST_NAME" "$line" "$rc" "$cmd" >&2
		_FAILED_CMD_REPORTED=1
	fi
}
trap '_on_err "$LINENO" "$BASH_COMMAND"' ERR

# Skip the test if a tool is missing.
need() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip "needs '$c', which is not installed"
	done
}

# The binaries are part of the project: missing means the build is broken,
# which is a failure, not a skip.
need_built() {
	local b
	for b in "$@"; do
		[ -x "$b" ] || fail "not built: $b"
	done
}

# ---- assertions ----

assert_eq() {
	local expected=$1 actual=$2 what=${3:-value}
	[ "$expected" = "$actual" ] ||
		fail "$what: expected '$expected', got '$actual'"
}

assert_ne() {
	local unexpected=$1 actual=$2 what=${3:-value}
	[ "$unexpected" != "$actual" ] || fail "$what: did not expect '$actual'"
}

# assert_match ERE STRING [WHAT]
assert_match() {
	local re=$1 s=$2 what=${3:-value}
	grep -qE -- "$re" <<<"$s" || fail "$what: expected to match /$re/, got: $s"
}

assert_no_match() {
	local re=$1 s=$2 what=${3:-value}
	if grep -qE -- "$re" <<<"$s"; then fail "$what: must not match /$re/, got: $s"; fi
}

# assert_le A B [WHAT]   (integers)
assert_le() {
	[ "$1" -le "$2" ] || fail "${3:-value}: expected $1 <= $2"
}

# capture SECONDS CMD...: run CMD bounded to SECONDS with stdout and
# stderr going to a file (not a pipe: a daemon that CMD leaves behind
# must not be able to hold a $(...) open), then put the output in
# $CAPTURED and return CMD's status.
CAPTURED=
capture() {
	local secs=$1 rc=0
	shift
	timeout -k 5 "$secs" "$@" >"$T/.capture" 2>&1 </dev/null || rc=$?
	CAPTURED=$(cat "$T/.capture")
	return "$rc"
}

# Run CMD (bounded to 60 s); fail with its output if it does not succeed.
assert_ok() {
	local rc=0
	capture 60 "$@" || rc=$?
	[ "$rc" = 0 ] || fail "command failed (status $rc): $*: $CAPTURED"
}

# assert_fails_with ERE CMD...: CMD (bounded to 60 s) must fail, and its
# stdout+stderr must match ERE (say "Permission denied|Operation not
# permitted").
assert_fails_with() {
	local re=$1 out rc=0
	shift
	capture 60 "$@" || rc=$?
	out=$CAPTURED
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then fail "timed out: $*"; fi
	[ "$rc" != 0 ] || fail "expected failure ($re) but it succeeded: $*: $out"
	grep -qiE -- "$re" <<<"$out" ||
		fail "expected failure matching /$re/: $* (status $rc): $out"
}

# assert_same FILE1 FILE2: byte-exact.
assert_same() {
	local out
	out=$(timeout -k 5 120 cmp -- "$1" "$2" 2>&1) || fail "files differ: $out"
}

assert_exists() { [ -e "$1" ] || fail "expected $1 to exist"; }
assert_absent() {
	if [ -e "$1" ] || [ -L "$1" ]; then fail "expected $1 to be absent"; fi
}

# py_errno CODE [ARG...]: run python CODE with A = [ARG...] and print "OK"
# or the errno name of the OSError it raised.
py_errno() {
	local code=$1
	shift
	timeout -k 5 60 python3 - "$code" "$@" <<'EOF'
import errno, os, sys
code, A = sys.argv[1], sys.argv[2:]
try:
    exec(code)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
EOF
}

# assert_errno ERE CODE [ARG...]: CODE must raise an OSError whose errno
# name matches ERE (anchored), e.g. "EACCES|EPERM".
assert_errno() {
	local re=$1 got
	shift
	got=$(py_errno "$@") || fail "python failed running: $1"
	[[ $got =~ ^($re)$ ]] || fail "expected errno $re from: $1 ${*:2}, got $got"
}

# ls_has DIR NAME: does `ls -A DIR` list NAME?  Fails the test if ls fails.
ls_has() {
	timeout -k 5 30 ls -A -- "$1" >"$T/.ls" 2>&1 || fail "ls $1 failed: $(cat "$T/.ls")"
	grep -qxF -- "$2" "$T/.ls"
}

# ls_of DIR: `ls -A DIR` as one line, names separated by spaces
ls_of() {
	timeout -k 5 30 ls -A -- "$1" | tr '\n' ' ' | sed 's/ $//'
}

# eventually SECONDS CMD...: retry CMD (a program: each try bounded to 30 s;
# or a shell function of this file, which must bound itself) every
# 0.2 s until it succeeds; fail the test with its last output if it never
# does.
eventually() {
	local secs=$1 deadline out
	shift
	deadline=$(($(date +%s) + secs))
	while :; do
		if declare -F "$1" >/dev/null; then
			out=$("$@" 2>&1) && return 0
		else
			out=$(timeout -k 5 30 "$@" 2>&1) && return 0
		fi
		[ "$(date +%s)" -lt "$deadline" ] || fail "not true within ${secs}s: $*: $out"
		sleep 0.2
	done
}

# listing_is DIR "NAMES": for eventually
listing_is() { [ "$(ls_of "$1")" = "$2" ] || { echo "ls $1: $(ls_of "$1")"; return 1; }; }

# ---- data ----

# small_catalog_store DIR: a store directory for store=DIR whose catalog
# lives on a tmpfs of 1 MiB of the test's own, and whose objects live on
# another tmpfs mounted at DIR/data: filling DIR (fill_space) makes the
# catalog's appends fail while objects still find room.  Skips the test
# where it may not mount.
small_catalog_store() {
	mkdir -p "$1"
	mount -t tmpfs -o size=1M,mode=0700 objfs-test-catalog "$1" || skip "cannot mount a tmpfs here"
	on_exit "umount -l '$1'"
	mkdir "$1/data"
	mount -t tmpfs -o size=64M,mode=0700 objfs-test-data "$1/data" || fail "cannot mount a tmpfs on $1/data"
	on_exit "umount -l '$1/data'"
}

# small_inode_store DIR N: a store directory for store=DIR whose objects
# live on a tmpfs of the test's own at DIR/data that has N inodes
# (nr_inodes=N, its root among them; objfsd only resizes it), so that
# objects can run out of inodes long before they run out of bytes.
# Skips the test where it may not mount.
small_inode_store() {
	mkdir -p "$1/data"
	mount -t tmpfs -o "size=64M,nr_inodes=$2,mode=0700" objfs-test-data "$1/data" ||
		skip "cannot mount a tmpfs here"
	on_exit "umount -l '$1/data'"
}

# fill_space DIR: take every free byte of the filesystem DIR is on, in
# DIR/fill; free_space DIR gives them back
fill_space() {
	dd if=/dev/zero of="$1/fill" bs=4096 2>/dev/null || true
	step "$1 is full ($(stat -c %s "$1/fill") bytes taken by the test)"
}
free_space() { rm -f "$1/fill"; }

# wedge_catalog MNT STORE: with STORE's catalog filesystem full
# (small_catalog_store, fill_space), create small objects in MNT until a
# seal fails, because the catalog log's last page is full too (at most 200
# tries).  Prints "N ERRNO" of the create whose close(2) failed.
wedge_catalog() {
	python3 - "$1" <<'PY' || fail "wedging the catalog of $2 failed"
import errno, os, sys
for i in range(200):
    p = os.path.join(sys.argv[1], "wedge%d" % i)
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    os.write(fd, b"wedge %d\n" % i)
    try:
        os.close(fd)
    except OSError as e:
        print(i, errno.errorcode[e.errno])
        sys.exit(0)
sys.exit("200 seals went through with the catalog's filesystem full")
PY
}

# mkdata FILE SIZE: SIZE bytes from /dev/urandom.
mkdata() {
	head -c "$2" /dev/urandom >"$1"
	[ "$(stat -c %s "$1")" = "$2" ] || fail "could not make $2 bytes of test data in $1"
}

sha256_of() { sha256sum <"$1" | cut -d' ' -f1; }

# xxh3_128 FILE: the canonical (big-endian) xxh3-128 hex digest, as objfs
# publishes it, computed independently through libxxhash.
xxh3_128() {
	timeout -k 5 60 python3 - "$1" <<'EOF'
import ctypes, ctypes.util, sys
lib = ctypes.util.find_library("xxhash")
if not lib:
    sys.exit("libxxhash not found")
x = ctypes.CDLL(lib)
class H(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]
x.XXH3_128bits.restype = H
x.XXH3_128bits.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
data = open(sys.argv[1], "rb").read()
buf = ctypes.create_string_buffer(data, len(data))
h = x.XXH3_128bits(buf, len(data))
print("%016x%016x" % (h.high64, h.low64))
EOF
}

# A free loopback TCP port (racy, but private to this machine), below the
# kernel's ephemeral range, so that no outgoing connection takes it
# between its choice and its bind.
free_port() {
	python3 - <<'EOF'
import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(1000):
    p = random.randrange(10000, max(low, 12000))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
else:
    sys.exit("free_port: no free port below %d" % max(low, 12000))
EOF
}

now() { date +%s.%N; }

# timed_cat SRC DST [SECONDS]: copy SRC to DST (its stderr to DST.err),
# bounded to SECONDS (default 60); print "STATUS SECONDS-TAKEN"
timed_cat() {
	local rc=0 t0 t1
	t0=$(now)
	timeout -k 5 "${3:-60}" cat "$1" >"$2" 2>"$2.err" || rc=$?
	t1=$(now)
	echo "$rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
}

# ---- work directories ----

_tmpbase=${OBJFS_TEST_TMPDIR:-/tmp}
T=$(mktemp -d "$_tmpbase/objfs-$TEST_NAME.XXXXXX")
S=$(mktemp -d "${OBJFS_TEST_SHMDIR:-/dev/shm}/objfs-$TEST_NAME.XXXXXX")
export T S
chmod 755 "$T"

if [ "${OBJFS_SANITIZE:-0}" = 1 ]; then
	mkdir -p "$T/sanitizer"
	export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:log_path=$T/sanitizer/asan"
	export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}:log_path=$T/sanitizer/ubsan"
fi

# ---- processes ----

# _procs_matching STR...: pids of objfsd, mount.objfs and redis-server
# processes whose command line or working directory mentions one of STR.
_procs_matching() {
	local p comm cmd cwd s
	for p in /proc/[0-9]*; do
		# read, not $(cat): no process per pid (in a test VM under
		# emulation that is ~25 ms each, seconds per call)
		read -r comm 2>/dev/null <"$p/comm" || continue
		case $comm in
		objfsd | mount.objfs | redis-server | redis-check-* | objfs*) ;;
		*) continue ;;
		esac
		cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
		cwd=$(readlink "$p/cwd" 2>/dev/null) || cwd=
		for s in "$@"; do
			case "$cmd $cwd/" in
			*"$s"*)
				echo "${p#/proc/}"
				break
				;;
			esac
		done
	done
}

# _children PID: direct children of PID
_children() {
	{ ps -o pid= --ppid "$1" 2>/dev/null || true; } | tr -d ' '
	return 0
}

# Our processes: everything that mentions $T or $S.
our_procs() { _procs_matching "$T" "$S"; }

# describe_pids PID...: one "pid comm cmdline" line each (the pids may
# also come as one space- or newline-separated word)
describe_pids() {
	local p
	# shellcheck disable=SC2048,SC2086
	for p in $*; do
		[ -d "/proc/$p" ] || continue
		printf '  %s %s %s\n' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)" \
			"$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
	done
}

# alive PID...: print those still running (zombies count as gone)
alive() {
	local p st
	for p in "$@"; do
		st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) || continue
		[ "$st" = Z ] || echo "$p"
	done
	return 0
}

# wait_gone SECONDS PID...: 0 once every PID has exited
wait_gone() {
	local secs=$1 i left
	shift
	for ((i = 0; i < secs * 10; i++)); do
		left=$(alive "$@")
		[ -z "$left" ] && return 0
		sleep 0.1
	done
	return 1
}

# ---- redis ----

REDIS_PID=
REDIS_SOCK=
REDIS_PORT=
# shellcheck disable=SC2034 # used by the tests
REDIS_URL=
REDIS_DIR=$T/redis

_redis_start() {
	mkdir -p "$REDIS_DIR"
	if [ -n "$REDIS_SOCK" ]; then
		redis-server --port 0 --unixsocket "$REDIS_SOCK" --unixsocketperm 700 \
			--save "" --appendonly no --dir "$REDIS_DIR" \
			--logfile "$REDIS_DIR/redis.log" --daemonize no &
	else
		redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
			--dir "$REDIS_DIR" --logfile "$REDIS_DIR/redis.log" --daemonize no &
	fi
	REDIS_PID=$!
	local i
	for ((i = 0; i < 100; i++)); do
		if [ "$(rcli PING 2>/dev/null)" = PONG ]; then return 0; fi
		[ -n "$(alive "$REDIS_PID")" ] || break
		sleep 0.1
	done
	fail "redis-server did not start: $(tail -n 5 "$REDIS_DIR/redis.log" 2>/dev/null)"
}

# start_redis: a private redis-server on a unix socket in $T.
# Sets REDIS_SOCK, REDIS_URL (unix:...), REDIS_PID.  Under
# OBJFS_TEST_ENGINE=sentinel or cluster, that topology instead
# (start_topology); rcli then talks to its master of the namespace.
start_redis() {
	need redis-server redis-cli
	if [ "$OBJFS_TEST_ENGINE" != single ]; then
		start_topology "$OBJFS_TEST_ENGINE"
		return 0
	fi
	REDIS_SOCK=$T/redis.sock
	REDIS_PORT=
	REDIS_URL=unix:$REDIS_SOCK
	_redis_start
}

# start_redis_tcp: the same on a free loopback port.  Sets REDIS_PORT,
# REDIS_URL (redis://127.0.0.1:PORT).
start_redis_tcp() {
	need redis-server redis-cli
	REDIS_SOCK=
	REDIS_PORT=$(free_port)
	REDIS_URL=redis://127.0.0.1:$REDIS_PORT
	_redis_start
}

# rcli ARGS...: redis-cli against our redis (bounded); under a topology,
# the master that has objfs's namespace now (sentinel: the one the
# sentinels name; cluster: the owner of the namespace's slot, followed
# with -c should it move meanwhile)
rcli() {
	local port
	case $TOPO_KIND in
	sentinel)
		port=$(topo_sentinel_master) || return 1
		tcli "$port" "$@"
		return
		;;
	cluster)
		port=$(topo_cluster_slot_owner "$TOPO_NS_KEY") || return 1
		tcli "$port" -c "$@"
		return
		;;
	esac
	if [ -n "$REDIS_SOCK" ]; then
		timeout -k 2 10 redis-cli -s "$REDIS_SOCK" "$@"
	else
		timeout -k 2 10 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"
	fi
}

# stop_redis [save|nosave]: shut our redis down (default nosave: its data
# is lost; "save" writes dump.rdb so that restart_redis brings it back).
stop_redis() {
	local how=${1:-nosave}
	[ -n "$REDIS_PID" ] || return 0
	rcli SHUTDOWN "${how^^}" >/dev/null 2>&1 || true
	if ! wait_gone 10 "$REDIS_PID"; then
		kill -KILL "$REDIS_PID" 2>/dev/null || true
		wait_gone 5 "$REDIS_PID" || true
	fi
	wait "$REDIS_PID" 2>/dev/null || true
	REDIS_PID=
}

# restart_redis: start it again on the same socket or port and directory.
restart_redis() {
	[ -z "$REDIS_PID" ] || fail "restart_redis: redis is still running"
	_redis_start
}

# ---- Redis Sentinel and Redis Cluster (tests/redis-topo.sh) ----

OBJFS_TEST_ENGINE=${OBJFS_TEST_ENGINE:-single}
case $OBJFS_TEST_ENGINE in
single | sentinel | cluster) ;;
*)
	echo "FAIL: $TEST_NAME: OBJFS_TEST_ENGINE is single, sentinel or cluster, not '$OBJFS_TEST_ENGINE'" >&2
	exit 1
	;;
esac
# shellcheck source=SCRIPTDIR/redis-topo.sh
. "$LIB_DIR/redis-topo.sh"
# a topology that does not come up fails the test, with the reason
TOPO_FAIL=fail

# start_topology sentinel|cluster: that topology under $T/topo (stopped
# at exit, before the cleanup looks for leftovers), REDIS_URL its SPEC.
# The TOPO_* variables describe it; tests/redis-topo.sh has the helpers.
start_topology() {
	need redis-server redis-cli python3
	on_exit topo_stop
	case $1 in
	sentinel) topo_sentinel_start "$T/topo" ;;
	cluster) topo_cluster_start "$T/topo" ;;
	*) fail "start_topology: no topology '$1'" ;;
	esac
	REDIS_SOCK=
	REDIS_PORT=
	REDIS_URL=$TOPO_SPEC
	step "redis $1: $TOPO_SPEC (data nodes: $TOPO_PORTS)"
}

# topology_pair sentinel|cluster: start_topology, and nodes a and b on it,
# at $A and $B.  io_timeout=1000: the longest one Redis call waits, so
# that a call caught on a dead master fails soon and the next one goes to
# the new master.
topology_pair() {
	need getfattr
	start_topology "$1"
	mount_objfs a "$REDIS_URL" "capacity=128M,io_timeout=1000"
	mount_objfs b "$REDIS_URL" "capacity=128M,io_timeout=1000"
	A=$(mnt_of a)
	B=$(mnt_of b)
}

# start_redis_or_local: for a test that runs on objfs's own local Redis
# (SPEC "local") under the single engine, and on the engine's topology
# under another one; sets REDIS_URL
start_redis_or_local() {
	if [ "$OBJFS_TEST_ENGINE" = single ]; then
		REDIS_URL=local
	else
		start_redis
	fi
}

# needs_single_redis: skip under another engine (for a test that
# restarts, flushes or shuts down its one redis-server)
needs_single_redis() {
	[ "$OBJFS_TEST_ENGINE" = single ] ||
		skip "needs a single redis-server, not the $OBJFS_TEST_ENGINE engine"
}

# ---- mounts ----

declare -a MOUNTS=()
declare -A MOUNT_PIDS=()
declare -a BG_PIDS=()
MOUNT_OUT=

mnt_of() { echo "$T/$1"; }
log_of() { echo "$T/$1.log"; }
store_of() { echo "$S/$1"; }
rundir_of() { echo "$T/$1.run"; }

# Is PATH a mount point right now?
is_mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# fstype of the mount at PATH
mount_fstype() {
	awk -v m="$1" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 1); exit } }' \
		/proc/self/mountinfo
}

# default_opts NAME: the options that keep a mount private to this test,
# and the passthrough mode tests/run asked for
default_opts() {
	echo "node=$1,store=$(store_of "$1"),rundir=$(rundir_of "$1"),log=$(log_of "$1"),listen=127.0.0.1:$(free_port)${OBJFS_TEST_PASSTHROUGH:+,passthrough=$OBJFS_TEST_PASSTHROUGH}"
}

# with_opts BASE EXTRA: the comma-separated options of BASE and then of
# EXTRA, without those of BASE that EXTRA gives again (objfsd refuses an
# option given twice with different values): with_opts "$(default_opts
# n1)" store=/elsewhere
with_opts() {
	local o out='' keys=,
	local -a bs xs
	IFS=, read -ra xs <<<"$2"
	for o in "${xs[@]}"; do keys+="${o%%=*},"; done
	IFS=, read -ra bs <<<"$1"
	for o in "${bs[@]}"; do
		case $keys in *",${o%%=*},"*) continue ;; esac
		out+="${out:+,}$o"
	done
	[ -z "$2" ] || out+="${out:+,}$2"
	echo "$out"
}

# _remember_mount NAME: note the mount and its processes for cleanup
_remember_mount() {
	local name=$1 mnt p pids
	mnt=$(mnt_of "$name")
	MOUNTS+=("$mnt")
	pids=$(_procs_matching "$mnt" "$(rundir_of "$name")" "$(store_of "$name")")
	for p in $pids; do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = objfsd ] && pids+=" $(_children "$p" | tr '\n' ' ')"
	done
	MOUNT_PIDS[$name]=$(tr ' ' '\n' <<<"$pids" | grep -E '^[0-9]+$' | sort -un | tr '\n' ' ' || true)
	step "mounted $name at $mnt (processes: ${MOUNT_PIDS[$name]:-none found})"
}

# wait_mounted PATH SECONDS
wait_mounted() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		is_mounted "$1" && return 0
		sleep 0.1
	done
	return 1
}

# try_mount NAME SPEC [OPTS]: run objfsd (bounded to 60 s) with the
# default options plus OPTS (which take the place of a default they give
# again).  Returns its status; its output is in $MOUNT_OUT.  Remembers a
# successful mount for cleanup.
try_mount() {
	local name=$1 spec=$2 extra=${3:-} mnt opts rc=0
	need_built "$OBJFSD"
	mnt=$(mnt_of "$name")
	mkdir -p "$mnt"
	opts=$(with_opts "$(default_opts "$name")" "$extra")
	# shellcheck disable=SC2086 # MOUNT_PREFIX is a command prefix, split on purpose
	capture 60 ${MOUNT_PREFIX:-} "$OBJFSD" "$spec" "$mnt" -o "$opts" || rc=$?
	MOUNT_OUT=$CAPTURED
	if [ "$rc" = 0 ]; then
		if ! wait_mounted "$mnt" 10; then
			MOUNT_OUT="objfsd exited 0 but $mnt is not mounted: $MOUNT_OUT"
			rc=99
		fi
	fi
	is_mounted "$mnt" && _remember_mount "$name"
	return "$rc"
}

# mount_objfs NAME SPEC [OPTS]: mount or fail the test.  The mount point is
# $(mnt_of NAME).
mount_objfs() {
	local rc=0
	try_mount "$@" || rc=$?
	[ "$rc" = 0 ] || fail "mounting $1 ($2 ${3:-}) failed (status $rc): $MOUNT_OUT$(_log_tail "$1")"
}

_log_tail() {
	local log
	log=$(log_of "$1")
	[ -s "$log" ] && printf '\n--- tail of %s:\n%s' "$log" "$(tail -n 20 "$log")"
	return 0
}

# umount_objfs NAME [CMD...]: unmount with CMD MOUNTPOINT (default
# fusermount3 -u; bounded) and wait up to 15 s for the mount's processes
# (daemon, its local redis-server) to exit.  Returns 1 and prints the
# survivors if any are left.
umount_objfs() {
	local name=$1 mnt pids left out rc=0
	shift
	[ $# -gt 0 ] || set -- fusermount3 -u
	mnt=$(mnt_of "$name")
	pids=${MOUNT_PIDS[$name]:-}
	if is_mounted "$mnt"; then
		capture 30 "$@" "$mnt" || rc=$?
		out=$CAPTURED
		if [ "$rc" != 0 ]; then
			echo "$* $mnt failed (status $rc): $out" >&2
			return 1
		fi
	fi
	if is_mounted "$mnt"; then
		echo "$mnt is still mounted after $*" >&2
		return 1
	fi
	# shellcheck disable=SC2086
	if ! wait_gone 15 $pids; then
		# shellcheck disable=SC2086
		left=$(alive $pids)
		echo "processes of $name still running 15 s after unmount:" >&2
		# shellcheck disable=SC2086
		describe_pids $left >&2
		return 1
	fi
	# anything else of this mount that we did not see at mount time
	left=$(_procs_matching "$mnt" "$(rundir_of "$name")" "$(store_of "$name")")
	if [ -n "$left" ]; then
		echo "processes of $name still running after unmount:" >&2
		# shellcheck disable=SC2086
		describe_pids $left >&2
		return 1
	fi
	MOUNT_PIDS[$name]=
	return 0
}

# use_built_mount_helper: mount(8) looks for helpers in /sbin only.  Link
# the built mount.objfs there for this test, so that it is the build under
# test that runs; an installed helper is moved aside and put back on exit.
use_built_mount_helper() {
	local saved
	need_built "$MOUNT_HELPER" "$OBJFSD"
	if [ -e /sbin/mount.objfs ] || [ -L /sbin/mount.objfs ]; then
		saved=/sbin/.mount.objfs.saved-by-test.$$
		mv /sbin/mount.objfs "$saved"
		on_exit "rm -f /sbin/mount.objfs; mv '$saved' /sbin/mount.objfs"
		step "moved the installed /sbin/mount.objfs aside"
	else
		on_exit 'rm -f /sbin/mount.objfs'
	fi
	ln -s "$MOUNT_HELPER" /sbin/mount.objfs
	step "linked /sbin/mount.objfs -> $MOUNT_HELPER"
	# in case the helper looks for objfsd in PATH
	export PATH="$OBJFS_BUILD/daemon:$PATH"
}

# objfs_cli ARGS...: the CLI, bounded
objfs_cli() {
	need_built "$OBJFS_CLI"
	timeout -k 5 30 "$OBJFS_CLI" "$@"
}

# field KEY < "key: value" lines: print the value of KEY
field() {
	awk -v k="$1" 'index($0, k ":") == 1 { sub("^[^:]*:[ \t]*", ""); print; exit }'
}

# status_of NAME KEY: one field of node NAME's status report
status_of() {
	xattr "$(mnt_of "$1")" user.objfs.status | field "$2"
}

# For eventually: what a node settles on a little after the call that
# caused it has returned.  A fetch wakes its readers first, and then
# counts its bytes and its end, registers the node as a holder and
# leaves the table (user.objfs.fetch says "fetching" until then); a
# failed one counts its failure and gives its pages back after its
# readers got EIO.  Checked at once, these race with the daemon.

# status_is NAME KEY VALUE: node NAME's status line KEY is VALUE
status_is() {
	local v
	v=$(status_of "$1" "$2")
	[ "$v" = "$3" ] || { echo "$1: $2 is '$v', not '$3'"; return 1; }
}

# holders_are PATH NODES: PATH's holders, sorted and comma-separated, are
# NODES ("a,b")
holders_are() {
	local h
	h=$(xattr "$1" user.objfs.locations | tr ',' '\n' | sort | paste -sd,)
	[ "$h" = "$2" ] || { echo "holders of $1: '$h', not '$2'"; return 1; }
}

# fetch_state_is PATH ERE: PATH's user.objfs.fetch matches ERE ('^local ')
fetch_state_is() {
	local st
	st=$(xattr "$1" user.objfs.fetch)
	grep -qE -- "$2" <<<"$st" || { echo "fetch state of $1: '$st', not /$2/"; return 1; }
}

# kill_node NAME [SIGNAL]: kill node NAME's daemon (default SIGKILL), as a
# crash would; its mount is left to the cleanup (reads give ENOTCONN).
kill_node() {
	local p
	for p in ${MOUNT_PIDS[$1]:-}; do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = objfsd ] && kill "-${2:-KILL}" "$p"
	done
	return 0
}

# xattr PATH NAME: value of an extended attribute (bounded)
xattr() {
	timeout -k 5 30 getfattr --only-values --absolute-names -n "$2" -- "$1"
}

# ---- network namespaces: one per "host" ----

# netns_hosts SUBNET NAME...: a network namespace per NAME, each with a veth
# pair into a hub namespace holding a bridge, on SUBNET.0/24 (NAME i gets
# SUBNET.(i+1)).  Sets NETNS_IP[NAME] and NETNS_PATH[NAME]; run a command
# "on" a host with netns_run NAME CMD... (only the network namespace
# changes: mounts made there are visible here).  Everything goes at exit.
declare -A NETNS_IP=() NETNS_PATH=()
netns_hosts() {
	local subnet=$1 hub i=1 name ns
	shift
	need ip nsenter
	hub=objfs-$$-hub
	ip netns add "$hub" || skip "cannot create network namespaces here"
	on_exit "ip netns del $hub 2>/dev/null"
	ip -n "$hub" link add br0 type bridge
	ip -n "$hub" link set br0 up
	for name in "$@"; do
		ns=objfs-$$-$name
		ip netns add "$ns"
		on_exit "ip netns del $ns 2>/dev/null"
		ip link add "veth$$h$i" netns "$hub" type veth peer name eth0 netns "$ns"
		ip -n "$hub" link set "veth$$h$i" master br0 up
		ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set lo up
		NETNS_IP[$name]=$subnet.$((i + 1))
		NETNS_PATH[$name]=/run/netns/$ns
		i=$((i + 1))
	done
}

netns_run() {
	local name=$1
	shift
	nsenter --net="${NETNS_PATH[$name]}" "$@"
}

# mount_objfs_on HOST NAME SPEC [OPTS]: mount node NAME inside HOST's
# network namespace, listening on HOST's address.
mount_objfs_on() {
	local host=$1 name=$2 spec=$3 extra=${4:-}
	MOUNT_PREFIX="nsenter --net=${NETNS_PATH[$host]}" \
		mount_objfs "$name" "$spec" "listen=${NETNS_IP[$host]}:7419${extra:+,$extra}"
}

# ---- readers: a python process that keeps a file open or mapped ----

# start_reader ID FILE: open FILE, read its first 64 KiB, then wait for
# release_reader ID before reading the rest.  Waits (20 s max) until the
# file is open.
start_reader() { _start_holder read "$1" "$2" 65536; }

# start_mapper ID FILE [TOUCH]: open FILE, map all of it (mmap(2) through
# ctypes, MAP_SHARED, read-only), close the descriptor (the mapping alone
# holds the file now: python's own mmap would keep a dup of it) and read
# one byte of each page of the first TOUCH bytes (default 64 KiB; "all":
# every page); then wait for release_reader ID before hashing the whole
# mapping.  Waits (20 s max) until the file is mapped.
start_mapper() { _start_holder map "$1" "$2" "${3:-65536}"; }

# _start_holder read|map ID FILE TOUCH
_start_holder() {
	local kind=$1 id=$2 file=$3 touch=$4 pid i
	python3 - "$kind" "$file" "$T/reader-$id" "$touch" <<'EOF' &
import ctypes, errno, hashlib, os, sys, time
kind, path, base, touch = sys.argv[1:5]
def out(s):
    with open(base + ".tmp", "w") as f:
        f.write(s + "\n")
    os.rename(base + ".tmp", base + ".result")
def wait_go():
    open(base + ".ready", "w").close()
    deadline = time.time() + 120
    while not os.path.exists(base + ".go"):
        if time.time() > deadline:
            out("ERR timeout waiting for go")
            sys.exit(1)
        time.sleep(0.02)
try:
    h = hashlib.sha256()
    if kind == "read":
        f = open(path, "rb", buffering=0)
        h.update(f.read(int(touch)))
        wait_go()
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
        try:
            f.close()
        except OSError:
            pass  # the FLUSH of a dead daemon's file (ENOTCONN): all was read
    else:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        fd = os.open(path, os.O_RDONLY)
        size = os.fstat(fd).st_size
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        os.close(fd)
        m = memoryview((ctypes.c_ubyte * size).from_address(addr)).cast("B")
        n = size if touch == "all" else min(int(touch), size)
        sum(m[off] for off in range(0, n, 4096))
        wait_go()
        for off in range(0, size, 1 << 20):
            h.update(m[off : off + (1 << 20)])
    out(h.hexdigest())
except OSError as e:
    out("ERR " + errno.errorcode.get(e.errno, str(e.errno)))
    open(base + ".ready", "w").close()
EOF
	pid=$!
	BG_PIDS+=("$pid")
	echo "$pid" >"$T/reader-$id.pid"
	for ((i = 0; i < 200; i++)); do
		[ -e "$T/reader-$id.ready" ] && break
		[ -n "$(alive "$pid")" ] || break
		sleep 0.1
	done
	[ -e "$T/reader-$id.ready" ] || fail "reader $id did not open $file within 20 s (or died)"
	if [ -e "$T/reader-$id.result" ]; then
		fail "reader $id could not open $file: $(cat "$T/reader-$id.result")"
	fi
}

# release_reader ID: let the reader (or mapper) finish; prints its result
# (sha256 of everything it read, "ERR <errno>", or "ERR died" if it was
# killed, say by SIGBUS).  Bounded to 60 s.
release_reader() {
	local id=$1 pid i
	pid=$(cat "$T/reader-$id.pid")
	touch "$T/reader-$id.go"
	for ((i = 0; i < 600; i++)); do
		[ -e "$T/reader-$id.result" ] && break
		[ -n "$(alive "$pid")" ] || break
		sleep 0.1
	done
	if [ -e "$T/reader-$id.result" ]; then
		cat "$T/reader-$id.result"
	elif [ -z "$(alive "$pid")" ]; then
		echo "ERR died"
	else
		echo "ERR reader did not finish within 60 s"
	fi
}

# churn_store MNT SIZE: write and delete 3 new objects of SIZE random
# bytes in MNT, then write one more that stays (MNT/churn.N): a store
# that reuses the files of freed objects gets every chance to.  Written
# in 4 MiB writes: the store takes a freed file for a new object whose
# first write is big enough (1 MiB and more)
CHURNS=0
churn_store() {
	local mnt=$1 size=$2 i
	for i in 1 2 3 4; do
		CHURNS=$((CHURNS + 1))
		mkdata "$T/churn" "$size"
		dd if="$T/churn" of="$mnt/churn.$CHURNS" bs=4M status=none
		[ "$i" = 4 ] || rm "$mnt/churn.$CHURNS"
	done
}

# ---- a create loop: files made one after another while Redis fails over ----

# start_create_loop ID DIR [SECONDS]: in the background, create DIR/ID.1,
# DIR/ID.2, ... (open O_CREAT|O_EXCL, one write, close), each with bytes
# that only ID and N determine (1 to 20000 of them), about 20 a second,
# until stop_create_loop ID or SECONDS (default 240) have passed.  Each
# file gets one line in $T/loop-ID.log, "N START END OK" or
# "N START END ERR STAGE ERRNO" (STAGE: open, write or close; times from
# time.time()): a file whose close() succeeded is one objfs acknowledged.
start_create_loop() {
	local id=$1 dir=$2 secs=${3:-240} pid
	: >"$T/loop-$id.log"
	rm -f "$T/loop-$id.stop"
	LIB_DIR=$LIB_DIR PYTHONDONTWRITEBYTECODE=1 python3 - "$id" "$dir" "$T/loop-$id" "$secs" <<'EOF' &
import errno, os, sys, time
sys.path.insert(0, os.environ["LIB_DIR"])
from loopdata import loop_bytes
lid, d, base, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
log = open(base + ".log", "a", buffering=1)
end = time.time() + secs
n = 0
while time.time() < end and not os.path.exists(base + ".stop"):
    n += 1
    data = loop_bytes(lid, n)
    t0, stage = time.time(), "open"
    try:
        fd = os.open("%s/%s.%d" % (d, lid, n), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            stage = "write"
            os.write(fd, data)
        finally:
            stage = "close"
            os.close(fd)
        log.write("%d %.3f %.3f OK\n" % (n, t0, time.time()))
    except OSError as e:
        log.write("%d %.3f %.3f ERR %s %s\n" % (n, t0, time.time(), stage,
                                                errno.errorcode.get(e.errno, str(e.errno))))
        time.sleep(0.1)
    time.sleep(0.04)
EOF
	pid=$!
	BG_PIDS+=("$pid")
	echo "$pid" >"$T/loop-$id.pid"
	step "create loop $id in $dir (pid $pid)"
}

# creates_in DIR: create a file of a fresh name in DIR (for eventually:
# a name whose create failed is never tried again, whatever that failure
# left behind)
creates_in() { timeout -k 5 30 cp /etc/hostname "$1/probe.$(date +%s%N)"; }

# loop_acked ID: how many files loop ID has had acknowledged so far
loop_acked() { grep -c ' OK$' "$T/loop-$1.log" || true; }

# _loop_acked_over ID N: for eventually
_loop_acked_over() {
	local n
	n=$(loop_acked "$1")
	[ "$n" -gt "$2" ] || {
		echo "loop $1: $n files acknowledged, last: $(tail -n 1 "$T/loop-$1.log")"
		return 1
	}
}

# wait_loop_acks ID N SECONDS: until loop ID has had N more files
# acknowledged than now (objfs works, whatever happened meanwhile)
wait_loop_acks() {
	eventually "$3" _loop_acked_over "$1" "$(($(loop_acked "$1") + $2 - 1))"
}

# stop_create_loop ID: stop loop ID after the file it is making; fails if
# that takes more than 60 s (a hung call)
stop_create_loop() {
	local id=$1 pid i
	pid=$(cat "$T/loop-$id.pid")
	touch "$T/loop-$id.stop"
	for ((i = 0; i < 600; i++)); do
		[ -n "$(alive "$pid")" ] || break
		sleep 0.1
	done
	[ -z "$(alive "$pid")" ] ||
		fail "create loop $id is stuck 60 s after it was told to stop (last: $(tail -n 1 "$T/loop-$id.log"))"
	wait "$pid" 2>/dev/null || true
	step "create loop $id stopped: $(loop_acked "$id") of $(wc -l <"$T/loop-$id.log") files acknowledged"
}

# check_create_loop ID DIR: loop ID's files as DIR lists them (the
# directory the loop wrote to, or the same directory on another node):
# every acknowledged file is there with its bytes; any other file of the
# loop there is one it tried (a close() that failed keeps the object and
# publishes it later) and has its bytes too; no name is listed twice.
# Prints "ACKED FAILED FIRST_ERR LAST_ERR" (the end times of the first and
# last failed file, 0 if none); else prints the problems and returns 1.
# For eventually.
check_create_loop() {
	LIB_DIR=$LIB_DIR PYTHONDONTWRITEBYTECODE=1 timeout -k 5 120 python3 - "$1" "$2" "$T/loop-$1.log" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["LIB_DIR"])
from loopdata import loop_bytes
lid, d, logf = sys.argv[1:4]
tried, acked, errs = set(), set(), []
for line in open(logf):
    f = line.split()
    if len(f) < 4 or not line.endswith("\n"):
        continue  # the line being written
    tried.add(int(f[0]))
    if f[3] == "OK":
        acked.add(int(f[0]))
    else:
        errs.append(float(f[2]))
names = os.listdir(d)
bad = []
dups = sorted({x for x in names if names.count(x) > 1})
if dups:
    bad.append("listed twice: " + " ".join(dups[:10]))
present = {}
for x in names:
    if x.startswith(lid + ".") and x[len(lid) + 1:].isdigit():
        present[int(x[len(lid) + 1:])] = x
bad += ["acknowledged but missing: %s.%d" % (lid, n) for n in sorted(acked - set(present))]
bad += ["never made, yet listed: %s.%d" % (lid, n) for n in sorted(set(present) - tried)]
for n in sorted(set(present) & tried):
    want = loop_bytes(lid, n)
    try:
        with open(os.path.join(d, present[n]), "rb") as f:
            got = f.read()
    except OSError as e:
        if n in acked:
            bad.append("%s.%d: %s" % (lid, n, e))
        continue
    if got != want:
        bad.append("%s.%d: wrong bytes (%d read, %d written)" % (lid, n, len(got), len(want)))
if bad:
    print("%s: %d problems: %s" % (d, len(bad), "; ".join(bad[:20])))
    sys.exit(1)
print(len(acked), len(errs), "%.3f" % min(errs, default=0), "%.3f" % max(errs, default=0))
EOF
}

# verify_create_loop ID DIR [SECONDS]: check_create_loop until it holds
# (SECONDS, default 30: failed closes publish late, another node learns
# of names late); sets LOOP_ACKED, LOOP_FAILED, LOOP_FIRST_ERR and
# LOOP_LAST_ERR
LOOP_ACKED=0 LOOP_FAILED=0 LOOP_FIRST_ERR=0 LOOP_LAST_ERR=0
verify_create_loop() {
	local out
	eventually "${3:-30}" check_create_loop "$1" "$2"
	out=$(check_create_loop "$1" "$2") || fail "create loop $1 in $2: $out"
	read -r LOOP_ACKED LOOP_FAILED LOOP_FIRST_ERR LOOP_LAST_ERR <<<"$out"
	step "create loop $1 in $2: $LOOP_ACKED acknowledged files intact; $LOOP_FAILED failed"
}

# ---- passthrough (issue 10) ----

# passthrough_mode NAME KEY: the first word of node NAME's status line KEY
# ("on", "off", "unavailable"), or "absent" if there is none (an objfsd
# from before passthrough)
passthrough_mode() {
	local v
	v=$(status_of "$1" "$2" | awk '{ print $1 }')
	echo "${v:-absent}"
}

# opens_in_passthrough NAME FILE KEY: cat FILE (on node NAME); 0 if that
# open raised NAME's status counter KEY (its passthrough opens).  For
# eventually: an open right after a writer's close, or a page-cached
# reader's, may reach the daemon before their RELEASE, and be cached.
opens_in_passthrough() {
	local before
	before=$(status_of "$1" "$3")
	timeout -k 5 30 cat "$2" >/dev/null || return 1
	[ "$(status_of "$1" "$3")" -gt "$before" ] || {
		echo "the open of $2 was not a passthrough open ($3 stayed $before)"
		return 1
	}
}

# ---- fan-out (issue 22): one object read by several nodes at once ----

# obj_id NAME: the object id of /NAME, from its entry in the root directory
obj_id() { rcli HGET '{objfs}:d:1' "$1" | sed -n 's/^f\([0-9]*\) .*/\1/p'; }

# put_object NODE NAME SIZE [READER...]: SIZE random bytes (kept in
# $T/NAME) written to /NAME on NODE, then listed on every READER.  Sets
# OBJ_ID (the object's id) and OBJ_SHA (the sha256 of its bytes).
OBJ_ID='' OBJ_SHA=''
put_object() {
	local node=$1 name=$2 size=$3 n
	shift 3
	mkdata "$T/$name" "$size"
	OBJ_SHA=$(sha256_of "$T/$name")
	cp "$T/$name" "$(mnt_of "$node")/$name"
	for n in "$@"; do eventually 10 ls_has "$(mnt_of "$n")" "$name"; done
	OBJ_ID=$(obj_id "$name")
	[ -n "$OBJ_ID" ] || fail "no directory entry for $name"
}

# cat_bg NODE NAME: cat /NAME on NODE in the background (bounded to
# 120 s) into $T/got.NODE, its stderr into $T/err.NODE and its exit
# status into $T/rc.NODE; CAT_PIDS[NODE] is its pid
declare -A CAT_PIDS=()
cat_bg() {
	(
		rc=0
		timeout -k 5 120 cat "$(mnt_of "$1")/$2" >"$T/got.$1" 2>"$T/err.$1" || rc=$?
		echo "$rc" >"$T/rc.$1"
	) &
	CAT_PIDS[$1]=$!
	BG_PIDS+=("$!")
}

# cat_wait NODE...: wait for those cats to end (each is bounded)
cat_wait() {
	local n
	for n in "$@"; do wait "${CAT_PIDS[$n]}" || true; done
}

# cat_read NODE SHA: NODE's cat succeeded and read bytes whose sha256 is
# SHA (its copy of them is then deleted)
cat_read() {
	assert_eq 0 "$(cat "$T/rc.$1")" "cat on $1 ($(cat "$T/err.$1"))"
	assert_eq "$2" "$(sha256_of "$T/got.$1")" "sha256 of what $1 read"
	rm -f "$T/got.$1"
}

# fetched_bytes PATH: bytes of PATH's fetch in place so far (0 if none runs)
fetched_bytes() { xattr "$1" user.objfs.fetch | awk '{ print ($1 == "fetching") ? $2 : 0 }'; }

# wait_fetched PATH BYTES: until PATH's fetch has BYTES in place, or fail
# (15 s at most; a fetch that ended first fails too)
wait_fetched() {
	local i got=0
	for ((i = 0; i < 300; i++)); do
		got=$(fetched_bytes "$1")
		[ "$got" -lt "$2" ] || return 0
		sleep 0.05
	done
	fail "the fetch of $1 did not have $2 bytes in place within 15 s (at $got; 0: none runs)"
}

# served_half ORIGIN NODE...: the NODEs together served at least half of
# all the bytes that ORIGIN and they served (fan-out took load off ORIGIN)
served_half() {
	local origin n others=0
	origin=$(status_of "$1" served_bytes)
	shift
	for n in "$@"; do others=$((others + $(status_of "$n" served_bytes))); done
	step "served: $origin bytes by the origin, $others by $*"
	[ $((2 * others)) -ge $((origin + others)) ] ||
		fail "$* served $others of $((origin + others)) bytes, less than half"
}

# redis_ms: Redis's clock in ms (fetcher entries' deadlines are on it)
redis_ms() {
	local t
	t=$(rcli TIME | paste -sd' ')
	echo $((${t% *} * 1000 + ${t#* } / 1000))
}

# rec_key ID: the bucket of object ID's record (layout 3: its field ID
# is "<parent>/<name>[/@<node>...]"); rec_of ID: that record, or ""
rec_key() {
	local b=$1
	[ "${#b}" -le 4 ] || b=${b: -4}
	echo "{objfs}:r:$b"
}
rec_of() { rcli HGET "$(rec_key "$1")" "$1"; }
# rec_exists ID: 1 if object ID has a record, else 0
rec_exists() { rcli HEXISTS "$(rec_key "$1")" "$1"; }

# rec_place ID PARENT NAME: object ID's record says it is linked as
# NAME in directory PARENT (its holders stay)
rec_place() {
	local v tail=""
	v=$(rec_of "$1")
	[[ $v != */*/* ]] || tail=/${v#*/*/}
	rcli HSET "$(rec_key "$1")" "$1" "$2/$3$tail" >/dev/null
}

# holders_of ID: the nodes holding object ID, sorted, comma-separated
# (the "/@<node>" of its record)
holders_of() { rec_of "$1" | cut -s -d/ -f3- | tr '/' '\n' | sed -n 's/^@//p' | sort | paste -sd,; }

# fan_entries ID: the fetcher entries of object ID, "~p:NODE=DEADLINE"
# each, in its extras x:ID, then "index:NODE" for each member of the index
# of entries ({objfs}:fan, "ID NODE"); empty if there is none
fan_entries() {
	rcli HGETALL "{objfs}:x:$1" | paste - - |
		awk -F'\t' '$1 ~ /^~p:/ { printf "%s=%s ", $1, $2 }'
	rcli ZRANGE '{objfs}:fan' 0 -1 | awk -v id="$1" '$1 == id { printf "index:%s ", $2 }'
}

# upgrade_tree A B BIG: the tree the layout upgrade tests (111, 113)
# write through mount A with an older objfsd: files of several sizes,
# d/e/big of BIG bytes (a copy in $T/big), an empty directory and an
# empty one inside another, a renamed object, a hard link, a symbolic
# link, a chmod; mount B then holds copies of d/f65536 and d/e/big
upgrade_tree() {
	local a=$1 b=$2 s
	mkdir -p "$a/d/e" "$a/empty/inner" "$a/emptytop"
	for s in 0 1 100 4095 4096 5000 65536 1048577; do
		head -c "$s" /dev/urandom >"$a/d/f$s"
	done
	mkdata "$T/big" "$3"
	cp "$T/big" "$a/d/e/big"
	echo renamed >"$a/d/before"
	mv "$a/d/before" "$a/d/e/after"
	ln "$a/d/f100" "$a/hard"
	ln -s d/f100 "$a/soft"
	chmod 600 "$a/d/f5000"
	eventually 10 ls_has "$b/d" f65536
	cat "$b/d/f65536" "$b/d/e/big" >/dev/null
}

# tree_snapshot MNT: every path under MNT, sorted, with its type, size
# (files), mode, links and checksum
tree_snapshot() {
	(cd "$1" && find . -mindepth 1 | LC_ALL=C sort | while read -r p; do
		if [ -L "$p" ]; then
			echo "$p link $(readlink "$p")"
		elif [ -d "$p" ]; then
			echo "$p dir $(stat -c %a "$p")"
		else
			echo "$p file $(stat -c '%s %a %h' "$p") $(sha256_of "$p")"
		fi
	done)
}

# old_objfsd COMMIT WHAT: objfsd of COMMIT (WHAT it is, for the skip
# message), built once per machine under /var/tmp (every pass of
# tests/run shares it); skips if this clone has no such commit
old_objfsd() {
	local old=$1 dir=/var/tmp/objfs-old-$1 src
	if [ -x "$dir/build/daemon/objfsd" ]; then
		echo "$dir/build/daemon/objfsd"
		return 0
	fi
	git -C "$LIB_DIR/.." cat-file -e "$old^{commit}" 2>/dev/null ||
		skip "commit $old ($2) is not in this clone's history"
	src=$dir.tmp.$$
	rm -rf "$src"
	mkdir -p "$src"
	git -C "$LIB_DIR/.." archive "$old" | tar -x -C "$src" ||
		fail "cannot extract commit $old"
	capture 600 bash -c "cd '$src' && meson setup build >/dev/null && ninja -C build daemon/objfsd" ||
		fail "building objfsd of $old failed: $CAPTURED"
	rm -rf "$dir"
	mv "$src" "$dir"
	# the build directory remembers its source path: build again where it lives
	capture 600 ninja -C "$dir/build" daemon/objfsd || fail "rebuilding objfsd of $old: $CAPTURED"
	echo "$dir/build/daemon/objfsd"
}

# ---- cleanup ----

# umount_under DIR: unmount (lazily) every mount at or below DIR, deepest first
umount_under() {
	local m
	[ -n "$1" ] || return 0
	awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
}

# on_exit CMD...: run CMD (eval'ed) at cleanup, after the unmounts, in
# reverse order of registration
declare -a EXIT_HOOKS=()
on_exit() { EXIT_HOOKS=("$*" "${EXIT_HOOKS[@]}"); }

_cleanup() {
	local rc=$? m p left pids f h
	set +eE
	trap - ERR
	# a failure carries what the daemons said went wrong (CI shows only
	# the test's own output)
	if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
		for f in "$T"/*.log; do
			grep -qs 'objfsd\[' "$f" || continue
			grep -E 'objfsd\[(error|warning)\]' "$f" | tail -n 20 | sed "s|^|    $(basename "$f" .log): |" >&2
		done
	fi
	for p in "${BG_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	for m in "${MOUNTS[@]}"; do
		if is_mounted "$m"; then
			timeout -k 2 10 fusermount3 -u "$m" >/dev/null 2>&1 ||
				timeout -k 2 10 umount "$m" >/dev/null 2>&1 ||
				umount -l "$m" >/dev/null 2>&1
		fi
	done
	for h in "${EXIT_HOOKS[@]}"; do eval "$h"; done
	stop_redis nosave
	# Daemons get some time to exit on their own after the unmount.
	pids=$(our_procs)
	# shellcheck disable=SC2086
	if [ -n "$pids" ] && ! wait_gone 10 $pids; then
		# shellcheck disable=SC2086
		left=$(alive $pids)
		echo "cleanup: killing processes still running after unmount:" >&2
		# shellcheck disable=SC2086
		describe_pids $left >&2
		# shellcheck disable=SC2086
		kill -TERM $left 2>/dev/null
		# shellcheck disable=SC2086
		wait_gone 5 $left || kill -KILL $left 2>/dev/null
	fi
	# Sanitizer reports from any of our processes fail the test.
	if [ -d "$T/sanitizer" ]; then
		for f in "$T"/sanitizer/*; do
			[ -s "$f" ] || continue
			echo "FAIL: $TEST_NAME: sanitizer report $(basename "$f"):" >&2
			head -n 60 "$f" >&2
			[ "$rc" = 0 ] && rc=1
		done
	fi
	if [ "${OBJFS_KEEP:-0}" = 1 ]; then
		echo "kept $T and $S" >&2
	else
		for m in "${MOUNTS[@]}"; do is_mounted "$m" && umount -l "$m" 2>/dev/null; done
		# the stores' tmpfs mounts (DIR/data) outlive their daemons
		umount_under "$S"
		umount_under "$T"
		rm -rf --one-file-system "$T" "$S" 2>/dev/null
	fi
	[ "$rc" = 0 ] && echo "PASS: $TEST_NAME" >&2
	exit "$rc"
}
trap _cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
