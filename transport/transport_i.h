/*
 * transport_i.h: what transport.c, serve.c, auth.c and every backend
 * (tcp.c, rdma.c) share.  Nothing outside transport/ includes
 * this, except the unit tests and the fuzz target, which drive the
 * internals directly (and may plug in a backend of their own with
 * transport_new_ops()).  What only one backend knows goes in its own
 * header (tcp_i.h).
 *
 * transport may use common only: it moves bytes between nodes, asking
 * its caller for them (struct transport_source), and never calls the
 * store, meta or node.
 *
 * A backend is a struct transport_ops.  transport.c owns everything
 * above it: config, the per-peer cache of client connections, counters.
 * serve.c owns what answering a GET means (pinning, range checks, the
 * bandwidth bucket, the served counters), so that every backend serves
 * alike.  A backend's client connection embeds a struct tconn as its
 * first member; its server state hangs off t->srv.
 */
#ifndef OBJFS_TRANSPORT_I_H
#define OBJFS_TRANSPORT_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "log.h"
#include "transport.h"
#include "util.h"
#include "wire.h"

#define TRANSPORT_ADDR_MAX 320 /* "[v6 or host name]:port" */
#define TRANSPORT_CONNS_PER_PEER_MAX 64

/*
 * What a server holds at once (docs/protocol.md, "Limits"): connections
 * in all; connections from one authenticated peer node name (the fetch
 * engine of one node runs 8 workers plus small fetches in its opening
 * threads, so fewer would refuse a busy node's own work); connections
 * still in the handshake.  The first two are the most there are: a
 * transport takes an eighth of its open-files limit (at least 16), and
 * half of that per node, from util_fd_budget() (common/util.h) when it is
 * made, so that a node with a low limit still serves.  Each handshake must end within io_timeout_ms
 * and never later than TRANSPORT_HANDSHAKE_MAX_MS.  A connection idle
 * for TRANSPORT_IDLE_EVICT_MS may be closed to make room for another
 * node's.
 */
#define TRANSPORT_SERVE_HANDSHAKES 64
#define TRANSPORT_HANDSHAKE_MAX_MS 5000
#define TRANSPORT_IDLE_EVICT_MS 1000

/*
 * Why a server logs about a connection.  A peer can make these happen as
 * often as it likes, so each reason has a rate limit of its own: one line
 * a second, then "N more suppressed" (transport_log()).
 */
enum tlog {
	TLOG_BAD_FRAME, /* a malformed message, or one out of place */
	TLOG_HANDSHAKE, /* no handshake in time; closed or failed during it */
	TLOG_REFUSED,	/* no or a wrong secret; not on this host */
	TLOG_LIMIT,	/* refused for the connection limits */
	TLOG_EVICT,	/* closed to make room for another */
	TLOG_CONN,	/* an authenticated connection failed */
	TLOG_N
};

struct peer;

/* One client connection, as transport.c sees it. */
struct tconn {
	struct transport *t;
	struct tconn *next; /* in its peer's idle list (t->lock) */
	uint64_t gen;	    /* the peer generation it was made for */
	/* set by ops->fetch, read by transport.c after it returns; the
	 * connection belongs to one fetch at a time, so no lock */
	bool broken;   /* unusable: close it, never return it to the pool */
	bool answered; /* some reply bytes arrived */
	/* shared backends (ops->shared): fetches using it, plus one while
	 * it is its peer's connection (installed); t->lock */
	unsigned users;
	bool installed;
};

/* A backend's registered fetch destination (transport_region_new())
 * embeds this first. */
struct transport_region {
	const struct transport_ops *ops;
};

