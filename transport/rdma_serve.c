/*
 * rdma_serve: the server half of the RDMA backend (rdma.c has the whole
 * picture).  A listener thread accepts connections on its own event
 * channel and reaps those that died; each connection is then answered
 * on its own thread (rdma_conn.c), here in srv_msg() and friends.
 *
 * A GET goes through serve.c (transport_serve_begin(): slots, HAVE answers, given
 * out blocks, as over TCP) and is answered RDV, DATA, ERR or (version 2)
 * HAVE.  Its bytes are read through the object's registration, or, for
 * an object held in part, a registration of the range alone
 * (range_reg()), freed with the GET's pin.
 *
 * Ownership.  srv->conns (srv->lock) owns the connections; only the
 * listener thread (and transport_rd_stop(), after it stopped) frees them, once
 * their own thread has been joined.  A connection's pins, eager sends in
 * flight and queued GETs belong to its thread alone (no lock), and to
 * transport_rconn_teardown()'s caller after.
 */
#define _GNU_SOURCE
#include "rdma_i.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"

#define SRV_NRECV 32 /* a client has at most this many requests out */
#define SRV_NSEND 48
#define SRV_RSIZE (RMSG_HDR + WIRE_MSG_MAX)
#define SRV_QUEUE SRV_NRECV
#define LISTEN_BACKLOG 64
#define REAP_MS 200

/* A rendezvous in progress: the object stays pinned until FIN, and the
 * registration of a range of an object held in part lives as long. */
struct pin {
	uint64_t tag;
	struct serve_ctx ctx;
	struct rreg *own; /* the GET's own registration, or NULL */
	int64_t until;
	struct pin *next;
};

struct rsrv_conn {
	struct rconn rc;
	struct rdma_server *srv;
	struct auth_srv auth;
	int64_t hs_until; /* the handshake must end by then */
	bool close_after_send;
	struct pin *pins;
	struct serve_ctx eager[SRV_NSEND]; /* pinned until the SEND completes */
	struct rreg *eager_own[SRV_NSEND]; /* and its own registration, if any */
	bool eager_live[SRV_NSEND];
	struct rmsg queue[SRV_QUEUE]; /* GETs waiting for a credit or a slot */
	unsigned qhead, qlen;
	struct rsrv_conn *next; /* srv->conns (srv->lock) */
};

struct rdma_server {
	struct transport *t;
	struct rdma_event_channel *lech;
	struct rdma_cm_id *lid;
	char addr[TRANSPORT_ADDR_MAX];
	pthread_t thread;
	int wake_fd;
	atomic_bool stop;
	pthread_mutex_t lock;
	struct rsrv_conn *conns; /* lock */
	unsigned nconns;	 /* lock */
};

/* ---- registrations that hang on objects ---- */

/* The store gives an object's registration back: the object is freed,
 * or the store keeps too many (rdma_regs=, store_obj_attach()). */
static void reg_drop(void *reg)
{
	struct rreg *r = reg;
	struct transport *t = r->t;

	COUNT_SUB(t, rdma_regs_live, 1);
	COUNT_ADD(t, rdma_regs_dropped, 1);
	transport_rreg_free(r);
	/* the store may drop it after transport_free() (store_close()) */
	transport_put(t);
}

