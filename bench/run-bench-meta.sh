# shellcheck shell=bash
# shellcheck disable=SC2154 # W, SHM, OBJFSD, REPORT... are run-bench's
#
# bench/run-bench-meta.sh: the `meta` section of bench/run-bench (issue
# 12), sourced by it; its header says what is measured.  Everything here
# uses run-bench's work area, cleanup and helpers (mount_objfs_try,
# unmount_node, drop_caches, med, calc, verdict, value, now).
#
# For each engine in turn, one Redis (a private redis-server on a unix
# socket, or tests/redis-topo.sh's Sentinel or Cluster topology) and two
# objfs nodes: A writes everything; B, mounted afresh for every cold
# measure, reads what it has never seen.  Every measure runs next to its
# baseline: the same operations on a directory in /dev/shm, right after,
# and redis-benchmark against the master that holds the namespace.
# Redis's own counters say what an operation costs it: INFO
# commandstats, read on that master before and after each objfs run
# (Redis 7 counts the commands that scripts call, so "cmds/op" is every
# command and "evalsha/op" the script calls among them), and INFO
# memory's used_memory across the making of the big ls tree.

META_CREATES=${META_CREATES:-2000}
META_ROUNDS=${META_ROUNDS:-3}
META_STAT=10000
META_WRITERS=(1 4 16)
# the targets of issue 12
META_CREATE_TARGET=5000
META_LS_COLD_TARGET=3
META_LS_WARM_TARGET=0.5
META_LS_TARGET_N=100000

# ---- the engine under test: ME_SPEC, and how to reach its master ----

# meta_rcli ARGS...: redis-cli (bounded) to the master that holds the
# namespace (the slot of {objfs}:x on a cluster)
meta_rcli() { timeout -k 2 30 redis-cli "${ME_RARGS[@]}" "$@"; }

# meta_redis_up ENGINE: start ENGINE's Redis; sets ME_SPEC, ME_RARGS and
# ME_DESC, or returns 1 with the reason in ME_WHY
meta_redis_up() {
	local e=$1 owner
	ME_WHY=
	case $e in
	single)
		start_redis "$W/meta.sock" "$W/meta-redis"
		ME_SPEC=unix:$W/meta.sock
		ME_RARGS=(-s "$W/meta.sock")
		ME_DESC="one redis-server on a unix socket"
		return 0
		;;
	esac
	if ! declare -F topo_stop >/dev/null; then
		ME_WHY="tests/redis-topo.sh is missing from this tree"
		return 1
	fi
	case $e in
	sentinel)
		if ! topo_sentinel_start "$W/topo-sentinel" >"$W/topo-sentinel.out" 2>&1; then
			ME_WHY="topo_sentinel_start failed: $(tail -n 3 "$W/topo-sentinel.out" | tr '\n' ' ')"
			return 1
		fi
		ME_SPEC=$TOPO_SPEC
		ME_RARGS=(-h 127.0.0.1 -p "$TOPO_MASTER_PORT")
		ME_DESC="Sentinel: master 127.0.0.1:$TOPO_MASTER_PORT, a replica, 3 sentinels"
		;;
	cluster)
		if ! topo_cluster_start "$W/topo-cluster" >"$W/topo-cluster.out" 2>&1; then
			ME_WHY="topo_cluster_start failed: $(tail -n 3 "$W/topo-cluster.out" | tr '\n' ' ')"
			return 1
		fi
		ME_SPEC=$TOPO_SPEC
		owner=$(topo_cluster_slot_owner '{objfs}:x') || {
			ME_WHY="no owner for the slot of {objfs}:x"
			return 1
		}
		ME_RARGS=(-h 127.0.0.1 -p "$owner")
		ME_DESC="Cluster of 6 (3 masters, 3 replicas): namespace slot $(meta_rcli CLUSTER KEYSLOT '{objfs}:x') on 127.0.0.1:$owner"
		;;
	esac
}

