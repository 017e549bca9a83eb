/*
 * meta_i.h: what the files of meta/ share.  Not for other modules.
 * From the bottom up: meta_reply.c (validators) and meta_conn.c (one
 * connection), then meta_route.c and meta_sentinel.c (where the target
 * is), meta_pool.c (the pool and its target), and on top meta.c,
 * meta_nodes.c, meta_subscriber.c and the others, whose calls use the
 * pool; no file calls one above it (tests/layering checks).
 *
 * meta may use common only: it speaks Redis and knows nothing of the
 * store, the transport or FUSE; its callers hand it ids, paths and node
 * names.
 *
 * struct meta is built by meta.c (meta_new()) and its pool run by
 * meta_pool.c, which sends the commands of meta.c's and meta_nodes.c's
 * calls: a call builds a struct args, borrows a slot with
 * meta_pool_get_call(), runs it with meta_pool_script() or
 * meta_pool_cmd() (or the meta_script() and meta_command() helpers of
 * meta_pool.c), and gives the slot back with meta_pool_put().  The
 * invalidation subscriber (meta_subscriber.c) connects on its own with
 * meta_pool_connect().
 *
 Every script is called as EVALSHA <sha> <numkeys> <KEYS...> with this
 * ARGV header:
 *
 *   ARGV[1]  key prefix P
 *   ARGV[2]  a fresh random token (32 hex digits), the epoch to set if the
 *            namespace has to be created again
 *   ARGV[3]  now, ns since the epoch (mtime of directories it touches)
 *   ARGV[4]  the node whose kernel made the change, or "-": it goes into
 *            the invalidations the script publishes, so that this node
 *            can skip the kernel notifications it does not need
 *
 * and its own arguments from ARGV[5] on (documented per script in
 * meta_scripts.c).  KEYS are every key the script reads or writes that
 * its arguments name (meta_script_keys()); all carry the hash tag {P}, as do
 * the keys a script finds on its way (a walk up the parents), so a script
 * runs in one Redis Cluster slot.  A script fails with an error reply that names an errno
 * ("ENOENT", which Redis 7 sends as "ERR ENOENT"); meta_conn_reply_errno() in
 * meta_pool.c maps it back.
 */
#ifndef OBJFS_META_I_H
#define OBJFS_META_I_H

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "meta.h"

enum meta_script {
	MS_INIT,
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
	MS_LOCATE,
	MS_RELEASE_REPLICA,
	MS_MEMBERS,
	MS_ADD_HOLDER,
	MS_OBJPATH,
	MS_READDIR_PAGE,
	MS_SYNC_HOLDERS,
	MS_REREGISTER_BATCH,
	MS_FAN_LEAVE,
	MS_SETATTR,
	MS_SYMLINK,
	MS_READLINK,
	MS_LINK,
	MS_MIGRATE,
	MS_DEL_HOLDER,
	META_NSCRIPTS
};

/* Lua source of each script, indexed by enum meta_script. */
extern const char *const meta_script_src[META_NSCRIPTS];
/* Short names, for debug messages. */
extern const char *const meta_script_name[META_NSCRIPTS];

/* Publish walks at most this many "/parent" links to build a path (a
 * deeper one could not fit OBJFS_PATH_MAX anyway; it returns ""). */
#define META_PATH_DEPTH 2048

/* The layout of the namespace this objfsd reads and writes (key
 * {P}:layout; meta.h has the schema, meta_layout.c the migration from
 * layout 1, which had no such key).  {P}:nodes, layout 1's set of
 * members, holds this text instead, so that an objfsd older than the
 * layout key fails its node claim (WRONGTYPE) and names the key whose
 * value says why. */
#define META_LAYOUT 3
/* The layout key while a namespace of layout 1 or 2 is migrated: nodes
 * of layout 2 refuse it, nodes of layout 3 go on with the migration. */
#define META_LAYOUT_MOVING "2>3"
#define META_LAYOUT_POISON \
	"objfs namespace layout 2 or later: this objfsd is too old for it, upgrade it"
/* Rename's cycle check walks at most this many, then gives ELOOP. */
#define META_WALK_MAX 16384

