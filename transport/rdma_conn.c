/*
 * rdma_conn: one RDMA connection (rdma_i.h), and what every connection
 * shares: the device registry, registrations and the
 * completion-status-to-errno map.  The message codec is rdma_msg.c's.
 *
 * Work request ids.  A receive is RWR_RECV | buffer index, a send
 * RWR_SEND | slot index; an RDMA READ carries the caller's id, which
 * must have neither bit (rdma.c uses pointers, which stay below 2^47).
 */
#define _GNU_SOURCE
#include "rdma_i.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

#define RWR_RECV (1ULL << 62)
#define RWR_SEND (2ULL << 62)
#define RWR_KIND (3ULL << 62)
#define CQ_BATCH 16

int64_t transport_rdv_budget_ns(const struct transport *t, uint64_t len)
{
	return (int64_t)t->io_timeout_ms * 1000000LL + (int64_t)(len / RDV_MIN_RATE) * 1000000000LL;
}

int transport_rdma_wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR:
		return -ETIMEDOUT; /* the peer stopped answering */
	case IBV_WC_WR_FLUSH_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_FATAL_ERR:
		return -ECONNRESET; /* the connection went down under it */
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_REM_INV_RD_REQ_ERR:
	case IBV_WC_BAD_RESP_ERR:
		return -EPROTO; /* a request or key the other side would not take */
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR:
	case IBV_WC_MW_BIND_ERR:
		return -EFAULT; /* our own registration did not cover it */
	default:
		return -EIO;
	}
}

/* ---- devices and registrations ---- */

/* rdev_lock guards rdevs, every rdev's refs, and default_verbs. */
static pthread_mutex_t rdev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdev *rdevs;
static struct ibv_context *default_verbs;

int transport_rdev_get(struct ibv_context *verbs, struct rdev **ret)
{
	struct rdev *d;
	int err = 0;

	pthread_mutex_lock(&rdev_lock);
	for (d = rdevs; d && d->verbs != verbs; d = d->next)
		;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			err = -ENOMEM;
			goto out;
		}
		d->verbs = verbs;
		d->pd = ibv_alloc_pd(verbs);
		if (!d->pd) {
			err = errno ? -errno : -ENOMEM;
			free(d);
			goto out;
		}
		d->next = rdevs;
		rdevs = d;
	}
	d->refs++;
	*ret = d;
out:
	pthread_mutex_unlock(&rdev_lock);
	return err;
}

void transport_rdev_put(struct rdev *d)
{
	struct rdev **pp;

	if (!d)
		return;
	pthread_mutex_lock(&rdev_lock);
	if (--d->refs) {
		pthread_mutex_unlock(&rdev_lock);
		return;
	}
	for (pp = &rdevs; *pp != d; pp = &(*pp)->next)
		;
	*pp = d->next;
	pthread_mutex_unlock(&rdev_lock);
	ibv_dealloc_pd(d->pd);
	free(d);
}

void transport_rdev_set_default(struct ibv_context *verbs)
{
	pthread_mutex_lock(&rdev_lock);
	default_verbs = verbs;
	pthread_mutex_unlock(&rdev_lock);
}

struct rdev *transport_rdev_default(void)
{
	struct ibv_context *verbs, **list;
	struct rdev *d = NULL;
	int n = 0;

	pthread_mutex_lock(&rdev_lock);
	verbs = default_verbs;
	pthread_mutex_unlock(&rdev_lock);
	if (!verbs) {
		list = rdma_get_devices(&n);
		if (list && n > 0)
			verbs = list[0];
		if (list)
			rdma_free_devices(list);
	}
	if (verbs && transport_rdev_get(verbs, &d))
		d = NULL;
	return d;
}