meta_redis_down() {
	case $1 in
	single) timeout -k 2 10 redis-cli -s "$W/meta.sock" SHUTDOWN NOSAVE >/dev/null 2>&1 || true ;;
	*) ! declare -F topo_stop >/dev/null || topo_stop >/dev/null 2>&1 || true ;;
	esac
}

# ---- Redis's counters ----

# meta_calls: "TOTAL EVALSHA" commands the master has run so far; the
# INFO calls that read them are left out
meta_calls() {
	meta_rcli INFO commandstats | tr -d '\r' | awk -F'[:,=]' '
		/^cmdstat_/ {
			n = substr($1, 9)
			if (n == "info") next
			t += $3
			if (n ~ /^evalsha/) e += $3
		}
		END { print t + 0, e + 0 }'
}

meta_used_memory() { meta_rcli INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }'; }

# meta_per_op BEFORE AFTER OPS: "CMDS EVALSHA" per operation
meta_per_op() {
	awk -v ops="$3" -v b="$1" -v a="$2" 'BEGIN {
		split(b, x, " "); split(a, y, " ")
		if (ops <= 0) { print "- -"; exit }
		printf "%.1f %.1f\n", (y[1] - x[1]) / ops, (y[2] - x[2]) / ops }'
}

# ---- running objfs-meta-bench ----

# meta_run KEY OP DIR COUNT ARGS...: one objfs-meta-bench run; appends
# its rate to MV[KEY], and, for a run in the mount (not a baseline's:
# meta_baseline), its commands per operation to MC[KEY] and ME[KEY]; failed
# operations add up in MF[KEY]
meta_run() {
	local key=$1 op=$2 dir=$3 count=$4 out c0 c1 ok pair
	shift 4
	meta_baseline "$key" || c0=$(meta_calls)
	out=$(timeout -k 5 900 "$MBENCH" "$op" "$dir" "$count" --max-seconds 600 "$@") ||
		die "objfs-meta-bench $op $dir $count $* failed"
	MV[$key]+=" $(value per_s "$out")"
	ME_LAST_OK=$(value ok "$out")
	MF[$key]=$((${MF[$key]:-0} + $(value failed "$out") + $(value skipped "$out")))
	echo "    $op $(basename "$dir") ($*): $(value per_s "$out")/s; ok $(value ok "$out"), failed $(value failed "$out"), skipped $(value skipped "$out"), $(value seconds "$out") s"
	! meta_baseline "$key" || return 0
	c1=$(meta_calls)
	ok=$(value ok "$out")
	read -r -a pair <<<"$(meta_per_op "$c0" "$c1" "$ok")"
	MC[$key]+=" ${pair[0]}"
	ME[$key]+=" ${pair[1]}"
}

# meta_baseline KEY: whether KEY is a baseline's (tmpfs, the FUSE floor),
# whose runs count no Redis commands
meta_baseline() { [[ $1 == *-tmpfs || $1 == *-floor || $1 == *-lean ]]; }

# meta_floor KEY WRITERS [--lean]: META_CREATES creates with WRITERS
# workers on a fresh mount of objfs-fuse-floor (bench/fuse-floor.c: an
# in-memory FUSE filesystem that answers a create as objfsd does and does
# nothing else), into MV[KEY]
meta_floor() {
	local key=$1 w=$2 m=$W/floor pid i
	shift 2
	mkdir -p "$m"
	"$FLOOR" "$@" "$m" >>"$W/floor.log" 2>&1 &
	pid=$!
	for ((i = 0; i < 100; i++)); do
		mountpoint -q "$m" && break
		sleep 0.1
	done
	mountpoint -q "$m" || die "objfs-fuse-floor $* did not mount on $m (see $W/floor.log)"
	meta_run "$key" create "$m" "$META_CREATES" --workers "$w"
	umount "$m" || die "cannot unmount $m"
	timeout -k 2 10 tail --pid="$pid" -f /dev/null || true
}

