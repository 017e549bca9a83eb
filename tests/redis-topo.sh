# shellcheck shell=bash
# shellcheck disable=SC2034 # the TOPO_* variables are for the callers
# shellcheck disable=SC2015 # "A && B || report-and-return" is meant so
#
# redis-topo.sh: Redis topologies on this machine, for the tests that run
# objfs against Redis Sentinel or Redis Cluster (tests/integration/7x-*,
# the integration-cluster pass of tests/run) and for bench/run-bench.
# Source it; it needs bash, redis-server, redis-cli, python3 and timeout.
#
# Every process listens on 127.0.0.1, on a free port, lives in its own
# directory TOPO_DIR/PORT/ (its config file, pidfile, log; its working
# directory, so that tests/lib.sh's cleanup, which matches processes by
# path in their command line or working directory, finds it) and runs
# daemonized (no job of the caller: a $(...) never waits on it) with
# `save ""` and `appendonly no`.  Every wait is bounded and says what it
# waited for when it gives up.
#
# Errors: a function that fails prints "topo: WHAT" on stderr and returns
# non-zero; with TOPO_FAIL set to the name of a function (tests/lib.sh
# sets it to fail), it calls that with WHAT first.  Do not count on
# TOPO_FAIL inside $(...): fail() there ends the subshell only, so check
# the status of a substitution too.
#
# Settings (read when a topology starts):
#   TOPO_PASSWORD      requirepass/masterauth of the data nodes (and the
#                      password in TOPO_SPEC, and sentinel auth-pass);
#                      empty: none.  The sentinels themselves have none.
#   TOPO_MASTER_NAME   the name the sentinels monitor (default objfs-m)
#   TOPO_NODE_TIMEOUT  cluster-node-timeout in ms (default 2000)
#   TOPO_CLI_TIMEOUT   seconds for one redis-cli call (default 10)
#   TOPO_MIGRATE_SECONDS
#                      the longest topo_cluster_migrate_slot moves keys
#                      (default 120)
#
# A topology runs until topo_stop (tests/lib.sh's start_topology calls it
# at exit); one at a time per shell.
#
# Sentinel:
#   topo_sentinel_start DIR
#       1 master, 1 replica, 3 sentinels (quorum 2, down-after 1000 ms,
#       failover-timeout 5000 ms); returns once the replica is in sync and
#       every sentinel knows the master, the replica and the 2 other
#       sentinels.  Sets TOPO_SPEC (redis-sentinel://[:PW@]127.0.0.1:S1,
#       127.0.0.1:S2,127.0.0.1:S3/objfs-m), TOPO_MASTER_PORT,
#       TOPO_REPLICA_PORT, TOPO_SENTINEL_PORTS ("S1 S2 S3"), TOPO_PORTS
#       (the data nodes, "M R").
#   topo_sentinel_master         print the master port every sentinel
#                                that answers (2 at least) agrees on
#   topo_sentinel_wait_failover OLDPORT SECONDS
#       until every sentinel names one master other than OLDPORT and that
#       node says it is a master; prints its port
#   topo_sentinel_remove         every sentinel forgets the master
#   topo_sentinel_monitor PORT [SECONDS]
#       every sentinel monitors PORT as the master (same settings); waits
#       until they name it and know each other; sets TOPO_MASTER_PORT
#   topo_wait_replica PORT MASTER_PORT SECONDS
#       until PORT is a replica of MASTER_PORT with its link up and the
#       master streaming writes to it
# Cluster:
#   topo_cluster_start DIR [NMASTERS=3] [REPLICAS=1]
#       NMASTERS*(1+REPLICAS) nodes made a cluster with redis-cli --cluster
#       create; returns once every node says cluster_state:ok, all agree on
#       who owns which slot, and every replica is in sync.  Sets TOPO_SPEC
#       (redis-cluster://[:PW@]127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3: the
#       first 3 nodes as seeds) and TOPO_PORTS (every node).
#   topo_cluster_keyslot KEY     print KEY's slot
#   topo_cluster_slot_owner KEY  print the port of the master serving
#                                KEY's slot (the one node that claims it)
#   topo_cluster_wait_owner KEY OLDPORT SECONDS
#                                until another master than OLDPORT serves
#                                KEY's slot (a failover) and the cluster
#                                is ok (topo_cluster_wait_ok); prints it
#   topo_cluster_replica_of PORT print the ports of PORT's replicas, one
#                                per line (those that say so themselves)
#   topo_cluster_wait_ok SECONDS every live node cluster_state:ok, the same
#                                slot map on all of them
#   topo_cluster_migrate_slot SLOT FROM_PORT TO_PORT [PAUSE]
#       move SLOT by hand (IMPORTING, MIGRATING, MIGRATE of 10 keys at a
#       time with PAUSE seconds between batches, SETSLOT NODE on both
#       and on every master); prints the number of keys moved
# Any topology:
#   tcli PORT ARGS...            redis-cli to 127.0.0.1:PORT, bounded
#   topo_kill9 PORT              SIGKILL the process on PORT, wait until gone
#   topo_shutdown PORT [save|nosave]
#                                SHUTDOWN the node (save: with its data in
#                                dump.rdb, which topo_restart loads)
#   topo_restart PORT            start it again (same config and directory);
#                                waits until it answers PING
#   topo_stop                    stop every process of the topology
#   topo_pids                    print the pids of the live processes
#   TOPO_NS_KEY                  a key in objfs's namespace slot for the
#                                default prefix: '{objfs}:x'

