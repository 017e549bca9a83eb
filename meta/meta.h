/*
 * meta: the Redis location service.  The only module that includes hiredis.
 *
 * Namespace model.  Every directory and every object has a 64-bit id,
 * drawn at random by the node that makes it; the FUSE inode number of a file or
 * directory is that id, on every node.  Id 1 is the root directory.  A
 * directory is a Redis hash of its children; a file entry names an object
 * id; the object's immutable attributes live in an object record.
 *
 * Key schema (P is the prefix, "objfs" by default).  Every key of an objfs
 * cluster carries the hash tag {P}, so on Redis Cluster the whole
 * namespace lives in one slot and every script is atomic there
 * (docs/design.md, "Metadata on Redis Sentinel and Redis Cluster"):
 *
 *   {P}:ctr             string  write sequence: +1 with every publish; a
 *                               publish that gets back a value not above
 *                               one its node saw before tells every node
 *                               that Redis went back in time ("resync")
 *   {P}:epoch           string  random token set once when the namespace is
 *                               created; a node that sees it change knows
 *                               Redis lost its data and re-registers
 *   {P}:d:<id>          hash    one directory:
 *                                 "/mtime"  mtime in ns since the epoch
 *                                 "/parent" parent directory id (root: 1)
 *                                 "/name"   own name ("" for root)
 *                                 "/nsub"   number of child directories
 *                                 "/attr"   owner, mode, atime and ctime
 *                                           (struct meta_attr; missing in
 *                                           directories of older versions)
 *                                 <name>    "d<id>" (directory), or
 *                                           "f<id> <size> <mtime> <csum>
 *                                           <origin> <attr>" (file: the
 *                                           object's attributes, so that
 *                                           lookup and listing read one
 *                                           key; without " <attr>" as
 *                                           older versions wrote it, and
 *                                           "f<id>" alone is what layout 1
 *                                           had and migrates), or "l<id>" (a
 *                                           symbolic link).  Older versions take
 *                                           an entry with <attr> for a
 *                                           corrupt one: do not mix them
 *                                           with this one on a namespace
 *                               ('/' cannot occur in a name, so the reserved
 *                               fields never collide with children)
 *   {P}:layout          string  the layout of the namespace: "3" (meta_i.h,
 *                               META_LAYOUT); "2>3" while one of layout 1
 *                               or 2 is migrated; a namespace without it
 *                               but with a root is of layout 1 (objfs
 *                               before this key: records held copies of
 *                               the attributes, and holders were sets
 *                               h:<id>); layout 2 kept each record in a
 *                               hash o:<id> of its own.  meta_layout_settle()
 *                               migrates both (meta_layout.c); another
 *                               layout is refused
 *   {P}:r:<b>           hash    object records, 10,000 buckets: field <id>
 *                               in bucket <b>, the last four digits of
 *                               the id (the id itself below 10,000), value
 *                               "<parent>/<name>" and "/@<node>" for each
 *                               node holding a sealed copy (meta_locate()
 *                               drops those whose card expired).  Parent
 *                               and name are where the object is linked
 *                               (kept up by rename) and lead to its entry,
 *                               the one place of its size, csum, mtime,
 *                               origin and attributes.  No key per object:
 *                               a small bucket is a listpack, a few dozen
 *                               bytes a record
 *   {P}:x:<id>          hash    an object's extras, only while it has any:
 *                               "=<parent>/<name>" (a name besides the
 *                               record's: a hard link; meta_link()),
 *                               "bsum" (an object of several 8 MiB blocks:
 *                               a sum per block, see bsum.h; read only by
 *                               a fetch of such an object), "~p:<node>" (a
 *                               node fetching the object: a deadline in ms
 *                               on Redis's clock; see meta_locate_fan())
 *   {P}:s:<id>          hash    symbolic link (entry "l<id>"): "t" its
 *                               target, "m" its mtime, "a" its attributes
 *                               (struct meta_attr), "p" and "n" where it
 *                               is linked (kept up by rename)
 *   {P}:t:<id>          string  tombstone of a deleted object (unlink,
 *                               replace): the deletion time in ns, kept for
 *                               META_TOMBSTONE_TTL seconds so that a node
 *                               that was away can tell "deleted" from "Redis
 *                               forgot it" (a restore from an old snapshot)
 *   {P}:node:<name>     hash    node card, with a TTL refreshed by the
 *                               heartbeat: "host", "pid", "listen" (the
 *                               node's transport address, "HOST:PORT"),
 *                               "instance", "started", "capacity", "used",
 *                               "caps" (transports it serves, "tcp" or
 *                               "tcp,rdma"; missing on cards of older
 *                               nodes, read as ""), "rdma" (its RDMA
 *                               address, "HOST:PORT" or "[V6]:PORT"; ""
 *                               if it serves no RDMA; missing on cards
 *                               of older nodes, and a malformed one is
 *                               ignored with a warning: both read as "")
 *   {P}:members         set     every node name that ever registered
 *   {P}:nodes           string  META_LAYOUT_POISON: layout 1 kept the
 *                               members here, so an older objfsd's node
 *                               claim fails (WRONGTYPE) and its log names
 *                               this key
 *   {P}:fan             zset    "<id> <node>" of every fetcher entry
 *                               "~p:<node>" of x:<id>, scored by its
 *                               deadline, so that a crashed fetcher's
 *                               entry can be found and removed once it
 *                               lapsed (by the heartbeats) when no
 *                               locate meets it any more; written and
 *                               removed with the entry, and by a delete
 *   {P}:inval           sharded channel (SPUBLISH, SSUBSCRIBE) of
 *                               invalidations, "<origin> <kind> <parent>
 *                               <name> <id>": origin is the node whose
 *                               kernel made the change (it skips the
 *                               kernel notifications) or "-"; kinds
 *                               publish, replace, unlink, rename-from,
 *                               rename-to, mkdir, rmdir, and "gone 0 - <id>"
 *                               when an object is deleted (unlink, replace,
 *                               rename over it), "attr 0 - <id>" when a
 *                               file's or directory's owner, mode or
 *                               times changed, "resync 0 - 0" when Redis
 *                               lost writes (the epoch had to be made
 *                               again, or the write sequence went back):
 *                               every node reconciles at once
 *                               (the name may contain spaces)
 *
 * Every multi-key change is one Lua script.  Every value read back from
 * Redis is validated; a malformed one, or a key of the wrong type (a
 * string where a hash belongs), gives -EBADMSG (callers report EIO) and
 * one LOGL_ERROR line "corrupt record in Redis: ..." that names the key,
 * or the object or directory with the field and its value (rate
 * limited).  A corrupt record is an answer from Redis: it never counts
 * as Redis being unreachable.
 *
 * Threading: a struct meta is safe to use from many threads.  It keeps a
 * small pool of connections; each call borrows one (the invalidation
 * subscriber has a connection and a thread of its own, and so has the
 * watcher of +switch-master with a redis-sentinel:// URL).  When Redis is
 * unreachable, calls fail fast with -EIO (no call blocks for longer than
 * the configured timeout, or about three times that while it follows a
 * failover or a slot migration of Sentinel or Cluster: docs/design.md,
 * "The connection pool", has the rules); the next call after the backoff
 * delay tries to reconnect.
 *
 * Engines: one Redis (redis://, unix:), the master that Redis Sentinel
 * names (redis-sentinel://, followed through failovers), or the master
 * of the namespace's slot on Redis Cluster (redis-cluster://, followed
 * through MOVED, ASK and failovers).  Every key of a namespace carries
 * the hash tag {P}, so a namespace lives in one cluster slot.
 *
 * Errors: 0 or a negative errno.  -EIO means Redis could not be reached or
 * answered with an unexpected error; -EBADMSG means a corrupt record.
 */
