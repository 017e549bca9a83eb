#!/bin/bash
# A reader that holds a file open keeps reading the full, correct bytes
# while the file is renamed or unlinked under it.  An unlinked object's
# space comes back once the last reader closes it.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
mount_objfs n1 local "capacity=128M"
M=$(mnt_of n1)
mkdir "$M/d1" "$M/d2"

for f in r1 r2 r3; do
	mkdata "$T/$f" $((8 << 20))
	cp "$T/$f" "$M/d1/$f"
done

step "rename while open"
start_reader 1 "$M/d1/r1"
mv "$M/d1/r1" "$M/d1/r1-renamed"
assert_absent "$M/d1/r1"
assert_eq "$(sha256_of "$T/r1")" "$(release_reader 1)" "what the reader read across a rename"
assert_same "$T/r1" "$M/d1/r1-renamed"

step "rename into another directory while open"
start_reader 2 "$M/d1/r2"
mv "$M/d1/r2" "$M/d2/moved"
assert_eq "$(sha256_of "$T/r2")" "$(release_reader 2)" "what the reader read across a move"
assert_same "$T/r2" "$M/d2/moved"
assert_absent "$M/d1/r2"

step "unlink while open"
used0=$(df -B1 --output=used "$M" | tail -n 1 | tr -d ' ')
start_reader 3 "$M/d1/r3"
rm "$M/d1/r3"
assert_absent "$M/d1/r3"
if ls_has "$M/d1" r3; then fail "ls still shows the unlinked r3"; fi
assert_eq "$(sha256_of "$T/r3")" "$(release_reader 3)" "what the reader read across an unlink"

step "the unlinked object's space comes back after the last close"
ok=0
for ((i = 0; i < 100; i++)); do
	used=$(df -B1 --output=used "$M" | tail -n 1 | tr -d ' ')
	if [ "$used" -le "$((used0 - (8 << 20)))" ]; then
		ok=1
		break
	fi
	sleep 0.1
done
[ "$ok" = 1 ] || fail "df used went from $used0 to $used, expected at least 8 MiB less"

step "the other files are intact"
assert_same "$T/r1" "$M/d1/r1-renamed"
assert_same "$T/r2" "$M/d2/moved"