# meta_ls KEY DIR COUNT: time `ls -l DIR >/dev/null` (bounded) into
# MV[KEY]; with MC, commands per entry too; then check that DIR has
# COUNT entries
meta_ls() {
	local key=$1 dir=$2 count=$3 c0 c1 t0 secs n pair
	[[ $key == *-tmpfs* ]] || c0=$(meta_calls)
	t0=$(now)
	timeout -k 5 600 ls -l "$dir" >/dev/null || die "ls -l $dir failed"
	secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
	MV[$key]+=" $secs"
	if [[ $key != *-tmpfs* ]]; then
		c1=$(meta_calls)
		read -r -a pair <<<"$(meta_per_op "$c0" "$c1" "$count")"
		MC[$key]+=" ${pair[0]}"
		ME[$key]+=" ${pair[1]}"
	fi
	# every entry there?  Checked on the repeated run, not timed
	if [[ $key == *-warm* ]]; then
		n=$(timeout -k 5 600 ls -A "$dir" | wc -l)
		[ "$n" = "$count" ] || MF[$key]=$((${MF[$key]:-0} + (count > n ? count - n : n - count)))
		echo "    ls -l $dir: $secs s ($n entries)"
	else
		echo "    ls -l $dir: $secs s"
	fi
}

# meta_fresh_b ENGINE: (re)mount the measuring node B under a new name,
# so that neither it nor the kernel has seen anything, page cache dropped
meta_fresh_b() {
	[ -z "${ME_B:-}" ] || unmount_node "$ME_BMNT" "$ME_B"
	ME_BN=$((${ME_BN:-0} + 1))
	ME_B=m$1-b$ME_BN
	mount_objfs_try "$ME_SPEC" "$ME_BMNT" "$ME_B" "capacity=256M,noprefault" ||
		die "mount of the measuring node failed: $MOUNT_WHY"
	drop_caches
}

# wait_faulted_in NAME: until node NAME's store is faulted in (its log
# says so), at most 60 s, so that the creates do not race the prefault
wait_faulted_in() {
	local i
	for ((i = 0; i < 600; i++)); do
		grep -q 'faulted in' "$W/$1.log" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "  (the store of $1 was not faulted in after 60 s; measuring anyway)"
}

# ---- the measures ----

# meta_creates ROUND: the create runs of one round, each in a new
# directory
meta_creates() {
	local r=$1 w lay args d
	echo "create rate: $META_CREATES objects of 4 KiB per run, objfs, tmpfs, then (one dir) the FUSE floor (round $r of $META_ROUNDS)"
	for w in "${META_WRITERS[@]}"; do
		for lay in one per; do
			args=(--workers "$w")
			[ "$lay" = one ] || args+=(--per-worker-dir)
			d=c-$lay-$w-$r
			mkdir "$ME_A/$d" "$SHM/meta/$d"
			meta_run "create-$lay-$w" create "$ME_A/$d" "$META_CREATES" "${args[@]}"
			meta_run "create-$lay-$w-tmpfs" create "$SHM/meta/$d" "$META_CREATES" "${args[@]}"
		done
		meta_floor "create-one-$w-floor" "$w"
		meta_floor "create-one-$w-lean" "$w" --lean
	done
}

# meta_rename_unlink ROUND: rename then unlink, in the one-directory
# trees of the round's 1- and 4-writer creates: names f* renamed to r* in
# place, then the r* unlinked.  The round's other trees are removed
# (untimed), so that A never holds more than one round of objects
meta_rename_unlink() {
	local r=$1 w base sfx d
	echo "rename and unlink in one directory, $META_CREATES names, objfs then tmpfs (round $r of $META_ROUNDS)"
	for w in 1 4; do
		for base in "$ME_A" "$SHM/meta"; do
			sfx=
			[ "$base" = "$ME_A" ] || sfx=-tmpfs
			meta_run "rename-$w$sfx" rename "$base/c-one-$w-$r" "$META_CREATES" --workers "$w"
			meta_run "unlink-$w$sfx" unlink "$base/c-one-$w-$r" "$META_CREATES" --workers "$w" --prefix r
		done
	done
	for d in "$ME_A"/c-*-"$r" "$SHM"/meta/c-*-"$r"; do
		timeout -k 5 600 rm -rf "$d" || die "cannot remove $d"
	done
}