#ifndef OBJFS_META_H
#define OBJFS_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define META_ROOT_ID 1
/* New ids are drawn at random from [META_ID_MIN, META_ID_MAX]: never
 * from a counter Redis could lose (docs/design.md, "Ids and inodes").
 * Ids below META_ID_MIN are the root and those of the old counter. */
#define META_ID_MIN (1ULL << 32)
#define META_ID_MAX ((1ULL << 63) - 1)
#define META_TOMBSTONE_TTL 2592000 /* 30 days */

struct meta;

struct meta_config {
	/*
	 * Where Redis is (7.0 or later); host is a name, an IPv4 address or
	 * [IPv6], and the password (":password@", no ACL user) is the data
	 * nodes':
	 *
	 *   unix:/path/to/sock
	 *   redis://[:password@]host[:port][/db]             (port 6379)
	 *   redis-sentinel://[:password@]host[:port][,host[:port]...]/NAME[/db]
	 *       1..16 sentinels (port 26379) watching master NAME
	 *       ([A-Za-z0-9._-]{1,64}); a sentinel that wants a password gets
	 *       the same one
	 *   redis-cluster://[:password@]host[:port][,host[:port]...]
	 *       1..16 seed nodes (port 6379) of a Redis Cluster; no /db (a
	 *       cluster has only db 0)
	 *
	 * A malformed URL is -EINVAL; meta_url_check() says why.
	 */
	const char *url;
	/* key prefix, [A-Za-z0-9._-]{1,64}; default "objfs" when NULL */
	const char *prefix;
	/* this node's name (see util_node_name_validate) */
	const char *node;
	/* connections in the pool; default 4 when 0 */
	unsigned pool_size;
	/* connect and command timeout in ms; default 2000 when 0 */
	unsigned timeout_ms;
};

