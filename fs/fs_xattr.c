/*
 * fs_xattr: what objfs tells through extended attributes, and statfs.
 *
 *   user.objfs.id, .checksum, .locations, .fetch    on files
 *   user.objfs.status, .nodes                        on the root
 *
 * Only .locations (and the root's .nodes) ask Redis: the id and checksum
 * come from the inode (a lookup or a listing filled it in), .fetch from
 * the node and the store.  Names outside "user." are not supported.
 *
 * The status report (fs_status()) is the "key: value" text that
 * `objfs status` prints: the store, Redis, this node's counters (how
 * opens were served: passthrough, direct I/O, page cache; READ requests
 * the daemon answered), the node's and the transport's (its mode, what
 * became of RDMA, its addresses, and ranges and bytes fetched by path:
 * TCP, RDMA eager, RDMA rendezvous), and last a limits: block: used/max
 * of every limit a writer or a peer can reach, and which is nearest.
 */
#include "fs_i.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "transport.h"

#define FS_LOAD(fs, field) atomic_load_explicit(&(fs)->cnt.field, memory_order_relaxed)

void fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fuse_req_userdata(req);
	struct store_stats ss;
	struct statvfs sv;

	store_stats(fs->store, &ss);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = STORE_PAGE;
	sv.f_frsize = STORE_PAGE;
	sv.f_blocks = ss.capacity / STORE_PAGE;
	/* used counts pages of deleted objects still mapped: it may pass
	 * the capacity */
	sv.f_bfree = ss.capacity > ss.used ? (ss.capacity - ss.used) / STORE_PAGE : 0;
	sv.f_bavail = sv.f_bfree;
	/* the object limit (df -i): an object takes at least a page of the
	 * capacity and an inode of the store's filesystem */
	sv.f_ffree = sv.f_bfree;
	if (ss.inodes && ss.inodes_free < sv.f_ffree)
		sv.f_ffree = ss.inodes_free;
	sv.f_favail = sv.f_ffree;
	sv.f_files = ss.objects + ss.pending + sv.f_ffree;
	sv.f_namemax = OBJFS_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* ---- xattrs ---- */

#define XATTR_USER "user."
#define XATTR_ID "user.objfs.id"
#define XATTR_CSUM "user.objfs.checksum"
#define XATTR_LOC "user.objfs.locations"
#define XATTR_STATUS "user.objfs.status"
#define XATTR_NODES "user.objfs.nodes"
#define XATTR_FETCH "user.objfs.fetch"