/* The registration of the object @ctx pinned, on @c's device. */
static int obj_reg(struct rsrv_conn *c, struct serve_ctx *ctx, struct rreg **ret)
{
	const struct transport_source *src = &c->rc.t->src;
	struct rreg *r;
	void *cur = NULL, *addr;
	uint64_t len;
	int err, fd = -1;

	if (!src->map || !src->attach)
		return -EOPNOTSUPP;
	err = src->attach(ctx->token, NULL, NULL, &cur);
	if (err)
		return err;
	if (!cur) {
		err = src->map(ctx->token, &addr, &len, &fd);
		if (err)
			return err;
		if (!len) {
			if (fd >= 0)
				close(fd);
			return -ENODATA; /* nothing to register: callers send no bytes */
		}
		err = transport_rreg_object(c->rc.t, c->rc.dev, addr, len, fd, &r);
		/* a fallback mapping made from it keeps the file */
		if (fd >= 0)
			close(fd);
		if (err)
			return err;
		/* counted first: the store may drop it before attach() returns */
		COUNT_ADD(c->rc.t, rdma_regs_live, 1);
		transport_hold(c->rc.t);
		err = src->attach(ctx->token, r, reg_drop, &cur);
		if (!err) {
			cur = r;
		} else {
			COUNT_SUB(c->rc.t, rdma_regs_live, 1);
			transport_rreg_free(r);
			transport_put(c->rc.t);
		}
		if (err && err != -EEXIST)
			return err;
	} else {
		COUNT_ADD(c->rc.t, rdma_regs_reused, 1);
	}
	r = cur;
	if (r->dev != c->rc.dev)
		return -EXDEV; /* served before through another device */
	*ret = r;
	return 0;
}

/* ---- answering ---- */

static void bad_frame(struct rsrv_conn *c, const char *what)
{
	COUNT_ADD(c->rc.t, bad_frames, 1);
	transport_log(c->rc.t, TLOG_BAD_FRAME, LOGL_WARN,
		      "transport: rdma: closing connection from %s: %s", c->rc.peer, what);
}

static int send_err(struct rsrv_conn *c, const struct rmsg *get, int status)
{
	struct rmsg m = {.type = RM_ERR, .tag = get->tag, .id = get->id, .off = get->off};

	m.status = (uint32_t)(status > 0 && status <= WIRE_STATUS_MAX ? status : EIO);
	return transport_rconn_send(&c->rc, &m, NULL, 0, NULL, 0, NULL, false);
}

/* Answer @get (version 2) with the wire.c HAVE @have as body. */
static int send_have(struct rsrv_conn *c, const struct rmsg *get, const struct wire_msg *have)
{
	struct rmsg m = {.type = RM_HAVE, .tag = get->tag, .id = get->id, .off = get->off};
	uint8_t buf[WIRE_MSG_MAX_V2];
	int n;

	n = transport_wire_encode(have, buf, sizeof(buf));
	if (n < 0)
		return send_err(c, get, EIO); /* transport_serve_begin() checked it: never */
	m.len = (uint64_t)n;
	return transport_rconn_send(&c->rc, &m, buf, (size_t)n, NULL, 0, NULL, false);
}

/* The wire.c flags of a GET's RM_F_* (version 2; version 1 has none). */
static uint16_t get_wire_flags(uint8_t f)
{
	return (uint16_t)((f & RM_F_PARTIAL_OK ? WIRE_F_PARTIAL_OK : 0) |
			  (f & RM_F_WANT_HAVE ? WIRE_F_WANT_HAVE : 0) |
			  (f & RM_F_BUSY_OK ? WIRE_F_BUSY_OK : 0));
}

/*
 * Take every piece of @ctx's range from transport_serve_next(), and check they are
 * one run of memory, which starts at *@ret_base.  The pieces' bytes come
 * out of the node's bandwidth bucket here, before the peer reads them
 * (serve_bwlimit holds over RDMA too, at the price of this thread waiting
 * off the bucket's debt).  0, or -errno with the counts taken back.
 */
static int serve_all(struct rsrv_conn *c, struct serve_ctx *ctx, uint8_t **ret_base,
		     size_t *ret_bytes)
{
	uint8_t *base = NULL;
	size_t total = 0, bytes = 0;
	struct iovec iov;
	int n;

	while (transport_serve_more(ctx)) {
		n = transport_serve_next(ctx, (size_t)ctx->get_len, &iov, 1, &bytes, &c->rc.stop);
		if (n < 0 ||
		    (bytes && (n != 1 || (total && (uint8_t *)iov.iov_base != base + total)))) {
			n = n < 0 ? n : -EIO;
			transport_serve_unsent(ctx, total + (n == -EIO ? bytes : 0), n);
			return n;
		}
		if (!total)
			base = iov.iov_base;
		total += bytes;
	}
	*ret_base = base;
	*ret_bytes = total;
	return 0;
}

