/*
 * log: the one log sink of an objfs process.
 *
 * Libraries log only at LOGL_DEBUG, or at LOGL_ERROR for faults that cannot
 * be returned to a caller (a corrupt Redis record seen inside a FUSE reply,
 * say).  The daemon chooses the sink (stderr in the foreground, a log file
 * in the background) and the threshold.
 */
#ifndef OBJFS_LOG_H
#define OBJFS_LOG_H

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

#endif
