/*
 * test-meta-route: the pool on Redis Cluster and Redis Sentinel
 * (meta_route.c, meta_sentinel.c, meta_pool.c's target and retries).
 *
 * Starts its own topologies on free loopback ports in a mkdtemp()
 * directory: three cluster masters made one cluster by redis-cli --cluster
 * create, then a master, a replica and three sentinels, then a fake
 * Redis 6.2 (a thread that answers INFO) for the version check.  Every
 * wait is bounded; every server is killed at the end (and by
 * PR_SET_PDEATHSIG if the test dies).  The whole program takes about 12 s.
 */
#include "meta-harness.h"

#include <poll.h>
#include <sys/stat.h>

#include "meta_i.h"

#define PREFIX "t-route"
#define NSRV 8

static struct {
	int port;
	pid_t pid;
} S[NSRV];

/* A reply of server @i to a command of its own connection (NULL if none). */
static redisReply *scmd(int i, const char *fmt, ...)
{
	struct timeval tv = {1, 0};
	redisContext *c = redisConnectWithTimeout("127.0.0.1", S[i].port, tv);
	redisReply *rep = NULL;
	va_list ap;

	if (c && !c->err) {
		redisSetTimeout(c, tv);
		va_start(ap, fmt);
		rep = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	if (c)
		redisFree(c);
	return rep;
}

/* The same as a string in @buf ("" if none; errors as they are). */
static const char *sget(int i, char *buf, size_t len, const char *fmt, ...)
{
	struct timeval tv = {1, 0};
	redisContext *c = redisConnectWithTimeout("127.0.0.1", S[i].port, tv);
	redisReply *rep = NULL;
	va_list ap;

	buf[0] = '\0';
	if (c && !c->err) {
		redisSetTimeout(c, tv);
		va_start(ap, fmt);
		rep = redisvCommand(c, fmt, ap);
		va_end(ap);
	}
	if (rep && rep->type == REDIS_REPLY_INTEGER)
		snprintf(buf, len, "%lld", rep->integer);
	else if (rep && rep->str)
		snprintf(buf, len, "%s", rep->str);
	if (rep)
		freeReplyObject(rep);
	if (c)
		redisFree(c);
	return buf;
}

/* Start server @i (a sentinel if @sentinel) with @conf added to its
 * config file; wait until it answers PING (at most 10 s). */
static void srv_start(int i, bool sentinel, const char *conf)
{
	char dir[128], path[160], buf[32];
	FILE *f;
	int k;

	/* a cluster node's bus is on port + 10000 */
	for (k = 0; k < 100 && (!S[i].port || S[i].port > 55000); k++)
		S[i].port = free_port();
	snprintf(dir, sizeof(dir), "%s/%d", R.dir, i);
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/redis.conf", dir);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	fprintf(f, "port %d\nbind 127.0.0.1\ndir %s\nlogfile %s/log\n%s%s\n", S[i].port, dir, dir,
		sentinel ? "" : "save \"\"\nappendonly no\n", conf);
	fclose(f);
	S[i].pid = fork();
	if (S[i].pid == 0) {
		int fd = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (sentinel)
			execlp("redis-server", "redis-server", path, "--sentinel", (char *)NULL);
		else
			execlp("redis-server", "redis-server", path, (char *)NULL);
		_exit(127);
	}
	for (k = 0; k < 500; k++) {
		if (!strcmp(sget(i, buf, sizeof(buf), "PING"), "PONG"))
			return;
		usleep(20000);
	}
	fprintf(stderr, "server %d on port %d did not start\n", i, S[i].port);
	exit(1);
}

static void srv_kill(int i)
{
	if (S[i].pid > 0) {
		kill(S[i].pid, SIGKILL);
		waitpid(S[i].pid, NULL, 0);
	}
	S[i].pid = 0;
}

/* Wait up to @ms for server @i's reply to @cmd to contain @want. */
static bool srv_wait(int i, const char *cmd, const char *want, int ms)
{
	int64_t t0 = util_mono_ns();
	char buf[8192];

	do {
		if (strstr(sget(i, buf, sizeof(buf), cmd), want))
			return true;
		usleep(50000);
	} while (ms_since(t0) < ms);
	return false;
}

static struct meta *mk_url(const char *url, unsigned timeout_ms)
{
	struct meta_config cfg = {
	    .url = url, .prefix = PREFIX, .node = "node-a", .timeout_ms = timeout_ms};
	struct meta *m = meta_new(&cfg, NULL);

