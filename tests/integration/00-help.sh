#!/bin/bash
# Every binary answers --help with a usage text and exit status 0.
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

need_built "$OBJFSD" "$MOUNT_HELPER" "$OBJFS_CLI"

for b in "$OBJFSD" "$MOUNT_HELPER" "$OBJFS_CLI"; do
	step "$(basename "$b") --help"
	rc=0
	out=$(timeout -k 5 10 "$b" --help 2>&1) || rc=$?
	assert_eq 0 "$rc" "exit status of $(basename "$b") --help"
	assert_match '[Uu]sage' "$out" "$(basename "$b") --help output"
done

# The daemon's usage names its options, so a user can find them.
out=$(timeout -k 5 10 "$OBJFSD" --help 2>&1)
for opt in capacity store node allow_overwrite transport rdma_eager_max rdma_poll; do
	assert_match "$opt" "$out" "objfsd --help mentions $opt"
done

# The CLI's usage names its commands.
out=$(timeout -k 5 10 "$OBJFS_CLI" --help 2>&1)
assert_match 'status' "$out" "objfs --help mentions status"
assert_match 'stat' "$out" "objfs --help mentions stat"

# objfsd's --help and the README's table of options list the same
# options (--help is made from the table the parser uses: an option added
# there and not to the README, or the other way round, fails here).
step "objfsd --help and the README list the same options"
readme=$LIB_DIR/../README.md
[ -f "$readme" ] || fail "no README.md at $readme"
# the README: the first column of the rows after "| option | meaning"
from_readme=$(awk '/^\| option \| meaning/ { t = 1; next } t && !/^\|/ { exit } t' "$readme" |
	sed -n 's/^| \([^|]*\(\\|[^|]*\)*\) |.*/\1/p' | tr -d '`' | tr ' ,' '\n' |
	sed 's/=.*//; /^-*$/d' | sort -u)
# --help: the left column of the option list, names before '=' (the
# "-f" and "-d" of foreground and debug are argv flags, not -o options)
from_help=$("$OBJFSD" --help | awk '/^Options/ { t = 1; next } t && /^$/ { exit } t' |
	grep -E '^  [a-z_x]' | sed 's/^  //; s/  .*//' | tr ' ,' '\n' |
	sed 's/=.*//; /^-/d; /^\.\.\.$/d; /^$/d' | sort -u)
# the ignored names of mount(8) --help lists on its own lines
from_help=$(printf '%s\n%s\n' "$from_help" "$("$OBJFSD" --help |
	awk '/accepted and ignored/ { t = 1; next } t && /^  [^ ]/ { exit } t' |
	tr ' ,' '\n' | sed 's/=.*//; /^$/d')" | sort -u)
[ "$(printf '%s\n' "$from_readme" | wc -l)" -gt 30 ] ||
	fail "found too few options in README.md's table: $(printf "%s " "$from_readme")"
missing=$(comm -23 <(echo "$from_readme") <(echo "$from_help") | xargs)
extra=$(comm -13 <(echo "$from_readme") <(echo "$from_help") | xargs)
assert_eq "" "$missing" "options in README.md's table that objfsd --help lacks"
assert_eq "" "$extra" "options in objfsd --help that README.md's table lacks"
# every line fits 80 columns
long=$("$OBJFSD" --help | awk 'length > 79' | head -3)
assert_eq "" "$long" "objfsd --help lines over 79 columns"
