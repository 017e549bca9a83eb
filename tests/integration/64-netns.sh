#!/bin/bash
# Real hosts: each node in its own network namespace, joined by veth pairs
# through a bridge on a private subnet; Redis on a unix socket that every
# namespace can reach.  Peers authenticate with the cluster secret:
#   - with the same secret, objects cross byte-exact;
#   - a node with a wrong secret, or none, is refused and gets EIO;
#   - a node without a secret serves loopback peers only.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need python3 getfattr ip nsenter
netns_hosts 10.231.7 ha hb hc hd
start_redis

head -c 48 /dev/urandom | base64 >"$T/secret"
chmod 600 "$T/secret"
head -c 48 /dev/urandom | base64 >"$T/wrong"
chmod 600 "$T/wrong"

step "the secret file must be private and long enough"
cp "$T/secret" "$T/open-secret"
chmod 644 "$T/open-secret"
rc=0
try_mount bad "$REDIS_URL" "secret_file=$T/open-secret" || rc=$?
assert_ne 0 "$rc" "mount with a world-readable secret"
assert_match 'chmod 600|readable by other' "$MOUNT_OUT" "message for a world-readable secret"
printf short >"$T/short-secret"
chmod 600 "$T/short-secret"
rc=0
try_mount bad2 "$REDIS_URL" "secret_file=$T/short-secret" || rc=$?
assert_ne 0 "$rc" "mount with a short secret"
assert_match 'bytes' "$MOUNT_OUT" "message for a short secret"

mount_objfs_on ha a "$REDIS_URL" "secret_file=$T/secret,capacity=256M"
mount_objfs_on hb b "$REDIS_URL" "secret_file=$T/secret,capacity=256M"
A=$(mnt_of a)
B=$(mnt_of b)
assert_eq "${NETNS_IP[ha]}:7419" "$(status_of a listen)" "a's listen address"

step "objects cross between namespaces byte-exact"
for n in 1 70000 1048577 $((40 << 20)); do
	mkdata "$T/s$n" "$n"
	cp "$T/s$n" "$A/s$n"
	eventually 10 ls_has "$B" "s$n"
	assert_ok cmp "$T/s$n" "$B/s$n"
done
# (a fetch counts its end after its reader got the bytes)
eventually 10 status_is b fetches_done 4
assert_ok "$OBJFS_CLI" nodes "$B"
assert_match "a +live +[0-9.]+s +${NETNS_IP[ha]}:7419" "$CAPTURED" "a's card as b sees it"

step "a node with the wrong secret is refused"
mount_objfs_on hc c "$REDIS_URL" "secret_file=$T/wrong,capacity=64M"
C=$(mnt_of c)
eventually 10 ls_has "$C" s70000
served=$(status_of a served_requests)
assert_fails_with 'Input/output error' cat "$C/s70000"
# the server proves itself first, so c (which cannot check the proof)
# gives up before a sees c's own proof: either side counts the failure
af=$(($(status_of a auth_failures) + $(status_of c auth_failures)))
[ "$af" -ge 1 ] || fail "no authentication failure counted on a or c"
assert_eq "$served" "$(status_of a served_requests)" "requests a served after c tried"
assert_eq 0 "$(status_of c fetches_done)" "fetches done by c"

step "a node without a secret is refused by a node with one"
mount_objfs_on hd d "$REDIS_URL" "capacity=64M"
D=$(mnt_of d)
eventually 10 ls_has "$D" s70000
assert_fails_with 'Input/output error' cat "$D/s70000"

step "a node without a secret serves loopback peers only"
mkdata "$T/fromd" 12345
cp "$T/fromd" "$D/fromd"
eventually 10 ls_has "$B" fromd
before=$(status_of d auth_failures)
assert_fails_with 'Input/output error' cat "$B/fromd"
eventually 5 bash -c "[ \"\$(getfattr --only-values -n user.objfs.status '$D' | awk '/^auth_failures:/ {print \$2}')\" -gt $before ]"
assert_match 'loopback' "$(cat "$(log_of d)")" "d's log says it serves loopback peers only"
