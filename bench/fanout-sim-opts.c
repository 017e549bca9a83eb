/*
 * fanout-sim-opts: the simulator's options as a table (name, parser,
 * default, help), their parser and the line that prints them all.  A
 * preset is an option that sets others, in the same name=value words a
 * command line uses.
 */
#include "fanout-sim.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

enum opt_kind { O_STR, O_SIZE, O_U64, O_UINT, O_DBL, O_FLAG, O_PRESET };

#define OPT(name, kind, field, def, help)                                      \
	{                                                                      \
		name, kind, offsetof(struct fsim_opts, field), def, help, NULL \
	}
#define PRESET(name, set, help)                    \
	{                                          \
		name, O_PRESET, 0, NULL, help, set \
	}
static const struct opt {
	const char *name;
	enum opt_kind kind;
	size_t off;
	const char *def, *help;
	const char *set; /* O_PRESET: "name=value ..." */
} opt_table[] = {
    OPT("nodes", O_STR, nodes, "2,4,8,16,32,64,128,256,512,1000",
	"node counts N (holders included)"),
    OPT("size", O_SIZE, size, "256M", "object size S"),
    OPT("bw", O_SIZE, bw, "100M", "serving bandwidth per node, bytes/s"),
    OPT("seed", O_U64, seed, "1", "random seed"),
    OPT("holders", O_UINT, holders, "1", "nodes that hold the object at the start (1..16)"),
    OPT("streams", O_UINT, streams, "8", "requests in flight per reader (fetch workers)"),
    OPT("cap", O_UINT, cap, "2", "requests in flight per reader and source"),
    OPT("slots", O_UINT, slots, "1", "blocks a node sends at once, 0: no limit"),
    OPT("queue", O_UINT, queue, "0", "GETs that wait for a slot, beyond: busy"),
    OPT("sample", O_UINT, sample, "8", "partial holders a locate returns"),
    OPT("full-sample", O_UINT, full_sample, "8",
	"readers done a locate returns (and every holder)"),
    OPT("bias", O_UINT, bias, "0", "fanpick full_bias: load a full holder counts on top"),
    OPT("park", O_UINT, park, "1", "1: a GET for a block being fetched waits for it there"),
    OPT("hints", O_UINT, hints, "0", "a refusal names this many nodes given the block"),
    OPT("churn", O_DBL, churn, "0", "fraction of readers that die mid-run"),
    OPT("stall", O_DBL, stall, "0", "fraction of readers that stop serving mid-run"),
    OPT("stall-ms", O_DBL, stall_ms, "10000", "how long a stall lasts"),
    OPT("stagger", O_DBL, stagger_ms, "0", "readers start uniformly within this many ms"),
    OPT("rtt", O_DBL, rtt_ms, "0.1", "round trip between nodes, ms"),
    OPT("poll", O_DBL, poll_ms, "50", "HAVE queries to a source at most this often, ms"),
    OPT("poll-all", O_FLAG, poll_all, NULL,
	"query every source (holders too) with none of our requests"),
    OPT("relocate", O_DBL, relocate_ms, "10000", "locate again every this many ms"),
    OPT("relocate-first", O_DBL, relocate_first_ms, "0",
	"first re-locate after this, doubling to --relocate; 0: idle only"),
    OPT("starve", O_DBL, starve_ms, "500", "locate again after this long with nothing to fetch"),
    OPT("adv", O_DBL, adv_ms, "0", "advertisement delay: a locate's registration seen after"),
    OPT("redis-us", O_DBL, redis_us, "50", "time Redis takes per locate script, us"),
    OPT("io-timeout", O_DBL, io_timeout_ms, "2000", "no progress this long fails a request, ms"),
    OPT("defer", O_DBL, defer_ms, "2000", "fanpick defer_ms (rule 3's bound)"),
    OPT("given", O_DBL, given_ms, "0",
	"fanpick given_ms: rule 3's bound for a block given out to a fetcher not known; 0: "
	"--defer"),
    OPT("busy", O_DBL, busy_ms, "20", "first back-off after a busy answer, ms"),
    OPT("avoid", O_DBL, avoid_ms, "60000", "a stalled source is avoided this long, ms"),
    OPT("retry-after", O_UINT, retry_after, "1", "1: a busy answer says when a slot frees"),
    OPT("rx", O_FLAG, rx, NULL, "receiving is limited to BW too"),
    OPT("fill", O_FLAG, fill, NULL, "a node takes GETs beyond --slots while it sends below BW"),
    OPT("cat", O_FLAG, cat, NULL, "each reader reads sequentially (wants its next block)"),
    OPT("no-sent", O_FLAG, no_sent, NULL, "a holder serves what it gave out already"),
    OPT("hide-given", O_FLAG, hide_given, NULL,
	"a holder neither tells nor refuses what it gave out"),
    OPT("sealed-full", O_FLAG, sealed_full, NULL,
	"a reader done is a full holder to all (the daemon's HAVE SEALED)"),
    OPT("no-discover", O_FLAG, no_discover, NULL,
	"a GET or query does not make the asker a source of the asked"),
    PRESET("daemon",
	   "slots=0 park=0 retry-after=0 streams=8 cap=2 bias=1 io-timeout=2000 defer=10000 "
	   "sample=8 poll=100 poll-all relocate-first=250 relocate=1000 given=2000 sealed-full",
	   "today's node_fan.c and server (later options override)"),
};
#define NOPTS (sizeof(opt_table) / sizeof(opt_table[0]))