#define SHA_LEN 40
#define PREFIX_MAX 64
/* a holder set larger than this is corrupt (-EBADMSG) */
#define HOLDERS_MAX 4096
/* reconnect backoff, of the pool and of the subscriber */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* ids meta_alloc_id() checks in one round trip, and how long they count
 * as checked */
#define ID_BLOCK 32
#define ID_BLOCK_TTL_NS (10 * 1000000000LL)

/* at most this many sentinels or cluster seed nodes in a URL */
#define SEEDS_MAX 16
/* a host name (253) or an IPv6 address, and the NUL */
#define HOST_MAX 256
/* a call retries a redirect or a failover at most this often */
#define RETRY_MAX 16

struct sub;
struct route;
struct watch;

/* How the URL reaches Redis (meta.h, "URL"). */
enum meta_engine {
	ENGINE_REDIS,	 /* redis:// or unix: one server */
	ENGINE_SENTINEL, /* redis-sentinel://: the master the sentinels name */
	ENGINE_CLUSTER,	 /* redis-cluster://: the master of the namespace's slot */
};

/* A TCP address; port 0: none. */
struct addr {
	char host[HOST_MAX]; /* a name, IPv4, or IPv6 without brackets */
	int port;
};

/* One slot of the pool. */
struct conn {
	redisContext *ctx;		      /* NULL while down; used only by the borrower */
	char sha[META_NSCRIPTS][SHA_LEN + 1]; /* used only by the borrower */
	uint64_t gen;			      /* meta.gen it connected in; the borrower's */
	bool busy;			      /* guarded by meta.lock */
};

struct meta {
	/* set by meta_new(), read-only afterwards */
	char *url;  /* redacted */
	char *host; /* redis:// */
	int port;
	char *sock;	/* unix: */
	char *password; /* NULL: no AUTH */
	unsigned db;
	enum meta_engine engine;
	struct addr seeds[SEEDS_MAX]; /* sentinels, or cluster seed nodes */
	unsigned nseeds;
	char *master; /* the sentinels' name of the master */
	char *prefix;
	char *node;
	unsigned pool_size;
	unsigned timeout_ms;

	pthread_mutex_t lock;
	pthread_cond_t freed; /* a slot went back to the pool */
	struct conn *conns;   /* [pool_size]; busy flags guarded by lock */
	unsigned backoff_ms;  /* guarded by lock; 0 while healthy */
	int64_t retry_at;     /* guarded by lock; mono ns */
	bool probing;	      /* guarded by lock */
	char last_err[256];   /* guarded by lock */
	/* The target: where the pool connects.  Fixed for ENGINE_REDIS;
	 * otherwise resolved (port 0 or stale: resolve before connecting).
	 * gen counts the changes of target: a connection made in an older
	 * generation is dropped when borrowed, so bumping gen drops the
	 * whole pool (and its scripts, loaded per connection). */
	struct addr tgt;      /* guarded by lock */
	bool tgt_stale;	      /* guarded by lock */
	uint64_t gen;	      /* guarded by lock */
	struct route *route;  /* guarded by lock; ENGINE_CLUSTER's slot map */
	unsigned sentinel_at; /* guarded by lock; the sentinel that answered last */
	struct watch *watch;  /* guarded by lock; ENGINE_SENTINEL's watcher */
	atomic_bool up;
	/* the highest write sequence a publish of ours got back (meta.c) */
	atomic_uint_fast64_t seq_seen;

	/* ids checked unused in Redis and not yet handed out (meta.c,
	 * meta_alloc_id()): one round trip checks ID_BLOCK of them */
	pthread_mutex_t id_lock;
	uint64_t ids[ID_BLOCK]; /* guarded by id_lock */
	unsigned nids;		/* guarded by id_lock */
	int64_t ids_at;		/* guarded by id_lock; mono ns of the check */

	/* serializes meta_subscribe() and meta_unsubscribe(); held while
	 * the subscriber thread starts and while it is joined */
	pthread_mutex_t sub_lock;
	struct sub *sub; /* guarded by sub_lock; meta_subscriber.c */
};

/* ---- argument vectors (meta_pool.c) ---- */

#define ARGS_MAX 32
/* keys a script declares (meta_script_keys()), and the room for one */
#define ARGS_KEYS_MAX 10
#define KEY_MAX (PREFIX_MAX + 40)