/*
 * Parse and check @cfg->url and the prefix without connecting.  Returns
 * NULL with *ret_err set (-EINVAL for a bad URL or prefix, -ENOMEM).
 * Strings are copied.  Free with meta_free().
 */
struct meta *meta_new(const struct meta_config *cfg, int *ret_err);
/*
 * Check @url as meta_new() does, without connecting: 0, -ENOMEM, or
 * -EINVAL with the part that is wrong and why in @why (e.g. "bad port
 * '99999' in 'h:99999': must be 1-65535"; never the password).
 */
int meta_url_check(const char *url, char *why, size_t wlen);
void meta_free(struct meta *m);

/*
 * Connect now (used at mount time, so that an unreachable Redis fails the
 * mount) and create the root directory, counter and epoch if missing.
 * 0, -EIO (unreachable; see meta_last_error()), -EACCES (auth failed).
 */
int meta_connect(struct meta *m);
/*
 * The namespace's layout (meta_layout.c), to check after meta_connect()
 * and whenever a call gives -EPROTO: 0 if the namespace has this
 * objfsd's layout, after migrating one of layout 1 (logged); -EBUSY if
 * it has layout 1 and a node of layout 1 is live on it, -EPROTO if it has
 * a layout this objfsd does not know (both logged, rate limited, and the
 * reason kept for meta_last_error()), or an errno of Redis.  Until it
 * returns 0, the namespace's calls give -EPROTO.
 */
int meta_layout_settle(struct meta *m);

/* The URL with any password replaced by "***"; owned by @m. */
const char *meta_url(const struct meta *m);
/* true if the last command succeeded (the connection is believed up). */
bool meta_is_up(const struct meta *m);
/* Human-readable text of the last connection error ("" if none); copied
 * into @buf. */
void meta_last_error(const struct meta *m, char *buf, size_t len);

/* ---- namespace ---- */

enum meta_kind {
	META_DIR = 1,
	META_FILE = 2,
	META_LINK = 3, /* a symbolic link */
};
#define META_LINK_MAX 4095 /* bytes of a symbolic link's target */
/* names a file may have (hard links): meta_link() gives -EMLINK past it.
 * Every entry of a file carries its count, so a link writes them all:
 * the bound keeps that below a millisecond (ext4 stops at 65,000). */
#define META_NAMES_MAX 1000

/* The immutable record of a sealed object. */
struct meta_obj {
	uint64_t id;
	uint64_t size;
	int64_t mtime_ns;
	uint8_t csum[OBJFS_CSUM_LEN];
	char origin[OBJFS_NODE_MAX];
};

/*
 * Owner, mode and times of a file or directory: metadata, which changes
 * (meta_setattr()) while an object's bytes never do.  Stored as text
 * "<uid> <gid> <mode, octal>[ <atime ns> <ctime ns>[ <names>]]" (the times
 * left out while both are the mtime, as they are when it is made, and a
 * file's number of names while it has one): in a directory's
 * hash ("/attr"), and in an object's record ("attr") and its entry (see
 * the key schema).  The mtime is where it was: the directory's "/mtime",
 * the record's "mtime".  An entry written before owners existed has none
 * (set false): the mount shows its defaults (uid=, gid=, umask=).
 */
struct meta_attr {
	bool set;
	uint32_t uid, gid;
	uint32_t mode; /* permission bits, at most 07777 */
	int64_t atime_ns, ctime_ns;
	/* a file's names (hard links): 0 or 1 for one; written when above
	 * 1, as a sixth field */
	uint32_t nlink;
};
#define META_ATTR_TEXT_MAX 96 /* bytes of the text, with its NUL */
/* @a as stored ("" if not set) for an entry whose mtime is @mtime_ns:
 * -EINVAL if a field is out of range (uid or gid (uint32_t)-1, mode above
 * 07777). */
int meta_attr_text(const struct meta_attr *a, int64_t mtime_ns, char buf[META_ATTR_TEXT_MAX]);

/* What a name in a directory resolves to. */
struct meta_entry {
	enum meta_kind kind;
	uint64_t id;
	/* META_FILE: the object record.  META_DIR: only id and mtime_ns
	 * (the directory's mtime) are set, plus nsub below. */
	struct meta_obj obj;
	uint64_t nsub;
	struct meta_attr attr;
};

/* Look up @name in directory @parent.  0, -ENOENT (no such name),
 * -ENOTDIR (@parent is not a directory), -EBADMSG, -EIO. */
int meta_lookup(struct meta *m, uint64_t parent, const char *name, struct meta_entry *ret);

/* Attributes of directory @id (kind META_DIR) or object @id (META_FILE). */
int meta_getattr(struct meta *m, uint64_t id, struct meta_entry *ret);