/*
 * What the peer reads [@base, @base + @len) of @ctx's object through: the
 * object's registration (sealed), or, for an object held in part or one
 * packed in a chunk with others (the store refuses to hand it out
 * whole), which must never be registered whole, one of exactly that range (its blocks
 * all verified: transport_serve_begin() checked) for this GET alone, which the
 * caller frees in *@ret_own when the GET is done; with remote read access
 * for a rendezvous (@remote), local access only for an eager SEND.  The
 * range's address in it goes to *@ret_addr, its keys to *@ret_lkey and
 * *@ret_rkey.
 */
static int range_reg(struct rsrv_conn *c, struct serve_ctx *ctx, uint8_t *base, size_t len,
		     bool remote, struct rreg **ret_own, uint64_t *ret_addr, uint32_t *ret_lkey,
		     uint32_t *ret_rkey)
{
	struct rreg *r;
	int err = -EOPNOTSUPP;

	*ret_own = NULL;
	if (!ctx->partial)
		err = obj_reg(c, ctx, &r);
	if (err == -EOPNOTSUPP) {
		/* held in part, or packed with others (store_pack.c) */
		err = transport_rreg_new(c->rc.t, c->rc.dev, base, len,
					 remote ? IBV_ACCESS_REMOTE_READ : 0, &r);
		if (err)
			return err;
		if (ctx->partial)
			COUNT_ADD(c->rc.t, rdma_partial_regs, 1);
		*ret_own = r;
		*ret_addr = (uintptr_t)base;
	} else if (err) {
		return err;
	} else {
		/* the registration covers the whole object from its offset 0,
		 * in a mapping that may be its own (transport_rreg_object()) */
		*ret_addr = (uintptr_t)r->mr->addr + ctx->get_off;
	}
	*ret_lkey = r->mr->lkey;
	*ret_rkey = r->mr->rkey;
	return 0;
}

/* Answer one GET, which has a credit and a slot waiting for it. */
static int answer(struct rsrv_conn *c, const struct rmsg *get)
{
	struct transport *t = c->rc.t;
	struct wire_msg wget = {.type = WIRE_GET, .id = get->id, .off = get->off, .len = get->len};
	struct wire_msg reply;
	struct serve_ctx ctx;
	struct ibv_sge sge;
	struct rreg *own = NULL;
	struct rmsg m;
	uint64_t addr = 0;
	uint32_t lkey = 0, rkey = 0;
	unsigned slot;
	size_t bytes = 0;
	uint8_t *base;
	bool eager = get->flags & RM_F_EAGER;
	int r, err;

	wget.ver = c->rc.ver >= RMSG_V2 ? WIRE_V2 : WIRE_V1;
	wget.flags = get_wire_flags(get->flags);
	r = transport_serve_begin(t, &wget, c->rc.peer, c->auth.node, &c->rc.stop, &ctx, &reply);
	if (r == 1)
		return reply.type == WIRE_HAVE ? send_have(c, get, &reply)
					       : send_err(c, get, reply.status);
	if (r) {
		/* 2, a HAVE before the bytes: WANT_HAVE with a length, which
		 * transport_rmsg_decode() refuses */
		transport_serve_end(&ctx);
		return send_err(c, get, EIO);
	}
	if (eager && get->len > c->rc.peer_rsize - RMSG_HDR) {
		transport_serve_end(&ctx);
		bad_frame(c, "eager GET larger than its receive buffers");
		return -EPROTO;
	}
	err = serve_all(c, &ctx, &base, &bytes);
	if (!err && bytes) {
		err = range_reg(c, &ctx, base, bytes, !eager, &own, &addr, &lkey, &rkey);
		if (err == -ENODATA)
			err = 0; /* an empty object (no bytes either: never) */
		if (err)
			transport_serve_unsent(&ctx, bytes, err);
	}
	if (err) {
		transport_log(t, TLOG_CONN, LOGL_WARN,
			      "transport: rdma: cannot serve object %" PRIu64 " to %s: %s", get->id,
			      c->rc.peer, strerror(-err));
		transport_serve_end(&ctx);
		return send_err(c, get, -err);
	}
	m = (struct rmsg){.tag = get->tag, .id = get->id, .off = get->off, .len = get->len};
	if (eager) {
		m.type = RM_DATA;
		sge = (struct ibv_sge){.addr = addr, .length = (uint32_t)bytes, .lkey = lkey};
		err = transport_rconn_send(&c->rc, &m, NULL, 0, &sge, bytes ? 1 : 0, &slot, false);
		if (!err) {
			c->eager[slot] = ctx; /* unpinned when the SEND completes */
			c->eager_own[slot] = own;
			c->eager_live[slot] = true;
			return 0;
		}
	} else {
		struct pin *p = calloc(1, sizeof(*p));

		m.type = RM_RDV;
		m.addr = addr;
		m.status = rkey;
		err = p ? transport_rconn_send(&c->rc, &m, NULL, 0, NULL, 0, NULL, false) : -ENOMEM;
		if (!err) {
			p->tag = get->tag;
			p->ctx = ctx;
			p->own = own;
			p->until = util_mono_ns() + transport_rdv_budget_ns(t, get->len);
			p->next = c->pins;
			c->pins = p;
			return 0;
		}
		free(p);
	}
	transport_rreg_free(own);
	transport_serve_unsent(&ctx, bytes, err);
	transport_serve_end(&ctx);
	return err;
}