	if (!m) {
		fprintf(stderr, "meta_new '%s' failed\n", url);
		exit(1);
	}
	return m;
}

/* The target port of @m's pool. */
static int tgt_port(struct meta *m)
{
	int port;

	pthread_mutex_lock(&m->lock);
	port = m->tgt.port;
	pthread_mutex_unlock(&m->lock);
	return port;
}

/* One plain command on @m's pool: 0 and the reply, or a negative errno. */
static int pcmd(struct meta *m, redisReply **ret, const char *a0, const char *a1, const char *a2)
{
	struct args a = {0};
	struct conn *c;
	int r;

	a.v[a.n++] = a0;
	a.v[a.n++] = a1;
	if (a2)
		a.v[a.n++] = a2;
	for (r = 0; r < a.n; r++)
		a.len[r] = strlen(a.v[r]);
	r = meta_pool_get_call(m, &c);
	if (r < 0)
		return r;
	r = meta_pool_cmd(m, c, &a, ret);
	meta_pool_put(m, c);
	return r;
}

/* ---- without servers ---- */

TEST(crc16)
{
	static const char *const keys[] = {"foo",
					   "{t-route}:d:1",
					   "{user1000}.following",
					   "foo{}{bar}",
					   "foo{{bar}}zap",
					   "foo{bar}{zap}",
					   "{}",
					   "a{b"};

	CHECK_EQ(meta_route_crc16("123456789", 9), 0x31C3);
	CHECK_EQ(meta_route_crc16("", 0), 0);
	/* the examples of the Redis Cluster specification */
	CHECK_EQ(meta_route_keyslot("{user1000}.following", 20),
		 meta_route_keyslot("{user1000}.followers", 20));
	CHECK_EQ(meta_route_keyslot("foo{}{bar}", 10), meta_route_crc16("foo{}{bar}", 10) & 16383);
	CHECK_EQ(meta_route_keyslot("foo{{bar}}zap", 13), meta_route_crc16("{bar", 4) & 16383);
	CHECK_EQ(meta_route_keyslot("foo{bar}{zap}", 13), meta_route_crc16("bar", 3) & 16383);
	/* against a real node */
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		char buf[32];

		sget(0, buf, sizeof(buf), "CLUSTER KEYSLOT %s", keys[i]);
		CHECK_EQ(atoi(buf), meta_route_keyslot(keys[i], strlen(keys[i])));
	}
}

TEST(urls)
{
	static const struct {
		const char *url, *shown;
		enum meta_engine engine;
		unsigned nseeds, db;
		const char *master;
	} good[] = {
	    {"redis://h:1/2", "redis://h:1/2", ENGINE_REDIS, 1, 2, NULL},
	    {"redis://[::1]:7000", "redis://[::1]:7000", ENGINE_REDIS, 1, 0, NULL},
	    {"redis-sentinel://a:26379,b:26380,[::1]:3/mymaster",
	     "redis-sentinel://a:26379,b:26380,[::1]:3/mymaster", ENGINE_SENTINEL, 3, 0,
	     "mymaster"},
	    {"redis-sentinel://:pw@a/m.x_y-z/5", "redis-sentinel://:***@a/m.x_y-z/5",
	     ENGINE_SENTINEL, 1, 5, "m.x_y-z"},
	    {"redis-cluster://a:7000,b:7001,c", "redis-cluster://a:7000,b:7001,c", ENGINE_CLUSTER,
	     3, 0, NULL},
	    {"redis-cluster://:s@cr@t@a:7000", "redis-cluster://:***@a:7000", ENGINE_CLUSTER, 1, 0,
	     NULL},
	};
	static const char *const bad[] = {
	    "redis-sentinel://a:1",
	    "redis-sentinel://a:1/",
	    "redis-sentinel://a:1/bad name",
	    "redis-sentinel://a:1/m/x",
	    "redis-sentinel://a:1/m/1/2",
	    "redis-sentinel://a:1,,b:2/m",
	    "redis-sentinel://a:0/m",
	    "redis-sentinel://user:pw@a:1/m",
	    "redis-sentinel:///m",
	    "redis-sentinel://a:1/"
	    "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm",
	    "redis-cluster://a:1/0",
	    "redis-cluster://a:1/",
	    "redis-cluster://",
	    "redis-cluster://a:1,",
	    "redis-cluster://a:99999",
	    "redis-cluster://[::1:7000",
	    "redis-cluster://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q",
	    "redis://a:1,b:2",
	    "rediss://a:1",
	};
	struct meta_config cfg = {.node = "n1"};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(good); i++) {
		struct meta *m;

		cfg.url = good[i].url;
		m = meta_new(&cfg, NULL);
		CHECK(m != NULL);
		if (!m) {
			fprintf(stderr, "  rejected '%s'\n", good[i].url);
			continue;
		}
		CHECK_STR(meta_url(m), good[i].shown);
		CHECK_EQ(m->engine, good[i].engine);
		CHECK_EQ(m->nseeds, good[i].nseeds);
		CHECK_EQ(m->db, good[i].db);
		if (good[i].master)
			CHECK_STR(m->master, good[i].master);
		meta_free(m);
	}
	cfg.url = "redis-cluster://:s@cr@t@a:7000";
	{
		struct meta *m = meta_new(&cfg, NULL);

		CHECK(m && !strcmp(m->password, "s@cr@t") && m->seeds[0].port == 7000);
		meta_free(m);
	}
	cfg.url = "redis-sentinel://a,[::1]/m";
	{
		struct meta *m = meta_new(&cfg, NULL);

		CHECK(m && m->seeds[0].port == 26379 && !strcmp(m->seeds[1].host, "::1"));
		meta_free(m);
	}
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		int err = 0;
		struct meta *m;

		cfg.url = bad[i];
		m = meta_new(&cfg, &err);
		CHECK(m == NULL);
		CHECK_EQ(err, -EINVAL);
		if (m)
			fprintf(stderr, "  accepted '%s'\n", bad[i]);
		meta_free(m);
	}
}

