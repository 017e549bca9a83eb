/*
 * test-meta: unit tests of the Redis location service.
 *
 * main() starts a private redis-server on a unix socket in a mkdtemp()
 * directory (skip if redis-server is not installed) and kills it at the
 * end.  Each case uses its own key prefix, so cases do not see each
 * other's namespace.  Cases damage records behind meta's back through a
 * raw hiredis connection, knowing the key schema of meta.h.  The cases
 * that kill, stop or flush Redis run last; "auth" lets the server listen
 * on a loopback TCP port for a moment to try AUTH and SELECT.
 */
#include "meta-harness.h"

#include "log.h"

TEST(urls)
{
	static const struct {
		const char *url;
		int err;
		const char *shown;
	} cases[] = {
	    {"redis://localhost:6380", 0, "redis://localhost:6380"},
	    {"redis://localhost", 0, "redis://localhost"},
	    {"redis://10.0.0.1:6379/3", 0, "redis://10.0.0.1:6379/3"},
	    {"redis://:s3cret@db.example:7000/2", 0, "redis://:***@db.example:7000/2"},
	    {"redis://:p@ss@host", 0, "redis://:***@host"},
	    {"redis://[::1]:6379", 0, "redis://[::1]:6379"},
	    {"unix:/run/objfs/redis.sock", 0, "unix:/run/objfs/redis.sock"},
	    {"http://localhost:6379", -EINVAL, NULL},
	    {"redis:/localhost", -EINVAL, NULL},
	    {"redis://", -EINVAL, NULL},
	    {"redis://:6379", -EINVAL, NULL},
	    {"redis://host:0", -EINVAL, NULL},
	    {"redis://host:65536", -EINVAL, NULL},
	    {"redis://host:", -EINVAL, NULL},
	    {"redis://host:12x", -EINVAL, NULL},
	    {"redis://host:6379/", -EINVAL, NULL},
	    {"redis://host:6379/x", -EINVAL, NULL},
	    {"redis://host:6379/1/2", -EINVAL, NULL},
	    {"redis://host:6379?db=1", -EINVAL, NULL},
	    {"redis://host name", -EINVAL, NULL},
	    {"redis://user:pw@host", -EINVAL, NULL},
	    {"redis://:@host", -EINVAL, NULL},
	    {"redis://[::1", -EINVAL, NULL},
	    {"unix:", -EINVAL, NULL},
	    {"unix:relative.sock", -EINVAL, NULL},
	    {"", -EINVAL, NULL},
	};
	struct meta_config cfg = {.node = "n1"};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meta *m;
		int err = 12345;

		cfg.url = cases[i].url;
		m = meta_new(&cfg, &err);
		if (cases[i].err) {
			CHECK(m == NULL);
			CHECK_EQ(err, cases[i].err);
			if (m)
				fprintf(stderr, "  accepted '%s'\n", cases[i].url);
		} else {
			CHECK(m != NULL);
			if (m)
				CHECK_STR(meta_url(m), cases[i].shown);
			else
				fprintf(stderr, "  rejected '%s'\n", cases[i].url);
		}
		meta_free(m);
	}

	/* prefix and node name */
	cfg.url = "unix:/x.sock";
	{
		static const struct {
			const char *prefix, *node;
			bool ok;
		} pn[] = {
		    {NULL, "n1", true},	  {"a.b_c-D9", "n1", true}, {"", "n1", false},
		    {"a:b", "n1", false}, {"a{b}", "n1", false},    {"objfs", NULL, false},
		    {"objfs", "", false}, {"objfs", "-bad", false}, {"objfs", "bad name", false},
		};
		char long_prefix[80];

		for (i = 0; i < ARRAY_SIZE(pn); i++) {
			struct meta *m;
			int err = 0;

			cfg.prefix = pn[i].prefix;
			cfg.node = pn[i].node;
			m = meta_new(&cfg, &err);
			CHECK_EQ(m != NULL, pn[i].ok);
			if (!pn[i].ok)
				CHECK_EQ(err, -EINVAL);
			meta_free(m);
		}
		memset(long_prefix, 'p', 65);
		long_prefix[65] = '\0';
		cfg.prefix = long_prefix;
		cfg.node = "n1";
		CHECK(meta_new(&cfg, NULL) == NULL);
		long_prefix[64] = '\0';
		meta_free(meta_new(&cfg, NULL));
	}
	meta_free(NULL);
}

TEST(dead_socket)
{
	struct meta_config cfg = {
	    .url = "unix:/nonexistent/objfs-test/redis.sock",
	    .node = "n1",
	    .timeout_ms = 500,
	};
	struct inval_log l;
	struct meta_entry e;
	char err[256];
	struct meta *m = meta_new(&cfg, NULL);
	int64_t t0;

	CHECK(m != NULL);
	if (!m)
		return;
	t0 = util_mono_ns();
	CHECK_EQ(meta_connect(m), -EIO);
	CHECK(ms_since(t0) < 400);
	CHECK(!meta_is_up(m));
	meta_last_error(m, err, sizeof(err));
	CHECK(strstr(err, "No such file") != NULL);
	/* in backoff: immediate */
	t0 = util_mono_ns();
	CHECK_EQ(meta_getattr(m, 1, &e), -EIO);
	CHECK_EQ(meta_lookup(m, 1, "x", &e), -EIO);
	CHECK(ms_since(t0) < 50);
	/* a subscriber keeps trying in its thread, and stops at once */
	inval_init(&l);
	t0 = util_mono_ns();
	CHECK_EQ(meta_subscribe(m, inval_cb, &l), 0);
	CHECK(ms_since(t0) < 400);
	usleep(250000);
	t0 = util_mono_ns();
	meta_unsubscribe(m);
	CHECK(ms_since(t0) < 100);
	CHECK_EQ(inval_count(&l), 0);
	pthread_mutex_destroy(&l.lock);
	meta_free(m);

	/* a password against a server without one */
	snprintf(err, sizeof(err), "redis://:nope@localhost:1");
	cfg.url = err;
	m = meta_new(&cfg, NULL);
	CHECK(m != NULL);
	CHECK_EQ(meta_connect(m), -EIO); /* nothing listens on port 1 */
	meta_free(m);
}

