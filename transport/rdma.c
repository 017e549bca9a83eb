/*
 * rdma: the RDMA backend (rdma-core: librdmacm for connections, RC queue
 * pairs, libibverbs for the data path).  docs/protocol.md, "RDMA", has
 * the wire; rdma_i.h the connection (rings, credits, its thread).
 *
 * This file is the client and the ops: one shared connection per peer; a
 * range goes eager (GET with RM_F_EAGER, answered by a SEND of the bytes,
 * which the connection's thread copies into the destination) or by
 * rendezvous (RDMA READs of the holder's registered range straight into
 * the destination, then FIN).  rdma_serve.c is the server, which answers
 * GETs through serve.c like every backend.  docs/design.md, "The RDMA
 * backend", has both sides, the registrations and the versions.
 *
 * OBJFS_RDMA_PATH=eager|rendezvous in the environment forces one path
 * for every range (eager ranges larger than the eager size go as several
 * eager GETs at once): for benchmarks only.
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
#include <unistd.h>

#include "log.h"

#define CLI_NRECV 32
#define CLI_NSEND 32
#define RDV_CHUNK (1u << 20)
#define RDV_WINDOW 8
#define EAGER_WINDOW 16
#define ACK_TIMEOUT 14 /* 4.096 us * 2^14: 67 ms per retry */
#define RD_ATOMIC_MAX 16

/* every fetch from a broken peer may repeat it (common/log.h) */
static struct log_ratelimit reads_rl =
    LOG_RATELIMIT_INIT("transport: rdma: READs that never completed", 10000, 10);

enum path { PATH_HYBRID, PATH_EAGER, PATH_RDV };

bool transport_rdma_test_no_fin;

/* ---- client ---- */

enum wstate { W_SENT, W_DONE, W_RDV };

/* One request out on a connection (c->lock). */
struct rwait {
	uint64_t tag;
	enum wstate state;
	int err;
	uint64_t id, off, len;		 /* the range asked */
	uint8_t flags;			 /* its GET's RM_F_* beyond RM_F_EAGER */
	struct transport_have *have_out; /* where a HAVE answer goes; NULL: nowhere */
	struct iovec *iov;		 /* its destination */
	int iovcnt;
	uint64_t raddr; /* RDV */
	uint32_t rkey;
	uint64_t read_done; /* bytes READ into place, in order */
	unsigned reads_out;
	uint32_t chunk[RDV_WINDOW]; /* lengths of the READs out, oldest first */
	unsigned chunk_head;
	struct rwait *next;
};

struct rcli {
	struct rconn rc; /* first: transport.c's tconn is its first member */
	struct rwait *waits;
	/* requests on the list: at most the server's nrecv, the GETs it
	 * can hold while it has no credit to answer them (lock) */
	unsigned inflight;
	uint64_t next_tag;
	unsigned peer_nrecv;
	struct wire_msg auth_in; /* the last handshake message (lock) */
	bool auth_got;
};

static enum path forced_path(void)
{
	const char *p = getenv("OBJFS_RDMA_PATH");

	if (p && !strcmp(p, "eager"))
		return PATH_EAGER;
	if (p && !strcmp(p, "rendezvous"))
		return PATH_RDV;
	return PATH_HYBRID;
}

static struct rwait *wait_find_locked(struct rcli *c, uint64_t tag)
{
	struct rwait *w;

	for (w = c->waits; w && w->tag != tag; w = w->next)
		;
	return w;
}

static void wait_del_locked(struct rcli *c, struct rwait *w)
{
	struct rwait **pp;

	for (pp = &c->waits; *pp && *pp != w; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = w->next;
		c->inflight--;
		pthread_cond_broadcast(&c->rc.cond);
	}
}

/* Copy @len bytes into @iov from byte @at of the destination. */
static void iov_put(struct iovec *iov, int cnt, uint64_t at, const uint8_t *src, uint64_t len)
{
	int i;

	for (i = 0; i < cnt && len; i++) {
		uint64_t n;

		if (at >= iov[i].iov_len) {
			at -= iov[i].iov_len;
			continue;
		}
		n = iov[i].iov_len - at;
		if (n > len)
			n = len;
		memcpy((uint8_t *)iov[i].iov_base + at, src, n);
		src += n;
		len -= n;
		at = 0;
	}
}