TEST(redirects)
{
	static const struct {
		const char *err;
		enum redirect kind;
		const char *host;
		int port;
	} cases[] = {
	    {"MOVED 3999 127.0.0.1:6381", RD_MOVED, "127.0.0.1", 6381},
	    {"ASK 3999 10.0.0.2:7000", RD_ASK, "10.0.0.2", 7000},
	    {"MOVED 1 ::1:7001", RD_MOVED, "::1", 7001},
	    {"MOVED 1 nohost", RD_NONE, NULL, 0},
	    {"TRYAGAIN Multiple keys request during rehashing of slot", RD_TRYAGAIN, NULL, 0},
	    {"CLUSTERDOWN Hash slot not served", RD_CLUSTERDOWN, NULL, 0},
	    {"READONLY You can't write against a read only replica.", RD_RESOLVE, NULL, 0},
	    {"LOADING Redis is loading the dataset in memory", RD_RESOLVE, NULL, 0},
	    {"MASTERDOWN Link with MASTER is down", RD_RESOLVE, NULL, 0},
	    {"NOSCRIPT No matching script.", RD_NOSCRIPT, NULL, 0},
	    {"ERR Script attempted to access a non local key in a cluster node", RD_NONLOCAL, NULL,
	     0},
	    {"ERR ENOENT", RD_NONE, NULL, 0},
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		redisReply rep = {.type = REDIS_REPLY_ERROR, .str = (char *)cases[i].err};
		struct addr a = {0};

		CHECK_EQ(meta_redirect_kind(&rep, &a), cases[i].kind);
		if (cases[i].host) {
			CHECK_STR(a.host, cases[i].host);
			CHECK_EQ(a.port, cases[i].port);
		}
	}
}

/* ---- Redis Cluster ---- */

/* The index (0..2) of the master that serves the namespace's slot. */
static int slot_owner(void)
{
	char buf[256];
	int i;

	for (i = 0; i < 3; i++)
		if (!strcmp(sget(i, buf, sizeof(buf), "SET {" PREFIX "}:probe 1"), "OK"))
			return i;
	return -1;
}

static void cluster_start(void)
{
	char cmd[300];
	int i;

	for (i = 0; i < 3; i++)
		srv_start(i, false,
			  "cluster-enabled yes\ncluster-config-file nodes.conf\n"
			  "cluster-node-timeout 2000\ncluster-require-full-coverage no");
	snprintf(cmd, sizeof(cmd),
		 "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d "
		 "--cluster-yes >%s/cluster-create.log 2>&1",
		 S[0].port, S[1].port, S[2].port, R.dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "redis-cli --cluster create failed (see %s)\n", R.dir);
		exit(1);
	}
	for (i = 0; i < 3; i++)
		if (!srv_wait(i, "CLUSTER INFO", "cluster_state:ok", 10000)) {
			fprintf(stderr, "cluster did not come up\n");
			exit(1);
		}
}

/* Move the namespace's slot from node @from to node @to by hand, as
 * redis-cli --cluster reshard does; @step runs between the stages:
 * 1 importing/migrating set, 2 some keys moved, 3 done. */
