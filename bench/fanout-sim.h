/*
 * fanout-sim: the simulator's options, shared by its model
 * (fanout-sim.c) and their table and parser (fanout-sim-opts.c).  The
 * table there lists every option with its default; the model's design
 * block says what each one models.
 */
#ifndef OBJFS_FANOUT_SIM_H
#define OBJFS_FANOUT_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct fsim_opts {
	const char *nodes;
	uint64_t size, bw, seed;
	unsigned streams, cap, slots, queue, sample, full_sample, bias, park, hints, retry_after,
	    holders;
	double churn, stall, stall_ms, stagger_ms, rtt_ms, poll_ms, relocate_ms, relocate_first_ms,
	    starve_ms, adv_ms, redis_us, io_timeout_ms, defer_ms, given_ms, busy_ms, avoid_ms;
	bool rx, cat, no_sent, hide_given, sealed_full, no_discover, poll_all, fill;
};

/* Fill @o from the defaults, then from @argv in order (a preset sets
 * its options where it stands: later ones override).  0, or -EINVAL
 * with a message on stderr.  --help prints the table and exits. */
int fsim_opts_parse(struct fsim_opts *o, int argc, char **argv);

void fsim_opts_usage(FILE *f);

/* One comment line of every option's value ("# name=value ..."). */
void fsim_opts_print(const struct fsim_opts *o, FILE *f);

#endif
