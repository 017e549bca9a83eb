/*
 * test-log: the log sink and its rate limits (common/log.c).  The
 * decision is driven with made-up times; the lines themselves go to a
 * temporary file that the test reads back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "tap.h"
#include "util.h"

#define SEC 1000000000LL

TEST(burst_and_window)
{
	struct log_ratelimit rl;
	unsigned long missed = 99;
	int64_t t = 5 * SEC;
	int i, out = 0;

	log_ratelimit_init(&rl, "test", 1000, 3);
	/* distinct lines: three go out, the rest of the second is counted */
	for (i = 0; i < 10; i++)
		out += log_ratelimit_check(&rl, (uint64_t)i, LOGL_WARN, t + i, &missed);
	CHECK_EQ(out, 3);
	CHECK_EQ(missed, 0);
	CHECK_EQ(rl.missed, 7);
	/* still the same window */
	CHECK(!log_ratelimit_check(&rl, 100, LOGL_WARN, t + SEC - 1, &missed));
	/* a new window: the next line goes out and owes the report of 8 */
	CHECK(log_ratelimit_check(&rl, 101, LOGL_WARN, t + SEC, &missed));
	CHECK_EQ(missed, 8);
	CHECK_EQ(rl.missed, 0);
	CHECK(log_ratelimit_check(&rl, 102, LOGL_WARN, t + SEC + 1, &missed));
	CHECK_EQ(missed, 0);
	log_ratelimit_release(&rl);
}

TEST(repeats)
{
	struct log_ratelimit rl = LOG_RATELIMIT_INIT("test", 10000, 100);
	unsigned long missed = 0;
	int64_t t = SEC;
	int i, out = 0;

	/* the same line over and over: once per interval */
	for (i = 0; i < 1000; i++)
		out += log_ratelimit_check(&rl, 42, LOGL_ERROR, t + i * 1000000LL, &missed);
	CHECK_EQ(out, 1);
	CHECK_EQ(rl.missed, 999);
	/* other lines still go out meanwhile */
	CHECK(log_ratelimit_check(&rl, 43, LOGL_ERROR, t + 2 * SEC, &missed));
	CHECK_EQ(missed, 999);
	/* and the first one again once its interval is over */
	CHECK(!log_ratelimit_check(&rl, 42, LOGL_ERROR, t + 10 * SEC - 1, &missed));
	CHECK(log_ratelimit_check(&rl, 42, LOGL_ERROR, t + 10 * SEC, &missed));
	CHECK_EQ(missed, 1);
	log_ratelimit_release(&rl); /* it is on the flush list */
}

/* The lines written to @f since offset @from that contain @needle. */
static int count_lines(FILE *f, long from, const char *needle)
{
	char line[4096];
	int n = 0;

	fflush(f);
	fseek(f, from, SEEK_SET);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fseek(f, 0, SEEK_END);
	return n;
}

TEST(lines)
{
	struct log_ratelimit rl = LOG_RATELIMIT_INIT("test: bad peers", 200, 1);
	FILE *f = tmpfile();
	int i;

	CHECK(f != NULL);
	if (!f)
		return;
	log_setup(LOGL_INFO, f);
	/* a flood: one line, the rest held back */
	for (i = 0; i < 2000; i++)
		log_msg_limited(&rl, LOGL_WARN, "bad peer %d", i);
	CHECK_EQ(count_lines(f, 0, "bad peer"), 1);
	CHECK_EQ(count_lines(f, 0, "suppressed"), 0);
	/* nothing to report before the window ends */
	CHECK_EQ(log_ratelimit_flush(&rl), 0);
	usleep(250 * 1000);
	/* the next line reports the others first */
	log_msg_limited(&rl, LOGL_WARN, "bad peer again");
	CHECK_EQ(count_lines(f, 0, "test: bad peers: 1999 more suppressed"), 1);
	CHECK_EQ(count_lines(f, 0, "bad peer again"), 1);
	/* a tick reports them without a next line */
	for (i = 0; i < 5; i++)
		log_msg_limited(&rl, LOGL_WARN, "bad peer %d", i);
	usleep(250 * 1000);
	CHECK_EQ(log_ratelimit_flush(&rl), 5);
	CHECK_EQ(count_lines(f, 0, "test: bad peers: 5 more suppressed"), 1);
	CHECK_EQ(log_ratelimit_flush(&rl), 0);
	/* lines below the threshold are not even counted */
	log_msg_limited(&rl, LOGL_DEBUG, "quiet");
	CHECK_EQ(rl.missed, 0);
	CHECK_EQ(count_lines(f, 0, "quiet"), 0);
	log_setup(LOGL_INFO, NULL);
	fclose(f);
	log_ratelimit_release(&rl); /* it is on the flush list */
}

/* A static limit that held lines back is reported by
 * log_ratelimit_flush_all() (the daemon's ticker) though no line of its
 * kind comes again; a released one is off the list. */
TEST(flush_all)
{
	static struct log_ratelimit st = LOG_RATELIMIT_INIT("test: static", 200, 1);
	struct log_ratelimit heap;
	FILE *f = tmpfile();
	int i;

	CHECK(f != NULL);
	if (!f)
		return;
	log_setup(LOGL_INFO, f);
	log_ratelimit_init(&heap, "test: heap", 200, 1);
	for (i = 0; i < 4; i++) {
		log_msg_limited(&st, LOGL_WARN, "static line %d", i);
		log_msg_limited(&heap, LOGL_WARN, "heap line %d", i);
	}
	CHECK_EQ(count_lines(f, 0, "static line"), 1);
	/* (that a flush within the window reports nothing is
	 * burst_and_window's; here only outcomes once it is over) */
	usleep(250 * 1000);
	log_ratelimit_flush_all();
	CHECK_EQ(count_lines(f, 0, "test: static: 3 more suppressed"), 1);
	CHECK_EQ(count_lines(f, 0, "test: heap: 3 more suppressed"), 1);
	/* released: flush_all never touches it again */
	for (i = 0; i < 4; i++)
		log_msg_limited(&heap, LOGL_WARN, "heap line %d", i);
	log_ratelimit_release(&heap);
	memset(&heap, 0xff, sizeof(heap));
	usleep(250 * 1000);
	log_ratelimit_flush_all();
	CHECK_EQ(count_lines(f, 0, "test: heap: 3 more suppressed"), 1);
	log_setup(LOGL_INFO, NULL);
	fclose(f);
}

int main(void)
{
	RUN(burst_and_window);
	RUN(repeats);
	RUN(lines);
	RUN(flush_all);
	return tap_done();
}
