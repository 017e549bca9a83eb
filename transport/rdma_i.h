/*
 * rdma_i.h: the RDMA backend's internals, shared by rdma.c (the ops:
 * connecting, fetching, serving) and rdma_conn.c (one connection: its
 * queue pair, rings, credits and completion thread).  docs/protocol.md,
 * "RDMA", is the description of the wire; this is the code's view.
 *
 * One connection is one RC queue pair made with librdmacm, with:
 *
 *   - a ring of receive buffers (nrecv of rsize bytes) and a ring of
 *     send slots (nsend of RMSG_SLOT bytes), in one memory region
 *     registered when the connection is made and never again;
 *   - credits: a side may SEND only into a receive buffer the other side
 *     has posted.  Each side starts with the peer's nrecv (from the
 *     connection's private data), spends one per SEND, and gets them back
 *     in the credits field of the peer's messages, which count the
 *     buffers the peer has posted again since its last report.  The last
 *     credit is kept for CREDIT messages, which carry nothing else, so
 *     two sides that both owe credits can always tell each other;
 *   - its own event channel for connection-manager events and its own
 *     completion channel, both watched by one thread per connection
 *     (conn_thread()), which dispatches every completion: the client's
 *     replies are matched to their request by tag, the server's requests
 *     are answered there.  Connection-manager events never mix with
 *     completions (rping's rule).
 *
 * Locking: c->lock guards the rings' bookkeeping, the credits, the
 * requests waiting (client) and the pinned rendezvous objects (server);
 * c->cond is signalled on every change a waiter may want.  Work requests
 * are posted under c->lock, so that credits and slots are spent in the
 * order the SENDs go out.
 */
#ifndef OBJFS_RDMA_I_H
#define OBJFS_RDMA_I_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport_i.h"

/* ---- messages (docs/protocol.md, "RDMA") ---- */

#define RMSG_MAGIC 0x4d44524fU /* "ORDM" */
/* version 1; version 2 (a peer whose card has "rfan") adds the GET flags
 * PARTIAL_OK, WANT_HAVE (a query) and BUSY_OK, and RM_HAVE */
#define RMSG_V1 1
#define RMSG_V2 2
#define RMSG_HDR 56
/* a send slot: a header and at most a wire message (an auth body or a HAVE) */
#define RMSG_SLOT (RMSG_HDR + WIRE_MSG_MAX_V2)

enum rmsg_type {
	RM_AUTH = 1,   /* either way: one wire.c handshake message as body */
	RM_GET = 2,    /* client -> server: tag, id, off, len; flags */
	RM_DATA = 3,   /* server -> client: echo, then len payload bytes */
	RM_RDV = 4,    /* server -> client: echo, addr and rkey of the range */
	RM_ERR = 5,    /* server -> client: echo, status (a positive errno) */
	RM_FIN = 6,    /* client -> server: tag; the range was read */
	RM_CREDIT = 7, /* either way: credits only */
	RM_HAVE = 8,   /* v2, server -> client: echo, a wire.c HAVE as body */
};

#define RM_F_EAGER 0x01	     /* GET: reply with DATA (the range fits a receive buffer) */
#define RM_F_PARTIAL_OK 0x02 /* GET (v2): lacking part of the range, answer HAVE */
#define RM_F_WANT_HAVE 0x04  /* GET (v2), length 0 only: a query, answered HAVE */
#define RM_F_BUSY_OK 0x08    /* GET (v2): at its slots, the server may answer HAVE, busy */

struct rmsg {
	uint8_t ver; /* RMSG_V1 or RMSG_V2: the connection's (transport_rconn_send() sets it) */
	uint8_t type;
	uint8_t flags;
	uint16_t credits; /* receive buffers posted again since the last report */
	uint32_t status;  /* ERR: errno; RDV: rkey */
	uint64_t tag;
	uint64_t id;
	uint64_t off;
	uint64_t len; /* AUTH: body bytes */
	uint64_t addr;
};

/* Encode @m's header into @buf (RMSG_HDR bytes); ver 0 encodes as 1. */
void transport_rmsg_encode(const struct rmsg *m, uint8_t *buf);
/* Decode a message of @len bytes: 0, or -EPROTO (bad magic, version,
 * type, a type or flag its version lacks, or a length that disagrees with
 * @len).  The caller checks that ret->ver is the connection's. */