/*
 * A backend.  What it must do:
 *
 * Threads.  serve() may start whatever server threads the backend needs
 * (an accept thread, one per connection, a completion thread); stop()
 * wakes and joins every one of them before it returns, and nothing of
 * the backend runs after that.  The client ops (connect, fetch,
 * idle_ok, close) run on the calling thread, which they block; a backend
 * may give a client connection a thread of its own (RDMA: one per
 * connection, for its completions), which close() joins.  Several fetches run at once on different
 * connections, so the client ops must be thread-safe across connections
 * (one connection is only ever used by one fetch at a time).
 *
 * Timeouts.  Every wait is bounded by t->io_timeout_ms: connect() takes
 * no longer than about that per address tried (handshake included), and
 * fetch() no longer than that without a byte moving.  The server gives a
 * handshake, and a request once begun, the same, and closes a
 * connection whose peer stalls.  Nothing blocks forever on a peer.
 *
 * Results.  fetch() returns 0 only when all req->len bytes are in place and
 * every reply matched what was asked (id, offset, length): never a
 * partial success.  On any error the range may be partly written.  It
 * sets c->answered as soon as any reply byte arrived (transport.c
 * retries a reset on a reused connection only if none did) and
 * c->broken when the connection must not be used again (anything but an
 * ERR answer from the peer, after which the connection is still in
 * step).  Errors are what transport_fetch() in transport.h documents,
 * mapped from the backend's own error codes in one function.
 *
 * Progress.  fetch() calls req->progress (if not NULL) on the fetching
 * thread with the bytes in place from the start of the range: never
 * decreasing, never past req->len, and on success a last call with
 * req->len (for an empty range too).  A failed fetch owes no last call.
 *
 * Serving.  serve() binds to t->listen_host/t->listen_port, runs the
 * handshake of auth.c on every connection (loopback only without a
 * secret), then answers each GET with serve.c (transport_serve_begin() ...
 * transport_serve_end()), never reading the source any other way.  It counts
 * conns_accepted and conns_open (server side) and bad_frames; client
 * side, fetch() counts requests_sent and bytes_received (transport.c
 * counts the client connections it opens).
 *
 * A backend that never serves (one written for a test) leaves serve,
 * stop and addr NULL: transport_serve() is then -EOPNOTSUPP.
 */
struct transport_ops {
	/* cfg->backend, and the name in a peer's caps that says this
	 * backend can fetch from it (transport_reaches()) */
	const char *name;
	/* what a node running this backend advertises on its card: a
	 * comma-separated list of the transports it serves */
	const char *caps;
	/* transport_tuning(): ranges of one object fetched from one peer at
	 * once (at least 1), and the smallest range worth a stream */
	unsigned streams_per_peer;
	uint64_t range_min;
	/* One connection per peer, used by many fetches at once (fetch()
	 * is then thread-safe on one connection, and broken is set by
	 * whichever notices); else each fetch borrows one of its own. */
	bool shared;
	/* the highest version of its messages the backend speaks, as client
	 * and server (TCP: WIRE_V*; RDMA: RMSG_V*, a protocol of its own);
	 * 0 means 1.  Only a backend that speaks 2 reads req->flags and
	 * req->have_out, on a connection in version 2; the others leave them
	 * be.  Version 2 is spoken to a peer whose card has @v2_token (NULL:
	 * "fan1"), which a node serving it puts on its card. */
	unsigned wire_max;
	const char *v2_token;
	/* Bind, listen and start serving t->src.  0 or -errno. */
	int (*serve)(struct transport *t);
	/* Stop serving: wake and join every server thread, close their
	 * sockets.  Called once, after a successful serve(). */
	void (*stop)(struct transport *t);
	/* transport_addr() while serving. */
	int (*addr)(const struct transport *t, char *buf, size_t len);
	/* Connect to @addr (from the peer's card) and authenticate, in
	 * wire version @ver (at most t->wire_max; a backend with a
	 * protocol of its own ignores it).  On 0, *@ret is a connection
	 * the backend allocated, with a zeroed struct tconn first
	 * (transport.c fills it in).  Errors as transport_fetch()
	 * documents them. */
	int (*connect)(struct transport *t, const char *addr, unsigned ver, struct tconn **ret);
	/* Fetch one range on @c (any length: the backend splits it into
	 * requests of at most t->get_max bytes).  See above. */
	int (*fetch)(struct tconn *c, const struct transport_req *req);
	/* May this idle connection be reused (the peer has not closed it)?
	 * Must not block. */
	bool (*idle_ok)(struct tconn *c);
	/* Close @c and free it. */
	void (*close)(struct tconn *c);
	/* transport_region_new() (NULL: the backend needs none) */
	int (*region_new)(struct transport *t, void *addr, uint64_t len,
			  struct transport_region **ret);
	void (*region_free)(struct transport_region *r);
};

