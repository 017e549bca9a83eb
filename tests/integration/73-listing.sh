#!/bin/bash
# Directory listings: the kernel keeps a listing (a repeated `ls` reads
# nothing from Redis), and drops it when another node changes the
# directory (create, unlink, rename in, rename out, mkdir); a directory of
# several HSCAN pages lists every name exactly once; `ls -l` shows the
# sizes and mtimes of the files and directories (READDIRPLUS hands them
# over); a file being written shows on its own node only, and the names
# it replaces show once.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3
start_redis
mount_objfs a "$REDIS_URL" "capacity=64M,allow_overwrite"
mount_objfs b "$REDIS_URL" "capacity=64M"
A=$(mnt_of a)
B=$(mnt_of b)

# listings_of NODE: how many listings NODE read from Redis
listings_of() { status_of "$1" listings; }

# after DIR "NAMES" CMD...: with DIR open and listed (so that the kernel
# caches its listing), run CMD (a change on another node), then list DIR
# again through the same descriptor until it shows NAMES (sorted,
# space-separated), for 5 s at most.  Through a descriptor nothing
# refreshes the directory's attributes, whose new mtime would drop a
# stale listing anyway (the stat(2) and permission check of a path): only
# the invalidation sent to the kernel does.
after() {
	timeout -k 5 30 python3 - "$@" <<'PY' || fail "listing of $1 after '${*:3}'"
import os, subprocess, sys, time
d, want, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.listdir(fd)
subprocess.run(cmd, check=True)
deadline = time.monotonic() + 5
while True:
    got = " ".join(sorted(os.listdir(fd)))
    if got == want:
        sys.exit(0)
    if time.monotonic() > deadline:
        print(f"listing of {d}: {got!r}, want {want!r}", file=sys.stderr)
        sys.exit(1)
    time.sleep(0.1)
PY
}

# cached DIR: list DIR so that the kernel has its listing cached; a
# notice of an earlier change that comes later drops it again
cached() {
	ls -A "$1" >/dev/null
}

# cache_holds DIR NAMES: DIR lists NAMES three times over and b reads no
# listing from Redis for them (for eventually: a notice of an earlier
# change that comes late drops the cached listing, once)
cache_holds() {
	local n0 i
	cached "$1"
	n0=$(listings_of b)
	for i in 1 2 3; do
		[ "$(ls_of "$1")" = "$2" ] || { echo "listing of $1: $(ls_of "$1"), not '$2'"; return 1; }
	done
	[ "$(listings_of b)" = "$n0" ] || { echo "b read $1 from Redis again: listings $n0 -> $(listings_of b)"; return 1; }
}

step "a repeated listing comes from the kernel's cache"
mkdir "$A/d"
echo one >"$A/d/one"
eventually 10 listing_is "$B/d" "one"
eventually 10 cache_holds "$B/d" "one"

step "changes on a reach b's cached listing"
after "$B/d" "one two" cp "$A/d/one" "$A/d/two"
after "$B/d" "two" rm "$A/d/one"
after "$B/d" "three" mv "$A/d/two" "$A/d/three"
after "$B/d" "sub three" mkdir "$A/d/sub"
mkdir "$A/e"
eventually 5 listing_is "$B/e" ""
after "$B/d" "sub" mv "$A/d/three" "$A/e/three"
eventually 5 listing_is "$B/e" "three"
after "$B/d" "" rmdir "$A/d/sub"
# and the cache works again once the changes stop
eventually 10 cache_holds "$B/d" ""

step "ls -l shows sizes and mtimes (the listing's attributes)"
mkdata "$T/s1" 12345
mkdata "$T/s2" 1
cp "$T/s1" "$A/e/s1"
cp "$T/s2" "$A/e/s2"
mkdir "$A/e/dd"
eventually 5 listing_is "$B/e" "dd s1 s2 three"
# a fresh mount: the names were never looked up there
umount_objfs b
mount_objfs b "$REDIS_URL" "capacity=64M"
want=$(cd "$A/e" && stat -c '%n %s %Y %F' -- * | sort)
got=$(ls -l --time-style=+%s "$B/e" | awk 'NR > 1 {
	t = substr($1, 1, 1) == "d" ? "directory" : "regular file"
	print $7, $5, $6, t }' | sort)