/*
 * An RM_HAVE for @w: a wire.c HAVE echoing its GET, where the GET allowed
 * one (as on TCP: alone, after PARTIAL_OK or for a query; busy, only
 * after BUSY_OK for a range with bytes).  It ends the request: "not yet"
 * (-EAGAIN) for a range, 0 for a query.  c->lock held.
 */
static int have_take_locked(struct rwait *w, const uint8_t *body, size_t len)
{
	struct wire_msg h;
	bool ok;

	if (transport_wire_decode(body, len, &h) != (int)len || h.type != WIRE_HAVE ||
	    h.ver != WIRE_V2 || h.flags || h.id != w->id || h.off != w->off)
		return -EPROTO;
	if (h.have.flags & TRANSPORT_HAVE_BUSY)
		ok = (w->flags & RM_F_BUSY_OK) && w->len;
	else
		ok = (w->flags & RM_F_PARTIAL_OK) || ((w->flags & RM_F_WANT_HAVE) && !w->len);
	if (!ok)
		return -EPROTO;
	if (w->have_out)
		*w->have_out = h.have;
	w->err = w->len ? -EAGAIN : 0;
	w->state = W_DONE;
	return 0;
}

static int cli_msg(struct rconn *rc, const struct rmsg *m, const uint8_t *body, size_t len)
{
	struct rcli *c = (struct rcli *)rc;
	struct rwait *w;
	int err = 0;

	pthread_mutex_lock(&rc->lock);
	if (m->type == RM_AUTH) {
		err = transport_wire_decode(body, len, &c->auth_in) == (int)len ? 0 : -EPROTO;
		c->auth_got = true;
		goto out;
	}
	w = wait_find_locked(c, m->tag);
	if (!w || w->state != W_SENT || w->id != m->id || w->off != m->off) {
		err = -EPROTO;
		goto out;
	}
	switch (m->type) {
	case RM_DATA:
		if (m->len != w->len) {
			err = -EPROTO;
			break;
		}
		iov_put(w->iov, w->iovcnt, 0, body, m->len);
		w->state = W_DONE;
		break;
	case RM_RDV:
		if (m->len != w->len) {
			err = -EPROTO;
			break;
		}
		w->raddr = m->addr;
		w->rkey = m->status;
		w->state = W_RDV;
		break;
	case RM_ERR:
		w->err = -(int)m->status;
		w->state = W_DONE;
		break;
	case RM_HAVE:
		err = have_take_locked(w, body, len);
		break;
	default:
		err = -EPROTO;
	}
out:
	pthread_cond_broadcast(&rc->cond);
	pthread_mutex_unlock(&rc->lock);
	if (err) {
		COUNT_ADD(rc->t, bad_frames, 1);
		transport_log(rc->t, TLOG_BAD_FRAME, LOGL_WARN,
			      "transport: rdma: %s sent a malformed or unasked-for %s", rc->peer,
			      m->type == RM_AUTH ? "handshake message" : "reply");
	}
	return err;
}

static void cli_read(struct rconn *rc, uint64_t wr_id, int err)
{
	struct rwait *w = (struct rwait *)(uintptr_t)wr_id;

	pthread_mutex_lock(&rc->lock);
	if (!err)
		w->read_done += w->chunk[w->chunk_head];
	else if (!w->err)
		w->err = err;
	w->chunk_head = (w->chunk_head + 1) % RDV_WINDOW;
	w->reads_out--;
	pthread_cond_broadcast(&rc->cond);
	pthread_mutex_unlock(&rc->lock);
}

static const struct rconn_ops cli_ops = {
    .on_msg = cli_msg,
    .on_read = cli_read,
};

/* Send @m, waiting for a credit and a slot until @deadline.  c->lock held. */
static int send_wait_locked(struct rconn *c, struct rmsg *m, const void *body, size_t blen,
			    int64_t deadline)
{
	int err;

	while ((err = transport_rconn_send(c, m, body, blen, NULL, 0, NULL, true)) == -EAGAIN)
		if (transport_rconn_wait_locked(c, deadline))
			return -ETIMEDOUT;
	return err;
}