int transport_rreg_new(struct transport *t, struct rdev *d, void *addr, size_t len, int access,
		       struct rreg **ret)
{
	struct rreg *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	errno = 0;
	r->mr = ibv_reg_mr(d->pd, addr, len, access);
	if (!r->mr) {
		int err = errno ? -errno : -ENOMEM;

		free(r);
		return err;
	}
	pthread_mutex_lock(&rdev_lock);
	d->refs++;
	pthread_mutex_unlock(&rdev_lock);
	r->dev = d;
	r->t = t;
	COUNT_ADD(t, rdma_regs, 1);
	*ret = r;
	return 0;
}

void transport_rreg_free(struct rreg *r)
{
	if (!r)
		return;
	ibv_dereg_mr(r->mr);
	if (r->map)
		munmap(r->map, r->maplen);
	transport_rdev_put(r->dev);
	free(r);
}

int transport_rreg_object(struct transport *t, struct rdev *d, void *addr, size_t len, int fd,
			  struct rreg **ret)
{
	void *map;
	int err;

	err = transport_rreg_new(t, d, addr, len, IBV_ACCESS_REMOTE_READ, ret);
	if (err != -EFAULT || fd < 0)
		return err;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	err = transport_rreg_new(t, d, map, len, IBV_ACCESS_REMOTE_READ, ret);
	if (err) {
		munmap(map, len);
		return err;
	}
	(*ret)->map = map;
	(*ret)->maplen = len;
	return 0;
}

/* ---- addresses ---- */

int transport_raddr_resolve(const char *addr, bool passive, struct sockaddr_storage *ret,
			    socklen_t *ret_len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res;
	char host[TRANSPORT_ADDR_MAX], port[8];
	int err;

	err = transport_addr_split(addr, host, sizeof(host), port, sizeof(port));
	if (err)
		return err;
	if (passive)
		hints.ai_flags |= AI_PASSIVE;
	err = getaddrinfo(host, port, &hints, &res);
	if (err)
		return transport_gai_err(err);
	memcpy(ret, res->ai_addr, res->ai_addrlen);
	*ret_len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* ---- a connection ---- */

static int post_recv(struct rconn *c, unsigned i)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)(c->ring + (size_t)i * c->rsize),
	    .length = c->rsize,
	    .lkey = c->ring_reg->mr->lkey,
	};
	struct ibv_recv_wr wr = {.wr_id = RWR_RECV | i, .sg_list = &sge, .num_sge = 1}, *bad;

	return -ibv_post_recv(c->id->qp, &wr, &bad);
}

int transport_iov_slice(const struct iovec *iov, int cnt, uint64_t at, uint64_t len,
			struct iovec *out, int max)
{
	int i, n = 0;

	for (i = 0; i < cnt && len; i++) {
		uint64_t take;

		if (at >= iov[i].iov_len) {
			at -= iov[i].iov_len;
			continue;
		}
		if (n == max)
			return -1;
		take = iov[i].iov_len - at;
		if (take > len)
			take = len;
		out[n].iov_base = (uint8_t *)iov[i].iov_base + at;
		out[n].iov_len = take;
		n++;
		len -= take;
		at = 0;
	}
	return len ? -1 : n;
}

int transport_fcntl_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

