/*
 * transport: the part above the backends.  Owns the config, the choice of
 * backend (and what it tells the fetch engine: its tuning, which peers'
 * cards it can reach), the per-peer cache of client connections, the
 * counters, and reading the secret file.  What serving a GET means is
 * serve.c's.
 *
 * docs/design.md, "Above the backends", describes the connection cache
 * (t->peers, under t->lock), the hybrid of TCP and RDMA, and which wire
 * version a fetch speaks to a peer.  Counters are relaxed atomics;
 * transport_stats() reads each on its own, so a snapshot is not atomic
 * as a whole.
 */
#define _GNU_SOURCE
#include "transport_i.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>

#include "log.h"

#define DEFAULT_CONNS_PER_PEER 4
#define RDMA_RETRY_NS (30 * 1000000000LL)
/* the caps token of a node whose TCP serves wire version 2, and of one
 * that also takes BUSY_OK and PARK; that of a node whose RDMA serves its
 * messages' version 2 (GET flags and HAVE) is the RDMA backend's
 * v2_token, "rfan" */
#define CAP_FAN1 "fan1"
#define CAP_FAN2 "fan2"

/* One peer in t->peers; every field under t->lock. */
struct peer {
	char name[OBJFS_NODE_MAX];
	char addr[TRANSPORT_ADDR_MAX];
	unsigned ver; /* the wire version its connections speak */
	uint64_t gen;
	struct tconn *idle; /* shared backends: the one connection, if any */
	unsigned n_idle;
	int64_t rdma_down_until; /* util_mono_ns(); fetch over TCP until then */
	UT_hash_handle hh;
};

static const char *const mode_names[] = {
    [TMODE_TCP] = "tcp",
    [TMODE_RDMA] = "rdma",
    [TMODE_AUTO] = "auto",
};

int transport_ms_left(int64_t deadline_ns)
{
	int64_t left = deadline_ns - util_mono_ns();

	if (left <= 0)
		return 0;
	/* round up, so that a wait does not end just before the deadline */
	return (int)((left + 999999) / 1000000);
}

/* ---- lifecycle ---- */

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
	struct util_fd_budget budget;
	struct transport *t;
	int err = -EINVAL, i;

	if (!cfg || !cfg->node || util_node_name_validate(cfg->node) || !ops_valid(ops))
		goto fail;
	if (cfg->secret
		? cfg->secret_len < TRANSPORT_SECRET_MIN || cfg->secret_len > TRANSPORT_SECRET_MAX
		: cfg->secret_len != 0)
		goto fail;

	if (cfg->rdma_eager_max > TRANSPORT_RDMA_EAGER_MAX ||
	    cfg->rdma_poll_us > TRANSPORT_RDMA_POLL_MAX)
		goto fail;

	err = -ENOMEM;
	t = calloc(1, sizeof(*t));
	if (!t)
		goto fail;
	atomic_init(&t->holds, 1);
	t->ops = ops;
	t->mode = TMODE_TCP;
	snprintf(t->caps, sizeof(t->caps), "%s", ops->caps);
	snprintf(t->rdma_state, sizeof(t->rdma_state), "off (transport=%s)", ops->name);
	t->rdma_eager_max =
	    cfg->rdma_eager_max ? cfg->rdma_eager_max : TRANSPORT_RDMA_EAGER_DEFAULT;
	t->rdma_poll_us = cfg->rdma_poll_us;
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
	t->wire_max = ops->wire_max ? ops->wire_max : WIRE_V1;
	t->fan2 = true;
	util_fd_budget(util_nofile_limit(), &budget);
	t->serve_conns = budget.serve_conns;
	t->serve_conns_per_node = budget.serve_conns_per_node;
	t->serve_handshakes = TRANSPORT_SERVE_HANDSHAKES;
	for (i = 0; i < TLOG_N; i++)
		log_ratelimit_init(&t->log_rl[i], tlog_what[i], 1000, 1);
	transport_tbucket_init(&t->bucket, cfg->serve_bwlimit);
	transport_tslots_init(&t->slots, !cfg->serve_slots ? TRANSPORT_SLOTS_DEFAULT
					 : cfg->serve_slots == TRANSPORT_SLOTS_NONE
					     ? 0
					     : cfg->serve_slots);
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
	const char *name = cfg && cfg->backend ? cfg->backend : "tcp";
	enum transport_mode mode;
	struct transport *t;
	int err;

	if (!cfg)
		goto einval;
	for (mode = TMODE_TCP; mode <= TMODE_AUTO; mode++)
		if (!strcmp(name, mode_names[mode]))
			break;
	if (mode > TMODE_AUTO)
		goto einval;
