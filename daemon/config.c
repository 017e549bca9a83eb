/*
 * config: argv and -o option parsing for objfsd and mount.objfs.
 *
 * Everything is checked here, before the daemon touches Redis, the store
 * or the mount point, so that a typo fails at once with a message that
 * names it.  Options that mount(8) adds on its own (rw, defaults, _netdev,
 * user, ...) are accepted; the ones that mean something to the kernel
 * (ro, nosuid, nodev, noexec, noatime) are kept and passed on to FUSE.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "meta.h"
#include "transport.h"

/* What transport= takes (transport_new()'s backends) */
static const char *const transports[] = {"auto", "tcp", "rdma"};

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int set_str(char **dst, const char *val)
{
	char *copy = strdup(val);

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

static int prefix_validate(const char *p)
{
	size_t i, len = strlen(p);

	if (len == 0 || len > 64)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		char c = p[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return -EINVAL;
	}
	return 0;
}

/* HOST:PORT, [IPv6]:PORT or :PORT (all addresses) */
static int parse_listen(struct config *c, const char *val, char *err, size_t errlen)
{
	const char *colon, *host_start = val, *host_end;
	uint64_t port;
	char host[256];
	size_t hlen;

	if (val[0] == '[') {
		host_end = strchr(val, ']');
		if (!host_end || host_end[1] != ':')
			return fail(err, errlen, "invalid option 'listen=%s': expected HOST:PORT",
				    val);
		host_start = val + 1;
		colon = host_end + 1;
	} else {
		colon = strrchr(val, ':');
		if (!colon)
			return fail(err, errlen, "invalid option 'listen=%s': expected HOST:PORT",
				    val);
		host_end = colon;
	}
	hlen = (size_t)(host_end - host_start);
	if (hlen >= sizeof(host))
		return fail(err, errlen, "invalid option 'listen=%s': host name too long", val);
	if (util_parse_u64(colon + 1, &port) < 0 || port > 65535)
		return fail(err, errlen,
			    "invalid option 'listen=%s': port must be 0-65535 (0: any free port)",
			    val);
	memcpy(host, host_start, hlen);
	host[hlen] = '\0';
	if (set_str(&c->listen_host, hlen ? host : "0.0.0.0") < 0)
		return -ENOMEM;
	c->listen_port = (uint16_t)port;
	return 0;
}

const char *config_spec_shown(const char *spec, char *buf, size_t len)
{
	const char *p = strstr(spec, "://"), *at = p ? strrchr(p + 3, '@') : NULL;

	if (!at)
		return spec;
	snprintf(buf, len, "%.*s***%s", (int)(p + 3 - spec), spec, at);
	return buf;
}

static int parse_spec(struct config *c, const char *spec, char *err, size_t errlen)
{
	char why[256], shown[OBJFS_PATH_MAX];
	int r;

	if (set_str(&c->spec, spec) < 0)
		return -ENOMEM;
	if (!strcmp(spec, "local")) {
		c->spec_kind = SPEC_LOCAL;
		return 0;
	}
	if (!strncmp(spec, "redis://", 8) || !strncmp(spec, "redis-sentinel://", 17) ||
	    !strncmp(spec, "redis-cluster://", 16)) {
		c->spec_kind = SPEC_REDIS;
		if (!spec[strcspn(spec, "/") + 2])
			return fail(err, errlen, "invalid SPEC '%s': missing host",
				    config_spec_shown(spec, shown, sizeof(shown)));
	} else if (!strncmp(spec, "unix:", 5)) {
		c->spec_kind = SPEC_UNIX;
		if (spec[5] != '/')
			return fail(err, errlen, "invalid SPEC '%s': unix: needs an absolute path",
				    spec);
	} else {
		return fail(err, errlen,
			    "invalid SPEC '%s': expected redis://HOST:PORT, "
			    "redis-sentinel://HOST:PORT[,...]/MASTER, "
			    "redis-cluster://HOST:PORT[,...], unix:/PATH or local",
			    config_spec_shown(spec, shown, sizeof(shown)));
	}
	/* what meta_new() would refuse, refused now, naming the wrong part */
	r = meta_url_check(spec, why, sizeof(why));
	if (r == -EINVAL)
		return fail(err, errlen, "invalid SPEC '%s': %s",
			    config_spec_shown(spec, shown, sizeof(shown)), why);
	if (r < 0)
		return r;
	return set_str(&c->redis_url, spec);
}

/*
 * An option may come twice (in one -o or in two: mount(8) joins them, and
 * so does objfsd) only with the same value: were the last one to win, a
 * wrapper's or an fstab line's -o could silently undo the user's.
 * Remember @opt (with its value @val, NULL for a flag); -EINVAL if it
 * came before with another value.
 */
static int note_given(struct config *c, const char *opt, const char *val, char *err, size_t errlen)
{
	size_t i, olen = strlen(opt);
	size_t vlen = val ? strlen(val) : 0;
	char **grown, *entry;

	for (i = 0; i < c->ngiven; i++) {
		const char *g = c->given[i];

		if (strncmp(g, opt, olen) || (g[olen] != '\0' && g[olen] != '='))
			continue;
		if (g[olen] == '\0' ? !val : val && !strcmp(g + olen + 1, val))
			return 0;
		return fail(err, errlen,
			    "option '%s' given twice with different values: '%s' and '%s'", opt,
			    g[olen] ? g + olen + 1 : "", val ? val : "");
	}
	grown = realloc(c->given, (c->ngiven + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	c->given = grown;
	entry = malloc(olen + vlen + 2);
	if (!entry)
		return -ENOMEM;
	snprintf(entry, olen + vlen + 2, val ? "%s=%s" : "%s", opt, val);
	c->given[c->ngiven++] = entry;
	return 0;
}

/* Options that mount(8) or fstab may add and that mean nothing to us. */
static const char *const ignored_opts[] = {
    "rw",   "defaults", "_netdev", "auto",     "noauto", "nofail", "dev",
    "suid", "exec",	"atime",   "relatime", "nouser", "users",  "async",
};

/* ---- the options, one parser each (config_opts below lists them) ---- */

/* a value option's parser: @opt is the option's name, @val its value (not
 * empty); 0, or -EINVAL with the message in @err, or -ENOMEM */
typedef int config_opt_fn(struct config *c, const char *opt, const char *val, char *err,
			  size_t errlen);

static int opt_node(struct config *c, const char *opt, const char *val, char *err, size_t errlen)
{
	if (util_node_name_validate(val) < 0)
		return fail(err, errlen,
			    "invalid option 'node=%s': use 1-63 of [A-Za-z0-9._-], "
			    "not starting with '.' or '-'",
			    val);
	snprintf(c->node, sizeof(c->node), "%s", val);
	return 0;
}

static int opt_listen(struct config *c, const char *opt, const char *val, char *err, size_t errlen)
{
	return parse_listen(c, val, err, errlen);
}

/* store=, secret_file=, rundir=, log=: an absolute path */
static int opt_path(struct config *c, const char *opt, const char *val, char *err, size_t errlen)
{
	char **dst = !strcmp(opt, "store")	   ? &c->store_dir
		     : !strcmp(opt, "secret_file") ? &c->secret_file
		     : !strcmp(opt, "rundir")	   ? &c->rundir
						   : &c->logfile;

	if (val[0] != '/')
		return fail(err, errlen, "invalid option '%s=%s': need an absolute path", opt, val);
	return set_str(dst, val);
}

static int opt_capacity(struct config *c, const char *opt, const char *val, char *err,
			size_t errlen)
{
	uint64_t size;

	if (util_parse_size(val, &size) < 0)
		return fail(err, errlen,
			    "invalid option 'capacity=%s': expected a size like 512M or 4G", val);
	if (size < (1ULL << 20))
		return fail(err, errlen, "invalid option 'capacity=%s': at least 1M", val);
	if (size > (1ULL << 50))
		return fail(err, errlen, "invalid option 'capacity=%s': at most 1P", val);
	c->capacity = size;
	return 0;
}

static int opt_prefix(struct config *c, const char *opt, const char *val, char *err, size_t errlen)
{
	if (prefix_validate(val) < 0)
		return fail(err, errlen, "invalid option 'prefix=%s': use 1-64 of [A-Za-z0-9._-]",
			    val);
	return set_str(&c->prefix, val);
}

static int opt_advertise(struct config *c, const char *opt, const char *val, char *err,
			 size_t errlen)
{
	if (strlen(val) > 200 || strpbrk(val, " \t/,[]"))
		return fail(err, errlen,
			    "invalid option 'advertise=%s': expected a host name or address", val);
	return set_str(&c->advertise, val);
}

static int opt_io_timeout(struct config *c, const char *opt, const char *val, char *err,
			  size_t errlen)
{
	uint64_t ms;

	if (util_parse_u64(val, &ms) < 0 || ms < 100 || ms > 600000)
		return fail(err, errlen, "invalid option 'io_timeout=%s': milliseconds, 100-600000",
			    val);
	c->io_timeout_ms = (unsigned)ms;
	return 0;
}

static int opt_serve_bwlimit(struct config *c, const char *opt, const char *val, char *err,
			     size_t errlen)
{
	uint64_t bw;

	if (util_parse_size(val, &bw) < 0 || (bw && bw < 4096))
		return fail(err, errlen,
			    "invalid option 'serve_bwlimit=%s': bytes per second like 100M, at "
			    "least 4K (0: no limit)",
			    val);
	c->serve_bwlimit = bw;
	return 0;
}

static int opt_serve_slots(struct config *c, const char *opt, const char *val, char *err,
			   size_t errlen)
{
	uint64_t n;

	if (util_parse_u64(val, &n) < 0 || n > TRANSPORT_SLOTS_MAX)
		return fail(err, errlen,
			    "invalid option 'serve_slots=%s': blocks sent at once to nodes "
			    "fetching the same object, 0-%u (0: no limit)",
			    val, TRANSPORT_SLOTS_MAX);
	c->serve_slots = n ? (unsigned)n : TRANSPORT_SLOTS_NONE;
	return 0;
}

static int opt_transport(struct config *c, const char *opt, const char *val, char *err,
			 size_t errlen)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(transports); i++)
		if (!strcmp(val, transports[i])) {
			c->transport = transports[i];
			return 0;
		}
	return fail(err, errlen, "invalid option 'transport=%s': expected auto, tcp or rdma", val);
}

static int opt_rdma_eager_max(struct config *c, const char *opt, const char *val, char *err,
			      size_t errlen)
{
	uint64_t size;

	if (util_parse_size(val, &size) < 0 || !size || size > TRANSPORT_RDMA_EAGER_MAX)
		return fail(err, errlen,
			    "invalid option 'rdma_eager_max=%s': the largest range sent eager "
			    "over RDMA, a size like 32K, from 1 to %uK",
			    val, TRANSPORT_RDMA_EAGER_MAX >> 10);
	c->rdma_eager_max = (uint32_t)size;
	return 0;
}

static int opt_rdma_poll(struct config *c, const char *opt, const char *val, char *err,
			 size_t errlen)
{
	uint64_t us;

	if (util_parse_u64(val, &us) < 0 || us > TRANSPORT_RDMA_POLL_MAX)
		return fail(err, errlen,
			    "invalid option 'rdma_poll=%s': how long, in microseconds, an RDMA "
			    "connection polls for its next completion before it sleeps, from 0 "
			    "(never) to %u",
			    val, TRANSPORT_RDMA_POLL_MAX);
	c->rdma_poll_us = (uint32_t)us;
	return 0;
}

static int opt_pack_max(struct config *c, const char *opt, const char *val, char *err,
			size_t errlen)
{
	uint64_t size;

	if (util_parse_size(val, &size) < 0 ||
	    (size && (size < CONFIG_PACK_MIN || size > TRANSPORT_RDMA_EAGER_MAX)))
		return fail(err, errlen,
			    "invalid option 'pack_max=%s': the largest object packed with "
			    "others, a size like 32K, from %u to %uK, or 0 for none",
			    val, CONFIG_PACK_MIN, TRANSPORT_RDMA_EAGER_MAX >> 10);
	c->pack_max = (uint32_t)size;
	c->pack_max_set = true;
	return 0;
}

/* uid=, gid= */
static int opt_id(struct config *c, const char *opt, const char *val, char *err, size_t errlen)
{
	uint64_t n;

	/* (uint32_t)-1 is "no change" to chown(2): never an owner */
	if (util_parse_u64(val, &n) < 0 || n >= UINT32_MAX)
		return fail(err, errlen, "invalid option '%s=%s': a numeric %s id, from 0 to %u",
			    opt, val, opt[0] == 'u' ? "user" : "group", UINT32_MAX - 1);
	if (opt[0] == 'u') {
		c->uid = (uint32_t)n;
		c->uid_set = true;
	} else {
		c->gid = (uint32_t)n;
		c->gid_set = true;
	}
	return 0;
}

static int opt_umask(struct config *c, const char *opt, const char *val, char *err, size_t errlen)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(val, &end, 8);
	if (errno || *end || val[0] < '0' || val[0] > '7' || n > 0777 || strlen(val) > 4)
		return fail(err, errlen,
			    "invalid option 'umask=%s': an octal mask like 022, at most 0777", val);
	c->umask = (uint32_t)n;
	c->umask_set = true;
	return 0;
}