/* A free loopback TCP port (there is a small race; good enough here). */
TEST(auth)
{
	char url[200], err[256], buf[64];
	int port = free_port();

	/* over the unix socket, without a password: NOAUTH */
	rdo("CONFIG SET requirepass sekrit");
	CHECK_EQ(connect_url(R.url, err, sizeof(err)), -EACCES);
	CHECK(strstr(err, "NOAUTH") != NULL);

	CHECK(port > 0);
	rdo("CONFIG SET bind 127.0.0.1");
	rdo("CONFIG SET port %d", port);
	snprintf(url, sizeof(url), "redis://:sekrit@127.0.0.1:%d/3", port);
	CHECK_EQ(connect_url(url, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	rdo("SELECT 3");
	rget(buf, sizeof(buf), "HEXISTS {t-auth}:d:1 here");
	CHECK_STR(buf, "1");
	rdo("SELECT 0");
	rget(buf, sizeof(buf), "EXISTS {t-auth}:d:1");
	CHECK_STR(buf, "0");

	/* the subscriber authenticates like the pool */
	{
		struct meta_config cfg = {.url = url, .prefix = "t-auth", .node = "n1"};
		struct meta *m = meta_new(&cfg, NULL), *bad;
		char badurl[200];
		struct inval_log l, lb;
		struct meta_entry e;

		inval_init(&l);
		inval_init(&lb);
		CHECK(m != NULL);
		CHECK_EQ(meta_subscribe(m, inval_cb, &l), 0);
		snprintf(badurl, sizeof(badurl), "redis://:wrong@127.0.0.1:%d/3", port);
		cfg.url = badurl;
		bad = meta_new(&cfg, NULL);
		CHECK(bad != NULL);
		CHECK_EQ(meta_subscribe(bad, inval_cb, &lb), 0);
		CHECK_EQ(meta_mkdir(m, 1, "sub", 1, &e), 0);
		CHECK_EQ(inval_wait(&l, 1, 3000), 1);
		CHECK_EV(&l, 0, "mkdir", 1, "sub", e.id);
		usleep(100000);
		CHECK_EQ(inval_count(&l), 1);
		CHECK_EQ(inval_count(&lb), 0);
		meta_free(m);
		meta_free(bad);
		pthread_mutex_destroy(&l.lock);
		pthread_mutex_destroy(&lb.lock);
	}

	snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d/3", port);
	CHECK_EQ(connect_url(url, err, sizeof(err)), -EACCES);
	CHECK(strstr(err, "authentication failed") != NULL);
	snprintf(url, sizeof(url), "redis://:sekrit@127.0.0.1:%d/99999", port);
	CHECK_EQ(connect_url(url, err, sizeof(err)), -EIO);
	CHECK(strstr(err, "SELECT") != NULL);

	rdo("CONFIG SET port 0");
	rdo("CONFIG SET requirepass %s", "");
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
	CHECK_EQ(connect_url(url, err, sizeof(err)), -EIO);
	CHECK(strstr(err, "refused") != NULL);
}

TEST(namespace)
{
	struct meta *m = mk_connected("t-ns");
	struct meta_entry e, d;
	struct meta_dirent *ents = NULL;
	size_t n = 0, i;
	char buf[64];
	bool seen[3] = {false};

	/* the root */
	CHECK_EQ(meta_getattr(m, META_ROOT_ID, &e), 0);
	CHECK_EQ(e.kind, META_DIR);
	CHECK_EQ(e.id, 1);
	CHECK_EQ(e.nsub, 0);
	CHECK(e.obj.mtime_ns > 0);
	rget(buf, sizeof(buf), "HGET {t-ns}:d:1 /parent");
	CHECK_STR(buf, "1");
	rget(buf, sizeof(buf), "GET {t-ns}:epoch");
	CHECK_EQ(strlen(buf), 32);

	CHECK_EQ(meta_readdir(m, 1, &ents, &n), 0);
	CHECK_EQ(n, 0);
	meta_dirents_free(ents);

	CHECK_EQ(meta_mkdir(m, 1, "a", 111, &d), 0);
	CHECK_EQ(d.kind, META_DIR);
	CHECK(d.id > 1);
	CHECK_EQ(d.obj.mtime_ns, 111);
	CHECK_EQ(meta_mkdir(m, 1, "b", 222, NULL), 0);
	CHECK_EQ(meta_mkdir(m, d.id, "c", 333, NULL), 0);

	CHECK_EQ(meta_lookup(m, 1, "a", &e), 0);
	CHECK_EQ(e.kind, META_DIR);
	CHECK_EQ(e.id, d.id);
	CHECK_EQ(e.obj.mtime_ns, 333); /* mkdir of c touched a */
	CHECK_EQ(e.nsub, 1);
	CHECK_EQ(meta_getattr(m, d.id, &e), 0);
	CHECK_EQ(e.kind, META_DIR);
	CHECK_EQ(e.nsub, 1);
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	CHECK_EQ(e.nsub, 2);

	rget(buf, sizeof(buf), "HGET {t-ns}:d:%" PRIu64 " /name", d.id);
	CHECK_STR(buf, "a");

	CHECK_EQ(meta_readdir(m, 1, &ents, &n), 0);
	CHECK_EQ(n, 2);
	for (i = 0; i < n; i++) {
		CHECK_EQ(ents[i].kind, META_DIR);
		if (!strcmp(ents[i].name, "a"))
			seen[0] = ents[i].id == d.id;
		else if (!strcmp(ents[i].name, "b"))
			seen[1] = true;
		else
			seen[2] = true;
	}
	CHECK(seen[0] && seen[1] && !seen[2]);
	meta_dirents_free(ents);

	/* names that are not names */
	CHECK_EQ(meta_mkdir(m, 1, "", 1, NULL), -EINVAL);
	CHECK_EQ(meta_mkdir(m, 1, "x/y", 1, NULL), -EINVAL);
	CHECK_EQ(meta_mkdir(m, 1, "..", 1, NULL), -EINVAL);
	CHECK_EQ(meta_lookup(m, 1, "/mtime", &e), -EINVAL);
	CHECK_EQ(meta_lookup(m, 0, "a", &e), -EINVAL);
	CHECK(meta_is_up(m));
	meta_free(m);
}

TEST(namespace_errors)
{
	struct meta *m = mk_connected("t-err");
	struct meta_dirent *ents;
	struct meta_entry e;
	struct meta_obj o;
	uint64_t a, id = 0;
	size_t n;

	CHECK_EQ(meta_mkdir(m, 1, "a", 1, &e), 0);
	a = e.id;
	CHECK_EQ(meta_mkdir(m, 1, "a", 1, NULL), -EEXIST);
	CHECK_EQ(meta_lookup(m, 1, "nope", &e), -ENOENT);
	CHECK_EQ(meta_lookup(m, 987654, "x", &e), -ENOENT);
	CHECK_EQ(meta_mkdir(m, 987654, "x", 1, NULL), -ENOENT);
	CHECK_EQ(meta_getattr(m, 987654, &e), -ENOENT);
	CHECK_EQ(meta_readdir(m, 987654, &ents, &n), -ENOENT);
	CHECK_EQ(meta_get_object(m, 987654, &o), -ENOENT);
	CHECK_EQ(meta_object_exists(m, 987654), 0);

	mkobj(m, &o, 10);
	CHECK_EQ(meta_publish(m, a, "f", &o, false, NULL, NULL), 0);
	CHECK_EQ(meta_lookup(m, o.id, "x", &e), -ENOTDIR);
	CHECK_EQ(meta_mkdir(m, o.id, "x", 1, NULL), -ENOTDIR);
	CHECK_EQ(meta_readdir(m, o.id, &ents, &n), -ENOTDIR);
	CHECK_EQ(meta_rmdir(m, a, "f", NULL), -ENOTDIR);
	CHECK_EQ(meta_rmdir(m, 1, "a", NULL), -ENOTEMPTY);
	CHECK_EQ(meta_rmdir(m, 1, "nope", NULL), -ENOENT);
	CHECK_EQ(meta_unlink(m, 1, "a", NULL), -EISDIR);
	CHECK_EQ(meta_unlink(m, a, "f", &id), 0);
	CHECK_EQ(id, o.id);
	CHECK_EQ(meta_mkdir(m, a, "sub", 1, NULL), 0);
	CHECK_EQ(meta_rmdir(m, 1, "a", NULL), -ENOTEMPTY);
	CHECK_EQ(meta_rmdir(m, a, "sub", NULL), 0);
	CHECK_EQ(meta_rmdir(m, 1, "a", &id), 0);
	CHECK_EQ(id, a);
	CHECK_EQ(meta_getattr(m, a, &e), -ENOENT);
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	CHECK_EQ(e.nsub, 0);
	meta_free(m);
}

TEST(publish)
{
	struct meta *m = mk_connected("t-pub");
	char path[OBJFS_PATH_MAX];
	char(*nodes)[OBJFS_NODE_MAX] = NULL;
	struct meta_entry e, d;
	struct meta_obj o, o2, got;
	redisContext *sub;
	redisReply *rep;
	uint64_t replaced = 99, id;
	int64_t mt;
	size_t n = 99;

	CHECK_EQ(meta_mkdir(m, 1, "dir", 5, &d), 0);
	CHECK_EQ(meta_mkdir(m, d.id, "sub dir", 5, &d), 0);
	mkobj(m, &o, 4096);

	/* watch the invalidations */
	sub = redisConnectUnix(R.sock);
	rep = redisCommand(sub, "SSUBSCRIBE {t-pub}:inval");
	freeReplyObject(rep);

	CHECK_EQ(meta_publish(m, d.id, "file 1", &o, false, &replaced, path), 0);
	CHECK_EQ(replaced, 0);
	CHECK_STR(path, "/dir/sub dir/file 1");
	{
		struct timeval tv = {2, 0};
		char want[128];

		redisSetTimeout(sub, tv);
		CHECK_EQ(redisGetReply(sub, (void **)&rep), REDIS_OK);
		CHECK(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 3);
		snprintf(want, sizeof(want), "- publish %" PRIu64 " file 1 %" PRIu64, d.id, o.id);
		if (rep && rep->elements == 3)
			CHECK_STR(rep->element[2]->str, want);
		if (rep)
			freeReplyObject(rep);
	}
	redisFree(sub);

	CHECK_EQ(meta_lookup(m, d.id, "file 1", &e), 0);
	CHECK_EQ(e.kind, META_FILE);
	CHECK_EQ(e.id, o.id);
	CHECK_EQ(e.obj.size, 4096);
	CHECK_EQ(e.obj.mtime_ns, o.mtime_ns);
	CHECK(!memcmp(e.obj.csum, o.csum, OBJFS_CSUM_LEN));
	CHECK_STR(e.obj.origin, "node-a");
	CHECK_EQ(meta_getattr(m, o.id, &e), 0);
	CHECK_EQ(e.kind, META_FILE);
	CHECK_EQ(e.obj.size, 4096);
	CHECK_EQ(meta_get_object(m, o.id, &got), 0);
	CHECK_EQ(got.id, o.id);
	CHECK(!memcmp(got.csum, o.csum, OBJFS_CSUM_LEN));
	CHECK_EQ(meta_object_exists(m, o.id), 1);
	CHECK_EQ(meta_holders(m, o.id, &nodes, &n), 0);
	CHECK_EQ(n, 1);
	if (n == 1)
		CHECK_STR(nodes[0], "node-a");
	free(nodes);

	/* the parent's mtime moved */
	CHECK_EQ(meta_getattr(m, d.id, &e), 0);
	mt = e.obj.mtime_ns;
	CHECK(mt > 5);

	/* a retry of the same publish */
	CHECK_EQ(meta_publish(m, d.id, "file 1", &o, false, &replaced, NULL), 0);
	CHECK_EQ(replaced, 0);

	/* another object under the same name */
	mkobj(m, &o2, 7);
	CHECK_EQ(meta_publish(m, d.id, "file 1", &o2, false, &replaced, NULL), -EEXIST);
	CHECK_EQ(meta_publish(m, d.id, "file 1", &o2, true, &replaced, path), 0);
	CHECK_EQ(replaced, o.id);
	CHECK_EQ(meta_object_exists(m, o.id), 0);
	CHECK_EQ(meta_object_deleted(m, o.id), 1);  /* the replaced one */
	CHECK_EQ(meta_object_deleted(m, o2.id), 0); /* the live one */
	CHECK_EQ(meta_get_object(m, o.id, &got), -ENOENT);
	nodes = NULL;
	CHECK_EQ(meta_holders(m, o.id, &nodes, &n), 0);
	CHECK_EQ(n, 0);
	free(nodes);
	CHECK_EQ(lookup_id(m, d.id, "file 1"), o2.id);

	/* over a directory, into nothing, into a file */
	CHECK_EQ(meta_publish(m, 1, "dir", &o2, true, NULL, NULL), -EISDIR);
	CHECK_EQ(meta_publish(m, 424242, "x", &o2, false, NULL, NULL), -ENOENT);
	CHECK_EQ(meta_publish(m, o2.id, "x", &o2, false, NULL, NULL), -ENOTDIR);
	o2.origin[0] = '\0';
	CHECK_EQ(meta_publish(m, 1, "x", &o2, false, NULL, NULL), -EINVAL);
	CHECK_EQ(meta_publish(m, 1, "x", NULL, false, NULL, NULL), -EINVAL);

	/* unlink */
	CHECK_EQ(meta_unlink(m, d.id, "file 1", &id), 0);
	CHECK_EQ(id, o2.id);
	CHECK_EQ(meta_object_exists(m, o2.id), 0);
	CHECK_EQ(meta_object_deleted(m, o2.id), 1);
	CHECK_EQ(meta_object_deleted(m, 987654), 0); /* never existed */
	CHECK_EQ(meta_lookup(m, d.id, "file 1", &e), -ENOENT);
	CHECK_EQ(meta_unlink(m, d.id, "file 1", &id), -ENOENT);
	meta_free(m);
}

TEST(holders)
{
	struct meta *a = mk_connected("t-hold");
	struct meta *b = mk("t-hold", "node-b", 0, 0);
	char(*nodes)[OBJFS_NODE_MAX] = NULL;
	struct meta_obj o;
	size_t n = 0, i;
	bool sa = false, sb = false;

	mkobj(a, &o, 1);
	CHECK_EQ(meta_publish(a, 1, "h", &o, false, NULL, NULL), 0);
	CHECK_EQ(meta_add_holder(b, o.id), 0);
	CHECK_EQ(meta_add_holder(b, o.id), 0);
	CHECK_EQ(meta_holders(a, o.id, &nodes, &n), 0);
	CHECK_EQ(n, 2);
	for (i = 0; i < n; i++) {
		sa |= !strcmp(nodes[i], "node-a");
		sb |= !strcmp(nodes[i], "node-b");
	}
	CHECK(sa && sb);
	free(nodes);
	CHECK_EQ(meta_del_holder(a, o.id), 0);
	CHECK_EQ(meta_holders(a, o.id, &nodes, &n), 0);
	CHECK_EQ(n, 1);
	if (n == 1)
		CHECK_STR(nodes[0], "node-b");
	free(nodes);

	/* a holder name that is not a node name */
	rec_hold("t-hold", o.id, "bad node!");
	CHECK_EQ(meta_holders(a, o.id, &nodes, &n), -EBADMSG);

	/* adding a holder drops holders whose node has no card (ghosts) */
	rec_unhold("t-hold", o.id, "bad node!");
	rec_hold("t-hold", o.id, "ghost");
	{
		unsigned stale = 99;

		CHECK_EQ(meta_add_holder_prune(b, &o, &stale), 0);
		CHECK_EQ(stale, 1);
		CHECK_EQ(meta_holders(a, o.id, &nodes, &n), 0);
		CHECK_EQ(n, 1);
		if (n == 1)
			CHECK_STR(nodes[0], "node-b");
		free(nodes);
	}

	/* a deleted object gets no holder (a fetch that ends after the
	 * delete must not leave a record behind) */
	CHECK_EQ(meta_unlink(a, 1, "h", NULL), 0);
	CHECK_EQ(meta_add_holder(b, o.id), -ENOENT);
	CHECK_EQ(rec_exists("t-hold", o.id), 0);
	CHECK_EQ(meta_add_holder(b, 0), -EINVAL);
	meta_free(a);
	meta_free(b);
}

TEST(rename)
{
	struct meta *m = mk_connected("t-ren");
	struct meta_dirent *ents;
	struct meta_entry e;
	struct meta_obj f1, f2, f3;
	uint64_t a, b, c, x, y, replaced;
	char buf[64];
	size_t n;

	CHECK_EQ(meta_mkdir(m, 1, "a", 1, &e), 0);
	a = e.id;
	CHECK_EQ(meta_mkdir(m, 1, "b", 1, &e), 0);
	b = e.id;
	CHECK_EQ(meta_mkdir(m, a, "c", 1, &e), 0);
	c = e.id;
	mkobj(m, &f1, 1);
	mkobj(m, &f2, 2);
	mkobj(m, &f3, 3);
	CHECK_EQ(meta_publish(m, a, "f1", &f1, false, NULL, NULL), 0);
	CHECK_EQ(meta_publish(m, c, "f2", &f2, false, NULL, NULL), 0);
	CHECK_EQ(meta_publish(m, b, "f3", &f3, false, NULL, NULL), 0);

	/* a file within a directory, then across */
	CHECK_EQ(meta_rename(m, a, "f1", a, "g1", 0, false, &replaced), 0);
	CHECK_EQ(replaced, 0);
	CHECK_EQ(lookup_id(m, a, "g1"), f1.id);
	CHECK_EQ(lookup_id(m, a, "f1"), 0);
	CHECK_EQ(meta_rename(m, a, "g1", b, "g1", 0, false, NULL), 0);
	CHECK_EQ(lookup_id(m, b, "g1"), f1.id);
	CHECK_EQ(meta_rename(m, b, "g1", b, "g1", 0, false, NULL), 0); /* onto itself */
	CHECK_EQ(lookup_id(m, b, "g1"), f1.id);
	CHECK_EQ(meta_rename(m, b, "nope", a, "x", 0, false, NULL), -ENOENT);

	/* file over file */
	CHECK_EQ(meta_rename(m, b, "g1", b, "f3", 0, false, NULL), -EEXIST);
	CHECK_EQ(meta_rename(m, b, "g1", b, "f3", META_RENAME_NOREPLACE, true, NULL), -EEXIST);
	CHECK_EQ(meta_rename(m, b, "g1", b, "f3", 0, true, &replaced), 0);
	CHECK_EQ(replaced, f3.id);
	CHECK_EQ(meta_object_exists(m, f3.id), 0);
	CHECK_EQ(lookup_id(m, b, "f3"), f1.id);

	/* a directory with children: they move along */
	CHECK_EQ(meta_getattr(m, a, &e), 0);
	CHECK_EQ(e.nsub, 1);
	CHECK_EQ(meta_rename(m, a, "c", b, "c2", 0, false, NULL), 0);
	CHECK_EQ(lookup_id(m, b, "c2"), c);
	CHECK_EQ(meta_lookup(m, c, "f2", &e), 0);
	CHECK_EQ(e.id, f2.id);
	rget(buf, sizeof(buf), "HGET {t-ren}:d:%" PRIu64 " /parent", c);
	snprintf(buf + 32, 32, "%" PRIu64, b);
	CHECK_STR(buf, buf + 32);
	rget(buf, sizeof(buf), "HGET {t-ren}:d:%" PRIu64 " /name", c);
	CHECK_STR(buf, "c2");
	CHECK_EQ(meta_getattr(m, a, &e), 0);
	CHECK_EQ(e.nsub, 0);
	CHECK_EQ(meta_getattr(m, b, &e), 0);
	CHECK_EQ(e.nsub, 1);
	{
		char path[OBJFS_PATH_MAX];
		struct meta_obj o;

		mkobj(m, &o, 9);
		CHECK_EQ(meta_publish(m, c, "new", &o, false, NULL, path), 0);
		CHECK_STR(path, "/b/c2/new");
	}

	/* into its own subtree */
	CHECK_EQ(meta_rename(m, 1, "b", c, "loop", 0, false, NULL), -EINVAL);
	CHECK_EQ(meta_rename(m, 1, "b", b, "loop", 0, false, NULL), -EINVAL);
	CHECK_EQ(lookup_id(m, 1, "b"), b);

	/* directory over an empty directory, over a non-empty one, over a
	 * file; a file over a directory */
	CHECK_EQ(meta_mkdir(m, 1, "empty", 1, &e), 0);
	x = e.id;
	CHECK_EQ(meta_rename(m, 1, "a", 1, "empty", 0, false, &replaced), 0);
	CHECK_EQ(replaced, x);
	CHECK_EQ(meta_getattr(m, x, &e), -ENOENT);
	CHECK_EQ(lookup_id(m, 1, "empty"), a);
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	CHECK_EQ(e.nsub, 2); /* b, empty(=a) */
	CHECK_EQ(meta_rename(m, 1, "empty", 1, "b", 0, false, NULL), -ENOTEMPTY);
	CHECK_EQ(meta_rename(m, 1, "empty", b, "f3", 0, true, NULL), -ENOTDIR);
	CHECK_EQ(meta_rename(m, b, "f3", 1, "empty", 0, true, NULL), -EISDIR);

	/* exchange */
	CHECK_EQ(meta_rename(m, b, "f3", 1, "nope", META_RENAME_EXCHANGE, false, NULL), -ENOENT);
	CHECK_EQ(meta_rename(m, b, "f3", 1, "empty", META_RENAME_EXCHANGE, false, &replaced), 0);
	CHECK_EQ(replaced, 0);
	CHECK_EQ(lookup_id(m, b, "f3"), a);
	CHECK_EQ(lookup_id(m, 1, "empty"), f1.id);
	rget(buf, sizeof(buf), "HGET {t-ren}:d:%" PRIu64 " /parent", a);
	snprintf(buf + 32, 32, "%" PRIu64, b);
	CHECK_STR(buf, buf + 32);
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	CHECK_EQ(e.nsub, 1);
	CHECK_EQ(meta_getattr(m, b, &e), 0);
	CHECK_EQ(e.nsub, 2);
	/* exchanging a directory with its own descendant */
	CHECK_EQ(meta_rename(m, 1, "b", c, "f2", META_RENAME_EXCHANGE, false, NULL), -EINVAL);
	CHECK_EQ(meta_rename(m, 1, "b", 1, "empty", META_RENAME_EXCHANGE | META_RENAME_NOREPLACE,
			     false, NULL),
		 -EINVAL);
	CHECK_EQ(meta_rename(m, 1, "b", 1, "x", 1u << 7, false, NULL), -EINVAL);

	/* NOREPLACE onto a free name works */
	CHECK_EQ(meta_rename(m, 1, "empty", 1, "free", META_RENAME_NOREPLACE, false, NULL), 0);
	CHECK_EQ(meta_readdir(m, 1, &ents, &n), 0);
	CHECK_EQ(n, 2);
	meta_dirents_free(ents);

	/* damaged "/parent" chain */
	CHECK_EQ(meta_mkdir(m, 1, "q", 1, &e), 0);
	y = e.id;
	rdo("HSET {t-ren}:d:%" PRIu64 " /parent garbage", c);
	CHECK_EQ(meta_rename(m, 1, "q", c, "q", 0, false, NULL), -EBADMSG);
	CHECK_EQ(lookup_id(m, 1, "q"), y);
	meta_free(m);
}

TEST(paths)
{
	struct meta *m = mk_connected("t-path");
	char path[OBJFS_PATH_MAX];
	enum meta_kind kind;
	struct meta_entry e;
	struct meta_obj f;
	uint64_t a, b, id;

	CHECK_EQ(meta_mkdir(m, 1, "a", 1, &e), 0);
	a = e.id;
	CHECK_EQ(meta_mkdir(m, a, "b", 1, &e), 0);
	b = e.id;
	mkobj(m, &f, 10);
	CHECK_EQ(meta_publish(m, b, "f", &f, false, NULL, NULL), 0);
	CHECK_EQ(meta_path(m, b, "f", &kind, &id, path), 0);
	CHECK_EQ(kind, META_FILE);
	CHECK_EQ(id, f.id);
	CHECK_STR(path, "/a/b/f");
	CHECK_EQ(meta_path(m, a, "b", &kind, &id, path), 0);
	CHECK_EQ(kind, META_DIR);
	CHECK_EQ(id, b);
	CHECK_STR(path, "/a/b");
	/* the path follows renames of the file and of its directories */
	CHECK_EQ(meta_rename(m, 1, "a", 1, "A", 0, false, NULL), 0);
	CHECK_EQ(meta_rename(m, b, "f", a, "g", 0, false, NULL), 0);
	CHECK_EQ(meta_path(m, a, "g", &kind, &id, path), 0);
	CHECK_STR(path, "/A/g");
	CHECK_EQ(id, f.id);
	CHECK_EQ(meta_path(m, b, "f", &kind, &id, path), -ENOENT);
	CHECK_EQ(meta_path(m, 999999, "f", &kind, &id, path), -ENOENT);
	CHECK_EQ(meta_path(m, f.id, "x", &kind, &id, path), -ENOTDIR);
	CHECK_EQ(meta_path(m, a, "..", &kind, &id, path), -EINVAL);

	/* a fetched copy's holder and path in one call: the name it was
	 * opened by, else where the record says, else "" */
	{
		struct meta *o = mk("t-path", "node-b", 0, 0);
		struct meta_obj g = f;
		unsigned stale = 9;

		CHECK_EQ(meta_link(m, f.id, b, "h", &(struct meta_attr){.set = true}, NULL), 0);
		CHECK_EQ(meta_add_holder_at(o, &f, NULL, b, "h", &stale, path), 0);
		CHECK_STR(path, "/A/b/h");
		CHECK_EQ(stale, 1); /* node-a has no card */
		CHECK_EQ(nholders("t-path", f.id), 1);
		CHECK_EQ(rec_holds("t-path", f.id, "node-b"), 1);
		CHECK_EQ(meta_add_holder_at(o, &f, NULL, b, "f", NULL, path), 0);
		CHECK_STR(path, "/A/g");
		CHECK_EQ(meta_add_holder_at(o, &f, NULL, 0, NULL, NULL, path), 0);
		CHECK_STR(path, "/A/g");
		CHECK_EQ(nholders("t-path", f.id), 1);
		/* the name opened by was unlinked meanwhile */
		CHECK_EQ(meta_unlink(m, b, "h", NULL), 1);
		CHECK_EQ(meta_add_holder_at(o, &f, NULL, b, "h", NULL, path), 0);
		CHECK_STR(path, "/A/g");
		g.size++;
		CHECK_EQ(meta_add_holder_at(o, &g, NULL, a, "g", NULL, path), -ENOTUNIQ);
		CHECK_STR(path, "");
		CHECK_EQ(meta_add_holder_at(o, &f, NULL, a, "g", NULL, NULL), -EINVAL);
		meta_free(o);
	}
	{
		struct meta_obj h;

		mkobj(m, &h, 10);
		CHECK_EQ(meta_publish(m, a, "gone", &h, false, NULL, NULL), 0);
		CHECK_EQ(meta_unlink(m, a, "gone", NULL), 0);
		CHECK_EQ(meta_add_holder_at(m, &h, NULL, a, "gone", NULL, path), -ENOENT);
	}
	meta_free(m);
}

TEST(reregister)
{
	struct meta *m = mk_connected("t-rereg");
	struct meta *b = mk("t-rereg", "node-b", 0, 0);
	char(*nodes)[OBJFS_NODE_MAX];
	struct meta_dirent *ents;
	struct meta_entry e;
	struct meta_obj o, other;
	uint64_t a, bb, lf;
	size_t n, i;
	char name[300], path[600], alt[300], got[OBJFS_PATH_MAX];

	memset(&o, 0, sizeof(o));
	o.id = 100;
	o.size = 5;
	o.mtime_ns = 77;
	snprintf(o.origin, sizeof(o.origin), "node-a");
	CHECK_EQ(meta_reregister(m, &o, "/a/b/file", got), 0);
	CHECK_STR(got, "/a/b/file");
	a = lookup_id(m, 1, "a");
	bb = lookup_id(m, a, "b");
	/* the directories it made have fresh random ids */
	CHECK(a >= META_ID_MIN && bb >= META_ID_MIN && a != bb);
	CHECK_EQ(meta_lookup(m, bb, "file", &e), 0);
	CHECK_EQ(e.kind, META_FILE);
	CHECK_EQ(e.id, 100);
	CHECK_EQ(e.obj.size, 5);
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	CHECK_EQ(e.nsub, 1);

	/* the record exists: only a holder more */
	CHECK_EQ(meta_reregister(b, &o, "/elsewhere/file", got), 0);
	CHECK_STR(got, "");
	CHECK_EQ(lookup_id(m, 1, "elsewhere"), 0);
	CHECK_EQ(meta_holders(m, 100, &nodes, &n), 0);
	CHECK_EQ(n, 2);
	free(nodes);

	/* the record exists but describes other bytes: that id is not
	 * this object, and nothing changes */
	other = o;
	other.csum[0] ^= 1;
	CHECK_EQ(meta_reregister(b, &other, "/x", got), -ENOTUNIQ);
	other = o;
	other.size = 6;
	CHECK_EQ(meta_reregister(b, &other, "/x", got), -ENOTUNIQ);
	CHECK_EQ(lookup_id(m, 1, "x"), 0);
	CHECK_EQ(meta_add_holder_of(b, &other), -ENOTUNIQ);
	CHECK_EQ(meta_add_holder_of(b, &o), 0);

	/* the name is taken: lost+found */
	o.id = 5000;
	CHECK_EQ(meta_reregister(m, &o, "/a/b/file", got), 1);
	CHECK_STR(got, "/lost+found/file.objfs-5000");
	CHECK_EQ(lookup_id(m, bb, "file"), 100);
	lf = lookup_id(m, 1, "lost+found");
	CHECK(lf >= META_ID_MIN);
	CHECK_EQ(lookup_id(m, lf, "file.objfs-5000"), 5000);

	/* a directory on the path is a file: lost+found */
	o.id = 5001;
	CHECK_EQ(meta_reregister(m, &o, "/a/b/file/x", got), 1);
	CHECK_STR(got, "/lost+found/x.objfs-5001");
	CHECK_EQ(lookup_id(m, lf, "x.objfs-5001"), 5001);

	/* a long name gets a shorter alternative, cut between characters */
	name[0] = '\0';
	for (i = 0; i < 125; i++)
		strcat(name, "\xc3\xa9"); /* 250 bytes of "é" */
	snprintf(path, sizeof(path), "/a/%s", name);
	o.id = 5002;
	CHECK_EQ(meta_reregister(m, &o, path, got), 0);
	o.id = 5003;
	CHECK_EQ(meta_reregister(m, &o, path, got), 1);
	CHECK_EQ(meta_readdir(m, lf, &ents, &n), 0);
	CHECK_EQ(n, 3);
	alt[0] = '\0';
	for (i = 0; i < n; i++)
		if (ents[i].id == 5003)
			snprintf(alt, sizeof(alt), "%s", ents[i].name);
	meta_dirents_free(ents);
	CHECK(strlen(alt) <= 255 && strlen(alt) > 200);
	CHECK(strstr(alt, ".objfs-5003") != NULL);
	CHECK_EQ(util_name_validate(alt), 0);

	/* malformed paths */
	CHECK_EQ(meta_reregister(m, &o, "a/b", got), -EINVAL);
	CHECK_EQ(meta_reregister(m, &o, "/", got), -EINVAL);
	CHECK_EQ(meta_reregister(m, &o, "/a//b", got), -EINVAL);
	CHECK_EQ(meta_reregister(m, &o, "/a/", got), -EINVAL);
	CHECK_EQ(meta_reregister(m, &o, "/a/../b", got), -EINVAL);
	CHECK_EQ(meta_reregister(m, &o, "", got), -EINVAL);
	CHECK_EQ(meta_reregister(m, &o, NULL, got), -EINVAL);
	meta_free(m);
	meta_free(b);
}

/* Ids come from nowhere Redis could lose: a FLUSHALL or a counter set
 * back gives no id again, and an id that Redis knows is never handed out
 * nor published over. */
TEST(ids_survive_redis_loss)
{
	struct meta *m = mk_connected("t-ids");
	struct meta_obj o, o2;
	struct meta_entry e;
	struct inval_log l;
	uint64_t id, seen[64];
	size_t i, j;
	char ex[32];
	int64_t t0;

	inval_init(&l);
	CHECK_EQ(meta_subscribe(m, inval_cb, &l), 0);
	for (i = 0; i < 64; i++) {
		CHECK_EQ(meta_alloc_id(m, &seen[i]), 0);
		CHECK(seen[i] >= META_ID_MIN && seen[i] <= META_ID_MAX);
		for (j = 0; j < i; j++)
			CHECK(seen[i] != seen[j]);
		if (i == 31) {
			rdo("FLUSHALL");
			CHECK_EQ(meta_getattr(m, 1, &e), 0);
			rdo("SET {t-ids}:ctr 1");
		}
	}
	/* whoever made the namespace again told every node: "resync" */
	t0 = util_mono_ns();
	pthread_mutex_lock(&l.lock);
	while (l.resyncs < 1 && ms_since(t0) < 3000) {
		pthread_mutex_unlock(&l.lock);
		usleep(2000);
		pthread_mutex_lock(&l.lock);
	}
	CHECK_EQ(l.resyncs, 1);
	pthread_mutex_unlock(&l.lock);

	/* a publish that gets a write sequence not above one its node saw
	 * (the counter set back) tells every node too */
	mkobj(m, &o, 10);
	CHECK_EQ(meta_publish(m, 1, "seq1", &o, false, NULL, NULL), 0);
	rdo("SET {t-ids}:ctr 0");
	mkobj(m, &o, 11);
	CHECK_EQ(meta_publish(m, 1, "seq2", &o, false, NULL, NULL), 0);
	t0 = util_mono_ns();
	pthread_mutex_lock(&l.lock);
	while (l.resyncs < 2 && ms_since(t0) < 3000) {
		pthread_mutex_unlock(&l.lock);
		usleep(2000);
		pthread_mutex_lock(&l.lock);
	}
	CHECK_EQ(l.resyncs, 2);
	pthread_mutex_unlock(&l.lock);
	rget(ex, sizeof(ex), "GET {t-ids}:ctr");
	CHECK(strcmp(ex, "0") != 0);

	for (i = 0; i < 64; i++) {
		CHECK_EQ(meta_draw_id(&id), 0);
		CHECK(id >= META_ID_MIN && id <= META_ID_MAX);
	}

	/* publishing over another object's record or tombstone: ENOTUNIQ,
	 * and nothing is written */
	mkobj(m, &o, 10);
	CHECK_EQ(meta_publish(m, 1, "o", &o, false, NULL, NULL), 0);
	/* a retry of the same publish is fine */
	CHECK_EQ(meta_publish(m, 1, "o", &o, false, NULL, NULL), 0);
	o2 = o;
	o2.csum[3] ^= 0x10;
	CHECK_EQ(meta_publish(m, 1, "o2", &o2, false, NULL, NULL), -ENOTUNIQ);
	CHECK_EQ(lookup_id(m, 1, "o2"), 0);
	CHECK_EQ(meta_unlink(m, 1, "o", NULL), 0);
	CHECK_EQ(meta_publish(m, 1, "o", &o, false, NULL, NULL), -ENOTUNIQ);
	CHECK_EQ(lookup_id(m, 1, "o"), 0);
	CHECK_EQ(rec_exists("t-ids", o.id), 0);
	meta_free(m);
	pthread_mutex_destroy(&l.lock);
}

TEST(nodes)
{
	struct meta *m1 = mk("t-node", "alpha", 0, 0);
	struct meta *m2 = mk("t-node", "alpha", 0, 0);
	struct meta_card a, b, other;
	char buf[64];
	pid_t dead;

	memset(&a, 0, sizeof(a));
	snprintf(a.host, sizeof(a.host), "host-1");
	snprintf(a.listen, sizeof(a.listen), "10.0.0.1:7000");
	a.pid = getpid();
	snprintf(a.instance, sizeof(a.instance), "aaaa1111");
	a.started_ns = util_now_ns();
	a.capacity = 1 << 30;
	a.used = 42;
	b = a;
	snprintf(b.host, sizeof(b.host), "host-2");
	snprintf(b.instance, sizeof(b.instance), "bbbb2222");

	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), 0);
	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), 0); /* again: ours */
	rget(buf, sizeof(buf), "HGET {t-node}:node:alpha listen");
	CHECK_STR(buf, "10.0.0.1:7000");
	rget(buf, sizeof(buf), "SISMEMBER {t-node}:members alpha");
	CHECK_STR(buf, "1");
	rget(buf, sizeof(buf), "TTL {t-node}:node:alpha");
	CHECK(atoi(buf) > 0 && atoi(buf) <= 30);

	/* another live instance on another host */
	memset(&other, 0, sizeof(other));
	CHECK_EQ(meta_node_claim(m2, &b, 30, &other), -EADDRINUSE);
	CHECK_STR(other.instance, "aaaa1111");
	CHECK_STR(other.host, "host-1");
	CHECK_EQ(other.pid, getpid());
	CHECK_EQ(other.used, 42);
	CHECK_EQ(other.capacity, 1 << 30);
	CHECK_EQ(other.started_ns, a.started_ns);
	/* same host, but the pid is alive */
	snprintf(b.host, sizeof(b.host), "host-1");
	CHECK_EQ(meta_node_claim(m2, &b, 30, &other), -EADDRINUSE);

	/* same host and a dead pid: taken over */
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	a.pid = dead;
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), 0);
	CHECK_EQ(meta_node_claim(m2, &b, 30, &other), 0);
	rget(buf, sizeof(buf), "HGET {t-node}:node:alpha instance");
	CHECK_STR(buf, "bbbb2222");
	CHECK_EQ(meta_node_heartbeat(m1, &a, 30), -EADDRINUSE);
	CHECK_EQ(meta_node_heartbeat(m2, &b, 30), 0);

	/* same host and a killed pid not yet reaped (a zombie): taken over */
	CHECK_EQ(meta_node_release(m2, "bbbb2222"), 0);
	dead = fork();
	if (dead == 0) {
		pause();
		_exit(0);
	}
	kill(dead, SIGKILL);
	while (!util_proc_gone(dead, 0))
		usleep(1000);
	a.pid = dead;
	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), 0);
	CHECK_EQ(meta_node_claim(m2, &b, 30, &other), 0);
	waitpid(dead, NULL, 0);

	/* same host, and the pid lives, but that process started after the
	 * card was written: the pid was reused, taken over */
	CHECK_EQ(meta_node_release(m2, "bbbb2222"), 0);
	a.pid = getpid();
	a.started_ns = util_now_ns() - 3600 * 1000000000LL;
	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), 0);
	CHECK_EQ(meta_node_claim(m2, &b, 30, &other), 0);
	rget(buf, sizeof(buf), "HGET {t-node}:node:alpha instance");
	CHECK_STR(buf, "bbbb2222");

	/* release only with the right instance */
	CHECK_EQ(meta_node_release(m1, "aaaa1111"), 0);
	rget(buf, sizeof(buf), "EXISTS {t-node}:node:alpha");
	CHECK_STR(buf, "1");
	CHECK_EQ(meta_node_release(m2, "bbbb2222"), 0);
	rget(buf, sizeof(buf), "EXISTS {t-node}:node:alpha");
	CHECK_STR(buf, "0");
	/* a heartbeat brings a lost card back */
	CHECK_EQ(meta_node_heartbeat(m2, &b, 30), 0);
	rget(buf, sizeof(buf), "HGET {t-node}:node:alpha instance");
	CHECK_STR(buf, "bbbb2222");

	/* a damaged card of someone else */
	rdo("HSET {t-node}:node:alpha pid notapid");
	CHECK_EQ(meta_node_claim(m1, &a, 30, &other), -EBADMSG);

	/* bad cards */
	b.instance[0] = '\0';
	CHECK_EQ(meta_node_claim(m2, &b, 30, &other), -EINVAL);
	CHECK_EQ(meta_node_claim(m2, &a, 0, &other), -EINVAL);
	CHECK_EQ(meta_node_release(m2, ""), -EINVAL);
	meta_free(m1);
	meta_free(m2);
}

