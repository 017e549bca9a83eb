/*
 * transport: moves an object's bytes from one node's shared memory to
 * another's.  It knows nothing of the store: the serving side is handed a
 * source (callbacks that pin an object and point iovecs at its bytes), the
 * fetching side is handed destination iovecs.  No bounce buffers on
 * either side.
 *
 * Backends.  A backend is an ops table (struct transport_ops in
 * transport_i.h): connect, serve, fetch a range into a region, close,
 * and the tuning the fetch engine should use with it.  There are two:
 * TCP, and RDMA (rdma-core: eager SEND/RECV for small ranges, one-sided
 * RDMA READ for large ones; docs/protocol.md).  Everything above the ops
 * table (the per-peer connection cache, authentication policy, what
 * serving a request means, counters) is shared.
 *
 * Choosing.  cfg->backend "tcp" uses TCP only; "rdma" fetches over RDMA
 * only; "auto" (the daemon's default) fetches over RDMA from peers whose
 * card advertises it, whenever the connection comes up, and over TCP
 * otherwise, per peer; an RDMA fetch that fails for the connection (not
 * for the object) is retried over TCP, and the peer is tried over RDMA
 * again only after a while.  Every node serves TCP; "auto" and "rdma"
 * serve RDMA too when this host has an RDMA device for the listen
 * address ("auto" quietly does without).  A node advertises what it
 * serves on its card (transport_caps(), and an address per backend,
 * transport_addr_of()); a fetch asks transport_reaches() whether a
 * peer's card is one it can use.
 *
 * Wire versions.  TCP speaks version 1 to every peer, except to one whose
 * card has the token "fan1" (transport_speaks_fan1()), where the fetching
 * side may use version 2: requests that accept a partial answer, and the
 * HAVE answer that says which blocks of an object the holder has
 * verified (struct transport_have; the source's have() hook).  A server
 * answers each connection in the version of its HELLO.  RDMA has
 * versions of its own: version 2 of its messages, spoken to a peer whose
 * card has "rfan", carries the same flags (all but PARK) and HAVE; every
 * other peer gets version 1.  docs/protocol.md has the details.
 *
 * Connections.  Made on demand, the first time a peer is needed, from the
 * address in the peer's endpoint card, and cached per peer (a uthash table
 * keyed by node name).  A peer has a small pool of connections so that
 * several ranges can be fetched from it in parallel; each fetch borrows
 * one, and a connection that failed is closed rather than returned.
 *
 * Authentication.  With a cluster secret, both ends prove knowledge of it
 * by HMAC-SHA256 challenge-response before any object is served.  Without
 * one, the server accepts loopback peers only (and says so in its log).
 * The wire protocol is documented in docs/protocol.md.
 *
 * Threading: all functions are thread-safe.  The source callbacks are
 * called from server threads, concurrently.
 *
 * Errors: 0 or a negative errno.
 */
#ifndef OBJFS_TRANSPORT_H
#define OBJFS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct transport;

#define TRANSPORT_SECRET_MIN 16 /* bytes */
#define TRANSPORT_SECRET_MAX 4096
#define TRANSPORT_DEFAULT_TIMEOUT_MS 2000

#define TRANSPORT_RDMA_EAGER_DEFAULT (32u << 10)
#define TRANSPORT_RDMA_EAGER_MAX (1u << 20)
#define TRANSPORT_RDMA_POLL_MAX 10000 /* us */