#ifndef OBJFS_HAVE_RDMA
	if (mode == TMODE_RDMA) {
		if (ret_err)
			*ret_err = -EOPNOTSUPP;
		return NULL;
	}
#endif
	t = transport_new_ops(cfg, &transport_tcp_ops, ret_err);
	if (!t)
		return NULL;
	t->mode = mode;
	if (mode == TMODE_TCP)
		return t;
#ifdef OBJFS_HAVE_RDMA
	t->rdma = transport_new_ops(cfg, &transport_rdma_ops, &err);
	if (!t->rdma) {
		transport_free(t);
		if (ret_err)
			*ret_err = err;
		return NULL;
	}
	t->rdma->parent = t;
	snprintf(t->rdma_state, sizeof(t->rdma_state), "on");
#else
	(void)err;
	snprintf(t->rdma_state, sizeof(t->rdma_state), "off (built without rdma)");
#endif
	return t;

einval:
	if (ret_err)
		*ret_err = -EINVAL;
	return NULL;
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
	transport_free(t->rdma);
	if (t->serving && t->ops->stop)
		t->ops->stop(t);
	HASH_ITER (hh, t->peers, p, tmp) {
		HASH_DEL(t->peers, p);
		if (t->ops->shared) {
			if (p->idle && !--p->idle->users)
				conn_close(t, p->idle);
		} else {
			conn_close_list(t, p->idle);
		}
		free(p);
	}
	pthread_mutex_destroy(&t->lock);
	transport_tbucket_release(&t->bucket);
	transport_tslots_release(&t->slots);
	for (i = 0; i < TLOG_N; i++)
		log_ratelimit_release(&t->log_rl[i]);
	if (t->secret)
		explicit_bzero(t->secret, t->secret_len);
	free(t->secret);
	free(t->listen_host);
	/* registrations the store still holds keep the struct */
	transport_put(t);
}

void transport_hold(struct transport *t)
{
	atomic_fetch_add_explicit(&t->holds, 1, memory_order_relaxed);
}

void transport_put(struct transport *t)
{
	if (atomic_fetch_sub_explicit(&t->holds, 1, memory_order_acq_rel) == 1)
		free(t);
}

const char *transport_name(const struct transport *t)
{
	if (t->ops == &transport_tcp_ops)
		return mode_names[t->mode];
	return t->ops->name;
}

const char *transport_rdma_state(const struct transport *t)
{
	return t->rdma_state;
}

const char *transport_caps(const struct transport *t)
{
	return t->caps;
}

void transport_tuning(const struct transport *t, struct transport_tuning *ret)
{
	ret->streams_per_peer = t->ops->streams_per_peer;
	ret->range_min = t->ops->range_min;
	ret->io_timeout_ms = t->io_timeout_ms;
}

/* Is @tok one of the comma-separated tokens of @list (NULL: none)? */
static bool token_in(const char *list, const char *tok)
{
	size_t len = strlen(tok);
	const char *p = list, *end;

	if (!list)
		return false;
	for (;;) {
		end = strchrnul(p, ',');
		if ((size_t)(end - p) == len && !memcmp(p, tok, len))
			return true;
		if (!*end)
			return false;
		p = end + 1;
	}
}

bool transport_reaches(const struct transport *t, const char *caps, const char *addr,
		       const char *rdma_addr)
{
	if (!t)
		return false;
	/* cards of nodes older than caps carry none: they all spoke tcp */
	if (!caps || !*caps)
		caps = "tcp";
	if (t->rdma && rdma_addr && *rdma_addr && token_in(caps, t->rdma->ops->name))
		return true;
	if (t->mode == TMODE_RDMA)
		return false;
	return addr && *addr && token_in(caps, t->ops->name);
}

/* The card token of a peer whose server of @t's backend speaks its
 * version 2. */
