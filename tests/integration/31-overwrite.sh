#!/bin/bash
# allow_overwrite: an O_TRUNC open of an existing name writes a new object
# that replaces the name at seal; a reader holding the old file keeps
# reading the old bytes.  Without allow_overwrite the same cp fails and
# the old bytes stay.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs n1 "$REDIS_URL" "capacity=128M,allow_overwrite"
M=$(mnt_of n1)

mkdata "$T/v1" $((6 << 20))
mkdata "$T/v2" $((2 << 20))
mkdata "$T/v3" 12345

cp "$T/v1" "$M/f"
id1=$(xattr "$M/f" user.objfs.id)
sum1=$(xattr "$M/f" user.objfs.checksum)

step "cp over an existing name while a reader holds it open"
start_reader 1 "$M/f"
assert_ok cp "$T/v2" "$M/f"
assert_same "$T/v2" "$M/f"
assert_eq $((2 << 20)) "$(stat -c %s "$M/f")" "size after the overwrite"
# with allow_overwrite the owner may replace the name (the bytes stay immutable)
assert_eq 644 "$(stat -c %a "$M/f")" "mode after the overwrite"
assert_ne "$id1" "$(xattr "$M/f" user.objfs.id)" "object id after the overwrite"
assert_ne "$sum1" "$(xattr "$M/f" user.objfs.checksum)" "checksum after the overwrite"
assert_eq "$(sha256_of "$T/v1")" "$(release_reader 1)" "what the old reader read"

step "shell > over an existing name"
echo replaced >"$M/f"
assert_eq replaced "$(cat "$M/f")" "content after > redirection"

if command -v capsh >/dev/null; then
	step "the owner overwrites without CAP_DAC_OVERRIDE (the kernel checks the mode)"
	capsh --drop=cap_dac_override -- -c "echo again >'$M/f'" ||
		fail "overwrite without CAP_DAC_OVERRIDE failed"
	assert_eq again "$(cat "$M/f")" "content after the overwrite without DAC override"
fi

step "python O_TRUNC open, written in pieces"
python3 - "$M/f" "$T/v3" <<'PY'
import os, sys
data = open(sys.argv[2], "rb").read()
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
os.write(fd, data[:5000])
os.write(fd, data[5000:])
os.close(fd)
PY
assert_same "$T/v3" "$M/f"

step "a sealed file still refuses writes without O_TRUNC"
assert_errno 'EACCES|EPERM' 'os.open(A[0], os.O_WRONLY)' "$M/f"
assert_errno 'EACCES|EPERM' 'os.open(A[0], os.O_WRONLY | os.O_APPEND)' "$M/f"
assert_same "$T/v3" "$M/f"

step "only one name in the directory, old objects gone from Redis"
assert_eq f "$(ls_of "$M")" "listing after overwrites"
id_now=$(xattr "$M/f" user.objfs.id)
assert_eq 1 "$(rec_exists "$id_now")" "the current object's record in Redis"
assert_eq 0 "$(rec_exists "$id1")" "the replaced object's record in Redis"

step "without allow_overwrite cp onto an existing name fails"
mount_objfs n2 "$REDIS_URL" "capacity=64M"
M2=$(mnt_of n2)
cp "$T/v1" "$M2/g"
assert_fails_with 'Permission denied|Operation not permitted|File exists' cp "$T/v2" "$M2/g"
assert_same "$T/v1" "$M2/g"
assert_fails_with 'Permission denied|Operation not permitted|File exists' sh -c 'echo x >"$1"' sh "$M2/g"
assert_same "$T/v1" "$M2/g"