/* ---- cluster: cards, locate, replicas, members, invalidations ---- */

struct worker {
	struct meta *m;
	uint64_t dir;
	int idx;
	int failures;
};

#define WORKER_OPS 300

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct meta_entry e;
	char name[32];
	int i;

	for (i = 0; i < WORKER_OPS; i++) {
		snprintf(name, sizeof(name), "w%d-%d", w->idx, i);
		if (meta_mkdir(w->m, w->dir, name, i, &e) < 0)
			w->failures++;
		if (meta_lookup(w->m, w->dir, name, &e) < 0 || e.kind != META_DIR)
			w->failures++;
		if (meta_lookup(w->m, 1, "shared", &e) < 0 || e.id != w->dir)
			w->failures++;
		if (meta_getattr(w->m, 1, &e) < 0)
			w->failures++;
	}
	return NULL;
}

TEST(threads)
{
	struct meta *m = mk("t-thr", "node-a", 2, 0);
	struct worker w[4];
	pthread_t t[4];
	struct meta_dirent *ents;
	struct meta_entry e;
	size_t n;
	int i;

	CHECK_EQ(meta_mkdir(m, 1, "shared", 1, &e), 0);
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){.m = m, .dir = e.id, .idx = i};
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(w[i].failures, 0);
	}
	CHECK_EQ(meta_readdir(m, e.id, &ents, &n), 0);
	CHECK_EQ(n, 4 * WORKER_OPS);
	meta_dirents_free(ents);
	CHECK_EQ(meta_getattr(m, e.id, &e), 0);
	CHECK_EQ(e.nsub, 4 * WORKER_OPS);
	meta_free(m);
}