/* Ask for one range; @w is filled in and goes on the list.  c->lock held. */
static int get_locked(struct rcli *c, struct rwait *w, bool eager, int64_t deadline)
{
	struct rmsg m = {.type = RM_GET, .flags = (uint8_t)((eager ? RM_F_EAGER : 0) | w->flags)};
	int err;

	while (c->inflight >= c->peer_nrecv) {
		if (c->rc.err)
			return c->rc.err;
		if (transport_rconn_wait_locked(&c->rc, deadline))
			return -ETIMEDOUT;
	}
	w->tag = ++c->next_tag;
	w->state = W_SENT;
	m.tag = w->tag;
	m.id = w->id;
	m.off = w->off;
	m.len = w->len;
	err = send_wait_locked(&c->rc, &m, NULL, 0, deadline);
	if (err)
		return err;
	w->next = c->waits;
	c->waits = w;
	c->inflight++;
	COUNT_ADD(c->rc.t, requests_sent, 1);
	return 0;
}

static uint64_t deadline_of(struct transport *t)
{
	return (uint64_t)util_mono_ns() + (uint64_t)t->io_timeout_ms * 1000000ULL;
}

/* Does an answer of @err leave the connection in step (the peer said
 * so), so that the requests still out on it may go on? */
static bool answer_in_step(int err)
{
	return err == -ENOENT || err == -ERANGE || err == -EAGAIN;
}

/*
 * The eager path: the range in pieces of at most @piece bytes (one piece
 * unless forced), EAGER_WINDOW out at once, each GET with @flags.
 */
static int fetch_eager(struct rcli *c, const struct transport_req *req, uint64_t piece,
		       uint8_t flags)
{
	struct rconn *rc = &c->rc;
	struct transport *t = rc->t;
	uint64_t n = req->len ? (req->len + piece - 1) / piece : 1, sent = 0, done = 0, i;
	struct rwait w[EAGER_WINDOW];
	struct iovec iov[EAGER_WINDOW][8];
	int64_t deadline = (int64_t)deadline_of(t);
	int err = 0;

	pthread_mutex_lock(&rc->lock);
	while (done < n && !err) {
		while (sent < n && sent - done < EAGER_WINDOW && !err) {
			struct rwait *x = &w[sent % EAGER_WINDOW];
			uint64_t at = sent * piece;
			int cnt;

			memset(x, 0, sizeof(*x));
			x->id = req->id;
			x->off = req->off + at;
			x->len = req->len - at < piece ? req->len - at : piece;
			x->flags = flags;
			x->have_out = req->have_out;
			cnt = transport_iov_slice(req->iov, req->iovcnt, at, x->len,
						  iov[sent % EAGER_WINDOW], 8);
			if (cnt < 0) {
				err = -EINVAL;
				break;
			}
			x->iov = iov[sent % EAGER_WINDOW];
			x->iovcnt = cnt;
			err = get_locked(c, x, true, deadline);
			if (!err)
				sent++;
		}
		if (err)
			break;
		i = done % EAGER_WINDOW;
		if (w[i].state == W_DONE) {
			wait_del_locked(c, &w[i]);
			err = w[i].err;
			if (err)
				break;
			done++;
			deadline = (int64_t)deadline_of(t);
			if (req->progress) {
				uint64_t in_place =
				    done * piece < req->len ? done * piece : req->len;

				pthread_mutex_unlock(&rc->lock);
				req->progress(req->arg, in_place);
				pthread_mutex_lock(&rc->lock);
			}
			continue;
		}
		if (rc->err)
			err = rc->err;
		else if (transport_rconn_wait_locked(rc, deadline))
			err = -ETIMEDOUT;
	}
	if (err) {
		/* the rest are dropped with the connection: a late answer
		 * must find no request to write into */
		if (!answer_in_step(err))
			transport_rconn_fail_locked(rc, err);
		for (i = done; i < sent; i++)
			wait_del_locked(c, &w[i % EAGER_WINDOW]);
	}
	pthread_mutex_unlock(&rc->lock);
	if (!err) {
		COUNT_ADD(t, fetch_eager, 1);
		COUNT_ADD(t, bytes_eager, req->len);
		COUNT_ADD(t, bytes_received, req->len);
	}
	return err;
}

/* The lkey that covers [@addr, @addr + @len) of the destination. */
static bool region_key(const struct transport_req *req, struct rconn *rc, const void *addr,
		       uint64_t len, uint32_t *ret)
{
	const struct rregion *r = (const struct rregion *)req->region;
	uintptr_t a = (uintptr_t)addr, b = (uintptr_t)r;

	if (!b || r->base.ops != &transport_rdma_ops || r->reg->dev != rc->dev)
		return false;
	if (a < (uintptr_t)r->addr || a + len > (uintptr_t)r->addr + r->len)
		return false;
	*ret = r->reg->mr->lkey;
	return true;
}