struct transport_config {
	const char *backend;	 /* "tcp", "rdma" or "auto" (NULL means "tcp") */
	const char *node;	 /* this node's name, sent to peers */
	const char *listen_host; /* numeric IPv4/IPv6 or a host name */
	uint16_t listen_port;	 /* 0: any free port (see transport_addr) */
	/* cluster secret (copied); NULL: no secret, loopback peers only */
	const uint8_t *secret;
	size_t secret_len;
	/* a peer that sends or accepts nothing for this long is dead;
	 * default TRANSPORT_DEFAULT_TIMEOUT_MS when 0 */
	unsigned io_timeout_ms;
	/* cap on bytes per second served to all peers together; 0: none */
	uint64_t serve_bwlimit;
	/* connections kept per peer; default 4 when 0 */
	unsigned conns_per_peer;
	/* GETs this node sends at once beyond which a GET that can take a
	 * "busy" answer (TRANSPORT_F_BUSY_OK: a fan-out fetch) gets one; 0
	 * means TRANSPORT_SLOTS_DEFAULT, TRANSPORT_SLOTS_NONE no limit (every
	 * GET is served at once, sharing the bandwidth) */
	unsigned serve_slots;
	/* RDMA: ranges of at most this many bytes go eager (SEND/RECV),
	 * larger ones rendezvous (RDMA READ); 0 means
	 * TRANSPORT_RDMA_EAGER_DEFAULT; at most TRANSPORT_RDMA_EAGER_MAX */
	uint32_t rdma_eager_max;
	/* RDMA: after a completion, a connection's thread polls its
	 * completion queue for this many microseconds more (yielding the
	 * CPU between polls) before it sleeps on completion events again;
	 * 0 (the default): events only.  At most TRANSPORT_RDMA_POLL_MAX. */
	uint32_t rdma_poll_us;
};

/* Blocks a HAVE describes at most, and the flags of struct transport_have. */
#define TRANSPORT_HAVE_BLOCKS_MAX 4096
#define TRANSPORT_SLOTS_DEFAULT 1
#define TRANSPORT_SLOTS_MAX 64
#define TRANSPORT_SLOTS_NONE (~0u)
#define TRANSPORT_HAVE_SEALED 0x01 /* the holder has the whole object, sealed */
#define TRANSPORT_HAVE_BUSY 0x02   /* the GET was refused for load: ask again after retry_ms */
#define TRANSPORT_RETRY_MS_MAX 60000

/*
 * Which blocks of one object a holder can serve, as a HAVE answer carries
 * it (a fixed size, whatever the peer says).  Block i is the bytes
 * [i << shift, (i + 1) << shift) of the object (the last one may be
 * short); bit i of a bitmap is bit i % 8 of byte i / 8.  Bits at nblocks
 * and beyond are zero.  A sealed holder may send nblocks 0 (its
 * bitmaps then say nothing: it has every byte).
 */
struct transport_have {
	uint8_t shift; /* log2 of the block size, below 64 */
	uint8_t flags; /* TRANSPORT_HAVE_SEALED, TRANSPORT_HAVE_BUSY */
	uint16_t load; /* GETs the holder was serving when it answered (at most 65535) */
	/* with TRANSPORT_HAVE_BUSY: when a slot is likely free, in ms
	 * (1..TRANSPORT_RETRY_MS_MAX); else 0 */
	uint16_t retry_ms;
	uint32_t nblocks; /* blocks of the object, at most TRANSPORT_HAVE_BLOCKS_MAX */
	uint8_t have[TRANSPORT_HAVE_BLOCKS_MAX / 8];	 /* verified: servable */
	uint8_t fetching[TRANSPORT_HAVE_BLOCKS_MAX / 8]; /* being fetched by the holder now */
};

