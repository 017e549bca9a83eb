/*
 * transport: the part above the backends.  Owns the config, the choice of
 * backend (and what it tells the fetch engine: its tuning, which peers'
 * cards it can reach), the per-peer cache of client connections, the
 * counters, and reading the secret file.  What serving a GET means is
 * serve.c's.
 *
 * Connection cache.  t->peers is a uthash table keyed by node name, under
 * t->lock.  Each peer holds the address its connections were made to, a
 * generation number and a list of idle connections (at most
 * conns_per_peer).  A fetch borrows an idle connection (after asking the
 * backend whether the peer has closed it meanwhile) or makes a new one
 * outside the lock; there is no cap on connections in use, only on those
 * kept, so a fetch never waits for another.  Afterwards the connection
 * goes back to the list, unless it broke, the list is full, or the peer's
 * generation changed while it was out: a new address for the peer, or
 * transport_forget_peer(), gives it a new generation and closes its idle
 * connections at once and its busy ones when they come back.
 *
 * A peer that restarted leaves dead connections in the cache.  Those
 * found closed at borrow time are dropped; one that fails with a reset
 * before any reply byte arrived is retried once on a fresh connection,
 * which is safe because GET has no side effects.
 *
 * Counters are relaxed atomics; transport_stats() reads each on its own,
 * so a snapshot is not atomic as a whole.
 */
#define _GNU_SOURCE
#include "transport_i.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>

#include "log.h"

#define DEFAULT_CONNS_PER_PEER 4

/* One peer in t->peers; every field under t->lock. */
struct peer {
	char name[OBJFS_NODE_MAX];
	char addr[TRANSPORT_ADDR_MAX];
	uint64_t gen;
	struct tconn *idle;
	unsigned n_idle;
	UT_hash_handle hh;
};

static const struct transport_ops *const backends[] = {
    &tcp_ops,
};

int ms_left(int64_t deadline_ns)
{
	int64_t left = deadline_ns - mono_ns();

	if (left <= 0)
		return 0;
	/* round up, so that a wait does not end just before the deadline */
	return (int)((left + 999999) / 1000000);
}

/* ---- lifecycle ---- */

