# shellcheck shell=bash
# shellcheck disable=SC2034 # variables here are used by the tests that source this file
#
# tests/vm/lib.sh: sourced by every VM test (tests/vm/one/NN-*.sh and
# tests/vm/two/NN-*.sh), which run inside the test VMs (tests/vm/vm), as
# root, chrooted in the host's userland, one after the other, driven by
# tests/vm/batch.  It sources tests/lib.sh first, so everything there
# works as in the integration tests ($T, $S, step/fail/skip, assertions,
# eventually, start_redis, mount_objfs, the cleanup on exit), and adds:
#
#   vm_barrier NAME [SECONDS]   wait until every VM of the test reached
#                               NAME (default 120 s); fails the test if the
#                               peer does not come, or already ended
#   vm_put KEY VALUE            publish a small value for the other VM
#   vm_get KEY [SECONDS]        print it, waiting for it (default 120 s)
#   vm_retry SECONDS CMD...     run CMD (each try bounded to 60 s) until it
#                               succeeds; 1 with its last output if it never
#                               does (for clients of slow-starting servers)
#   vm_wait_port HOST PORT [SECONDS]  until a TCP connect works (default 60)
#   vm_bg NAME CMD...           run CMD in the background, output in
#                               $T/NAME.log, killed at cleanup; sets BG_PID
#   vm_wait_bg PID [SECONDS]    wait for it (default 120 s); its status
#   vm_start_redis              a private redis-server on $OBJFS_VM_IP (and
#                               127.0.0.1) port $VM_REDIS_PORT; sets
#                               REDIS_URL=redis://IP:PORT, and rcli and the
#                               cleanup of tests/lib.sh work with it
#   vm_mount_objfs NAME URL [OPTS]  mount_objfs, listening on $OBJFS_VM_IP,
#                               with the test's cluster secret (both VMs)
#   vm_cluster_secret           print that secret's file (mode 600)
#   vm_mmap_same DIR WANTDIR NAME...  each DIR/NAME, mapped with Python's
#                               mmap, holds the bytes of WANTDIR/NAME
#   vm_netem ARGS...            tc qdisc add dev $OBJFS_VM_NETDEV root netem
#                               ARGS (removed at cleanup)
#   vm_modprobe MODULE...       modprobe from the guest kernel's tree
#   vm_metric NAME VALUE        note a measurement: $OBJFS_VM_TEST_OUT/metrics
#   vm_perftest_pair NAME CMD [ARGS...]  a perftest server+client; see below
#
# The environment (tests/vm/vm and tests/vm/batch give it):
#   OBJFS_VM_INDEX (0, 1), OBJFS_VM_COUNT (1, 2), OBJFS_VM_IP,
#   OBJFS_VM_PEER_IP (two VMs), OBJFS_VM_NETDEV (dummy0 or eth0),
#   OBJFS_VM_RDMA_DEV (rxe0), OBJFS_VM_GID_INDEX (1: RoCE v2 IPv4),
#   OBJFS_VM_SHARED (a directory of this test's own, shared by both VMs
#   and the host, uncached), OBJFS_VM_TEST_OUT (this VM's own directory
#   for the test's artifacts, kept with the logs), OBJFS_BUILD.
#
# Numbers under TCG are ~1/100 of real hardware and swing with the host's
# load: never assert absolute thresholds; compare ratios measured in the
# same VM run, interleaved.
#
# Writing a test: tests/vm/one/NN-name.sh runs in a single VM (rxe0 on
# dummy0, 10.77.0.1: rxe loops packets back inside the VM, so client and
# server both run there); tests/vm/two/NN-name.sh runs in both of two VMs
# at once (rxe0 on eth0, 10.77.0.1 and 10.77.0.2, a real wire between
# them), the same script in each, telling itself apart by
# $OBJFS_VM_INDEX.  Start with
#     . "$(dirname "$0")/../lib.sh"
# then write it like an integration test.  With two VMs, every
# vm_barrier/vm_get must be matched in the other VM, and both VMs must
# pass, fail or skip alike (a skip in only one is a failure).  Tests run
# one after the other in the same boot: leave nothing running (the
# cleanup of tests/lib.sh stops what its helpers started; vm_bg's
# processes too).  Its name in tests/run is vm/NN-name or vm2/NN-name;
# `sudo tests/run --plain vm/NN` runs just it (one boot).

# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

