#!/bin/bash
# Issue 21, "limits named, never EMFILE".  Node a runs under an open-files
# hard limit of 256: its transport serves at most 32 connections (an
# eighth of the limit), what it keeps for objects being written or
# fetched leaves room for them, and b still fetches a's objects from it
# byte-exact over TCP.  `df -i` shows the object limit: f_ffree is what
# both the free capacity and the free inodes of the store's filesystem
# leave, f_files the objects plus that.  Node b's objects live on a tmpfs
# of 64 inodes: once they are all taken by objects too big to be packed
# (pack_max), the next create gets ENOSPC, the
# log names the limit, and creates work again once some objects go.
# `objfs status` has a limits: block whose numbers agree with the rest.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 prlimit df getfattr
start_redis
small_inode_store "$(store_of b)" 64
MOUNT_PREFIX="prlimit --nofile=256:256" mount_objfs a "$REDIS_URL" "capacity=64M,noprefault"
mount_objfs b "$REDIS_URL" "capacity=64M,noprefault"
A=$(mnt_of a)
B=$(mnt_of b)
BDATA=$(store_of b)/data
for p in ${MOUNT_PIDS[a]}; do
	[ "$(cat "/proc/$p/comm" 2>/dev/null)" = objfsd ] && PA=$p
done
[ -n "${PA:-}" ] || fail "no objfsd found for a"

# used_max FIELD STATUS: USED and MAX of a limit_ line, which must read
# USED/MAX
used_max() {
	local v
	v=$(field "$1" <<<"$2")
	[[ $v =~ ^[0-9]+/[0-9]+$ ]] || fail "status line $1 is '$v', not USED/MAX"
	USED=${v%/*}
	MAX=${v#*/}
}

step "a's transport is sized from its open-files limit (256)"
st=$(xattr "$A" user.objfs.status)
used_max limit_serve_conns "$st"
live=$USED conns=$MAX
assert_le "$conns" 32 "a's transport's connection cap (limit_serve_conns)"
assert_le 16 "$conns" "a's transport's connection cap (limit_serve_conns)"
assert_le "$live" "$conns" "a's transport's connections"
grep -qE "transport: serving at most $conns connections at once, [0-9]+ from one node" \
	"$(log_of a)" || fail "a's log does not give the connection cap: $(_log_tail a)"
used_max limit_pending "$st"
open_max=$MAX
assert_le $((open_max + conns)) 240 "objects being written or fetched and connections served on a"

step "b fetches a's objects from it, byte-exact, over TCP"
sizes=(0 1 4095 4096 65537 300000 1048576 3145728 9437184 123 777777 2000000)
for i in "${!sizes[@]}"; do
	mkdata "$T/o$i" "${sizes[$i]}"
	cp "$T/o$i" "$A/o$i"
done
tcp0=$(status_of b fetch_tcp)
eventually 10 ls_has "$B" "o$((${#sizes[@]} - 1))"
pids=()
for i in "${!sizes[@]}"; do
	timeout -k 5 60 cmp "$T/o$i" "$B/o$i" >"$T/cmp$i" 2>&1 &
	pids+=($!)
done
for i in "${!pids[@]}"; do
	wait "${pids[$i]}" || fail "o$i read on b differs from what a wrote: $(cat "$T/cmp$i")"
done
tcp=$(status_of b fetch_tcp)
step "b fetched ${#sizes[@]} objects in $((tcp - tcp0)) ranges over TCP"
assert_le $((tcp0 + 1)) "$tcp" "ranges b fetched over TCP"
assert_eq 0 "$(status_of b fetches_failed)" "fetches that failed on b"

# statfs_agrees NAME STOREDATA: statvfs of NAME's mount against its
# status and the statvfs of its store's data/ (at rest: read again if
# the objects changed meanwhile)
statfs_agrees() {
	python3 - "$(mnt_of "$1")" "$2" <<'PY'
import os, sys
m, data = sys.argv[1], sys.argv[2]
def count():
    st = os.getxattr(m, "user.objfs.status").decode()
    f = dict(l.split(": ", 1) for l in st.splitlines() if ": " in l)
    return int(f["objects"]) + int(f["pending"])
for _ in range(20):
    n0, v, d, n1 = count(), os.statvfs(m), os.statvfs(data), count()
    if n0 == n1:
        break
else:
    sys.exit("the object count kept changing")
print("f_files %d f_ffree %d f_favail %d f_bfree %d objects+pending %d; store fs f_ffree %d"
      % (v.f_files, v.f_ffree, v.f_favail, v.f_bfree, n0, d.f_ffree))
bad = []
if v.f_files != n0 + v.f_ffree:
    bad.append("f_files != objects + pending + f_ffree")
if v.f_ffree > d.f_ffree:
    bad.append("f_ffree > the store filesystem's free inodes")
if v.f_ffree != min(v.f_bfree, d.f_ffree):
    bad.append("f_ffree != min(f_bfree, the store filesystem's free inodes)")
if v.f_favail != v.f_ffree:
    bad.append("f_favail != f_ffree")
if bad:
    sys.exit("; ".join(bad))
PY
}