static void reply_xattr_value(fuse_req_t req, const char *val, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fs_reply_err(req, -ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void xattr_locations(fuse_req_t req, struct fs *fs, uint64_t id, size_t size)
{
	char(*nodes)[OBJFS_NODE_MAX] = NULL;
	size_t n = 0, i, used = 0;
	char *buf;
	int r;

	r = meta_holders(fs->meta, id, &nodes, &n);
	if (r < 0) {
		fs_reply_err_at(req, r, "getxattr", id, XATTR_LOC);
		return;
	}
	buf = calloc(n + 1, OBJFS_NODE_MAX);
	if (!buf) {
		free(nodes);
		fs_reply_err(req, -ENOMEM);
		return;
	}
	for (i = 0; i < n; i++)
		used += (size_t)sprintf(buf + used, "%s%s", i ? "," : "", nodes[i]);
	reply_xattr_value(req, buf, used, size);
	free(buf);
	free(nodes);
}

/* Size of object @id as this node knows it (0 if unknown). */
static uint64_t in_size(struct fs *fs, uint64_t id)
{
	struct inode *in;
	uint64_t size = 0;

	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, id);
	if (in && in->sealed)
		size = in->obj.size;
	pthread_mutex_unlock(&fs->lock);
	return size;
}

/* The cluster's members, one line each:
 * "NAME live|down TTL_MS HOST LISTEN CAPS USED CAPACITY RDMA" (RDMA came
 * last, so that readers of the first eight fields still work). */
static void xattr_nodes(fuse_req_t req, struct fs *fs, size_t size)
{
	struct meta_member *mm = NULL;
	size_t n = 0, i, used = 0, cap;
	char *buf;
	int r;

	r = meta_members(fs->meta, &mm, &n);
	if (r < 0) {
		fs_reply_err_at(req, r, "getxattr", META_ROOT_ID, XATTR_NODES);
		return;
	}
	cap = (n + 1) * 640;
	buf = malloc(cap);
	if (!buf) {
		free(mm);
		fs_reply_err(req, -ENOMEM);
		return;
	}
	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		const struct meta_card *c = &mm[i].card;

		if (mm[i].live)
			used += (size_t)snprintf(
			    buf + used, cap - used,
			    "%s live %" PRId64 " %s %s %s %" PRIu64 " %" PRIu64 " %s\n", mm[i].node,
			    mm[i].ttl_ms, c->host[0] ? c->host : "-",
			    c->listen[0] ? c->listen : "-", c->caps[0] ? c->caps : "-", c->used,
			    c->capacity, c->rdma[0] ? c->rdma : "-");
		else
			used += (size_t)snprintf(buf + used, cap - used, "%s down -1 - - - 0 0 -\n",
						 mm[i].node);
	}
	reply_xattr_value(req, buf, used, size);
	free(buf);
	free(mm);
}

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fs *fs = fuse_req_userdata(req);
	char val[OBJFS_PATH_MAX];
	struct inode *in;
	bool sealed;
	size_t len;

	/* Objects carry no ACLs, security labels or capabilities: "not
	 * supported" (rather than "none here") makes `ls -l` stop asking
	 * for them after the first file of the mount, where it asked twice
	 * per file.  tar, cp -a and rsync -X take it as "no such xattrs" too. */
	if (strncmp(name, XATTR_USER, sizeof(XATTR_USER) - 1)) {
		fs_reply_err(req, -EOPNOTSUPP);
		return;
	}
	if (ino == META_ROOT_ID && !strcmp(name, XATTR_NODES)) {
		xattr_nodes(req, fs, size);
		return;
	}
	if (ino == META_ROOT_ID && !strcmp(name, XATTR_STATUS)) {
		char *buf = malloc(8192);

		if (!buf) {
			fs_reply_err(req, -ENOMEM);
			return;
		}
		len = fs_status(fs, buf, 8192);
		reply_xattr_value(req, buf, len, size);
		free(buf);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	if (!in || in->kind != META_FILE) {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, -ENODATA);
		return;
	}
	if (in->pending)
		fs_pending_settle_locked(fs, in->pending);
	sealed = !in->pending && in->sealed;
	if (!strcmp(name, XATTR_ID)) {
		len = (size_t)snprintf(val, sizeof(val), "%" PRIu64, in->ino);
	} else if (!strcmp(name, XATTR_CSUM) && sealed) {
		util_csum_to_hex(in->obj.csum, val);
		len = strlen(val);
	} else if (!strcmp(name, XATTR_FETCH) && sealed) {
		uint64_t done = 0, total = 0;
		const char *state = "fetching";

		pthread_mutex_unlock(&fs->lock);
		if (node_fetch_progress(fs->nd, ino, &done, &total) == 0) {
			if (!total) /* still being set up */
				total = in_size(fs, ino);
		} else {
			struct store_obj *o = node_local(fs->nd, ino);

			state = o ? "local" : "remote";
			total = in_size(fs, ino);
			done = o ? total : 0;
			store_obj_unref(o);
		}
		len = (size_t)snprintf(val, sizeof(val), "%s %" PRIu64 " %" PRIu64, state, done,
				       total);
		reply_xattr_value(req, val, len, size);
		return;
	} else if (!strcmp(name, XATTR_LOC) && sealed) {
		pthread_mutex_unlock(&fs->lock);
		xattr_locations(req, fs, ino, size);
		return;
	} else {
		pthread_mutex_unlock(&fs->lock);
		fs_reply_err(req, -ENODATA);
		return;
	}
	pthread_mutex_unlock(&fs->lock);
	reply_xattr_value(req, val, len, size);
}

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = fuse_req_userdata(req);
	static const char file_names[] =
	    XATTR_ID "\0" XATTR_CSUM "\0" XATTR_LOC "\0" XATTR_FETCH "\0";
	static const char root_names[] = XATTR_STATUS "\0" XATTR_NODES "\0";
	struct inode *in;
	bool is_file;

	if (ino == META_ROOT_ID) {
		reply_xattr_value(req, root_names, sizeof(root_names) - 1, size);
		return;
	}
	pthread_mutex_lock(&fs->lock);
	in = fs_inode_find(fs, ino);
	is_file = in && in->kind == META_FILE;
	pthread_mutex_unlock(&fs->lock);
	if (is_file)
		reply_xattr_value(req, file_names, sizeof(file_names) - 1, size);
	else
		reply_xattr_value(req, "", 0, size);
}

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags)
{
	/* objects carry no user metadata of their own (yet); cp -a and tar
	 * treat ENOTSUP as "this filesystem has no xattrs" */
	fs_reply_err(req, -ENOTSUP);
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fs_reply_err(req, -ENOTSUP);
}

