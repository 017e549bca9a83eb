#!/bin/bash
# Crash safety with objects open and mapped (issue 10).  Sealed objects
# are held by a reader (an open descriptor, its head read) and by python
# mmaps, three with every page touched, and one of an object that is in
# no page cache (dropped) with only its head touched;
# then objfsd is killed with SIGKILL and mounted again at once (no
# umount, no wait: it adopts the store, which outlives it).  Checked:
#   - every adopted object is byte-exact, with the same checksum, and
#     (with passthrough on) opened in passthrough mode again;
#   - the mappings in the still running python processes keep their
#     bytes, also after the new daemon has written and deleted objects
#     of the same size (a store that reused the files of the old
#     daemon's objects would change them);
#   - with passthrough on, also the mapping whose pages were never
#     touched before the crash: its pages come from the store's file,
#     not from the dead daemon (without passthrough it may die of
#     SIGBUS, but never see wrong bytes);
#   - the old reader never reads wrong bytes: it reads them all (with
#     passthrough on it must), or gets an error (the reply path needs
#     the dead daemon).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

# the passthrough lines of the status report (issue 10): their keys, here only
PT_MODE=passthrough # "on", "off (why)", "unavailable (why)"
PT_OPENS=passthrough_opens # opens that the kernel serves from the store file

need python3 getfattr
start_redis
mount_objfs a "$REDIS_URL" "capacity=1G"
M=$(mnt_of a)
pt=$(passthrough_mode a "$PT_MODE")
step "passthrough: $pt ($(status_of a "$PT_MODE"))"

names="big mid small cold"
mkdata "$T/big" $((64 << 20))
mkdata "$T/cold" $((16 << 20))
mkdata "$T/mid" $(((1 << 20) + 1))
# small, but above pack_max (32K): passed through like the others
mkdata "$T/small" 36865
for f in $names; do
	cp "$T/$f" "$M/$f"
	xattr "$M/$f" user.objfs.checksum >"$T/$f.sum"
done

step "hold the objects: a reader of big, whole mappings of big, mid and small, cold barely touched"
if [ "$pt" = on ]; then
	for f in $names; do eventually 10 opens_in_passthrough a "$M/$f" "$PT_OPENS"; done
	opens=$(status_of a "$PT_OPENS")
fi
start_reader r-big "$M/big"
for f in big mid small; do start_mapper "m-$f" "$M/$f" all; done
sync
echo 3 >/proc/sys/vm/drop_caches
start_mapper u-cold "$M/cold"
if [ "$pt" = on ]; then
	assert_le $((opens + 5)) "$(status_of a "$PT_OPENS")" "$PT_OPENS after the five holders' opens"
fi

step "kill -9 objfsd, mount again at once"
kill_node a KILL
MOUNT_PIDS[a]=
mount_objfs a "$REDIS_URL" "capacity=1G"
assert_eq "$pt" "$(passthrough_mode a "$PT_MODE")" "passthrough after the restart"

step "the adopted objects are byte-exact, with the same checksums"
[ "$pt" != on ] || opens=$(status_of a "$PT_OPENS")
for f in $names; do
	assert_same "$T/$f" "$M/$f"
	assert_eq "$(cat "$T/$f.sum")" "$(xattr "$M/$f" user.objfs.checksum)" "checksum of $f after the restart"
done
if [ "$pt" = on ]; then
	assert_le $((opens + 4)) "$(status_of a "$PT_OPENS")" "$PT_OPENS after reading the adopted objects"
fi

step "the new daemon writes and deletes objects of the same sizes"
for f in $names; do churn_store "$M" "$(stat -c %s "$T/$f")"; done

step "the old mappings kept their bytes"
for f in big mid small; do
	assert_eq "$(sha256_of "$T/$f")" "$(release_reader "m-$f")" "sha256 of the mapping of $f made before the crash"
done
# released_right ID FILE WHAT: holder ID got FILE's bytes; without
# passthrough it may have got an error instead, but never other bytes
released_right() {
	local got
	got=$(release_reader "$1")
	step "$3: $got"
	[ "$pt" != on ] && [[ $got == ERR* ]] && return 0
	assert_eq "$(sha256_of "$2")" "$got" "sha256 of $3"
}
released_right u-cold "$T/cold" "the mapping of cold, its head touched before the crash"

step "the old reader reads right bytes or gets an error"
released_right r-big "$T/big" "what the reader opened before the crash read"
for f in $names; do assert_same "$T/$f" "$M/$f"; done

[ "$pt" != absent ] ||
	skip "objfsd has no passthrough (no '$PT_MODE:' line in its status): the checks of every mode passed, the passthrough ones were not run"