static const char *v2_token(const struct transport *t)
{
	return t->ops->v2_token ? t->ops->v2_token : CAP_FAN1;
}

/* The version of its messages @t's own backend speaks to a peer whose
 * card has @caps: 2 if the card says its server speaks it. */
static unsigned wire_ver_for(const struct transport *t, const char *caps)
{
	return t->wire_max >= 2 && token_in(caps, v2_token(t)) ? 2 : 1;
}

/* Would a fetch from a peer whose card has @caps speak TCP's version 2? */
static bool tcp_v2(const struct transport *t, const char *caps)
{
	/* an "rdma" transport fetches over RDMA only */
	return t && t->mode != TMODE_RDMA && wire_ver_for(t, caps) >= WIRE_V2;
}

/* ... or RDMA's (the peer serves RDMA, and its card has "rfan")? */
static bool rdma_v2(const struct transport *t, const char *caps)
{
	return t && t->rdma && token_in(caps, t->rdma->ops->name) &&
	       wire_ver_for(t->rdma, caps) >= 2;
}

bool transport_speaks_fan1(const struct transport *t, const char *caps)
{
	return tcp_v2(t, caps) || rdma_v2(t, caps);
}

bool transport_speaks_fan2(const struct transport *t, const char *caps)
{
	/* RDMA's version 2 takes BUSY_OK (PARK is dropped there) */
	return (tcp_v2(t, caps) && token_in(caps, CAP_FAN2)) || rdma_v2(t, caps);
}

static bool addr_ok(const char *addr);
static bool rdma_down(struct transport *t, const char *peer, int64_t until);

bool transport_plain_rdma(struct transport *t, const char *peer, const char *caps,
			  const char *rdma_addr)
{
	return t && t->rdma && peer && addr_ok(rdma_addr) && !rdma_v2(t, caps) &&
	       !rdma_down(t, peer, 0);
}

bool transport_parks(struct transport *t, const char *peer, const char *caps, const char *rdma_addr)
{
	bool tcp_ok = t && t->mode != TMODE_RDMA;
	bool over_rdma = t && t->rdma && peer && addr_ok(rdma_addr) && rdma_v2(t, caps) &&
			 !(tcp_ok && rdma_down(t, peer, 0));

	return !over_rdma && tcp_v2(t, caps) && token_in(caps, CAP_FAN2);
}

/* What the card says once serving: the backends, then "fan1,fan2" if
 * TCP serves version 2, and "rfan" if RDMA serves its version 2 (old
 * nodes ignore a token they do not know). */
static void caps_build(struct transport *t)
{
	bool rfan = t->rdma && t->rdma->wire_max >= 2;

	snprintf(t->caps, sizeof(t->caps), "%s%s%s%s%s%s", t->ops->caps, t->rdma ? "," : "",
		 t->rdma ? t->rdma->ops->caps : "",
		 t->wire_max < WIRE_V2 ? ""
		 : t->fan2	       ? "," CAP_FAN1 "," CAP_FAN2
				       : "," CAP_FAN1,
		 rfan ? "," : "", rfan ? v2_token(t->rdma) : "");
}

static int serve_rdma(struct transport *t, const struct transport_source *src);

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
	if (!err && t->rdma)
		err = serve_rdma(t, src);
	if (!err)
		caps_build(t);
	if (!err && !t->secret)
		log_info("transport: no secret_file: serving loopback peers only");
	return err;
}

