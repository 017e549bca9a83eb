/*
 * log: timestamped lines, one fprintf per message so that lines from
 * several threads do not interleave; and rate limits for lines that a
 * peer or a loop could repeat without end (see log.h).
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "util.h"

static enum log_level max_level = LOGL_INFO;
static FILE *sink;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

void log_setup(enum log_level level, FILE *out)
{
	max_level = level;
	sink = out;
}

int log_enabled(enum log_level level)
{
	return level <= max_level;
}

static void log_line(enum log_level level, const char *line)
{
	struct timespec ts;
	struct tm tm;
	FILE *out;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	pthread_mutex_lock(&sink_lock);
	out = sink ? sink : stderr;
	fprintf(out, "%04d-%02d-%02d %02d:%02d:%02d.%03ld objfsd[%s]: %s\n", tm.tm_year + 1900,
		tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		level_names[level], line);
	fflush(out);
	pthread_mutex_unlock(&sink_lock);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (level > max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_line(level, line);
}

/* ---- rate limits ---- */

void log_ratelimit_init(struct log_ratelimit *rl, const char *what, unsigned interval_ms,
			unsigned burst)
{
	memset(rl, 0, sizeof(*rl));
	rl->what = what;
	rl->interval_ns = (int64_t)interval_ms * 1000000;
	rl->burst = burst;
	rl->missed_level = LOGL_DEBUG;
	pthread_mutex_init(&rl->lock, NULL);
}

/* The limits that held a line back (struct log_ratelimit, listed). */
static pthread_mutex_t listed_lock = PTHREAD_MUTEX_INITIALIZER; /* before any rl->lock */
static struct log_ratelimit *listed_head;

void log_ratelimit_release(struct log_ratelimit *rl)
{
	struct log_ratelimit **p;

	pthread_mutex_lock(&listed_lock);
	for (p = &listed_head; *p; p = &(*p)->listed_next)
		if (*p == rl) {
			*p = rl->listed_next;
			break;
		}
	pthread_mutex_unlock(&listed_lock);
	pthread_mutex_destroy(&rl->lock);
}

/* @rl held a line back: on the list from now on (never under rl->lock) */
static void list_limit(struct log_ratelimit *rl)
{
	pthread_mutex_lock(&listed_lock);
	if (!rl->listed) {
		rl->listed = true;
		rl->listed_next = listed_head;
		listed_head = rl;
	}
	pthread_mutex_unlock(&listed_lock);
}

void log_ratelimit_flush_all(void)
{
	struct log_ratelimit *rl;

	pthread_mutex_lock(&listed_lock);
	for (rl = listed_head; rl; rl = rl->listed_next)
		log_ratelimit_flush(rl);
	pthread_mutex_unlock(&listed_lock);
}

/* Is a line with @hash among those that went out less than an interval
 * ago?  Called with rl->lock. */
static bool recent_locked(const struct log_ratelimit *rl, uint64_t hash, int64_t now)
{
	unsigned i;

	for (i = 0; i < LOG_RL_RECENT; i++)
		if (rl->recent_at[i] && rl->recent[i] == hash &&
		    now - rl->recent_at[i] < rl->interval_ns)
			return true;
	return false;
}

bool log_ratelimit_check(struct log_ratelimit *rl, uint64_t hash, enum log_level level, int64_t now,
			 unsigned long *ret_missed)
{
	bool ok, first_miss = false;

	pthread_mutex_lock(&rl->lock);
	if (!rl->begin || now - rl->begin >= rl->interval_ns) {
		rl->begin = now ? now : 1;
		rl->printed = 0;
	}
	ok = rl->printed < rl->burst && !recent_locked(rl, hash, now);
	if (ok) {
		rl->printed++;
		rl->recent[rl->recent_next] = hash;
		rl->recent_at[rl->recent_next] = now ? now : 1;
		rl->recent_next = (rl->recent_next + 1) % LOG_RL_RECENT;
		*ret_missed = rl->missed;
		rl->missed = 0;
		rl->missed_level = LOGL_DEBUG;
	} else {
		first_miss = rl->missed++ == 0;
		if (level < rl->missed_level)
			rl->missed_level = level;
	}
	pthread_mutex_unlock(&rl->lock);
	if (first_miss)
		list_limit(rl);
	return ok;
}

/* FNV-1a */
static uint64_t line_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

void log_vmsg_limited(struct log_ratelimit *rl, enum log_level level, const char *fmt, va_list ap)
{
	unsigned long missed = 0;
	char line[2048];

	if (level > max_level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (!log_ratelimit_check(rl, line_hash(line), level, util_mono_ns(), &missed))
		return;
	if (missed)
		log_msg(level, "%s: %lu more suppressed", rl->what, missed);
	log_line(level, line);
}

void log_msg_limited(struct log_ratelimit *rl, enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg_limited(rl, level, fmt, ap);
	va_end(ap);
}

unsigned long log_ratelimit_flush(struct log_ratelimit *rl)
{
	enum log_level level;
	unsigned long n = 0;
	int64_t now = util_mono_ns();

	pthread_mutex_lock(&rl->lock);
	if (rl->missed && now - rl->begin >= rl->interval_ns) {
		n = rl->missed;
		level = rl->missed_level;
		rl->missed = 0;
		rl->missed_level = LOGL_DEBUG;
	}
	pthread_mutex_unlock(&rl->lock);
	if (n)
		log_msg(level, "%s: %lu more suppressed", rl->what, n);
	return n;
}