TOPO_DIR=
TOPO_KIND=
TOPO_SPEC=
TOPO_PORTS=
TOPO_MASTER_PORT=
TOPO_REPLICA_PORT=
TOPO_SENTINEL_PORTS=
TOPO_NS_KEY='{objfs}:x'
: "${TOPO_MASTER_NAME:=objfs-m}"
: "${TOPO_PASSWORD:=}"
: "${TOPO_FAIL:=}"

# ---- errors, clients, waits ----

_topo_err() {
	[ -z "$TOPO_FAIL" ] || "$TOPO_FAIL" "$*"
	printf 'topo: %s\n' "$*" >&2
	return 1
}

# tcli PORT ARGS...: redis-cli against a node (data node or sentinel) of
# the topology, bounded.  The password goes to data nodes only.
tcli() {
	local port=$1
	shift
	local auth=()
	if [ -n "$TOPO_PASSWORD" ] && [[ " $TOPO_SENTINEL_PORTS " != *" $port "* ]]; then
		auth=(--no-auth-warning -a "$TOPO_PASSWORD")
	fi
	timeout -k 2 "${TOPO_CLI_TIMEOUT:-10}" redis-cli -h 127.0.0.1 -p "$port" "${auth[@]}" "$@"
}

# _topo_ok PORT ARGS...: a command that must answer OK
_topo_ok() {
	local port=$1 r
	shift
	r=$(tcli "$port" "$@" 2>&1) || true
	[ "$r" = OK ] || { _topo_err "$* on port $port: ${r:-no answer}"; return 1; }
}

# _topo_info PORT SECTION FIELD: one field of INFO SECTION (empty if the
# node does not answer)
_topo_info() {
	{ tcli "$1" INFO "$2" 2>/dev/null || true; } |
		awk -F: -v k="$3" '$1 == k { sub(/\r$/, "", $2); print $2; exit }'
}

# _topo_until SECONDS WHAT CMD...: run CMD every 0.2 s until it succeeds;
# after SECONDS fail with WHAT and CMD's last output
_topo_until() {
	local secs=$1 what=$2 deadline out=
	shift 2
	deadline=$(($(date +%s) + secs))
	while :; do
		out=$("$@" 2>&1) && return 0
		[ "$(date +%s)" -lt "$deadline" ] || {
			_topo_err "$what: not within ${secs}s${out:+: $out}"
			return 1
		}
		sleep 0.2
	done
}