/* Descriptors this process holds now, or -1 if /proc cannot tell. */
static long fds_open(void)
{
	struct dirent *de;
	long n = 0;
	DIR *d = opendir("/proc/self/fd");

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the listing's own */
}

/* One limit of the limits: block, as USED/MAX ("-" for a MAX there is
 * not, or a USED that cannot be told). */
struct limit_line {
	const char *name;
	uint64_t used, max;
	bool has_used, has_max;
	bool cache; /* a cache: full is its normal state, not a limit near */
};

static size_t limits_out(const struct limit_line *l, size_t nl, char *buf, size_t len)
{
	const struct limit_line *near = NULL;
	uint64_t pct = 0, p;
	size_t n = 0, i;
	char u[24], m[24];

	for (i = 0; i < nl; i++) {
		if (l[i].cache || !l[i].has_used || !l[i].has_max || !l[i].max)
			continue;
		p = l[i].used >= UINT64_MAX / 100 ? UINT64_MAX : l[i].used * 100 / l[i].max;
		if (!near || p > pct) {
			near = &l[i];
			pct = p;
		}
	}
	if (near)
		n += (size_t)snprintf(buf + n, len - n,
				      "limits: used/max; nearest %s %" PRIu64 "%%\n", near->name,
				      pct);
	else
		n += (size_t)snprintf(buf + n, len - n, "limits: used/max\n");
	for (i = 0; i < nl && n < len; i++) {
		snprintf(u, sizeof(u), "-");
		snprintf(m, sizeof(m), "-");
		if (l[i].has_used)
			snprintf(u, sizeof(u), "%" PRIu64, l[i].used);
		if (l[i].has_max)
			snprintf(m, sizeof(m), "%" PRIu64, l[i].max);
		n += (size_t)snprintf(buf + n, len - n, "limit_%s: %s/%s\n", l[i].name, u, m);
	}
	return n;
}

