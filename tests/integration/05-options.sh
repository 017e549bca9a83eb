#!/bin/bash
# Bad command lines fail at once (exit 1) naming the culprit, mount
# nothing and leave no process; mount(8)'s generic options are accepted;
# ro makes a read-only mount.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need_built "$OBJFSD" "$MOUNT_HELPER"

# bad BINARY WHAT-MUST-BE-NAMED ARGS...
bad() {
	local bin=$1 named=$2 rc=0 out t0 t1
	shift 2
	step "$(basename "$bin") $* must be rejected naming '$named'"
	t0=$(date +%s)
	capture 20 "$bin" "$@" || rc=$?
	out=$CAPTURED
	t1=$(date +%s)
	assert_eq 1 "$rc" "exit status of $(basename "$bin") $* (output: $out)"
	[ -n "$named" ] && assert_match "$named" "$out" "error message"
	assert_le "$((t1 - t0))" 5 "seconds to reject $*"
	if is_mounted "$M"; then fail "$M got mounted by $*"; fi
	left=$(our_procs)
	[ -z "$left" ] || fail "processes left after rejected $*: $(describe_pids "$left")"
}

M=$(mnt_of n1)
mkdir -p "$M"
O=$(default_opts n1)

for bin in "$OBJFSD" "$MOUNT_HELPER"; do
	bad "$bin" bogus_opt local "$M" -o "$O,bogus_opt"
	bad "$bin" 'frobnicate' local "$M" -o "frobnicate=3,$O"
	bad "$bin" capacity local "$M" -o "$O,capacity=12Q"
	bad "$bin" capacity local "$M" -o "$O,capacity=abc"
	bad "$bin" capacity local "$M" -o "$O,capacity=0"
	bad "$bin" capacity local "$M" -o "$O,capacity="
	bad "$bin" 'transport=infiniband.*auto, tcp or rdma' local "$M" -o "$O,transport=infiniband"
	bad "$bin" 'rdma_eager_max=0' local "$M" -o "$O,rdma_eager_max=0"
	bad "$bin" 'rdma_eager_max=2M.*1024K' local "$M" -o "$O,rdma_eager_max=2M"
	bad "$bin" 'rdma_poll=20000.*10000' local "$M" -o "$O,rdma_poll=20000"
done
bad "$OBJFSD" node local "$M" -o "$(with_opts "$O" node=bad/name)"
bad "$OBJFSD" node local "$M" -o "$(with_opts "$O" node=-x)"
bad "$OBJFSD" listen local "$M" -o "$(with_opts "$O" listen=127.0.0.1:notaport)"
bad "$OBJFSD" 'ftp://' "ftp://127.0.0.1:6379" "$M" -o "$O"
bad "$OBJFSD" '' local
bad "$OBJFSD" '' 

# issue 19: every -o counts, as with mount(8); an option given twice
# must have the same value both times
for bin in "$OBJFSD" "$MOUNT_HELPER"; do
	bad "$bin" "capacity.*'64M'.*'128M'" local "$M" -o "$O,capacity=64M" -o capacity=128M
	bad "$bin" "capacity.*'64M'.*'128M'" local "$M" -o "capacity=64M,$O,capacity=128M"
	bad "$bin" "store.*'$S/n1'.*'$S/other'" local "$M" -o "$O" -o "store=$S/other"
	step "$(basename "$bin"): the same value twice is fine"
	assert_ok "$bin" local "$M" -o "$O,capacity=64M,allow_overwrite" \
		-o "capacity=64M,allow_overwrite,node=n1" "$([ "$bin" = "$OBJFSD" ] && echo --check || echo -f)"
done

# issue 19: a bad SPEC is refused at once, naming the part that is wrong
# (and never the password)
for bin in "$OBJFSD" "$MOUNT_HELPER"; do
	bad "$bin" "port '99999'.*1-65535" redis://127.0.0.1:99999 "$M" -o "$O"
	bad "$bin" "port '99999'.*1-65535" redis://127.0.0.1:99999 "$M" -f -o "$O"
done
bad "$OBJFSD" "database 'abc'" redis://127.0.0.1:6379/abc "$M" -o "$O"
bad "$OBJFSD" "master name" redis-sentinel://127.0.0.1:26379 "$M" -o "$O"
bad "$OBJFSD" "master name" redis-sentinel://127.0.0.1:26379/ "$M" -o "$O"
bad "$OBJFSD" "host 'bad host'" "redis-cluster://a:1,bad host:2" "$M" -o "$O"
bad "$OBJFSD" "port 'x'" "redis://:hunter2@127.0.0.1:x" "$M" -o "$O"
assert_no_match hunter2 "$CAPTURED" "message about a SPEC with a password"

# issue 19: store= creates its last component only, so that a typo in
# the path of an existing store does not start an empty one elsewhere
bad "$OBJFSD" "$T/no-such-parent.*does not exist" local "$M" \
	-o "$(with_opts "$O" "store=$T/no-such-parent/store")"
assert_absent "$T/no-such-parent"

step "without store=, the default store /dev/shm/objfs-PREFIX-NODE is made"
dflt=/dev/shm/objfs-t$$-n3
on_exit "umount_under $dflt; rm -rf --one-file-system $dflt"
mkdir -p "$(mnt_of n3)"
assert_ok "$OBJFSD" local "$(mnt_of n3)" \
	-o "$(default_opts n3 | sed 's/,store=[^,]*//'),prefix=t$$,capacity=64M"
wait_mounted "$(mnt_of n3)" 10 || fail "$(mnt_of n3) is not mounted"
_remember_mount n3
echo hello >"$(mnt_of n3)/f"
assert_eq hello "$(cat "$(mnt_of n3)/f")" "content through a mount on the default store"
assert_exists "$dflt/objects"
umount_objfs n3 || fail "unmount failed"

step "a capacity below the store minimum (100K) fails"
rc=0
capture 30 "$OBJFSD" local "$M" -o "$O,capacity=100K" || rc=$?
out=$CAPTURED
assert_eq 1 "$rc" "exit status with capacity=100K (output: $out)"
if is_mounted "$M"; then fail "mounted with capacity=100K"; fi

step "a missing mount point fails"
rc=0
capture 30 "$OBJFSD" local "$T/no-such-dir" -o "$O" || rc=$?
out=$CAPTURED
assert_eq 1 "$rc" "exit status with a missing mount point (output: $out)"
assert_match "no-such-dir" "$out" "message names the mount point"
left=$(our_procs)
[ -z "$left" ] || fail "processes left after a failed mount: $(describe_pids "$left")"

step "mount(8) generic options are accepted"
mount_objfs n1 local "capacity=64M,rw,defaults,nosuid,nodev,noexec,noatime,_netdev,user,auto,noauto,nofail"
echo hello >"$M/f"
assert_eq hello "$(cat "$M/f")" "content through a mount with generic options"
umount_objfs n1 || fail "unmount failed"

step "ro gives a read-only mount"
mount_objfs n2 local "capacity=64M,ro"
assert_fails_with 'Read-only file system' touch "$(mnt_of n2)/g"
assert_fails_with 'Read-only file system' mkdir "$(mnt_of n2)/d"
