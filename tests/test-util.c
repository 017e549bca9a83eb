/*
 * test-util: sizes, names, node names, checksums, process liveness, slabs, the
 * open-files budget.
 */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slab.h"
#include "tap.h"
#include "util.h"

TEST(sizes)
{
	static const struct {
		const char *in;
		int err;
		uint64_t want;
	} cases[] = {
	    {"0", 0, 0},
	    {"1024", 0, 1024},
	    {"512M", 0, 512ULL << 20},
	    {"4G", 0, 4ULL << 30},
	    {"4g", 0, 4ULL << 30},
	    {"4GiB", 0, 4ULL << 30},
	    {"4GB", 0, 4ULL << 30},
	    {"1T", 0, 1ULL << 40},
	    {"10K", 0, 10240},
	    {"100B", 0, 100},
	    {"", -EINVAL, 0},
	    {"G", -EINVAL, 0},
	    {"-1", -EINVAL, 0},
	    {"1.5G", -EINVAL, 0},
	    {"4X", -EINVAL, 0},
	    {"4GiBx", -EINVAL, 0},
	    {" 4G", -EINVAL, 0},
	    {"99999999999999999999", -ERANGE, 0},
	    {"17179869184G", -ERANGE, 0},
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		uint64_t v = 12345;
		int r = util_parse_size(cases[i].in, &v);

		CHECK_EQ(r, cases[i].err);
		if (r == 0)
			CHECK_EQ(v, cases[i].want);
		else
			CHECK_EQ(v, 12345); /* untouched on failure */
	}
	CHECK_EQ(util_parse_size(NULL, NULL), -EINVAL);
}

TEST(names)
{
	char longname[300];

	CHECK_EQ(util_name_validate("a"), 0);
	CHECK_EQ(util_name_validate("with space and ünïcödé"), 0);
	CHECK_EQ(util_name_validate(".hidden"), 0);
	CHECK_EQ(util_name_validate("..."), 0);
	CHECK_EQ(util_name_validate(""), -EINVAL);
	CHECK_EQ(util_name_validate("."), -EINVAL);
	CHECK_EQ(util_name_validate(".."), -EINVAL);
	CHECK_EQ(util_name_validate("a/b"), -EINVAL);
	CHECK_EQ(util_name_validate(NULL), -EINVAL);
	memset(longname, 'x', sizeof(longname));
	longname[255] = '\0';
	CHECK_EQ(util_name_validate(longname), 0);
	longname[255] = 'x';
	longname[256] = '\0';
	CHECK_EQ(util_name_validate(longname), -ENAMETOOLONG);
	/* invalid UTF-8: stray continuation, overlong, surrogate, truncated,
	 * beyond U+10FFFF */
	CHECK_EQ(util_name_validate("a\x80"), -EILSEQ);
	CHECK_EQ(util_name_validate("\xc0\xaf"), -EILSEQ);
	CHECK_EQ(util_name_validate("\xed\xa0\x80"), -EILSEQ);
	CHECK_EQ(util_name_validate("\xe2\x82"), -EILSEQ);
	CHECK_EQ(util_name_validate("\xf4\x90\x80\x80"), -EILSEQ);
	CHECK_EQ(util_name_validate("\xf0\x9f\x98\x80"), 0); /* emoji */
}

TEST(node_names)
{
	CHECK_EQ(util_node_name_validate("node-1"), 0);
	CHECK_EQ(util_node_name_validate("a.b_c"), 0);
	CHECK_EQ(util_node_name_validate(""), -EINVAL);
	CHECK_EQ(util_node_name_validate("-x"), -EINVAL);
	CHECK_EQ(util_node_name_validate(".x"), -EINVAL);
	CHECK_EQ(util_node_name_validate("a b"), -EINVAL);
	CHECK_EQ(util_node_name_validate("a:b"), -EINVAL);
	CHECK_EQ(util_node_name_validate(
		     "0123456789012345678901234567890123456789012345678901234567890123"),
		 -EINVAL);
	CHECK_EQ(util_node_name_validate(
		     "012345678901234567890123456789012345678901234567890123456789012"),
		 0);
}