static int opt_map_cache(struct config *c, const char *opt, const char *val, char *err,
			 size_t errlen)
{
	uint64_t n;

	if (util_parse_u64(val, &n) < 0 || !n || n > CONFIG_MAP_CACHE_MAX)
		return fail(err, errlen,
			    "invalid option 'map_cache=%s': idle mappings of objects kept, "
			    "from 1 to %u",
			    val, CONFIG_MAP_CACHE_MAX);
	c->map_cache = (unsigned)n;
	return 0;
}

static int opt_rdma_regs(struct config *c, const char *opt, const char *val, char *err,
			 size_t errlen)
{
	uint64_t n;

	if (util_parse_u64(val, &n) < 0 || !n || n > CONFIG_RDMA_REGS_MAX)
		return fail(err, errlen,
			    "invalid option 'rdma_regs=%s': objects kept registered for RDMA "
			    "when idle, from 1 to %u",
			    val, CONFIG_RDMA_REGS_MAX);
	c->rdma_regs = (unsigned)n;
	return 0;
}

static int opt_passthrough(struct config *c, const char *opt, const char *val, char *err,
			   size_t errlen)
{
	if (strcmp(val, "auto") && strcmp(val, "off"))
		return fail(err, errlen, "invalid option 'passthrough=%s': expected auto or off",
			    val);
	c->passthrough_off = !strcmp(val, "off");
	return 0;
}

