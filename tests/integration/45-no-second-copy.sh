#!/bin/bash
# No second copy in RAM (issue 10).  Once a 1 GiB object is written and
# sealed, reading it through the mount adds less than 2% of its size to
# Cached + Shmem in /proc/meminfo, beyond the store's own copy: the
# kernel serves the reads from the store's pages (passthrough), where a
# FUSE page cache would hold a second copy (+100%).  Checked for `cat`
# and for a python mmap that touches every page (and hashes it: the
# bytes are right).  Measured from just before each read (page cache
# dropped) to just after it.  Only memory is asserted, never time.
# Skipped unless the status says passthrough is on.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

# the passthrough line of the status report (issue 10): its key, here only
PT_MODE=passthrough # "on", "off (why)", "unavailable (why)"

need python3 getfattr
mount_objfs a local "capacity=1280M"
M=$(mnt_of a)
pt=$(passthrough_mode a "$PT_MODE")
[ "$pt" = on ] || skip "passthrough is '$pt' (status line '$PT_MODE: $(status_of a "$PT_MODE")'): a read goes through the FUSE page cache"

size=$((1 << 30))
limit_kib=$((size * 2 / 100 / 1024))

step "write a 1 GiB object and wait for its seal"
want=$(timeout -k 5 200 python3 - "$M/big" "$size" <<'EOF'
import hashlib, random, sys
path, size = sys.argv[1], int(sys.argv[2])
r, h = random.Random(), hashlib.sha256()
with open(path, "wb") as f:
    for _ in range(size >> 20):
        b = r.randbytes(1 << 20)
        h.update(b)
        f.write(b)
print(h.hexdigest())
EOF
)
eventually 30 bash -c "[ \"\$(getfattr --only-values -n user.objfs.status '$M' | awk '/^pending:/ { print \$2 }')\" = 0 ]"
assert_eq "$size" "$(stat -c %s "$M/big")" "size of the object"

# cached_shmem: Cached + Shmem of /proc/meminfo, in KiB
cached_shmem() { awk '/^(Cached|Shmem):/ { s += $2 } END { print s }' /proc/meminfo; }

# no_second_copy WHAT PREP CMD...: run PREP (unmeasured), drop the page
# cache, then run CMD; the growth of Cached + Shmem across CMD must stay
# under the limit.  Up to 3 tries: this machine may be running other
# work, whose page cache comes and goes meanwhile, while a second copy
# of the object shows up every time.
no_second_copy() {
	local what=$1 prep=$2 i before d tries=
	shift 2
	for i in 1 2 3; do
		"$prep"
		sync
		echo 3 >/proc/sys/vm/drop_caches
		before=$(cached_shmem)
		"$@"
		d=$(($(cached_shmem) - before))
		step "$what, try $i: Cached + Shmem grew by $d KiB (limit $limit_kib KiB)"
		tries+=" $d"
		[ "$d" -ge "$limit_kib" ] || return 0
	done
	fail "$what: Cached + Shmem grew by$tries KiB in 3 tries: a second copy of the $((size >> 20)) MiB object (limit $limit_kib KiB)"
}

cat_all() { timeout -k 5 120 cat "$M/big" >/dev/null; }

# a mapper is started (python loaded, the file mapped, no page touched)
# before the measure, which counts what touching every page brings in
n=0
new_mapper() {
	n=$((n + 1))
	start_mapper "m$n" "$M/big" 0
}
hash_mapping() {
	local got
	got=$(release_reader "m$n")
	assert_eq "$want" "$got" "sha256 of the whole mapping"
}

step "cat of the sealed object"
no_second_copy "cat > /dev/null" : cat_all

step "mmap of the sealed object, every page read (python)"
no_second_copy "mmap, every page read" new_mapper hash_mapping

step "the bytes read with cat are right too"
assert_eq "$want" "$(timeout -k 5 120 sha256sum <"$M/big" | cut -d' ' -f1)" "sha256 read with cat"