/*
 * What the serving side reads objects through.  open() pins object @id
 * for the peer that named itself @peer in the handshake ("" if unknown)
 * and gives its size and a token; -ENOENT if this node does not hold it.
 * It may pin an object it holds only in part (one it is fetching) if it
 * has have(); without have(), open() must pin sealed objects only.
 * iov() points @iov at [off, off+len) of the pinned object, like
 * store_obj_iov().  close() unpins.  Every GET is one open() ... close(),
 * on a server thread.
 *
 * have() (may be NULL: every byte open() pins is servable) says whether
 * [@off, @off + @len) of the pinned object is wholly servable (sealed or
 * verified bytes): 1 if it is, 0 if not, or -errno.  On 1 and 0 it fills
 * *@ret (zeroed by the caller; load is the transport's to set) with what
 * a HAVE answer says of the whole object: flags TRANSPORT_HAVE_SEALED
 * for a sealed one (nblocks may then be 0), else shift, nblocks and both
 * bitmaps.  It is asked before every non-empty GET (and every HAVE
 * query); on 0 the GET is answered HAVE (a version 2 GET with
 * PARTIAL_OK) or ENOENT, and iov() is never called for the range, so
 * that no peer ever gets bytes that are not sealed or verified.
 *
 * wait() (may be NULL: no GET waits) parks a GET: it returns 1 once
 * [@off, @off + @len) of the pinned object is servable, 0 as soon as a
 * block of it that is not is also not arriving here (no fetch of it
 * under way, or its bytes stopped), 2 if after @ms blocks of it are
 * still arriving (the transport may call it again), or -errno.
 * The transport calls it in short slices, for a GET that asked to wait
 * (TRANSPORT_F_PARK), so that a GET for a block this node is receiving
 * is answered the moment the block checks out rather than refused.
 *
 * give() (may be NULL: every such GET is served) is asked before a
 * fan-out GET (TRANSPORT_F_BUSY_OK and TRANSPORT_F_PARTIAL_OK) of a
 * servable range is served: 1 to serve it, the source noting its blocks
 * as given out to a fetcher, who will serve them onward; 0 if a block of
 * it was given out before: *@ret (zeroed by the caller) is then the HAVE
 * to answer, as have() fills it, with the blocks given out as fetching;
 * or -errno.  ungive() (NULL with give()) takes that back for a GET whose
 * bytes did not all go out.  A source should also forget what it gave
 * out after a while: a fetcher that got a block may die before it
 * serves it.
 *
 * For backends that register memory once per object (RDMA), two more,
 * which may be NULL (RDMA then serves nothing but objects held in part):
 * map() gives the whole pinned object's memory (*ret_addr NULL for an
 * empty one), valid while the object lives (past close()) once a
 * registration hangs on it (attach()), and a new read-write descriptor
 * of a file that holds the object at offset 0 (-1 if none), which the
 * caller closes; the descriptor is only ever mapped, never written (a
 * kernel before 6.2 pins the pages of a registration for writing, which
 * a read-only mapping refuses: the backend then maps the file anew, still
 * granting peers read access only).  A registration grants a peer every
 * byte of the object, so map() of an object held only in part (see
 * have() above) must fail (-EOPNOTSUPP).  The backend then registers,
 * for one GET, exactly the range iov() gives of it (all of it servable:
 * have() said 1), and deregisters it when the GET is done, before
 * close(); have() must say TRANSPORT_HAVE_SEALED of every sealed object
 * (which is what tells the two apart).
 * attach() hangs the backend's registration @reg of that memory on the
 * object: the source calls @drop(@reg) exactly once, when the object is
 * freed (evicted or unlinked, and no longer pinned), before its memory
 * can be used for anything else, from whichever thread frees it.  If a
 * registration hangs there already, attach() takes nothing and returns
 * -EEXIST with it in *@ret_cur (the caller drops its own).  A backend
 * looks for one with attach(token, NULL, NULL, ret_cur): 0 and *ret_cur
 * NULL if none.
 */
struct transport_source {
	int (*open)(void *ctx, const char *peer, uint64_t id, uint64_t *ret_size, void **ret_token);
	int (*iov)(void *token, uint64_t off, size_t len, struct iovec *iov, int max_iov,
		   size_t *ret_bytes);
	void (*close)(void *token);
	int (*have)(void *token, uint64_t off, uint64_t len, struct transport_have *ret);
	int (*wait)(void *token, uint64_t off, uint64_t len, unsigned ms);
	int (*give)(void *token, uint64_t off, uint64_t len, struct transport_have *ret);
	void (*ungive)(void *token, uint64_t off, uint64_t len);
	int (*map)(void *token, void **ret_addr, uint64_t *ret_len, int *ret_fd);
	int (*attach)(void *token, void *reg, void (*drop)(void *reg), void **ret_cur);
	void *ctx;
};

/*
 * Create a transport (client side only until transport_serve()).
 * -EINVAL for a bad config (unknown backend, short secret), -ENOMEM.
 * Free it with transport_free().
 */