/* user: what mount(8) implies for user mounts; libmount passes
 * user=LOGIN for a user mount of a "user" line of fstab */
static int opt_user(struct config *c, const char *opt, const char *val, char *err, size_t errlen)
{
	c->nosuid = c->nodev = c->noexec = true;
	return 0;
}

/*
 * Every -o option, in the order --help lists them.  A row is a value
 * option (.arg names its value in --help, .parse checks and stores it) or
 * a flag (.arg NULL: .parse if it does more than set the bool at .flag).
 * .help is --help's text, lines joined by '\n', and .dflt the default it
 * shows.  A row without .help shares the text of a row before it, whose
 * .shown names both, or is an option for tests that neither --help nor
 * the README shows (tests/integration/00-help.sh checks that --help and
 * the README's table name the same options).
 */
struct config_opt {
	const char *name;
	const char *arg;
	config_opt_fn *parse;
	size_t flag;
	const char *shown; /* --help's left column when not NAME[=ARG] */
	const char *help;
	const char *dflt;
	bool any_value; /* a flag that may come with a value, ignored */
};

#define FLAG_AT(field) offsetof(struct config, field)

static const struct config_opt config_opts[] = {
    {.name = "node",
     .arg = "NAME",
     .parse = opt_node,
     .help = "this node's name",
     .dflt = "the hostname"},
    {.name = "listen",
     .arg = "HOST:PORT",
     .parse = opt_listen,
     .help = "where this node serves objects to the others; port 0: any\n"
	     "free one",
     .dflt = "0.0.0.0:7419"},
    {.name = "advertise",
     .arg = "HOST",
     .parse = opt_advertise,
     .help = "the address other nodes reach this one at",
     .dflt = "the listen address, or this host's first IPv4\n"
	     "address"},
    {.name = "io_timeout",
     .arg = "MS",
     .parse = opt_io_timeout,
     .help = "a peer silent this long mid-transfer is dead; also the\n"
	     "longest a Redis call waits (100 to 600000)",
     .dflt = "2000"},
    {.name = "serve_bwlimit",
     .arg = "SIZE",
     .parse = opt_serve_bwlimit,
     .help = "cap on bytes per second served to peers (at least 4K)",
     .dflt = "0: none"},
    {.name = "serve_slots",
     .arg = "N",
     .parse = opt_serve_slots,
     .help = "blocks sent at once to nodes fetching the same object;\n"
	     "others are told to ask again (0 to 64; 0: no limit)",
     .dflt = "1"},
    {.name = "transport",
     .arg = "auto|tcp|rdma",
     .parse = opt_transport,
     .help = "how objects move between nodes: auto serves and fetches\n"
	     "over RDMA where both nodes have it, TCP otherwise; tcp:\n"
	     "TCP only; rdma: fetch over RDMA only (fails at mount\n"
	     "without an RDMA device)",
     .dflt = "auto"},
    {.name = "rdma_eager_max",
     .arg = "SIZE",
     .parse = opt_rdma_eager_max,
     .help = "ranges up to this size go over RDMA SEND/RECV, larger\n"
	     "ones by RDMA READ (at most 1M)",
     .dflt = "32K"},
    {.name = "rdma_poll",
     .arg = "USEC",
     .parse = opt_rdma_poll,
     .help = "after a completion, an RDMA connection polls this long for\n"
	     "the next before it sleeps on events (at most 10000); costs\n"
	     "CPU, helps where a spare CPU is at hand",
     .dflt = "0: events only"},
    {.name = "store",
     .arg = "DIR",
     .parse = opt_path,
     .help = "the shared-memory store; DIR is created if missing, but not\n"
	     "its parent; objects live in a tmpfs objfsd mounts on\n"
	     "DIR/data (unless DIR is a tmpfs mount, or DIR/data a\n"
	     "hugetlbfs mount); the tmpfs outlives the daemon: 'umount\n"
	     "DIR/data' removes it",
     .dflt = "/dev/shm/objfs-PREFIX-NODE"},
    {.name = "capacity",
     .arg = "SIZE",
     .parse = opt_capacity,
     .help = "store capacity, e.g. 512M, 4G; a capacity above the memory\n"
	     "of this host or of the daemon's cgroup is refused",
     .dflt = "1G, or half of that memory if less"},
    {.name = "map_cache",
     .arg = "N",
     .parse = opt_map_cache,
     .help = "sealed objects kept mapped by the daemon when nobody uses\n"
	     "them (at most 1048576); an object at rest holds no\n"
	     "descriptor and no mapping",
     .dflt = "256, less if vm.max_map_count is low"},
    {.name = "pack_max",
     .arg = "SIZE",
     .parse = opt_pack_max,
     .help = "objects up to this size share chunk files in the store, a\n"
	     "slot each, rather than a file and a page or more each (at\n"
	     "most rdma_eager_max, rounded up to 64 bytes; 0: none);\n"
	     "they are read through objfsd, never passed through",
     .dflt = "32K"},
    {.name = "rdma_regs",
     .arg = "N",
     .parse = opt_rdma_regs,
     .help = "objects whose memory stays registered for RDMA peers when\n"
	     "no rendezvous is out (at most 65536)",
     .dflt = "256"},
    {.name = "prefix",
     .arg = "NAME",
     .parse = opt_prefix,
     .help = "Redis key prefix / cluster name",
     .dflt = "objfs"},
    {.name = "allow_overwrite",
     .flag = FLAG_AT(allow_overwrite),
     .help = "an O_TRUNC open of an existing name writes a new object"},
    {.name = "allow_other",
     .flag = FLAG_AT(allow_other),
     .help = "let other users access the mount"},
    {.name = "uid",
     .arg = "N",
     .parse = opt_id,
     .shown = "uid=N, gid=N",
     .help = "owner shown by files and directories written before objfs\n"
	     "kept owners; newer ones have their creator's, which chown\n"
	     "changes",
     .dflt = "the daemon's user and group"},
    {.name = "gid", .arg = "N", .parse = opt_id},
    {.name = "umask",
     .arg = "MASK",
     .parse = opt_umask,
     .help = "mode of those older entries: 0777 (directories) or 0666\n"
	     "(files) less MASK (octal); a sealed file never shows write\n"
	     "bits unless allow_overwrite",
     .dflt = "022"},
    {.name = "secret_file",
     .arg = "PATH",
     .parse = opt_path,
     .help = "cluster secret (16+ bytes, not readable by others) that\n"
	     "peers prove they know",
     .dflt = "none: only loopback peers are served"},
    {.name = "rundir",
     .arg = "DIR",
     .parse = opt_path,
     .help = "sockets and logs",
     .dflt = "/run/objfs/PREFIX-NODE"},
    {.name = "log",
     .arg = "FILE",
     .parse = opt_path,
     .help = "log file",
     .dflt = "RUNDIR/objfsd.log in the background"},
    {.name = "passthrough",
     .arg = "auto|off",
     .parse = opt_passthrough,
     .help = "auto: the kernel reads and maps sealed local objects\n"
	     "straight from the store (FUSE passthrough, Linux 6.9+)\n"
	     "where it offers it; off: the daemon answers every read",
     .dflt = "auto"},
    {.name = "prefault",
     .flag = FLAG_AT(prefault),
     .shown = "prefault, noprefault",
     .help = "fault the store in at mount, or not: the free capacity is\n"
	     "allocated and touched in the background (files kept for\n"
	     "reuse), so the first objects written or fetched do not\n"
	     "pay for first-touch page faults, as far as the memory\n"
	     "available (MemAvailable, the cgroup's limit) allows",
     .dflt = "prefault"},
    {.name = "noprefault", .flag = FLAG_AT(no_prefault)},
    {.name = "restart",
     .flag = FLAG_AT(restart),
     .help = "for service managers (Restart=): wait up to 17 s for a\n"
	     "previous instance of this node to let go of its store and\n"
	     "name instead of failing at once"},
    {.name = "foreground",
     .flag = FLAG_AT(foreground),
     .shown = "foreground, -f",
     .help = "stay in the foreground, log to stderr"},
    {.name = "debug",
     .flag = FLAG_AT(debug),
     .shown = "debug, -d",
     .help = "trace every FUSE request (implies foreground)"},
    {.name = "ro",
     .flag = FLAG_AT(read_only),
     .shown = "ro, nosuid, nodev, noexec, noatime, user",
     .help = "as in mount(8)"},
    {.name = "nosuid", .flag = FLAG_AT(nosuid)},
    {.name = "nodev", .flag = FLAG_AT(nodev)},
    {.name = "noexec", .flag = FLAG_AT(noexec)},
    {.name = "noatime", .flag = FLAG_AT(noatime)},
    {.name = "user", .parse = opt_user, .any_value = true},
    /* node_source_test_corrupt(): a byte of every range this node serves
     * of an object it is still fetching is flipped, on the wire only */
    {.name = "test_corrupt_serve", .flag = FLAG_AT(test_corrupt_serve)},
};

