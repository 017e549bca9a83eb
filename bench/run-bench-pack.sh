# shellcheck shell=bash
# shellcheck disable=SC2154 # W, SHM, BENCH, REPORT... are run-bench's
#
# bench/run-bench-pack.sh: the `pack` section of bench/run-bench (issue
# 24), sourced by it: small objects packed into chunk files against the
# same objects in a file each, in the same run, on the same binary.
#
# One private Redis and two nodes: P (the default, pack_max=32K) and F
# (pack_max=0: a file each, as before issue 24, passed through by the
# kernel where it can).  Per size in PACK_SIZES (default 1K and 16K):
#
#   create   PACK_N (2,000) objects with objfs-bench close, 1 writer,
#            into P and into F, alternating, PACK_ROUNDS (3) times each:
#            creates/s, median of the rounds
#   store    what the store's tmpfs holds per object (statfs), less the
#            bytes
#   o+r+c    open+read+close of each object (objfs-bench open-read),
#            P and F alternating, PACK_ROUNDS times: cold (page cache
#            dropped first) and warm (right after), p50 and p99, medians
#            of the rounds
#
# Targets (issue 24): o+r+c of a 1 KiB packed object <= 1.1 x one in its
# own file (warm and cold, p50); creates/s of 1 KiB >= 1 x.

PACK_N=${PACK_N:-2000}
PACK_ROUNDS=${PACK_ROUNDS:-3}
PACK_SIZES=${PACK_SIZES:-"1K 16K"}

# pack_store_kib NAME: KiB the store's tmpfs of node NAME holds
pack_store_kib() { df -k --output=used "$SHM/$1.store/data" | tail -n 1 | tr -d ' '; }

section_pack() {
	local spec=unix:$W/pack.sock size bytes r n node dir line
	local -A create cold_p50 cold_p99 warm_p50 warm_p99 kib0
	echo "== pack"
	start_redis "$W/pack.sock" "$W/pack-redis"
	mount_objfs "$spec" "$W/pack-P" P "capacity=1G,noprefault"
	mount_objfs "$spec" "$W/pack-F" F "capacity=1G,noprefault,pack_max=0"
	REPORT+="pack: ${PACK_N} objects a size, P packed (pack_max=$(status_of "$W/pack-P" pack_max)) against F (pack_max=0, passthrough $(status_of "$W/pack-F" passthrough)), ${PACK_ROUNDS} rounds alternating"$'\n'
	REPORT+="$(printf '%6s %4s %10s %12s %20s %20s' size node creates/s 'store B/obj' 'cold p50/p99 us' 'warm p50/p99 us')"$'\n'
	for size in $PACK_SIZES; do
		bytes=$(numfmt --from=iec "$size")
		for node in P F; do
			create[$node]="" cold_p50[$node]="" cold_p99[$node]="" warm_p50[$node]="" warm_p99[$node]=""
			kib0[$node]=$(pack_store_kib "$node")
		done
		for ((r = 0; r < PACK_ROUNDS; r++)); do
			for node in P F; do
				dir=$W/pack-$node/$node-s$size.$r
				mkdir -p "$dir"
				line=$("$BENCH" close "$dir" "$PACK_N" "$size")
				create[$node]+="$(value per_s "$line") "
				# open-read names f00000...: the close files are c00000...
				for ((n = 0; n < PACK_N; n++)); do
					mv "$dir/$(printf 'c%05d' "$n")" "$dir/$(printf 'f%05d' "$n")"
				done
			done
			for node in P F; do
				dir=$W/pack-$node/$node-s$size.$r
				drop_caches
				line=$("$BENCH" open-read "$dir" "$PACK_N")
				cold_p50[$node]+="$(value p50_us "$line") "
				cold_p99[$node]+="$(value p99_us "$line") "
				line=$("$BENCH" open-read "$dir" "$PACK_N")
				warm_p50[$node]+="$(value p50_us "$line") "
				warm_p99[$node]+="$(value p99_us "$line") "
			done
		done
		for node in P F; do
			n=$(sx "($(pack_store_kib "$node") - ${kib0[$node]}) * 1024 / ($PACK_N * $PACK_ROUNDS) - $bytes")
			create[$node]=$(tr ' ' '\n' <<<"${create[$node]}" | grep . | median)
			cold_p50[$node]=$(tr ' ' '\n' <<<"${cold_p50[$node]}" | grep . | median)
			cold_p99[$node]=$(tr ' ' '\n' <<<"${cold_p99[$node]}" | grep . | median)
			warm_p50[$node]=$(tr ' ' '\n' <<<"${warm_p50[$node]}" | grep . | median)
			warm_p99[$node]=$(tr ' ' '\n' <<<"${warm_p99[$node]}" | grep . | median)
			REPORT+="$(printf '%6s %4s %10.0f %12.0f %20s %20s' "$size" "$node" "${create[$node]}" "$n" "${cold_p50[$node]} / ${cold_p99[$node]}" "${warm_p50[$node]} / ${warm_p99[$node]}")"$'\n'
		done
		if [ "$size" = 1K ]; then
			REPORT+="$(printf '%-40s %s' "1K o+r+c p50 P/F, cold" "$(sx "${cold_p50[P]} / ${cold_p50[F]}") x (<= 1.1)")   $(verdict "$(awk -v a="${cold_p50[P]}" -v b="${cold_p50[F]}" 'BEGIN { print (a <= 1.1 * b) }')")"$'\n'
			REPORT+="$(printf '%-40s %s' "1K o+r+c p50 P/F, warm" "$(sx "${warm_p50[P]} / ${warm_p50[F]}") x (<= 1.1)")   $(verdict "$(awk -v a="${warm_p50[P]}" -v b="${warm_p50[F]}" 'BEGIN { print (a <= 1.1 * b) }')")"$'\n'
			REPORT+="$(printf '%-40s %s' "1K creates/s P/F" "$(sx "${create[P]} / ${create[F]}") x (>= 1)")   $(verdict "$(awk -v a="${create[P]}" -v b="${create[F]}" 'BEGIN { print (a >= b) }')")"$'\n'
		fi
	done
	REPORT+="P: packed $(status_of "$W/pack-P" packed), chunks $(status_of "$W/pack-P" chunks), chunk_bytes $(status_of "$W/pack-P" chunk_bytes)"$'\n'
	unmount_node "$W/pack-P" P
	unmount_node "$W/pack-F" F
}