struct args {
	int n;
	const char *src; /* EVALSHA's script source (an ASK redirect loads it) */
	const char *v[ARGS_MAX];
	size_t len[ARGS_MAX];
	char num[ARGS_MAX][24];
	char token[2 * 16 + 1];
	/* the KEYS of a script call, set by meta_script_keys() */
	char keys[ARGS_KEYS_MAX][KEY_MAX];
	char nkeys[12];
	bool keyed;
};

/* Ends the arguments of meta_args_add(), meta_script() and meta_command(), so that a
 * format that does not match its arguments trips an assertion. */
extern const char meta_args_end[];

void meta_args_vadd(struct args *a, const char *fmt, va_list ap);
void meta_args_add_(struct args *a, const char *fmt, ...);
#define meta_args_add(a, fmt, ...) meta_args_add_(a, fmt, ##__VA_ARGS__, meta_args_end)

/* Start the ARGV of a script: three slots for EVALSHA sha numkeys, then
 * the header above, with ARGV[4] this node's name if @self (the change is
 * made through this node's kernel, which therefore knows it already) or
 * "-".  0 or a negative errno (no random token). */
int meta_args_script(const struct meta *m, struct args *a, bool self);

/* Put the KEYS of script @s (meta_scripts.c says which, from its ARGV)
 * between "EVALSHA sha numkeys" and the ARGV of @a, once.  0, or -EINVAL
 * if an ARGV it needs is missing. */
int meta_script_keys(const struct meta *m, enum meta_script s, struct args *a);

/* meta.c's checks of what a caller sends: 0 or -EINVAL.  An absolute
 * path of valid names; an object record (its checksum in hex into
 * @hex). */
int meta_path_check(const char *path);
int meta_obj_check(const struct meta_obj *obj, char hex[OBJFS_CSUM_HEX]);

/* ---- the pool (meta_pool.c) ---- */

/* Borrow a connected slot.  0, -EIO (Redis unreachable, in backoff, or no
 * slot free within the timeout), -EACCES, -ENOMEM. */
int meta_pool_get(struct meta *m, struct conn **ret);
/* meta_pool_get() for a call other than meta_connect(): only -EIO or -ENOMEM. */
int meta_pool_get_call(struct meta *m, struct conn **ret);
/* Give a slot from meta_pool_get() back. */
void meta_pool_put(struct meta *m, struct conn *c);

/* One command on a borrowed slot.  The reply (caller frees it with
 * freeReplyObject()) may be an error reply; a failed context gives -EIO
 * (or -ENOMEM) and is dropped. */
int meta_pool_cmd(struct meta *m, struct conn *c, struct args *a, redisReply **ret);
/* Run script @s on a borrowed slot, @a from meta_args_script(); an error reply
 * becomes an errno.  The caller frees the reply with freeReplyObject(). */
int meta_pool_script(struct meta *m, struct conn *c, enum meta_script s, struct args *a,
		     redisReply **ret);

/* ---- one connection to one server (meta_conn.c) ---- */

/* The one map from an error reply to a negative errno. */
int meta_conn_reply_errno(const redisReply *rep);
/* The same, of an error reply's text (an errno name first). */
int meta_conn_errno_of(const char *str);
/* The one map from a failed context to a negative errno (@e: errno right
 * after the failing call), with a text into @why. */
int meta_conn_error(const redisContext *ctx, int e, char *why, size_t len);

/*
 * A context of the caller's own, outside the pool, to the current target
 * (resolved first if need be): connected with send and receive timeouts
 * of @timeout_ms, authenticated and with the database selected as the URL
 * says.  *@ret_gen: the generation of the target it reached (the caller
 * reconnects when meta_pool_gen() moves on).  0, -EIO, -EACCES or -ENOMEM,
 * with a text in @why.  The caller frees it with redisFree().
 */
int meta_pool_connect(struct meta *m, unsigned timeout_ms, redisContext **ret, uint64_t *ret_gen,
		      char *why, size_t wlen);
/* A context to @a (NULL: the unix socket of the URL), with send and
 * receive timeouts of @timeout_ms; with @auth, AUTH and SELECT as the URL
 * says.  0, -EIO, -EACCES or -ENOMEM, with a text in @why. */