/* What @name in @parent is, and its full path from the root (into
 * @ret_path, OBJFS_PATH_MAX bytes; "" if longer than a path may be).
 * -ENOENT, -ENOTDIR, -EBADMSG, -EIO. */
int meta_path(struct meta *m, uint64_t parent, const char *name, enum meta_kind *ret_kind,
	      uint64_t *ret_id, char *ret_path);

/* Get an object record by id.  -ENOENT if none. */
int meta_get_object(struct meta *m, uint64_t id, struct meta_obj *ret);

/*
 * Directory listing.  meta_readdir() fills a heap array of entries (kind,
 * id, name; attributes are not filled) that the caller frees with
 * meta_dirents_free().  -ENOENT if @dir does not exist.  An entry whose
 * name or value is malformed is left out (and logged): one bad entry
 * does not hide the others.
 */
struct meta_dirent {
	enum meta_kind kind;
	uint64_t id;
	char name[OBJFS_NAME_MAX + 1];
};
int meta_readdir(struct meta *m, uint64_t dir, struct meta_dirent **ret_ents, size_t *ret_n);
void meta_dirents_free(struct meta_dirent *ents);

/*
 * One page of the listing of @dir, with every entry's attributes, in one
 * round trip that keeps Redis busy for about a thousand entries at most:
 * start with *@cursor 0; each call sets it to where the next page starts,
 * 0 after the last page.  *@ret is a heap array of *@ret_n entries that
 * the caller frees with free().  A name may come twice across the pages
 * of one listing (Redis moves entries while a directory grows or
 * shrinks): the caller dedupes.  Bad names and values are left out and
 * logged, as by meta_readdir(); an entry whose attributes are damaged
 * (its record missing or corrupt, logged) comes with attr false.
 * Outputs are written only on success.  -ENOENT, -ENOTDIR, -EBADMSG, -EIO.
 */
struct meta_dirent_plus {
	char name[OBJFS_NAME_MAX + 1];
	struct meta_entry e; /* kind and id always; the rest if attr */
	bool attr;
};
int meta_readdir_page(struct meta *m, uint64_t dir, uint64_t *cursor, struct meta_dirent_plus **ret,
		      size_t *ret_n);

/* Create directory @name in @parent.  0 and *ret with the new directory,
 * -EEXIST, -ENOENT (@parent gone), -ENOTDIR. */
int meta_mkdir(struct meta *m, uint64_t parent, const char *name, int64_t mtime_ns,
	       struct meta_entry *ret);
/* meta_mkdir(), the directory owned by @attr (NULL: none recorded). */
int meta_mkdir_attr(struct meta *m, uint64_t parent, const char *name, int64_t mtime_ns,
		    const struct meta_attr *attr, struct meta_entry *ret);

/*
 * Create symbolic link @name in @parent to @target (1 to META_LINK_MAX
 * bytes, any but NUL: objfs never follows it, the kernel does), owned by
 * @attr (NULL: none recorded).  Entry "l<id>", and hash {P}:s:<id> with
 * its target.  0 and *@ret (kind META_LINK; obj.size the target's
 * length, obj.mtime_ns), -EEXIST, -ENOENT (@parent gone, or @target
 * empty), -ENAMETOOLONG, -ENOTDIR.
 */
int meta_symlink(struct meta *m, uint64_t parent, const char *name, const char *target,
		 int64_t mtime_ns, const struct meta_attr *attr, struct meta_entry *ret);
/*
 * Give file @id another name, @name in @parent (link(2)), and count its
 * names in its attributes (nlink), which take @base (the mount's
 * defaults) if it has none; every entry of the file shows the new count.
 * 0 and *@ret (may be NULL) as meta_lookup() gives the new name; -EPERM
 * for a directory or a symbolic link; -EMLINK past META_NAMES_MAX names;
 * -ENOENT, -EEXIST, -ENOTDIR.  Its
 * record keeps the name as "=<parent>/<name>"; unlink, rename and
 * replace of one name leave the others (meta_unlink() says 1), and the
 * object goes with the last.
 */
int meta_link(struct meta *m, uint64_t id, uint64_t parent, const char *name,
	      const struct meta_attr *base, struct meta_entry *ret);
/* The target of symbolic link @id into @buf (@len > META_LINK_MAX).
 * -ENOENT, -EBADMSG, -EIO. */
int meta_readlink(struct meta *m, uint64_t id, char *buf, size_t len);

/* What meta_setattr() changes */
#define META_SET_UID (1u << 0)
#define META_SET_GID (1u << 1)
#define META_SET_MODE (1u << 2)
#define META_SET_ATIME (1u << 3)
#define META_SET_MTIME (1u << 4)
/*
 * Change the fields @what of directory or object @id's attributes to
 * @a's (and its mtime to @mtime_ns with META_SET_MTIME), atomically: the
 * rest stay as Redis has them, or as @base (the mount's defaults) for an
 * entry that has none; the ctime becomes now.  A file's entry changes
 * with its record.  *@ret (may be NULL) gets what meta_getattr() would
 * now.  Publishes an invalidation ("attr"), so that every node reads
 * them again.  -ENOENT, -EINVAL, -EBADMSG, -EIO.  The caller checks who
 * may (the kernel does, with default_permissions).
 */
