# shellcheck shell=bash
# shellcheck disable=SC2154 # W, SHM, BUILD, REPORT... are run-bench's
#
# bench/run-bench-fanout.sh: the `fanout` section of bench/run-bench
# (issue 22), sourced by it.  Everything here uses run-bench's work area,
# cleanup and helpers (start_redis, mount_objfs_try, unmount_node,
# status_of, wait_seen, value, median, verdict, now, drop_caches).
#
# One writer, K readers at once.  For each K of --fanout-readers (default
# 1,2,4,8,16; a K whose (K+2) x S x 2 plus 1 GiB does not fit in
# MemAvailable is skipped, saying so): a private Redis and K+1 nodes on
# loopback, node 0 the origin, each mounted with serve_bwlimit=BW
# (--fanout-bw, default 64M) and capacity S + 64 MiB (the origin 2 S +
# 64 MiB: an object a node has served keeps its space for 10 to 20 s
# after its unlink, and a run waits for room on every node, at most
# 60 s), stores
# faulted in before anything is measured.  Then --fanout-runs runs
# (default 3), each with a fresh object:
#
#   write    node 0 writes S bytes (--fanout-size, default 256M) of random
#            data; their sha256 is taken from the source
#   listed   every reader lists the object with its size (at most 30 s)
#   gate     the K readers wait behind a fifo; once all are waiting it is
#            opened (by opening it read-write) and each runs
#            `cat FILE >/dev/null` through its own mount: wall time from
#            the gate opening until the last reader finished
#   verify   after the timing, the sha256 of every reader's copy through
#            its mount (K SHA-256s at once would saturate the cores:
#            never during the run)
#
# Across each run (the gate to the last reader): served_bytes of every
# node (objfs status), the machine's CPU idle share (idle + iowait of
# /proc/stat's cpu line), the CPU the K+1 objfsd used (/proc/PID/stat,
# as a share of all cores: idle is the machine's, other tenants
# included) and Redis's command count (INFO commandstats, the INFO calls
# left out).  Reported per K, medians of the runs with min-max spread:
# the wall time, S/BW, wall / (S/BW), the origin's bytes served as a
# multiple of S, the other nodes' (summed), CPU idle, objfsd's CPU, and
# Redis commands per reader (the node cards' heartbeats included; their
# rate at rest, over 5 s before the first run, is printed and in the
# data file).  Where idle fell below 30% the CPU, not the policy, may
# have set the pace: the comparison with the simulator is then not to
# be trusted (a note says so).
#
# Targets (issue 22): wall <= 1.5 x S/BW at every K; origin <= 2 x S at
# every K; every reader's copy byte-exact.  Before fan-out the origin
# serves K x S and the wall time is about K x S/BW (5.6 x S/BW at K=5).
#
# The simulator: if $BUILD/bench/objfs-fanout-sim exists, fanout_sim() below
# runs it for N = K+1, S and BW, modelling the daemon (FANOUT_SIM_MODEL),
# and its predicted time/(S/BW) and origin/S are printed beside the
# measured ones ("simulator: not built" if not).
#
# Results: FANOUT_OUT (default /tmp/objfs-bench-fanout, or --out DIR's
# fanout/) gets fanout.txt (the table), fanout.dat (one line per K) and,
# with gnuplot (gnuplot-nox, apt-get'd unless --no-install),
# fanout.png (bench/fanout-plots: time against K, measured and
# simulated; the origin's load against K).

FANOUT_READERS=${FANOUT_READERS:-1,2,4,8,16}
FANOUT_BW=${FANOUT_BW:-64M}
FANOUT_SIZE=${FANOUT_SIZE:-256M}
FANOUT_RUNS=${FANOUT_RUNS:-3}
# the issue's targets
FANOUT_TIME_TARGET=1.5
FANOUT_ORIGIN_TARGET=2
# below this CPU idle (%) during a run, the comparison with the simulator
# is not to be trusted
FANOUT_IDLE_MIN=30
# what the simulator models: the daemon's constants (--daemon) and what
# its server does with the default serve_slots=1 (slots, busy answers
# with a retry-after, parked GETs)
FANOUT_SIM_MODEL="--daemon --slots=1 --retry-after=1 --park=1"