int meta_conn_open(struct meta *m, const struct addr *a, unsigned timeout_ms, bool auth,
		   redisContext **ret, char *why, size_t wlen);
/* One command on a context of the caller's own (SIGPIPE blocked).  The
 * reply may be an error reply; a failed context gives a negative errno
 * with the reason in @why, and is then unusable. */
int meta_conn_cmd(redisContext *ctx, int argc, const char **argv, redisReply **ret, char *why,
		  size_t wlen);
/* Send what is queued on @ctx (a few bytes: the socket takes them). */
int meta_conn_flush(redisContext *ctx, char *why, size_t wlen);
/*
 * The next reply on the non-blocking use of @ctx, waiting until @deadline
 * (mono ns) or until @wake_fd is readable.  0, -ETIMEDOUT (the deadline
 * passed), -ECANCELED (@wake_fd), or another negative errno with the
 * reason in @why (the context is then unusable).
 */
int meta_conn_next(redisContext *ctx, int wake_fd, int64_t deadline, redisReply **ret, char *why,
		   size_t wlen);

/* SIGPIPE held off around a write to a socket whose peer may be gone:
 * block, write, unblock (@failed: the write failed, so a SIGPIPE it
 * raised is taken, unless one was pending before). */
struct meta_sigpipe_guard {
	sigset_t old;
	bool was_pending;
};
void meta_conn_sigpipe_block(struct meta_sigpipe_guard *g);
void meta_conn_sigpipe_unblock(struct meta_sigpipe_guard *g, bool failed);
/* The next reply on a blocking @ctx: 0, or a negative errno (the context
 * is then unusable) with the reason in @why. */
int meta_conn_read_reply(redisContext *ctx, redisReply **ret, char *why, size_t len);
/* meta_conn_open() without the wait for AUTH and SELECT: with @auth they
 * are queued, and meta_conn_auth() reads their replies. */
int meta_conn_connect(struct meta *m, const struct addr *a, unsigned timeout_ms, bool auth,
		      redisContext **ret, char *why, size_t wlen);
int meta_conn_auth(struct meta *m, redisContext *ctx, char *why, size_t wlen);
/* Whether @rep is the SHA1 SCRIPT LOAD answers (40 hex digits). */
bool meta_conn_is_sha(const redisReply *rep);
/* -EINVAL with the message in @why (the URL itself is never shown: it may
 * hold the password). */
int __attribute__((format(printf, 3, 4)))
meta_conn_bad_url(char *why, size_t wlen, const char *fmt, ...);
/* The @len decimal digits at @s, from @min to @max: 0 or -EINVAL. */
int meta_conn_parse_range(const char *s, size_t len, uint64_t min, uint64_t max, uint64_t *ret);
/* At most this much of a bad part of a URL goes into a message. */
#define META_SHOWN(len) ((int)((len) > 100 ? 100 : (len)))
/* meta_addr_parse() with what is wrong in @why. */
int meta_addr_parse_why(const char *s, size_t len, int def_port, struct addr *ret, char *why,
			size_t wlen);

/* ---- the pool's target (meta_pool.c) ---- */

/* The generation of the target (struct meta, "target"). */
uint64_t meta_pool_gen(struct meta *m);
/* The target is @a from now on (a redirect, a failover): if it moved,
 * bump the generation and end any backoff.  @why goes to the debug log. */
void meta_pool_target_set(struct meta *m, const struct addr *a, const char *why);
/* The target of generation @gen failed: resolve it again before the next
 * connect (nothing if the generation moved on already). */
void meta_pool_target_stale(struct meta *m, uint64_t gen);

/* Fill the url, host, port, sock, password, db, engine, seeds and master
 * of @m from @url (see meta.h).  0, -EINVAL (what is wrong in @why, which
 * may be NULL) or -ENOMEM; meta_pool_release() frees what it filled. */
int meta_pool_parse_url(struct meta *m, const char *url, char *why, size_t wlen);
/* host:port, [v6]:port, or host alone (@def_port) as the @len bytes at @s
 * hold it.  0 or -EINVAL. */
int meta_addr_parse(const char *s, size_t len, int def_port, struct addr *ret);
/* Free what meta_pool_parse_url(), the slot map and the sentinel watcher hold
 * (meta_free(), after the subscriber stopped). */
