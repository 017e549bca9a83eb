/*
 * test-config: objfsd's command line and -o options.
 */
#include <errno.h>

#include "config.h"
#include "tap.h"
#include "transport.h"

static int parse(struct config *c, char *err, const char *spec, const char *opts)
{
	char *argv[] = {(char *)"objfsd", (char *)spec, (char *)"/mnt/x",
			(char *)"-o",	  (char *)opts, NULL};

	memset(c, 0, sizeof(*c));
	err[0] = '\0';
	return config_parse_argv(c, opts ? 5 : 3, argv, err, 256);
}

TEST(specs)
{
	struct config c;
	char err[256];

	CHECK_EQ(parse(&c, err, "local", NULL), 0);
	CHECK_EQ(c.spec_kind, SPEC_LOCAL);
	CHECK(c.redis_url == NULL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "redis://10.0.0.1:6379/2", NULL), 0);
	CHECK_EQ(c.spec_kind, SPEC_REDIS);
	CHECK_STR(c.redis_url, "redis://10.0.0.1:6379/2");
	config_release(&c);
	CHECK_EQ(parse(&c, err, "unix:/run/redis.sock", NULL), 0);
	CHECK_EQ(c.spec_kind, SPEC_UNIX);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "unix:relative.sock", NULL), -EINVAL);
	CHECK(strstr(err, "unix:relative.sock") != NULL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "http://x", NULL), -EINVAL);
	CHECK(strstr(err, "http://x") != NULL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "redis://", NULL), -EINVAL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "redis-sentinel://a:26379,b:26379/m", NULL), 0);
	CHECK_EQ(c.spec_kind, SPEC_REDIS);
	CHECK_STR(c.redis_url, "redis-sentinel://a:26379,b:26379/m");
	config_release(&c);
	CHECK_EQ(parse(&c, err, "redis-cluster://a:7000,b:7001", NULL), 0);
	CHECK_EQ(c.spec_kind, SPEC_REDIS);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "redis-cluster://", NULL), -EINVAL);
	config_release(&c);
}

/* A bad SPEC is refused by the parser, naming the part that is wrong. */
TEST(bad_specs)
{
	static const struct {
		const char *spec;
		const char *must_name[2];
	} cases[] = {
	    {"redis://127.0.0.1:99999", {"port '99999'", "1-65535"}},
	    {"redis://127.0.0.1:0", {"port '0'", "1-65535"}},
	    {"redis://h:1/abc", {"database 'abc'", "0-"}},
	    {"redis://h:1/", {"database ''", "0-"}},
	    {"redis-sentinel://h:1", {"master name", "/MASTER"}},
	    {"redis-sentinel://h:1/", {"master name", "/MASTER"}},
	    {"redis-sentinel://h:1/a:b", {"master name 'a:b'", "[A-Za-z0-9._-]"}},
	    {"redis-cluster://a:1,b c:2", {"host 'b c'", "b c:2"}},
	    {"redis-cluster://a:1,", {"address ''", "host:port"}},
	    {"redis://[::1:6379", {"'[::1:6379'", "]"}},
	    {"redis-cluster://a:1/2", {"redis-cluster://", "db"}},
	};
	struct config c;
	char err[256];
	size_t i, j;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		CHECK_EQ(parse(&c, err, cases[i].spec, NULL), -EINVAL);
		for (j = 0; j < 2 && cases[i].must_name[j]; j++) {
			if (!strstr(err, cases[i].must_name[j]))
				fprintf(stderr, "  message for '%s' was: %s\n", cases[i].spec, err);
			CHECK(strstr(err, cases[i].must_name[j]) != NULL);
		}
		config_release(&c);
	}
	/* the password is never shown */
	CHECK_EQ(parse(&c, err, "redis://:hunter2@h:99999", NULL), -EINVAL);
	CHECK(strstr(err, "port '99999'") != NULL);
	CHECK(strstr(err, "hunter2") == NULL);
	config_release(&c);
}

