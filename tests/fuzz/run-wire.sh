#!/bin/bash
#
# tests/fuzz/run-wire.sh: a bounded libFuzzer run of tests/fuzz/fuzz-wire.c
# (the wire decoder, the server's connection handler and the client's
# handshake, fed by a malicious peer).
#
# Configures build-fuzz/ (CC=clang, -Dfuzz=true) if needed, builds only
# the fuzz target, writes a seed corpus of valid conversations, and fuzzes
# for OBJFS_FUZZ_SECONDS (default 60).  Exit 0: no crash; 77: clang or
# libFuzzer is not installed; anything else: a crash, whose input is
# kept and named on stderr.
#
# Environment:
#   OBJFS_FUZZ_SECONDS  how long to fuzz (default 60)
#   OBJFS_FUZZ_BUILD    build directory (default <repo>/build-fuzz)
#   OBJFS_TEST_TMPDIR   where the corpus goes (default $TMPDIR or /tmp)
#   OBJFS_FUZZ_KEEP     where to keep the inputs of a crash (default the same)

set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${OBJFS_FUZZ_SECONDS:-60}
BUILD=${OBJFS_FUZZ_BUILD:-$REPO/build-fuzz}

skip() {
	echo "SKIP: $*"
	exit 77
}

command -v clang >/dev/null || skip "clang is not installed"
probe=$(mktemp -d "${OBJFS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/objfs-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }' \
	>"$probe/probe.c"
clang -fsanitize=fuzzer,address,undefined "$probe/probe.c" -o "$probe/probe" 2>"$probe/err" ||
	skip "clang cannot link libFuzzer (libclang-rt-dev?): $(head -n1 "$probe/err")"

set -e
if [ ! -f "$BUILD/build.ninja" ]; then
	CC=clang meson setup "$BUILD" "$REPO" -Dfuzz=true
elif [ "$(meson introspect --buildoptions "$BUILD" |
	python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "fuzz"][0])')" != True ]; then
	meson configure "$BUILD" -Dfuzz=true
fi
ninja -C "$BUILD" tests/fuzz/fuzz-wire
set +e

OBJFS_FUZZ_SEEDS="$probe/seeds" "$BUILD/tests/fuzz/fuzz-wire" || {
	echo "fuzz-wire could not write its seeds" >&2
	exit 1
}
mkdir -p "$probe/corpus"
echo "fuzzing for ${SECS}s, seeds: $(ls "$probe/seeds" | wc -l)"
# -timeout: one input must not take more than 10 s (a hang is a failure)
"$BUILD/tests/fuzz/fuzz-wire" -max_total_time="$SECS" -timeout=10 -max_len=4096 \
	-rss_limit_mb=4096 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 -artifact_prefix="$probe/" \
	"$probe/corpus" "$probe/seeds"
rc=$?
if [ "$rc" != 0 ]; then
	keep=$(mktemp -d "${OBJFS_FUZZ_KEEP:-${OBJFS_TEST_TMPDIR:-${TMPDIR:-/tmp}}}/fuzz-wire-crash.XXXXXX")
	cp "$probe"/crash-* "$probe"/leak-* "$probe"/timeout-* "$probe"/oom-* "$keep"/ 2>/dev/null
	echo "fuzz-wire failed (status $rc); inputs kept in $keep:" >&2
	ls -l "$keep" >&2
	echo "reproduce: $BUILD/tests/fuzz/fuzz-wire $keep/<file>" >&2
	exit 1
fi
echo "fuzz-wire: no crash in ${SECS}s"