void meta_pool_release(struct meta *m);

/* ---- Redis Cluster (meta_route.c) ---- */

#define SLOTS 16384

/* CRC16/XMODEM, the checksum of Redis Cluster's key slots. */
uint16_t meta_route_crc16(const void *s, size_t len);
/* The slot of key @key (@len bytes), with the hash tag rule. */
unsigned meta_route_keyslot(const char *key, size_t len);
/* The slot of the namespace: every key is "{P}:...". */
unsigned meta_route_ns_slot(const struct meta *m);
/*
 * Read the slot map (CLUSTER SLOTS) from @first (if not NULL), then the
 * masters of the map, then the seed nodes, until one answers; keep it and
 * put the master of the namespace's slot in @ret.  0, -EIO (with the
 * reason in @why), -EACCES or -ENOMEM.  Bounded: one connect and round
 * trip of timeout_ms per node, at most SEEDS_MAX + 16 nodes.
 */
int meta_route_resolve(struct meta *m, const struct addr *first, struct addr *ret, char *why,
		       size_t wlen);
/* Is the first key of @a (EVALSHA: the first after numkeys) in the
 * namespace's slot?  0, or -EXDEV (logged: a bug of the caller). */
int meta_route_check(const struct meta *m, const struct args *a);
void meta_route_free(struct route *r);

enum redirect {
	RD_NONE,	/* an answer (or an error that is one) */
	RD_MOVED,	/* MOVED slot host:port: the slot has a new owner */
	RD_ASK,		/* ASK slot host:port: this command only, there */
	RD_TRYAGAIN,	/* TRYAGAIN: a migration is under way, wait */
	RD_NONLOCAL,	/* a script's non local key: read the map, wait */
	RD_CLUSTERDOWN, /* CLUSTERDOWN: back off */
	RD_RESOLVE,	/* READONLY, LOADING, MASTERDOWN: find the master */
	RD_NOSCRIPT,	/* NOSCRIPT: load the script, then again */
};
/* What error reply @rep asks of the caller; MOVED and ASK fill @ret. */
enum redirect meta_redirect_kind(const redisReply *rep, struct addr *ret);

/* ---- Redis Sentinel (meta_sentinel.c) ---- */

/*
 * Ask the sentinels, one after the other from the one that answered
 * last, where the master is.  0, or -EIO (the reason in @why) or
 * -ENOMEM.  Bounded: a connect and two round trips of timeout_ms per
 * sentinel.
 */
int meta_sentinel_resolve(struct meta *m, struct addr *ret, char *why, size_t wlen);
/* Where the master is now, told by the sentinels: the pool's
 * meta_pool_target_set(), given to the watcher so that meta_sentinel.c
 * does not call up into the pool. */
typedef void meta_target_fn(struct meta *m, const struct addr *a, const char *why);
/* Start the thread that follows +switch-master (once; later calls do
 * nothing), telling @moved.  0 or a negative errno. */
int meta_sentinel_watch_start(struct meta *m, meta_target_fn *moved);
/* Stop and join it (meta_free()). */
void meta_sentinel_watch_stop(struct meta *m);

/* ---- calls and replies (meta.c) ---- */

/* Run script @s with its own arguments as @fmt says (see meta_args_vadd()). */
int meta_script_(struct meta *m, enum meta_script s, bool self, redisReply **ret, const char *fmt,
		 ...);
/* Is @b (NULL: none) block sums as text that a script may store: digits,
 * ':' and lower-case hex, at most BSUM_TEXT_MAX bytes (bsum.h)? */