size_t fs_status(struct fs *fs, char *buf, size_t len)
{
	struct transport_stats ts = {0};
	struct node_stats fst;
	struct store_stats ss;
	char err[256], pt[96];
	size_t n = 0, n_dcache;
	uint64_t heap_trims;
	bool up = meta_is_up(fs->meta);
	uint64_t nofile = util_nofile_limit();
	long fds = fds_open();

	store_stats(fs->store, &ss);
	node_stats(fs->nd, &fst);
	if (fs->cfg.transport)
		transport_stats(fs->cfg.transport, &ts);
	err[0] = '\0';
	if (!up)
		meta_last_error(fs->meta, err, sizeof(err));

#define OUT(...)                                                              \
	do {                                                                  \
		if (n < len)                                                  \
			n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__); \
	} while (0)
	OUT("mountpoint: %s\n", fs->cfg.mountpoint);
	OUT("node: %s\n", fs->cfg.node);
	OUT("redis: %s %s%s%s\n", up ? "up" : "down", meta_url(fs->meta), err[0] ? " " : "", err);
	OUT("store: %s\n", fs->cfg.store_dir);
	OUT("store_fs: %s\n", store_fs_name(ss.fs));
	OUT("capacity: %" PRIu64 "\n", ss.capacity);
	OUT("used: %" PRIu64 "\n", ss.used);
	OUT("draining: %" PRIu64 "\n", ss.draining);
	OUT("draining_mapped: %" PRIu64 "\n", ss.held);
	OUT("pool: %" PRIu64 "\n", ss.pool);
	OUT("pack_max: %" PRIu64 "\n", ss.pack_max);
	OUT("packed: %" PRIu64 "\n", ss.packed);
	OUT("chunks: %" PRIu64 "\n", ss.chunks);
	OUT("chunk_bytes: %" PRIu64 "\n", ss.chunk_bytes);
	OUT("files_new: %" PRIu64 "\n", ss.files_new);
	OUT("files_reused: %" PRIu64 "\n", ss.files_reused);
	OUT("objects: %" PRIu64 "\n", ss.objects);
	OUT("objects_mem: %" PRIu64 "\n", ss.objects_mem);
	OUT("pending: %" PRIu64 "\n", ss.pending);
	OUT("open: %" PRIu64 "\n", ss.open);
	OUT("open_max: %" PRIu64 "\n", ss.open_max);
	OUT("mapped: %" PRIu64 "\n", ss.mapped);
	OUT("map_cache: %" PRIu64 "\n", ss.map_cache);
	OUT("mapped_pinned: %" PRIu64 "\n", ss.pinned);
	OUT("sole_copies: %" PRIu64 "\n", ss.sole);
	OUT("regs_max: %" PRIu64 "\n", ss.regs_max);
	OUT("regs_dropped: %" PRIu64 "\n", ss.regs_dropped);
	OUT("maps_made: %" PRIu64 "\n", ss.maps_made);
	OUT("maps_dropped: %" PRIu64 "\n", ss.maps_dropped);
	OUT("unpublished: %" PRIu64 "\n", fst.unpublished);
	OUT("bad_records: %" PRIu64 "\n", ss.bad_records);
	OUT("catalog_bytes: %" PRIu64 "\n", ss.catalog_bytes);
	OUT("catalog_lines: %" PRIu64 "\n", ss.catalog_lines);
	OUT("catalog_live: %" PRIu64 "\n", ss.catalog_live);
	OUT("catalog_compactions: %" PRIu64 "\n", ss.compactions);
	OUT("sealed: %" PRIu64 "\n", (uint64_t)FS_LOAD(fs, sealed));
	OUT("sealed_at_close: %" PRIu64 "\n", (uint64_t)FS_LOAD(fs, sealed_at_close));
	OUT("seal_failed: %" PRIu64 "\n", fst.seal_failed);
	OUT("killed_writers: %" PRIu64 "\n", fst.killed_writers);
	OUT("reregistered: %" PRIu64 "\n", fst.reregistered);
	pthread_mutex_lock(&fs->lock);
	n_dcache = fs->n_dcache + fs->n_dcache_files;
	heap_trims = fs->heap_trims;
	pthread_mutex_unlock(&fs->lock);
	OUT("name_cache: %zu\n", n_dcache);
	OUT("heap_trims: %" PRIu64 "\n", heap_trims);
	OUT("overwrite: %s\n", fs->cfg.allow_overwrite ? "allowed" : "refused");
	fs_pt_describe(fs->pt, pt, sizeof(pt));
	OUT("passthrough: %s\n", pt);
#define CTR(name, value) OUT(name ": %" PRIu64 "\n", (uint64_t)(value))
	CTR("passthrough_opens", FS_LOAD(fs, opens_pt));
	CTR("direct_io_opens", FS_LOAD(fs, opens_direct));
	CTR("cached_opens", FS_LOAD(fs, opens_cached));
	CTR("read_requests", FS_LOAD(fs, reads));
	CTR("cache_fills", FS_LOAD(fs, cache_fills));
	CTR("flush_requests", FS_LOAD(fs, flushes));
	CTR("backing_ids_open", fs_pt_backing_ids(fs->pt));
	CTR("fetches", fst.fetches);
	CTR("fetches_direct", fst.direct);
	CTR("fetches_done", fst.done);
	CTR("fetches_failed", fst.failed);
	CTR("fetch_bytes", fst.bytes);
	CTR("failovers", fst.failovers);
	CTR("checksum_failures", fst.csum_failures);
	{
		/* who sent the blocks that failed their sums (a bounded line) */
		char by[512];

		node_peer_csum_failures(fs->nd, by, sizeof(by));
		OUT("checksum_failures_by_peer: %s\n", by[0] ? by : "-");
	}
	CTR("stale_holders_dropped", fst.stale_holders);
	CTR("evictions", fst.evictions);
	CTR("invalidations", FS_LOAD(fs, invalidations));
	CTR("invalidations_own", FS_LOAD(fs, inval_own));
	CTR("listings", FS_LOAD(fs, listings));