/* The backends transport_new() chooses from, by cfg->backend. */
extern const struct transport_ops transport_tcp_ops;
#ifdef OBJFS_HAVE_RDMA
extern const struct transport_ops transport_rdma_ops;
#endif

/*
 * Create a transport whose backend is @ops, which must stay valid until
 * transport_free() (cfg->backend is not looked at).  @ops needs name,
 * caps, streams_per_peer, connect, fetch, idle_ok and close.  Errors as
 * transport_new().
 */
struct transport *transport_new_ops(const struct transport_config *cfg,
				    const struct transport_ops *ops, int *ret_err);

/* Counters behind transport_stats(); relaxed atomics. */
struct transport_counters {
	atomic_uint_fast64_t bytes_sent;
	atomic_uint_fast64_t bytes_received;
	atomic_uint_fast64_t requests_served;
	atomic_uint_fast64_t requests_sent;
	atomic_uint_fast64_t conns_accepted;
	atomic_uint_fast64_t conns_open;
	atomic_uint_fast64_t auth_failures;
	atomic_uint_fast64_t bad_frames;
	atomic_uint_fast64_t fetch_tcp, bytes_tcp;
	atomic_uint_fast64_t fetch_eager, bytes_eager;
	atomic_uint_fast64_t fetch_rdv, bytes_rdv;
	atomic_uint_fast64_t rdma_fallbacks, rdma_regs;
	atomic_uint_fast64_t rdma_regs_live, rdma_regs_reused, rdma_regs_dropped;
	atomic_uint_fast64_t serve_open; /* server connections holding a socket */
	atomic_uint_fast64_t
	    serving; /* GETs pinned now (transport_serve_begin() ... transport_serve_end()) */
	atomic_uint_fast64_t busy_sent, busy_received, parked, given_refused;
	atomic_uint_fast64_t rdma_partial_regs;
};

#define COUNT_ADD(t, field, n) atomic_fetch_add_explicit(&(t)->cnt.field, (n), memory_order_relaxed)
#define COUNT_SUB(t, field, n) atomic_fetch_sub_explicit(&(t)->cnt.field, (n), memory_order_relaxed)

/* Token bucket for serve_bwlimit, shared by all server connections: of
 * both halves of a transport (an RDMA half serves from its parent's, so
 * the limit is the node's). */
struct tbucket {
	pthread_mutex_t lock;
	uint64_t rate;	 /* bytes per second; 0: no limit (fixed) */
	uint64_t burst;	 /* bytes (fixed) */
	double tokens;	 /* may go negative: debt the next takers wait off (lock) */
	int64_t last_ns; /* util_mono_ns() of the last refill (lock) */
};

/*
 * The node's serving slots (serve_slots): how many fan-out GETs
 * (WIRE_F_BUSY_OK) send bytes now, and of the first TSLOT_TRACK of them
 * when they began and how far they got, so that a GET refused for load
 * can be told when to ask again.
 * Shared by both halves of a transport (an RDMA half uses its
 * parent's), as the bucket is.
 */