# meta_maker ENGINE: mount one more node to make tree objects through
# (objfsd holds a descriptor per object: each maker takes ME_PER_NODE);
# ME_MAKER is its mount point, ME_ROOM the objects it may still take
meta_maker() {
	local name
	ME_TN=$((ME_TN + 1))
	name=m$1-t$ME_TN
	ME_MAKER=$W/meta-$1-t$ME_TN
	ME_MAKERS+=("$ME_MAKER $name")
	mount_objfs_try "$ME_SPEC" "$ME_MAKER" "$name" "capacity=$ME_CAP" || die "mount of a tree maker failed: $MOUNT_WHY"
	wait_faulted_in "$name"
	ME_ROOM=$ME_PER_NODE
}

# meta_trees ENGINE: the ls trees, made by 16 writers through A and as
# many more nodes as the open files limit asks for (and in /dev/shm in
# one go); Redis's used_memory across the biggest, per object made
meta_trees() {
	local n m0 m1 first cnt made
	for n in "${ME_LS_SIZES[@]}"; do
		echo "making the ls tree of $n objects through objfs (16 writers, $ME_PER_NODE objects a node at most) and in /dev/shm"
		mkdir "$ME_A/l$n" "$SHM/meta/l$n"
		m0=$(meta_used_memory)
		first=0 made=0
		while [ "$first" -lt "$n" ]; do
			[ "$ME_ROOM" -gt 0 ] || meta_maker "$1"
			cnt=$((n - first < ME_ROOM ? n - first : ME_ROOM))
			meta_run "tree-$n" create "$ME_MAKER/l$n" "$cnt" --workers 16 --first "$first"
			made=$((made + ME_LAST_OK))
			ME_ROOM=$((ME_ROOM - cnt))
			first=$((first + cnt))
		done
		m1=$(meta_used_memory)
		ME_MEM_PER_OBJ=$(awk -v a="$m0" -v b="$m1" -v n="$made" 'BEGIN { printf "%.0f", n ? (b - a) / n : 0 }')
		ME_MEM_N=$made
		echo "    used_memory +$((m1 - m0)) B: $ME_MEM_PER_OBJ B per object"
		meta_run "tree-$n-tmpfs" create "$SHM/meta/l$n" "$n" --workers 16
	done
}

# ls -l of each tree on B: cold (B mounted afresh, page cache dropped),
# then repeated at once; against the tmpfs copy, cold (page cache
# dropped) and repeated
meta_ls_all() {
	local n r
	for n in "${ME_LS_SIZES[@]}"; do
		echo "ls -l of $n entries on B: cold, then repeated; then /dev/shm ($META_ROUNDS rounds)"
		for ((r = 1; r <= META_ROUNDS; r++)); do
			meta_fresh_b "$1"
			meta_ls "ls-$n-cold" "$ME_BMNT/l$n" "$n"
			meta_ls "ls-$n-warm" "$ME_BMNT/l$n" "$n"
			drop_caches
			meta_ls "ls-$n-cold-tmpfs" "$SHM/meta/l$n" "$n"
			meta_ls "ls-$n-warm-tmpfs" "$SHM/meta/l$n" "$n"
		done
	done
}

# stat of names B has never seen (it is mounted afresh for every run),
# in the smallest tree, without listing the directory first
meta_stats() {
	local r w n=${ME_LS_SIZES[0]}
	echo "stat of $META_STAT uncached names on B, mounted afresh, then /dev/shm ($META_ROUNDS rounds)"
	[ "$n" -ge "$META_STAT" ] || die "the smallest ls tree ($n) is smaller than the stat set ($META_STAT)"
	for ((r = 1; r <= META_ROUNDS; r++)); do
		for w in 1 4; do
			meta_fresh_b "$1"
			meta_run "stat-$w" stat "$ME_BMNT/l$n" "$META_STAT" --workers "$w"
			drop_caches
			meta_run "stat-$w-tmpfs" stat "$SHM/meta/l$n" "$META_STAT" --workers "$w"
		done
	done
}