/*
 * Post the READs of the rendezvous @w into @req's destination, using
 * @keys (one per destination iovec), RDV_WINDOW at a time, and wait for
 * them.  c->lock held.
 */
static int read_all_locked(struct rcli *c, struct rwait *w, const struct transport_req *req,
			   const uint32_t *keys)
{
	struct rconn *rc = &c->rc;
	int64_t deadline = (int64_t)deadline_of(rc->t);
	uint64_t posted = 0, seen = 0, at = 0;
	int i = 0, err = 0;
	unsigned tail = 0;

	while ((posted < w->len || w->reads_out) && !err) {
		while (posted < w->len && w->reads_out < RDV_WINDOW) {
			uint64_t n = w->len - posted;

			while (at >= req->iov[i].iov_len) {
				at -= req->iov[i].iov_len;
				i++;
			}
			if (n > req->iov[i].iov_len - at)
				n = req->iov[i].iov_len - at;
			if (n > RDV_CHUNK)
				n = RDV_CHUNK;
			err = transport_rconn_read_locked(
			    rc, (uintptr_t)w, (uint8_t *)req->iov[i].iov_base + at, keys[i],
			    w->raddr + posted, w->rkey, (uint32_t)n);
			if (err == -EAGAIN) {
				err = 0;
				break;
			}
			if (err)
				break;
			w->chunk[tail] = (uint32_t)n;
			tail = (tail + 1) % RDV_WINDOW;
			w->reads_out++;
			posted += n;
			at += n;
		}
		if (err || w->err)
			break;
		if (w->read_done > seen) {
			seen = w->read_done;
			deadline = (int64_t)deadline_of(rc->t);
			if (req->progress) {
				pthread_mutex_unlock(&rc->lock);
				req->progress(req->arg, seen);
				pthread_mutex_lock(&rc->lock);
			}
			continue;
		}
		if (posted == w->len && !w->reads_out)
			break;
		if (rc->err)
			err = rc->err;
		else if (transport_rconn_wait_locked(rc, deadline))
			err = -ETIMEDOUT;
	}
	if (!err)
		err = w->err;
	if (!err && seen < w->len && req->progress) {
		/* the last READ completed as the loop ended: the last call */
		pthread_mutex_unlock(&rc->lock);
		req->progress(req->arg, w->len);
		pthread_mutex_lock(&rc->lock);
	}
	if (err) {
		/* flush the READs still out, and wait for them: they
		 * point at @w and write into the destination */
		transport_rconn_fail_locked(rc, err);
		deadline = util_mono_ns() + 5000000000LL;
		while (w->reads_out && !transport_rconn_wait_locked(rc, deadline))
			;
		if (w->reads_out) {
			log_msg_limited(&reads_rl, LOGL_ERROR,
					"transport: rdma: READs to %s never completed; leaving the "
					"connection's memory in place",
					rc->peer);
			return -EIO;
		}
	}
	return err;
}