#define TSLOT_TRACK 16
struct tslots {
	pthread_mutex_t lock;
	pthread_cond_t freed;	 /* a slot was given back (lock) */
	unsigned max;		 /* serve_slots; 0: no limit (fixed) */
	unsigned busy;		 /* fan-out GETs sending now (lock) */
	unsigned waiting;	 /* GETs waiting for a slot: 0 or 1 (lock) */
	int64_t contended_until; /* util_mono_ns(): another peer was told "busy" (lock) */
	struct tslot {
		bool used;		   /* (lock) */
		uint64_t peer;		   /* a hash of its peer's node name (lock) */
		int64_t t0_ns;		   /* util_mono_ns() at its start (lock) */
		uint64_t len;		   /* its range (lock) */
		bool rdma;		   /* served over RDMA: handed out at once (lock) */
		atomic_uint_fast64_t sent; /* bytes handed out (its thread) */
	} s[TSLOT_TRACK];
};

enum transport_mode { TMODE_TCP, TMODE_RDMA, TMODE_AUTO };

struct transport {
	const struct transport_ops *ops;
	/* the RDMA half of an "auto" or "rdma" transport: a transport of
	 * its own (transport_rdma_ops, same config) that this one drives; NULL for
	 * "tcp", without RDMA support, or when "auto" found no device.
	 * Set by transport_new(), dropped by transport_serve() (before any
	 * fetch may run) if it cannot serve; fixed after. */
	struct transport *rdma;
	struct transport *parent; /* of the RDMA half: the transport it belongs to */
	enum transport_mode mode;
	char rdma_state[160];	 /* transport_rdma_state(); fixed after serve */
	char caps[32];		 /* transport_caps(); fixed after serve */
	uint32_t rdma_eager_max; /* config */
	uint32_t rdma_poll_us;	 /* config */
	/* config, fixed after transport_new() */
	char node[OBJFS_NODE_MAX];
	char *listen_host;
	uint16_t listen_port;
	uint8_t *secret; /* NULL: no secret, loopback peers only */
	size_t secret_len;
	unsigned io_timeout_ms;
	unsigned conns_per_peer;
	/* largest range one request asks for; WIRE_LEN_MAX (tests lower it) */
	uint64_t get_max;
	/* the highest wire version this transport speaks and serves: its
	 * backend's (ops->wire_max); tests lower it, before serving, to
	 * play a node that predates version 2 (of TCP, or of RDMA's
	 * messages: then no "rfan") */
	unsigned wire_max;
	/* it takes WIRE_F_BUSY_OK and WIRE_F_PARK (and says "fan2"); tests
	 * clear it, before serving, to play a node of the first version 2,
	 * whose server closes a connection that sends them */
	bool fan2;
	/* server limits: util_fd_budget()'s and TRANSPORT_SERVE_HANDSHAKES
	 * (tests change them before serving) */
	unsigned serve_conns;
	unsigned serve_conns_per_node;
	unsigned serve_handshakes;
	/* one rate limit per enum tlog reason */
	struct log_ratelimit log_rl[TLOG_N];

	/* server side: set by transport_serve() (under lock) before
	 * ops->serve(), fixed while serving */
	struct transport_source src;
	bool serving;
	void *srv;	       /* the backend's server state */
	struct tbucket bucket; /* an RDMA half serves from its parent's */
	struct tslots slots;   /* likewise */

	/* client side: the connection cache */
	pthread_mutex_t lock;
	struct peer *peers; /* uthash by name (lock) */
	uint64_t next_gen;  /* (lock) */

	struct transport_counters cnt;
	/* what keeps this struct (not what it holds) allocated: 1 for its
	 * owner, let go by transport_free(), and one per registration a
	 * store object holds (rdma_serve.c's reg_drop() updates cnt when the
	 * store drops it, which may be at store_close(), after
	 * transport_free()) */
	atomic_uint holds;
};

/* Take and let go of a hold on @t's struct (struct transport.holds); the
 * last transport_put() frees it. */
void transport_hold(struct transport *t);
void transport_put(struct transport *t);

/* Milliseconds left until @deadline_ns (util_mono_ns()); 0 when past. */
int transport_ms_left(int64_t deadline_ns);

/* Split "HOST:PORT" ("[V6]:PORT") into its parts (port 1..65535).  0 or
 * -EINVAL. */