TEST(options)
{
	struct config c;
	char err[256];

	CHECK_EQ(parse(&c, err, "local",
		       "node=n1,listen=127.0.0.1:9000,store=/dev/shm/s,capacity=512M,prefix=c1,"
		       "allow_overwrite,allow_other,foreground,debug,secret_file=/etc/objfs.key"),
		 0);
	CHECK_STR(c.node, "n1");
	CHECK_STR(c.listen_host, "127.0.0.1");
	CHECK_EQ(c.listen_port, 9000);
	CHECK_STR(c.store_dir, "/dev/shm/s");
	CHECK_EQ(c.capacity, 512ULL << 20);
	CHECK_STR(c.prefix, "c1");
	CHECK(c.allow_overwrite && c.allow_other && c.foreground && c.debug);
	CHECK_STR(c.secret_file, "/etc/objfs.key");
	config_release(&c);

	/* what mount(8) and fstab add */
	CHECK_EQ(parse(&c, err, "local",
		       "rw,defaults,_netdev,noauto,nofail,x-systemd.automount,nosuid,nodev,"
		       "noexec,noatime,ro"),
		 0);
	CHECK(c.nosuid && c.nodev && c.noexec && c.noatime && c.read_only);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "user"), 0);
	CHECK(c.nosuid && c.nodev && c.noexec);
	config_release(&c);
	/* libmount passes user=LOGIN for a user mount of a "user" fstab line */
	CHECK_EQ(parse(&c, err, "local", "user=alice"), 0);
	CHECK(c.nosuid && c.nodev && c.noexec);
	config_release(&c);

	CHECK_EQ(parse(&c, err, "local",
		       "listen=10.0.0.5:0,advertise=node1.example,io_timeout=750,"
		       "serve_bwlimit=200M,prefault,restart"),
		 0);
	CHECK_STR(c.listen_host, "10.0.0.5");
	CHECK_EQ(c.listen_port, 0); /* any free port */
	CHECK_STR(c.advertise, "node1.example");
	CHECK_EQ(c.io_timeout_ms, 750);
	CHECK_EQ(c.serve_bwlimit, 200ULL << 20);
	CHECK(c.prefault);
	CHECK(c.restart);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "serve_bwlimit=0"), 0);
	CHECK_EQ(c.serve_bwlimit, 0);
	CHECK(!c.prefault);
	CHECK(!c.restart);
	CHECK(!c.test_corrupt_serve);
	config_release(&c);
	/* the test hook of tests/integration/100-fanout-corrupt.sh: a flag */
	CHECK_EQ(parse(&c, err, "local", "test_corrupt_serve"), 0);
	CHECK(c.test_corrupt_serve);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "test_corrupt_serve=1"), -EINVAL);
	config_release(&c);

	/* passthrough: auto by default, and as given */
	CHECK_EQ(parse(&c, err, "local", "passthrough=off"), 0);
	CHECK(c.passthrough_off);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "passthrough=auto"), 0);
	CHECK(!c.passthrough_off);
	config_release(&c);

	/* transport: as given; the eager limit */
	CHECK_EQ(parse(&c, err, "local", "transport=tcp,rdma_eager_max=4K"), 0);
	CHECK_STR(c.transport, "tcp");
	CHECK_EQ(c.rdma_eager_max, 4096);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "transport=rdma,rdma_eager_max=1M"), 0);
	CHECK_STR(c.transport, "rdma");
	CHECK_EQ(c.rdma_eager_max, TRANSPORT_RDMA_EAGER_MAX);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "transport=auto,rdma_eager_max=1"), 0);
	CHECK_STR(c.transport, "auto");
	CHECK_EQ(c.rdma_eager_max, 1);
	config_release(&c);

	CHECK_EQ(parse(&c, err, "local", "map_cache=64"), 0);
	CHECK_EQ(c.map_cache, 64);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "capacity=1G"), 0);
	CHECK_EQ(c.map_cache, 0); /* the store's default */
	CHECK_EQ(c.rdma_regs, 0);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "rdma_regs=8"), 0);
	CHECK_EQ(c.rdma_regs, 8);
	CHECK_EQ(c.rdma_poll_us, 0);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "rdma_poll=10000"), 0);
	CHECK_EQ(c.rdma_poll_us, 10000);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "rdma_poll=0"), 0);
	CHECK_EQ(c.rdma_poll_us, 0);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "uid=1000,gid=0,umask=027"), 0);
	CHECK(c.uid_set && c.uid == 1000 && c.gid_set && c.gid == 0);
	CHECK(c.umask_set && c.umask == 027);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "umask=0,uid=4294967294"), 0);
	CHECK(c.umask_set && c.umask == 0 && !c.gid_set && c.uid == 4294967294u);
	config_release(&c);

	CHECK_EQ(parse(&c, err, "local", "listen=[::1]:7000"), 0);
	CHECK_STR(c.listen_host, "::1");
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "listen=:7000"), 0);
	CHECK_STR(c.listen_host, "0.0.0.0");
	config_release(&c);
}

