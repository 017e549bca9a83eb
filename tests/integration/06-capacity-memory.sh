#!/bin/bash
# The store never takes more memory than the daemon can have (issue 19):
#   - a capacity above this host's MemTotal is refused at once (exit 1)
#     with a message that names both numbers; nothing is mounted and no
#     process is left (noprefault: an objfsd that accepted it would
#     otherwise try to fault in more than the host has);
#   - in a memory cgroup of 300 MiB (cgroup v2 memory.max, else the v1
#     memory controller's memory.limit_in_bytes; skipped if neither can be
#     made here), capacity=2G is refused naming the cgroup's limit; and
#     with 150 MiB of the cgroup taken by a file on a tmpfs,
#     capacity=256M mounts but prefaults only what the cgroup has room
#     for: the log says how much and why it stopped, nothing is
#     OOM-killed, and the node serves.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need_built "$OBJFSD"
MiB=$((1 << 20))
SIZE_RE='[0-9]+(\.[0-9])?[KMGTP]?'

# refused NAME OPTS RE: mounting NAME with OPTS fails at once, exit 1,
# with a message matching RE; no mount, no process left
refused() {
	local rc=0 t0 left
	t0=$(date +%s)
	try_mount "$1" "$REDIS_URL" "$2" || rc=$?
	assert_eq 1 "$rc" "exit status with $2 (output: $MOUNT_OUT)"
	assert_match "$3" "$MOUNT_OUT" "error message with $2"
	assert_le $(($(date +%s) - t0)) 10 "seconds to refuse $2"
	if is_mounted "$(mnt_of "$1")"; then fail "mounted with $2"; fi
	left=$(_procs_matching "$(mnt_of "$1")" "$(store_of "$1")")
	[ -z "$left" ] || fail "processes left after $2 was refused: $(describe_pids "$left")"
}

start_redis

step "a capacity above MemTotal is refused, naming both numbers"
mem_kb=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)
refused big "capacity=$((2 * mem_kb))K,noprefault" \
	"capacity $SIZE_RE is more than this host's memory \($SIZE_RE, MemTotal\)"

# ---- a memory cgroup ----

# mount_field FSTYPE [OPT]: the mount point of the first mount of FSTYPE
# (whose super options include OPT)
mount_field() {
	awk -v t="$1" -v o="${2:-}" '{
		for (i = 7; i <= NF && $i != "-"; i++);
		if ($(i + 1) == t && (o == "" || ("," $(i + 3) ",") ~ ("," o ","))) { print $5; exit }
	}' /proc/self/mountinfo
}

# make_memcg NAME LIMIT: a memory cgroup NAME below this shell's own,
# limited to LIMIT bytes, and $T/in-NAME, a command prefix that runs its
# command in it; sets CG (its directory), CG_MAX (its limit file) and
# CG_OOM (the file that counts OOM kills in it), or skips
CG=
make_memcg() {
	local m rel name=objfs-test-$$-$1
	m=$(mount_field cgroup2)
	rel=$(awk -F: '$1 == "0" { print $3; exit }' /proc/self/cgroup)
	if [ -n "$m" ] && grep -qw memory "$m$rel/cgroup.subtree_control" 2>/dev/null &&
		mkdir "$m$rel/$name" 2>/dev/null; then
		CG=$m$rel/$name CG_MAX=memory.max CG_OOM=memory.events
	else
		m=$(mount_field cgroup memory)
		rel=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; exit }' /proc/self/cgroup)
		[ -n "$m" ] && mkdir "$m$rel/$name" 2>/dev/null ||
			skip "cannot make a memory cgroup here (cgroup v2 without the memory controller delegated, and no writable v1 memory hierarchy)"
		CG=$m$rel/$name CG_MAX=memory.limit_in_bytes CG_OOM=memory.oom_control
	fi
	on_exit rm_memcg "$CG"
	echo "$2" >"$CG/$CG_MAX" || skip "cannot limit cgroup $CG"
	step "memory cgroup $CG, $CG_MAX $(cat "$CG/$CG_MAX")"
	# the daemon goes into it before it execs (try_mount's prefix)
	printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" || exit 2\nexec "$@"\n' "$CG" >"$T/in-$1"
	chmod +x "$T/in-$1"
}

# rm_memcg DIR: once its processes (this test's) are gone, remove cgroup
# DIR; they get 30 s after the unmount, then SIGKILL
rm_memcg() {
	local i left
	for ((i = 0; i < 300; i++)); do
		[ -s "$1/cgroup.procs" ] || break
		sleep 0.1
	done
	left=$(cat "$1/cgroup.procs" 2>/dev/null)
	if [ -n "$left" ]; then
		echo "killing what is left in cgroup $1 30 s after the unmount:" >&2
		describe_pids "$left" >&2
		# shellcheck disable=SC2086
		kill -KILL $left 2>/dev/null
		# shellcheck disable=SC2086
		wait_gone 10 $left
	fi
	rmdir "$1" 2>/dev/null || echo "cannot remove cgroup $1: $(tr '\n' ' ' <"$1/cgroup.procs" 2>/dev/null)" >&2
}

oom_kills() { awk '$1 == "oom_kill" { print $2 }' "$CG/$CG_OOM"; }

step "capacity=2G in a 300 MiB cgroup is refused, naming the cgroup's limit"
make_memcg small $((300 * MiB))
MOUNT_PREFIX=$T/in-small refused small "capacity=2G" \
	"capacity 2G is more than .*300M.*$CG_MAX"
assert_eq 0 "$(oom_kills)" "OOM kills in the cgroup"

step "capacity=256M in a 300 MiB cgroup, 150 MiB of it taken, prefaults only what the cgroup has room for"
make_memcg c $((300 * MiB))
# pages of a tmpfs stay charged to the cgroup of the process that made them
"$T/in-c" dd if=/dev/zero of="$S/ballast" bs=1M count=150 status=none
MOUNT_PREFIX=$T/in-c mount_objfs c "$REDIS_URL" "capacity=256M"
M=$(mnt_of c)
# faulted: for eventually
faulted() { grep -E 'store faulted in' "$(log_of c)" || { echo "no prefault line in the log yet"; return 1; }; }
eventually 120 faulted
line=$(grep -E 'store faulted in' "$(log_of c)")
step "log: $line"
assert_match "stopped.*cgroup.*300M" "$line" "the prefault's log line"
pool=$(status_of c pool)
assert_le "$pool" $((256 * MiB - 1)) "pool: prefault stopped short of the capacity"
assert_eq 0 "$(oom_kills)" "OOM kills in the cgroup"
mkdata "$T/f" $((32 * MiB))
cp "$T/f" "$M/f"
assert_same "$T/f" "$M/f"
assert_eq 0 "$(oom_kills)" "OOM kills in the cgroup"
umount_objfs c || fail "unmounting c failed"