# a directory's size is its own: compare files' sizes and everyone's mtime
want=$(awk '{ if ($4 == "directory") $2 = "-"; print }' <<<"$want")
got=$(awk '{ if ($4 == "directory") $2 = "-"; print }' <<<"$got")
assert_eq "$want" "$got" "ls -l of e on b against stat on a"
assert_eq "12345 1" "$(stat -c %s "$B/e/s1" "$B/e/s2" | tr '\n' ' ' | sed 's/ $//')" "sizes of s1 s2 on b"
assert_same "$T/s1" "$B/e/s1"

step "a file being written shows on its own node only, once"
exec 3>"$B/e/w"
printf 'partial' >&3
assert_eq "dd s1 s2 three w" "$(ls_of "$B/e")" "listing of e on b while w is written"
assert_eq "dd s1 s2 three" "$(ls_of "$A/e")" "listing of e on a while w is written on b"
exec 3>&-
eventually 5 listing_is "$A/e" "dd s1 s2 three w"
assert_eq "dd s1 s2 three w" "$(ls_of "$B/e")" "listing of e on b after w is sealed"
# a replacement being written on a (allow_overwrite) shows as the name
exec 3>"$A/e/s2"
printf 'new bytes' >&3
assert_eq "dd s1 s2 three w" "$(ls_of "$A/e")" "listing of e on a while s2 is replaced"
[ "$(ls -A "$A/e" | grep -cx s2)" = 1 ] || fail "s2 shows more than once on a"
exec 3>&-
eventually 5 bash -c "[ \"\$(stat -c %s '$B/e/s2')\" = 9 ]"
assert_eq "dd s1 s2 three w" "$(ls_of "$B/e")" "listing of e on b after the replace"

step "a directory of several HSCAN pages, every name once"
mkdir "$A/big"
ls_of "$B/big" >/dev/null
N=2600
pids=()
for w in 0 1 2 3; do
	(for ((i = w; i < N; i += 4)); do printf x >"$A/big/f$i"; done) &
	pids+=($!)
done
for p in "${pids[@]}"; do
	timeout 120 tail --pid="$p" -f /dev/null || fail "writer $p still running after 120 s"
	wait "$p" || fail "writer $p failed"
done
assert_eq "$N" "$(ls -A "$A/big" | wc -l)" "names in big on a"
eventually 10 bash -c "[ \"\$(ls -A '$B/big' | wc -l)\" = $N ]"
ls -A "$B/big" >"$T/big.ls"
assert_eq "$N" "$(sort -u "$T/big.ls" | wc -l)" "distinct names in big on b"
assert_eq "" "$(sort "$T/big.ls" | uniq -d | head -3)" "names listed twice in big on b"
seq 0 $((N - 1)) | sed 's/^/f/' | sort >"$T/big.want"
sort "$T/big.ls" | cmp -s "$T/big.want" - || fail "names in big on b are not f0 .. f$((N - 1))"
# one more name from a: b's listing of all those pages is dropped
cached "$B/big"
n0=$(listings_of b)
printf y >"$A/big/last"
eventually 5 bash -c "ls -A '$B/big' | grep -qx last"
assert_eq $((N + 1)) "$(ls -A "$B/big" | wc -l)" "names in big on b after one more"
[ "$(listings_of b)" -gt "$n0" ] || fail "b did not read big again after a's change"
ls -l "$B/big" >"$T/big.ll"
assert_eq "$((N + 1))" "$(grep -c '^-' "$T/big.ll")" "files in ls -l of big on b"
assert_eq "" "$(awk '/^-/ && $5 != 1 { print $NF, $5 }' "$T/big.ll" | head -3)" "sizes in ls -l of big on b"