static const struct config_opt *opt_find(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(config_opts); i++)
		if (!strcmp(config_opts[i].name, name))
			return &config_opts[i];
	return NULL;
}

/* @text's lines, each but the first indented by @indent */
static void usage_lines(FILE *f, const char *text, int indent)
{
	const char *nl;

	for (;;) {
		nl = strchr(text, '\n');
		fprintf(f, "%.*s\n", nl ? (int)(nl - text) : (int)strlen(text), text);
		if (!nl)
			return;
		text = nl + 1;
		fprintf(f, "%*s", indent, "");
	}
}

void config_usage_options(FILE *f)
{
	enum { COL = 19 };
	char left[128], dflt[256];
	size_t i, col;

	for (i = 0; i < ARRAY_SIZE(config_opts); i++) {
		const struct config_opt *o = &config_opts[i];

		if (!o->help)
			continue;
		if (o->shown)
			snprintf(left, sizeof(left), "  %s", o->shown);
		else
			snprintf(left, sizeof(left), "  %s%s%s", o->name, o->arg ? "=" : "",
				 o->arg ? o->arg : "");
		/* a long left column takes a line of its own */
		if (strlen(left) + 2 > COL)
			fprintf(f, "%s\n%*s", left, COL, "");
		else
			fprintf(f, "%-*s", COL, left);
		usage_lines(f, o->help, COL);
		if (o->dflt) {
			snprintf(dflt, sizeof(dflt), "(default: %s)", o->dflt);
			fprintf(f, "%*s", COL, "");
			usage_lines(f, dflt, COL);
		}
	}
	fprintf(f, "%s\n%*saccepted and ignored, as mount(8) and fstab pass them\n",
		"  rw, defaults, _netdev, ...", COL, "");
	fprintf(f, "%*s", COL, "");
	for (i = 0, col = COL; i <= ARRAY_SIZE(ignored_opts); i++) {
		const char *name = i < ARRAY_SIZE(ignored_opts) ? ignored_opts[i] : "x-*, comment=";

		if (i && col + strlen(name) + 2 > 78) {
			fprintf(f, ",\n%*s", COL, "");
			col = COL;
		} else if (i) {
			col += (size_t)fprintf(f, ", ");
		}
		col += (size_t)fprintf(f, "%s", name);
	}
	fputc('\n', f);
}