static const struct transport_ops *backend_find(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

static bool ops_valid(const struct transport_ops *ops)
{
	return ops && ops->name && ops->caps && ops->streams_per_peer && ops->connect &&
	       ops->fetch && ops->idle_ok && ops->close;
}

/* What the "N more suppressed" lines of each enum tlog say. */
static const char *const tlog_what[TLOG_N] = {
    [TLOG_BAD_FRAME] = "transport: bad frames",
    [TLOG_HANDSHAKE] = "transport: failed handshakes",
    [TLOG_REFUSED] = "transport: refused peers",
    [TLOG_LIMIT] = "transport: connections refused for the limits",
    [TLOG_EVICT] = "transport: connections closed to make room",
    [TLOG_CONN] = "transport: failed connections",
};

void transport_log(struct transport *t, enum tlog why, enum log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg_limited(&t->log_rl[why], level, fmt, ap);
	va_end(ap);
}

void transport_log_flush(struct transport *t)
{
	int i;

	for (i = 0; i < TLOG_N; i++)
		log_ratelimit_flush(&t->log_rl[i]);
}

struct transport *transport_new_ops(const struct transport_config *cfg,
				    const struct transport_ops *ops, int *ret_err)
{
	struct transport *t;
	int err = -EINVAL, i;

	if (!cfg || !cfg->node || node_name_validate(cfg->node) || !ops_valid(ops))
		goto fail;
	if (cfg->secret
		? cfg->secret_len < TRANSPORT_SECRET_MIN || cfg->secret_len > TRANSPORT_SECRET_MAX
		: cfg->secret_len != 0)
		goto fail;

	err = -ENOMEM;
	t = calloc(1, sizeof(*t));
	if (!t)
		goto fail;
	t->ops = ops;
	snprintf(t->node, sizeof(t->node), "%s", cfg->node);
	if (cfg->listen_host) {
		t->listen_host = strdup(cfg->listen_host);
		if (!t->listen_host)
			goto free_t;
	}
	t->listen_port = cfg->listen_port;
	if (cfg->secret) {
		t->secret = malloc(cfg->secret_len);
		if (!t->secret)
			goto free_host;
		memcpy(t->secret, cfg->secret, cfg->secret_len);
		t->secret_len = cfg->secret_len;
	}
	t->io_timeout_ms = cfg->io_timeout_ms ? cfg->io_timeout_ms : TRANSPORT_DEFAULT_TIMEOUT_MS;
	t->conns_per_peer = cfg->conns_per_peer ? cfg->conns_per_peer : DEFAULT_CONNS_PER_PEER;
	if (t->conns_per_peer > TRANSPORT_CONNS_PER_PEER_MAX)
		t->conns_per_peer = TRANSPORT_CONNS_PER_PEER_MAX;
	t->get_max = WIRE_LEN_MAX;
	t->serve_conns = TRANSPORT_SERVE_CONNS;
	t->serve_conns_per_node = TRANSPORT_SERVE_CONNS_PER_NODE;
	t->serve_handshakes = TRANSPORT_SERVE_HANDSHAKES;
	for (i = 0; i < TLOG_N; i++)
		log_ratelimit_init(&t->log_rl[i], tlog_what[i], 1000, 1);
	tbucket_init(&t->bucket, cfg->serve_bwlimit);
	pthread_mutex_init(&t->lock, NULL);
	if (ret_err)
		*ret_err = 0;
	return t;

free_host:
	free(t->listen_host);
free_t:
	free(t);
fail:
	if (ret_err)
		*ret_err = err;
	return NULL;
}

struct transport *transport_new(const struct transport_config *cfg, int *ret_err)
{
	const struct transport_ops *ops = NULL;

	if (cfg)
		ops = backend_find(cfg->backend ? cfg->backend : "tcp");
	if (!ops) {
		if (ret_err)
			*ret_err = -EINVAL;
		return NULL;
	}
	return transport_new_ops(cfg, ops, ret_err);
}

static void conn_close(struct transport *t, struct tconn *c)
{
	t->ops->close(c);
	COUNT_SUB(t, conns_open, 1);
}

static void conn_close_list(struct transport *t, struct tconn *c)
{
	while (c) {
		struct tconn *next = c->next;

		conn_close(t, c);
		c = next;
	}
}

void transport_free(struct transport *t)
{
	struct peer *p, *tmp;
	int i;

	if (!t)
		return;
	if (t->serving && t->ops->stop)
		t->ops->stop(t);
	HASH_ITER (hh, t->peers, p, tmp) {
		HASH_DEL(t->peers, p);
		conn_close_list(t, p->idle);
		free(p);
	}
	pthread_mutex_destroy(&t->lock);
	tbucket_release(&t->bucket);
	for (i = 0; i < TLOG_N; i++)
		log_ratelimit_release(&t->log_rl[i]);
	if (t->secret)
		explicit_bzero(t->secret, t->secret_len);
	free(t->secret);
	free(t->listen_host);
	free(t);
}

const char *transport_name(const struct transport *t)
{
	return t->ops->name;
}

const char *transport_caps(const struct transport *t)
{
	return t->ops->caps;
}

void transport_tuning(const struct transport *t, struct transport_tuning *ret)
{
	ret->streams_per_peer = t->ops->streams_per_peer;
	ret->range_min = t->ops->range_min;
}

/* Is @tok one of the comma-separated tokens of @list? */
static bool token_in(const char *list, const char *tok)
{
	size_t len = strlen(tok);
	const char *p = list, *end;

	for (;;) {
		end = strchrnul(p, ',');
		if ((size_t)(end - p) == len && !memcmp(p, tok, len))
			return true;
		if (!*end)
			return false;
		p = end + 1;
	}
}

bool transport_reaches(const struct transport *t, const char *caps, const char *addr)
{
	if (!t || !addr || !*addr)
		return false;
	/* cards of nodes older than caps carry none: they all spoke tcp */
	return token_in(caps && *caps ? caps : "tcp", t->ops->name);
}

int transport_serve(struct transport *t, const struct transport_source *src)
{
	int err;

	if (!t || !src || !src->open || !src->iov || !src->close)
		return -EINVAL;
	if (!t->ops->serve)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&t->lock);
	if (t->serving) {
		pthread_mutex_unlock(&t->lock);
		return -EBUSY;
	}
	t->src = *src;
	err = t->ops->serve(t);
	if (!err)
		t->serving = true;
	pthread_mutex_unlock(&t->lock);
	if (!err && !t->secret)
		log_info("transport: no secret_file: serving loopback peers only");
	return err;
}