static int parse_size(const char *s, uint64_t *ret)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0)
		return -EINVAL;
	switch (*end) {
	case 'K':
	case 'k':
		v *= 1024, end++;
		break;
	case 'M':
	case 'm':
		v *= MIB, end++;
		break;
	case 'G':
	case 'g':
		v *= MIB * 1024, end++;
		break;
	}
	if (*end)
		return -EINVAL;
	*ret = (uint64_t)v;
	return 0;
}

/* The option named by @name's first @len characters, or NULL. */
static const struct opt *opt_find(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < NOPTS; i++)
		if (strlen(opt_table[i].name) == len && !strncmp(opt_table[i].name, name, len))
			return &opt_table[i];
	return NULL;
}

static int opt_preset(struct fsim_opts *o, const char *set);

static int opt_set(struct fsim_opts *o, const struct opt *op, const char *val)
{
	char *p = (char *)o + op->off, *end;

	switch (op->kind) {
	case O_STR:
		*(const char **)p = val;
		return 0;
	case O_SIZE:
		return parse_size(val, (uint64_t *)p);
	case O_U64:
		*(uint64_t *)p = strtoull(val, &end, 0);
		return *end || end == val ? -EINVAL : 0;
	case O_UINT:
		*(unsigned *)p = (unsigned)strtoul(val, &end, 0);
		return *end || end == val ? -EINVAL : 0;
	case O_DBL:
		*(double *)p = strtod(val, &end);
		return *end || end == val ? -EINVAL : 0;
	case O_FLAG:
		*(bool *)p = strcmp(val, "0") != 0;
		return 0;
	case O_PRESET:
		return opt_preset(o, op->set);
	}
	return -EINVAL;
}

/* Apply the words "name=value" (or "name", a flag) of @set. */
static int opt_preset(struct fsim_opts *o, const char *set)
{
	char word[64];

	while (*set) {
		size_t len = strcspn(set, " "), nlen;
		const struct opt *op;
		const char *eq;

		if (len >= sizeof(word))
			return -EINVAL;
		memcpy(word, set, len);
		word[len] = 0;
		set += len + strspn(set + len, " ");
		eq = strchr(word, '=');
		nlen = eq ? (size_t)(eq - word) : len;
		op = opt_find(word, nlen);
		if (!op || op->kind == O_STR || op->kind == O_PRESET ||
		    opt_set(o, op, eq ? eq + 1 : "1"))
			return -EINVAL;
	}
	return 0;
}

void fsim_opts_usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: objfs-fanout-sim [--option=value ...]\n");
	for (i = 0; i < NOPTS; i++) {
		fprintf(f, "  --%-14s %-64s %s\n", opt_table[i].name, opt_table[i].help,
			opt_table[i].def ? opt_table[i].def : "off");
		if (opt_table[i].set)
			fprintf(f, "  %16s (%s)\n", "", opt_table[i].set);
	}
}

int fsim_opts_parse(struct fsim_opts *o, int argc, char **argv)
{
	size_t i;
	int a;

	memset(o, 0, sizeof(*o));
	for (i = 0; i < NOPTS; i++)
		if (opt_table[i].def && opt_set(o, &opt_table[i], opt_table[i].def))
			return -EINVAL;
	for (a = 1; a < argc; a++) {
		const char *arg = argv[a], *eq, *val;
		const struct opt *op;

		if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
			fsim_opts_usage(stdout);
			exit(0);
		}
		if (strncmp(arg, "--", 2))
			goto bad;
		arg += 2;
		eq = strchr(arg, '=');
		op = opt_find(arg, eq ? (size_t)(eq - arg) : strlen(arg));
		if (!op)
			goto bad;
		if (op->kind == O_FLAG || op->kind == O_PRESET)
			val = eq ? eq + 1 : "1";
		else if (eq)
			val = eq + 1;
		else if (a + 1 < argc)
			val = argv[++a];
		else
			goto bad;
		if (opt_set(o, op, val))
			goto bad;
	}
	if (!o->size || !o->bw || !o->streams || !o->cap || !o->holders || o->holders > 16)
		return -EINVAL;
	return 0;
bad:
	fprintf(stderr, "objfs-fanout-sim: bad argument '%s'\n", argv[a]);
	return -EINVAL;
}

void fsim_opts_print(const struct fsim_opts *o, FILE *f)
{
	size_t i;

	fprintf(f, "#");
	for (i = 0; i < NOPTS; i++) {
		const struct opt *op = &opt_table[i];
		const char *p = (const char *)o + op->off;

		switch (op->kind) {
		case O_STR:
			break; /* the node counts are the rows */
		case O_SIZE:
			fprintf(f, " %s=%gM", op->name, (double)*(const uint64_t *)p / MIB);
			break;
		case O_U64:
			fprintf(f, " %s=%llu", op->name, (unsigned long long)*(const uint64_t *)p);
			break;
		case O_UINT:
			fprintf(f, " %s=%u", op->name, *(const unsigned *)p);
			break;
		case O_DBL:
			fprintf(f, " %s=%g", op->name, *(const double *)p);
			break;
		case O_FLAG:
			if (*(const bool *)p)
				fprintf(f, " %s", op->name);
			break;
		case O_PRESET:
			break; /* what it set is printed */
		}
	}
	fprintf(f, "\n");
}