int config_parse_options(struct config *c, const char *opts, char *err, size_t errlen)
{
	char *copy, *save = NULL, *opt;
	int r = 0;
	size_t i;

	copy = strdup(opts);
	if (!copy)
		return -ENOMEM;
	for (opt = strtok_r(copy, ",", &save); opt && r == 0; opt = strtok_r(NULL, ",", &save)) {
		char *val = strchr(opt, '=');
		const struct config_opt *o;
		bool ignored = false;

		if (val)
			*val++ = '\0';
		for (i = 0; i < ARRAY_SIZE(ignored_opts); i++)
			if (!val && !strcmp(opt, ignored_opts[i]))
				ignored = true;
		/* x-* and comment= may come more than once (x-systemd.requires=) */
		if (ignored || !strncmp(opt, "x-", 2) || (val && !strcmp(opt, "comment")))
			continue;
		r = note_given(c, opt, val, err, errlen);
		if (r < 0)
			break;
		o = opt_find(opt);
		if (!o)
			r = fail(err, errlen, "unknown option '%s'", opt);
		else if (o->arg && (!val || !*val))
			r = fail(err, errlen, "option '%s' needs a value (%s=...)", opt, opt);
		else if (!o->arg && val && !o->any_value)
			r = fail(err, errlen, "option '%s' takes no value", opt);
		else if (o->parse)
			r = o->parse(c, opt, val, err, errlen);
		else
			*(bool *)((char *)c + o->flag) = true;
	}
	free(copy);
	return r;
}