TEST(noscript)
{
	struct meta *m = mk_connected("t-noscript");
	struct meta_entry e;

	CHECK_EQ(meta_mkdir(m, 1, "x", 1, NULL), 0);
	rdo("SCRIPT FLUSH");
	CHECK_EQ(meta_lookup(m, 1, "x", &e), 0);
	CHECK_EQ(meta_mkdir(m, 1, "y", 1, NULL), 0);
	meta_free(m);
}

TEST(flushall)
{
	struct meta *m = mk_connected("t-flush");
	char e1[64], e2[64];
	struct meta_dirent *ents;
	struct meta_entry e;
	uint64_t id;
	size_t n;

	CHECK_EQ(meta_epoch(m, e1, sizeof(e1)), 0);
	CHECK_EQ(strlen(e1), 32);
	CHECK_EQ(meta_mkdir(m, 1, "x", 1, NULL), 0);
	rdo("FLUSHALL");
	/* any call heals the namespace */
	CHECK_EQ(meta_readdir(m, 1, &ents, &n), 0);
	CHECK_EQ(n, 0);
	meta_dirents_free(ents);
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	CHECK_EQ(meta_epoch(m, e2, sizeof(e2)), 0);
	CHECK_EQ(strlen(e2), 32);
	CHECK(strcmp(e1, e2) != 0);
	rdo("FLUSHALL");
	CHECK_EQ(meta_alloc_id(m, &id), 0);
	CHECK(id >= META_ID_MIN && id <= META_ID_MAX);
	CHECK_EQ(meta_lookup(m, 1, "x", &e), -ENOENT);
	rdo("FLUSHALL");
	CHECK_EQ(meta_lookup(m, 1, "x", &e), -ENOENT);
	CHECK_EQ(meta_epoch(m, e1, sizeof(e1)), 0);
	CHECK(strcmp(e1, e2) != 0);
	meta_free(m);
}

