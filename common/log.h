/*
 * log: the one log sink of an objfs process.
 *
 * The rule for the libraries (meta, store, transport, node, fs): what a
 * caller can be told goes back as an errno, not to the log.  Beyond
 * LOGL_DEBUG a library logs only what an operator must see and no errno
 * carries: a fault nobody can be told of (a corrupt Redis record met
 * inside a FUSE reply, an object lost at its seal), a condition of the
 * node (the store full, Redis unreachable, a peer that keeps failing),
 * and a one-off event of a mount's life (a migration, a reconcile, what
 * a limit came to).  A line that requests, objects, peers or a loop can
 * make the process write again and again goes through a rate limit
 * (struct log_ratelimit, log_msg_limited()), as the kernel's
 * printk_ratelimit() does: at most a burst of lines per interval, and
 * never the same line twice within an interval; what is held back is
 * counted and reported later as "N more ... suppressed".  The daemon
 * chooses the sink (stderr in the foreground, a log file in the
 * background) and the threshold.
 */
#ifndef OBJFS_LOG_H
#define OBJFS_LOG_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum log_level {
	LOGL_ERROR = 0,
	LOGL_WARN = 1,
	LOGL_INFO = 2,
	LOGL_DEBUG = 3,
};

/* Send messages at or below @max_level to @out (NULL: stderr).  Not owned. */
void log_setup(enum log_level max_level, FILE *out);
int log_enabled(enum log_level level);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOGL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOGL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOGL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOGL_DEBUG, __VA_ARGS__)

/* ---- rate limits ---- */

/* Lines remembered to hold back a repeat within the interval. */
#define LOG_RL_RECENT 16

/*
 * One rate limit, shared by the lines of one kind (one reason a
 * connection failed, say).  A window opens with the first line after the
 * last window ended and lasts interval_ns; in it at most @burst lines go
 * out, and a line identical to one that went out less than interval_ns
 * ago does not go out either.  Embed it, set it up with
 * LOG_RATELIMIT_INIT or log_ratelimit_init(), and release it with
 * log_ratelimit_release() before its memory goes, unless it is static:
 * once it held a line back it is on log_ratelimit_flush_all()'s list.
 * Thread-safe.
 */
struct log_ratelimit {
	const char *what; /* names the lines in the "suppressed" report (fixed) */
	int64_t interval_ns;
	unsigned burst;

	pthread_mutex_t lock;		  /* guards everything below; a leaf */
	int64_t begin;			  /* mono ns: the window opened (0: none yet) */
	unsigned printed;		  /* lines out in this window */
	unsigned long missed;		  /* lines held back since the last report */
	enum log_level missed_level;	  /* the most severe of them */
	uint64_t recent[LOG_RL_RECENT];	  /* hashes of lines that went out */
	int64_t recent_at[LOG_RL_RECENT]; /* and when (0: free slot) */
	unsigned recent_next;

	/* on the list log_ratelimit_flush_all() walks once it held a line
	 * back (guarded by log.c's list lock) */
	struct log_ratelimit *listed_next;
	bool listed;
};

#define LOG_RATELIMIT_INIT(what_, interval_ms, burst_)                                             \
	{                                                                                          \
		.what = (what_), .interval_ns = (int64_t)(interval_ms)*1000000, .burst = (burst_), \
		.lock = PTHREAD_MUTEX_INITIALIZER, .missed_level = LOGL_DEBUG,                     \
	}

void log_ratelimit_init(struct log_ratelimit *rl, const char *what, unsigned interval_ms,
			unsigned burst);
void log_ratelimit_release(struct log_ratelimit *rl);
/* log_ratelimit_flush() of every limit that has held a line back since it
 * was made (the daemon's ticker calls it every few seconds, so that what
 * a burst at mount held back is reported though no line of its kind
 * comes again).  Takes the list lock, then each limit's lock. */
void log_ratelimit_flush_all(void);

/*
 * The decision alone, at time @now (util_mono_ns()) for a line whose hash
 * is @hash at @level: true if it may go out, with *@ret_missed set to the
 * lines held back before it (the caller reports them first; the count
 * starts again at 0); false if it is held back (and counted).
 */
bool log_ratelimit_check(struct log_ratelimit *rl, uint64_t hash, enum log_level level, int64_t now,
			 unsigned long *ret_missed);

/*
 * log_msg() through @rl: the line goes out if @rl lets it, after a line
 * "<what>: N more suppressed" if lines were held back since the last
 * report.
 */
void log_msg_limited(struct log_ratelimit *rl, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void log_vmsg_limited(struct log_ratelimit *rl, enum log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/*
 * For a caller that ticks: if the window of @rl has ended and lines were
 * held back, report them now rather than with the next line.  Returns
 * how many were reported.
 */
unsigned long log_ratelimit_flush(struct log_ratelimit *rl);

#endif