int transport_rmsg_decode(const uint8_t *buf, size_t len, struct rmsg *ret);

/* What each side tells the other when connecting (private data). */
struct rpriv {
	uint32_t magic;	 /* RMSG_MAGIC */
	uint8_t version; /* the connection's: RMSG_V1, or RMSG_V2 to a "rfan" card */
	uint8_t pad[3];
	uint32_t nrecv; /* receive buffers posted */
	uint32_t rsize; /* bytes each */
};

/* ---- devices ---- */

/* A device's protection domain, shared by everything registered on it
 * and kept until the last registration and connection let go. */
struct rdev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	unsigned refs; /* rdev_lock in rdma_conn.c */
	struct rdev *next;
};

int transport_rdev_get(struct ibv_context *verbs, struct rdev **ret);
void transport_rdev_put(struct rdev *d);
/* The device to register fetch destinations on before any connection
 * exists: the one serving, else the first.  A new reference or NULL. */
struct rdev *transport_rdev_default(void);
void transport_rdev_set_default(struct ibv_context *verbs);

/* A memory registration on a device, counted on @t; @map (@maplen
 * bytes) is a mapping it made for itself, unmapped with it. */
struct rreg {
	struct ibv_mr *mr;
	struct rdev *dev;
	struct transport *t;
	void *map;
	size_t maplen;
};
int transport_rreg_new(struct transport *t, struct rdev *d, void *addr, size_t len, int access,
		       struct rreg **ret);
void transport_rreg_free(struct rreg *r);
/* Register a sealed object's memory @addr (@len bytes, mapped read-only)
 * for remote reads; if the kernel refuses to pin a read-only mapping
 * (EFAULT: before 6.2 it pins for writing), map @fd (the object at
 * offset 0) anew, shared and writable, and register that.  The
 * registration's mr->addr is where the object starts. */
int transport_rreg_object(struct transport *t, struct rdev *d, void *addr, size_t len, int fd,
			  struct rreg **ret);

/*
 * What a rendezvous of @len bytes is given: io_timeout plus a second per
 * RDV_MIN_RATE bytes.  The holder keeps the object pinned that long
 * without a FIN; a client waits that long for the answer to its GET (the
 * holder may be registering a large object for the first time).
 */
#define RDV_MIN_RATE (8u << 20)
int64_t transport_rdv_budget_ns(const struct transport *t, uint64_t len);

/* Map a work completion's status to an errno (the one place). */
int transport_rdma_wc_errno(enum ibv_wc_status st);

/* ---- one connection ---- */

struct rconn;

/*
 * What a connection does with what arrives, and a timer: on_msg() gets
 * every message (the receive buffer is posted again after it returns),
 * on_read() every RDMA READ completion (wr_id), on_send() every SEND
 * completion with the slot it used, tick() at least every
 * RCONN_TICK_MS.  All on the connection's thread, with c->lock NOT held.
 */
struct rconn_ops {
	int (*on_msg)(struct rconn *c, const struct rmsg *m, const uint8_t *body, size_t len);
	void (*on_read)(struct rconn *c, uint64_t wr_id, int err);
	void (*on_send)(struct rconn *c, unsigned slot);
	void (*tick)(struct rconn *c);
};

#define RCONN_TICK_MS 200
#define RCONN_MAX_READS 64 /* RDMA READs posted at once on one connection */

struct rconn {
	struct tconn base; /* client connections: transport.c's view */
	struct transport *t;
	const struct rconn_ops *ops;
	void *owner; /* the client or server state it belongs to */
	char peer[TRANSPORT_ADDR_MAX];

	struct rdma_cm_id *id;
	struct rdma_event_channel *ech;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct rdev *dev;
	struct rreg *ring_reg;
	uint8_t *ring; /* nrecv * rsize receive buffers, then nsend send slots */
	unsigned nrecv, rsize, nsend;
	uint32_t peer_rsize; /* the peer's receive buffers: what a SEND may fill */
	uint8_t ver;	     /* RMSG_V1 or RMSG_V2, fixed before the thread starts */