int transport_addr(const struct transport *t, char *buf, size_t len)
{
	if (!t || !buf)
		return -EINVAL;
	if (!t->serving)
		return -ENOTCONN;
	if (!t->ops->addr)
		return -EOPNOTSUPP;
	return t->ops->addr(t, buf, len);
}

/* ---- connection cache ---- */

/*
 * The entry for @name, made or brought up to date with @addr (t->lock
 * held).  Connections to an old address go to *@drop for the caller to
 * close outside the lock.
 */
static struct peer *peer_get(struct transport *t, const char *name, const char *addr,
			     struct tconn **drop)
{
	struct peer *p;

	HASH_FIND_STR(t->peers, name, p);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return NULL;
		snprintf(p->name, sizeof(p->name), "%s", name);
		snprintf(p->addr, sizeof(p->addr), "%s", addr);
		p->gen = ++t->next_gen;
		HASH_ADD_STR(t->peers, name, p);
	} else if (strcmp(p->addr, addr)) {
		*drop = p->idle;
		p->idle = NULL;
		p->n_idle = 0;
		snprintf(p->addr, sizeof(p->addr), "%s", addr);
		p->gen = ++t->next_gen;
	}
	return p;
}

static int conn_borrow(struct transport *t, const char *peer, const char *addr, struct tconn **ret,
		       bool *ret_reused)
{
	struct tconn *c, *drop;
	struct peer *p;
	uint64_t gen;
	int err;

	for (;;) {
		drop = NULL;
		pthread_mutex_lock(&t->lock);
		p = peer_get(t, peer, addr, &drop);
		if (!p) {
			pthread_mutex_unlock(&t->lock);
			return -ENOMEM;
		}
		gen = p->gen;
		c = p->idle;
		if (c) {
			p->idle = c->next;
			p->n_idle--;
			c->next = NULL;
		}
		pthread_mutex_unlock(&t->lock);
		conn_close_list(t, drop);
		if (!c)
			break;
		if (t->ops->idle_ok(c)) {
			*ret = c;
			*ret_reused = true;
			return 0;
		}
		log_debug("transport: peer '%s' closed an idle connection", peer);
		conn_close(t, c);
	}

	err = t->ops->connect(t, addr, &c);
	if (err)
		return err;
	COUNT_ADD(t, conns_open, 1);
	c->t = t;
	c->next = NULL;
	c->gen = gen;
	*ret = c;
	*ret_reused = false;
	return 0;
}

static void conn_return(struct transport *t, const char *peer, struct tconn *c)
{
	struct peer *p;

	if (!c->broken) {
		pthread_mutex_lock(&t->lock);
		HASH_FIND_STR(t->peers, peer, p);
		if (p && p->gen == c->gen && p->n_idle < t->conns_per_peer) {
			c->next = p->idle;
			p->idle = c;
			p->n_idle++;
			c = NULL;
		}
		pthread_mutex_unlock(&t->lock);
	}
	if (c)
		conn_close(t, c);
}