TEST(bad_options)
{
	static const struct {
		const char *opts;
		const char *must_name;
	} cases[] = {
	    {"bogus", "bogus"},
	    {"capacity=12Q", "capacity=12Q"},
	    {"capacity=100", "capacity=100"}, /* below 1M */
	    {"capacity=", "capacity"},
	    {"capacity", "capacity"},
	    {"node=bad name", "node=bad name"},
	    {"node=", "node"},
	    {"listen=nohostport", "listen=nohostport"},
	    {"listen=h:-1", "listen=h:-1"},
	    {"listen=h:7x", "listen=h:7x"},
	    {"advertise=a/b", "advertise=a/b"},
	    {"advertise=", "advertise"},
	    {"io_timeout=5", "io_timeout=5"}, /* below 100 ms */
	    {"io_timeout=1s", "io_timeout=1s"},
	    {"io_timeout=99999999", "io_timeout=99999999"},
	    {"serve_bwlimit=100", "serve_bwlimit=100"}, /* below 4K */
	    {"serve_bwlimit=fast", "serve_bwlimit=fast"},
	    {"prefault=yes", "prefault"},
	    {"restart=1", "restart"},
	    {"passthrough=on", "passthrough=on"},
	    {"passthrough=", "passthrough"},
	    {"passthrough", "passthrough"},
	    {"transport=ib", "transport=ib"},
	    {"transport=TCP", "transport=TCP"},
	    {"transport=", "transport"},
	    {"transport", "transport"},
	    {"transport=rdma,transport=x", "'x'"},
	    {"rdma_eager_max=0", "rdma_eager_max=0"},
	    {"rdma_eager_max=2M", "rdma_eager_max=2M"},
	    {"rdma_eager_max=1025K", "rdma_eager_max=1025K"},
	    {"rdma_eager_max=32Q", "rdma_eager_max=32Q"},
	    {"rdma_eager_max=-1", "rdma_eager_max=-1"},
	    {"rdma_eager_max=", "rdma_eager_max"},
	    {"rdma_poll=10001", "rdma_poll=10001"},
	    {"rdma_poll=-1", "rdma_poll=-1"},
	    {"rdma_poll=5ms", "rdma_poll=5ms"},
	    {"rdma_poll=", "rdma_poll"},
	    {"map_cache=0", "map_cache=0"},
	    {"map_cache=lots", "map_cache=lots"},
	    {"map_cache=1048577", "map_cache=1048577"},
	    {"map_cache=", "map_cache"},
	    {"rdma_regs=0", "rdma_regs=0"},
	    {"rdma_regs=65537", "rdma_regs=65537"},
	    {"rdma_regs=", "rdma_regs"},
	    {"uid=abc", "uid=abc"},
	    {"uid=-1", "uid=-1"},
	    {"uid=4294967295", "uid=4294967295"},
	    {"uid=", "uid"},
	    {"gid=1.5", "gid=1.5"},
	    {"umask=0999", "umask=0999"},
	    {"umask=1000", "umask=1000"},
	    {"umask=12345", "umask=12345"},
	    {"umask=-2", "umask=-2"},
	    {"umask=", "umask"},
	    {"listen=h:65536", "listen=h:65536"},
	    {"store=relative", "store=relative"},
	    {"prefix=a:b", "prefix=a:b"},
	    {"secret_file=rel", "secret_file=rel"},
	    {"allow_overwrite=1", "allow_overwrite"},
	    {"rw,frobnicate,ro", "frobnicate"},
	};
	struct config c;
	char err[256];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		CHECK_EQ(parse(&c, err, "local", cases[i].opts), -EINVAL);
		if (!strstr(err, cases[i].must_name))
			fprintf(stderr, "  message for '%s' was: %s\n", cases[i].opts, err);
		CHECK(strstr(err, cases[i].must_name) != NULL);
		config_release(&c);
	}
}

/* Every -o counts; an option may come twice only with the same value. */
TEST(twice)
{
	struct config c;
	char err[256];
	char *two[] = {(char *)"objfsd",
		       (char *)"local",
		       (char *)"/a",
		       (char *)"-o",
		       (char *)"capacity=64M,allow_overwrite",
		       (char *)"-onode=n1,capacity=64M",
		       NULL};
	char *clash[] = {(char *)"objfsd",
			 (char *)"local",
			 (char *)"/a",
			 (char *)"-o",
			 (char *)"store=/dev/shm/a",
			 (char *)"-o",
			 (char *)"node=n1,store=/dev/shm/b",
			 NULL};

	memset(&c, 0, sizeof(c));
	CHECK_EQ(config_parse_argv(&c, 6, two, err, sizeof(err)), 0);
	CHECK_EQ(c.capacity, 64ULL << 20);
	CHECK(c.allow_overwrite);
	CHECK_STR(c.node, "n1");
	config_release(&c);
	CHECK_EQ(config_parse_argv(&c, 7, clash, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "'store'") && strstr(err, "'/dev/shm/a'") && strstr(err, "'/dev/shm/b'"));
	config_release(&c);

	CHECK_EQ(parse(&c, err, "local", "capacity=64M,capacity=128M"), -EINVAL);
	CHECK(strstr(err, "'capacity'") && strstr(err, "'64M'") && strstr(err, "'128M'"));
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "passthrough=off,passthrough=auto"), -EINVAL);
	CHECK(strstr(err, "'passthrough'") != NULL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "transport=rdma,transport=tcp"), -EINVAL);
	CHECK(strstr(err, "'transport'") != NULL);
	config_release(&c);
	/* the same value twice, flags twice, and what mount(8) may repeat */
	CHECK_EQ(parse(&c, err, "local",
		       "allow_overwrite,ro,ro,allow_overwrite,prefix=p,prefix=p,rw,rw,"
		       "x-systemd.requires=a,x-systemd.requires=b,comment=x,comment=y"),
		 0);
	CHECK(c.allow_overwrite && c.read_only);
	CHECK_STR(c.prefix, "p");
	config_release(&c);
}

