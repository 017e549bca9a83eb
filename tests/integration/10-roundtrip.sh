#!/bin/bash
# Files of many sizes go in with cp and dd and come back byte-exact with
# cp, cat and dd; random-order writes and holes before close read back as
# written (holes as zeros).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need cmp dd python3
start_redis
mount_objfs n1 "$REDIS_URL" "capacity=512M"
M=$(mnt_of n1)

rnd=$((1 + (RANDOM * 32768 + RANDOM) % (9 << 20)))
for size in 0 1 4096 1048576 67108864 "$rnd"; do
	step "round trip of $size bytes"
	src=$T/src.$size
	mkdata "$src" "$size"
	assert_ok cp "$src" "$M/cp.$size"
	assert_eq "$size" "$(stat -c %s "$M/cp.$size")" "size of cp.$size"
	assert_same "$src" "$M/cp.$size"
	cat "$M/cp.$size" >"$T/cat.$size"
	assert_same "$src" "$T/cat.$size"
	assert_ok cp "$M/cp.$size" "$T/back.$size"
	assert_same "$src" "$T/back.$size"
	dd if="$M/cp.$size" bs=1M status=none | cmp - "$src" || fail "dd bs=1M read of $size bytes differs"
	# odd-sized dd reads cross page and request boundaries
	dd if="$M/cp.$size" bs=12345 status=none | cmp - "$src" || fail "dd bs=12345 read of $size bytes differs"
	rm -f "$T/cat.$size" "$T/back.$size"
done

step "dd writes with small and odd block sizes"
assert_ok dd if="$T/src.1048576" of="$M/dd4k" bs=4k status=none
assert_same "$T/src.1048576" "$M/dd4k"
assert_ok dd if="$T/src.$rnd" of="$M/dd-odd" bs=7777 status=none
assert_same "$T/src.$rnd" "$M/dd-odd"

step "writes in random order, with a hole, then close"
python3 - "$M/random-order" "$T/random-order.expect" <<'PY'
import os, random, sys
path, expect = sys.argv[1], sys.argv[2]
size = 3 * 1024 * 1024 + 777
data = bytearray(os.urandom(size))
hole = (1024 * 1024, 1024 * 1024 + 300000)   # never written: zeros
data[hole[0]:hole[1]] = bytes(hole[1] - hole[0])
chunks = []
off = 0
while off < size:
    n = random.choice([1, 512, 4096, 65536, 100000, 1 << 20])
    n = min(n, size - off)
    chunks.append((off, n))
    off += n
random.shuffle(chunks)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
for off, n in chunks:
    a, b = max(off, hole[0]), min(off + n, hole[1])
    if a < b:   # write around the hole
        if off < a:
            os.pwrite(fd, data[off:a], off)
        if b < off + n:
            os.pwrite(fd, data[b:off + n], b)
    else:
        os.pwrite(fd, data[off:off + n], off)
# overwrite a range that was already written, before close
os.pwrite(fd, data[5000:9000], 5000)
os.close(fd)
open(expect, "wb").write(data)
PY
assert_same "$T/random-order.expect" "$M/random-order"

step "a file that is only a hole plus one byte"
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.pwrite(fd, b"x", 3 << 20)
os.close(fd)' "$M/sparse"
assert_eq $(((3 << 20) + 1)) "$(stat -c %s "$M/sparse")" "size of the sparse file"
{ head -c $((3 << 20)) /dev/zero; printf x; } | cmp - "$M/sparse" || fail "sparse file does not read as zeros then x"

step "shrinking truncate while writing"
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b"a" * 100000)
os.ftruncate(fd, 10)
os.write(fd, b"b")
os.close(fd)' "$M/trunc"
assert_eq "$(printf 'aaaaaaaaaa%*sb' 99990 '' | tr ' ' '\0' | sha256sum)" \
	"$(sha256sum <"$M/trunc")" "truncate-then-write content"

step "everything still intact at the end"
for size in 0 1 4096 1048576 67108864 "$rnd"; do
	assert_same "$T/src.$size" "$M/cp.$size"
done