/* Serve the RDMA half too; "auto" does without it if it cannot. */
static int serve_rdma(struct transport *t, const struct transport_source *src)
{
	int err;

	err = transport_serve(t->rdma, src);
	if (!err)
		return 0;
	if (t->mode == TMODE_RDMA) {
		log_error("transport: cannot serve over RDMA on %s: %s",
			  t->listen_host ? t->listen_host : "*", strerror(-err));
		pthread_mutex_lock(&t->lock);
		t->ops->stop(t);
		t->serving = false;
		pthread_mutex_unlock(&t->lock);
		return err;
	}
	snprintf(t->rdma_state, sizeof(t->rdma_state), "unavailable: %s", strerror(-err));
	log_info("transport: RDMA unavailable (%s); serving and fetching over TCP only",
		 strerror(-err));
	transport_free(t->rdma);
	t->rdma = NULL;
	return 0;
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

int transport_addr_of(const struct transport *t, const char *backend, char *buf, size_t len)
{
	if (!t || !backend)
		return -EINVAL;
	if (!strcmp(backend, t->ops->name))
		return transport_addr(t, buf, len);
	if (t->rdma && !strcmp(backend, t->rdma->ops->name))
		return transport_addr(t->rdma, buf, len);
	return -ENOTCONN;
}

/* ---- connection cache ---- */

static struct tconn *peer_detach_locked(struct transport *t, struct peer *p);

/*
 * The entry for @name, made or brought up to date with @addr and wire
 * version @ver (t->lock held).  Connections to an old address, or in
 * another version, go to *@drop for the caller to close outside the
 * lock.
 */
static struct peer *peer_get(struct transport *t, const char *name, const char *addr, unsigned ver,
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
		p->ver = ver;
		p->gen = ++t->next_gen;
		HASH_ADD_STR(t->peers, name, p);
	} else if (strcmp(p->addr, addr) || p->ver != ver) {
		*drop = peer_detach_locked(t, p);
		snprintf(p->addr, sizeof(p->addr), "%s", addr);
		p->ver = ver;
		p->gen = ++t->next_gen;
	}
	return p;
}

/* Take @p's idle connections (a shared backend's: its connection,
 * which the caller closes only if nobody uses it) off it (t->lock). */
static struct tconn *peer_detach_locked(struct transport *t, struct peer *p)
{
	struct tconn *c = p->idle;

	p->idle = NULL;
	p->n_idle = 0;
	if (c && t->ops->shared) {
		c->installed = false;
		if (--c->users)
			return NULL; /* the last fetch on it closes it */
	}
	return c;
}

/* A shared backend's connection to @peer at @addr, in version @ver: the
 * peer's, or a new one that becomes the peer's. */
static int conn_share(struct transport *t, const char *peer, const char *addr, unsigned ver,
		      struct tconn **ret, bool *ret_reused)
{
	struct tconn *c, *drop = NULL, *mine;
	struct peer *p;
	uint64_t gen;
	int err;

	pthread_mutex_lock(&t->lock);
	p = peer_get(t, peer, addr, ver, &drop);
	if (p && p->idle && (p->idle->broken || !t->ops->idle_ok(p->idle))) {
		struct tconn *old = peer_detach_locked(t, p);

		if (old) {
			old->next = drop;
			drop = old;
		}
	}
	c = p ? p->idle : NULL;
	if (c)
		c->users++;
	gen = p ? p->gen : 0;
	pthread_mutex_unlock(&t->lock);
	conn_close_list(t, drop);
	if (!p)
		return -ENOMEM;
	if (c) {
		*ret = c;
		*ret_reused = true;
		return 0;
	}

	err = t->ops->connect(t, addr, ver, &mine);
	if (err)
		return err;
	COUNT_ADD(t, conns_open, 1);
	mine->t = t;
	mine->next = NULL;
	mine->gen = gen;
	mine->users = 1;
	pthread_mutex_lock(&t->lock);
	HASH_FIND_STR(t->peers, peer, p);
	c = mine;
	if (p && p->gen == gen && !p->idle) {
		p->idle = mine;
		p->n_idle = 1;
		mine->installed = true;
		mine->users++;
	} else if (p && p->gen == gen && !p->idle->broken) {
		/* another fetch connected first: use that one */
		c = p->idle;
		c->users++;
		mine->users = 0;
	}
	pthread_mutex_unlock(&t->lock);
	if (c != mine)
		conn_close(t, mine);
	*ret = c;
	*ret_reused = false;
	return 0;
}

static int conn_borrow(struct transport *t, const char *peer, const char *addr, unsigned ver,
		       struct tconn **ret, bool *ret_reused)
{
	struct tconn *c, *drop;
	struct peer *p;
	uint64_t gen;
	int err;