# meta_key_classes: the keys of the namespace by shape (digits as N),
# with how many there are and the mean MEMORY USAGE of up to 20 of each
meta_key_classes() {
	local cls keys key k sum cnt v
	meta_rcli --scan >"$W/meta-keys" || return 0
	sed -E 's/[0-9]+/N/g' "$W/meta-keys" | sort | uniq -c | sort -rn | head -n 12 |
		while read -r cnt cls; do
			keys=$(awk -v c="$cls" '{ k = $0; gsub(/[0-9]+/, "N", k) } k == c { print; if (++n == 20) exit }' "$W/meta-keys")
			sum=0 k=0
			while read -r key; do
				v=$(meta_rcli MEMORY USAGE "$key" | tr -dc 0-9)
				[ -n "$v" ] || continue
				sum=$((sum + v))
				k=$((k + 1))
			done <<<"$keys"
			[ "$k" -gt 0 ] || continue
			printf '  %-28s %8s keys, %6s B each (MEMORY USAGE, mean of %s)\n' "$cls" "$cnt" $((sum / k)) "$k"
		done
}

# ---- redis-benchmark against the same master ----

# meta_rb ARGS...: redis-benchmark's requests per second for one command,
# 100,000 requests from 4 clients, no pipelining
meta_rb() {
	timeout -k 5 300 redis-benchmark "${ME_RARGS[@]}" -n 100000 -c 4 -P 1 -r 100000 -q "$@" 2>&1 |
		tr '\r' '\n' | awk 'match($0, /[0-9.]+ requests per second/) { v = substr($0, RSTART, RLENGTH) }
			END { split(v, f, " "); print (f[1] == "") ? "-" : f[1] }'
}

# the server alone, with keys in the namespace's slot: SET, HSET, an
# EVALSHA of a script that does nothing, and of one that does an HSET
meta_server_baseline() {
	local nop hset
	echo "redis-benchmark on the master (100,000 requests, 4 clients, -P 1)"
	nop=$(meta_rcli SCRIPT LOAD "return 1")
	hset=$(meta_rcli SCRIPT LOAD "return redis.call('HSET', KEYS[1], ARGV[1], 'v')")
	RB_SET=$(meta_rb SET '{objfs}:zb' v)
	RB_HSET=$(meta_rb HSET '{objfs}:zbh' f__rand_int__ v)
	RB_NOP=$(meta_rb EVALSHA "$nop" 1 '{objfs}:zb')
	RB_EVHSET=$(meta_rb EVALSHA "$hset" 1 '{objfs}:zbe' f__rand_int__)
	meta_rcli DEL '{objfs}:zb' '{objfs}:zbh' '{objfs}:zbe' >/dev/null
	echo "    SET $RB_SET/s, HSET $RB_HSET/s, EVALSHA (return 1) $RB_NOP/s, EVALSHA (HSET) $RB_EVHSET/s"
}

# ---- the report ----

# meta_row NAME KEY UNIT [TARGET-KIND TARGET]: a row of objfs against
# tmpfs; kind min (rate at least TARGET) or max (seconds at most)
meta_row() {
	local name=$1 key=$2 unit=$3 kind=${4:-} target=${5:-} v b ratio c e fails tgt=- ok=-
	v=$(meta_fmt "$unit" "$(meta_med MV "$key")")
	b=$(meta_fmt "$unit" "$(meta_med MV "$key-tmpfs")")
	ratio=$(calc "$v" "$b" 'printf "%.3f", a / b')
	c=$(meta_fmt cmds "$(meta_med MC "$key")")
	e=$(meta_fmt cmds "$(meta_med ME "$key")")
	fails=${MF[$key]:-0}
	case $kind in
	min)
		tgt=">= $target $unit"
		ok=$(calc "$v" "$target" 'print (a >= b) ? 1 : 0' | sed 's/^-$/0/')
		;;
	max)
		tgt="<= $target $unit"
		ok=$(calc "$v" "$target" 'print (a <= b) ? 1 : 0' | sed 's/^-$/0/')
		;;
	esac
	# a run that lost operations (or entries) is not a measure of the
	# target, however fast it was
	if [ -n "$kind" ]; then
		[ "$fails" = 0 ] || ok=0
		ok=$(verdict "$ok")
	fi
	printf '%-34s %10s %-6s %10s %8s %8s %8s %6s   %-14s %s\n' "$name" "$v" "$unit" "$b" "$ratio" \
		"$c" "$e" "$fails" "$tgt" "$ok"
}