static void migrate(int from, int to, void (*step)(int stage, int from, int to))
{
	unsigned slot = meta_route_crc16(PREFIX, strlen(PREFIX)) & 16383;
	char idf[64], idt[64];
	redisReply *keys;
	size_t i;
	int n;

	sget(from, idf, sizeof(idf), "CLUSTER MYID");
	sget(to, idt, sizeof(idt), "CLUSTER MYID");
	freeReplyObject(scmd(to, "CLUSTER SETSLOT %u IMPORTING %s", slot, idf));
	freeReplyObject(scmd(from, "CLUSTER SETSLOT %u MIGRATING %s", slot, idt));
	step(1, from, to);
	/* the directory of the root first: then a script that needs it and
	 * the counter finds one of them here and one there */
	freeReplyObject(
	    scmd(from, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS {" PREFIX "}:d:1", S[to].port, ""));
	step(2, from, to);
	keys = scmd(from, "CLUSTER GETKEYSINSLOT %u 1000", slot);
	for (i = 0; keys && keys->type == REDIS_REPLY_ARRAY && i < keys->elements; i++)
		freeReplyObject(scmd(from, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS %b", S[to].port, "",
				     keys->element[i]->str, keys->element[i]->len));
	if (keys)
		freeReplyObject(keys);
	for (n = 0; n < 3; n++)
		freeReplyObject(scmd(n, "CLUSTER SETSLOT %u NODE %s", slot, idt));
	step(3, from, to);
}

static struct meta *cm; /* the meta of the cluster cases */

static void migrate_step(int stage, int from, int to)
{
	struct meta_entry e;
	redisReply *rep = NULL;
	char buf[64];
	int64_t t0;
	int r;

	if (stage == 1) {
		/* a key the old owner lacks: ASK, answered by the new one */
		CHECK_EQ(pcmd(cm, &rep, "SET", "{" PREFIX "}:asked", "yes"), 0);
		CHECK(rep && rep->type == REDIS_REPLY_STATUS);
		if (rep)
			freeReplyObject(rep);
		CHECK_EQ(pcmd(cm, &rep, "GET", "{" PREFIX "}:asked", NULL), 0);
		CHECK(rep && rep->str && !strcmp(rep->str, "yes"));
		if (rep)
			freeReplyObject(rep);
		/* a script whose keys are all still here runs here */
		CHECK_EQ(meta_lookup(cm, 1, "d1", &e), 0);
	} else if (stage == 2) {
		/* keys on both sides: TRYAGAIN until the time budget is
		 * spent (2 x 500 ms), then -EIO */
		t0 = util_mono_ns();
		r = meta_lookup(cm, 1, "d1", &e);
		CHECK_EQ(r, -EIO);
		CHECK(ms_since(t0) >= 900 && ms_since(t0) < 2500);
	} else {
		CHECK(strcmp(sget(from, buf, sizeof(buf), "GET {" PREFIX "}:asked"), "yes"));
	}
}

TEST(cluster)
{
	char url[200], buf[64];
	struct inval_log l;
	struct meta_entry e, e2;
	struct meta *m2;
	redisReply *rep;
	uint64_t gen;
	int owner, other, r;
	int64_t t0;

	owner = slot_owner();
	CHECK(owner >= 0);
	if (owner < 0)
		return;
	other = (owner + 1) % 3;
	/* seeded with a node that is not the owner: the map finds it */
	snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d", S[other].port);
	cm = mk_url(url, 500);
	CHECK_EQ(meta_connect(cm), 0);
	CHECK_EQ(tgt_port(cm), S[owner].port);
	CHECK_EQ(meta_mkdir(cm, 1, "d1", 1, &e), 0);
	CHECK_EQ(meta_lookup(cm, 1, "d1", &e2), 0);
	CHECK_EQ(e2.id, e.id);
	CHECK_STR(sget(owner, buf, sizeof(buf), "HEXISTS {" PREFIX "}:d:1 d1"), "1");
	/* a plain command in the slot, and one outside it */
	CHECK_EQ(pcmd(cm, &rep, "SET", "{" PREFIX "}:x", "1"), 0);
	freeReplyObject(rep);
	CHECK_EQ(pcmd(cm, &rep, "SET", "elsewhere", "1"), -EXDEV);

	/* the invalidations of the slot's master */
	snprintf(url, sizeof(url), "redis-cluster://127.0.0.1:%d,127.0.0.1:%d", S[0].port,
		 S[1].port);
	m2 = mk_url(url, 500);
	inval_init(&l);
	CHECK_EQ(meta_subscribe(m2, inval_cb, &l), 0);
	CHECK_EQ(meta_mkdir(cm, 1, "d2", 1, &e), 0);
	CHECK_EQ(inval_wait(&l, 1, 3000), 1);
	CHECK_EV(&l, 0, "mkdir", 1, "d2", e.id);

	/* move the slot: ASK and TRYAGAIN on the way, then MOVED */
	gen = meta_pool_gen(cm);
	migrate(owner, other, migrate_step);
	CHECK_EQ(meta_lookup(cm, 1, "d1", &e2), 0);
	CHECK_EQ(tgt_port(cm), S[other].port);
	CHECK(meta_pool_gen(cm) > gen);
	CHECK_STR(sget(other, buf, sizeof(buf), "HEXISTS {" PREFIX "}:d:1 d1"), "1");
	/* the subscriber follows: a gap, then the new owner's messages */
	CHECK_EQ(meta_mkdir(cm, 1, "d3", 1, &e), 0);
	t0 = util_mono_ns();
	while (ms_since(t0) < 5000) {
		pthread_mutex_lock(&l.lock);
		r = l.n > 1 && !strcmp(l.ev[l.n - 1].name, "d3");
		pthread_mutex_unlock(&l.lock);
		if (r)
			break;
		/* the subscriber may have moved after the mkdir: again */
		meta_rmdir(cm, 1, "d3", NULL);
		CHECK_EQ(meta_mkdir(cm, 1, "d3", 1, &e), 0);
		usleep(100000);
	}
	CHECK(ms_since(t0) < 5000);
	CHECK(l.n >= 2 && !strcmp(l.ev[1].kind, "(gap)"));

	/* the slot loses its master: -EIO within the budget, then back */
	freeReplyObject(scmd(other, "CLUSTER DELSLOTS %u", meta_route_crc16(PREFIX, 7) & 16383));
	t0 = util_mono_ns();
	CHECK_EQ(meta_lookup(cm, 1, "d1", &e2), -EIO);
	CHECK(ms_since(t0) < 2500);
	freeReplyObject(scmd(other, "CLUSTER ADDSLOTS %u", meta_route_crc16(PREFIX, 7) & 16383));
	t0 = util_mono_ns();
	while ((r = meta_lookup(cm, 1, "d1", &e2)) != 0 && ms_since(t0) < 10000)
		usleep(50000);
	CHECK_EQ(r, 0);

	meta_unsubscribe(m2);
	meta_free(m2);
	meta_free(cm);
	pthread_mutex_destroy(&l.lock);
}

/* ---- Redis Sentinel ---- */

TEST(sentinel)
{
	char conf[300], url[300];
	struct inval_log l;
	struct meta *m, *idle;
	struct meta_entry e;
	uint64_t gen;
	int64_t t0;
	int i, r;

	/* 3: master, 4: replica, 5..7: sentinels */
	srv_start(3, false, "");
	snprintf(conf, sizeof(conf), "replicaof 127.0.0.1 %d", S[3].port);
	srv_start(4, false, conf);
	snprintf(conf, sizeof(conf),
		 "sentinel monitor m 127.0.0.1 %d 2\nsentinel down-after-milliseconds m 1000\n"
		 "sentinel failover-timeout m 5000",
		 S[3].port);
	for (i = 5; i < 8; i++)
		srv_start(i, true, conf);
	for (i = 5; i < 8; i++) {
		CHECK(srv_wait(i, "INFO sentinel", "slaves=1", 15000));
		CHECK(srv_wait(i, "INFO sentinel", "sentinels=3", 15000));
	}
	CHECK(srv_wait(4, "INFO replication", "master_link_status:up", 10000));

	snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/m",
		 S[5].port, S[6].port, S[7].port);
	m = mk_url(url, 500);
	idle = mk_url(url, 500);
	CHECK_EQ(meta_connect(m), 0);
	CHECK_EQ(meta_connect(idle), 0);
	CHECK_EQ(tgt_port(m), S[3].port);
	CHECK_EQ(meta_mkdir(m, 1, "s1", 1, &e), 0);

	/* a replica named as the master is refused (ROLE) and the call
	 * goes back to the sentinels' master */
	{
		struct addr a = {.port = S[4].port};

		snprintf(a.host, sizeof(a.host), "127.0.0.1");
		meta_pool_target_set(m, &a, "test");
		t0 = util_mono_ns();
		while ((r = meta_lookup(m, 1, "s1", &e)) != 0 && ms_since(t0) < 3000)
			usleep(20000);
		CHECK_EQ(r, 0);
		CHECK_EQ(tgt_port(m), S[3].port);
	}
	CHECK(srv_wait(4, "EXISTS {" PREFIX "}:d:1", "1", 5000));

	/* the master dies: calls fail during the failover, then go on */
	inval_init(&l);
	CHECK_EQ(meta_subscribe(idle, inval_cb, &l), 0);
	gen = meta_pool_gen(idle);
	srv_kill(3);
	t0 = util_mono_ns();
	while ((r = meta_lookup(m, 1, "s1", &e)) != 0 && ms_since(t0) < 20000) {
		CHECK_EQ(r, -EIO);
		usleep(50000);
	}
	CHECK_EQ(r, 0);
	CHECK_EQ(tgt_port(m), S[4].port);
	CHECK_EQ(meta_mkdir(m, 1, "s2", 1, &e), 0);
	/* a meta that made no call followed +switch-master on its own */
	t0 = util_mono_ns();
	while (tgt_port(idle) != S[4].port && ms_since(t0) < 5000)
		usleep(20000);
	CHECK_EQ(tgt_port(idle), S[4].port);
	CHECK(meta_pool_gen(idle) > gen);
	/* and its subscriber with it: a gap, then the new master's news */
	t0 = util_mono_ns();
	do {
		meta_rmdir(m, 1, "s3", NULL);
		CHECK_EQ(meta_mkdir(m, 1, "s3", 1, &e), 0);
		pthread_mutex_lock(&l.lock);
		r = l.n > 0 && !strcmp(l.ev[l.n - 1].name, "s3");
		pthread_mutex_unlock(&l.lock);
	} while (!r && ms_since(t0) < 5000 && usleep(100000) == 0);
	CHECK(r);
	CHECK(l.n > 0 && !strcmp(l.ev[0].kind, "(gap)"));
	meta_unsubscribe(idle);
	pthread_mutex_destroy(&l.lock);
	meta_free(idle);
	meta_free(m);
}

/* ---- versions ---- */

/* A fake Redis 6.2 on @arg's listening socket: it answers the first
 * command of one client (the INFO server of a new pool connection, when
 * there is no password) and waits for it to hang up. */
static void *old_redis(void *arg)
{
	static const char info[] = "# Server\r\nredis_version:6.2.14\r\n";
	int lfd = *(int *)arg, fd;
	char buf[4096], out[128];
	struct pollfd p;

	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 5000) > 0 && read(fd, buf, sizeof(buf)) > 0) {
		snprintf(out, sizeof(out), "$%zu\r\n%s\r\n", strlen(info), info);
		if (write(fd, out, strlen(out)) < 0)
			perror("write");
		while (poll(&p, 1, 5000) > 0 && read(fd, buf, sizeof(buf)) > 0)
			;
	}
	close(fd);
	return NULL;
}