/* Can a reply go out now (this thread is the only one sending)? */
static bool can_send(struct rsrv_conn *c)
{
	bool ok;

	pthread_mutex_lock(&c->rc.lock);
	ok = !c->rc.err && c->rc.credits >= 2 && c->rc.free_slots;
	pthread_mutex_unlock(&c->rc.lock);
	return ok;
}

static int run_queue(struct rsrv_conn *c)
{
	int err = 0;

	while (c->qlen && !err && can_send(c)) {
		err = answer(c, &c->queue[c->qhead]);
		c->qhead = (c->qhead + 1) % SRV_QUEUE;
		c->qlen--;
	}
	return err;
}

/* The GET of @p is done (FIN, its time is up, or the connection went):
 * its own registration goes before the pin that keeps its memory. */
static void pin_free(struct pin *p)
{
	transport_rreg_free(p->own);
	transport_serve_end(&p->ctx);
	free(p);
}

static int fin(struct rsrv_conn *c, uint64_t tag)
{
	struct pin **pp, *p;

	for (pp = &c->pins; *pp && (*pp)->tag != tag; pp = &(*pp)->next)
		;
	p = *pp;
	if (!p)
		return 0; /* it timed out: nothing to let go */
	*pp = p->next;
	pin_free(p);
	return 0;
}

static int handshake(struct rsrv_conn *c, const uint8_t *body, size_t len)
{
	struct transport *t = c->rc.t;
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_msg in, reply;
	struct rmsg m = {.type = RM_AUTH};
	bool close_after = false;
	int n, err;

	if (transport_wire_decode(body, len, &in) != (int)len) {
		bad_frame(c, "a malformed handshake message");
		return -EPROTO;
	}
	err = transport_auth_srv_step(t, &c->auth, &in, &reply, &close_after);
	if (err) {
		bad_frame(c, "a handshake message out of place");
		return err;
	}
	n = transport_wire_encode(&reply, buf, sizeof(buf));
	if (n < 0)
		return n;
	m.len = (uint64_t)n;
	err = transport_rconn_send(&c->rc, &m, buf, (size_t)n, NULL, 0, NULL, false);
	if (close_after) {
		transport_log(t, TLOG_REFUSED, LOGL_WARN, "transport: rdma: refused %s: %s",
			      c->rc.peer, c->auth.why ? c->auth.why : "authentication failed");
		c->close_after_send = true;
	}
	return err;
}

