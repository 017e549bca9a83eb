#!/bin/bash
# Sealed files read back byte-exact through mmap from another language:
# shared read-only and private (copy-on-write) mappings.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis_or_local
mount_objfs n1 "$REDIS_URL" "capacity=256M"
M=$(mnt_of n1)

for size in 1 4096 5000000 $((16 << 20)); do
	mkdata "$T/src.$size" "$size"
	cp "$T/src.$size" "$M/f.$size"
done

step "mmap shared read-only and private, whole and in random pages"
timeout -k 5 120 python3 - "$M" "$T" 1 4096 5000000 $((16 << 20)) <<'PY'
import mmap, os, random, sys
mnt, tmp, sizes = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
bad = []
for size in sizes:
    want = open(f"{tmp}/src.{size}", "rb").read()
    path = f"{mnt}/f.{size}"
    # shared, read-only
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        if len(m) != size:
            bad.append(f"{path}: shared mapping has {len(m)} bytes, want {size}")
        elif m[:] != want:
            bad.append(f"{path}: shared mapping differs from the source")
        for _ in range(200):
            off = random.randrange(size)
            n = random.randrange(1, 9000)
            if m[off:off + n] != want[off:off + n]:
                bad.append(f"{path}: shared mapping differs at {off}+{n}")
                break
        m.close()
    # private, copy-on-write: writes change the copy only
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        if m[:] != want:
            bad.append(f"{path}: private mapping differs from the source")
        m[0] = (want[0] + 1) % 256
        m[size - 1] = (want[size - 1] + 7) % 256
        if m[0] == want[0]:
            bad.append(f"{path}: private mapping is not writable")
        m.close()
    with open(path, "rb") as f:
        if f.read() != want:
            bad.append(f"{path}: file changed after writing to a private mapping")
    # a mapping at an offset, not the whole file
    if size > 2 * mmap.ALLOCATIONGRANULARITY:
        with open(path, "rb") as f:
            off = mmap.ALLOCATIONGRANULARITY
            m = mmap.mmap(f.fileno(), size - off, offset=off, prot=mmap.PROT_READ)
            if m[:] != want[off:]:
                bad.append(f"{path}: mapping at offset {off} differs")
            m.close()
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

step "a shared writable mapping of a sealed file is refused"
assert_errno 'EACCES|EPERM|EROFS' '
import mmap
f = open(A[0], "r+b")
mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)' "$M/f.4096"
assert_same "$T/src.4096" "$M/f.4096"
