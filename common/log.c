/*
 * log: timestamped lines, one fprintf per message so that lines from
 * several threads do not interleave.
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <time.h>

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

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	FILE *out;

	if (level > max_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&sink_lock);
	out = sink ? sink : stderr;
	fprintf(out, "%04d-%02d-%02d %02d:%02d:%02d.%03ld objfsd[%s]: %s\n", tm.tm_year + 1900,
		tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		level_names[level], line);
	fflush(out);
	pthread_mutex_unlock(&sink_lock);
}