static int fetch_rdv(struct rcli *c, const struct transport_req *req, uint8_t flags)
{
	struct rconn *rc = &c->rc;
	struct transport *t = rc->t;
	struct rreg *tmp[8] = {0};
	uint32_t keys[8];
	struct rwait *w;
	int64_t deadline = util_mono_ns() + transport_rdv_budget_ns(t, req->len);
	int i, err;

	if (req->iovcnt > 8)
		return -EINVAL;
	for (i = 0; i < req->iovcnt; i++) {
		if (region_key(req, rc, req->iov[i].iov_base, req->iov[i].iov_len, &keys[i]))
			continue;
		err = transport_rreg_new(t, rc->dev, req->iov[i].iov_base, req->iov[i].iov_len,
					 IBV_ACCESS_LOCAL_WRITE, &tmp[i]);
		if (err)
			goto free_tmp;
		keys[i] = tmp[i]->mr->lkey;
	}
	err = -ENOMEM;
	w = calloc(1, sizeof(*w)); /* READs point at it: see read_all_locked() */
	if (!w)
		goto free_tmp;
	w->id = req->id;
	w->off = req->off;
	w->len = req->len;
	w->flags = flags;
	w->have_out = req->have_out;
	pthread_mutex_lock(&rc->lock);
	err = get_locked(c, w, false, deadline);
	if (err) {
		pthread_mutex_unlock(&rc->lock);
		free(w);
		goto free_tmp;
	}
	while (w->state == W_SENT && !rc->err)
		if (transport_rconn_wait_locked(rc, deadline))
			break;
	wait_del_locked(c, w);
	if (w->state == W_SENT)
		err = rc->err ? rc->err : -ETIMEDOUT;
	else if (w->state == W_DONE)
		err = w->err ? w->err : -EPROTO;
	else
		err = read_all_locked(c, w, req, keys);
	if (err && !answer_in_step(err))
		transport_rconn_fail_locked(rc, err);
	if (w->state == W_RDV && !rc->err && !transport_rdma_test_no_fin) {
		struct rmsg fin = {.type = RM_FIN, .tag = w->tag, .id = w->id, .off = w->off};

		/* a lost FIN costs the holder a pin until its timeout, no more */
		(void)send_wait_locked(rc, &fin, NULL, 0, (int64_t)deadline_of(t));
	}
	pthread_mutex_unlock(&rc->lock);
	if (err == -EIO && w->reads_out)
		goto leak; /* the device never gave the READs back */
	free(w);
	if (!err) {
		COUNT_ADD(t, fetch_rdv, 1);
		COUNT_ADD(t, bytes_rdv, req->len);
		COUNT_ADD(t, bytes_received, req->len);
	}
free_tmp:
	for (i = 0; i < 8; i++)
		transport_rreg_free(tmp[i]);
	return err;
leak:
	return err;
}

/*
 * The GET flags of @req on @c: none in version 1.  Never PARK (a server
 * answers on its connection's thread, which must not wait), and
 * WANT_HAVE only for a query (there is no HAVE before the bytes over
 * RDMA: req->have_out is written only by a HAVE that ends the request).
 */
static uint8_t rm_flags(const struct rcli *c, const struct transport_req *req)
{
	uint8_t f = 0;

	if (c->rc.ver < RMSG_V2)
		return 0;
	if (req->flags & TRANSPORT_F_PARTIAL_OK)
		f |= RM_F_PARTIAL_OK;
	if ((req->flags & TRANSPORT_F_WANT_HAVE) && !req->len)
		f |= RM_F_WANT_HAVE;
	if ((req->flags & TRANSPORT_F_BUSY_OK) && req->len)
		f |= RM_F_BUSY_OK;
	return f;
}

static int rd_fetch(struct tconn *tc, const struct transport_req *req)
{
	struct rcli *c = (struct rcli *)tc;
	uint64_t eager_max = c->rc.t->rdma_eager_max;
	enum path path = forced_path();
	uint8_t flags = rm_flags(c, req);

	if ((req->flags & TRANSPORT_F_WANT_HAVE) && !(flags & RM_F_WANT_HAVE) && !req->len)
		return -EOPNOTSUPP; /* a query needs version 2 */
	if (eager_max > c->rc.rsize - RMSG_HDR)
		eager_max = c->rc.rsize - RMSG_HDR;
	if (path == PATH_EAGER)
		return fetch_eager(c, req, eager_max, flags);
	if ((path == PATH_HYBRID && req->len <= eager_max) || !req->len)
		return fetch_eager(c, req, eager_max, flags);
	return fetch_rdv(c, req, flags);
}

static bool rd_idle_ok(struct tconn *tc)
{
	struct rconn *rc = (struct rconn *)tc;
	bool ok;

	pthread_mutex_lock(&rc->lock);
	ok = !rc->err;
	pthread_mutex_unlock(&rc->lock);
	return ok;
}

static void rd_close(struct tconn *tc)
{
	struct rcli *c = (struct rcli *)tc;

	transport_rconn_teardown(&c->rc);
	free(c);
}

/* ---- connecting ---- */

/* Wait for the next event on @ech until @deadline: its type, and the
 * peer's private data if it came with one.  -ETIMEDOUT. */