static int srv_msg(struct rconn *rc, const struct rmsg *m, const uint8_t *body, size_t len)
{
	struct rsrv_conn *c = (struct rsrv_conn *)rc;

	if (m->type == RM_AUTH)
		return handshake(c, body, len);
	if (!transport_auth_srv_ready(&c->auth)) {
		bad_frame(c, "a request before the handshake");
		return -EPROTO;
	}
	switch (m->type) {
	case RM_GET:
		if (c->qlen == SRV_QUEUE) {
			bad_frame(c, "more requests than credits");
			return -EPROTO;
		}
		c->queue[(c->qhead + c->qlen) % SRV_QUEUE] = *m;
		c->qlen++;
		return run_queue(c);
	case RM_FIN:
		return fin(c, m->tag);
	default:
		bad_frame(c, "a message a client does not send");
		return -EPROTO;
	}
}

static void srv_send_done(struct rconn *rc, unsigned slot)
{
	struct rsrv_conn *c = (struct rsrv_conn *)rc;

	if (slot < SRV_NSEND && c->eager_live[slot]) {
		c->eager_live[slot] = false;
		transport_rreg_free(c->eager_own[slot]);
		c->eager_own[slot] = NULL;
		transport_serve_end(&c->eager[slot]);
	}
	if (c->close_after_send) {
		transport_rconn_fail(rc, -EACCES);
		return;
	}
	if (run_queue(c))
		transport_rconn_fail(rc, -EPROTO);
}

static void srv_read(struct rconn *rc, uint64_t wr_id, int err)
{
	(void)wr_id;
	(void)err; /* a server posts no READs */
	transport_rconn_fail(rc, -EPROTO);
}

static void srv_tick(struct rconn *rc)
{
	struct rsrv_conn *c = (struct rsrv_conn *)rc;
	int64_t now = util_mono_ns();
	struct pin **pp = &c->pins, *p;

	if (!transport_auth_srv_ready(&c->auth) && now > c->hs_until) {
		transport_log(rc->t, TLOG_HANDSHAKE, LOGL_INFO,
			      "transport: rdma: no handshake from %s in time", rc->peer);
		transport_rconn_fail(rc, -ETIMEDOUT);
	}
	while ((p = *pp)) {
		if (now < p->until) {
			pp = &p->next;
			continue;
		}
		transport_log(rc->t, TLOG_CONN, LOGL_INFO,
			      "transport: rdma: %s sent no FIN for object %" PRIu64
			      " in time; unpinning it",
			      rc->peer, p->ctx.id);
		*pp = p->next;
		pin_free(p);
	}
	if (run_queue(c))
		transport_rconn_fail(rc, -EPROTO);
}

static const struct rconn_ops srv_ops = {
    .on_msg = srv_msg,
    .on_read = srv_read,
    .on_send = srv_send_done,
    .tick = srv_tick,
};

/* Tear down a connection whose thread is not running, unpinning all. */
static void conn_free(struct rsrv_conn *c)
{
	struct pin *p;
	unsigned i;

	transport_rconn_teardown(&c->rc);
	while ((p = c->pins)) {
		c->pins = p->next;
		pin_free(p);
	}
	for (i = 0; i < SRV_NSEND; i++)
		if (c->eager_live[i]) {
			transport_rreg_free(c->eager_own[i]);
			transport_serve_end(&c->eager[i]);
		}
	COUNT_SUB(c->rc.t, conns_open, 1);
	free(c);
}

/* ---- accepting ---- */

static bool peer_local(struct rdma_cm_id *id)
{
	struct sockaddr *peer = rdma_get_peer_addr(id), *me = rdma_get_local_addr(id);

	if (transport_auth_peer_is_local(peer, sizeof(struct sockaddr_storage)))
		return true;
	/* one host, one RDMA device: both ends have the same address */
	if (peer->sa_family == AF_INET && me->sa_family == AF_INET)
		return ((struct sockaddr_in *)peer)->sin_addr.s_addr ==
		       ((struct sockaddr_in *)me)->sin_addr.s_addr;
	return false;
}

