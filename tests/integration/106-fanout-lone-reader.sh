#!/bin/bash
# Issue 22, serving slots: one reader alone fetching a multi-block object
# keeps its holder busy.  The holder sends one fan-out block at a time
# (serve_slots=1); the reader's next GET, which finds the slot taken by
# its own last one and nobody else asking, waits there for the slot
# (PARK) rather than being told "busy" and coming back after retry_ms,
# which left the holder idle between blocks (a lone 256 MiB reader took
# 1.12-1.21 x S/BW).  So the holder answers no GET "busy", serves the
# object once, and the copy is byte-exact.  Then two readers at once, for
# which the holder queues nothing (the next block is theirs to race for):
# both copies are byte-exact (how many GETs it answered "busy" is
# printed, not asserted).
# shellcheck source=SCRIPTDIR/../lib.sh
. "$(dirname "$0")/../lib.sh"

start_redis
# io_timeout=8000: a GET waits for a slot at most a quarter of it, 2 s,
# against a block time of 0.25 s (a loaded machine must not turn the wait
# into a "busy")
for n in a b c d; do mount_objfs "$n" "$REDIS_URL" "capacity=256M,serve_bwlimit=32M,io_timeout=8000"; done
put_object a big $((64 << 20)) b c d

step "b reads it alone"
assert_eq "$OBJ_SHA" "$(sha256_of "$(mnt_of b)/big")" "the bytes b read"
assert_eq 0 "$(status_of a busy_sent)" "GETs a answered busy while b alone read"
assert_eq $((64 << 20)) "$(status_of a served_bytes)" "bytes a served"

step "c and d read it at once"
cat_bg c big
cat_bg d big
cat_wait c d
for n in c d; do
	assert_eq 0 "$(cat "$T/rc.$n")" "c's and d's cat ($n: $(cat "$T/err.$n"))"
	assert_eq "$OBJ_SHA" "$(sha256sum <"$T/got.$n" | cut -d' ' -f1)" "the bytes $n read"
done
echo "(a answered $(status_of a busy_sent) GETs busy with c and d reading)"