step "df -i shows the object limit"
for n in a b; do
	out=$(statfs_agrees "$n" "$(store_of "$n")/data") || fail "statvfs of $n: $out"
	step "$n: $out"
	read -r itotal ifree <<<"$(df -iP "$(mnt_of "$n")" | awk 'END { print $2, $4 }')"
	assert_match '^[0-9]+$' "$itotal" "df -i inodes of $n"
	assert_le "$ifree" "$itotal" "df -i free inodes of $n"
done
bfree=$(python3 -c 'import os, sys; print(os.statvfs(sys.argv[1]).f_ffree)' "$BDATA")
read -r _ ifree <<<"$(df -iP "$B" | awk 'END { print $2, $4 }')"
assert_le "$ifree" "$bfree" "df -i free inodes of b against its store's filesystem"

step "the status limits: block agrees with the rest"
st=$(xattr "$A" user.objfs.status)
[ -n "$(field limits <<<"$st")" ] || fail "no limits: line in a's status: $st"
assert_eq "$(field used <<<"$st")/$(field capacity <<<"$st")" "$(field limit_capacity <<<"$st")" \
	"limit_capacity of a"
assert_eq "$(field open <<<"$st")/$(field open_max <<<"$st")" "$(field limit_pending <<<"$st")" \
	"limit_pending of a"
assert_eq "$(field mapped <<<"$st")/$(field map_cache <<<"$st")" "$(field limit_mapped <<<"$st")" \
	"limit_mapped of a"
used_max limit_fds "$st"
fds=$USED nofile=$MAX
assert_eq 256 "$nofile" "a's descriptor limit (limit_fds)"
held=$(ls "/proc/$PA/fd" | wc -l)
assert_le "$fds" "$nofile" "a's descriptors (limit_fds)"
assert_le "$fds" $((held + 8)) "a's descriptors (limit_fds) against /proc/$PA/fd ($held)"
assert_le "$held" $((fds + 8)) "a's descriptors (limit_fds) against /proc/$PA/fd ($held)"
st=$(xattr "$B" user.objfs.status)
used_max limit_store_inodes "$st"
iused=$USED imax=$MAX
read -r ftotal ffree <<<"$(python3 -c 'import os, sys; v = os.statvfs(sys.argv[1]); print(v.f_files, v.f_ffree)' "$BDATA")"
assert_eq 64 "$imax" "b's store inodes (limit_store_inodes)"
assert_eq "$ftotal" "$imax" "b's store inodes (limit_store_inodes) against statvfs"
assert_eq $((ftotal - ffree)) "$iused" "b's store inodes used (limit_store_inodes) against statvfs"

step "b's store filesystem runs out of inodes: the next create gets ENOSPC"
mkdir "$B/fill"
out=$(python3 - "$B/fill" <<'PY'
import errno, os, sys
for i in range(200):
    p = os.path.join(sys.argv[1], "f%d" % i)
    try:
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError as e:
        print(i, errno.errorcode[e.errno], "open")
        sys.exit(0)
    err = None
    try:
        # more than pack_max (32K): a file, and an inode, each
        os.write(fd, (b"object %d\n" % i).ljust(40000, b"."))
    except OSError as e:
        err = (e.errno, "write")
    try:
        os.close(fd)
    except OSError as e:
        err = err or (e.errno, "close")
    if err:
        print(i, errno.errorcode[err[0]], err[1])
        sys.exit(0)
sys.exit("200 objects went in a store of 64 inodes")
PY
) || fail "filling b's inodes: $out"
read -r made errname where <<<"$out"
step "b: $made objects made, then $errname at $where"
assert_eq ENOSPC "$errname" "errno of the create past the store's inodes"
assert_le 10 "$made" "objects made before the inodes ran out"
grep -qE "store: the store's filesystem has no inode left \([0-9]+ objects\)" "$(log_of b)" ||
	fail "b's log does not name the inode limit: $(_log_tail b)"
st=$(xattr "$B" user.objfs.status)
used_max limit_store_inodes "$st"
iused=$USED imax=$MAX
assert_eq "$imax" "$iused" "b's store inodes used when they ran out"
out=$(statfs_agrees b "$BDATA") || fail "statvfs of b: $out"
assert_eq 0 "$(python3 -c 'import os, sys; print(os.statvfs(sys.argv[1]).f_ffree)' "$B")" \
	"f_ffree of b with no inode left"

step "after unlinking some objects, creates work again"
for i in 0 1 2 3 4; do rm "$B/fill/f$i"; done
# creates_big_in DIR: a create of an object too big to be packed works
creates_big_in() { timeout -k 5 30 cp "$T/big" "$1/probe.$(date +%s%N)"; }
mkdata "$T/big" 40000
eventually 10 creates_big_in "$B/fill"
cp "$T/big" "$B/fill/again" || fail "a create on b after freeing inodes failed"
assert_same "$T/big" "$B/fill/again"