TEST(argv)
{
	struct config c;
	char err[256];
	char *help[] = {(char *)"objfsd", (char *)"--help", NULL};
	char *one[] = {(char *)"objfsd", (char *)"local", NULL};
	char *three[] = {(char *)"objfsd", (char *)"local", (char *)"/a", (char *)"/b", NULL};
	char *flags[] = {(char *)"objfsd",	  (char *)"-f", (char *)"local", (char *)"/a",
			 (char *)"-ocapacity=2G", NULL};
	char *dangling[] = {(char *)"objfsd", (char *)"local", (char *)"/a", (char *)"-o", NULL};

	memset(&c, 0, sizeof(c));
	CHECK_EQ(config_parse_argv(&c, 2, help, err, sizeof(err)), -ECANCELED);
	config_release(&c);
	CHECK_EQ(config_parse_argv(&c, 2, one, err, sizeof(err)), -EINVAL);
	config_release(&c);
	CHECK_EQ(config_parse_argv(&c, 4, three, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "/b") != NULL);
	config_release(&c);
	CHECK_EQ(config_parse_argv(&c, 5, flags, err, sizeof(err)), 0);
	CHECK(c.foreground);
	CHECK_EQ(c.capacity, 2ULL << 30);
	config_release(&c);
	CHECK_EQ(config_parse_argv(&c, 4, dangling, err, sizeof(err)), -EINVAL);
	config_release(&c);
}

TEST(defaults)
{
	struct config c;
	char err[256];

	CHECK_EQ(parse(&c, err, "local", "node=n7"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK_STR(c.prefix, "objfs");
	CHECK_EQ(c.capacity, CONFIG_DEFAULT_CAPACITY);
	CHECK_STR(c.store_dir, "/dev/shm/objfs-objfs-n7");
	CHECK_STR(c.rundir, "/run/objfs/objfs-n7");
	CHECK_EQ(c.listen_port, CONFIG_DEFAULT_PORT);
	CHECK(!c.passthrough_off);
	CHECK(c.prefault);
	CHECK_STR(c.transport, "auto");
	CHECK_EQ(c.rdma_eager_max, 0); /* the transport's default */
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "node=n7,noprefault"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK(!c.prefault);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", NULL), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK(c.node[0] != '\0'); /* from the hostname */
	config_release(&c);
}

/* pack_max (issue 24): 0 or 64 to 1M, at most rdma_eager_max; by
 * default 32K, or rdma_eager_max if less */
TEST(pack_max)
{
	struct config c;
	char err[256];

	CHECK_EQ(parse(&c, err, "local", "node=n,pack_max=16K"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK_EQ(c.pack_max, 16384);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "node=n,pack_max=0"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK_EQ(c.pack_max, 0);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "node=n"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK_EQ(c.pack_max, CONFIG_PACK_MAX_DEFAULT);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "node=n,rdma_eager_max=8K"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK_EQ(c.pack_max, 8192);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "node=n,rdma_eager_max=32"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK_EQ(c.pack_max, 0); /* below the smallest slot */
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "node=n,pack_max=64K,rdma_eager_max=64K"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), 0);
	CHECK_EQ(c.pack_max, 65536);
	config_release(&c);

	CHECK_EQ(parse(&c, err, "local", "node=n,pack_max=64K"), 0);
	CHECK_EQ(config_finish(&c, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "rdma_eager_max") != NULL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "pack_max=63"), -EINVAL);
	CHECK(strstr(err, "pack_max=63") != NULL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "pack_max=2M"), -EINVAL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "pack_max=x"), -EINVAL);
	config_release(&c);
	CHECK_EQ(parse(&c, err, "local", "pack_max"), -EINVAL);
	CHECK(strstr(err, "needs a value") != NULL);
	config_release(&c);
}

int main(void)
{
	RUN(specs);
	RUN(bad_specs);
	RUN(options);
	RUN(bad_options);
	RUN(twice);
	RUN(argv);
	RUN(defaults);
	RUN(pack_max);
	return tap_done();
}