#undef CTR
	if (fs->cfg.transport) {
		struct transport *t = fs->cfg.transport;
		char addr[160], rdma[160];

		if (transport_addr(t, addr, sizeof(addr)) < 0)
			snprintf(addr, sizeof(addr), "-");
		if (transport_addr_of(t, "rdma", rdma, sizeof(rdma)) < 0)
			snprintf(rdma, sizeof(rdma), "-");
		OUT("transport: %s\n", transport_name(t));
		OUT("rdma: %s\n", transport_rdma_state(t));
		OUT("listen: %s\n", addr);
		OUT("rdma_addr: %s\n", rdma);
		OUT("served_bytes: %" PRIu64 "\n", ts.bytes_sent);
		OUT("served_requests: %" PRIu64 "\n", ts.requests_served);
		OUT("received_bytes: %" PRIu64 "\n", ts.bytes_received);
		OUT("requests_sent: %" PRIu64 "\n", ts.requests_sent);
		OUT("connections_open: %" PRIu64 "\n", ts.conns_open);
		OUT("connections_accepted: %" PRIu64 "\n", ts.conns_accepted);
		OUT("auth_failures: %" PRIu64 "\n", ts.auth_failures);
		OUT("bad_frames: %" PRIu64 "\n", ts.bad_frames);
		/* ranges fetched, and their bytes, by path */
		OUT("fetch_tcp: %" PRIu64 "\n", ts.fetch_tcp);
		OUT("bytes_tcp: %" PRIu64 "\n", ts.bytes_tcp);
		OUT("fetch_eager: %" PRIu64 "\n", ts.fetch_eager);
		OUT("bytes_eager: %" PRIu64 "\n", ts.bytes_eager);
		OUT("fetch_rdv: %" PRIu64 "\n", ts.fetch_rdv);
		OUT("bytes_rdv: %" PRIu64 "\n", ts.bytes_rdv);
		OUT("rdma_conns: %" PRIu64 "\n", ts.rdma_conns);
		OUT("rdma_fallbacks: %" PRIu64 "\n", ts.rdma_fallbacks);
		/* fan-out: refused for serve_slots, told so; waited for a block */
		OUT("busy_sent: %" PRIu64 "\n", ts.busy_sent);
		OUT("busy_received: %" PRIu64 "\n", ts.busy_received);
		OUT("parked: %" PRIu64 "\n", ts.parked);
		OUT("given_refused: %" PRIu64 "\n", ts.given_refused);
		OUT("rdma_regs: %" PRIu64 "\n", ts.rdma_regs);
		OUT("rdma_regs_live: %" PRIu64 "\n", ts.rdma_regs_live);
		OUT("rdma_regs_reused: %" PRIu64 "\n", ts.rdma_regs_reused);
		OUT("rdma_regs_dropped: %" PRIu64 "\n", ts.rdma_regs_dropped);
		/* ranges of objects being fetched served over RDMA, each
		 * registered for its GET */
		OUT("rdma_partial_regs: %" PRIu64 "\n", ts.rdma_partial_regs);
	} else {
		OUT("transport: none\n");
	}
#undef OUT
	if (n < len) {
		/* how close the node is to each limit a writer or a peer can
		 * reach (the store's inodes: all its files, not objects only) */
		const struct limit_line limits[] = {
		    {"capacity", ss.used, ss.capacity, true, true, false},
		    {"store_inodes", ss.inodes - ss.inodes_free, ss.inodes, ss.inodes != 0,
		     ss.inodes != 0, false},
		    {"pending", ss.open, ss.open_max, true, ss.open_max != UINT64_MAX, false},
		    {"mapped", ss.mapped, ss.map_cache, true, true, true},
		    {"serve_conns", ts.serve_conns_open, ts.serve_conns, fs->cfg.transport != NULL,
		     fs->cfg.transport != NULL, false},
		    {"fds", fds > 0 ? (uint64_t)fds : 0, nofile, fds > 0, nofile != 0, false},
		};

		n += limits_out(limits, ARRAY_SIZE(limits), buf + n, len - n);
	}
	return n < len ? n : len - 1;
}