void transport_forget_peer(struct transport *t, const char *peer)
{
	struct tconn *drop = NULL;
	struct peer *p;

	if (!t || !peer)
		return;
	pthread_mutex_lock(&t->lock);
	HASH_FIND_STR(t->peers, peer, p);
	if (p) {
		HASH_DEL(t->peers, p);
		drop = p->idle;
		free(p);
	}
	pthread_mutex_unlock(&t->lock);
	/* borrowed ones fail the generation check when they come back */
	conn_close_list(t, drop);
}

/* ---- fetch ---- */

static bool iov_covers(const struct iovec *iov, int iovcnt, uint64_t len)
{
	uint64_t sum = 0;
	int i;

	if (iovcnt < 0 || (iovcnt && !iov))
		return false;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return false;
		if (iov[i].iov_len > UINT64_MAX - sum)
			return false;
		sum += iov[i].iov_len;
	}
	return sum == len;
}

int transport_fetch(struct transport *t, const struct transport_req *req)
{
	struct tconn *c;
	bool reused;
	int err, attempt;

	if (!t || !req || !req->peer || !req->addr || node_name_validate(req->peer) ||
	    !*req->addr || strnlen(req->addr, TRANSPORT_ADDR_MAX) >= TRANSPORT_ADDR_MAX)
		return -EINVAL;
	if (req->off > UINT64_MAX - req->len || !iov_covers(req->iov, req->iovcnt, req->len))
		return -EINVAL;

	for (attempt = 0;; attempt++) {
		err = conn_borrow(t, req->peer, req->addr, &c, &reused);
		if (err)
			return err;
		c->broken = false;
		c->answered = false;
		err = t->ops->fetch(c, req);
		if (err == -ECONNRESET && reused && !c->answered && !attempt) {
			log_debug("transport: cached connection to '%s' was dead; reconnecting",
				  req->peer);
			conn_close(t, c);
			continue;
		}
		conn_return(t, req->peer, c);
		return err;
	}
}

/* ---- stats, secret ---- */

void transport_stats(const struct transport *t, struct transport_stats *ret)
{
	const struct transport_counters *c = &t->cnt;

	ret->bytes_sent = atomic_load_explicit(&c->bytes_sent, memory_order_relaxed);
	ret->bytes_received = atomic_load_explicit(&c->bytes_received, memory_order_relaxed);
	ret->requests_served = atomic_load_explicit(&c->requests_served, memory_order_relaxed);
	ret->requests_sent = atomic_load_explicit(&c->requests_sent, memory_order_relaxed);
	ret->conns_accepted = atomic_load_explicit(&c->conns_accepted, memory_order_relaxed);
	ret->conns_open = atomic_load_explicit(&c->conns_open, memory_order_relaxed);
	ret->auth_failures = atomic_load_explicit(&c->auth_failures, memory_order_relaxed);
	ret->bad_frames = atomic_load_explicit(&c->bad_frames, memory_order_relaxed);
}

int transport_read_secret(const char *path, uint8_t **ret, size_t *ret_len)
{
	/* room to tell "too long" from "exactly the longest plus newline" */
	size_t cap = TRANSPORT_SECRET_MAX + 2, n = 0;
	struct stat st;
	uint8_t *buf;
	int fd, err;

	if (!path || !ret || !ret_len)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto close_fd;
	}
	if (st.st_mode & S_IROTH) {
		err = -EPERM;
		goto close_fd;
	}
	err = -ENOMEM;
	buf = malloc(cap);
	if (!buf)
		goto close_fd;
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			goto free_buf;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n && buf[n - 1] == '\n')
		n--;
	err = -EINVAL;
	if (n < TRANSPORT_SECRET_MIN || n > TRANSPORT_SECRET_MAX)
		goto free_buf;
	close(fd);
	*ret = buf;
	*ret_len = n;
	return 0;

free_buf:
	explicit_bzero(buf, cap);
	free(buf);
close_fd:
	close(fd);
	return err;
}