bool meta_bsum_text_ok(const char *b);
/* One plain command built as @fmt says; an error reply becomes an errno. */
int meta_command_(struct meta *m, redisReply **ret, const char *fmt, ...);
/* A script on object @id and this node that answers 0, 1 or 2: that, or -errno. */
int meta_node_obj_script(struct meta *m, enum meta_script ms, uint64_t id);
#define meta_script(m, s, ret, fmt, ...) \
	meta_script_(m, s, false, ret, fmt, ##__VA_ARGS__, meta_args_end)
/* The same for a change made through this node's kernel (ARGV[4]). */
#define meta_script_self(m, s, ret, fmt, ...) \
	meta_script_(m, s, true, ret, fmt, ##__VA_ARGS__, meta_args_end)
#define meta_command(m, ret, fmt, ...) meta_command_(m, ret, fmt, ##__VA_ARGS__, meta_args_end)

/* A bulk string of at most @max bytes and without NULs, or NULL. */
const char *meta_rep_text(const redisReply *r, size_t max);
/* Decimal numbers in bulk strings: 0 or -EBADMSG. */
int meta_rep_u64(const redisReply *r, uint64_t *ret);
int meta_rep_i64(const redisReply *r, int64_t *ret);
/* An id: decimal, no leading zero, 1 .. UINT64_MAX.  0 or -EBADMSG. */
int meta_parse_id(const char *s, uint64_t *ret);
/* An object record from its fields size, csum, mtime, origin. */
int meta_rep_obj(redisReply *const *f, uint64_t id, struct meta_obj *ret);
/* Field @field of record @kind @id (an object, a directory) is @r:
 * logged as corrupt; -EBADMSG. */
int meta_rep_bad_field(const char *kind, uint64_t id, const char *field, const redisReply *r);
/* What a script returned of @id (of @kind; 0: any), as lookup returns
 * it, into *@ret (may be NULL); frees @rep.  -EBADMSG if not that. */
int meta_rep_entry_of(redisReply *rep, enum meta_kind kind, uint64_t id, struct meta_entry *ret);
/* A reply that is an id (meta_parse_id()), a name's entry ("d<id>",
 * "f<id>[ ...]": its kind and id), or lookup's answer for a name, as the
 * scripts give them: 0 or -EBADMSG (meta_reply.c). */
int meta_rep_id(const redisReply *r, uint64_t *ret);
int meta_rep_entry(const redisReply *r, enum meta_kind *kind, uint64_t *id);
int meta_rep_lookup(const redisReply *rep, struct meta_entry *ret);
/* Tries before giving up on finding an unused id: each draw collides with
 * an id Redis knows with a chance below 2^-30 even at 2^33 objects. */
#define ID_TRIES 8
/* Text @t as meta_attr_text() writes it, for an entry whose mtime is
 * @mtime_ns, into *@ret (meta_attr.c).  -EBADMSG if it is not that. */
int meta_attr_parse(const char *t, int64_t mtime_ns, struct meta_attr *ret);
/* The fields of a node card, in the order the scripts return them
 * (LUA_NODES in meta_scripts.c). */
#define META_CARD_FIELDS 9
/* A node card (of node @node, for the log) from its fields host, pid,
 * listen, instance, started, capacity, used, caps, rdma. */
int meta_rep_card(redisReply *const *f, const char *node, struct meta_card *ret);
/* The "rdma" field of @node's card: the address, or "" if it has none
 * or a malformed one (which is logged, rate limited).  Owned by @r. */
const char *meta_rep_rdma(const redisReply *r, const char *node);
/* A caps string as struct meta_card allows it ("" included)? */
bool meta_caps_valid(const char *s, size_t len);

/* ---- corrupt records (meta.c) ---- */

/* Room for a value from Redis as meta_rep_shown() and meta_esc() show it. */
#define META_SHOWN_MAX 160

/*
 * Log "corrupt record in Redis: <what>" at LOGL_ERROR: the one line that
 * names the key, or the object or directory and the field and value, of
 * a record a call rejects (its caller only learns -EBADMSG).  Rate
 * limited: the same line at most once in 10 s, at most 100 lines in 10 s.
 */
void meta_log_corrupt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same for an error reply that meta_conn_reply_errno() maps to -EBADMSG:
 * a WRONGTYPE from command or script @what on @key (NULL if not known),
 * or the message of a script's EBADMSG. */
void meta_log_bad_reply(const char *what, const char *key, const char *str);
/* @s (@len bytes) fit for a log line in @buf (@size >= 8): control bytes,
 * backslashes and the bytes of invalid UTF-8 as \xNN, cut with "...". */
const char *meta_esc(const char *s, size_t len, char *buf, size_t size);
/* How reply @r shows in a log line: "'value'" (escaped), "missing" (nil),
 * or what it is; in @buf (or a constant). */
const char *meta_rep_shown(const redisReply *r, char *buf, size_t size);

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