# fanout_sim N S BW: the simulator's prediction for N nodes (node 0 the
# origin, N-1 readers starting together), an object of S bytes and BW
# bytes per second served by each node.  Prints "TIME_RATIO ORIGIN_RATIO"
# (time to all nodes / (S/BW), the origin's bytes served / S), or returns
# 1 (no simulator, or no answer).
#
# This is the one place that knows the simulator's interface, which is
# not fixed yet.  Today it runs
#     $BUILD/bench/fanout-sim --nodes N --size S --bw BW
# and reads the last line of its output that has key=value words: the
# ratios as time_ratio= and origin_ratio=, or the raw numbers as
# time_s= (or time=, seconds) and origin_bytes= (or origin=, bytes),
# from which the ratios are worked out.  Adapt the command line and the
# keys here when the simulator settles.
FANOUT_SIM=$BUILD/bench/objfs-fanout-sim
fanout_sim() {
	local n=$1 s=$2 bw=$3 out
	[ -x "$FANOUT_SIM" ] || return 1
	# a table: "# ..." header lines, then N, time/ideal, med, orig_t,
	# origin/S, ... per N
	# shellcheck disable=SC2086 # the model is several words
	out=$(timeout -k 5 120 "$FANOUT_SIM" $FANOUT_SIM_MODEL --nodes="$n" --size="$s" --bw="$bw" 2>"$W/fanout-sim.err") ||
		return 1
	awk -v n="$n" '!/^#/ && $1 == n { print $2, $5; found = 1 } END { exit !found }' <<<"$out"
}

# fanout_sha FILE: its sha256 (openssl's uses the CPU's SHA extensions:
# 3x sha256sum's speed here)
fanout_sha() {
	if command -v openssl >/dev/null; then
		timeout -k 5 300 openssl dgst -sha256 -r "$1" 2>/dev/null | cut -d' ' -f1
	else
		timeout -k 5 300 sha256sum "$1" 2>/dev/null | cut -d' ' -f1
	fi
}

# fanout_cpu: "BUSY TOTAL" jiffies of all CPUs so far (idle and iowait
# are not busy)
fanout_cpu() {
	awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat
}

# fanout_dcpu: CPU time (user + system, clock ticks) the daemons of
# FANOUT_PIDS have used so far
fanout_dcpu() {
	local p t=0 u
	for p in "${FANOUT_PIDS[@]}"; do
		# fields 14 and 15 of /proc/PID/stat, counted after the command
		# name (which may hold spaces)
		u=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $12 + $13 }') || u=0
		t=$((t + ${u:-0}))
	done
	echo "$t"
}

# fanout_calls SOCK: commands the Redis on SOCK has run so far, its INFO
# calls left out
fanout_calls() {
	timeout -k 2 10 redis-cli -s "$1" INFO commandstats | tr -d '\r' | awk -F'[:,=]' '
		/^cmdstat_/ { if (substr($1, 9) != "info") t += $3 }
		END { print t + 0 }'
}

# fanout_served K: "ORIGIN OTHERS" served_bytes of node 0 and the sum of
# nodes 1..K ("-" for a node without the counter counts as 0, noted)
fanout_served() {
	local k=$1 i v o=0 rest=0
	for ((i = 0; i <= k; i++)); do
		v=$(status_of "$W/fan-$i" served_bytes)
		[[ $v =~ ^[0-9]+$ ]] || v=0
		if [ "$i" = 0 ]; then o=$v; else rest=$((rest + v)); fi
	done
	echo "$o $rest"
}