struct transport *transport_new(const struct transport_config *cfg, int *ret_err);

/* Stop serving, close every connection, free.  NULL is fine. */
void transport_free(struct transport *t);

/* "tcp", "rdma" or "auto": the configured choice */
const char *transport_name(const struct transport *t);

/*
 * What became of RDMA, for logs and `objfs status`: "on", "off
 * (transport=tcp)", "off (built without rdma)", or "unavailable: WHY"
 * (auto found no device).  A static or transport-owned string.
 */
const char *transport_rdma_state(const struct transport *t);

/*
 * Bind, listen and serve @src from background threads.  -EADDRINUSE,
 * -EADDRNOTAVAIL, ... from bind(); -EBUSY if already serving;
 * -EOPNOTSUPP if the backend cannot serve.  The source must stay valid
 * until transport_free().
 */
int transport_serve(struct transport *t, const struct transport_source *src);

/* The address the server is bound to, as "HOST:PORT" (IPv6 as
 * "[HOST]:PORT"), with the real port when 0 was asked.  -ENOTCONN if not
 * serving. */
int transport_addr(const struct transport *t, char *buf, size_t len);

/* The same for one backend by name ("tcp", "rdma"): -ENOTCONN if that
 * backend is not serving. */
int transport_addr_of(const struct transport *t, const char *backend, char *buf, size_t len);

/*
 * A fetch destination registered once with the backends that need it
 * (RDMA), for the life of the destination, so that the fetches into it
 * register nothing.  transport_region_new() registers [@addr, @addr +
 * @len): 0 with *@ret NULL when no backend needs it (TCP only, or
 * @len within the eager size: such ranges are copied out of receive
 * buffers), 0 with a
 * region, or -errno (the fetch then works without one, registering per
 * transfer).  Free it before the memory goes away.
 */
struct transport_region;
int transport_region_new(struct transport *t, void *addr, uint64_t len,
			 struct transport_region **ret);
void transport_region_free(struct transport_region *r); /* NULL is fine */

/*
 * Called while bytes arrive: @done bytes from the start of the range are
 * in place (it grows monotonically; the last call has @done == range
 * length).  Called from the fetching thread.
 */
typedef void (*transport_progress_fn)(void *arg, uint64_t done);

/* Flags of struct transport_req (wire version 2: see transport_speaks_fan1()). */
#define TRANSPORT_F_PARTIAL_OK 0x1 /* a peer lacking part of the range answers HAVE */
#define TRANSPORT_F_WANT_HAVE 0x2  /* a HAVE first; with len 0, only that (a query) */
#define TRANSPORT_F_BUSY_OK 0x4	   /* a peer at its serve_slots answers HAVE with BUSY */
#define TRANSPORT_F_PARK 0x8	   /* a peer receiving the range answers once it has it */

/* One fetch: a byte range of one object from one peer, into memory the caller owns. */
struct transport_req {
	const char *peer;		 /* the peer's node name */
	const char *addr;		 /* its TCP address, from its card ("HOST:PORT") */
	const char *rdma_addr;		 /* its RDMA address, from its card; NULL or "" if none */
	const char *caps;		 /* its card's caps; NULL or "" (an old card): no "fan1" */
	unsigned flags;			 /* TRANSPORT_F_*; 0 for a plain fetch */
	struct transport_have *have_out; /* where a HAVE answer goes; NULL: nowhere */
	struct transport_region *region; /* the destination's, or NULL */
	uint64_t id;
	uint64_t off, len;
	const struct iovec *iov; /* must cover exactly len bytes */
	int iovcnt;
	transport_progress_fn progress; /* may be NULL */
	void *arg;
};