# meta_fmt UNIT VALUE: VALUE rounded for its unit (seconds to the ms,
# commands to a tenth, rates whole); "-" stays
meta_fmt() {
	case $1:$2 in
	*:- | *:) echo - ;;
	s:*) awk -v v="$2" 'BEGIN { printf "%.3f", v }' ;;
	cmds:*) awk -v v="$2" 'BEGIN { printf "%.1f", v }' ;;
	*) awk -v v="$2" 'BEGIN { printf "%.0f", v }' ;;
	esac
}

meta_report() {
	local e=$1 w n lay t k
	REPORT+=$'\n'"meta, engine $e ($ME_DESC): medians of $META_ROUNDS rounds, each next to its tmpfs run"$'\n'
	REPORT+="host load average at the start: $ME_LOAD0; at the end: $ME_LOAD1"$'\n'
	REPORT+="(cmds/op, evsha/op: Redis commands and EVALSHA per operation, per entry for ls)"$'\n'
	REPORT+=$(printf '%-34s %10s %-6s %10s %8s %8s %8s %6s   %-14s %s' measure objfs unit tmpfs \
		"objfs/t" cmds/op evsha/op failed target verdict)$'\n'
	for lay in one per; do
		for w in "${META_WRITERS[@]}"; do
			if [ "$lay" = one ] && [ "$w" = 4 ]; then
				REPORT+=$(meta_row "create 4K, $w writers, one dir" "create-$lay-$w" obj/s min "$META_CREATE_TARGET")$'\n'
			elif [ "$lay" = one ]; then
				REPORT+=$(meta_row "create 4K, $w writer(s), one dir" "create-$lay-$w" obj/s)$'\n'
			else
				REPORT+=$(meta_row "create 4K, $w writer(s), dir each" "create-$lay-$w" obj/s)$'\n'
			fi
		done
	done
	for n in "${ME_LS_SIZES[@]}"; do
		REPORT+=$(meta_row "create 4K, 16 writers, tree $n" "tree-$n" obj/s)$'\n'
	done
	for n in "${ME_LS_SIZES[@]}"; do
		if [ "$n" = "$META_LS_TARGET_N" ]; then
			REPORT+=$(meta_row "ls -l $n, cold" "ls-$n-cold" s max "$META_LS_COLD_TARGET")$'\n'
			REPORT+=$(meta_row "ls -l $n, repeated" "ls-$n-warm" s max "$META_LS_WARM_TARGET")$'\n'
		else
			REPORT+=$(meta_row "ls -l $n, cold" "ls-$n-cold" s)$'\n'
			REPORT+=$(meta_row "ls -l $n, repeated" "ls-$n-warm" s)$'\n'
		fi
	done
	for w in 1 4; do
		REPORT+=$(meta_row "stat uncached, $w worker(s)" "stat-$w" stat/s)$'\n'
	done
	for w in 1 4; do
		REPORT+=$(meta_row "rename in one dir, $w worker(s)" "rename-$w" op/s)$'\n'
	done
	for w in 1 4; do
		REPORT+=$(meta_row "unlink in one dir, $w worker(s)" "unlink-$w" op/s)$'\n'
	done
	REPORT+="FUSE floor (objfs-fuse-floor: answers a create as objfsd does, in memory, nothing else), create/s 1/4/16 writers one dir:"
	REPORT+=" $(meta_meds create-one "${META_WRITERS[@]/%/-floor}"); lean (negative entries and attributes cached):"
	REPORT+=" $(meta_meds create-one "${META_WRITERS[@]/%/-lean}"); objfs/floor 4 writers:"
	REPORT+=" $(calc "$(meta_med MV create-one-4)" "$(meta_med MV create-one-4-floor)" 'printf "%.3f", a / b')"$'\n'
	REPORT+="open files limit $ME_NOFILE: at most $ME_PER_NODE objects a node (objfsd keeps a descriptor for every"
	REPORT+=" object in its store); the trees were made through $((ME_TN + 1)) nodes"$'\n'
	REPORT+="redis memory: $ME_MEM_PER_OBJ B per object (used_memory across the $ME_MEM_N-object tree)"$'\n'
	REPORT+="redis-benchmark, same master, 4 clients: SET $RB_SET/s, HSET $RB_HSET/s, EVALSHA return 1 $RB_NOP/s, EVALSHA HSET $RB_EVHSET/s"$'\n'
	REPORT+="keys by shape:"$'\n'"$ME_KEYS"$'\n'
	# one line per measure to paste into a note
	t="summary $e:"
	REPORT+="$t create/s 1/4/16 writers one dir $(meta_meds create-one "${META_WRITERS[@]}"), dir each $(meta_meds create-per "${META_WRITERS[@]}") (tmpfs $(meta_meds create-one "${META_WRITERS[@]/%/-tmpfs}"); FUSE floor $(meta_meds create-one "${META_WRITERS[@]/%/-floor}"))"$'\n'
	for n in "${ME_LS_SIZES[@]}"; do
		REPORT+="$t ls -l $n cold $(meta_fmt s "$(meta_med MV "ls-$n-cold")") s,"
		REPORT+=" repeated $(meta_fmt s "$(meta_med MV "ls-$n-warm")") s (tmpfs"
		REPORT+=" $(meta_fmt s "$(meta_med MV "ls-$n-cold-tmpfs")") / $(meta_fmt s "$(meta_med MV "ls-$n-warm-tmpfs")") s)"$'\n'
	done
	REPORT+="$t stat uncached 1/4 workers $(meta_meds stat 1 4)/s; rename 1/4 $(meta_meds rename 1 4)/s;"
	REPORT+=" unlink 1/4 $(meta_meds unlink 1 4)/s"$'\n'
	REPORT+="$t Redis commands/op (evalsha/op):"
	for k in create-one-4 "ls-${ME_LS_SIZES[-1]}-cold" stat-1 rename-1 unlink-1; do
		REPORT+=" ${k%%-*} $(meta_fmt cmds "$(meta_med MC "$k")") ($(meta_fmt cmds "$(meta_med ME "$k")"))"
	done
	REPORT+="; $ME_MEM_PER_OBJ B/object in Redis"$'\n'
}

