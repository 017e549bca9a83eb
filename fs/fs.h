/*
 * fs: the node's object layer seen through FUSE.
 *
 * It joins the store (bytes), meta (names, records) and the node
 * (other nodes' objects) into a low-level FUSE filesystem: inode numbers
 * are the cluster-wide ids from meta, reads are answered from the store's
 * shared memory, and a file written through the mount becomes an object
 * at its writer's last close (close(2) returns once it is sealed and
 * published; see fs_file.c).  fs_new() creates the node, with
 * hooks into this layer, over the transport given in the config.
 *
 * The daemon creates the store and the meta client, hands them to
 * fs_new(), calls fs_reconcile() once, fs_mount(), then fs_run() until the
 * filesystem is unmounted.  A maintenance thread of the daemon calls
 * fs_tick() every few seconds.
 */
#ifndef OBJFS_FS_H
#define OBJFS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct node_source;
struct fs;
struct meta;
struct meta_inval;
struct store;
struct transport;

struct fs_config {
	const char *mountpoint; /* absolute */
	const char *node;
	const char *fsname;    /* shown by mount(8) and df */
	const char *store_dir; /* for the status report */
	bool allow_overwrite;
	bool allow_other;
	bool read_only;
	bool nosuid, nodev, noexec, noatime;
	bool debug; /* libfuse request tracing */
	/* serve sealed local objects through the kernel (FUSE passthrough)
	 * where it offers it, and read large objects being fetched with
	 * direct I/O; false: passthrough=off, the daemon answers every read
	 * and the kernel's page cache holds them */
	bool passthrough;
	/* fetches other nodes' objects (not owned; must outlive the fs, or
	 * at least fs_stop_fetching()); NULL: none are fetched */
	struct transport *transport;
	/* what the node serves peers from (not owned; must outlive the fs;
	 * may be NULL): eviction takes its leases on an evicted copy back */
	struct node_source *source;
	/* asks the owner to call fs_tick() soon (Redis lost writes: the
	 * store must be reconciled at once); called from the invalidation
	 * subscriber with no lock of the fs held; NULL: the next tick */
	void (*wake_tick)(void *ctx);
	void *wake_ctx;
};

/* Neither @m nor @s is owned; both must outlive the fs. */
struct fs *fs_new(const struct fs_config *cfg, struct meta *m, struct store *s, int *ret_err);
void fs_free(struct fs *fs);

/*
 * Bring the store and Redis into agreement.  If the Redis epoch is the one
 * the store saw last, local objects that Redis no longer has were deleted
 * while this node was away and are dropped; the others get this node as a
 * holder.  If the epoch changed (Redis lost its data), every local object
 * is registered again under its last known path.  Then objects whose
 * publish failed while Redis was down are published.
 * Returns 0 or -errno; *ret_n (may be NULL) gets objects re-registered.
 */
int fs_reconcile(struct fs *fs, unsigned *ret_n);

/* Create the FUSE session and mount.  -errno on failure. */
int fs_mount(struct fs *fs);
/* Serve requests with a thread pool until unmounted or a signal arrives.
 * Unmounts before returning. */
int fs_run(struct fs *fs);

/*
 * Periodic work (every few seconds, from a thread of the daemon, and at
 * once after cfg.wake_tick()): retry publishing objects sealed while
 * Redis was down, reconcile the store with Redis if the Redis epoch
 * changed or Redis said it lost writes ("resync"), discard abandoned
 * replacement objects.
 */
void fs_tick(struct fs *fs);

/* Stop fetching (worker threads end, fetches in flight fail).  Call
 * before freeing the transport; fs_free() does it too. */
void fs_stop_fetching(struct fs *fs);

/* Invalidation from another node (a meta_inval_fn for meta_subscribe()):
 * drops the kernel's cached entries and the copy of a deleted object.
 * @ev NULL: messages may have been missed; drops every cached name. */
void fs_on_inval(void *arg, const struct meta_inval *ev);

/* Status report as "key: value" lines into @buf.  Returns its length. */
size_t fs_status(struct fs *fs, char *buf, size_t len);

#endif
