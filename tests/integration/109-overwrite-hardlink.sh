#!/bin/bash
# Issue 23 (found by an attack on it): with allow_overwrite, replacing
# one name of a hard-linked file by a new object (an O_TRUNC open: "echo >
# name") gives the new object one name (st_nlink 1), and leaves the old
# object's other name with st_nlink 1, on every node, the writing node
# among them.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

start_redis
mount_objfs a "$REDIS_URL" "capacity=64M,allow_overwrite"
mount_objfs b "$REDIS_URL" "capacity=64M,allow_overwrite"
A=$(mnt_of a)
B=$(mnt_of b)
links_are() { [ "$(stat -c %h -- "$1")" = "$2" ] || { echo "$1: $(stat -c %h -- "$1") names"; return 1; }; }

step "a file with two names, seen by both nodes"
echo old >"$A/p"
ln "$A/p" "$A/q"
eventually 10 links_are "$B/q" 2
assert_eq 2 "$(stat -c %h "$A/q")" "q's names on a"

step "b replaces p with a new object (O_TRUNC open, allow_overwrite)"
echo new >"$B/p"
assert_eq new "$(cat "$A/p")" "p's bytes on a"
assert_eq old "$(cat "$B/q")" "q's bytes on b"
assert_ne "$(stat -c %i "$B/p")" "$(stat -c %i "$B/q")" "p is another object now"
v=$(rcli --raw HGET '{objfs}:d:1' p)
assert_no_match ' [0-9]+ [0-9]+ [0-7]+ -?[0-9]+ -?[0-9]+ [0-9]+$' "$v" \
	"p's entry in Redis carries no link count"
eventually 10 links_are "$A/p" 1
eventually 10 links_are "$B/p" 1
eventually 10 links_are "$A/q" 1
eventually 10 links_are "$B/q" 1