# fanout_minmax LIST FORMAT: "MEDIAN MIN MAX" of the space-separated
# numbers ("-" ignored), each printed with FORMAT; "- - -" if none
fanout_minmax() {
	local l
	l=$(tr ' ' '\n' <<<"$1" | awk 'NF && $1 != "-"')
	if [ -z "$l" ]; then
		echo "- - -"
		return
	fi
	awk -v f="$2" -v a="$(median <<<"$l")" -v b="$(sort -g <<<"$l" | head -n 1)" -v c="$(sort -g <<<"$l" | tail -n 1)" \
		'BEGIN { printf f " " f " " f "\n", a, b, c }'
}

# fanout_run K R RATE: one run (RATE: Redis commands per second at rest): write, wait for the listing, gate, time, verify.
# Appends to FR_WALL, FR_ORIGIN, FR_OTHERS, FR_IDLE, FR_OWN, FR_CMDS,
# FR_NET, FR_BAD
fanout_run() {
	local k=$1 r=$2 name=obj-$1-$2 src=$SHM/fanout-src m0=$W/fan-0 sum i t0 t1 wall ready
	local s0 s1 c0 c1 cpu0 cpu1 d0 d1 idle own cmds net origin others bad=0 failed=0 tmo line rc end last=0
	local used cap j full
	local -a pids=()
	local gate=$W/fanout-gate gfd

	# the object: random bytes through a source in /dev/shm (its sha256
	# taken there), written with 1 MiB writes
	dd if=/dev/urandom of="$src" bs=1M count=$((FANOUT_BYTES >> 20)) status=none
	[ $((FANOUT_BYTES & 1048575)) = 0 ] || head -c $((FANOUT_BYTES & 1048575)) /dev/urandom >>"$src"
	sum=$(fanout_sha "$src")
	# room on every node: an object a node served keeps its space for 10
	# to 20 s after its unlink (the previous run's, which every reader
	# served onward too); wait for it (at most 60 s in all)
	for ((i = 0; i < 600; i++)); do
		full=
		for ((j = 0; j <= k; j++)); do
			used=$(status_of "$W/fan-$j" used) cap=$(status_of "$W/fan-$j" capacity)
			if ! [[ $used =~ ^[0-9]+$ ]] || ! [[ $cap =~ ^[0-9]+$ ]]; then continue; fi
			[ $((cap - used)) -ge "$FANOUT_BYTES" ] || full=$j
		done
		[ -n "$full" ] || break
		sleep 0.1
	done
	[ "$i" = 0 ] || echo "    (waited $((i / 10)).$((i % 10)) s for room on the nodes${full:+; node $full is still full})"
	timeout -k 5 300 dd if="$src" of="$m0/$name" bs=1M status=none || die "fanout: writing $m0/$name failed"
	rm -f "$src"
	for ((i = 1; i <= k; i++)); do
		wait_seen "$W/fan-$i" "$name" "$FANOUT_BYTES" 30 || die "fanout: node $i does not list $name after 30 s"
	done
	drop_caches

	# the gate: a fifo that each reader opens for reading, which blocks
	# until the fifo has a writer; opening it read-write here releases
	# them all at once (and anyone later passes at once)
	rm -f "$gate" "$W"/fanout-ready.* "$W"/fanout-done.* "$W"/fanout-cat.*
	mkfifo "$gate"
	# each cat: at most 3 x the time from the origin alone, plus 2 minutes
	tmo=$(awk -v k="$k" -v s="$FANOUT_BYTES" -v b="$FANOUT_BW_BYTES" 'BEGIN { printf "%d", 3 * k * s / b + 120 }')
	for ((i = 1; i <= k; i++)); do
		(
			rc=0
			: >"$W/fanout-ready.$i"
			timeout -k 2 60 dd if="$gate" count=0 status=none 2>/dev/null || rc=gate
			[ "$rc" != 0 ] || timeout -k 5 "$tmo" cat "$W/fan-$i/$name" >/dev/null 2>"$W/fanout-cat.$i" || rc=$?
			echo "$rc $(now)" >"$W/fanout-done.$i"
		) &
		pids+=("$!")
	done
	# until every reader is waiting at the gate (at most 10 s)
	for ((i = 0; i < 100; i++)); do
		ready=$(find "$W" -maxdepth 1 -name 'fanout-ready.*' | wc -l)
		[ "$ready" -lt "$k" ] || break
		sleep 0.1
	done
	sleep 0.2
	read -r s0 < <(fanout_served "$k" | tr ' ' '_')
	c0=$(fanout_calls "$W/fan-redis.sock")
	d0=$(fanout_dcpu)
	cpu0=$(fanout_cpu)
	t0=$(now)
	exec {gfd}<>"$gate"
	wait "${pids[@]}" || true
	t1=$(now)
	cpu1=$(fanout_cpu)
	d1=$(fanout_dcpu)
	exec {gfd}>&-
	c1=$(fanout_calls "$W/fan-redis.sock")
	read -r s1 < <(fanout_served "$k" | tr ' ' '_')

	for ((i = 1; i <= k; i++)); do
		line=$(cat "$W/fanout-done.$i" 2>/dev/null || echo "none $t1")
		read -r rc end <<<"$line"
		if [ "$rc" != 0 ]; then
			failed=$((failed + 1))
			echo "    reader $i: cat failed ($rc): $(head -c 200 "$W/fanout-cat.$i" 2>/dev/null)"
		fi
		last=$(awk -v a="$last" -v b="$end" 'BEGIN { print (b > a) ? b : a }')
	done
	wall=$(awk -v a="$t0" -v b="$last" 'BEGIN { printf "%.3f", b - a }')
	[ "$failed" = 0 ] || wall=-
	idle=$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		t = y[2] - x[2]; printf "%.0f", (t > 0) ? 100 * (1 - (y[1] - x[1]) / t) : 0 }')
	own=$(awk -v a="$cpu0" -v b="$cpu1" -v d="$((d1 - d0))" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		t = y[2] - x[2]; printf "%.0f", (t > 0) ? 100 * d / t : 0 }')
	cmds=$(awk -v a="$c0" -v b="$c1" -v k="$k" 'BEGIN { printf "%.0f", (b - a) / k }')
	# less the nodes' traffic at rest over the same time
	net=$(awk -v a="$c0" -v b="$c1" -v k="$k" -v r="$3" -v t="$(calc "$t0" "$t1" 'print b - a')" \
		'BEGIN { printf "%.0f", (b - a - r * t) / k }')
	origin=$(awk -v a="$s0" -v b="$s1" -v s="$FANOUT_BYTES" 'BEGIN {
		split(a, x, "_"); split(b, y, "_"); printf "%.2f", (y[1] - x[1]) / s }')
	others=$(awk -v a="$s0" -v b="$s1" -v s="$FANOUT_BYTES" 'BEGIN {
		split(a, x, "_"); split(b, y, "_"); printf "%.2f", (y[2] - x[2]) / s }')

	# after the timing: every reader's copy, through its mount
	for ((i = 1; i <= k; i++)); do
		line=$(fanout_sha "$W/fan-$i/$name") || line=
		if [ "$line" != "$sum" ]; then
			bad=$((bad + 1))
			echo "    reader $i: the copy differs from the source (sha256 ${line:-unreadable})"
		fi
	done
	rm -f "$m0/$name" "$gate"

	echo "  K=$k run $r: wall ${wall} s ($(awk -v w="$wall" -v t="$FANOUT_T1" 'BEGIN { if (w == "-") print "-"; else printf "%.2f", w / t }') x S/BW)," \
		"origin ${origin} S, others ${others} S, idle ${idle}% (objfsd ${own}%), ${cmds} Redis cmds/reader (${net} less those at rest)," \
		"$((k - bad)) of $k copies byte-exact$([ "$failed" = 0 ] || echo ", $failed cats failed")"
	FR_WALL+=" $wall" FR_ORIGIN+=" $origin" FR_OTHERS+=" $others" FR_IDLE+=" $idle" FR_OWN+=" $own" FR_CMDS+=" $cmds" FR_NET+=" $net"
	FR_BAD=$((FR_BAD + bad + failed))
}