	if (t->ops->shared)
		return conn_share(t, peer, addr, ver, ret, ret_reused);
	for (;;) {
		drop = NULL;
		pthread_mutex_lock(&t->lock);
		p = peer_get(t, peer, addr, ver, &drop);
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

	err = t->ops->connect(t, addr, ver, &c);
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

	if (t->ops->shared) {
		pthread_mutex_lock(&t->lock);
		HASH_FIND_STR(t->peers, peer, p);
		if (c->broken && c->installed && p && p->idle == c)
			(void)peer_detach_locked(t, p); /* users stays > 0: ours */
		if (--c->users)
			c = NULL;
		pthread_mutex_unlock(&t->lock);
		if (c)
			conn_close(t, c);
		return;
	}
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
		drop = peer_detach_locked(t, p);
		free(p);
	}
	pthread_mutex_unlock(&t->lock);
	/* borrowed ones fail the generation check when they come back */
	conn_close_list(t, drop);
	if (t->rdma)
		transport_forget_peer(t->rdma, peer);
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

static bool addr_ok(const char *addr)
{
	return addr && *addr && strnlen(addr, TRANSPORT_ADDR_MAX) < TRANSPORT_ADDR_MAX;
}

/* One fetch on @t's own backend, from @addr. */
static int fetch_on(struct transport *t, const struct transport_req *req, const char *addr)
{
	unsigned ver = wire_ver_for(t, req->caps);
	struct tconn *c;
	bool reused;
	int err, attempt;

	for (attempt = 0;; attempt++) {
		err = conn_borrow(t, req->peer, addr, ver, &c, &reused);
		if (err)
			return err;
		if (!t->ops->shared) {
			c->broken = false;
			c->answered = false;
		}
		err = t->ops->fetch(c, req);
		if (err == -ECONNRESET && reused && !attempt && (t->ops->shared || !c->answered)) {
			log_debug("transport: cached connection to '%s' was dead; reconnecting",
				  req->peer);
			if (t->ops->shared) {
				c->broken = true;
				conn_return(t, req->peer, c);
			} else {
				conn_close(t, c);
			}
			continue;
		}
		conn_return(t, req->peer, c);
		return err;
	}
}

/* Did an RDMA fetch fail for the connection (worth trying TCP), not for
 * the object or the request? */
static bool conn_failure(int err)
{
	switch (-err) {
	case ENOENT:
	case ERANGE:
	case EINVAL:
	case EACCES:
	case ENOMEM:
	case EAGAIN:
		return false;
	default:
		return true;
	}
}

/* Keeps the progress reported by a TCP retry from going back. */
struct progress_floor {
	transport_progress_fn fn;
	void *arg;
	uint64_t max;
};

static void progress_floored(void *arg, uint64_t done)
{
	struct progress_floor *pf = arg;

	if (done > pf->max)
		pf->max = done;
	pf->fn(pf->arg, pf->max);
}

static void progress_seen(void *arg, uint64_t done)
{
	struct progress_floor *pf = arg;

	if (done > pf->max)
		pf->max = done;
	if (pf->fn)
		pf->fn(pf->arg, done);
}

static bool rdma_down(struct transport *t, const char *peer, int64_t until)
{
	struct peer *p;
	bool down = false;

	pthread_mutex_lock(&t->lock);
	HASH_FIND_STR(t->peers, peer, p);
	if (p && until)
		p->rdma_down_until = until;
	else if (p)
		down = util_mono_ns() < p->rdma_down_until;
	pthread_mutex_unlock(&t->lock);
	return down;
}

/*
 * The flags @req keeps on TCP to its peer: BUSY_OK and PARK only with
 * "fan2" on its card (a peer of the first version 2 rejects what it does
 * not know); -EOPNOTSUPP for WANT_HAVE to a peer that does not speak
 * version 2 (@v2).  To such a peer the rest are passed on, for a version
 * 1 connection to ignore (a range it lacks is ENOENT, as always).
 */
static int tcp_flags(const struct transport_req *req, bool v2)
{
	unsigned f = req->flags;

	if (!v2 && (f & TRANSPORT_F_WANT_HAVE))
		return -EOPNOTSUPP;
	if (!token_in(req->caps, CAP_FAN2))
		f &= ~(unsigned)(TRANSPORT_F_BUSY_OK | TRANSPORT_F_PARK);
	return (int)f;
}

/*
 * Fetch over RDMA, and with "auto" over TCP when that fails for the
 * connection: the range again at once, and that peer for RDMA_RETRY_NS.
 * @req's flags are RDMA's (a peer of "rfan", or none); over TCP they
 * are what tcp_flags() leaves of @flags, with @v2 of tcp_v2().
 */
static int fetch_rdma(struct transport *t, const struct transport_req *req, bool tcp_ok,
		      unsigned flags, bool v2)
{
	struct progress_floor pf = {.fn = req->progress, .arg = req->arg};
	struct transport_req again = *req;
	int err, f;

	again.progress = progress_seen;
	again.arg = &pf;
	err = fetch_on(t->rdma, &again, req->rdma_addr);
	if (!err || !tcp_ok || !conn_failure(err))
		return err;
	COUNT_ADD(t, rdma_fallbacks, 1);
	/* a peer known to the TCP cache keeps the note */
	pthread_mutex_lock(&t->lock);
	{
		struct tconn *drop = NULL;

		(void)peer_get(t, req->peer, req->addr, wire_ver_for(t, req->caps), &drop);
		pthread_mutex_unlock(&t->lock);
		conn_close_list(t, drop);
	}
	(void)rdma_down(t, req->peer, util_mono_ns() + RDMA_RETRY_NS);
	transport_log(t, TLOG_CONN, LOGL_WARN,
		      "transport: RDMA to '%s' at %s failed (%s); fetching over TCP, and "
		      "from that peer for %llds",
		      req->peer, req->rdma_addr, strerror(-err), RDMA_RETRY_NS / 1000000000LL);
	again.flags = flags;
	f = tcp_flags(&again, v2);
	if (f < 0)
		return err; /* a query TCP cannot ask */
	again.flags = (unsigned)f;
	if (req->progress) {
		again.progress = progress_floored;
		again.arg = &pf;
	} else {
		again.progress = NULL;
	}
	err = fetch_on(t, &again, req->addr);
	if (!err) {
		COUNT_ADD(t, fetch_tcp, 1);
		COUNT_ADD(t, bytes_tcp, req->len);
	}
	return err;
}

int transport_fetch(struct transport *t, const struct transport_req *req)
{
	struct transport_req mine;
	bool tcp_ok, rdma_ok, v2, rv2;
	int err, f;

	if (!t || !req || !req->peer || util_node_name_validate(req->peer))
		return -EINVAL;
	if (req->off > UINT64_MAX - req->len || !iov_covers(req->iov, req->iovcnt, req->len))
		return -EINVAL;
	if (req->flags & ~(unsigned)(TRANSPORT_F_PARTIAL_OK | TRANSPORT_F_WANT_HAVE |
				     TRANSPORT_F_BUSY_OK | TRANSPORT_F_PARK))
		return -EINVAL;
	if ((req->flags & TRANSPORT_F_WANT_HAVE) && !req->have_out)
		return -EINVAL;
	tcp_ok = t->mode != TMODE_RDMA && addr_ok(req->addr);
	rdma_ok = t->rdma && addr_ok(req->rdma_addr);
	if (!tcp_ok && !rdma_ok)
		return -EINVAL;
	/* over RDMA unless it failed to this peer lately (and TCP can) */
	if (rdma_ok && tcp_ok && rdma_down(t, req->peer, 0))
		rdma_ok = false;
	v2 = tcp_ok && tcp_v2(t, req->caps);
	rv2 = rdma_ok && rdma_v2(t, req->caps);
	mine = *req;
	if (req->flags && rdma_ok && rv2) {
		/* RDMA's version 2: every flag but PARK (a server thread
		 * answers at once) */
		mine.flags &= ~(unsigned)TRANSPORT_F_PARK;
		err = fetch_rdma(t, &mine, tcp_ok, req->flags, v2);
		goto out;
	}
	/* flags go where a version 2 speaks them: TCP, if RDMA cannot */
	if (req->flags && v2)
		rdma_ok = false;
	f = tcp_flags(req, v2);
	if (f < 0)
		return f;
	mine.flags = (unsigned)f;
	if (rdma_ok) {
		err = fetch_rdma(t, &mine, tcp_ok, (unsigned)f, v2);
		goto out;
	}
	err = fetch_on(t, &mine, req->addr);
	if (!err) {
		COUNT_ADD(t, fetch_tcp, 1);
		COUNT_ADD(t, bytes_tcp, req->len);
	}
out:
	if (err == -EAGAIN && req->have_out && (req->have_out->flags & TRANSPORT_HAVE_BUSY))
		COUNT_ADD(t, busy_received, 1);
	return err;
}

/* ---- regions ---- */

int transport_region_new(struct transport *t, void *addr, uint64_t len,
			 struct transport_region **ret)
{
	struct transport *b;