static int cm_wait(struct rdma_event_channel *ech, int64_t deadline, struct rpriv *ret_priv,
		   bool *ret_has_priv)
{
	struct pollfd pfd = {.fd = ech->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int type;

	for (;;) {
		if (!rdma_get_cm_event(ech, &ev))
			break;
		if (errno != EAGAIN)
			return -errno;
		if (!transport_ms_left(deadline) || poll(&pfd, 1, transport_ms_left(deadline)) < 0)
			return -ETIMEDOUT;
	}
	type = (int)ev->event;
	if (ret_has_priv) {
		*ret_has_priv = ev->param.conn.private_data &&
				ev->param.conn.private_data_len >= sizeof(*ret_priv);
		if (*ret_has_priv)
			memcpy(ret_priv, ev->param.conn.private_data, sizeof(*ret_priv));
	}
	rdma_ack_cm_event(ev);
	return type;
}

static int cm_expect(struct rdma_event_channel *ech, int64_t deadline, enum rdma_cm_event_type want,
		     struct rpriv *ret_priv, bool *ret_has_priv)
{
	int type = cm_wait(ech, deadline, ret_priv, ret_has_priv);

	if (type < 0)
		return type;
	if (type == (int)want)
		return 0;
	switch (type) {
	case RDMA_CM_EVENT_REJECTED:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return -ECONNREFUSED;
	default:
		return -ECONNRESET;
	}
}

void transport_rconn_param(struct rconn *c, struct rdma_conn_param *p, struct rpriv *priv)
{
	struct ibv_device_attr da;
	int depth = RD_ATOMIC_MAX;

	if (!ibv_query_device(c->id->verbs, &da)) {
		if (da.max_qp_rd_atom < depth)
			depth = da.max_qp_rd_atom;
		if (da.max_qp_init_rd_atom < depth)
			depth = da.max_qp_init_rd_atom;
	}
	memset(priv, 0, sizeof(*priv));
	priv->magic = RMSG_MAGIC;
	priv->version = c->ver;
	priv->nrecv = c->nrecv;
	priv->rsize = c->rsize;
	memset(p, 0, sizeof(*p));
	p->private_data = priv;
	p->private_data_len = sizeof(*priv);
	p->responder_resources = (uint8_t)depth;
	p->initiator_depth = (uint8_t)depth;
	p->retry_count = 7;
	p->rnr_retry_count = 7;
}

bool transport_rpriv_ok(const struct rpriv *p, unsigned ver_max)
{
	return p->magic == RMSG_MAGIC && p->version >= RMSG_V1 && p->version <= ver_max &&
	       p->nrecv >= 2 && p->nrecv <= 4096 && p->rsize >= RMSG_HDR + WIRE_MSG_MAX &&
	       p->rsize <= RMSG_HDR + TRANSPORT_RDMA_EAGER_MAX;
}

/* The client's side of the handshake, over the connection. */
static int cli_handshake(struct rcli *c)
{
	struct rconn *rc = &c->rc;
	struct transport *t = rc->t;
	int64_t deadline = util_mono_ns() + (int64_t)t->io_timeout_ms * 1000000LL;
	uint8_t buf[WIRE_MSG_MAX];
	struct wire_msg out, in;
	struct auth_cli a;
	struct rmsg m;
	int n, err;

	err = transport_auth_cli_hello(t, &a, WIRE_V1, &out);
	while (!err) {
		n = transport_wire_encode(&out, buf, sizeof(buf));
		if (n < 0)
			return n;
		m = (struct rmsg){.type = RM_AUTH, .len = (uint64_t)n};
		pthread_mutex_lock(&rc->lock);
		err = send_wait_locked(rc, &m, buf, (size_t)n, deadline);
		while (!err && !c->auth_got && !rc->err)
			if (transport_rconn_wait_locked(rc, deadline))
				err = -ETIMEDOUT;
		if (!err && !c->auth_got)
			err = rc->err;
		in = c->auth_in;
		c->auth_got = false;
		pthread_mutex_unlock(&rc->lock);
		if (err)
			return err;
		err = transport_auth_cli_step(t, &a, &in, &out);
		if (err == 0)
			return 0;
		if (err == 1)
			err = 0;
	}
	return err;
}

/* @ver is the version of RDMA messages to speak (RMSG_V2 to a peer whose
 * card has "rfan"), not TCP's: the handshake they carry is version 1 */
static int rd_connect(struct transport *t, const char *addr, unsigned ver, struct tconn **ret)
{
	int64_t deadline = util_mono_ns() + (int64_t)t->io_timeout_ms * 1000000LL;
	unsigned eager = t->rdma_eager_max, rsize;
	struct rdma_event_channel *ech;
	struct sockaddr_storage sa;
	struct rdma_conn_param param;
	struct rpriv mine, theirs;
	struct rdma_cm_id *id;
	uint8_t timeout = ACK_TIMEOUT;
	bool has_priv = false;
	socklen_t salen;
	struct rcli *c;
	int err;

	err = transport_raddr_resolve(addr, false, &sa, &salen);
	if (err)
		return err == -EINVAL ? -EINVAL : -EHOSTUNREACH;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	snprintf(c->rc.peer, sizeof(c->rc.peer), "%s", addr);
	err = -ENOMEM;
	ech = rdma_create_event_channel();
	if (!ech)
		goto free_c;
	if (rdma_create_id(ech, &id, c, RDMA_PS_TCP)) {
		err = -errno;
		rdma_destroy_event_channel(ech);
		goto free_c;
	}
	c->rc.wake_fd = -1;
	c->rc.id = id;
	c->rc.ech = ech;
	if (transport_fcntl_nonblock(ech->fd) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, transport_ms_left(deadline) ?: 1)) {
		err = -EHOSTUNREACH;
		goto teardown;
	}
	err = cm_expect(ech, deadline, RDMA_CM_EVENT_ADDR_RESOLVED, NULL, NULL);
	if (err)
		goto teardown;
	(void)rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
			      sizeof(timeout));
	err = -EHOSTUNREACH;
	if (rdma_resolve_route(id, transport_ms_left(deadline) ?: 1))
		goto teardown;
	err = cm_expect(ech, deadline, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, NULL);
	if (err)
		goto teardown;
	/* room for a HAVE (version 2) however small the eager size */
	rsize = RMSG_HDR + (eager > WIRE_MSG_MAX_V2 ? eager : WIRE_MSG_MAX_V2);
	err = transport_rconn_setup(t, &c->rc, id, ech, CLI_NRECV, rsize, CLI_NSEND);
	if (err)
		goto teardown;
	c->rc.ver = ver >= RMSG_V2 ? RMSG_V2 : RMSG_V1;
	transport_rconn_param(&c->rc, &param, &mine);
	if (rdma_connect(id, &param)) {
		err = -ECONNREFUSED;
		goto teardown;
	}
	err = cm_expect(ech, deadline, RDMA_CM_EVENT_ESTABLISHED, &theirs, &has_priv);
	/* a server accepts in the version asked, or rejects */
	if (!err &&
	    (!has_priv || !transport_rpriv_ok(&theirs, c->rc.ver) || theirs.version != c->rc.ver))
		err = -EPROTO;
	if (err)
		goto teardown;
	c->rc.credits = (int)theirs.nrecv;
	c->peer_nrecv = theirs.nrecv;
	c->rc.peer_rsize = theirs.rsize;
	err = transport_rconn_start(&c->rc, &cli_ops);
	if (!err)
		err = cli_handshake(c);
	if (err)
		goto teardown;
	*ret = &c->rc.base;
	return 0;