# _topo_ports N: N distinct free loopback ports P whose P+10000 (a
# cluster node's bus port) is free too, both below the kernel's
# ephemeral range, so that no outgoing connection takes one between its
# choice and its bind (port 36208 was taken so once).  Racy like every
# free port, but the ports are bound together while chosen, so never
# twice.
_topo_ports() {
	python3 - "$1" <<'EOF'
import random, socket, sys
n, held, ports = int(sys.argv[1]), [], []
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
top = max(low - 10000, 12000)
for _ in range(1000):
    if len(ports) == n:
        break
    p = random.randrange(10000, top)
    if p in ports:
        continue
    try:
        socks = []
        for q in (p, p + 10000):
            s = socket.socket()
            s.bind(("127.0.0.1", q))
            socks.append(s)
    except OSError:
        for s in socks:
            s.close()
        continue
    held += socks
    ports.append(p)
if len(ports) != n:
    sys.exit("no %d free port pairs" % n)
print(" ".join(map(str, ports)))
EOF
}

# ---- processes ----

# _topo_conf PORT LINES...: write TOPO_DIR/PORT/redis.conf for a data
# node (the common settings plus LINES)
_topo_conf() {
	local port=$1 d=$TOPO_DIR/$1 l
	shift
	mkdir -p "$d" || return 1
	{
		echo "port $port"
		echo "bind 127.0.0.1"
		echo "dir $d"
		echo "daemonize yes"
		echo "pidfile $d/pid"
		echo "logfile $d/log"
		echo 'save ""'
		echo "appendonly no"
		# a replica's full sync at once, not after the default 5 s
		# wait for more replicas to share the transfer
		echo "repl-diskless-sync-delay 0"
		# objfs's scripts and a few tests run while a node is being
		# killed: no protected mode, no default-user surprises
		echo "protected-mode no"
		if [ -n "$TOPO_PASSWORD" ]; then
			echo "requirepass $TOPO_PASSWORD"
			echo "masterauth $TOPO_PASSWORD"
		fi
		for l in "$@"; do echo "$l"; done
	} >"$d/redis.conf"
}

# _topo_launch PORT: start the process whose directory is TOPO_DIR/PORT
# and wait (10 s) until it answers PING
_topo_launch() {
	local port=$1 d=$TOPO_DIR/$1 out
	rm -f "$d/pid"
	if [ -e "$d/sentinel.conf" ]; then
		out=$(cd "$d" && timeout -k 2 10 redis-server "$d/sentinel.conf" --sentinel 2>&1) ||
			{ _topo_err "sentinel on port $port did not start: $out"; return 1; }
	else
		out=$(cd "$d" && timeout -k 2 10 redis-server "$d/redis.conf" 2>&1) ||
			{ _topo_err "redis-server on port $port did not start: $out"; return 1; }
	fi
	_topo_until 10 "redis on port $port answering PING (log: $(tail -n 3 "$d/log" 2>/dev/null))" \
		_topo_pong "$port"
}

_topo_pong() {
	local r
	r=$(tcli "$1" PING 2>&1) || true
	[ "$r" = PONG ] || { echo "PING: $r"; return 1; }
}

# _topo_pid PORT: the pid of the live process on PORT (from its pidfile)
_topo_pid() {
	local p st
	read -r p 2>/dev/null <"$TOPO_DIR/$1/pid" || return 1
	st=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null) || return 1
	[ "$st" != Z ] || return 1
	echo "$p"
}