int meta_setattr(struct meta *m, uint64_t id, unsigned what, const struct meta_attr *a,
		 int64_t mtime_ns, const struct meta_attr *base, struct meta_entry *ret);

/* Remove empty directory @name.  -ENOENT, -ENOTDIR (a file),
 * -ENOTEMPTY.  *ret_id (may be NULL) gets the removed directory's id. */
int meta_rmdir(struct meta *m, uint64_t parent, const char *name, uint64_t *ret_id);

/* A random id in [META_ID_MIN, META_ID_MAX] (no Redis call).  0 or the
 * errno of getrandom(). */
int meta_draw_id(uint64_t *ret_id);
/* A fresh id for an object about to be written: drawn at random and
 * checked unused in Redis (no directory, record, holder set or
 * tombstone has it).  Ids are checked ID_BLOCK at a time, in one round
 * trip, and handed out for up to 10 s after their check, so most calls
 * make none.  -EAGAIN if ID_TRIES blocks in a row were all in use. */
int meta_alloc_id(struct meta *m, uint64_t *ret_id);

/*
 * Publish a sealed object: write its record (obj->id must come from
 * meta_alloc_id()), add this node as a holder, and link @name in @parent
 * to it, atomically.  -ENOTUNIQ if the id is another object's (its record
 * describes other bytes, or it was deleted).  If @name exists: a directory gives -EISDIR; a file
 * gives -EEXIST unless @replace, in which case the old object's record and
 * holder set are deleted and *ret_replaced gets its id (else 0).
 * -ENOENT if @parent is gone.  On success *ret_path (may be NULL; size
 * OBJFS_PATH_MAX) gets the object's full path, for the store's catalog.
 * Publishes an invalidation.
 */
#define META_PUBLISH_REPLACE (1u << 0) /* replace a file of that name */
#define META_PUBLISH_SELF (1u << 1)    /* the name is this node's kernel's already */
int meta_publish(struct meta *m, uint64_t parent, const char *name, const struct meta_obj *obj,
		 unsigned flags, uint64_t *ret_replaced, char *ret_path);
/* meta_publish(), and the object's block sums @bsum (text, see bsum.h;
 * NULL: none) in its record, field "bsum".  -EINVAL if @bsum is not
 * such text. */
int meta_publish_sums(struct meta *m, uint64_t parent, const char *name, const struct meta_obj *obj,
		      const char *bsum, unsigned flags, uint64_t *ret_replaced, char *ret_path);
/* meta_publish_sums(), and the object's owner, mode and times @attr
 * (NULL or not set: none recorded; ctime and atime are usually its
 * mtime) in its record and its entry.  -EINVAL for a bad @attr. */
int meta_publish_attr(struct meta *m, uint64_t parent, const char *name, const struct meta_obj *obj,
		      const char *bsum, const struct meta_attr *attr, unsigned flags,
		      uint64_t *ret_replaced, char *ret_path);

/*
 * Unlink file @name: remove the entry, the object record and its holder
 * set (a symbolic link: its hash).  *ret_id gets the object id.  1 (not
 * 0) if the file has other names (hard links): only this one went, and
 * the object lives on.  -ENOENT, -EISDIR.
 */
int meta_unlink(struct meta *m, uint64_t parent, const char *name, uint64_t *ret_id);

/* rename(2) flags understood by meta_rename() */
#define META_RENAME_NOREPLACE (1u << 0)
#define META_RENAME_EXCHANGE (1u << 1)

/*
 * Rename @oparent/@oname to @nparent/@nname atomically, with POSIX
 * semantics: a file may replace a file only if @replace_files is set
 * (otherwise -EEXIST); a directory may replace an empty directory
 * (-ENOTEMPTY otherwise); file over directory -EISDIR, directory over file
 * -ENOTDIR; moving a directory below itself -EINVAL; renaming onto itself
 * is a no-op.  With META_RENAME_NOREPLACE an existing target gives
 * -EEXIST; with META_RENAME_EXCHANGE both must exist and are swapped.
 * *ret_replaced (may be NULL) gets the id of a replaced file or directory
 * (0 if none); a replaced file's record and holders are deleted.
 * Publishes an invalidation.
 */
int meta_rename(struct meta *m, uint64_t oparent, const char *oname, uint64_t nparent,
		const char *nname, unsigned flags, bool replace_files, uint64_t *ret_replaced);