/*
 * Fetch [req->off, req->off + req->len) of object req->id from
 * req->peer into req->iov, calling req->progress(req->arg, done) as the
 * bytes arrive.  Borrows a cached connection to the peer or makes one
 * (and authenticates).  Blocks until done or failed; never longer than
 * about io_timeout_ms without progress.  @req is only read, and only
 * during the call.
 *
 * 0, or: -ENOENT the peer does not hold the object; -ERANGE the range is
 * outside the object; -ECONNREFUSED/-EHOSTUNREACH/-ENETUNREACH cannot
 * connect; -ETIMEDOUT the peer stalled; -ECONNRESET it went away;
 * -EACCES authentication failed; -EPROTO it sent something malformed;
 * -EINVAL bad arguments (a bad node name, an empty address, iovecs that
 * do not cover the range, unknown flags, WANT_HAVE without have_out).
 * On error the range may be partly written.
 *
 * Flags need a peer whose card has "rfan" (they then go over RDMA, when
 * this node fetches from it over RDMA and that has not just failed) or
 * "fan1" (over TCP) in req->caps: to any other peer, PARTIAL_OK is
 * dropped (a range the peer lacks is -ENOENT, as always) and WANT_HAVE
 * is -EOPNOTSUPP, before anything is sent.  With them:
 *  - PARTIAL_OK: -EAGAIN means "not yet": the peer holds the object
 *    but not all of the range verified, and said what it has in
 *    *req->have_out (if not NULL); nothing of this GET was written
 *    (earlier GETs of a range longer than 1 GiB may have been).  The
 *    connection stays usable.
 *  - WANT_HAVE: on 0, *req->have_out holds the peer's HAVE, sent before
 *    the bytes, over TCP; over RDMA no HAVE comes before bytes, and on 0
 *    with req->len > 0 *req->have_out is left as it was.  With req->len
 *    0 the HAVE is all that is fetched (a query, answered whatever the
 *    peer holds of the object, or -ENOENT if nothing), over either.
 *    Without PARTIAL_OK, a range the peer lacks is -ENOENT.
 *  - BUSY_OK and PARK need "fan2" on the card too over TCP (they are
 *    dropped for a peer without it); over RDMA BUSY_OK is kept and PARK
 *    dropped (the GET is answered at once: "not yet", -EAGAIN, for a
 *    block the peer is still receiving).  PARK goes with PARTIAL_OK.  BUSY_OK: a peer that
 *    already sends its serve_slots GETs may answer -EAGAIN with
 *    TRANSPORT_HAVE_BUSY and a retry_ms in *req->have_out (with PARK,
 *    a peer whose slots this node alone holds, and that nobody else
 *    asks, may instead hold the GET until a slot frees).  PARK: a
 *    peer that is receiving the range (its own fetch) answers once it
 *    has checked it, or -EAGAIN if its fetch of it stops; the wait is
 *    bounded by the peer (about io_timeout_ms / 2).
 * *req->have_out is written only when a HAVE arrived (0 with
 * WANT_HAVE over TCP or for a query, or -EAGAIN).
 */
int transport_fetch(struct transport *t, const struct transport_req *req);

/*
 * Will fetches from a peer whose card advertises @caps speak a version 2
 * (its card has "fan1" and @t's TCP speaks it, or it has "rfan" and @t
 * fetches over RDMA, which speaks it), so that TRANSPORT_F_* flags and
 * HAVE answers work?
 */
bool transport_speaks_fan1(const struct transport *t, const char *caps);
/* And does it take BUSY_OK (and PARK, over TCP): its card has "fan2", or
 * "rfan" (RDMA drops PARK)? */
bool transport_speaks_fan2(const struct transport *t, const char *caps);

/* Would a fetch with TRANSPORT_F_PARK from @peer, whose card gives @caps
 * and @rdma_addr, keep the flag now (it goes over TCP to a card with
 * "fan2"), rather than lose it (over RDMA, or to an older card)? */
bool transport_parks(struct transport *t, const char *peer, const char *caps,
		     const char *rdma_addr);

/* Would a fetch without flags from @peer, whose card gives @caps and
 * @rdma_addr, go over RDMA now (this node fetches over RDMA, the peer
 * serves it, and RDMA to it has not just failed) while one with flags
 * would not (the card lacks "rfan": flags would take it to TCP)? */
bool transport_plain_rdma(struct transport *t, const char *peer, const char *caps,
			  const char *rdma_addr);

