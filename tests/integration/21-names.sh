#!/bin/bash
# Names of up to 255 bytes work; longer ones fail with ENAMETOOLONG for
# every operation that makes a name.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
mount_objfs n1 local "capacity=64M"
M=$(mnt_of n1)

n255=$(printf 'a%.0s' $(seq 255))
n256=$(printf 'b%.0s' $(seq 256))
n300=$(printf 'c%.0s' $(seq 300))
# 85 three-byte characters are 255 bytes; 86 are 258
u85=$(printf '\xe2\x82\xac%.0s' $(seq 85))
u86=$(printf '\xe2\x82\xac%.0s' $(seq 86))
assert_eq 255 "$(printf %s "$u85" | wc -c)" "byte length of u85"

step "255-byte names work"
echo data >"$M/$n255"
assert_eq data "$(cat "$M/$n255")" "content of the 255-byte name"
mkdir "$M/d$(printf 'd%.0s' $(seq 254))"
echo euro >"$M/$u85"
assert_eq euro "$(cat "$M/$u85")" "content of a 255-byte UTF-8 name"
ls_has "$M" "$n255" || fail "ls does not show the 255-byte name"

step "longer names fail with ENAMETOOLONG"
TOOLONG='File name too long'
for n in "$n256" "$n300" "$u86"; do
	assert_fails_with "$TOOLONG" touch "$M/$n"
	assert_fails_with "$TOOLONG" mkdir "$M/$n"
	assert_fails_with "$TOOLONG" cp /etc/hostname "$M/$n"
	assert_fails_with "$TOOLONG" mv "$M/$n255" "$M/$n"
	assert_fails_with "$TOOLONG" mkdir -p "$M/sub/$n"
	assert_errno ENAMETOOLONG 'os.stat(A[0])' "$M/$n"
	assert_errno ENAMETOOLONG 'os.rename(A[0], A[1])' "$M/$n255" "$M/$n"
done
assert_eq data "$(cat "$M/$n255")" "the 255-byte file after the failed renames"
for n in "$n256" "$n300" "$u86"; do
	assert_absent "$M/$n"
	assert_absent "$M/sub/$n"
done