/*
 * Holders of object @id, as a heap array of @*ret_n node names that the
 * caller frees with free() (one allocation).  An object with no holders
 * gives 0 and an empty array.
 */
int meta_holders(struct meta *m, uint64_t id, char (**ret_nodes)[OBJFS_NODE_MAX], size_t *ret_n);

/* Add or remove this node as a holder of @id.  Adding gives -ENOENT (and
 * changes nothing) if the object has no record: it was deleted. */
int meta_add_holder(struct meta *m, uint64_t id);
/* The same, only if the record's size and checksum are @obj's: -ENOTUNIQ
 * (and nothing changes) if the record describes other bytes. */
int meta_add_holder_of(struct meta *m, const struct meta_obj *obj);

/* What Redis says of one of a batch of objects (meta_sync_holders()). */
enum meta_sync_state {
	META_SYNC_UNKNOWN, /* no record, no tombstone */
	META_SYNC_LIVE,	   /* its record describes these bytes: a holder now */
	META_SYNC_OTHER,   /* its record describes other bytes (the id was reused) */
	META_SYNC_DELETED, /* a tombstone: it was deleted */
};
struct meta_sync {
	enum meta_sync_state state;
	char *path; /* LIVE: where it is linked now; NULL if unknown */
	bool sole;  /* LIVE: this node is its only holder */
};
#define META_SYNC_BATCH 1000
/*
 * For each of @n objects (at most META_SYNC_BATCH) this node holds: add
 * the node as a holder of those whose record describes the same bytes
 * (size and checksum), and say of each what Redis knows, in @ret (free
 * the paths with meta_sync_release()).  One script call for the batch.
 * -EIO, -EBADMSG (a corrupt answer or record on the way: the caller may
 * check these objects one at a time), -EINVAL, -ENOMEM.
 */
int meta_sync_holders(struct meta *m, const struct meta_obj *objs, size_t n, struct meta_sync *ret);
void meta_sync_release(struct meta_sync *v, size_t n);

/* What became of one of a batch registered again (meta_reregister_batch()). */
struct meta_rereg {
	/* 0 or 1 as meta_reregister() returns, or its negative errno
	 * (-ENOTUNIQ: the id is another object's; -EAGAIN, -EEXIST,
	 * -EBADMSG, -EINVAL...): that one was not registered, and may be
	 * with meta_reregister() */
	int r;
	char *path; /* r >= 0: as meta_reregister()'s @ret_path; NULL for "" */
};
/*
 * meta_reregister() for each of @n objects (at most META_SYNC_BATCH) under
 * @paths, in one script call; each one's outcome in @ret (free the paths
 * with meta_rereg_release()).  0, or a negative errno for the whole batch
 * (nothing in @ret then): -EINVAL for bad arguments, -EIO if Redis is
 * away, -EBADMSG for a malformed answer.
 */
int meta_reregister_batch(struct meta *m, const struct meta_obj *objs, const char *const *paths,
			  size_t n, struct meta_rereg *ret);
void meta_rereg_release(struct meta_rereg *v, size_t n);
/* The same, and drop the holders whose node card is gone (stale entries),
 * counting them in *ret_stale (may be NULL). */
int meta_add_holder_prune(struct meta *m, const struct meta_obj *obj, unsigned *ret_stale);
/* The same, and record @bsum (text, see bsum.h; NULL: none) as the
 * object's block sums if its record has none yet (an object sealed
 * before block sums: the first node to fetch it sums its verified copy). */
int meta_add_holder_sums(struct meta *m, const struct meta_obj *obj, const char *bsum,
			 unsigned *ret_stale);
/*
 * A copy just fetched, registered in one round trip: as
 * meta_add_holder_sums() (@bsum may be NULL), and the object's full path
 * now into @ret_path (OBJFS_PATH_MAX bytes): that of @name in directory
 * @parent if that entry names the object (the name its first open came
 * by; @name NULL or "": none), else where its record says it is linked
 * (meta_object_path()), else "".  Errors as meta_add_holder_sums().
 */
int meta_add_holder_at(struct meta *m, const struct meta_obj *obj, const char *bsum,
		       uint64_t parent, const char *name, unsigned *ret_stale, char *ret_path);
int meta_del_holder(struct meta *m, uint64_t id);

/* ---- recovery ---- */

/* The namespace epoch token (creating it if missing), into @buf. */
int meta_epoch(struct meta *m, char *buf, size_t len);

/*
 * Re-register a sealed object found in the local store after Redis lost
 * its data.  If the record for obj->id exists, only adds this node as a
 * holder and returns 0 (-ENOTUNIQ if the record describes other bytes:
 * the local copy is not that object).  Otherwise recreates the record and
 * the holder, makes the directories along @path (absolute, "/a/b/name") as
 * needed, and links the name; if the name (or a directory on the way) is
 * taken by another entry, links it as /lost+found/<name>.objfs-<id>
 * instead and returns 1.  *ret_path (may be NULL; OBJFS_PATH_MAX bytes)
 * gets the path it has now ("" if the record existed).  -EINVAL for a
 * malformed path.
 */