# meta_med ARRAY KEY: the median of ARRAY[KEY], "-" if there is none
meta_med() {
	local -n arr=$1
	local v
	v=$(med "${arr[$2]:-}")
	echo "${v:--}"
}

# meta_meds PREFIX SUFFIX...: the medians of MV[PREFIX-SUFFIX], joined by /
meta_meds() {
	local p=$1 s out=
	shift
	for s in "$@"; do out+="${out:+/}$(meta_fmt rate "$(meta_med MV "$p-$s")")"; done
	echo "$out"
}

# meta_engine ENGINE: every measure on one engine; skipped, with the
# reason in the report, when its Redis or the first mount does not come up
meta_engine() {
	local e=$1 r m
	declare -gA MV=() MC=() ME=() MF=()
	echo "== meta ($e)"
	if ! meta_redis_up "$e"; then
		echo "  skipped: $ME_WHY"
		REPORT+=$'\n'"meta, engine $e: skipped ($ME_WHY)"$'\n'
		return 0
	fi
	ME_LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "  $ME_DESC; $(meta_rcli INFO server | tr -d '\r' | grep '^redis_version:'); load $ME_LOAD0"
	meta_server_baseline
	ME_A=$W/meta-$e-a ME_BMNT=$W/meta-$e-b ME_B='' ME_BN=0
	rm -rf --one-file-system "${SHM:?}/meta"
	mkdir -p "$SHM/meta"
	if ! mount_objfs_try "$ME_SPEC" "$ME_A" "m$e-a" "capacity=$ME_CAP"; then
		echo "  skipped: objfs did not mount on $ME_SPEC: $MOUNT_WHY"
		REPORT+=$'\n'"meta, engine $e: redis-benchmark SET $RB_SET/s, HSET $RB_HSET/s, EVALSHA return 1 $RB_NOP/s, EVALSHA HSET $RB_EVHSET/s; objfs skipped: it did not mount on $ME_SPEC ($MOUNT_WHY)"$'\n'
		meta_redis_down "$e"
		return 0
	fi
	wait_faulted_in "m$e-a"
	for ((r = 1; r <= META_ROUNDS; r++)); do
		meta_creates "$r"
		meta_rename_unlink "$r"
	done
	# A is empty again: it makes the first of the trees
	ME_MAKER=$ME_A ME_ROOM=$ME_PER_NODE ME_TN=0 ME_MAKERS=()
	meta_trees "$e"
	meta_ls_all "$e"
	meta_stats "$e"
	ME_KEYS=$(meta_key_classes)
	unmount_node "$ME_BMNT" "$ME_B"
	for m in "${ME_MAKERS[@]}"; do
		# shellcheck disable=SC2086 # "mount-point name"
		unmount_node $m
	done
	unmount_node "$ME_A" "m$e-a"
	rm -rf --one-file-system "${SHM:?}/meta"
	ME_LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "  load $ME_LOAD1"
	meta_report "$e"
	meta_redis_down "$e"
}

