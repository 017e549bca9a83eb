/*
 * objfsd: one daemon per node and mount.
 *
 * main() parses the command line, goes to the background (the parent
 * waits on a pipe and exits only once the mount is ready, so mount(8)
 * returns with a usable filesystem), detaches a dead objfs mount left on
 * the mount point by a daemon that crashed, starts the private Redis for
 * SPEC "local", connects to Redis, opens the store, claims the node name,
 * reconciles, mounts, tells a service manager it is ready (NOTIFY_SOCKET),
 * and serves until unmounted.  A maintenance thread refreshes the node
 * card and runs fs_tick() and node_tick().
 *
 * After a crash the next mount needs no manual step: the dead mount is
 * detached (mountpoint.c), the dead daemon's node card is taken over at
 * once when its host is this host and its process is gone (a zombie
 * counts as gone; meta_node_claim()), and the store adopts its catalog.
 * With -o restart, what a previous instance may still hold (the store's
 * lock; a node card this host cannot judge, of another host) is waited
 * for, up to the card's TTL, instead of failing at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "endpoint.h"
#include "fs.h"
#include "local_redis.h"
#include "log.h"
#include "memlimit.h"
#include "meta.h"
#include "mountpoint.h"
#include "node.h"
#include "store.h"
#include "transport.h"
#include "util.h"

#define HEARTBEAT_S 5
#define CARD_TTL_S 15
/* With -o restart, how long a previous instance of this node may take to
 * let go: its card lives CARD_TTL_S after its last heartbeat. */
#define RESTART_WAIT_S (CARD_TTL_S + 2)
#define RESTART_POLL_US 250000
/* What prefault leaves free of the memory it may take: of the host's
 * MemAvailable, a 32nd of MemTotal and at least PREFAULT_MARGIN_HOST;
 * of a cgroup's limit, an 8th and at least PREFAULT_MARGIN_CG (the
 * daemon itself, and what the kernel charges it besides the store) */
#define PREFAULT_MARGIN_HOST (256ULL << 20)
#define PREFAULT_MARGIN_CG (32ULL << 20)

static const char usage[] =
    "usage: objfsd SPEC MOUNTPOINT [-o OPTION[,OPTION...]] [-f] [-d]\n"
    "\n"
    "Mount an objfs node: the cluster's immutable objects as read-only files.\n"
    "\n"
    "SPEC (where the Redis location service is):\n"
    "  redis://[:PASSWORD@]HOST:PORT[/DB]\n"
    "  redis-sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]\n"
    "  redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...]\n"
    "  unix:/path/to/redis.sock\n"
    "  local            start a private redis-server for this node alone\n"
    "\n"
    "Options (-o, comma-separated; every -o counts, and an option given twice\n"
    "must have the same value):\n";

static const char usage_tail[] =
    "  --check          check the command line and exit\n"
    "\n"
    "A dead objfs mount on MOUNTPOINT (its daemon was killed: ENOTCONN) is\n"
    "detached and mounted again; a live one is refused.  With NOTIFY_SOCKET\n"
    "set (systemd Type=notify, with -f), READY=1 is sent once mounted.\n"
    "\n"
    "Unmount with 'umount MOUNTPOINT' or 'fusermount3 -u MOUNTPOINT'.\n";

struct daemon {
	struct config cfg;
	bool capacity_default; /* no capacity= given */
	char mountpoint[PATH_MAX];
	struct local_redis *lr;
	struct meta *meta;
	struct store *store;
	struct fs *fs;
	struct node *nd; /* an object's life on this node, fetches, eviction */
	struct transport *transport;
	struct node_source *src; /* what the transport serves from */
	struct transport_source source;
	struct meta_card card;
	int ready_fd; /* pipe to the waiting parent, or -1 */
	/* the service manager's socket (NOTIFY_SOCKET), or "" */
	char notify_socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int64_t restart_deadline; /* util_mono_ns(): with restart, wait until then */
	FILE *log;

	pthread_t ticker;
	bool ticker_started;
	pthread_t prefaulter;
	bool prefault_started;
	atomic_bool prefault_stop;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stopping; /* lock */
	bool kicked;   /* lock: the ticker should not wait this round */
};