int transport_rconn_setup(struct transport *t, struct rconn *c, struct rdma_cm_id *id,
			  struct rdma_event_channel *ech, unsigned nrecv, unsigned rsize,
			  unsigned nsend)
{
	struct ibv_qp_init_attr qa = {0};
	pthread_condattr_t ca;
	size_t bytes = (size_t)nrecv * rsize + (size_t)nsend * RMSG_SLOT;
	unsigned i, cqe = nsend + RCONN_MAX_READS + nrecv + 8;
	int err;

	c->t = t;
	c->id = id;
	c->ech = ech;
	c->nrecv = nrecv;
	c->rsize = rsize;
	c->nsend = nsend;
	c->free_slots = nsend >= 64 ? ~0ULL : (1ULL << nsend) - 1;
	c->wake_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	/* transport_rconn_wait_locked() waits against CLOCK_MONOTONIC */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	err = transport_rdev_get(id->verbs, &c->dev);
	if (err)
		return err;
	err = -ENOMEM;
	c->cch = ibv_create_comp_channel(id->verbs);
	if (!c->cch)
		goto put_dev;
	c->cq = ibv_create_cq(id->verbs, (int)cqe, c, c->cch, 0);
	if (!c->cq)
		goto free_cch;
	if (ibv_req_notify_cq(c->cq, 0))
		goto free_cq;
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = nsend + RCONN_MAX_READS + 4;
	qa.cap.max_recv_wr = nrecv;
	qa.cap.max_send_sge = 2;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, c->dev->pd, &qa)) {
		err = errno ? -errno : -ENOMEM;
		goto free_cq;
	}
	if (posix_memalign((void **)&c->ring, 4096, bytes)) {
		c->ring = NULL;
		goto free_qp;
	}
	memset(c->ring, 0, bytes);
	err = transport_rreg_new(t, c->dev, c->ring, bytes, IBV_ACCESS_LOCAL_WRITE, &c->ring_reg);
	if (err)
		goto free_ring;
	for (i = 0; i < nrecv; i++) {
		err = post_recv(c, i);
		if (err)
			goto free_reg;
	}
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0 || transport_fcntl_nonblock(c->cch->fd) ||
	    transport_fcntl_nonblock(ech->fd)) {
		err = -errno;
		goto free_reg;
	}
	return 0;

free_reg:
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	c->wake_fd = -1;
	transport_rreg_free(c->ring_reg);
	c->ring_reg = NULL;
free_ring:
	free(c->ring);
	c->ring = NULL;
free_qp:
	rdma_destroy_qp(id);
free_cq:
	ibv_destroy_cq(c->cq);
	c->cq = NULL;
free_cch:
	ibv_destroy_comp_channel(c->cch);
	c->cch = NULL;
put_dev:
	transport_rdev_put(c->dev);
	c->dev = NULL;
	return err;
}

void transport_rconn_fail_locked(struct rconn *c, int err)
{
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};

	if (c->err)
		return;
	c->err = err < 0 ? err : -EIO;
	c->base.broken = true;
	/* flush whatever is posted: every READ and SEND completes, in error */
	if (c->id && c->id->qp)
		ibv_modify_qp(c->id->qp, &qa, IBV_QP_STATE);
	pthread_cond_broadcast(&c->cond);
}

void transport_rconn_fail(struct rconn *c, int err)
{
	pthread_mutex_lock(&c->lock);
	transport_rconn_fail_locked(c, err);
	pthread_mutex_unlock(&c->lock);
}

int transport_rconn_send(struct rconn *c, struct rmsg *m, const void *body, size_t blen,
			 const struct ibv_sge *sge, int nsge, unsigned *ret_slot, bool locked)
{
	struct ibv_sge sg[2];
	struct ibv_send_wr wr = {0}, *bad;
	uint64_t payload = 0;
	uint8_t *slot_buf;
	unsigned slot;
	int err, i;

	if (RMSG_HDR + blen > RMSG_SLOT || nsge > 1)
		return -EINVAL;
	for (i = 0; i < nsge; i++)
		payload += sge[i].length;
	if (RMSG_HDR + blen + payload > c->peer_rsize)
		return -EMSGSIZE;
	if (!locked)
		pthread_mutex_lock(&c->lock);
	err = c->err;
	if (err)
		goto out;
	err = -EAGAIN;
	if (c->credits < (m->type == RM_CREDIT ? 1 : 2) || !c->free_slots)
		goto out;
	slot = (unsigned)__builtin_ctzll(c->free_slots);
	m->ver = c->ver;
	m->credits = (uint16_t)(c->unreported > UINT16_MAX ? UINT16_MAX : c->unreported);
	slot_buf = c->ring + (size_t)c->nrecv * c->rsize + (size_t)slot * RMSG_SLOT;
	transport_rmsg_encode(m, slot_buf);
	if (blen)
		memcpy(slot_buf + RMSG_HDR, body, blen);
	sg[0].addr = (uintptr_t)slot_buf;
	sg[0].length = (uint32_t)(RMSG_HDR + blen);
	sg[0].lkey = c->ring_reg->mr->lkey;
	for (i = 0; i < nsge; i++)
		sg[1 + i] = sge[i];
	wr.wr_id = RWR_SEND | slot;
	wr.sg_list = sg;
	wr.num_sge = 1 + nsge;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	err = -ibv_post_send(c->id->qp, &wr, &bad);
	if (err) {
		transport_rconn_fail_locked(c, err);
		goto out;
	}
	c->free_slots &= ~(1ULL << slot);
	c->credits--;
	c->unreported -= m->credits;
	if (ret_slot)
		*ret_slot = slot;
out:
	if (!locked)
		pthread_mutex_unlock(&c->lock);
	return err;
}

