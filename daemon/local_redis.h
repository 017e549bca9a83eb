/*
 * local_redis: the private redis-server behind SPEC "local".
 *
 * It listens only on a unix socket in the run directory (mode 0700), keeps
 * an append-only file in the store directory so a remount finds the names
 * again, dies with the daemon (PR_SET_PDEATHSIG), and is stopped on
 * unmount.
 */
#ifndef OBJFS_LOCAL_REDIS_H
#define OBJFS_LOCAL_REDIS_H

#include <stddef.h>

struct local_redis;

/*
 * Start redis-server and wait (up to 10 s) until it answers PING.  On
 * success *ret_url gets "unix:<rundir>/redis.sock".  NULL on failure, with
 * a message in @err.
 */
struct local_redis *local_redis_start(const char *rundir, const char *datadir, char *ret_url,
				      size_t urllen, char *err, size_t errlen);

/* Restart it if it died.  0 if running (or restarted), else -errno. */
int local_redis_check(struct local_redis *lr);

/* SIGTERM, wait up to 5 s, then SIGKILL.  NULL is fine. */
void local_redis_stop(struct local_redis *lr);

#endif
