#!/bin/bash
# transport=: tcp serves and fetches over TCP only and says so; the
# default (auto) mounts on a host without RDMA (or a build without it),
# says what became of RDMA in `objfs status`, and two nodes fetch over
# TCP, counted by path; transport=rdma on such a host fails the mount
# with a clear message and leaves no mount and no daemon behind.  Cards
# end in "fan1,fan2": the TCP server speaks wire version 2 (with fan2 flags).  Every
# expectation follows the `rdma:` line of the auto node, so the test
# holds for builds with and without RDMA, and on hosts with a device.
# (Bad values of transport= and rdma_eager_max=: 05-options.)
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need getfattr
start_redis

# card NAME FIELD: a field of node NAME's card in Redis
card() { rcli HGET "{objfs}:node:$1" "$2"; }

step "transport=tcp: TCP only, and the status says why RDMA is off"
mount_objfs t "$REDIS_URL" "capacity=64M,transport=tcp"
assert_eq tcp "$(status_of t transport)" "transport of t"
assert_eq "off (transport=tcp)" "$(status_of t rdma)" "rdma of t"
assert_eq - "$(status_of t rdma_addr)" "rdma_addr of t"
assert_eq tcp,fan1,fan2 "$(card t caps)" "caps on t's card"
assert_eq "" "$(card t rdma)" "rdma address on t's card"
assert_match '^127\.0\.0\.1:[0-9]+$' "$(card t listen)" "listen address on t's card"
assert_match 'serving objects over tcp on 127\.0\.0\.1:[0-9]+; peers reach this node at 127\.0\.0\.1:[0-9]+' \
	"$(cat "$(log_of t)")" "t's log"
umount_objfs t || fail "unmount t"

step "the default (auto) mounts, and says what became of RDMA"
mount_objfs a "$REDIS_URL" "capacity=64M"
mount_objfs b "$REDIS_URL" "capacity=64M,rdma_eager_max=4K"
A=$(mnt_of a)
B=$(mnt_of b)
assert_eq auto "$(status_of a transport)" "transport of a"
rdma=$(status_of b rdma)
step "rdma here: $rdma"
assert_match '^(on|off \(built without rdma\)|unavailable: .+)$' "$rdma" "rdma of b"
if [ "$rdma" = on ]; then
	assert_match '^[^ ]+:[0-9]+$' "$(status_of b rdma_addr)" "rdma_addr of b"
	assert_eq tcp,rdma,fan1,fan2 "$(card b caps)" "caps on b's card"
	assert_match '^127\.0\.0\.1:[0-9]+$' "$(card b rdma)" "rdma address on b's card"
else
	assert_eq - "$(status_of b rdma_addr)" "rdma_addr of b"
	assert_eq tcp,fan1,fan2 "$(card b caps)" "caps on b's card"
	assert_eq "" "$(card b rdma)" "rdma address on b's card"
fi

step "two auto nodes fetch from each other, counted by path"
for k in fetch_tcp bytes_tcp fetch_eager bytes_eager fetch_rdv bytes_rdv rdma_conns rdma_fallbacks rdma_regs; do
	assert_match '^[0-9]+$' "$(status_of b "$k")" "status line $k of b"
done
mkdata "$T/small" 3000
mkdata "$T/big" $((3 << 20))
cp "$T/small" "$A/small"
cp "$T/big" "$A/big"
eventually 10 ls_has "$B" big
assert_ok cmp "$T/small" "$B/small"
assert_ok cmp "$T/big" "$B/big"
total=$((3000 + (3 << 20)))
# bytes_all_paths_are N: b's bytes over every path add up to N (for
# eventually: a range is counted once its reader may have the bytes)
bytes_all_paths_are() {
	local n=$(($(status_of b bytes_eager) + $(status_of b bytes_rdv) + $(status_of b bytes_tcp)))
	[ "$n" = "$1" ] || { echo "bytes fetched by b, all paths: $n, not $1"; return 1; }
}
if [ "$rdma" = on ]; then
	eventually 10 bytes_all_paths_are "$total"
else
	eventually 10 status_is b bytes_tcp "$total"
	[ "$(status_of b fetch_tcp)" -ge 2 ] || fail "fetch_tcp of b: $(status_of b fetch_tcp), expected 2 or more"
	for k in fetch_eager bytes_eager fetch_rdv bytes_rdv rdma_conns rdma_fallbacks rdma_regs; do
		assert_eq 0 "$(status_of b "$k")" "$k of b without RDMA"
	done
fi
assert_eq 0 "$(status_of a fetch_tcp)" "fetch_tcp of a, which fetched nothing"

step "transport=rdma: a clear error without RDMA, and nothing left behind"
rc=0
try_mount xr "$REDIS_URL" "capacity=64M,transport=rdma" || rc=$?
if [ "$rdma" = on ]; then
	assert_eq 0 "$rc" "status of a transport=rdma mount where RDMA works ($MOUNT_OUT)"
	assert_eq rdma "$(status_of xr transport)" "transport of xr"
	assert_eq on "$(status_of xr rdma)" "rdma of xr"
	umount_objfs xr || fail "unmount xr"
else
	assert_eq 1 "$rc" "status of a transport=rdma mount without RDMA (output: $MOUNT_OUT)"
	assert_match 'built without RDMA \(meson -Drdma=enabled|transport=rdma: .*RDMA device' \
		"$MOUNT_OUT" "message of a transport=rdma mount"
	if is_mounted "$(mnt_of xr)"; then fail "transport=rdma got mounted without RDMA"; fi
	left=$(_procs_matching "$(mnt_of xr)" "$(rundir_of xr)" "$(store_of xr)")
	[ -z "$left" ] || fail "processes left after a failed transport=rdma mount: $(describe_pids "$left")"
	assert_eq "" "$(rcli HGET {objfs}:node:xr instance)" "a card of the failed node xr"
fi

step "a and b still fetch after that"
mkdata "$T/after" 5000
cp "$T/after" "$B/after"
eventually 10 ls_has "$A" after
assert_ok cmp "$T/after" "$A/after"