/* Redis hangs (SIGSTOP): calls give up after about the timeout. */
TEST(hung)
{
	struct meta *m = mk("t-hung", "node-a", 2, 300);
	struct meta_entry e;
	int64_t t0;
	int i;

	CHECK_EQ(meta_connect(m), 0);
	kill(R.pid, SIGSTOP);
	for (i = 0; i < 4; i++) {
		t0 = util_mono_ns();
		CHECK_EQ(meta_getattr(m, 1, &e), -EIO);
		CHECK(ms_since(t0) < 1000);
	}
	CHECK(!meta_is_up(m));
	kill(R.pid, SIGCONT);
	t0 = util_mono_ns();
	while (meta_getattr(m, 1, &e) < 0 && ms_since(t0) < 10000)
		usleep(20000);
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	CHECK(meta_is_up(m));
	meta_free(m);
}

/*
 * Redis hangs.  A subscriber that was up notices with its PING and, once
 * Redis is back, reports the gap; one that starts meanwhile gives up its
 * first attempt after the timeout; both stop at once when asked.
 */
TEST(restart)
{
	struct meta *m = mk("t-restart", "node-a", 0, 1000);
	struct meta_dirent *ents;
	struct meta_entry e;
	struct inval_log l;
	char err[256], e1[64], e2[64];
	uint64_t x1;
	int64_t t0;
	size_t n;
	int i;

	inval_init(&l);
	CHECK_EQ(meta_connect(m), 0);
	CHECK_EQ(meta_subscribe(m, inval_cb, &l), 0);
	CHECK(meta_is_up(m));
	CHECK_EQ(meta_epoch(m, e1, sizeof(e1)), 0);
	CHECK_EQ(meta_mkdir(m, 1, "x", 1, &e), 0);
	x1 = e.id;
	/* Redis sends it after the reply to the mkdir: a kill in between
	 * would lose it (a gap that the NULL event reports) */
	CHECK_EQ(inval_wait(&l, 1, 3000), 1);
	redis_kill();
	for (i = 0; i < 8; i++) {
		t0 = util_mono_ns();
		CHECK_EQ(meta_lookup(m, 1, "x", &e), -EIO);
		CHECK(ms_since(t0) < 1500);
	}
	CHECK(!meta_is_up(m));
	meta_last_error(m, err, sizeof(err));
	CHECK(err[0] != '\0');
	t0 = util_mono_ns();
	CHECK_EQ(meta_connect(m), -EIO);
	CHECK(ms_since(t0) < 1500);

	redis_start();
	t0 = util_mono_ns();
	while (meta_getattr(m, 1, &e) < 0 && ms_since(t0) < 10000)
		usleep(20000);
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	CHECK(meta_is_up(m));
	meta_last_error(m, err, sizeof(err));
	CHECK_STR(err, "");
	CHECK_EQ(meta_readdir(m, 1, &ents, &n), 0);
	CHECK_EQ(n, 0);
	meta_dirents_free(ents);
	CHECK_EQ(meta_epoch(m, e2, sizeof(e2)), 0);
	CHECK(strcmp(e1, e2) != 0);
	/* the subscriber is back (the mkdir of "x" before was seen) */
	CHECK_EQ(inval_wait(&l, 2, 10000), 2);
	CHECK_EV(&l, 0, "mkdir", 1, "x", x1);
	CHECK_EV(&l, 1, "(gap)", 0, "", 0);
	CHECK_EQ(meta_mkdir(m, 1, "x", 1, &e), 0);
	CHECK_EQ(inval_wait(&l, 3, 3000), 3);
	CHECK_EV(&l, 2, "mkdir", 1, "x", e.id);

	/* a restart between two calls costs no failed call: the closed
	 * idle connections are noticed before they are used */
	CHECK_EQ(meta_getattr(m, 1, &e), 0);
	redis_kill();
	redis_start();
	CHECK_EQ(meta_mkdir(m, 1, "y", 1, NULL), 0);
	CHECK_EQ(meta_lookup(m, 1, "y", &e), 0);
	CHECK(meta_is_up(m));
	/* a gap again (the mkdir of "y" may have come before or after) */
	t0 = util_mono_ns();
	while (ms_since(t0) < 10000 && inval_count(&l) < 4)
		usleep(5000);
	CHECK(inval_count(&l) >= 4);
	CHECK_EV(&l, 3, "(gap)", 0, "", 0);
	meta_free(m);
	pthread_mutex_destroy(&l.lock);
}

int main(void)
{
	harness_begin("test-meta");
	RUN(urls);
	RUN(dead_socket);
	RUN(auth);
	RUN(namespace);
	RUN(namespace_errors);
	RUN(publish);
	RUN(holders);
	RUN(rename);
	RUN(paths);
	RUN(reregister);
	RUN(ids_survive_redis_loss);
	RUN(nodes);
	RUN(threads);
	RUN(noscript);
	RUN(flushall);
	RUN(hung);
	RUN(restart);
	return harness_end();
}