TEST(version)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	char url[100], err[256];
	struct meta *m;
	pthread_t t;
	int lfd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	      listen(lfd, 4) == 0 && getsockname(lfd, (struct sockaddr *)&sa, &len) == 0);
	pthread_create(&t, NULL, old_redis, &lfd);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", ntohs(sa.sin_port));
	m = mk_url(url, 1000);
	CHECK_EQ(meta_connect(m), -EIO);
	meta_last_error(m, err, sizeof(err));
	CHECK(strstr(err, "objfs needs Redis 7.0 or later") != NULL);
	CHECK(strstr(err, "runs 6.2.14") != NULL);
	meta_free(m);
	pthread_join(t, NULL);
	close(lfd);

	/* a server whose INFO fails is refused too */
	srv_start(3, false, "rename-command INFO \"\"");
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", S[3].port);
	m = mk_url(url, 500);
	CHECK_EQ(meta_connect(m), -EIO);
	meta_last_error(m, err, sizeof(err));
	CHECK(strstr(err, "INFO server") != NULL);
	meta_free(m);
	srv_kill(3);
}

int main(void)
{
	int i;

	harness_begin("route");
	RUN(urls);
	RUN(redirects);
	cluster_start();
	RUN(crc16);
	RUN(cluster);
	for (i = 0; i < 3; i++)
		srv_kill(i);
	RUN(sentinel);
	for (i = 3; i < NSRV; i++)
		srv_kill(i);
	S[3].port = 0;
	RUN(version);
	return harness_end();
}
