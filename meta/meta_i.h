/*
 * meta_i.h: what meta.c and meta_scripts.c share.  Not for other modules.
 *
 * Every script is called as EVALSHA <sha> 0 with this ARGV header:
 *
 *   ARGV[1]  key prefix P
 *   ARGV[2]  a fresh random token (32 hex digits), the epoch to set if the
 *            namespace has to be created again
 *   ARGV[3]  now, ns since the epoch (mtime of directories it touches)
 *
 * and its own arguments from ARGV[4] on (documented per script in
 * meta_scripts.c).  A script fails with an error reply that names an errno
 * ("ENOENT", which Redis 7 sends as "ERR ENOENT"); reply_errno() in meta.c
 * maps it back.
 */
#ifndef OBJFS_META_I_H
#define OBJFS_META_I_H

enum meta_script {
	MS_EPOCH,
	MS_ALLOC,
	MS_LOOKUP,
	MS_GETATTR,
	MS_READDIR,
	MS_MKDIR,
	MS_RMDIR,
	MS_PUBLISH,
	MS_UNLINK,
	MS_RENAME,
	MS_REREGISTER,
	MS_CLAIM,
	MS_HEARTBEAT,
	MS_RELEASE,
	META_NSCRIPTS
};

/* Lua source of each script, indexed by enum meta_script. */
extern const char *const meta_script_src[META_NSCRIPTS];
/* Short names, for debug messages. */
extern const char *const meta_script_name[META_NSCRIPTS];

/* Publish walks at most this many "/parent" links to build a path (a
 * deeper one could not fit OBJFS_PATH_MAX anyway; it returns ""). */
#define META_PATH_DEPTH 2048
/* Rename's cycle check walks at most this many, then gives ELOOP. */
#define META_WALK_MAX 16384

#endif