TEST(checksums)
{
	uint8_t a[OBJFS_CSUM_LEN], b[OBJFS_CSUM_LEN];
	char hex[OBJFS_CSUM_HEX];

	util_csum_buf("hello", 5, a);
	util_csum_to_hex(a, hex);
	CHECK_EQ(strlen(hex), 32);
	CHECK_EQ(util_csum_from_hex(hex, b), 0);
	CHECK(!memcmp(a, b, sizeof(a)));
	util_csum_buf("hellp", 5, b);
	CHECK(memcmp(a, b, sizeof(a)) != 0);
	/* the empty input hashes to xxh3-128's published value */
	util_csum_buf("", 0, a);
	util_csum_to_hex(a, hex);
	CHECK_STR(hex, "99aa06d3014798d86001c324468d497f");
	CHECK_EQ(util_csum_from_hex("zz", b), -EINVAL);
	CHECK_EQ(util_csum_from_hex("99aa06d3014798d86001c324468d497g", b), -EINVAL);
	CHECK_EQ(util_csum_from_hex("99aa06d3014798d86001c324468d497f0", b), -EINVAL);
}

TEST(numbers)
{
	uint64_t v = 7;

	CHECK_EQ(util_parse_u64("18446744073709551615", &v), 0);
	CHECK(v == UINT64_MAX);
	CHECK_EQ(util_parse_u64("18446744073709551616", &v), -ERANGE);
	CHECK_EQ(util_parse_u64("12a", &v), -EINVAL);
	CHECK_EQ(util_parse_u64("", &v), -EINVAL);
}

TEST(proc_liveness)
{
	int64_t now = util_now_ns(), hour = 3600 * 1000000000LL;
	pid_t child;
	int i;

	/* this process: alive, whether or not its start time is given */
	CHECK(!util_proc_gone(getpid(), 0));
	CHECK(!util_proc_gone(getpid(), now));
	/* a card written before this process started names another process
	 * that had the same pid */
	CHECK(util_proc_gone(getpid(), now - hour));
	CHECK(!util_proc_gone(0, 0));
	CHECK(!util_proc_gone(-1, 0));

	/* a child killed but not reaped (a zombie) is gone; reaped, too */
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	CHECK(child > 0);
	CHECK(!util_proc_gone(child, util_now_ns()));
	kill(child, SIGKILL);
	for (i = 0; i < 5000 && !util_proc_gone(child, now); i++)
		usleep(1000);
	CHECK(util_proc_gone(child, now));
	CHECK_EQ(waitpid(child, NULL, 0), child);
	CHECK(util_proc_gone(child, now));
}

TEST(format_sizes)
{
	static const struct {
		uint64_t in;
		const char *want;
	} cases[] = {
	    {0, "0"},
	    {1023, "1023"},
	    {1024, "1K"},
	    {1536, "1.5K"},
	    {300ULL << 20, "300M"},
	    {(300ULL << 20) + 1, "300.0M"},
	    {24684096ULL << 10, "23.5G"},
	    {1ULL << 40, "1T"},
	    {1ULL << 50, "1P"},
	    {1ULL << 60, "1024P"},
	    {UINT64_MAX, "16383.9P"},
	};
	uint64_t back;
	char buf[32];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		util_format_size(cases[i].in, buf, sizeof(buf));
		CHECK_STR(buf, cases[i].want);
	}
	/* whole ones read back */
	util_format_size(512ULL << 30, buf, sizeof(buf));
	CHECK_EQ(util_parse_size(buf, &back), 0);
	CHECK_EQ(back, 512ULL << 30);
}

/*
 * util_fd_budget(): the store's objects being written or fetched and the
 * transport's served connections add up below every open-files limit
 * from 64 on, and leave the rest at least 16 descriptors (an eighth of
 * the limit from 256).
 */