static void accept_one(struct rdma_server *srv, struct rdma_cm_id *id, const struct rpriv *theirs)
{
	struct transport *t = srv->t;
	struct rdma_event_channel *ech = NULL;
	struct rdma_conn_param param;
	struct rpriv mine;
	struct rsrv_conn *c;
	char name[TRANSPORT_ADDR_MAX];
	unsigned n;
	int err = -ENOMEM;

	transport_auth_addr_str(rdma_get_peer_addr(id), sizeof(struct sockaddr_storage), name,
				sizeof(name));
	if (!transport_rpriv_ok(theirs, t->wire_max)) {
		COUNT_ADD(t, bad_frames, 1);
		transport_log(t, TLOG_BAD_FRAME, LOGL_WARN,
			      "transport: rdma: refused %s: unknown connection parameters", name);
		goto reject;
	}
	pthread_mutex_lock(&srv->lock);
	n = srv->nconns;
	pthread_mutex_unlock(&srv->lock);
	if (n >= t->serve_conns) {
		transport_log(t, TLOG_LIMIT, LOGL_WARN,
			      "transport: rdma: refused %s: %u connections already", name, n);
		goto reject;
	}
	c = calloc(1, sizeof(*c));
	ech = rdma_create_event_channel();
	if (!c || !ech || rdma_migrate_id(id, ech)) {
		err = errno ? -errno : -ENOMEM;
		free(c);
		goto fail;
	}
	snprintf(c->rc.peer, sizeof(c->rc.peer), "%s", name);
	c->srv = srv;
	err = transport_rconn_setup(t, &c->rc, id, ech, SRV_NRECV, SRV_RSIZE, SRV_NSEND);
	if (err) {
		free(c);
		goto fail;
	}
	c->rc.credits = (int)theirs->nrecv;
	c->rc.peer_rsize = theirs->rsize;
	c->rc.ver = theirs->version; /* the client's, which we speak (or it was refused) */
	transport_auth_srv_init(&c->auth, peer_local(id));
	c->hs_until = util_mono_ns() + (int64_t)t->io_timeout_ms * 1000000LL;
	transport_rconn_param(&c->rc, &param, &mine);
	if (rdma_accept(id, &param) || transport_rconn_start(&c->rc, &srv_ops)) {
		transport_log(t, TLOG_CONN, LOGL_WARN, "transport: rdma: cannot accept %s: %s",
			      name, strerror(errno));
		transport_rconn_teardown(&c->rc); /* destroys @id and @ech too */
		free(c);
		return;
	}
	COUNT_ADD(t, conns_accepted, 1);
	COUNT_ADD(t, conns_open, 1);
	pthread_mutex_lock(&srv->lock);
	c->next = srv->conns;
	srv->conns = c;
	srv->nconns++;
	pthread_mutex_unlock(&srv->lock);
	return;

fail:
	transport_log(t, TLOG_CONN, LOGL_WARN, "transport: rdma: cannot accept %s: %s", name,
		      strerror(-err));
reject:
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
	if (ech)
		rdma_destroy_event_channel(ech);
}

static void reap(struct rdma_server *srv)
{
	struct rsrv_conn **pp, *c, *dead = NULL;

	pthread_mutex_lock(&srv->lock);
	for (pp = &srv->conns; (c = *pp);) {
		bool gone;

		pthread_mutex_lock(&c->rc.lock);
		gone = c->rc.err != 0;
		pthread_mutex_unlock(&c->rc.lock);
		if (!gone) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		srv->nconns--;
		c->next = dead;
		dead = c;
	}
	pthread_mutex_unlock(&srv->lock);
	while ((c = dead)) {
		dead = c->next;
		conn_free(c);
	}
}

static void listen_event(struct rdma_server *srv)
{
	struct rdma_cm_event *ev;
	struct rpriv theirs = {0};
	struct rdma_cm_id *id;

	while (!rdma_get_cm_event(srv->lech, &ev)) {
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		id = ev->id;
		if (ev->param.conn.private_data &&
		    ev->param.conn.private_data_len >= sizeof(theirs))
			memcpy(&theirs, ev->param.conn.private_data, sizeof(theirs));
		/* acked before the id moves to its own channel */
		rdma_ack_cm_event(ev);
		accept_one(srv, id, &theirs);
	}
}