section_meta() {
	local e n topo=$REPO/tests/redis-topo.sh
	MBENCH=$BUILD/bench/objfs-meta-bench
	FLOOR=$BUILD/bench/objfs-fuse-floor
	[ -x "$MBENCH" ] || die "$MBENCH was not built"
	[ -x "$FLOOR" ] || die "$FLOOR was not built"
	if [ -f "$topo" ]; then
		# shellcheck source=/dev/null
		. "$topo"
	fi
	if [ -z "$META_ENGINES" ]; then
		META_ENGINES=single
		[ ! -f "$topo" ] || META_ENGINES=single,sentinel,cluster
	fi
	IFS=, read -r -a ME_ENGINES <<<"$META_ENGINES"
	for e in "${ME_ENGINES[@]}"; do
		case $e in
		single | sentinel | cluster) ;;
		*) die "--engine takes single, sentinel and cluster, not '$e'" ;;
		esac
	done
	if ! [[ $META_LS =~ ^[0-9]+$ ]] || [ "$META_LS" -lt 10000 ]; then
		die "--objects-ls takes a number, at least 10000"
	fi
	ME_LS_SIZES=(10000)
	[ "$META_LS" = 10000 ] || ME_LS_SIZES+=("$META_LS")
	# objfsd keeps an open descriptor for every object in its store and
	# takes RLIMIT_NOFILE as it inherits it: past the limit, creates fail
	# with EMFILE (and sealed objects in flight are discarded).  So the
	# soft limit goes up to the hard one, and no node is given more than
	# the limit less a margin: A holds one round of creates at a time, and
	# the trees are spread over as many nodes as that asks for.
	ulimit -Sn "$(ulimit -Hn)"
	ME_NOFILE=$(ulimit -Sn)
	[ "$ME_NOFILE" != unlimited ] || ME_NOFILE=1048576
	ME_PER_NODE=$((ME_NOFILE > 1000000 ? 1000000 : ME_NOFILE - 3000))
	n=$((META_CREATES * ${#META_WRITERS[@]} * 2))
	[ "$ME_PER_NODE" -ge "$n" ] ||
		die "the open files limit ($ME_NOFILE) is too low for a round of creates ($n objects on one node)"
	# every node may hold ME_PER_NODE objects of 4 KiB, a page each, or a
	# round of creates
	n=$((ME_PER_NODE > n ? ME_PER_NODE : n))
	ME_CAP=$((n * 6 / 1024 + 256))M
	for e in "${ME_ENGINES[@]}"; do meta_engine "$e"; done
}
