#!/bin/bash
# Where the objects live: each object is a file of its own, exactly its
# size (one of pack_max=32K or less shares a chunk file with others), in a tmpfs the daemon mounts on STORE/data (huge=within_size,
# sized for the capacity), which outlives the daemon and is adopted by
# the next mount; a store= that is itself a tmpfs or a hugetlbfs mount is
# used as it is.  Each kind: byte-exact files through the mount, the
# objects' files read-only and exactly their size, `objfs status` naming
# the kind, and a remount adopting what is there.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis_tcp
mkdata "$T/big" $(((5 << 20) + 3))
mkdata "$T/small" 1000

# check_store NAME DATA_DIR KIND_REGEX: the files and the status of NAME
check_store() {
	local name=$1 data=$2 kind=$3 m id f
	m=$(mnt_of "$name")
	cp "$T/big" "$m/big"
	cp "$T/small" "$m/small"
	: >"$m/empty"
	assert_same "$T/big" "$m/big"
	assert_same "$T/small" "$m/small"
	assert_match "$kind" "$(status_of "$name" store_fs)" "store_fs of $name"
	id=$(printf '%016x' "$(stat -c %i "$m/small")")
	[ ! -e "$data/$id" ] || fail "the small object has a file of its own: $data/$id"
	compgen -G "$data/.pack-*" >/dev/null || fail "no chunk file in $data"
	assert_eq 1 "$(status_of "$name" packed)" "objects packed in $name"
	for f in big empty; do
		id=$(printf '%016x' "$(stat -c %i "$m/$f")")
		[ -f "$data/$id" ] || fail "no file $data/$id for $f"
		assert_eq "$(stat -c %s "$m/$f")" "$(stat -c %s "$data/$id")" "size of $f's file (or its store may be padded)"
		assert_eq 400 "$(stat -c %a "$data/$id")" "mode of $f's file"
	done
}

step "default: a tmpfs of the store's own on STORE/data"
mount_objfs a "$REDIS_URL" "capacity=64M"
DATA=$(store_of a)/data
check_store a "$DATA" 'tmpfs \(mounted by objfs'
line=$(awk -v d="$DATA" '$5 == d' /proc/self/mountinfo)
[ -n "$line" ] || fail "nothing mounted on $DATA"
assert_match ' - tmpfs objfs-store ' "$line" "the store's mount"
assert_match 'huge=within_size' "$line" "huge pages"
size_kib=$(findmnt -n -o SIZE -b "$DATA" 2>/dev/null || echo 0)
[ "$size_kib" -ge $((64 << 20)) ] && [ "$size_kib" -le $((256 << 20)) ] ||
	fail "tmpfs size $size_kib is not about the capacity (64M)"

step "the tmpfs outlives the daemon, and the next mount adopts its objects"
umount_objfs a
is_mounted "$DATA" || fail "the store's tmpfs went with the daemon"
mount_objfs a "$REDIS_URL" "capacity=96M"
assert_same "$T/big" "$(mnt_of a)/big"
assert_eq 3 "$(status_of a objects)" "objects adopted"
size_kib=$(findmnt -n -o SIZE -b "$DATA")
[ "$size_kib" -ge $((96 << 20)) ] || fail "the tmpfs was not resized to the new capacity ($size_kib)"
umount_objfs a

step "store= is a tmpfs the user mounted: used as it is"
U=$S/user-tmpfs
mkdir -p "$U"
mount -t tmpfs -o size=128M user-tmpfs "$U" || fail "cannot mount a tmpfs on $U"
on_exit "umount -l '$U'"
mount_objfs b "$REDIS_URL" "capacity=64M,prefix=pb,store=$U"
check_store b "$U/data" "the user's"
[ -z "$(awk -v d="$U/data" '$5 == d' /proc/self/mountinfo)" ] || fail "a tmpfs was mounted inside the user's"
umount_objfs b
mount_objfs b "$REDIS_URL" "capacity=64M,prefix=pb,store=$U"
assert_same "$T/big" "$(mnt_of b)/big"
umount_objfs b

step "STORE/data is a hugetlbfs: files are whole huge pages, served through the daemon"
old_nr=$(cat /proc/sys/vm/nr_hugepages)
echo $((old_nr + 48)) >/proc/sys/vm/nr_hugepages 2>/dev/null
on_exit "echo $old_nr >/proc/sys/vm/nr_hugepages"
H=$S/hstore
mkdir -p "$H/data"
if [ "$(cat /proc/sys/vm/nr_hugepages)" -ge $((old_nr + 48)) ] &&
	mount -t hugetlbfs -o pagesize=2M user-hugetlbfs "$H/data" 2>/dev/null; then
	on_exit "umount -l '$H/data'"
	mount_objfs c "$REDIS_URL" "capacity=64M,prefix=pc,store=$H"
	m=$(mnt_of c)
	assert_match hugetlbfs "$(status_of c store_fs)" "store_fs of c"
	[ "$(awk -v d="$H/data" '$5 == d' /proc/self/mountinfo | grep -c tmpfs)" = 0 ] ||
		fail "a tmpfs was mounted over the user's hugetlbfs"
	cp "$T/big" "$m/big"
	cp "$T/small" "$m/small"
	assert_same "$T/big" "$m/big"
	assert_same "$T/small" "$m/small"
	id=$(printf '%016x' "$(stat -c %i "$m/small")")
	assert_eq $((2 << 20)) "$(stat -c %s "$H/data/$id")" "a small object's file is one huge page"
	python3 - "$m/big" "$T/big" <<'PY' || fail "mmap of an object on hugetlbfs"
import mmap, sys
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "rb") as g:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    assert m[:] == g.read()
PY
	umount_objfs c
	mount_objfs c "$REDIS_URL" "capacity=64M,prefix=pc,store=$H"
	assert_same "$T/big" "$(mnt_of c)/big"
	assert_same "$T/small" "$(mnt_of c)/small"
	assert_eq 0 "$(status_of c bad_records)" "bad records on hugetlbfs"
	umount_objfs c
	step "store= itself a hugetlbfs: refused, saying what to do"
	try_mount d "$REDIS_URL" "capacity=64M,prefix=pd,store=$H/data" &&
		fail "a store directly on a hugetlbfs was accepted"
	assert_match "mount the hugetlbfs on .*/data instead" "$MOUNT_OUT" "the error"
else
	echo "    (no huge pages to be had here: hugetlbfs part skipped)"
fi