static void *listen_thread(void *arg)
{
	struct rdma_server *srv = arg;
	struct pollfd pfd[2] = {
	    {.fd = srv->lech->fd, .events = POLLIN},
	    {.fd = srv->wake_fd, .events = POLLIN},
	};

	while (!atomic_load(&srv->stop)) {
		if (poll(pfd, 2, REAP_MS) < 0 && errno != EINTR)
			break;
		if (atomic_load(&srv->stop))
			break;
		if (pfd[0].revents)
			listen_event(srv);
		reap(srv);
		transport_log_flush(srv->t);
	}
	return NULL;
}

int transport_rd_serve(struct transport *t)
{
	struct sockaddr_storage sa;
	struct rdma_server *srv;
	struct ibv_context **devs;
	char addr[TRANSPORT_ADDR_MAX];
	socklen_t salen;
	const char *host = t->listen_host && *t->listen_host ? t->listen_host : "0.0.0.0";
	int n = 0, err;

	devs = rdma_get_devices(&n);
	if (devs)
		rdma_free_devices(devs);
	if (n <= 0)
		return -ENODEV;
	snprintf(addr, sizeof(addr), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host,
		 t->listen_port ? t->listen_port : 1);
	err = transport_raddr_resolve(addr, true, &sa, &salen);
	if (err)
		return err;
	if (!t->listen_port)
		((struct sockaddr_in *)&sa)->sin_port = 0; /* same offset for in6 */
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->t = t;
	srv->wake_fd = -1;
	pthread_mutex_init(&srv->lock, NULL);
	err = -ENOMEM;
	srv->lech = rdma_create_event_channel();
	if (!srv->lech)
		goto free_srv;
	if (rdma_create_id(srv->lech, &srv->lid, srv, RDMA_PS_TCP)) {
		err = -errno;
		goto free_ech;
	}
	if (rdma_bind_addr(srv->lid, (struct sockaddr *)&sa) ||
	    rdma_listen(srv->lid, LISTEN_BACKLOG)) {
		err = errno ? -errno : -EADDRNOTAVAIL;
		goto free_id;
	}
	if (srv->lid->verbs)
		transport_rdev_set_default(srv->lid->verbs);
	transport_auth_addr_str(rdma_get_local_addr(srv->lid), sizeof(struct sockaddr_storage),
				srv->addr, sizeof(srv->addr));
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->wake_fd < 0 || transport_fcntl_nonblock(srv->lech->fd)) {
		err = -errno;
		goto free_id;
	}
	err = -pthread_create(&srv->thread, NULL, listen_thread, srv);
	if (err)
		goto free_id;
	t->srv = srv;
	return 0;

free_id:
	if (srv->wake_fd >= 0)
		close(srv->wake_fd);
	rdma_destroy_id(srv->lid);
free_ech:
	rdma_destroy_event_channel(srv->lech);
free_srv:
	pthread_mutex_destroy(&srv->lock);
	free(srv);
	return err;
}

void transport_rd_stop(struct transport *t)
{
	struct rdma_server *srv = t->srv;
	struct rsrv_conn *c;
	uint64_t one = 1;

	atomic_store(&srv->stop, true);
	if (write(srv->wake_fd, &one, sizeof(one)) < 0)
		log_debug("transport: rdma: waking the listener: %s", strerror(errno));
	pthread_join(srv->thread, NULL);
	while ((c = srv->conns)) {
		srv->conns = c->next;
		conn_free(c);
	}
	rdma_destroy_id(srv->lid);
	rdma_destroy_event_channel(srv->lech);
	close(srv->wake_fd);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
	t->srv = NULL;
}

int transport_rd_addr(const struct transport *t, char *buf, size_t len)
{
	const struct rdma_server *srv = t->srv;

	if (!srv)
		return -ENOTCONN;
	snprintf(buf, len, "%s", srv->addr);
	return 0;
}