int meta_reregister(struct meta *m, const struct meta_obj *obj, const char *path, char *ret_path);

/* The full path of object @id now, into @ret_path (OBJFS_PATH_MAX
 * bytes): its record says where it was published and renamed to.  ""
 * if the record does not say (older records) or that name no longer
 * links to @id. */
int meta_object_path(struct meta *m, uint64_t id, char *ret_path);

/* Does the record of object @id exist?  1, 0, or negative errno. */
int meta_object_exists(struct meta *m, uint64_t id);

/* Was object @id deleted (does its tombstone exist)?  1, 0, or negative
 * errno.  An object with neither record nor tombstone is unknown to Redis. */
int meta_object_deleted(struct meta *m, uint64_t id);

/* ---- node cards ---- */

struct meta_card {
	char host[256];
	char listen[128]; /* transport address, "HOST:PORT" */
	int pid;
	char instance[40];
	int64_t started_ns;
	uint64_t capacity;
	uint64_t used;
	/* transports served, comma-separated ("tcp", "tcp,rdma"): "" or
	 * 1..63 of [A-Za-z0-9,._-] */
	char caps[64];
	/* RDMA address, "HOST:PORT" or "[IPV6]:PORT" (see
	 * meta_hostport_valid()), or "" if the node serves no RDMA */
	char rdma[128];
};

/*
 * Is @s a transport address a card may carry: HOST:PORT, with HOST a
 * name or IPv4 address ([A-Za-z0-9._-]) or an IPv6 address in brackets
 * ("[fe80::1%eth0]"), and PORT 1..65535; at most 127 bytes.
 */
bool meta_hostport_valid(const char *s);

/*
 * Claim this node's name and write its card with a TTL of @ttl_s.  If a
 * live card with another instance token holds the name, -EADDRINUSE and
 * *ret_other gets that card (so the caller can say who).
 */
int meta_node_claim(struct meta *m, const struct meta_card *card, unsigned ttl_s,
		    struct meta_card *ret_other);
/* Refresh this node's card (same instance token) and its TTL. */
int meta_node_heartbeat(struct meta *m, const struct meta_card *card, unsigned ttl_s);
/* Delete this node's card if it still carries @instance (clean shutdown). */
int meta_node_release(struct meta *m, const char *instance);

/* ---- the cluster's nodes (meta_nodes.c, meta_subscriber.c) ---- */

/* A holder of an object that a fetch can ask. */
struct meta_holder {
	char node[OBJFS_NODE_MAX];
	char addr[128]; /* the card's "listen" */
	char caps[64];	/* the card's "caps" */
	char rdma[128]; /* the card's "rdma" ("" if none, or malformed) */
};

/*
 * Locate object @id for a fetch, in one round trip: its record and the
 * holders that are live (their card exists), this node left out.
 * Holders whose card has expired are removed from the holder set (their
 * entries are stale) and counted in *ret_stale (may be NULL).  A holder
 * whose card or name is malformed is skipped with a warning, and left in
 * the set.  *ret_holders is one heap allocation that the caller frees with
 * free(), possibly with *ret_n == 0; holders come in no particular order.
 * -ENOENT if the object has no record, -EBADMSG if the record is
 * malformed, -EIO.
 */
int meta_locate(struct meta *m, uint64_t id, struct meta_obj *ret_obj,
		struct meta_holder **ret_holders, size_t *ret_n, unsigned *ret_stale);
/* meta_locate(), and the record's block sums into *@ret_bsum: text (see
 * bsum.h, checked only for its characters and length; the caller checks
 * it against the size), caller frees; NULL if the record has none.  A
 * field that is not such text is logged as corrupt and taken as none. */
int meta_locate_sums(struct meta *m, uint64_t id, struct meta_obj *ret_obj,
		     struct meta_holder **ret_holders, size_t *ret_n, unsigned *ret_stale,
		     char **ret_bsum);

/*
 * What a fan-out fetch learns in one round trip (meta_locate_fan()):
 * the record, its holders (sealed copies), a sample of the other nodes
 * fetching it now (partial holders: they serve the blocks they have
 * checked), and its block sums.  Release with meta_locate_release().
 */