# fanout_k K: K readers: mount, measure FANOUT_RUNS runs, unmount; adds
# its rows to the report and the data file
fanout_k() {
	local k=$1 need_kib avail_kib cap_mib i r pid faulted c0 c1 bg sim str sor
	local wall wmin wmax ratio rmin rmax orig omin omax oth idle imin own cmds net ok_t ok_o note=
	local FR_WALL='' FR_ORIGIN='' FR_OTHERS='' FR_IDLE='' FR_OWN='' FR_CMDS='' FR_NET='' FR_BAD=0
	local -a FANOUT_PIDS=()

	# each node's store and some, the origin's a second object, 1 GiB
	need_kib=$(((k + 2) * (FANOUT_BYTES >> 10) * 2 + 1048576))
	avail_kib=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
	if [ "$need_kib" -gt "$avail_kib" ]; then
		echo "  K=$k skipped: ($((k + 1)) nodes + 1) x S x 2 + 1 GiB is $((need_kib >> 10)) MiB, MemAvailable $((avail_kib >> 10)) MiB"
		FANOUT_ROWS+="$(printf '%3s  skipped: needs %s MiB, MemAvailable %s MiB' "$k" "$((need_kib >> 10))" "$((avail_kib >> 10))")"$'\n'
		return 0
	fi
	cap_mib=$(((FANOUT_BYTES >> 20) + 64))
	start_redis "$W/fan-redis.sock" "$W/fan-redis-$k"
	pid=${OWN_PIDS[-1]}
	# the origin has room for two objects: the one it served last keeps
	# its space for a while after its unlink
	mount_objfs "unix:$W/fan-redis.sock" "$W/fan-0" "fan$k-0" \
		"capacity=$((cap_mib + (FANOUT_BYTES >> 20)))M,serve_bwlimit=$FANOUT_BW"
	for ((i = 1; i <= k; i++)); do
		mount_objfs "unix:$W/fan-redis.sock" "$W/fan-$i" "fan$k-$i" "capacity=${cap_mib}M,serve_bwlimit=$FANOUT_BW"
	done
	# the stores faulted in (at most 120 s), so that the runs do not race
	# the prefault
	for ((r = 0; r < 1200; r++)); do
		faulted=0
		for ((i = 0; i <= k; i++)); do
			! grep -q 'faulted in' "$W/fan$k-$i.log" 2>/dev/null || faulted=$((faulted + 1))
		done
		[ "$faulted" -le "$k" ] || break
		sleep 0.1
	done
	for ((i = 0; i <= k; i++)); do
		FANOUT_PIDS+=("$(pgrep -f "objfsd .* $W/fan-$i " | head -n 1)")
	done
	[ "$faulted" -gt "$k" ] || echo "  ($faulted of $((k + 1)) stores faulted in after 120 s; measuring anyway)"
	# Redis at rest: the nodes' own traffic (a heartbeat every 5 s each),
	# over 5 s
	c0=$(fanout_calls "$W/fan-redis.sock")
	sleep 5
	c1=$(fanout_calls "$W/fan-redis.sock")
	bg=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.1f", (b - a) / 5 }')
	echo "  K=$k: $((k + 1)) nodes (capacity ${cap_mib}M, serve_bwlimit=$FANOUT_BW), stores faulted in after $((r / 10)) s; Redis at rest: $bg cmds/s"

	for ((r = 1; r <= FANOUT_RUNS; r++)); do
		fanout_run "$k" "$r" "$bg"
	done
	for ((i = k; i >= 0; i--)); do unmount_node "$W/fan-$i" "fan$k-$i"; done
	kill "$pid" 2>/dev/null || true
	wait_gone 15 "$pid" >/dev/null || true
	wait "$pid" 2>/dev/null || true
	unset 'OWN_PIDS[-1]'
	rm -f "$W/fan-redis.sock"

	read -r wall wmin wmax < <(fanout_minmax "$FR_WALL" %.2f)
	read -r orig omin omax < <(fanout_minmax "$FR_ORIGIN" %.2f)
	read -r oth _ _ < <(fanout_minmax "$FR_OTHERS" %.2f)
	read -r idle imin _ < <(fanout_minmax "$FR_IDLE" %.0f)
	read -r own _ _ < <(fanout_minmax "$FR_OWN" %.0f)
	read -r cmds _ _ < <(fanout_minmax "$FR_CMDS" %.0f)
	read -r net _ _ < <(fanout_minmax "$FR_NET" %.0f)
	ratio=$(calc "$wall" "$FANOUT_T1" 'printf "%.2f", a / b')
	rmin=$(calc "$wmin" "$FANOUT_T1" 'printf "%.2f", a / b')
	rmax=$(calc "$wmax" "$FANOUT_T1" 'printf "%.2f", a / b')
	# a run that failed (a cat) misses the target whatever the others did
	ok_t=$(calc "$rmax" "$FANOUT_TIME_TARGET" 'print (a <= b) ? 1 : 0' | sed 's/^-$/0/')
	[[ " $FR_WALL " != *" - "* ]] || ok_t=0
	ok_o=$(calc "$omax" "$FANOUT_ORIGIN_TARGET" 'print (a <= b) ? 1 : 0' | sed 's/^-$/0/')
	if sim=$(fanout_sim $((k + 1)) "$FANOUT_BYTES" "$FANOUT_BW_BYTES"); then
		read -r str sor <<<"$sim"
	else
		str=- sor=-
		[ ! -x "$FANOUT_SIM" ] ||
			echo "  simulator: no answer for N=$((k + 1)) (see fanout_sim()): $(head -c 300 "$W/fanout-sim.err" 2>/dev/null)"
	fi
	[ "$imin" = - ] || [ "$imin" -ge "$FANOUT_IDLE_MIN" ] ||
		note="  (idle fell to ${imin}%, objfsd used ${own}%: CPU-bound, do not trust the comparison with the simulator)"
	FANOUT_ROWS+="$(printf '%3s %7s %-13s %6s %-13s %-6s %6s %-13s %-6s %6s %5s %7s %8s %4s %6s %6s' \
		"$k" "$wall" "[$wmin-$wmax]" "$ratio" "[$rmin-$rmax]" "$(verdict "$ok_t")" \
		"$orig" "[$omin-$omax]" "$(verdict "$ok_o")" "$oth" "$idle" "$own" "$cmds" "$net" "$str" "$sor")$note"$'\n'
	echo "$k $FANOUT_RUNS $FANOUT_BYTES $FANOUT_BW_BYTES $FANOUT_T1 $wall $wmin $wmax $ratio $orig $omin $omax" \
		"$oth $idle $own $cmds $net $bg $str $sor" >>"$FANOUT_OUT/fanout.dat"
	FANOUT_BAD=$((FANOUT_BAD + FR_BAD)) FANOUT_COPIES=$((FANOUT_COPIES + k * FANOUT_RUNS))
}