int config_parse_argv(struct config *c, int argc, char **argv, char *err, size_t errlen)
{
	const char *pos[2];
	int npos = 0, i, r;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return -ECANCELED;
		if (!strcmp(a, "-o")) {
			if (++i >= argc)
				return fail(err, errlen, "option '-o' needs an argument");
			r = config_parse_options(c, argv[i], err, errlen);
			if (r < 0)
				return r;
		} else if (!strncmp(a, "-o", 2)) {
			r = config_parse_options(c, a + 2, err, errlen);
			if (r < 0)
				return r;
		} else if (!strcmp(a, "--check")) {
			c->check_only = true;
		} else if (!strcmp(a, "-f")) {
			c->foreground = true;
		} else if (!strcmp(a, "-d")) {
			c->debug = true;
			c->foreground = true;
		} else if (a[0] == '-' && a[1]) {
			return fail(err, errlen, "unknown argument '%s'", a);
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			return fail(err, errlen, "unexpected argument '%s'", a);
		}
	}
	if (npos < 2)
		return fail(err, errlen, "expected SPEC and MOUNTPOINT (see --help)");
	r = parse_spec(c, pos[0], err, errlen);
	if (r < 0)
		return r;
	if (!pos[1][0])
		return fail(err, errlen, "empty MOUNTPOINT");
	return set_str(&c->mountpoint, pos[1]);
}

