/*
 * meta_i.h: what meta.c, meta_pool.c and meta_scripts.c share.  Not for
 * other modules.
 *
 * struct meta is built by meta.c (meta_new()) and its pool run by
 * meta_pool.c, which sends the commands of meta.c's calls: a call builds a
 * struct args, borrows a slot with pool_get_call(), runs it with
 * pool_script() or pool_cmd(), and gives the slot back with pool_put().
 *
 * Every script is called as EVALSHA <sha> 0 with this ARGV header:
 *
 *   ARGV[1]  key prefix P
 *   ARGV[2]  a fresh random token (32 hex digits), the epoch to set if the
 *            namespace has to be created again
 *   ARGV[3]  now, ns since the epoch (mtime of directories it touches)
 *
 * and its own arguments from ARGV[4] on (documented per script in
 * meta_scripts.c).  A script fails with an error reply that names an errno
 * ("ENOENT", which Redis 7 sends as "ERR ENOENT"); pool_reply_errno() in
 * meta_pool.c maps it back.
 */
#ifndef OBJFS_META_I_H
#define OBJFS_META_I_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

enum meta_script {
	MS_EPOCH,
	MS_ALLOC,
	MS_LOOKUP,
	MS_GETATTR,
	MS_READDIR,
	MS_MKDIR,
	MS_RMDIR,
	MS_PUBLISH,
	MS_UNLINK,
	MS_RENAME,
	MS_REREGISTER,
	MS_CLAIM,
	MS_HEARTBEAT,
	MS_RELEASE,
	MS_PATH,
	META_NSCRIPTS
};

/* Lua source of each script, indexed by enum meta_script. */
extern const char *const meta_script_src[META_NSCRIPTS];
/* Short names, for debug messages. */
extern const char *const meta_script_name[META_NSCRIPTS];

/* Publish walks at most this many "/parent" links to build a path (a
 * deeper one could not fit OBJFS_PATH_MAX anyway; it returns ""). */
#define META_PATH_DEPTH 2048
/* Rename's cycle check walks at most this many, then gives ELOOP. */
#define META_WALK_MAX 16384

#define SHA_LEN 40

/* One slot of the pool. */
struct conn {
	redisContext *ctx;		/* NULL while down; used only by the borrower */
	char sha[META_NSCRIPTS][SHA_LEN + 1];	/* used only by the borrower */
	bool busy;			/* guarded by meta.lock */
};

struct meta {
	/* set by meta_new(), read-only afterwards */
	char *url;			/* redacted */
	char *host;			/* redis:// */
	int port;
	char *sock;			/* unix: */
	char *password;			/* NULL: no AUTH */
	unsigned db;
	char *prefix;
	char *node;
	unsigned pool_size;
	unsigned timeout_ms;

	pthread_mutex_t lock;
	pthread_cond_t freed;		/* a slot went back to the pool */
	struct conn *conns;		/* [pool_size]; busy flags guarded by lock */
	unsigned backoff_ms;		/* guarded by lock; 0 while healthy */
	int64_t retry_at;		/* guarded by lock; mono ns */
	bool probing;			/* guarded by lock */
	char last_err[256];		/* guarded by lock */
	bool up;			/* atomic */
};

/* ---- argument vectors (meta_pool.c) ---- */

#define ARGS_MAX 20

struct args {
	int n;
	const char *v[ARGS_MAX];
	size_t len[ARGS_MAX];
	char num[ARGS_MAX][24];
	char token[2 * 16 + 1];
};

/* Ends the arguments of args_add(), script() and command(), so that a
 * format that does not match its arguments trips an assertion. */
extern const char args_end[];

void args_vadd(struct args *a, const char *fmt, va_list ap);
void args_add_(struct args *a, const char *fmt, ...);
#define args_add(a, fmt, ...) args_add_(a, fmt, ##__VA_ARGS__, args_end)

/* Start the ARGV of a script: three slots for EVALSHA sha 0, then the
 * header above.  0 or a negative errno (no random token). */
int args_script(const struct meta *m, struct args *a);

/* ---- the pool (meta_pool.c) ---- */

/* Borrow a connected slot.  0, -EIO (Redis unreachable, in backoff, or no
 * slot free within the timeout), -EACCES, -ENOMEM. */
int pool_get(struct meta *m, struct conn **ret);
/* pool_get() for a call other than meta_connect(): only -EIO or -ENOMEM. */
int pool_get_call(struct meta *m, struct conn **ret);
/* Give a slot from pool_get() back. */
void pool_put(struct meta *m, struct conn *c);

/* One command on a borrowed slot.  The reply (caller frees it with
 * freeReplyObject()) may be an error reply; a failed context gives -EIO
 * (or -ENOMEM) and is dropped. */
int pool_cmd(struct meta *m, struct conn *c, struct args *a, redisReply **ret);
/* Run script @s on a borrowed slot, @a from args_script(); an error reply
 * becomes an errno.  The caller frees the reply with freeReplyObject(). */
int pool_script(struct meta *m, struct conn *c, enum meta_script s, struct args *a,
		redisReply **ret);

/* The one map from an error reply to a negative errno. */
int pool_reply_errno(const redisReply *rep);

/* Fill the url, host, port, sock, password and db of @m from @url (see
 * meta.h).  0, -EINVAL or -ENOMEM; meta_free() frees what it filled. */
int pool_parse_url(struct meta *m, const char *url);

/* ---- strings ---- */

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/* Are the @len bytes at @s 1..@max characters out of @set? */
static inline bool chars_in(const char *s, size_t len, size_t max, const char *set)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (!s[i] || !strchr(set, s[i]))
			return false;
	return len > 0 && len <= max;
}

#endif