teardown:
	transport_rconn_teardown(&c->rc);
free_c:
	free(c);
	return err;
}

/* ---- regions ---- */

static int rd_region_new(struct transport *t, void *addr, uint64_t len,
			 struct transport_region **ret)
{
	struct rregion *r;
	struct rdev *d = transport_rdev_default();
	int err;

	*ret = NULL;
	if (!d)
		return 0; /* no device: nothing will be fetched over RDMA */
	r = calloc(1, sizeof(*r));
	if (!r) {
		transport_rdev_put(d);
		return -ENOMEM;
	}
	err = transport_rreg_new(t, d, addr, len, IBV_ACCESS_LOCAL_WRITE, &r->reg);
	transport_rdev_put(d);
	if (err) {
		free(r);
		return err;
	}
	r->base.ops = &transport_rdma_ops;
	r->addr = addr;
	r->len = len;
	*ret = &r->base;
	return 0;
}

static void rd_region_free(struct transport_region *base)
{
	struct rregion *r = (struct rregion *)base;

	transport_rreg_free(r->reg);
	free(r);
}

const struct transport_ops transport_rdma_ops = {
    .name = "rdma",
    .caps = "rdma",
    .streams_per_peer = 2,
    .range_min = 8 << 20,
    .shared = true,
    .wire_max = RMSG_V2,
    .v2_token = "rfan",
    .serve = transport_rd_serve,
    .stop = transport_rd_stop,
    .addr = transport_rd_addr,
    .connect = rd_connect,
    .fetch = rd_fetch,
    .idle_ok = rd_idle_ok,
    .close = rd_close,
    .region_new = rd_region_new,
    .region_free = rd_region_free,
};