TEST(fd_budgets)
{
	static const uint64_t limits[] = {64,  100,  128,  129,	 200,	255,   256,
					  300, 1024, 4095, 4096, 20000, 65536, 1048576};
	struct util_fd_budget b;
	size_t i;

	util_fd_budget(256, &b);
	CHECK_EQ(b.serve_conns, 32);
	CHECK_EQ(b.serve_conns_per_node, 16);
	CHECK_EQ(b.open_max, 192);
	util_fd_budget(1048576, &b);
	CHECK_EQ(b.serve_conns, 256);
	CHECK_EQ(b.serve_conns_per_node, 32);
	CHECK_EQ(b.open_max, 1048576 - 1024);
	util_fd_budget(0, &b); /* unlimited */
	CHECK_EQ(b.serve_conns, 256);
	CHECK(b.open_max == UINT64_MAX);
	for (i = 0; i < ARRAY_SIZE(limits); i++) {
		uint64_t n = limits[i], rest;

		util_fd_budget(n, &b);
		CHECK(b.serve_conns >= 16 && b.serve_conns <= 256);
		CHECK(b.serve_conns_per_node <= 32 && b.serve_conns_per_node <= b.serve_conns / 2);
		CHECK(b.open_max + b.serve_conns < n);
		rest = n - b.open_max - b.serve_conns;
		CHECK(rest >= 16);
		if (n >= 256)
			CHECK(rest >= n / 8 || rest >= 768);
	}
}

/* RssAnon of this process, KiB. */
static long rss_anon_kib(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static unsigned maps_count(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned n = 0;
	int c;

	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Items come zeroed and distinct, are reused, and the pages of a block
 * whose items are all freed go back to the kernel: 200,000 items of 280
 * bytes (56 MB) make a dozen mappings, and freeing them gives back most
 * of their memory, where free() of as many malloc() chunks between
 * live ones gives back little. */
TEST(slab)
{
	enum { N = 200000, ITEM = 280 };
	struct slab_pool *p = slab_pool_new(ITEM);
	struct slab_stats st;
	unsigned maps0 = maps_count();
	long rss0, rss1, rss2;
	uint8_t **v = calloc(N, sizeof(*v));
	int i, bad = 0;

	CHECK(p != NULL && v != NULL);
	CHECK(slab_pool_new(0) == NULL);
	CHECK(slab_pool_new(SLAB_BYTES) == NULL);
	rss0 = rss_anon_kib();
	for (i = 0; i < N; i++) {
		v[i] = slab_alloc(p);
		if (!v[i] || v[i][0] || v[i][ITEM - 1])
			bad++;
		if (v[i])
			memset(v[i], i & 0xff ? i & 0xff : 1, ITEM);
	}
	CHECK_EQ(bad, 0);
	for (i = 0; i < N; i++)
		bad += v[i][0] != (i & 0xff ? i & 0xff : 1) || v[i][ITEM - 1] != v[i][0];
	CHECK_EQ(bad, 0); /* no two items overlap */
	slab_stats(p, &st);
	CHECK_EQ(st.items, N);
	CHECK_EQ(st.empty, 0);
	rss1 = rss_anon_kib();
	CHECK(rss1 - rss0 >= (long)N * ITEM / 1024 * 9 / 10);
	CHECK(maps_count() <= maps0 + 16);
	/* every other freed: blocks stay, and their holes are reused */
	for (i = 0; i < N; i += 2)
		slab_free(p, v[i]);
	for (i = 0; i < N; i += 2)
		v[i] = slab_alloc(p);
	slab_stats(p, &st);
	CHECK_EQ(st.items, N);
	CHECK_EQ(st.empty, 0);
	for (i = 0; i < N; i++)
		slab_free(p, v[i]);
	slab_free(p, NULL);
	slab_stats(p, &st);
	CHECK_EQ(st.items, 0);
	CHECK_EQ(st.empty, st.blocks);
	rss2 = rss_anon_kib();
	printf("# slab: RssAnon %ld KiB, %ld with %d items, %ld freed\n", rss0, rss1, N, rss2);
#ifndef __SANITIZE_ADDRESS__
	/* (ASan's shadow of the blocks stays) */
	CHECK(rss1 - rss2 >= (rss1 - rss0) * 8 / 10);
#endif
	/* empty blocks are used again */
	v[0] = slab_alloc(p);
	CHECK(v[0] != NULL && v[0][0] == 0);
	slab_stats(p, &st);
	CHECK_EQ(st.empty, st.blocks - 1);
	slab_pool_free(p);
	free(v);
}

int main(void)
{
	RUN(sizes);
	RUN(format_sizes);
	RUN(fd_budgets);
	RUN(names);
	RUN(node_names);
	RUN(checksums);
	RUN(numbers);
	RUN(proc_liveness);
	RUN(slab);
	return tap_done();
}