	if (!t || !ret || (!addr && len))
		return -EINVAL;
	*ret = NULL;
	b = t->rdma ? t->rdma : t;
	/* a range this small goes eager, copied out of a receive buffer:
	 * registering its destination would cost more than it saves */
	if (!b->ops->region_new || len <= b->rdma_eager_max)
		return 0;
	return b->ops->region_new(b, addr, len, ret);
}

void transport_region_free(struct transport_region *r)
{
	if (r)
		r->ops->region_free(r);
}

/* ---- addresses ---- */

int transport_addr_split(const char *addr, char *host, size_t host_size, char *port,
			 size_t port_size)
{
	const char *colon, *h = addr, *h_end;
	char *end;
	unsigned long p;

	if (addr[0] == '[') {
		h = addr + 1;
		h_end = strchr(h, ']');
		if (!h_end || h_end[1] != ':')
			return -EINVAL;
		colon = h_end + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon || memchr(addr, ':', (size_t)(colon - addr)))
			return -EINVAL;
		h_end = colon;
	}
	if (h_end == h || (size_t)(h_end - h) >= host_size)
		return -EINVAL;
	memcpy(host, h, (size_t)(h_end - h));
	host[h_end - h] = 0;
	if (colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno || *end || p == 0 || p > 65535)
		return -EINVAL;
	snprintf(port, port_size, "%lu", p);
	return 0;
}

