/*
 * fs: this node's objects seen through FUSE.
 *
 * A low-level FUSE filesystem over meta (the namespace: lookup, listing,
 * mkdir, rename, unlink), the node (an object's life here: create, open
 * or fetch, seal and publish) and the store (the bytes of objects it
 * holds a reference to): inode numbers are the cluster-wide ids from
 * meta, reads are answered from the store's shared memory, and a file
 * written through the mount becomes an object at its writer's last close
 * (close(2) returns once it is sealed and published; see fs_file.c).
 * fs_new() sets the node's hooks into this layer.
 *
 * The daemon creates the store, the meta client and the node, hands them
 * to fs_new(), calls node_reconcile() once, fs_mount(), then fs_run()
 * until the filesystem is unmounted.  A maintenance thread of the daemon
 * calls fs_tick() and node_tick() every few seconds.
 */
#ifndef OBJFS_FS_H
#define OBJFS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fs;
struct meta;
struct meta_inval;
struct node;
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
	/* the transport the node fetches with, for the status report (not
	 * owned; may be NULL) */
	struct transport *transport;
	/* what a file or directory without an owner of its own shows (one
	 * written before objfs kept owners): uid and gid, and the mode 0777
	 * (directories) or 0666 (files) less umask */
	uint32_t uid, gid, umask;
};

/* None of @m, @s and @nd is owned; all must outlive the fs.  Sets @nd's
 * hooks (node_set_hooks()). */
struct fs *fs_new(const struct fs_config *cfg, struct meta *m, struct store *s, struct node *nd,
		  int *ret_err);
/* Seals that failed at a RELEASE get a last try; then unmount and free.
 * After node_stop() and before node_free(): it takes the node's hooks
 * back. */
void fs_free(struct fs *fs);

/* Create the FUSE session and mount.  -errno on failure. */
int fs_mount(struct fs *fs);
/* Serve requests with a thread pool until unmounted or a signal arrives.
 * Unmounts before returning. */
int fs_run(struct fs *fs);

/* Periodic work of the overlay (every few seconds, from a thread of the
 * daemon): retry seals that failed at a RELEASE, discard abandoned
 * replacement objects. */
void fs_tick(struct fs *fs);

/* Invalidation from another node (a meta_inval_fn for meta_subscribe()):
 * drops the kernel's cached entries and the copy of a deleted object
 * (node_gone()).  @ev NULL: messages may have been missed; drops every
 * cached name, and asks the node to reconcile (node_resync()). */
void fs_on_inval(void *arg, const struct meta_inval *ev);

/* Status report as "key: value" lines into @buf.  Returns its length. */
size_t fs_status(struct fs *fs, char *buf, size_t len);

#endif