/* What the fetch engine should know of the backend. */
struct transport_tuning {
	unsigned streams_per_peer; /* ranges of one object fetched from one peer at once (tcp: 2) */
	uint64_t range_min;	   /* smallest range worth a stream of its own (tcp: 8 MiB) */
	unsigned io_timeout_ms;	   /* how long a stalled peer takes to fail a fetch */
};

/* Fill *@ret with the tuning of @t's backend. */
void transport_tuning(const struct transport *t, struct transport_tuning *ret);

/*
 * May this transport fetch from a peer whose card advertises @caps
 * ("tcp", "tcp,rdma"; "" on cards of old nodes, which means tcp) at TCP
 * address @addr and RDMA address @rdma_addr (either may be NULL or "")?
 * @caps is a comma-separated list of transport names and feature tokens
 * ("fan1"), matched whole (NULL is taken as ""); unknown tokens are
 * ignored.
 */
bool transport_reaches(const struct transport *t, const char *caps, const char *addr,
		       const char *rdma_addr);

/* What this node advertises on its card: what it serves ("tcp" or
 * "tcp,rdma"), then, once serving, "fan1" if its TCP server accepts wire
 * version 2 ("tcp,fan1,fan2", "tcp,rdma,fan1,fan2"), and "rfan" if its
 * RDMA server accepts version 2 of its messages
 * ("tcp,rdma,fan1,fan2,rfan").  Valid until transport_free(). */
const char *transport_caps(const struct transport *t);

/* Close the cached connections to @peer (it died, or its card changed). */
void transport_forget_peer(struct transport *t, const char *peer);

struct transport_stats {
	uint64_t bytes_sent;	 /* object bytes served */
	uint64_t bytes_received; /* object bytes fetched */
	uint64_t requests_served;
	uint64_t requests_sent;
	uint64_t conns_accepted;
	uint64_t conns_open;	/* server + client, now */
	uint64_t auth_failures; /* peers refused (bad proof, or not loopback) */
	uint64_t bad_frames;	/* connections closed for malformed input */
	/* by path, client side: ranges fetched and their bytes */
	uint64_t fetch_tcp, bytes_tcp;
	uint64_t fetch_eager, bytes_eager; /* RDMA SEND/RECV */
	uint64_t fetch_rdv, bytes_rdv;	   /* RDMA READ */
	uint64_t rdma_conns;		   /* RDMA connections open now (both sides) */
	uint64_t rdma_fallbacks;	   /* RDMA fetches retried over TCP */
	uint64_t rdma_regs;		   /* memory registrations made (objects, regions) */
	/* registrations of objects served: hanging on objects now, used
	 * again by a GET, and given back (the object was freed, or the store
	 * keeps at most rdma_regs= of them) */
	uint64_t rdma_regs_live, rdma_regs_reused, rdma_regs_dropped;
	/* the server's caps on connections in all and from one node (from
	 * the open-files limit when the transport was made: common/util.h
	 * util_fd_budget()), and its TCP connections open now (one evicted to
	 * make room counts until its socket is closed) */
	unsigned serve_conns, serve_conns_per_node;
	uint64_t serve_conns_open;
	/* fan-out: GETs answered "busy" (serve_slots) and told so, and GETs
	 * that waited here for a block this node was receiving */
	uint64_t busy_sent, busy_received, parked;
	/* fan-out GETs for a block this node gave out to another fetcher */
	uint64_t given_refused;
	/* RDMA: registrations of a range of an object held in part (being
	 * fetched), each for one GET */
	uint64_t rdma_partial_regs;
};
void transport_stats(const struct transport *t, struct transport_stats *ret);

/*
 * Read a cluster secret file: its bytes minus one trailing newline.
 * -EPERM if the file is readable by others (mode & 004) , -EINVAL if
 * shorter than TRANSPORT_SECRET_MIN or longer than TRANSPORT_SECRET_MAX,
 * else the errno of open/read.  *ret is malloc()ed.
 */
int transport_read_secret(const char *path, uint8_t **ret, size_t *ret_len);

#endif