int transport_gai_err(int e)
{
	switch (e) {
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_SYSTEM:
		return errno ? -errno : -EHOSTUNREACH;
	default:
		return -EHOSTUNREACH; /* no such name, no address, DNS down */
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
#define LOAD(f) atomic_load_explicit(&c->f, memory_order_relaxed)
	ret->serve_conns = t->serve_conns;
	ret->serve_conns_per_node = t->serve_conns_per_node;
	ret->serve_conns_open = LOAD(serve_open);
	ret->fetch_tcp = LOAD(fetch_tcp);
	ret->bytes_tcp = LOAD(bytes_tcp);
	ret->rdma_fallbacks = LOAD(rdma_fallbacks);
	ret->busy_sent = LOAD(busy_sent);
	ret->busy_received = LOAD(busy_received);
	ret->parked = LOAD(parked);
	ret->given_refused = LOAD(given_refused);
	ret->rdma_partial_regs = 0;
	ret->fetch_eager = ret->bytes_eager = ret->fetch_rdv = ret->bytes_rdv = 0;
	ret->rdma_conns = ret->rdma_regs = 0;
	ret->rdma_regs_live = ret->rdma_regs_reused = ret->rdma_regs_dropped = 0;
	if (t->rdma) {
		struct transport_stats r;

		c = &t->rdma->cnt;
		transport_stats(t->rdma, &r);
		ret->bytes_sent += r.bytes_sent;
		ret->bytes_received += r.bytes_received;
		ret->requests_served += r.requests_served;
		ret->requests_sent += r.requests_sent;
		ret->conns_accepted += r.conns_accepted;
		ret->conns_open += r.conns_open;
		ret->auth_failures += r.auth_failures;
		ret->bad_frames += r.bad_frames;
		ret->rdma_conns = r.conns_open;
		ret->fetch_eager = LOAD(fetch_eager);
		ret->bytes_eager = LOAD(bytes_eager);
		ret->fetch_rdv = LOAD(fetch_rdv);
		ret->bytes_rdv = LOAD(bytes_rdv);
		ret->rdma_regs = LOAD(rdma_regs);
		ret->rdma_regs_live = LOAD(rdma_regs_live);
		ret->rdma_regs_reused = LOAD(rdma_regs_reused);
		ret->rdma_regs_dropped = LOAD(rdma_regs_dropped);
		ret->rdma_partial_regs = LOAD(rdma_partial_regs);
	}
#undef LOAD
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