static bool log_to_file;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A startup error: to the log, and to the user's terminal. */
static void fail(const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	if (log_to_file)
		fprintf(stderr, "objfsd: %s\n", msg);
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	char *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * The store directory.  The default one (/dev/shm/objfs-PREFIX-NODE) is
 * made with its parents; the one store= names, without: a typo in the
 * path of an existing store must fail, not start an empty store elsewhere.
 */
static int make_store_dir(struct daemon *d)
{
	const char *dir = d->cfg.store_dir;
	char parent[PATH_MAX], *slash;
	int r = 0;

	if (d->cfg.store_default)
		r = mkdir_p(dir, 0700);
	else if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		r = -errno;
	if (r == -ENOENT && !d->cfg.store_default) {
		snprintf(parent, sizeof(parent), "%s", dir);
		for (slash = parent + strlen(parent) - 1; slash > parent && *slash == '/'; slash--)
			*slash = '\0';
		slash = strrchr(parent, '/');
		if (slash)
			slash[slash == parent] = '\0';
		fail("cannot create store directory %s: its parent %s does not exist "
		     "(store= creates the last component only: check the path, or create %s first)",
		     dir, parent, parent);
	} else if (r < 0) {
		fail("cannot create store directory %s: %s", dir, strerror(-r));
	}
	return r;
}

static void random_hex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[32];
	FILE *f = fopen("/dev/urandom", "re");
	size_t i;

	if (nbytes > sizeof(raw))
		nbytes = sizeof(raw);
	if (!f || fread(raw, 1, nbytes, f) != nbytes) {
		uint64_t x = (uint64_t)util_now_ns() ^ ((uint64_t)getpid() << 32);

		for (i = 0; i < nbytes; i++, x = x * 6364136223846793005ULL + 1)
			raw[i] = (unsigned char)(x >> 56);
	}
	if (f)
		fclose(f);
	for (i = 0; i < nbytes; i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[2 * nbytes] = '\0';
}

/* Fork; the parent waits until the child reports the mount ready. */
static int daemonize(struct daemon *d)
{
	int fds[2];
	pid_t pid;
	char c;

	if (pipe(fds) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(fds[1]);
		if (read(fds[0], &c, 1) == 1 && c == 'R')
			_exit(0);
		_exit(1);
	}
	close(fds[0]);
	d->ready_fd = fds[1];
	setsid();
	return 0;
}

/* Take NOTIFY_SOCKET out of the environment, so that no child sees it
 * (redis-server would tell the service manager it is ready, too). */
static void notify_take(struct daemon *d)
{
	const char *s = getenv("NOTIFY_SOCKET");

	if (s && (s[0] == '/' || s[0] == '@') && strlen(s) < sizeof(d->notify_socket))
		memcpy(d->notify_socket, s, strlen(s) + 1);
	else if (s)
		fprintf(stderr, "objfsd: ignoring NOTIFY_SOCKET '%s': not a unix socket path\n", s);
	unsetenv("NOTIFY_SOCKET");
}

/* Tell the service manager @msg, as sd_notify(3) does; nothing without
 * NOTIFY_SOCKET. */
static void notify(struct daemon *d, const char *msg)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(d->notify_socket);
	int fd;

	if (!len)
		return;
	memcpy(sa.sun_path, d->notify_socket, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
			     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
		log_warn("cannot tell the service manager '%s' on %s: %s", msg, d->notify_socket,
			 strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* With restart and time left: say once why we wait, wait a little, true. */
static bool restart_wait(struct daemon *d, bool *said, const char *why)
{
	if (!d->cfg.restart || util_mono_ns() >= d->restart_deadline)
		return false;
	if (!*said)
		log_info("%s; waiting up to %d s for it to let go (restart)", why, RESTART_WAIT_S);
	*said = true;
	usleep(RESTART_POLL_US);
	return true;
}

static void report_ready(struct daemon *d)
{
	int fd;

	notify(d, "READY=1");

	if (d->ready_fd < 0)
		return;
	util_write_full(d->ready_fd, "R", 1);
	close(d->ready_fd);
	d->ready_fd = -1;
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

/*
 * How long a peer's fetch may pause between two GETs of an object that
 * was unlinked here and still get the rest (node_source.c): ranges
 * follow each other at once unless the peer's workers are busy with other
 * fetches, and a peer silent for io_timeout is dead anyway.
 */
static unsigned serve_lease_ms(const struct config *c)
{
	unsigned io = c->io_timeout_ms ? c->io_timeout_ms : TRANSPORT_DEFAULT_TIMEOUT_MS;

	return io > NODE_LEASE_MS_DEFAULT / 4 ? 4 * io : NODE_LEASE_MS_DEFAULT;
}

static void fill_card(struct daemon *d)
{
	struct store_stats ss;

	store_stats(d->store, &ss);
	d->card.capacity = ss.capacity;
	d->card.used = ss.used;
}

/* the node's wake_tick hook: a heartbeat, fs_tick() and node_tick() now
 * (the card first: after Redis lost its data, other nodes need it to
 * fetch from us) */
static void wake_ticker(void *arg)
{
	struct daemon *d = arg;

	pthread_mutex_lock(&d->lock);
	d->kicked = true;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
}

static void *ticker_main(void *arg)
{
	struct daemon *d = arg;
	bool was_up = true;

	pthread_mutex_lock(&d->lock);
	while (!d->stopping) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += HEARTBEAT_S;
		if (!d->kicked)
			pthread_cond_timedwait(&d->wake, &d->lock, &until);
		d->kicked = false;
		if (d->stopping)
			break;
		pthread_mutex_unlock(&d->lock);

		local_redis_check(d->lr);
		/* what rate limits held back, reported though no line of
		 * its kind comes again */
		log_ratelimit_flush_all();
		/* serving leases lapse: a peer that died mid-fetch keeps an
		 * unlinked object's pages here lease_ms and a heartbeat at most */
		node_source_expire(d->src);
		fill_card(d);
		if (meta_node_heartbeat(d->meta, &d->card, CARD_TTL_S) == 0) {
			if (!was_up) {
				log_info("Redis at %s is reachable again", meta_url(d->meta));
				/* our card may have expired meanwhile, and other
				 * nodes then dropped us as a holder: say again
				 * what we hold */
				if (node_reconcile(d->nd, NULL) < 0)
					log_warn("re-registering this node's objects failed; "
						 "retrying on the next heartbeat");
			}
			was_up = true;
			fs_tick(d->fs);
			node_tick(d->nd);
		} else if (was_up) {
			char err[256];

			meta_last_error(d->meta, err, sizeof(err));
			log_warn("Redis at %s is unreachable (%s); local objects stay readable, "
				 "changes fail with EIO until it is back",
				 meta_url(d->meta), err);
			was_up = false;
		}
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static uint64_t sub_or_0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* What prefault may take now (store_prefault_limit), and why so little. */
struct prefault_room {
	struct memlimit mem; /* the last reading */
	bool read;	     /* it could be read */
	bool by_cgroup;	     /* mem.tightest left less than the host */
	uint64_t margin;     /* what is left free of the one that limits */
};

static uint64_t prefault_room(void *ctx)
{
	struct prefault_room *p = ctx;
	const struct memlimit_cg *cg = &p->mem.tightest;
	uint64_t host, in_cg = UINT64_MAX, mhost, mcg = 0;

	p->read = memlimit_read(&p->mem) == 0;
	if (!p->read)
		return 0; /* in doubt, no more */
	mhost = p->mem.total / 32 > PREFAULT_MARGIN_HOST ? p->mem.total / 32 : PREFAULT_MARGIN_HOST;
	host = sub_or_0(p->mem.available, mhost);
	if (cg->limit != MEMLIMIT_NONE) {
		mcg = cg->limit / 8 > PREFAULT_MARGIN_CG ? cg->limit / 8 : PREFAULT_MARGIN_CG;
		in_cg = sub_or_0(sub_or_0(cg->limit, cg->usage), mcg);
	}
	p->by_cgroup = in_cg < host;
	p->margin = p->by_cgroup ? mcg : mhost;
	return p->by_cgroup ? in_cg : host;
}

/* Why a prefault stopped short, into @buf. */
static void prefault_why(const struct prefault_room *p, const struct store_prefault_report *rep,
			 char *buf, size_t len)
{
	const struct memlimit_cg *cg = &p->mem.tightest;
	char a[32], b[32], m[32];

	switch (rep->end) {
	case STORE_PREFAULT_MEMORY:
		if (!p->read) {
			snprintf(buf, len, "stopped: /proc/meminfo cannot be read");
			break;
		}
		util_format_size(p->margin, m, sizeof(m));
		if (p->by_cgroup) {
			util_format_size(sub_or_0(cg->limit, cg->usage), a, sizeof(a));
			util_format_size(cg->limit, b, sizeof(b));
			snprintf(buf, len,
				 "stopped: memory cgroup %s has %s left of its %s (%s), and %s of "
				 "it stays free",
				 cg->dir, a, b, cg->file, m);
		} else {
			util_format_size(p->mem.available, a, sizeof(a));
			snprintf(
			    buf, len,
			    "stopped: this host has %s of memory available (MemAvailable), and "
			    "%s of it stays free",
			    a, m);
		}
		break;
	case STORE_PREFAULT_TAKEN:
		snprintf(buf, len,
			 "stopped: writes, fetches or deleted objects still mapped took the room");
		break;
	case STORE_PREFAULT_FS_FULL:
		snprintf(buf, len, "stopped: the store's filesystem is full");
		break;
	case STORE_PREFAULT_DONE:
		snprintf(buf, len, "done");
		break;
	}
}

static void *prefault_main(void *arg)
{
	struct daemon *d = arg;
	struct prefault_room room = {0};
	struct store_prefault_limit limit = {prefault_room, &room};
	struct store_prefault_report rep;
	int64_t t0 = util_mono_ns();
	char got[32], why[1024];
	int r;

	r = store_prefault(d->store, &d->prefault_stop, &limit, &rep);
	if (r == -ECANCELED)
		return NULL;
	if (r < 0) {
		log_warn("cannot fault the store in: %s", strerror(-r));
		return NULL;
	}
	util_format_size(rep.bytes, got, sizeof(got));
	prefault_why(&room, &rep, why, sizeof(why));
	log_info("store faulted in: %s of free capacity held in reusable files (%.1f s)%s%s", got,
		 (double)(util_mono_ns() - t0) / 1e9, rep.end == STORE_PREFAULT_DONE ? "" : "; ",
		 rep.end == STORE_PREFAULT_DONE ? "" : why);
	return NULL;
}

static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int r;

	/* signals belong to the FUSE loop's handlers */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -r;
}

static int start_ticker(struct daemon *d)
{
	int r = start_thread(&d->ticker, ticker_main, d);

	if (r == 0)
		d->ticker_started = true;
	return r;
}

static void stop_ticker(struct daemon *d)
{
	if (!d->ticker_started)
		return;
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->ticker, NULL);
}

static int open_meta(struct daemon *d)
{
	struct meta_config mc = {
	    .url = d->cfg.redis_url,
	    .prefix = d->cfg.prefix,
	    .node = d->cfg.node,
	    /* a Redis call waits at most this long too: close(2) of a new
	     * file waits for its publish (0: meta's default, 2 s) */
	    .timeout_ms = d->cfg.io_timeout_ms,
	};
	char err[256], shown[OBJFS_PATH_MAX];
	int r;

	d->meta = meta_new(&mc, &r);
	if (!d->meta) {
		fail("invalid Redis SPEC '%s': %s",
		     config_spec_shown(d->cfg.spec, shown, sizeof(shown)), strerror(-r));
		return r;
	}
	r = meta_connect(d->meta);
	if (r < 0) {
		meta_last_error(d->meta, err, sizeof(err));
		fail("cannot connect to Redis at %s: %s", meta_url(d->meta),
		     err[0] ? err : strerror(-r));
		return r;
	}
	/* a namespace of layout 1 is migrated here, before this node
	 * claims its name or reads a record */
	r = meta_layout_settle(d->meta);
	if (r < 0) {
		meta_last_error(d->meta, err, sizeof(err));
		fail("cannot use the namespace at %s: %s", meta_url(d->meta),
		     err[0] ? err : strerror(-r));
	}
	return r;
}

/* Opening the store hit the open-files limit (which must then be tiny:
 * it opens a few files, and one at a time per object): say which limit,
 * where it stands, and how to raise it. */
static void fail_nofile(const char *dir)
{
	char soft[24] = "?", hard[24] = "?";
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			snprintf(soft, sizeof(soft), "unlimited");
		else
			snprintf(soft, sizeof(soft), "%llu", (unsigned long long)rl.rlim_cur);
		if (rl.rlim_max == RLIM_INFINITY)
			snprintf(hard, sizeof(hard), "unlimited");
		else
			snprintf(hard, sizeof(hard), "%llu", (unsigned long long)rl.rlim_max);
	}
	fail("cannot open store %s: too many open files (RLIMIT_NOFILE: soft %s, hard %s; "
	     "objfsd raises the soft limit to the hard one); raise the hard limit: "
	     "LimitNOFILE= in a systemd unit, 'ulimit -n' in the shell that mounts, or "
	     "'prlimit --nofile'",
	     dir, soft, hard);
}

/*
 * The store's capacity must fit in the memory this daemon may have: the
 * host's (MemTotal; swap is not counted) and its memory cgroup's.  A
 * larger one was once accepted, and prefault then allocated it all until
 * the daemon was OOM-killed.  An explicit capacity= that does not fit is
 * refused; the default is cut to half of what fits.
 */
static int check_capacity(struct daemon *d)
{
	const struct memlimit_cg *cg;
	struct memlimit m;
	char cap[32], lim[32], what[1024];
	uint64_t limit;
	int r;

	r = memlimit_read(&m);
	if (r < 0) {
		log_warn("cannot read /proc/meminfo (%s): capacity %" PRIu64
			 " is not checked against this host's memory",
			 strerror(-r), d->cfg.capacity);
		return 0;
	}
	cg = &m.lowest;
	limit = cg->limit < m.total ? cg->limit : m.total;
	if (d->cfg.capacity <= limit)
		return 0;
	util_format_size(d->cfg.capacity, cap, sizeof(cap));
	util_format_size(limit, lim, sizeof(lim));
	if (cg->limit < m.total)
		snprintf(what, sizeof(what), "the memory of this daemon's cgroup (%s, %s of %s)",
			 lim, cg->file, cg->dir);
	else
		snprintf(what, sizeof(what), "this host's memory (%s, MemTotal)", lim);
	if (d->capacity_default && limit / 2 >= (1ULL << 20)) {
		d->cfg.capacity = limit / 2 >> 20 << 20;
		util_format_size(d->cfg.capacity, lim, sizeof(lim));
		log_info("the default capacity %s is more than %s: capacity %s", cap, what, lim);
		return 0;
	}
	fail("capacity %s is more than %s: the store could not hold it; give capacity=%" PRIu64
	     "M or less",
	     cap, what, limit >> 20);
	return -EINVAL;
}

static int open_store(struct daemon *d)
{
	struct store_config sc = {
	    .dir = d->cfg.store_dir,
	    .capacity = d->cfg.capacity,
	    .verify = true,
	    .own_tmpfs = true,
	    .map_cache = d->cfg.map_cache,
	    .regs_max = d->cfg.rdma_regs,
	    .pack_max = d->cfg.pack_max,
	};
	struct store_stats ss;
	char why[PATH_MAX + 64];
	uint64_t need = 0;
	bool said = false;
	int r;

	snprintf(why, sizeof(why), "store %s is in use by another objfsd", d->cfg.store_dir);
	do
		d->store = store_open(&sc, &r, &need);
	while (!d->store && r == -EBUSY && restart_wait(d, &said, why));
	if (d->store) {
		store_stats(d->store, &ss);
		log_info("store %s: objects in %s/data, on %s", d->cfg.store_dir, d->cfg.store_dir,
			 store_fs_name(ss.fs));
		log_info("store %s: %" PRIu64 " objects; at most %" PRIu64
			 " being written or fetched at once (the open-files limit and "
			 "vm.max_map_count allow that many), %" PRIu64 " idle mappings kept",
			 d->cfg.store_dir, ss.objects_all, ss.open_max, ss.map_cache);
		return 0;
	}
	if (r == -EBUSY)
		fail("store %s is in use by another objfsd", d->cfg.store_dir);
	else if (r == -EMFILE)
		fail_nofile(d->cfg.store_dir);
	else if (r == -ENFILE)
		fail("cannot open store %s: the system's table of open files is full "
		     "(sysctl fs.file-max)",
		     d->cfg.store_dir);
	else if (r == -EFBIG)
		fail("store %s holds %" PRIu64 " bytes of objects; "
		     "mount with capacity=%" PRIu64 " or more",
		     d->cfg.store_dir, need, need);
	else if (r == -EMEDIUMTYPE)
		fail("store %s is on a hugetlbfs, where records cannot be written: mount the "
		     "hugetlbfs on %s/data instead",
		     d->cfg.store_dir, d->cfg.store_dir);
	else
		fail("cannot open store %s: %s", d->cfg.store_dir, strerror(-r));
	return r;
}

static int claim_node(struct daemon *d)
{
	struct meta_card other;
	char why[OBJFS_NODE_MAX + sizeof(other.host) + 128];
	bool said = false;
	int r;

	gethostname(d->card.host, sizeof(d->card.host) - 1);
	/* after serving: "tcp,rdma" only if RDMA came up (card.rdma is set
	 * then too) */
	snprintf(d->card.caps, sizeof(d->card.caps), "%s", transport_caps(d->transport));
	d->card.pid = getpid();
	random_hex(d->card.instance, 16);
	d->card.started_ns = util_now_ns();
	fill_card(d);
	for (;;) {
		r = meta_node_claim(d->meta, &d->card, CARD_TTL_S, &other);
		if (r != -EADDRINUSE)
			break;
		snprintf(why, sizeof(why), "node name '%s' is held by pid %d on host %s",
			 d->cfg.node, other.pid, other.host);
		if (!restart_wait(d, &said, why))
			break;
	}
	if (r == -EADDRINUSE)
		fail("node name '%s' is in use by a live objfsd (pid %d on host %s); "
		     "give another node=NAME",
		     d->cfg.node, other.pid, other.host);
	else if (r < 0)
		fail("cannot register node '%s' in Redis: %s", d->cfg.node, strerror(-r));
	return r;
}

static int open_log(struct daemon *d)
{
	char path[PATH_MAX];

	if (d->cfg.logfile)
		snprintf(path, sizeof(path), "%s", d->cfg.logfile);
	else if (!d->cfg.foreground)
		snprintf(path, sizeof(path), "%s/objfsd.log", d->cfg.rundir);
	else
		return 0;
	d->log = fopen(path, "ae");
	if (!d->log) {
		fprintf(stderr, "objfsd: cannot open log file %s: %s\n", path, strerror(errno));
		return -errno;
	}
	log_setup(d->cfg.debug ? LOGL_DEBUG : LOGL_INFO, d->log);
	log_to_file = true;
	return 0;
}

static int run(struct daemon *d)
{
	char url[OBJFS_PATH_MAX + 8], err[1024], fsname[512], shown[OBJFS_PATH_MAX];
	struct fs_config fc;
	struct node_config nc;
	unsigned detached = 0;
	int r;

	d->restart_deadline = util_mono_ns() + RESTART_WAIT_S * 1000000000LL;

	r = mkdir_p(d->cfg.rundir, 0700);
	if (r < 0) {
		fprintf(stderr, "objfsd: cannot create run directory %s: %s\n", d->cfg.rundir,
			strerror(-r));
		return r;
	}
	r = open_log(d);
	if (r < 0)
		return r;
	log_info("starting node '%s' on %s (SPEC %s, store %s, capacity %" PRIu64 ")", d->cfg.node,
		 d->mountpoint, config_spec_shown(d->cfg.spec, shown, sizeof(shown)),
		 d->cfg.store_dir, d->cfg.capacity);
	r = mountpoint_prepare(d->mountpoint, true, d->mountpoint, sizeof(d->mountpoint), &detached,
			       err, sizeof(err));
	if (r < 0) {
		fail("%s", err);
		return r;
	}
	if (detached)
		log_info("detached the dead objfs mount on %s: its daemon is gone", d->mountpoint);
	r = check_capacity(d);
	if (r < 0)
		return r;

	r = make_store_dir(d);
	if (r < 0)
		return r;
	/* first: its tmpfs may be mounted inside the store directory */
	r = open_store(d);
	if (r < 0)
		return r;
	if (d->cfg.spec_kind == SPEC_LOCAL) {
		char datadir[PATH_MAX];

		snprintf(datadir, sizeof(datadir), "%s/redis", d->cfg.store_dir);
		d->lr =
		    local_redis_start(d->cfg.rundir, datadir, url, sizeof(url), err, sizeof(err));
		if (!d->lr) {
			fail("cannot start the local Redis: %s", err);
			return -EIO;
		}
		d->cfg.redis_url = strdup(url);
		if (!d->cfg.redis_url)
			return -ENOMEM;
	}
	r = open_meta(d);
	if (r < 0)
		return r;
	d->transport = endpoint_new(&d->cfg, err, sizeof(err));
	if (!d->transport) {
		fail("%s", err);
		return -EINVAL;
	}

	d->src = node_source_new(d->store, serve_lease_ms(&d->cfg));
	if (!d->src) {
		fail("out of memory");
		return -ENOMEM;
	}
	if (d->cfg.test_corrupt_serve) {
		log_warn("test_corrupt_serve: this node corrupts what it serves of objects it is "
			 "still fetching (a test hook; never use it otherwise)");
		node_source_test_corrupt(d->src);
	}
	snprintf(fsname, sizeof(fsname), "objfs:%s",
		 d->cfg.spec_kind == SPEC_LOCAL ? "local" : meta_url(d->meta));
	fc = (struct fs_config){
	    .mountpoint = d->mountpoint,
	    .node = d->cfg.node,
	    .fsname = fsname,
	    .store_dir = d->cfg.store_dir,
	    .allow_overwrite = d->cfg.allow_overwrite,
	    .allow_other = d->cfg.allow_other,
	    .read_only = d->cfg.read_only,
	    .nosuid = d->cfg.nosuid,
	    .nodev = d->cfg.nodev,
	    .noexec = d->cfg.noexec,
	    .noatime = d->cfg.noatime,
	    .debug = d->cfg.debug,
	    .passthrough = !d->cfg.passthrough_off,
	    .transport = d->transport,
	    .uid = d->cfg.uid_set ? d->cfg.uid : (uint32_t)getuid(),
	    .gid = d->cfg.gid_set ? d->cfg.gid : (uint32_t)getgid(),
	    .umask = d->cfg.umask_set ? d->cfg.umask : 022,
	};
	nc = (struct node_config){
	    .node = d->cfg.node,
	    .meta = d->meta,
	    .store = d->store,
	    .transport = d->transport,
	    .source = d->src,
	    .wake_tick = wake_ticker,
	    .wake_ctx = d,
	};
	d->nd = node_new(&nc, &r);
	if (!d->nd) {
		fail("cannot set up the filesystem: %s", strerror(-r));
		return r;
	}
	d->fs = fs_new(&fc, d->meta, d->store, d->nd, &r);
	if (!d->fs) {
		fail("cannot set up the filesystem: %s", strerror(-r));
		return r;
	}
	node_source_init(&d->source, d->src);
	r = endpoint_serve(d->transport, &d->cfg, &d->source, d->card.listen,
			   sizeof(d->card.listen), d->card.rdma, sizeof(d->card.rdma), err,
			   sizeof(err));
	if (r < 0) {
		fail("%s", err);
		return r;
	}
	r = claim_node(d);
	if (r < 0)
		return r;
	/* the mount waits for the store's adoption only: reconciling with
	 * Redis (one call per 1,000 objects) is the ticker's first round */
	node_resync(d->nd);
	r = fs_mount(d->fs);
	if (r < 0) {
		fail("cannot mount on %s (is /dev/fuse available, and are you root?)",
		     d->mountpoint);
		return r;
	}
	if (d->cfg.prefault && start_thread(&d->prefaulter, prefault_main, d) == 0)
		d->prefault_started = true;
	r = meta_subscribe(d->meta, fs_on_inval, d->fs);
	if (r < 0) {
		fail("cannot subscribe to invalidations: %s", strerror(-r));
		return r;
	}
	r = start_ticker(d);
	if (r < 0) {
		fail("cannot start the maintenance thread: %s", strerror(-r));
		return r;
	}
	log_info("mounted %s (node '%s', Redis %s)", d->mountpoint, d->cfg.node, meta_url(d->meta));
	if (d->cfg.foreground)
		fprintf(stderr, "objfsd: mounted %s\n", d->mountpoint);
	report_ready(d);

	r = fs_run(d->fs);
	notify(d, "STOPPING=1");
	log_info("unmounted %s; shutting down", d->mountpoint);
	return r;
}

static void shutdown_all(struct daemon *d)
{
	stop_ticker(d);
	if (d->meta && d->card.instance[0])
		meta_node_release(d->meta, d->card.instance);
	if (d->prefault_started) {
		atomic_store_explicit(&d->prefault_stop, true, memory_order_relaxed);
		pthread_join(d->prefaulter, NULL);
	}
	if (d->meta)
		meta_unsubscribe(d->meta);
	node_stop(d->nd);
	transport_free(d->transport);
	fs_free(d->fs);
	/* the node's eviction takes leases back: the source goes after it */
	node_free(d->nd);
	node_source_free(d->src);
	store_close(d->store);
	meta_free(d->meta);
	local_redis_stop(d->lr);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	config_release(&d->cfg);
	if (d->log) {
		log_setup(LOGL_INFO, NULL);
		fclose(d->log);
	}
}

/*
 * Every object being written or fetched holds a descriptor until it is
 * sealed, and so do peers' connections, so the soft limit on open files
 * (1024 under systemd) would cap how many of them the node takes at
 * once.  Take the hard limit, as servers that hold many files do.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		log_warn("cannot raise the open files limit to %llu: %s",
			 (unsigned long long)rl.rlim_max, strerror(errno));
}

int main(int argc, char **argv)
{
	struct daemon d = {.ready_fd = -1};
	char err[1024];
	unsigned dead = 0;
	int r;

	pthread_mutex_init(&d.lock, NULL);
	pthread_cond_init(&d.wake, NULL);
	r = config_parse_argv(&d.cfg, argc, argv, err, sizeof(err));
	if (r == -ECANCELED) {
		fputs(usage, stdout);
		config_usage_options(stdout);
		fputs(usage_tail, stdout);
		config_release(&d.cfg);
		return 0;
	}
	d.capacity_default = !d.cfg.capacity;
	if (r == 0)
		r = config_finish(&d.cfg, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "objfsd: %s\n", r == -ENOMEM ? "out of memory" : err);
		goto fail;
	}
	/* only a look here, to fail before going to the background: run()
	 * detaches a dead mount, with a line in the log */
	r = mountpoint_prepare(d.cfg.mountpoint, false, d.mountpoint, sizeof(d.mountpoint), &dead,
			       err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "objfsd: %s\n", err);
		goto fail;
	}
	if (d.cfg.check_only) {
		if (dead)
			printf("objfsd: %s is a dead objfs mount; mounting would detach it\n",
			       d.mountpoint);
		config_release(&d.cfg);
		return 0;
	}
	log_setup(d.cfg.debug ? LOGL_DEBUG : LOGL_INFO, NULL);
	raise_nofile();
	notify_take(&d);
	if (!d.cfg.foreground && daemonize(&d) < 0) {
		fprintf(stderr, "objfsd: cannot go to the background: %s\n", strerror(errno));
		goto fail;
	}
	r = run(&d);
	shutdown_all(&d);
	return r < 0 ? 1 : 0;

fail:
	config_release(&d.cfg);
	return 1;
}
