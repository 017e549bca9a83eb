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
	if (parse_u64(colon + 1, &port) < 0 || port > 65535)
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
			continue;

#define FLAG(name, field)                                                          \
	if (!strcmp(opt, name)) {                                                  \
		if (val)                                                           \
			r = fail(err, errlen, "option '%s' takes no value", name); \
		else                                                               \
			c->field = true;                                           \
		continue;                                                          \
	}
		FLAG("allow_overwrite", allow_overwrite)
		FLAG("allow_other", allow_other)
		FLAG("foreground", foreground)
		FLAG("debug", debug)
		FLAG("ro", read_only)
		FLAG("nosuid", nosuid)
		FLAG("nodev", nodev)
		FLAG("noexec", noexec)
		FLAG("noatime", noatime)
		FLAG("prefault", prefault)
		FLAG("noprefault", no_prefault)
		FLAG("restart", restart)
		FLAG("test_corrupt_serve", test_corrupt_serve)
#undef FLAG
		if (!strcmp(opt, "user")) {
			/* what mount(8) implies for user mounts */
			c->nosuid = c->nodev = c->noexec = true;
			continue;
		}
		if (!val || !*val) {
			if (!strcmp(opt, "node") || !strcmp(opt, "listen") ||
			    !strcmp(opt, "store") || !strcmp(opt, "capacity") ||
			    !strcmp(opt, "prefix") || !strcmp(opt, "secret_file") ||
			    !strcmp(opt, "rundir") || !strcmp(opt, "log") ||
			    !strcmp(opt, "advertise") || !strcmp(opt, "io_timeout") ||
			    !strcmp(opt, "serve_bwlimit") || !strcmp(opt, "passthrough") ||
			    !strcmp(opt, "serve_slots") || !strcmp(opt, "transport") ||
			    !strcmp(opt, "rdma_eager_max") || !strcmp(opt, "map_cache") ||
			    !strcmp(opt, "rdma_poll") || !strcmp(opt, "rdma_regs") ||
			    !strcmp(opt, "uid") || !strcmp(opt, "pack_max") ||
			    !strcmp(opt, "gid") || !strcmp(opt, "umask"))
				r = fail(err, errlen, "option '%s' needs a value (%s=...)", opt,
					 opt);
			else
				r = fail(err, errlen, "unknown option '%s'", opt);
			continue;
		}
		if (!strcmp(opt, "node")) {
			if (node_name_validate(val) < 0)
				r = fail(err, errlen,
					 "invalid option 'node=%s': use 1-63 of [A-Za-z0-9._-], "
					 "not starting with '.' or '-'",
					 val);
			else
				snprintf(c->node, sizeof(c->node), "%s", val);
		} else if (!strcmp(opt, "listen")) {
			r = parse_listen(c, val, err, errlen);
		} else if (!strcmp(opt, "store")) {
			if (val[0] != '/')
				r = fail(err, errlen,
					 "invalid option 'store=%s': need an absolute path", val);
			else
				r = set_str(&c->store_dir, val);
		} else if (!strcmp(opt, "capacity")) {
			uint64_t size;

			if (parse_size(val, &size) < 0)
				r = fail(
				    err, errlen,
				    "invalid option 'capacity=%s': expected a size like 512M or 4G",
				    val);
			else if (size < (1ULL << 20))
				r = fail(err, errlen, "invalid option 'capacity=%s': at least 1M",
					 val);
			else if (size > (1ULL << 50))
				r = fail(err, errlen, "invalid option 'capacity=%s': at most 1P",
					 val);
			else
				c->capacity = size;
		} else if (!strcmp(opt, "prefix")) {
			if (prefix_validate(val) < 0)
				r = fail(err, errlen,
					 "invalid option 'prefix=%s': use 1-64 of [A-Za-z0-9._-]",
					 val);
			else
				r = set_str(&c->prefix, val);
		} else if (!strcmp(opt, "secret_file")) {
			if (val[0] != '/')
				r = fail(err, errlen,
					 "invalid option 'secret_file=%s': need an absolute path",
					 val);
			else
				r = set_str(&c->secret_file, val);
		} else if (!strcmp(opt, "advertise")) {
			if (strlen(val) > 200 || strpbrk(val, " \t/,[]"))
				r = fail(err, errlen,
					 "invalid option 'advertise=%s': expected a host name or "
					 "address",
					 val);
			else
				r = set_str(&c->advertise, val);
		} else if (!strcmp(opt, "io_timeout")) {
			uint64_t ms;

			if (parse_u64(val, &ms) < 0 || ms < 100 || ms > 600000)
				r = fail(err, errlen,
					 "invalid option 'io_timeout=%s': milliseconds, 100-600000",
					 val);
			else
				c->io_timeout_ms = (unsigned)ms;
		} else if (!strcmp(opt, "serve_bwlimit")) {
			uint64_t bw;

			if (parse_size(val, &bw) < 0 || (bw && bw < 4096))
				r = fail(err, errlen,
					 "invalid option 'serve_bwlimit=%s': bytes per second like "
					 "100M, at least 4K (0: no limit)",
					 val);
			else
				c->serve_bwlimit = bw;
		} else if (!strcmp(opt, "serve_slots")) {
			uint64_t n;

			if (parse_u64(val, &n) < 0 || n > TRANSPORT_SLOTS_MAX)
				r = fail(err, errlen,
					 "invalid option 'serve_slots=%s': blocks sent at once to "
					 "nodes fetching the same object, 0-%u (0: no limit)",
					 val, TRANSPORT_SLOTS_MAX);
			else
				c->serve_slots = n ? (unsigned)n : TRANSPORT_SLOTS_NONE;
		} else if (!strcmp(opt, "transport")) {
			const char *mode = NULL;

			for (i = 0; i < ARRAY_SIZE(transports); i++)
				if (!strcmp(val, transports[i]))
					mode = transports[i];
			if (mode)
				c->transport = mode;
			else
				r = fail(
				    err, errlen,
				    "invalid option 'transport=%s': expected auto, tcp or rdma",
				    val);
		} else if (!strcmp(opt, "rdma_eager_max")) {
			uint64_t size;

			if (parse_size(val, &size) < 0 || !size || size > TRANSPORT_RDMA_EAGER_MAX)
				r = fail(err, errlen,
					 "invalid option 'rdma_eager_max=%s': the largest range "
					 "sent eager over RDMA, a size like 32K, from 1 to %uK",
					 val, TRANSPORT_RDMA_EAGER_MAX >> 10);
			else
				c->rdma_eager_max = (uint32_t)size;
		} else if (!strcmp(opt, "rdma_poll")) {
			uint64_t us;

			if (parse_u64(val, &us) < 0 || us > TRANSPORT_RDMA_POLL_MAX)
				r = fail(
				    err, errlen,
				    "invalid option 'rdma_poll=%s': how long, in microseconds, "
				    "an RDMA connection polls for its next completion before it "
				    "sleeps, from 0 (never) to %u",
				    val, TRANSPORT_RDMA_POLL_MAX);
			else
				c->rdma_poll_us = (uint32_t)us;
		} else if (!strcmp(opt, "pack_max")) {
			uint64_t size;

			if (parse_size(val, &size) < 0 ||
			    (size && (size < CONFIG_PACK_MIN || size > TRANSPORT_RDMA_EAGER_MAX)))
				r = fail(err, errlen,
					 "invalid option 'pack_max=%s': the largest object packed "
					 "with others, a size like 32K, from %u to %uK, or 0 for "
					 "none",
					 val, CONFIG_PACK_MIN, TRANSPORT_RDMA_EAGER_MAX >> 10);
			else {
				c->pack_max = (uint32_t)size;
				c->pack_max_set = true;
			}
		} else if (!strcmp(opt, "uid") || !strcmp(opt, "gid")) {
			uint64_t n;

			/* (uint32_t)-1 is "no change" to chown(2): never an owner */
			if (parse_u64(val, &n) < 0 || n >= UINT32_MAX) {
				r = fail(err, errlen,
					 "invalid option '%s=%s': a numeric %s id, from 0 to %u",
					 opt, val, opt[0] == 'u' ? "user" : "group",
					 UINT32_MAX - 1);
			} else if (opt[0] == 'u') {
				c->uid = (uint32_t)n;
				c->uid_set = true;
			} else {
				c->gid = (uint32_t)n;
				c->gid_set = true;
			}
		} else if (!strcmp(opt, "umask")) {
			char *end;
			unsigned long n;

			errno = 0;
			n = strtoul(val, &end, 8);
			if (errno || *end || val[0] < '0' || val[0] > '7' || n > 0777 ||
			    strlen(val) > 4)
				r = fail(
				    err, errlen,
				    "invalid option 'umask=%s': an octal mask like 022, at most "
				    "0777",
				    val);
			else {
				c->umask = (uint32_t)n;
				c->umask_set = true;
			}
		} else if (!strcmp(opt, "map_cache")) {
			uint64_t n;

			if (parse_u64(val, &n) < 0 || !n || n > CONFIG_MAP_CACHE_MAX)
				r = fail(err, errlen,
					 "invalid option 'map_cache=%s': idle mappings of objects "
					 "kept, from 1 to %u",
					 val, CONFIG_MAP_CACHE_MAX);
			else
				c->map_cache = (unsigned)n;
		} else if (!strcmp(opt, "rdma_regs")) {
			uint64_t n;

			if (parse_u64(val, &n) < 0 || !n || n > CONFIG_RDMA_REGS_MAX)
				r = fail(err, errlen,
					 "invalid option 'rdma_regs=%s': objects kept registered "
					 "for RDMA when idle, from 1 to %u",
					 val, CONFIG_RDMA_REGS_MAX);
			else
				c->rdma_regs = (unsigned)n;
		} else if (!strcmp(opt, "passthrough")) {
			if (!strcmp(val, "auto") || !strcmp(val, "off"))
				c->passthrough_off = !strcmp(val, "off");
			else
				r = fail(err, errlen,
					 "invalid option 'passthrough=%s': expected auto or off",
					 val);
		} else if (!strcmp(opt, "rundir")) {
			if (val[0] != '/')
				r = fail(err, errlen,
					 "invalid option 'rundir=%s': need an absolute path", val);
			else
				r = set_str(&c->rundir, val);
		} else if (!strcmp(opt, "log")) {
			if (val[0] != '/')
				r = fail(err, errlen,
					 "invalid option 'log=%s': need an absolute path", val);
			else
				r = set_str(&c->logfile, val);
		} else {
			r = fail(err, errlen, "unknown option '%s'", opt);
		}
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
		if (node_name_validate(host) < 0)
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