struct meta_locate {
	struct meta_obj obj;
	struct meta_holder *holders; /* live holders, this node left out */
	size_t n;
	struct meta_holder *partials; /* nodes fetching it, a sample */
	size_t np;
	unsigned stale; /* entries of dead or lapsed nodes removed */
	char *bsum;	/* block sums as text (see meta_locate_sums()), or NULL */
};
#define META_LOCATE_SUMS (1u << 0) /* the block sums too */
#define META_FAN_SAMPLE_MAX 64
/*
 * meta_locate_sums(), and up to @sample (at most META_FAN_SAMPLE_MAX) of
 * the nodes fetching the object; with @advertise_ms, this node becomes
 * one of them for that long (on Redis's clock), if the object has block
 * sums: a field "~p:<node>" of its extras x:<id>, removed when this node
 * registers as a holder (meta_add_holder_prune() and friends) or leaves
 * (meta_fan_leave()), by any locate once it lapsed or its node's card
 * is gone, and by the next heartbeat of any node once it lapsed
 * (meta_node_heartbeat(): a crashed fetcher's entry, which no locate may
 * meet again).  Such entries never count as copies.  Errors as
 * meta_locate(); on success *@ret is this node's to release.
 */
int meta_locate_fan(struct meta *m, uint64_t id, unsigned flags, unsigned advertise_ms,
		    unsigned sample, struct meta_locate *ret);
void meta_locate_release(struct meta_locate *l);
/* This node no longer fetches @id: its entry goes (0 even if the record
 * is gone).  -EIO if Redis is unreachable. */
int meta_fan_leave(struct meta *m, uint64_t id);

/*
 * Drop this node's copy of @id from the holders, atomically, only if at
 * least one other holder with a live card (one that exists and names a
 * "listen" address) remains.  1: removed, or this node was not a holder
 * (the caller may now free its copy); 0: no other holder is recorded
 * (the only copy in the cluster), nothing changed; 2: other holders are
 * recorded but none is live (one restarting, say), nothing changed;
 * -ENOENT: no such object record.
 */
int meta_release_replica(struct meta *m, uint64_t id);

/* A node of the cluster. */
struct meta_member {
	char node[OBJFS_NODE_MAX];
	bool live;	       /* its card exists */
	int64_t ttl_ms;	       /* remaining card TTL; -1 if not live (or if
				* the card has no expiry, which the calls
				* here never leave) */
	struct meta_card card; /* valid only if live */
};

/*
 * Every node that ever registered (P:nodes), sorted by name, with its card
 * if live, in one round trip.  One heap array that the caller frees with
 * free(), possibly with *ret_n == 0.  A member whose name or card is
 * malformed is skipped with a warning.  -EFBIG for more than 65536
 * members, -EIO.
 */
int meta_members(struct meta *m, struct meta_member **ret, size_t *ret_n);

/* One invalidation, as published by the calls that change the namespace. */
struct meta_inval {
	/* the node whose kernel made the change (it knows it already), or
	 * "" (a change the kernel of no node made: recovery, conflicts) */
	char origin[OBJFS_NODE_MAX];
	/* "publish", "replace", "unlink", "rename-from", "rename-to",
	 * "mkdir", "rmdir" (any 1..15 of [a-z-] is passed on) */
	char kind[16];
	uint64_t parent;	       /* the directory */
	char name[OBJFS_NAME_MAX + 1]; /* the name in it */
	uint64_t id;		       /* the file or directory the name was linked to */
};

/*
 * Called by the subscriber thread for each invalidation, in the order
 * Redis delivers them.  @ev is NULL after the subscription was
 * (re)established following a gap (Redis down, connection lost, or the
 * first attempt of meta_subscribe() failed): messages may have been
 * missed, so the caller should revalidate everything it caches.  It may
 * call any meta_*() function but meta_subscribe(), meta_unsubscribe() and
 * meta_free(); a slow callback delays the following messages and
 * meta_unsubscribe().
 */
typedef void (*meta_inval_fn)(void *arg, const struct meta_inval *ev);

/*
 * Start a thread with its own Redis connection (not from the pool)
 * subscribed to the invalidation channel, and call @fn(@arg, ...) for each
 * message; malformed messages are skipped with a warning.  The thread
 * runs with every signal blocked.  On a lost connection it reconnects at
 * once, then with the pool's backoff (100 ms doubling to 5 s); it sends a
 * PING after 5 s without traffic, so a silently dead connection is noticed
 * within about 5 s plus the timeout.  Returns after the first attempt to
 * subscribe (at once if Redis is up or refuses; against a hung Redis, up
 * to a second to connect plus the timeout): if that one succeeded, nothing
 * published afterwards is missed without a NULL event; if it failed, the
 * thread keeps trying and reports the gap once it succeeds.  0, -EALREADY if
 * already subscribed, -EINVAL, -ENOMEM, or an errno from pipe(2) or
 * pthread_create().
 */
int meta_subscribe(struct meta *m, meta_inval_fn fn, void *arg);

/* Stop the thread and join it (within about a second; at once unless it is
 * connecting or in the callback).  Safe if not subscribed; meta_free()
 * calls it. */
void meta_unsubscribe(struct meta *m);

#endif