	pthread_t thread;
	bool thread_started;
	int wake_fd; /* eventfd: stop the thread */
	atomic_bool stop;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	int credits;	     /* SENDs the peer has room for (lock) */
	unsigned unreported; /* buffers posted again, not yet reported (lock) */
	uint64_t free_slots; /* bit per send slot (lock) */
	unsigned reads;	     /* RDMA READs posted, not completed (lock) */
	int err;	     /* the connection failed: why (lock; 0 while up) */
};

/*
 * Set up a connection on @id (address and route resolved, or a
 * connection request): protection domain, completion queue, queue pair,
 * rings, with @nrecv receive buffers of @rsize bytes posted.  @ech
 * becomes the connection's.  0 or -errno; on error nothing is left but
 * what the caller passed (@id, @ech).
 */
int transport_rconn_setup(struct transport *t, struct rconn *c, struct rdma_cm_id *id,
			  struct rdma_event_channel *ech, unsigned nrecv, unsigned rsize,
			  unsigned nsend);
/* Start the connection's thread, once it is established. */
int transport_rconn_start(struct rconn *c, const struct rconn_ops *ops);
/* Stop the thread, disconnect, free everything but the struct. */
void transport_rconn_teardown(struct rconn *c);
/* The connection failed with @err: the queue pair goes to the error
 * state (flushing what was posted), waiters wake.  Idempotent. */
void transport_rconn_fail(struct rconn *c, int err);
void transport_rconn_fail_locked(struct rconn *c, int err);

/*
 * SEND @m (header in a send slot, @body of @blen bytes after it), and
 * @sge extra gather entries (payload from registered memory).  Needs a
 * credit (the last one only for a CREDIT) and a free slot: -EAGAIN if
 * either is missing, which the caller waits off (rconn_wait()).  Takes
 * c->lock itself unless @locked.  The slot is returned to the caller's
 * on_send() at completion.  0 or -errno.
 */
int transport_rconn_send(struct rconn *c, struct rmsg *m, const void *body, size_t blen,
			 const struct ibv_sge *sge, int nsge, unsigned *ret_slot, bool locked);
/* Post one RDMA READ of @len bytes from the peer's @raddr/@rkey into
 * @laddr (@lkey); its completion goes to on_read(@wr_id).  c->lock held.
 * -EAGAIN if RCONN_MAX_READS are out. */
int transport_rconn_read_locked(struct rconn *c, uint64_t wr_id, void *laddr, uint32_t lkey,
				uint64_t raddr, uint32_t rkey, uint32_t len);
/* Wait on c->cond until @deadline_ns (c->lock held): 0, or -ETIMEDOUT. */
int transport_rconn_wait_locked(struct rconn *c, int64_t deadline_ns);
/* Report credits with a CREDIT if many are owed and the send is possible
 * (c->lock held). */
void transport_rconn_credit_locked(struct rconn *c);

/* A fetch destination's registration (transport_region_new()). */
struct rregion {
	struct transport_region base;
	struct rreg *reg;
	void *addr;
	uint64_t len;
};

/* The connection parameters (and private data, in @priv, which must
 * live until rdma_connect()/rdma_accept()) of @c. */
void transport_rconn_param(struct rconn *c, struct rdma_conn_param *p, struct rpriv *priv);
/* Is a peer's private data one we can work with, in a version up to
 * @ver_max? */
bool transport_rpriv_ok(const struct rpriv *p, unsigned ver_max);
int transport_fcntl_nonblock(int fd);
/* Point @out (room for @max) at [@at, @at + @len) of @iov: the entries
 * used, or -1 if it does not fit. */
int transport_iov_slice(const struct iovec *iov, int cnt, uint64_t at, uint64_t len,
			struct iovec *out, int max);

/* Tests: the client skips FIN (the server must unpin at its timeout). */
extern bool transport_rdma_test_no_fin;

/* ---- rdma_serve.c: the server half of transport_rdma_ops ---- */
int transport_rd_serve(struct transport *t);
void transport_rd_stop(struct transport *t);
int transport_rd_addr(const struct transport *t, char *buf, size_t len);

/* "HOST:PORT" -> a socket address, for rdma_cm.  0 or -errno. */
int transport_raddr_resolve(const char *addr, bool passive, struct sockaddr_storage *ret,
			    socklen_t *ret_len);

#endif