int transport_rconn_read_locked(struct rconn *c, uint64_t wr_id, void *laddr, uint32_t lkey,
				uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)laddr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {0}, *bad;
	int err;

	if (c->err)
		return c->err;
	if (c->reads >= RCONN_MAX_READS)
		return -EAGAIN;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	err = -ibv_post_send(c->id->qp, &wr, &bad);
	if (err) {
		transport_rconn_fail_locked(c, err);
		return err;
	}
	c->reads++;
	return 0;
}

int transport_rconn_wait_locked(struct rconn *c, int64_t deadline_ns)
{
	struct timespec ts;
	int64_t now = util_mono_ns();

	if (now >= deadline_ns)
		return -ETIMEDOUT;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (deadline_ns - now) / 1000000000LL;
	ts.tv_nsec += (deadline_ns - now) % 1000000000LL;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	return 0;
}

void transport_rconn_credit_locked(struct rconn *c)
{
	struct rmsg m = {.type = RM_CREDIT};

	if (c->err || c->unreported < c->nrecv / 2)
		return;
	(void)transport_rconn_send(c, &m, NULL, 0, NULL, 0, NULL, true);
}

/* One completion. */
static void on_wc(struct rconn *c, const struct ibv_wc *wc)
{
	int err = transport_rdma_wc_errno(wc->status);
	uint64_t kind = wc->wr_id & RWR_KIND;
	unsigned i = (unsigned)(wc->wr_id & ~RWR_KIND);
	struct rmsg m;
	uint8_t *buf;

	if (kind == RWR_SEND) {
		pthread_mutex_lock(&c->lock);
		if (err)
			transport_rconn_fail_locked(c, err);
		c->free_slots |= 1ULL << i;
		transport_rconn_credit_locked(c);
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		if (c->ops->on_send)
			c->ops->on_send(c, i);
		return;
	}
	if (kind != RWR_RECV) {
		pthread_mutex_lock(&c->lock);
		if (err)
			transport_rconn_fail_locked(c, err);
		c->reads--;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		c->ops->on_read(c, wc->wr_id, err);
		return;
	}
	if (err) {
		transport_rconn_fail(c, err);
		return;
	}
	buf = c->ring + (size_t)i * c->rsize;
	err = transport_rmsg_decode(buf, wc->byte_len, &m);
	if (!err && m.ver != c->ver)
		err = -EPROTO; /* every message in the connection's version */
	if (!err) {
		pthread_mutex_lock(&c->lock);
		c->credits += m.credits;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		if (m.type != RM_CREDIT)
			err = c->ops->on_msg(c, &m, buf + RMSG_HDR, wc->byte_len - RMSG_HDR);
	} else {
		COUNT_ADD(c->t, bad_frames, 1);
		transport_log(c->t, TLOG_BAD_FRAME, LOGL_WARN,
			      "transport: rdma: closing connection with %s: malformed message",
			      c->peer);
	}
	if (!err)
		err = post_recv(c, i);
	pthread_mutex_lock(&c->lock);
	if (err)
		transport_rconn_fail_locked(c, err);
	else
		c->unreported++;
	transport_rconn_credit_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* Handle every completion there is; how many. */
static int drain(struct rconn *c)
{
	struct ibv_wc wc[CQ_BATCH];
	int n, i, all = 0;

	while ((n = ibv_poll_cq(c->cq, CQ_BATCH, wc)) > 0)
		for (i = 0, all += n; i < n; i++)
			on_wc(c, &wc[i]);
	return all;
}

/*
 * rdma_poll_us: after a completion, keep polling for the next one that
 * long (restarted by each), so that the answer to a SEND just completed
 * is picked up without a completion event and a wake-up.  Each empty
 * poll calls sched_yield(), which lets a thread waiting for this CPU
 * run only now and then: polling costs a CPU.  Never beyond
 * RCONN_TICK_MS in all, so that steady traffic cannot keep tick() (a
 * server's handshake deadline, its pins' budgets) and the rdma_cm
 * events from running.  A completion event armed before still fires;
 * the loop then finds nothing, and re-arms.
 */
static void spin(struct rconn *c)
{
	int64_t span = (int64_t)c->t->rdma_poll_us * 1000, now = util_mono_ns();
	int64_t until = now + span, cap = now + (int64_t)RCONN_TICK_MS * 1000000;

	while (span && !atomic_load(&c->stop) && now < until && now < cap) {
		if (drain(c))
			until = util_mono_ns() + span;
		else
			sched_yield();
		now = util_mono_ns();
	}
}

static void cm_event(struct rconn *c)
{
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;

	while (!rdma_get_cm_event(c->ech, &ev)) {
		type = ev->event;
		rdma_ack_cm_event(ev);
		switch (type) {
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_ADDR_CHANGE:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
			transport_rconn_fail(c, -ECONNRESET);
			break;
		default:
			break;
		}
	}
}

static void *conn_thread(void *arg)
{
	struct rconn *c = arg;
	struct pollfd pfd[3] = {
	    {.fd = c->cch->fd, .events = POLLIN},
	    {.fd = c->ech->fd, .events = POLLIN},
	    {.fd = c->wake_fd, .events = POLLIN},
	};
	struct ibv_cq *cq;
	void *ctx;

	drain(c);
	while (!atomic_load(&c->stop)) {
		if (poll(pfd, 3, RCONN_TICK_MS) < 0 && errno != EINTR)
			break;
		if (atomic_load(&c->stop))
			break;
		if (pfd[0].revents && !ibv_get_cq_event(c->cch, &cq, &ctx)) {
			ibv_ack_cq_events(cq, 1);
			ibv_req_notify_cq(cq, 0);
		}
		/* after re-arming: nothing that came in between is missed */
		if (drain(c))
			spin(c);
		if (pfd[1].revents)
			cm_event(c);
		if (c->ops->tick)
			c->ops->tick(c);
	}
	return NULL;
}

int transport_rconn_start(struct rconn *c, const struct rconn_ops *ops)
{
	int err;

	c->ops = ops;
	err = -pthread_create(&c->thread, NULL, conn_thread, c);
	if (!err)
		c->thread_started = true;
	return err;
}

void transport_rconn_teardown(struct rconn *c)
{
	uint64_t one = 1;

	if (c->thread_started) {
		atomic_store(&c->stop, true);
		if (write(c->wake_fd, &one, sizeof(one)) < 0)
			log_debug("transport: rdma: waking a connection thread: %s",
				  strerror(errno));
		pthread_join(c->thread, NULL);
		c->thread_started = false;
	}
	if (c->id) {
		rdma_disconnect(c->id);
		if (c->id->qp)
			rdma_destroy_qp(c->id);
	}
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cch)
		ibv_destroy_comp_channel(c->cch);
	transport_rreg_free(c->ring_reg);
	free(c->ring);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ech)
		rdma_destroy_event_channel(c->ech);
	transport_rdev_put(c->dev);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
}