int transport_addr_split(const char *addr, char *host, size_t host_size, char *port,
			 size_t port_size);
/* getaddrinfo()'s error as an errno. */
int transport_gai_err(int e);

/* A server's line about a connection, through the rate limit of @why. */
void transport_log(struct transport *t, enum tlog why, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Report what the rate limits held back, once their second is over (a
 * server thread calls it about once a second). */
void transport_log_flush(struct transport *t);

/* ---- serve.c: answering a GET, for every backend ---- */

/* The node's slots, at most @max sending (0: no limit); release with
 * transport_tslots_release(). */
void transport_tslots_init(struct tslots *s, unsigned max);
void transport_tslots_release(struct tslots *s);

/* A bucket for @rate bytes per second (0: no limit); release with
 * transport_tbucket_release(). */
void transport_tbucket_init(struct tbucket *b, uint64_t rate);
void transport_tbucket_release(struct tbucket *b);

/*
 * One GET being answered, on the stack of the server thread that reads
 * it (no lock: nothing else sees it).  Fields are serve.c's.
 */
struct serve_ctx {
	struct transport *t;
	const char *peer; /* names the peer in logs */
	uint8_t ver;	  /* the GET's, for the DATA header */
	uint32_t reqid;	  /* the GET's */
	uint64_t get_off; /* the GET's range */
	uint64_t get_len;
	uint64_t id;
	bool slotted;  /* it holds one of the node's slots */
	int slot;      /* its tracked entry there, or -1 */
	void *token;   /* the pinned object, from t->src.open() */
	uint64_t off;  /* where the next piece starts */
	uint64_t left; /* bytes not handed out yet */
	bool more;     /* a piece is still due (an empty range has one) */
	bool served;   /* the request was counted as served */
	bool given;    /* the source gave its blocks out for it (give()) */
	/* the source holds the object in part (have() did not say SEALED):
	 * its memory must not be registered whole (map() refuses it) */
	bool partial;
};

/*
 * Start answering @get from the peer that @peer names in logs (the ctx
 * keeps the pointer: it must live as long) and that named itself @node
 * in the handshake (for the source).  Replies are in the GET's version.
 * A GET with WIRE_F_PARK may wait here (at most about io_timeout_ms / 2,
 * less if *@stop becomes true) for a range the source is receiving; one
 * with WIRE_F_BUSY_OK is answered HAVE, busy, when serve_slots GETs are
 * sending already (every other GET is served, and counts).
 *   0: the object is pinned and the range is in it, wholly servable;
 *      *@ret_reply is the DATA header to send, then come the pieces of
 *      transport_serve_next(), then transport_serve_end().
 *   1: *@ret_reply is all there is to send, and nothing is pinned (the
 *      request is counted as served): an ERR (the object is not held,
 *      the range is outside it, or not wholly servable and the GET did
 *      not ask for a HAVE), or a HAVE (a version 2 GET with PARTIAL_OK
 *      for a range not wholly servable, or a query: WANT_HAVE, length 0).
 *   2: as 0, but a version 2 GET with WANT_HAVE: *@ret_reply is the HAVE
 *      to send first, then the DATA header of transport_serve_data_hdr().
 * A version 1 GET is only ever answered 0 or 1 (ERR); RDMA never sends
 * WANT_HAVE with a length (so never gets 2) nor PARK (a parked GET would
 * hold up its connection's only thread).
 */
int transport_serve_begin(struct transport *t, const struct wire_msg *get, const char *peer,
			  const char *node, const atomic_bool *stop, struct serve_ctx *ret_ctx,
			  struct wire_msg *ret_reply);

/* The DATA header that follows the HAVE of a transport_serve_begin() that gave 2. */
void transport_serve_data_hdr(const struct serve_ctx *ctx, struct wire_msg *ret);

/* Is a piece still due (call transport_serve_next() again)? */
bool transport_serve_more(const struct serve_ctx *ctx);

/*
 * The next piece of the payload, at most @max bytes (less with a
 * bandwidth limit: no more than the bucket's burst): points @iov (room
 * for @max_iov) into the pinned object and returns how many entries it
 * used, with the bytes in *@ret_bytes (0 entries and bytes only for an
 * empty range).  Before it returns, the bytes are taken from the
 * bandwidth bucket (sleeping off any debt, less if *@stop becomes true)
 * and counted as sent, and with the last piece the request is counted
 * as served: call transport_serve_unsent() if sending them fails.  -errno if the
 * source failed (logged; no piece is due after it): close the
 * connection, the reply cannot be finished.
 */
int transport_serve_next(struct serve_ctx *ctx, size_t max, struct iovec *iov, int max_iov,
			 size_t *ret_bytes, const atomic_bool *stop);

/*
 * Sending failed with @err: take back @bytes of what transport_serve_next()
 * counted as sent (the pieces that did not go out) and the request if it
 * was counted as served, and log it.  No piece is due after this.
 */
void transport_serve_unsent(struct serve_ctx *ctx, size_t bytes, int err);

/* Unpin the object (after a 0 from transport_serve_begin()). */
void transport_serve_end(struct serve_ctx *ctx);

/* ---- auth.c: the handshake, independent of the byte stream ---- */

/* Is the peer at @sa on this host (127.0.0.0/8, ::1, ::ffff:127.x, unix)? */
bool transport_auth_peer_is_local(const struct sockaddr *sa, socklen_t len);

/* "HOST:PORT" (IPv6 "[HOST]:PORT") of @sa, for logs and transport_addr(). */
void transport_auth_addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);