section_fanout() {
	local k t0 ks=() sim_note
	local FANOUT_ROWS='' FANOUT_BAD=0 FANOUT_COPIES=0
	echo "== fanout"
	FANOUT_BYTES=$(numfmt --from=iec "$FANOUT_SIZE" 2>/dev/null) || die "bad --fanout-size '$FANOUT_SIZE'"
	FANOUT_BW_BYTES=$(numfmt --from=iec "$FANOUT_BW" 2>/dev/null) || die "bad --fanout-bw '$FANOUT_BW'"
	[ "$FANOUT_BYTES" -ge 1048576 ] || die "--fanout-size takes at least 1M"
	[ "$FANOUT_BW_BYTES" -ge 65536 ] || die "--fanout-bw takes at least 64K"
	[[ $FANOUT_RUNS =~ ^[1-9][0-9]*$ ]] || die "--fanout-runs takes a number, at least 1"
	IFS=, read -r -a ks <<<"$FANOUT_READERS"
	[ ${#ks[@]} -gt 0 ] || die "--fanout-readers takes a list like 1,2,4"
	for k in "${ks[@]}"; do
		if ! [[ $k =~ ^[1-9][0-9]*$ ]] || [ "$k" -gt 64 ]; then
			die "--fanout-readers takes numbers from 1 to 64, not '$k'"
		fi
	done
	# S/BW: one transfer at the serving limit
	FANOUT_T1=$(awk -v s="$FANOUT_BYTES" -v b="$FANOUT_BW_BYTES" 'BEGIN { printf "%.3f", s / b }')
	mkdir -p "$FANOUT_OUT"
	rm -f "$FANOUT_OUT/fanout.dat" "$FANOUT_OUT/fanout.txt" "$FANOUT_OUT/fanout.png"
	echo "# K runs S_bytes BW_bytes_per_s S/BW_s wall_med_s wall_min_s wall_max_s wall/(S/BW) origin/S origin_min origin_max others/S idle_pct objfsd_cpu_pct redis_cmds_per_reader redis_cmds_per_reader_less_at_rest redis_cmds_per_s_at_rest sim_time/(S/BW) sim_origin/S" \
		>"$FANOUT_OUT/fanout.dat"
	if [ -x "$FANOUT_SIM" ]; then
		sim_note="simulator: $FANOUT_SIM"
	else
		sim_note="simulator: not built"
	fi
	echo "S=$FANOUT_SIZE, serve_bwlimit=$FANOUT_BW (S/BW = $FANOUT_T1 s), readers ${FANOUT_READERS}, $FANOUT_RUNS runs each; $sim_note; host load $(cut -d' ' -f1-3 /proc/loadavg)"
	t0=$(now)
	for k in "${ks[@]}"; do fanout_k "$k"; done

	{
		echo "fanout: node 0 writes S = $FANOUT_SIZE, K readers cat it at once; every node serve_bwlimit=$FANOUT_BW, S/BW = $FANOUT_T1 s"
		echo "(medians of $FANOUT_RUNS runs per K [min-max]; xS/BW: wall / (S/BW); origin, others: bytes served by node 0, by nodes"
		echo " 1..K together, / S; idle%: CPU idle during the run, objfsd%: the CPU the K+1 daemons used (% of all $(nproc) cores);"
		echo " cmds/rdr: Redis commands during the run / K, net: less the nodes' rate at rest (heartbeats); sim_xT, sim_oS:"
		echo " the simulator's time / (S/BW) and origin / S for N = K+1 ($sim_note))"
		printf '%3s %7s %-13s %6s %-13s %-6s %6s %-13s %-6s %6s %5s %7s %8s %4s %6s %6s\n' K wall_s "[min-max]" "xS/BW" "[min-max]" \
			"<=$FANOUT_TIME_TARGET" origin "[min-max]" "<=$FANOUT_ORIGIN_TARGET" others idle% objfsd% cmds/rdr net sim_xT sim_oS
		printf '%s' "$FANOUT_ROWS"
	} >"$FANOUT_OUT/fanout.txt"
	REPORT+=$'\n'"$(cat "$FANOUT_OUT/fanout.txt")"$'\n'
	[ "$FANOUT_COPIES" = 0 ] ||
		REPORT+="$(printf '%-40s %s' "every reader's copy byte-exact" "$((FANOUT_COPIES - FANOUT_BAD)) of $FANOUT_COPIES")   $(verdict "$([ "$FANOUT_BAD" = 0 ] && echo 1 || echo 0)")"$'\n'
	if have_or_install gnuplot-nox gnuplot &&
		"$REPO/bench/fanout-plots" "$FANOUT_OUT" >/dev/null 2>"$W/fanout-plots.err"; then
		REPORT+="data, table, plot: $FANOUT_OUT/fanout.{dat,txt,png}"$'\n'
	else
		REPORT+="data, table: $FANOUT_OUT/fanout.{dat,txt} (no plot: $(head -c 200 "$W/fanout-plots.err" 2>/dev/null || echo "no gnuplot"))"$'\n'
	fi
	echo "fanout took $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"
}
