/*
 * config: the command line of objfsd (and so of mount.objfs):
 *
 *   objfsd SPEC MOUNTPOINT [-o OPT[,OPT...]]... [-f] [-d]
 *
 * Every -o counts, as with mount(8); an option given twice (in one -o or
 * two) must have the same value both times.
 *
 * SPEC is redis://[:password@]host:port[/db],
 * redis-sentinel://[:password@]host:port[,host:port...]/master[/db],
 * redis-cluster://[:password@]host:port[,host:port...] (meta.h has the
 * details), unix:/path/to/redis.sock or "local".  Parsing checks everything it can without touching
 * the system (no Redis, no filesystem), so a bad option fails before anything starts.
 */
#ifndef OBJFS_CONFIG_H
#define OBJFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

enum spec_kind {
	SPEC_REDIS, /* redis://, redis-sentinel://, redis-cluster:// */
	SPEC_UNIX,  /* unix:/path */
	SPEC_LOCAL, /* a private redis-server started by the daemon */
};

#define CONFIG_DEFAULT_CAPACITY (1ULL << 30)
#define CONFIG_DEFAULT_PORT 7419
#define CONFIG_MAP_CACHE_MAX 1048576	    /* map_cache=N, at most */
#define CONFIG_RDMA_REGS_MAX 65536	    /* rdma_regs=N, at most */
#define CONFIG_PACK_MAX_DEFAULT (32u << 10) /* pack_max=SIZE (at most rdma_eager_max) */
#define CONFIG_PACK_MIN 64		    /* pack_max=SIZE, at least (or 0) */

struct config {
	enum spec_kind spec_kind;
	char *spec;	  /* SPEC as given */
	char *redis_url;  /* URL for meta; NULL for SPEC_LOCAL until started */
	char *mountpoint; /* as given (resolved by the daemon) */

	char node[OBJFS_NODE_MAX]; /* node=, default: the hostname */
	char *listen_host;	   /* listen=HOST:PORT */
	uint16_t listen_port;	   /* 0: any free port */
	char *advertise;	   /* advertise=HOST: the address peers reach us at */
	unsigned io_timeout_ms;	   /* io_timeout=MS: a peer silent this long is dead (0: default) */
	uint64_t serve_bwlimit;	   /* serve_bwlimit=SIZE: bytes/s served (0: no limit) */
	/* serve_slots=N: fan-out GETs sent at once; 0 unset (the default),
	 * TRANSPORT_SLOTS_NONE for serve_slots=0 (no limit) */
	unsigned serve_slots;
	const char *transport;	 /* transport=auto|tcp|rdma (a constant; default "auto") */
	uint32_t rdma_eager_max; /* rdma_eager_max=SIZE (0: the transport's default) */
	uint32_t rdma_poll_us;	 /* rdma_poll=USEC (0: completion events only) */
	unsigned map_cache;	 /* map_cache=N: idle object mappings kept (0: default) */
	unsigned rdma_regs;	 /* rdma_regs=N: objects kept registered (0: default) */
	/* pack_max=SIZE: objects up to this size are packed into shared
	 * chunks (0: none); the default after config_finish() */
	uint32_t pack_max;
	bool pack_max_set;
	char *store_dir;    /* store=, default /dev/shm/objfs-<prefix>-<node> */
	bool store_default; /* store_dir is that default (config_finish()) */
	uint64_t capacity;  /* capacity=, default CONFIG_DEFAULT_CAPACITY */
	char *prefix;	    /* prefix=, default "objfs" */
	char *secret_file;  /* secret_file= */
	char *rundir;	    /* rundir=, default /run/objfs/<prefix>-<node> */
	char *logfile;	    /* log=, default <rundir>/objfsd.log when in the background */

	bool allow_overwrite;
	bool allow_other;
	bool foreground;
	bool debug;
	bool read_only;	      /* ro */
	bool prefault;	      /* prefault (the default after config_finish()) */
	bool no_prefault;     /* noprefault: do not fill the store's pool at mount */
	bool restart;	      /* restart: wait for a previous instance to let go */
	bool check_only;      /* --check: validate the command line, do nothing */
	bool passthrough_off; /* passthrough=off (default: auto) */
	/* test_corrupt_serve: TESTS ONLY, left out of --help and of the
	 * README's table of options: this node flips a byte of every range
	 * it serves of an object it is still fetching (fan-out), on the wire
	 * only (node_source_test_corrupt()) */
	bool test_corrupt_serve;
	bool nosuid, nodev, noexec, noatime;
	/* uid=, gid=, umask=: the owner and mode shown by entries that have
	 * none (written before owners existed); default the daemon's uid and
	 * gid, and 022 */
	bool uid_set, gid_set, umask_set;
	uint32_t uid, gid, umask;

	/* the options given so far, "NAME=VALUE" or "NAME": one may come
	 * again only with the same value */
	char **given;
	size_t ngiven;
};

/*
 * Parse argv into @c (which the caller zero-initializes).  Returns 0, or
 * -EINVAL with a message naming the bad argument or option in @err.
 * "--help"/"-h" returns -ECANCELED (the caller prints usage).
 */
int config_parse_argv(struct config *c, int argc, char **argv, char *err, size_t errlen);

/* Parse one comma-separated -o list into @c, on top of the lists parsed
 * before.  Same errors; an option given before with another value is
 * -EINVAL too. */
int config_parse_options(struct config *c, const char *opts, char *err, size_t errlen);

/* Fill defaults for everything not given (node from the hostname, store
 * and run directories).  -EINVAL with @err if a default cannot be made. */
int config_finish(struct config *c, char *err, size_t errlen);

void config_release(struct config *c);

/* --help's list of the -o options, from the table config_parse_options()
 * parses with: one entry per option (or group), its default, and the
 * options mount(8) passes that are ignored */
void config_usage_options(FILE *f);

/* @spec for a message or the log, with what comes before its last '@'
 * (the password) shown as "***"; @buf, or @spec itself if it has none */
const char *config_spec_shown(const char *spec, char *buf, size_t len);

#endif