int config_finish(struct config *c, char *err, size_t errlen)
{
	char buf[OBJFS_PATH_MAX];
	uint32_t eager;

	if (!c->prefix && set_str(&c->prefix, "objfs") < 0)
		return -ENOMEM;
	if (!c->node[0]) {
		char host[256], *dot;

		if (gethostname(host, sizeof(host)) < 0)
			return fail(err, errlen, "cannot read the hostname: %s; give node=NAME",
				    strerror(errno));
		host[sizeof(host) - 1] = '\0';
		dot = strchr(host, '.');
		if (dot)
			*dot = '\0';
		if (util_node_name_validate(host) < 0)
			return fail(err, errlen,
				    "the hostname '%s' is not a valid node name; give node=NAME",
				    host);
		memcpy(c->node, host, strlen(host) + 1);
	}
	if (!c->capacity)
		c->capacity = CONFIG_DEFAULT_CAPACITY;
	/* a packed object goes to a peer in one eager SEND: never registered
	 * for an RDMA READ, which would reach its chunk's neighbours */
	eager = c->rdma_eager_max ? c->rdma_eager_max : TRANSPORT_RDMA_EAGER_DEFAULT;
	if (c->pack_max_set && c->pack_max > eager)
		return fail(err, errlen,
			    "pack_max=%" PRIu32 " is more than rdma_eager_max=%" PRIu32
			    ": a packed object must fit in one RDMA SEND",
			    c->pack_max, eager);
	if (!c->pack_max_set) {
		c->pack_max = eager < CONFIG_PACK_MAX_DEFAULT ? eager : CONFIG_PACK_MAX_DEFAULT;
		if (c->pack_max < CONFIG_PACK_MIN)
			c->pack_max = 0;
	}
	/* RDMA where both ends have it, TCP otherwise */
	if (!c->transport)
		c->transport = transports[0];
	/* the default: fetches and writes then land on resident memory */
	c->prefault = !c->no_prefault;
	if (!c->listen_host) {
		if (set_str(&c->listen_host, "0.0.0.0") < 0)
			return -ENOMEM;
		c->listen_port = CONFIG_DEFAULT_PORT;
	}
	if (!c->store_dir) {
		c->store_default = true;
		snprintf(buf, sizeof(buf), "/dev/shm/objfs-%s-%s", c->prefix, c->node);
		if (set_str(&c->store_dir, buf) < 0)
			return -ENOMEM;
	}
	if (!c->rundir) {
		snprintf(buf, sizeof(buf), "/run/objfs/%s-%s", c->prefix, c->node);
		if (set_str(&c->rundir, buf) < 0)
			return -ENOMEM;
	}
	return 0;
}

void config_release(struct config *c)
{
	size_t i;

	for (i = 0; i < c->ngiven; i++)
		free(c->given[i]);
	free(c->given);
	free(c->spec);
	free(c->redis_url);
	free(c->mountpoint);
	free(c->listen_host);
	free(c->advertise);
	free(c->store_dir);
	free(c->prefix);
	free(c->secret_file);
	free(c->rundir);
	free(c->logfile);
	memset(c, 0, sizeof(*c));
}