/* The server's handshake state for one connection. */
struct auth_srv {
	int state;   /* AUTH_SRV_* in auth.c */
	bool local;  /* the peer is on this host */
	uint8_t ver; /* the HELLO's version: the connection's, once it came */
	uint8_t cnonce[WIRE_NONCE_LEN];
	uint8_t snonce[WIRE_NONCE_LEN];
	char node[OBJFS_NODE_MAX]; /* the client's name, once it said HELLO */
	const char *why;	   /* why it was refused, for the log */
};

void transport_auth_srv_init(struct auth_srv *a, bool local);

/* Has the peer authenticated (may it send GET)? */
bool transport_auth_srv_ready(const struct auth_srv *a);

/*
 * Feed one handshake message from the client to the server's state
 * machine.  On 0, send *@reply; if *@ret_close, close the connection
 * after sending it (the peer was refused: auth_failures is counted).
 * -EPROTO: a message out of place, a HELLO in a version above
 * t->wire_max, or later a message in another version than the HELLO's
 * (the caller counts a bad frame).
 */
int transport_auth_srv_step(struct transport *t, struct auth_srv *a, const struct wire_msg *in,
			    struct wire_msg *reply, bool *ret_close);

/* The client's handshake state for one connection. */
struct auth_cli {
	int state;
	uint8_t ver;  /* the connection's: what the HELLO said */
	bool refused; /* we refused the server: the result is -EACCES */
	uint8_t cnonce[WIRE_NONCE_LEN];
};

/* Fill in the HELLO to send first, for a connection in wire version
 * @ver (at most t->wire_max: -EINVAL).  0 or -errno (no randomness). */
int transport_auth_cli_hello(struct transport *t, struct auth_cli *a, uint8_t ver,
			     struct wire_msg *ret_hello);

/*
 * Feed one message from the server.  0: done, authenticated.  1: send
 * *@reply and call again with the next message.  -EACCES refused (by the
 * server, or the server failed to prove the secret), -EPROTO (also for
 * a reply in another version than our HELLO's).  Once
 * a->refused is set, the handshake ends in -EACCES whatever happens.
 */
int transport_auth_cli_step(struct transport *t, struct auth_cli *a, const struct wire_msg *in,
			    struct wire_msg *reply);

#endif
