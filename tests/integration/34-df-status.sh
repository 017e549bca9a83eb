#!/bin/bash
# df shows the store's capacity and use; `objfs status` reports node,
# redis, capacity, used, objects and pending.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need df
start_redis
CAP=$((256 << 20))
mount_objfs n1 "$REDIS_URL" "capacity=256M"
M=$(mnt_of n1)

df_size() { df -B1 --output=size "$1" | tail -n 1 | tr -d ' '; }
df_used() { df -B1 --output=used "$1" | tail -n 1 | tr -d ' '; }

step "df of the empty mount"
size=$(df_size "$M")
used0=$(df_used "$M")
assert_le "$((CAP * 95 / 100))" "$size" "df size (capacity $CAP)"
assert_le "$size" "$CAP" "df size (capacity $CAP)"
assert_le "$used0" $((1 << 20)) "df used of an empty store"

step "df after writing 24 MiB"
mkdata "$T/a" $((16 << 20))
mkdata "$T/b" $((8 << 20))
cp "$T/a" "$M/a"
mkdir "$M/d"
cp "$T/b" "$M/d/b"
used1=$(df_used "$M")
assert_le $((used0 + (24 << 20))) "$used1" "df used after writing 24 MiB"
assert_le "$used1" $((used0 + (26 << 20))) "df used after writing 24 MiB"
avail=$(df -B1 --output=avail "$M" | tail -n 1 | tr -d ' ')
assert_le "$avail" $((size - (24 << 20))) "df avail after writing 24 MiB"

step "objfs status"
need_built "$OBJFS_CLI"
st=$(objfs_cli status "$M") || fail "objfs status failed: $st"
echo "$st" >&2
assert_eq n1 "$(field node <<<"$st")" "node:"
assert_match '^up' "$(field redis <<<"$st")" "redis:"
assert_eq "$CAP" "$(field capacity <<<"$st")" "capacity:"
used=$(field used <<<"$st")
assert_match '^[0-9]+$' "$used" "used:"
assert_le $((24 << 20)) "$used" "used: after writing 24 MiB"
assert_le "$used" $((26 << 20)) "used: after writing 24 MiB"
assert_eq 2 "$(field objects <<<"$st")" "objects:"
assert_eq 0 "$(field pending <<<"$st")" "pending:"

step "objfs status counts a file being written as pending"
exec 7>"$M/being-written"
echo partial >&7
st=$(objfs_cli status "$M")
assert_eq 1 "$(field pending <<<"$st")" "pending: with one file open for writing"
exec 7>&-
st=$(objfs_cli status "$M")
assert_eq 0 "$(field pending <<<"$st")" "pending: after close"
assert_eq 3 "$(field objects <<<"$st")" "objects: after close"

step "df and status after removing a"
used2=$(df_used "$M")
rm "$M/a"
eventually 10 sh -c 'u=$(df -B1 --output=used "$1" | tail -n 1 | tr -d " "); [ "$u" -le "$2" ] || { echo "used $u"; exit 1; }' \
	sh "$M" $((used2 - (16 << 20)))
st=$(objfs_cli status "$M")
assert_eq 2 "$(field objects <<<"$st")" "objects: after rm"

step "objfs status on something that is not an objfs mount fails"
rc=0
out=$(objfs_cli status "$T" 2>&1) || rc=$?
assert_ne 0 "$rc" "exit status of objfs status on a plain directory (output: $out)"