topo_pids() {
	local d port
	[ -n "$TOPO_DIR" ] || return 0
	for d in "$TOPO_DIR"/*/; do
		port=$(basename "$d")
		[[ $port =~ ^[0-9]+$ ]] || continue
		_topo_pid "$port" || true
	done
}

_topo_gone() { ! _topo_pid "$1" >/dev/null; }

topo_kill9() {
	local port=$1 pid
	pid=$(_topo_pid "$port") || { _topo_err "kill -9: nothing runs on port $port"; return 1; }
	kill -KILL "$pid" 2>/dev/null || true
	_topo_until 10 "process $pid (port $port) gone after SIGKILL" _topo_gone "$port"
}

topo_shutdown() {
	local port=$1 how=${2:-nosave}
	_topo_pid "$port" >/dev/null || { _topo_err "shutdown: nothing runs on port $port"; return 1; }
	# the reply is the connection closing
	tcli "$port" SHUTDOWN "${how^^}" >/dev/null 2>&1 || true
	_topo_until 15 "redis on port $port gone after SHUTDOWN ${how^^}" _topo_gone "$port"
}

topo_restart() {
	local port=$1
	! _topo_pid "$port" >/dev/null || { _topo_err "restart: port $port is still served"; return 1; }
	[ -d "$TOPO_DIR/$port" ] || { _topo_err "restart: port $port is not part of the topology"; return 1; }
	_topo_launch "$port"
}

# topo_stop: SIGTERM everything (no data to save), SIGKILL what is left
# after 5 s.  Safe to call twice, or with nothing started.
topo_stop() {
	local pids p i
	pids=$(topo_pids)
	[ -n "$pids" ] || return 0
	# shellcheck disable=SC2086
	kill -TERM $pids 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		pids=$(topo_pids)
		[ -n "$pids" ] || return 0
		sleep 0.1
	done
	for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
	for ((i = 0; i < 50; i++)); do
		[ -n "$(topo_pids)" ] || return 0
		sleep 0.1
	done
	_topo_err "processes still running after SIGKILL: $(topo_pids | tr '\n' ' ')"
}

# _topo_begin DIR KIND: start a fresh topology in DIR
_topo_begin() {
	[ -z "$(topo_pids)" ] || { _topo_err "a topology is already running in $TOPO_DIR"; return 1; }
	mkdir -p "$1" || { _topo_err "cannot make $1"; return 1; }
	TOPO_DIR=$(cd "$1" && pwd)
	TOPO_KIND=$2
	TOPO_SPEC='' TOPO_PORTS='' TOPO_MASTER_PORT='' TOPO_REPLICA_PORT='' TOPO_SENTINEL_PORTS=''
	if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
		_topo_err "needs redis-server and redis-cli"
		return 1
	fi
}

_topo_spec_auth() { [ -z "$TOPO_PASSWORD" ] || printf ':%s@' "$TOPO_PASSWORD"; }

# ---- sentinel ----

topo_sentinel_start() {
	local ports m r s s1 s2 s3 i list=
	_topo_begin "$1" sentinel || return 1
	ports=$(_topo_ports 5) || { _topo_err "no free ports"; return 1; }
	read -r m r s1 s2 s3 <<<"$ports"
	TOPO_MASTER_PORT=$m
	TOPO_REPLICA_PORT=$r
	TOPO_PORTS="$m $r"
	TOPO_SENTINEL_PORTS="$s1 $s2 $s3"
	_topo_conf "$m" || return 1
	# a replica to be promoted must be promotable: the default priority
	_topo_conf "$r" "replicaof 127.0.0.1 $m" || return 1
	for s in $TOPO_SENTINEL_PORTS; do
		mkdir -p "$TOPO_DIR/$s"
		{
			echo "port $s"
			echo "bind 127.0.0.1"
			echo "dir $TOPO_DIR/$s"
			echo "daemonize yes"
			echo "pidfile $TOPO_DIR/$s/pid"
			echo "logfile $TOPO_DIR/$s/log"
			echo "protected-mode no"
			echo "sentinel monitor $TOPO_MASTER_NAME 127.0.0.1 $m 2"
			echo "sentinel down-after-milliseconds $TOPO_MASTER_NAME 1000"
			echo "sentinel failover-timeout $TOPO_MASTER_NAME 5000"
			echo "sentinel parallel-syncs $TOPO_MASTER_NAME 1"
			[ -z "$TOPO_PASSWORD" ] || echo "sentinel auth-pass $TOPO_MASTER_NAME $TOPO_PASSWORD"
		} >"$TOPO_DIR/$s/sentinel.conf"
		list+=${list:+,}127.0.0.1:$s
	done
	for i in $TOPO_PORTS $TOPO_SENTINEL_PORTS; do _topo_launch "$i" || return 1; done
	TOPO_SPEC="redis-sentinel://$(_topo_spec_auth)$list/$TOPO_MASTER_NAME"
	topo_wait_replica "$r" "$m" 20 || return 1
	for s in $TOPO_SENTINEL_PORTS; do
		_topo_until 30 "sentinel $s knowing master $m, replica $r and 2 other sentinels" \
			_topo_sentinel_ready "$s" "$m" "$r" || return 1
	done
}

# _topo_count_entries: the number of entries in a redis-cli (no tty) dump
# of an array of field/value arrays (SENTINEL sentinels, replicas)
_topo_count_entries() { awk 'NR % 2 == 1 && $0 == "name" { n++ } END { print n + 0 }'; }

# _topo_fields FIELD...: from one such entry on stdin, the values of FIELDs
_topo_field() { awk -v k="$1" 'NR % 2 == 1 && $0 == k { want = 1; next } want { print; exit }'; }

_topo_sentinel_ready() {
	local s=$1 m=$2 r=$3 reps
	_topo_sentinel_knows "$s" "$m" || return 1
	reps=$(tcli "$s" SENTINEL replicas "$TOPO_MASTER_NAME")
	[ "$(_topo_count_entries <<<"$reps")" = 1 ] &&
		[ "$(_topo_field port <<<"$reps")" = "$r" ] &&
		[ "$(_topo_field flags <<<"$reps")" = slave ] ||
		{ echo "replicas: $(tr '\n' ' ' <<<"$reps")"; return 1; }
}

# _topo_sentinel_view: print the master port all answering sentinels (2
# at least) agree on; fail otherwise
_topo_sentinel_view() {
	local s a ports='' n=0
	for s in $TOPO_SENTINEL_PORTS; do
		a=$(tcli "$s" SENTINEL get-master-addr-by-name "$TOPO_MASTER_NAME" 2>/dev/null | sed -n 2p) ||
			continue
		[ -n "$a" ] || continue
		ports+=" $a"
		n=$((n + 1))
	done
	a=$(tr ' ' '\n' <<<"$ports" | sed '/^$/d' | sort -u)
	if [ "$n" -ge 2 ] && [ "$(wc -l <<<"$a")" = 1 ]; then
		echo "$a"
		return 0
	fi
	echo "sentinels do not agree on a master:$ports (from $n of 3)"
	return 1
}

topo_sentinel_master() {
	local out
	out=$(_topo_sentinel_view) || { _topo_err "$out"; return 1; }
	echo "$out"
}

_topo_role() { tcli "$1" ROLE 2>/dev/null | head -n 1; }

_topo_failed_over() {
	local old=$1 p s a
	for s in $TOPO_SENTINEL_PORTS; do
		a=$(tcli "$s" SENTINEL get-master-addr-by-name "$TOPO_MASTER_NAME" 2>/dev/null | sed -n 2p) || a=
		[ -n "$a" ] && [ "$a" != "$old" ] || { echo "sentinel $s names ${a:-nothing}"; return 1; }
		[ -z "${p:-}" ] || [ "$p" = "$a" ] || { echo "sentinels name $p and $a"; return 1; }
		p=$a
	done
	[ "$(_topo_role "$p")" = master ] || { echo "$p is $(_topo_role "$p"), not master"; return 1; }
	echo "$p"
}

topo_sentinel_wait_failover() {
	local old=$1 secs=$2
	_topo_until "$secs" "failover away from $old" _topo_failed_over "$old" || return 1
	_topo_failed_over "$old"
}

# topo_sentinel_remove: every sentinel forgets the master (SENTINEL
# REMOVE): no failover, no reconfiguration of replicas, until
# topo_sentinel_monitor
topo_sentinel_remove() {
	local s
	for s in $TOPO_SENTINEL_PORTS; do
		_topo_ok "$s" SENTINEL REMOVE "$TOPO_MASTER_NAME" || return 1
	done
}

# topo_sentinel_monitor PORT [SECONDS]: every sentinel monitors PORT as
# the master (SENTINEL MONITOR with the settings of topo_sentinel_start);
# waits (SECONDS, default 30) until they all name it and know each other
# again.  Sets TOPO_MASTER_PORT.
topo_sentinel_monitor() {
	local port=$1 secs=${2:-30} s
	for s in $TOPO_SENTINEL_PORTS; do
		_topo_ok "$s" SENTINEL MONITOR "$TOPO_MASTER_NAME" 127.0.0.1 "$port" 2 || return 1
		_topo_ok "$s" SENTINEL SET "$TOPO_MASTER_NAME" down-after-milliseconds 1000 \
			failover-timeout 5000 parallel-syncs 1 || return 1
		if [ -n "$TOPO_PASSWORD" ]; then
			_topo_ok "$s" SENTINEL SET "$TOPO_MASTER_NAME" auth-pass "$TOPO_PASSWORD" || return 1
		fi
	done
	TOPO_MASTER_PORT=$port
	for s in $TOPO_SENTINEL_PORTS; do
		_topo_until "$secs" "sentinel $s monitoring $port and knowing the 2 other sentinels" \
			_topo_sentinel_knows "$s" "$port" || return 1
	done
}

_topo_sentinel_knows() {
	local s=$1 m=$2 addr n
	addr=$(tcli "$s" SENTINEL get-master-addr-by-name "$TOPO_MASTER_NAME" | tr '\n' ' ')
	[ "$addr" = "127.0.0.1 $m " ] || { echo "master: $addr"; return 1; }
	n=$(tcli "$s" SENTINEL sentinels "$TOPO_MASTER_NAME" | _topo_count_entries)
	[ "$n" = 2 ] || { echo "other sentinels known: $n"; return 1; }
}

# _topo_is_replica_of PORT MASTER: PORT is a replica of MASTER, its link
# is up, and MASTER streams writes to it.  The replica's side is not
# enough: after a diskless full sync the master holds the writes back
# until the replica's first REPLCONF ACK (up to 1 s later), and a master
# killed in that second takes them along.
_topo_is_replica_of() {
	local port=$1 m=$2 role mp link
	role=$(_topo_info "$port" replication role)
	mp=$(_topo_info "$port" replication master_port)
	link=$(_topo_info "$port" replication master_link_status)
	[ "$role" = slave ] && [ "$mp" = "$m" ] && [ "$link" = up ] ||
		{ echo "$port: role ${role:-?}, master_port ${mp:-?}, link ${link:-?}"; return 1; }
	{ tcli "$m" INFO replication 2>/dev/null || true; } | grep -q "^slave[0-9]*:.*,port=$port,state=online," ||
		{ echo "master $m does not stream to $port yet"; return 1; }
}

topo_wait_replica() {
	_topo_until "$3" "$1 a replica of $2 in sync" _topo_is_replica_of "$1" "$2"
}

# ---- cluster ----

topo_cluster_start() {
	local nm=${2:-3} nr=${3:-1} n ports p addrs=() seeds='' i out
	_topo_begin "$1" cluster || return 1
	n=$((nm * (1 + nr)))
	[ "$nm" -ge 3 ] || { _topo_err "a cluster needs 3 masters at least, not $nm"; return 1; }
	ports=$(_topo_ports "$n") || { _topo_err "no free ports"; return 1; }
	TOPO_PORTS=$ports
	for p in $ports; do
		_topo_conf "$p" "cluster-enabled yes" "cluster-config-file nodes.conf" \
			"cluster-node-timeout ${TOPO_NODE_TIMEOUT:-2000}" || return 1
		addrs+=("127.0.0.1:$p")
	done
	for p in $ports; do _topo_launch "$p" || return 1; done
	local auth=()
	[ -z "$TOPO_PASSWORD" ] || auth=(--no-auth-warning -a "$TOPO_PASSWORD")
	out=$(timeout -k 5 60 redis-cli "${auth[@]}" --cluster create "${addrs[@]}" \
		--cluster-replicas "$nr" --cluster-yes 2>&1) ||
		{ _topo_err "redis-cli --cluster create failed: $(tail -n 5 <<<"$out")"; return 1; }
	for ((i = 0; i < 3 && i < n; i++)); do seeds+=${seeds:+,}${addrs[$i]}; done
	TOPO_SPEC="redis-cluster://$(_topo_spec_auth)$seeds"
	topo_cluster_wait_ok 30 || return 1
	_topo_until 30 "every cluster replica in sync" _topo_cluster_replicas_synced
}

topo_cluster_keyslot() {
	local s
	s=$(tcli "${TOPO_PORTS%% *}" CLUSTER KEYSLOT "$1" 2>&1) && [[ $s =~ ^[0-9]+$ ]] ||
		{ _topo_err "CLUSTER KEYSLOT $1: $s"; return 1; }
	echo "$s"
}

# _topo_live_ports: the nodes of the topology that run now
_topo_live_ports() {
	local p
	for p in $TOPO_PORTS; do _topo_pid "$p" >/dev/null && echo "$p"; done
	return 0
}

# _topo_myself PORT: PORT's own line of CLUSTER NODES
_topo_myself() { tcli "$1" CLUSTER NODES 2>/dev/null | awk '$3 ~ /(^|,)myself(,|$)/'; }

# _topo_claims LINE SLOT: does a CLUSTER NODES line list SLOT among its
# slots (single slots and ranges; not the [slot->-id] migration notes)?
_topo_claims() {
	awk -v s="$2" '{
		for (i = 9; i <= NF; i++) {
			if ($i ~ /^\[/) continue
			n = split($i, r, "-")
			if ((n == 1 && r[1] == s) || (n == 2 && s >= r[1] + 0 && s <= r[2] + 0)) found = 1
		}
	} END { exit !found }' <<<"$1"
}

# _topo_owner SLOT: the one live master that claims SLOT itself
_topo_owner() {
	local slot=$1 p line owners=
	for p in $(_topo_live_ports); do
		line=$(_topo_myself "$p")
		[[ $line == *master* ]] || continue
		_topo_claims "$line" "$slot" && owners+=" $p"
	done
	owners=${owners# }
	[ -n "$owners" ] && [[ $owners != *" "* ]] ||
		{ echo "slot $slot claimed by: ${owners:-no live master}"; return 1; }
	echo "$owners"
}

topo_cluster_slot_owner() {
	local slot
	slot=$(topo_cluster_keyslot "$1") || return 1
	# a master that was just failed over and restarted claims its old
	# slots until it hears of the newer epoch: wait that out
	_topo_until 10 "one owner of slot $slot" _topo_owner "$slot" || return 1
	_topo_owner "$slot"
}

# _topo_other_owner SLOT OLDPORT: SLOT's owner, if not OLDPORT
_topo_other_owner() {
	local o
	o=$(_topo_owner "$1") || { echo "$o"; return 1; }
	[ "$o" != "$2" ] || { echo "$2 still owns slot $1"; return 1; }
	echo "$o"
}

topo_cluster_wait_owner() {
	local key=$1 old=$2 secs=$3 slot
	slot=$(topo_cluster_keyslot "$key") || return 1
	_topo_until "$secs" "a new owner of slot $slot (not $old)" _topo_other_owner "$slot" "$old" &&
		topo_cluster_wait_ok "$secs" || return 1
	_topo_other_owner "$slot" "$old"
}

topo_cluster_replica_of() {
	local id p line
	id=$(tcli "$1" CLUSTER MYID 2>&1) && [[ $id =~ ^[0-9a-f]{40}$ ]] ||
		{ _topo_err "CLUSTER MYID on $1: $id"; return 1; }
	for p in $(_topo_live_ports); do
		line=$(_topo_myself "$p")
		[[ $line == *slave* ]] && [ "$(awk '{ print $4 }' <<<"$line")" = "$id" ] && echo "$p"
	done
	return 0
}

# _topo_cluster_map PORT: PORT's view of which node serves which slots
# ("RANGE PORT" lines, sorted); fails unless cluster_state is ok
_topo_cluster_map() {
	local st
	st=$({ tcli "$1" CLUSTER INFO 2>/dev/null || true; } |
		awk -F: '$1 == "cluster_state" { sub(/\r$/, "", $2); print $2; exit }')
	[ "$st" = ok ] || { echo "node $1: cluster_state ${st:-unknown}"; return 1; }
	tcli "$1" CLUSTER NODES | awk '$3 ~ /master/ && $3 !~ /fail/ {
		split($2, a, "[:@]")
		for (i = 9; i <= NF; i++) if ($i !~ /^\[/) print $i, a[2]
	}' | sort
}

_topo_cluster_agree() {
	local p map first='' firstp=''
	for p in $(_topo_live_ports); do
		map=$(_topo_cluster_map "$p") || { echo "$map"; return 1; }
		if [ -z "$firstp" ]; then
			first=$map firstp=$p
		elif [ "$map" != "$first" ]; then
			echo "nodes $firstp and $p see different slot maps: $(tr '\n' ' ' <<<"$first") / $(tr '\n' ' ' <<<"$map")"
			return 1
		fi
	done
	[ -n "$firstp" ] || { echo "no node runs"; return 1; }
}

topo_cluster_wait_ok() {
	_topo_until "$1" "cluster_state:ok and one slot map on every live node" _topo_cluster_agree
}

_topo_cluster_replicas_synced() {
	local p line m
	for p in $(_topo_live_ports); do
		line=$(_topo_myself "$p")
		[[ $line == *slave* ]] || continue
		m=$(_topo_info "$p" replication master_port)
		_topo_is_replica_of "$p" "$m" || return 1
	done
}

topo_cluster_migrate_slot() {
	local slot=$1 from=$2 to=$3 pause=${4:-0} fromid toid keys r p moved=0 deadline
	local auth=()
	[ -z "$TOPO_PASSWORD" ] || auth=(AUTH "$TOPO_PASSWORD")
	fromid=$(tcli "$from" CLUSTER MYID) && toid=$(tcli "$to" CLUSTER MYID) ||
		{ _topo_err "migrate: CLUSTER MYID of $from or $to failed"; return 1; }
	# the order of the manual procedure (redis.io, CLUSTER SETSLOT):
	# target importing before source migrating, so that an ASK from the
	# source is never sent to a target that would answer MOVED
	_topo_ok "$to" CLUSTER SETSLOT "$slot" IMPORTING "$fromid" || return 1
	_topo_ok "$from" CLUSTER SETSLOT "$slot" MIGRATING "$toid" || return 1
	deadline=$(($(date +%s) + ${TOPO_MIGRATE_SECONDS:-120}))
	while :; do
		readarray -t keys < <(tcli "$from" CLUSTER GETKEYSINSLOT "$slot" 10)
		[ "${#keys[@]}" -gt 0 ] && [ -n "${keys[0]}" ] || break
		r=$(tcli "$from" MIGRATE 127.0.0.1 "$to" "" 0 5000 "${auth[@]}" KEYS "${keys[@]}" 2>&1)
		case $r in
		OK | NOKEY) moved=$((moved + ${#keys[@]})) ;;
		*)
			_topo_err "MIGRATE of ${keys[*]} from $from to $to: $r"
			return 1
			;;
		esac
		[ "$(date +%s)" -lt "$deadline" ] ||
			{ _topo_err "migrate: slot $slot still has keys on $from after ${TOPO_MIGRATE_SECONDS:-120}s"; return 1; }
		[ "$pause" = 0 ] || sleep "$pause"
	done
	# target first: once the source lets go, clients it redirects must
	# find the target owning the slot
	for p in "$to" "$from"; do
		_topo_ok "$p" CLUSTER SETSLOT "$slot" NODE "$toid" || return 1
	done
	for p in $(_topo_live_ports); do
		[ "$p" != "$to" ] && [ "$p" != "$from" ] || continue
		[[ $(_topo_myself "$p") == *master* ]] || continue
		_topo_ok "$p" CLUSTER SETSLOT "$slot" NODE "$toid" || return 1
	done
	echo "$moved"
}