if [ -z "${OBJFS_VM_INDEX:-}" ] || [ -z "${OBJFS_VM_SHARED:-}" ]; then
	skip "a VM test: run it through tests/run (e.g. sudo tests/run --plain vm) or tests/vm/vm"
fi
# progress lines with the seconds since the test began: under emulation,
# where the time goes is worth seeing
_VM_T0=${EPOCHREALTIME/./}
step() {
	local ds=$(((${EPOCHREALTIME/./} - _VM_T0) / 100000))
	printf '== %4d.%ds %s\n' $((ds / 10)) $((ds % 10)) "$*" >&2
}

OBJFS_VM_COUNT=${OBJFS_VM_COUNT:-1}
OBJFS_VM_RDMA_DEV=${OBJFS_VM_RDMA_DEV:-rxe0}
OBJFS_VM_GID_INDEX=${OBJFS_VM_GID_INDEX:-1}
OBJFS_VM_TEST_OUT=${OBJFS_VM_TEST_OUT:-$T}
VM_REDIS_PORT=${VM_REDIS_PORT:-6390}
VM_PEER=$((1 - OBJFS_VM_INDEX))
mkdir -p "$OBJFS_VM_SHARED" "$OBJFS_VM_TEST_OUT"
# $T (daemon and redis logs) dies with the VM: keep its logs with the
# test's output (after the unmounts: the hooks run then)
on_exit '_vm_keep_logs'
_vm_keep_logs() {
	local f
	for f in "$T"/*.log "$T"/redis/*.log; do
		[ -s "$f" ] && cp "$f" "$OBJFS_VM_TEST_OUT/" 2>/dev/null
	done
	return 0
}

# _vm_peer_ended: the status the other VM's test ended with, if it did
# (tests/vm/batch writes it)
_vm_peer_ended() {
	[ "$OBJFS_VM_COUNT" = 2 ] && cat "$OBJFS_VM_SHARED/.exit.$VM_PEER" 2>/dev/null
}

_VM_BARRIERS=0
# vm_barrier NAME [SECONDS]: every VM calls the same barriers in the same
# order (from the test's main shell, not a subshell: they are numbered)
vm_barrier() {
	local name=$1 secs=${2:-120} i n dir st deadline
	_VM_BARRIERS=$((_VM_BARRIERS + 1))
	[ "$OBJFS_VM_COUNT" -gt 1 ] || return 0
	dir=$OBJFS_VM_SHARED/.barrier
	mkdir -p "$dir"
	touch "$dir/$_VM_BARRIERS-$name.$OBJFS_VM_INDEX"
	step "barrier $_VM_BARRIERS ($name)"
	deadline=$(($(date +%s) + secs))
	while :; do
		n=0
		for ((i = 0; i < OBJFS_VM_COUNT; i++)); do
			[ -e "$dir/$_VM_BARRIERS-$name.$i" ] && n=$((n + 1))
		done
		[ "$n" -lt "$OBJFS_VM_COUNT" ] || return 0
		if st=$(_vm_peer_ended); then
			fail "barrier '$name': vm$VM_PEER ended its test (status $st) before reaching it"
		fi
		if [ "$(date +%s)" -ge "$deadline" ]; then
			fail "barrier '$name': vm$VM_PEER did not reach it within ${secs}s (it is at: $(cd "$dir" && ls -t | grep "\.$VM_PEER\$" | head -n 1))"
		fi
		sleep 0.1
	done
}

# vm_put KEY VALUE / vm_get KEY [SECONDS]
vm_put() {
	printf '%s\n' "$2" >"$OBJFS_VM_SHARED/.kv.$1.tmp$OBJFS_VM_INDEX"
	mv "$OBJFS_VM_SHARED/.kv.$1.tmp$OBJFS_VM_INDEX" "$OBJFS_VM_SHARED/.kv.$1"
}
vm_get() {
	local key=$1 secs=${2:-120} deadline st
	deadline=$(($(date +%s) + secs))
	until [ -e "$OBJFS_VM_SHARED/.kv.$key" ]; do
		if st=$(_vm_peer_ended); then
			fail "vm_get $key: vm$VM_PEER ended its test (status $st) without publishing it"
		fi
		[ "$(date +%s)" -lt "$deadline" ] || fail "vm_get $key: nobody published it within ${secs}s"
		sleep 0.1
	done
	cat "$OBJFS_VM_SHARED/.kv.$key"
}

# vm_retry SECONDS CMD...: retry CMD every 0.5 s until it succeeds (each
# try bounded to 60 s); its output goes to stdout+stderr each time.  The
# status of the last try if it never succeeds.
vm_retry() {
	local secs=$1 deadline rc
	shift
	deadline=$(($(date +%s) + secs))
	while :; do
		rc=0
		timeout -k 5 60 "$@" || rc=$?
		[ "$rc" != 0 ] || return 0
		[ "$(date +%s)" -lt "$deadline" ] || {
			echo "vm_retry: giving up after ${secs}s (last status $rc): $*" >&2
			return "$rc"
		}
		sleep 0.5
	done
}

# vm_wait_port HOST PORT [SECONDS]
vm_wait_port() {
	local host=$1 port=$2 secs=${3:-60} deadline
	deadline=$(($(date +%s) + secs))
	until timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.2
	done
}

# vm_bg NAME CMD...: CMD in the background (output in $T/NAME.log); its
# pid in BG_PID; killed at cleanup if still running
BG_PID=
vm_bg() {
	local name=$1
	shift
	"$@" >"$T/$name.log" 2>&1 </dev/null &
	BG_PID=$!
	BG_PIDS+=("$BG_PID")
}

# vm_wait_bg PID [SECONDS]: its exit status; 124 (and killed) if it takes
# longer than SECONDS (default 120)
vm_wait_bg() {
	local pid=$1 secs=${2:-120} i rc=0
	for ((i = 0; i < secs * 10; i++)); do
		[ -n "$(alive "$pid")" ] || break
		sleep 0.1
	done
	if [ -n "$(alive "$pid")" ]; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 124
	fi
	wait "$pid" || rc=$?
	return "$rc"
}

# vm_start_redis: a redis-server reachable from the other VM.  Its data
# dies with the test.
vm_start_redis() {
	need redis-server redis-cli
	REDIS_SOCK=
	REDIS_PORT=$VM_REDIS_PORT
	REDIS_URL=redis://$OBJFS_VM_IP:$REDIS_PORT
	mkdir -p "$REDIS_DIR"
	redis-server --port "$REDIS_PORT" --bind "127.0.0.1 $OBJFS_VM_IP" --protected-mode no \
		--save "" --appendonly no --dir "$REDIS_DIR" --logfile "$REDIS_DIR/redis.log" \
		--daemonize no &
	REDIS_PID=$!
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(rcli PING 2>/dev/null)" = PONG ] && return 0
		[ -n "$(alive "$REDIS_PID")" ] || break
		sleep 0.1
	done
	fail "redis-server did not start: $(tail -n 5 "$REDIS_DIR/redis.log" 2>/dev/null)"
}

# vm_mmap_same DIR WANTDIR NAME...: map each DIR/NAME read-only with
# Python's mmap and compare it with WANTDIR/NAME (bounded); fails the test
vm_mmap_same() {
	local dir=$1 want=$2
	shift 2
	timeout -k 5 240 python3 - "$dir" "$want" "$@" <<'PY' || fail "mmap of $* in $dir gave other bytes"
import mmap, sys
d, w = sys.argv[1], sys.argv[2]
for name in sys.argv[3:]:
    with open(f"{d}/{name}", "rb") as f, open(f"{w}/{name}", "rb") as want:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        assert mm[:] == want.read(), name
        mm.close()
PY
}

# vm_cluster_secret: print the path of this test's cluster secret (the
# same in both VMs: VM 0 makes it, VM 1 fetches it; mode 600 in $T)
vm_cluster_secret() {
	if [ ! -s "$T/cluster-secret" ]; then
		if [ "$OBJFS_VM_INDEX" = 0 ]; then
			head -c 48 /dev/urandom | base64 >"$T/cluster-secret.new"
			vm_put cluster-secret "$(cat "$T/cluster-secret.new")"
		else
			vm_get cluster-secret >"$T/cluster-secret.new"
		fi
		chmod 600 "$T/cluster-secret.new"
		mv "$T/cluster-secret.new" "$T/cluster-secret"
	fi
	echo "$T/cluster-secret"
}

# vm_mount_objfs NAME URL [OPTS]: mount_objfs with the node listening on
# this VM's address (port 7419) and the test's cluster secret, so that
# the other VM's nodes can fetch from it
vm_mount_objfs() {
	local secret
	[ -s "$T/cluster-secret" ] || vm_cluster_secret >/dev/null
	secret=$T/cluster-secret
	mount_objfs "$1" "$2" "listen=$OBJFS_VM_IP:7419,secret_file=$secret${3:+,$3}"
}

# vm_netem ARGS...: delay/lose/reorder this VM's outgoing packets
vm_netem() {
	need tc
	vm_modprobe sch_netem
	tc qdisc add dev "$OBJFS_VM_NETDEV" root netem "$@" ||
		fail "tc qdisc add dev $OBJFS_VM_NETDEV root netem $* failed"
	on_exit "tc qdisc del dev '$OBJFS_VM_NETDEV' root 2>/dev/null"
	step "netem on $OBJFS_VM_NETDEV: $*"
}

vm_modprobe() {
	local m
	for m in "$@"; do
		modprobe -d "$OBJFS_VM_MODROOT" "$m" || fail "modprobe -d $OBJFS_VM_MODROOT $m failed"
	done
}

# vm_metric NAME VALUE
vm_metric() {
	printf '%s %s %s\n' "$TEST_NAME" "$1" "$2" >>"$OBJFS_VM_TEST_OUT/metrics"
	step "metric $1 = $2"
}

# vm_perftest_pair NAME CMD [ARGS...]: a perftest program (ib_read_bw,
# ib_send_lat, ...) as server and client on rxe (-d, -x, -p and -F are
# added): in one VM both run here (rxe loops back); with two VMs the
# server runs in VM 0 and the client in VM 1.  The client retries (30 s)
# until the server listens.  Sets PERFTEST_OUT to the client's output in
# both VMs; fails the test if either side fails.  Call it in both VMs.
# perftest calibrates its cycle counter against gettimeofday first; when
# emulation upsets that ("Correlation coefficient r^2 < 0.9": the run
# completes but reports 0 or inf) the pair runs again, 3 times at most.
PERFTEST_OUT=
vm_perftest_pair() {
	local name=$1 try out
	shift
	need "$1"
	for try in 1 2 3; do
		_vm_perftest_once "$name.$try" "$@"
		out=$PERFTEST_OUT
		grep -q 'Correlation coefficient' <<<"$out" || return 0
		step "$1 ran but could not calibrate its clock (try $try): $(grep -m1 'Correlation' <<<"$out")"
	done
	fail "$1 ran 3 times but never calibrated its clock: $out"
}

# _vm_perftest_once NAME CMD [ARGS...]: one run of the pair
_vm_perftest_once() {
	local name=$1 port=$((18515 + _VM_BARRIERS)) spid='' rc=0 out='' server log
	shift
	local common=(-d "$OBJFS_VM_RDMA_DEV" -x "$OBJFS_VM_GID_INDEX" -p "$port" -F)
	vm_barrier "perftest-$name-start"
	if [ "$OBJFS_VM_COUNT" = 1 ] || [ "$OBJFS_VM_INDEX" = 0 ]; then
		vm_bg "perftest-$name-server" "$@" "${common[@]}"
		spid=$BG_PID
	fi
	if [ "$OBJFS_VM_COUNT" = 1 ] || [ "$OBJFS_VM_INDEX" = 1 ]; then
		server=${OBJFS_VM_PEER_IP:-$OBJFS_VM_IP}
		log=$T/perftest-$name-client.log
		sleep 1
		# each try's output replaces the one before
		# shellcheck disable=SC2016
		vm_retry 30 bash -c '"${@:2}" >"$1" 2>&1' - "$log" "$@" "${common[@]}" "$server" || rc=$?
		out=$(cat "$log")
		[ "$rc" = 0 ] || fail "$1 client (against $server:$port) failed (status $rc): $(tail -n 20 "$log")"
		[ "$OBJFS_VM_COUNT" = 1 ] || vm_put "perftest-$name" "$out"
	fi
	if [ -n "$spid" ]; then
		rc=0
		vm_wait_bg "$spid" 60 || rc=$?
		[ "$rc" = 0 ] || fail "$1 server failed (status $rc): $(tail -n 20 "$T/perftest-$name-server.log")"
		[ "$OBJFS_VM_COUNT" = 1 ] || out=$(vm_get "perftest-$name" 60)
	fi
	vm_barrier "perftest-$name-end"
	PERFTEST_OUT=$out
}
