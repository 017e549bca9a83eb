/*
 * test-meta-records: unit tests of how the Redis location service reads
 * what Redis holds: damaged records and entries (each malformed field, a
 * key of the wrong type, the log line that names it) and directory
 * listings read page by page.
 *
 * main() starts a private redis-server as test-meta does (the harness in
 * meta-harness.h); each case uses its own key prefix and damages records
 * behind meta's back through a raw hiredis connection, knowing the key
 * schema of meta.h.
 */
#include "meta-harness.h"

#include "log.h"

/* Entries of a directory that lead nowhere or are not entries: each
 * hides only itself */
static void corrupt_entries(struct meta *m, uint64_t d)
{
	struct meta_dirent *ents = NULL;
	struct meta_entry e;
	size_t n;
	static const char *const bad_values[] = {
	    "garbage",
	    "d",
	    "f",
	    "d0",
	    "f-1",
	    "x5",
	    "d05",
	    "d18446744073709551616",
	    "d99999999999999999999999",
	    "d1 ",
	    "",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad_values); i++) {
		rdo("HSET {t-bad}:d:%" PRIu64 " bad %s", d, bad_values[i]);
		CHECK_EQ(meta_lookup(m, d, "bad", &e), -EBADMSG);
		/* a bad entry hides itself only */
		CHECK_EQ(meta_readdir(m, d, &ents, &n), 0);
		CHECK_EQ(n, 0);
		meta_dirents_free(ents);
		CHECK_EQ(meta_unlink(m, d, "bad", NULL), -EBADMSG);
	}
	rdo("HDEL {t-bad}:d:%" PRIu64 " bad", d);
	CHECK_EQ(meta_readdir(m, d, &ents, &n), 0);
	meta_dirents_free(ents);

	/* an entry whose record is missing */
	rdo("HSET {t-bad}:d:%" PRIu64 " ghost f777777", d);
	CHECK_EQ(meta_lookup(m, d, "ghost", &e), -EBADMSG);
	rdo("HSET {t-bad}:d:%" PRIu64 " ghost d777777", d);
	CHECK_EQ(meta_lookup(m, d, "ghost", &e), -EBADMSG);
	rdo("HDEL {t-bad}:d:%" PRIu64 " ghost", d);
}

/* An object's record and its entry, each field damaged in turn; returns
 * the object's id */
static uint64_t corrupt_objects(struct meta *m, uint64_t d)
{
	struct meta_entry e;
	struct meta_obj o, got;
	uint64_t id;
	size_t i;

	/* object records */
	mkobj(m, &o, 10);
	CHECK_EQ(meta_publish(m, d, "obj", &o, false, NULL, NULL), 0);
	id = o.id;
	{
		static const struct {
			const char *field, *value;
		} bad[] = {
		    {"csum", "zz"},
		    {"csum", "0123456789abcdef0123456789abcdefaa"},
		    {"csum", "0123456789abcdef0123456789abcdeg"},
		    {"size", "-1"},
		    {"size", "18446744073709551616"},
		    {"size", "18446744073709551615"}, /* no off_t holds it */
		    {"size", "9223372036854775808"},
		    {"size", "12abc"},
		    {"size", ""},
		    {"mtime", "abc"},
		    {"mtime", "9223372036854775808"},
		    {"origin", "bad node"},
		    {"origin", ""},
		};
		char csum[OBJFS_CSUM_HEX], val[32];

		util_csum_to_hex(o.csum, csum);
		/* an entry with its attributes: lookup reads them there */
		for (i = 0; i < ARRAY_SIZE(bad); i++) {
			char v[256];
			const char *f = bad[i].field;

			snprintf(v, sizeof(v), "f%" PRIu64 " %s %s %s %s", id,
				 !strcmp(f, "size") ? bad[i].value : "10",
				 !strcmp(f, "mtime") ? bad[i].value : "1",
				 !strcmp(f, "csum") ? bad[i].value : csum,
				 !strcmp(f, "origin") ? bad[i].value : "node-a");
			rdo("HSET {t-bad}:d:%" PRIu64 " obj %s", d, v);
			CHECK_EQ(meta_lookup(m, d, "obj", &e), -EBADMSG);
		}
		snprintf(val, sizeof(val), "f%" PRIu64 " 10 1 %.16s", id, csum);
		rdo("HSET {t-bad}:d:%" PRIu64 " obj %s", d, val);
		CHECK_EQ(meta_lookup(m, d, "obj", &e), -EBADMSG); /* a field missing */
		{
			char v[256];

			snprintf(v, sizeof(v), "f%" PRIu64 " 10 1 %s node-a", id, csum);
			rdo("HSET {t-bad}:d:%" PRIu64 " obj %s", d, v);
		}
		CHECK_EQ(meta_lookup(m, d, "obj", &e), 0);
		CHECK_EQ(e.obj.size, 10);
		CHECK_STR(e.obj.origin, "node-a");
		/* what getattr by id and get_object read: the entry too, which
		 * the record leads to (layout 2) */
		{
			char v[256];

			snprintf(v, sizeof(v), "f%" PRIu64 " 10 1 %s %s", id, csum, "bad node");
			rdo("HSET {t-bad}:d:%" PRIu64 " obj %s", d, v);
			CHECK_EQ(meta_getattr(m, id, &e), -EBADMSG);
			CHECK_EQ(meta_get_object(m, id, &got), -EBADMSG);
			snprintf(v, sizeof(v), "f%" PRIu64 " 10 -5 %s node-a", id, csum);
			rdo("HSET {t-bad}:d:%" PRIu64 " obj %s", d, v);
		}
		/* an entry without them: layout 1 had such entries, the
		 * migration gives them their attributes; now a damaged one */
		rdo("HSET {t-bad}:d:%" PRIu64 " obj f%" PRIu64, d, id);
		CHECK_EQ(meta_lookup(m, d, "obj", &e), -EBADMSG);
		CHECK_EQ(meta_getattr(m, id, &e), -EBADMSG);
		CHECK_EQ(meta_get_object(m, id, &got), -EBADMSG);
		{
			char v[256];

			snprintf(v, sizeof(v), "f%" PRIu64 " 10 -5 %s node-a", id, csum);
			rdo("HSET {t-bad}:d:%" PRIu64 " obj %s", d, v);
		}
		CHECK_EQ(meta_get_object(m, id, &got), 0);
		CHECK_EQ(got.mtime_ns, -5);
		/* a record that leads to no entry */
		{
			char v[256];

			snprintf(v, sizeof(v), "%" PRIu64 "/elsewhere/@node-a", d);
			rec_set("t-bad", id, v);
			CHECK_EQ(meta_get_object(m, id, &got), -EBADMSG);
			snprintf(v, sizeof(v), "%" PRIu64 "/obj/@node-a", d);
			rec_set("t-bad", id, v);
		}
		CHECK_EQ(meta_get_object(m, id, &got), 0);
		snprintf(val, sizeof(val), "%s", "ok");
		CHECK_STR(val, "ok");
	}
	return id;
}

/* A directory's own fields, names that cannot be names, a damaged path */
static void corrupt_dirs(struct meta *m, uint64_t d, uint64_t id)
{
	struct meta_dirent *ents = NULL;
	struct meta_entry e;
	struct meta_obj o;
	char name[400];
	size_t n;

	/* directory fields */
	rdo("HSET {t-bad}:d:%" PRIu64 " /nsub -3", d);
	CHECK_EQ(meta_getattr(m, d, &e), -EBADMSG);
	CHECK_EQ(meta_lookup(m, 1, "d", &e), -EBADMSG);
	rdo("HSET {t-bad}:d:%" PRIu64 " /nsub 0", d);
	rdo("HSET {t-bad}:d:%" PRIu64 " /mtime x", d);
	CHECK_EQ(meta_getattr(m, d, &e), -EBADMSG);
	rdo("HSET {t-bad}:d:%" PRIu64 " /mtime 1", d);
	CHECK_EQ(meta_getattr(m, d, &e), 0);

	/* names that cannot be names: too long, bad UTF-8, NUL inside */
	memset(name, 'n', 300);
	name[300] = '\0';
	rdo("HSET {t-bad}:d:%" PRIu64 " %s f%" PRIu64, d, name, id);
	CHECK_EQ(meta_readdir(m, d, &ents, &n), 0);
	CHECK_EQ(n, 1);
	meta_dirents_free(ents);
	rdo("HDEL {t-bad}:d:%" PRIu64 " %s", d, name);
	memset(name, 'n', 255);
	name[255] = '\0';
	rdo("HSET {t-bad}:d:%" PRIu64 " %s f%" PRIu64, d, name, id);
	CHECK_EQ(meta_readdir(m, d, &ents, &n), 0);
	CHECK_EQ(n, 2);
	meta_dirents_free(ents);
	rdo("HSET {t-bad}:d:%" PRIu64 " %b f1", d, "\xff\xfe", (size_t)2);
	CHECK_EQ(meta_readdir(m, d, &ents, &n), 0);
	CHECK_EQ(n, 2);
	meta_dirents_free(ents);
	rdo("HDEL {t-bad}:d:%" PRIu64 " %b", d, "\xff\xfe", (size_t)2);
	rdo("HSET {t-bad}:d:%" PRIu64 " %b f1", d, "a\0b", (size_t)3);
	CHECK_EQ(meta_readdir(m, d, &ents, &n), 0);
	CHECK_EQ(n, 2);
	meta_dirents_free(ents);
	rdo("HDEL {t-bad}:d:%" PRIu64 " %b", d, "a\0b", (size_t)3);
	CHECK_EQ(meta_readdir(m, d, &ents, &n), 0);
	meta_dirents_free(ents);

	/* a damaged path makes publish refuse before it writes */
	rdo("HSET {t-bad}:d:%" PRIu64 " /name %s", d, "");
	mkobj(m, &o, 1);
	CHECK_EQ(meta_publish(m, d, "p", &o, false, NULL, NULL), -EBADMSG);
	CHECK_EQ(meta_object_exists(m, o.id), 0);
	rdo("HSET {t-bad}:d:%" PRIu64 " /name d", d);
}

/* The namespace's counters and a holder set with a bad member */
static void corrupt_counters(struct meta *m, uint64_t d, uint64_t id)
{
	char(*nodes)[OBJFS_NODE_MAX];
	struct meta_obj o;
	char epoch[64];
	size_t n;

	/* a damaged write sequence: ids do not depend on it, and the next
	 * publish sets it right */
	rdo("SET {t-bad}:ctr abc");
	CHECK_EQ(meta_alloc_id(m, &id), 0);
	CHECK_EQ(meta_mkdir(m, 1, "z", 1, NULL), 0);
	mkobj(m, &o, 1);
	CHECK_EQ(meta_publish(m, 1, "q", &o, false, NULL, NULL), 0);
	rget(epoch, sizeof(epoch), "GET {t-bad}:ctr");
	CHECK(epoch[0] >= '1' && epoch[0] <= '9');
	rdo("SET {t-bad}:ctr 1000");
	rdo("SET {t-bad}:epoch %s", "not an epoch!");
	CHECK_EQ(meta_epoch(m, epoch, sizeof(epoch)), -EBADMSG);
	rdo("SET {t-bad}:epoch abcdef");
	CHECK_EQ(meta_epoch(m, epoch, 4), -ERANGE);
	CHECK_EQ(meta_epoch(m, epoch, sizeof(epoch)), 0);
	CHECK_STR(epoch, "abcdef");
	{
		char key[96], field[24], v[256];
		int len;

		bucket_of("t-bad", id, key, field);
		len = snprintf(v, sizeof(v), "%" PRIu64 "/obj/@x", d);
		v[len++] = '\0';
		v[len++] = 'y';
		rdo("HSET %s %s %b", key, field, v, (size_t)len);
	}
	CHECK_EQ(meta_holders(m, id, &nodes, &n), -EBADMSG);
}

TEST(corrupt)
{
	struct meta *m = mk_connected("t-bad");
	struct meta_entry e;
	uint64_t d, id;

	CHECK_EQ(meta_mkdir(m, 1, "d", 1, &e), 0);
	d = e.id;
	corrupt_entries(m, d);
	id = corrupt_objects(m, d);
	corrupt_dirs(m, d, id);
	corrupt_counters(m, d, id);
	meta_free(m);
}

/* Did @f get a line containing the text @fmt makes since it was made? */
static bool logged(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool logged(FILE *f, const char *fmt, ...)
{
	char want[256], line[4096];
	bool found = false;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	fflush(f);
	rewind(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fseek(f, 0, SEEK_END);
	return found;
}

/*
 * A key of the wrong type is a corrupt record (-EBADMSG, and a log line
 * naming the key), not an outage: Redis stays up, and with the epoch
 * broken, new connections still work.
 */
TEST(wrong_types)
{
	struct meta *m = mk_connected("t-wt");
	char(*nodes)[OBJFS_NODE_MAX];
	struct meta_dirent *ents = NULL;
	struct meta_holder *hs = NULL;
	struct meta_entry e;
	struct meta_obj o, got;
	FILE *logf = tmpfile();
	char epoch[64], csum[OBJFS_CSUM_HEX], bkey[96], bfield[24];
	size_t n;
	uint64_t d;

	CHECK(logf != NULL);
	if (!logf)
		return;
	log_setup(LOGL_INFO, logf);
	CHECK_EQ(meta_mkdir(m, 1, "d", 1, &e), 0);
	d = e.id;
	mkobj(m, &o, 10);
	CHECK_EQ(meta_publish(m, d, "obj", &o, false, NULL, NULL), 0);
	util_csum_to_hex(o.csum, csum);

	/* the object record (the entry without attributes, as older
	 * versions wrote it, so that lookup reads the record) */
	rdo("HSET {t-wt}:d:%" PRIu64 " obj f%" PRIu64, d, o.id);
	bucket_of("t-wt", o.id, bkey, bfield);
	rdo("DEL %s", bkey);
	rdo("SET %s string", bkey);
	CHECK_EQ(meta_lookup(m, d, "obj", &e), -EBADMSG);
	CHECK_EQ(meta_get_object(m, o.id, &got), -EBADMSG);
	CHECK_EQ(meta_locate(m, o.id, &got, &hs, &n, NULL), -EBADMSG);
	CHECK(logged(logf, "key '%s' has the wrong type (string)", bkey));
	/* its holders are in it */
	CHECK_EQ(meta_holders(m, o.id, &nodes, &n), -EBADMSG);
	rdo("DEL %s", bkey);

	/* a size no off_t holds */
	{
		char v[64];

		snprintf(v, sizeof(v), "%" PRIu64 "/obj", d);
		rec_set("t-wt", o.id, v);
	}
	{
		char v[256];

		snprintf(v, sizeof(v), "f%" PRIu64 " 18446744073709551615 1 %s n1", o.id, csum);
		rdo("HSET {t-wt}:d:%" PRIu64 " obj %s", d, v);
		CHECK_EQ(meta_lookup(m, d, "obj", &e), -EBADMSG);
		CHECK_EQ(meta_getattr(m, o.id, &e), -EBADMSG);
		CHECK(logged(logf, "object %" PRIu64 ": field 'size' is '18446744073709551615'",
			     o.id));
		snprintf(v, sizeof(v), "f%" PRIu64 " 10 1 %s n1", o.id, csum);
		rdo("HSET {t-wt}:d:%" PRIu64 " obj %s", d, v);
		CHECK_EQ(meta_lookup(m, d, "obj", &e), 0);
		CHECK_EQ(meta_getattr(m, o.id, &e), 0);
	}

	/* a directory */
	rdo("DEL {t-wt}:d:%" PRIu64, d);
	rdo("SET {t-wt}:d:%" PRIu64 " string", d);
	CHECK_EQ(meta_lookup(m, d, "x", &e), -EBADMSG);
	CHECK_EQ(meta_readdir(m, d, &ents, &n), -EBADMSG);
	CHECK_EQ(meta_getattr(m, d, &e), -EBADMSG);
	CHECK_EQ(meta_lookup(m, 1, "d", &e), -EBADMSG);
	CHECK(logged(logf, "key '{t-wt}:d:%" PRIu64 "' has the wrong type (string)", d));

	/* the epoch, then every connection made again */
	rdo("DEL {t-wt}:epoch");
	rdo("HSET {t-wt}:epoch not astring");
	CHECK_EQ(meta_epoch(m, epoch, sizeof(epoch)), -EBADMSG);
	CHECK(logged(logf, "key '{t-wt}:epoch' has the wrong type (hash)"));
	rdo("CLIENT KILL TYPE normal SKIPME yes");
	CHECK_EQ(meta_mkdir(m, 1, "after", 1, NULL), 0);
	CHECK_EQ(meta_connect(m), 0);
	CHECK(meta_is_up(m));

	/* nothing of it said "unreachable" */
	CHECK(!logged(logf, "unreachable"));
	log_setup(LOGL_INFO, NULL);
	fclose(logf);
	meta_free(m);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct meta_dirent_plus *)a)->name,
		      ((const struct meta_dirent_plus *)b)->name);
}

/* Every page of @dir appended into one array (caller frees); the number
 * of pages into *ret_pages. */
static struct meta_dirent_plus *all_pages(struct meta *m, uint64_t dir, size_t *ret_n,
					  unsigned *ret_pages)
{
	struct meta_dirent_plus *all = NULL, *page, *grown;
	uint64_t cursor = 0;
	size_t n = 0, k;
	unsigned pages = 0;

	do {
		CHECK_EQ(meta_readdir_page(m, dir, &cursor, &page, &k), 0);
		grown = realloc(all, (n + k + 1) * sizeof(*all));
		CHECK(grown != NULL);
		all = grown;
		memcpy(all + n, page, k * sizeof(*page));
		n += k;
		free(page);
		pages++;
	} while (cursor && pages < 100000);
	*ret_n = n;
	*ret_pages = pages;
	return all;
}

TEST(readdir_page)
{
	struct meta *m = mk_connected("t-page");
	struct meta_dirent_plus *all, *page;
	struct meta_entry e;
	struct meta_obj o, first;
	uint64_t d, sub, cursor = 0;
	unsigned pages;
	size_t n, i, uniq, files = 0;
	char name[32];
	const size_t N = 2500;

	CHECK_EQ(meta_mkdir(m, 1, "big", 5, &e), 0);
	d = e.id;
	CHECK_EQ(meta_mkdir(m, d, "sub", 7, &e), 0);
	sub = e.id;
	for (i = 0; i < N; i++) {
		mkobj(m, &o, i);
		if (i == 0)
			first = o;
		snprintf(name, sizeof(name), "f%zu", i);
		CHECK_EQ(meta_publish(m, d, name, &o, false, NULL, NULL), 0);
	}

	/* a small directory comes in one page */
	CHECK_EQ(meta_readdir_page(m, 1, &cursor, &page, &n), 0);
	CHECK_EQ(cursor, 0);
	CHECK_EQ(n, 1);
	CHECK_STR(page[0].name, "big");
	CHECK(page[0].attr);
	CHECK_EQ(page[0].e.kind, META_DIR);
	CHECK_EQ(page[0].e.id, d);
	CHECK_EQ(page[0].e.nsub, 1);
	free(page);

	/* a big one in several, every name once after dedupe, with the
	 * attributes lookup gives */
	all = all_pages(m, d, &n, &pages);
	CHECK(pages > 1);
	CHECK(n >= N + 1);
	qsort(all, n, sizeof(*all), cmp_name);
	for (i = 0, uniq = 0; i < n; i++) {
		if (i && !strcmp(all[i].name, all[i - 1].name))
			continue;
		uniq++;
		CHECK(all[i].attr);
		if (!strcmp(all[i].name, "sub")) {
			CHECK_EQ(all[i].e.kind, META_DIR);
			CHECK_EQ(all[i].e.id, sub);
			CHECK_EQ(all[i].e.obj.mtime_ns, 7);
			continue;
		}
		CHECK_EQ(all[i].e.kind, META_FILE);
		CHECK_EQ(all[i].e.obj.size, strtoull(all[i].name + 1, NULL, 10));
		files++;
		if (!strcmp(all[i].name, "f0")) {
			CHECK_EQ(all[i].e.id, first.id);
			CHECK_EQ(all[i].e.obj.mtime_ns, first.mtime_ns);
			CHECK(!memcmp(all[i].e.obj.csum, first.csum, OBJFS_CSUM_LEN));
			CHECK_STR(all[i].e.obj.origin, "node-a");
		}
	}
	CHECK_EQ(uniq, N + 1);
	CHECK_EQ(files, N);
	free(all);

	/* bad entries: a bad value is left out, a missing record leaves the
	 * name without attributes */
	rdo("HSET {t-page}:d:%" PRIu64 " bad garbage", sub);
	rdo("HSET {t-page}:d:%" PRIu64 " ghost f777777", sub);
	rdo("HSET {t-page}:d:%" PRIu64 " ghostdir d777777", sub);
	rdo("SET {t-page}:r:7778 string");
	rdo("HSET {t-page}:d:%" PRIu64 " wrongtype f777778", sub);
	all = all_pages(m, sub, &n, &pages);
	CHECK_EQ(n, 3);
	qsort(all, n, sizeof(*all), cmp_name);
	CHECK_STR(all[0].name, "ghost");
	CHECK(!all[0].attr);
	CHECK_EQ(all[0].e.kind, META_FILE);
	CHECK_EQ(all[0].e.id, 777777);
	CHECK_STR(all[1].name, "ghostdir");
	CHECK(!all[1].attr);
	CHECK_EQ(all[1].e.kind, META_DIR);
	CHECK_STR(all[2].name, "wrongtype");
	CHECK(!all[2].attr);
	CHECK_EQ(all[2].e.id, 777778);
	free(all);

	cursor = 0;
	CHECK_EQ(meta_readdir_page(m, 987654, &cursor, &page, &n), -ENOENT);
	CHECK_EQ(meta_readdir_page(m, first.id, &cursor, &page, &n), -ENOTDIR);
	CHECK_EQ(meta_readdir_page(m, 0, &cursor, &page, &n), -EINVAL);
	meta_free(m);
}

/* One call checks a batch of objects: live ones (one renamed, one in a
 * directory renamed) become holders with their path now, deleted, unknown
 * and other-bytes ones say so; a corrupt record fails the batch with
 * EBADMSG (the caller then checks one at a time). */
TEST(sync_batch)
{
	enum { N = 2500 };
	struct meta *m = mk_connected("t-sync"), *b = mk("t-sync", "node-b", 0, 0);
	struct meta_obj *objs = calloc(N, sizeof(*objs));
	struct meta_sync *res = calloc(META_SYNC_BATCH, sizeof(*res));
	char name[64], path[64], (*nodes)[OBJFS_NODE_MAX];
	struct meta_entry de;
	uint64_t d, id, i, off;
	int live = 0, dead = 0, unknown = 0, other = 0;
	size_t n;

	CHECK_EQ(meta_connect(b), 0);
	CHECK_EQ(meta_mkdir(m, META_ROOT_ID, "d", 1, &de), 0);
	d = de.id;
	for (i = 0; i < N; i++) {
		mkobj(m, &objs[i], 100 + i);
		snprintf(name, sizeof(name), "f%" PRIu64, i);
		switch (i % 5) {
		case 0: /* live */
		case 1: /* live, renamed */
			CHECK_EQ(meta_publish(m, d, name, &objs[i], 0, NULL, NULL), 0);
			if (i % 5 == 1)
				CHECK_EQ(
				    meta_rename(m, d, name, META_ROOT_ID, name, 0, false, NULL), 0);
			break;
		case 2: /* deleted */
			CHECK_EQ(meta_publish(m, d, name, &objs[i], 0, NULL, NULL), 0);
			CHECK_EQ(meta_unlink(m, d, name, &id), 0);
			break;
		case 3: /* unknown: never published */
			break;
		case 4: /* other bytes under this id */
			CHECK_EQ(meta_publish(m, d, name, &objs[i], 0, NULL, NULL), 0);
			objs[i].size++;
			break;
		}
	}
	CHECK_EQ(meta_rename(m, META_ROOT_ID, "d", META_ROOT_ID, "e", 0, false, NULL), 0);
	for (off = 0; off < N; off += META_SYNC_BATCH) {
		size_t k = N - off < META_SYNC_BATCH ? N - off : META_SYNC_BATCH;

		CHECK_EQ(meta_sync_holders(b, objs + off, k, res), 0);
		for (i = 0; i < k; i++) {
			uint64_t j = off + i;

			switch (j % 5) {
			case 0:
			case 1:
				live += res[i].state == META_SYNC_LIVE;
				snprintf(path, sizeof(path), j % 5 ? "/f%" PRIu64 : "/e/f%" PRIu64,
					 j);
				CHECK(res[i].path && !strcmp(res[i].path, path));
				break;
			case 2:
				dead += res[i].state == META_SYNC_DELETED;
				CHECK(!res[i].path);
				break;
			case 3:
				unknown += res[i].state == META_SYNC_UNKNOWN;
				break;
			case 4:
				other += res[i].state == META_SYNC_OTHER;
				break;
			}
		}
		meta_sync_release(res, k);
	}
	CHECK_EQ(live, 2 * N / 5);
	CHECK_EQ(dead, N / 5);
	CHECK_EQ(unknown, N / 5);
	CHECK_EQ(other, N / 5);
	/* node-b holds the live ones now, and only those */
	CHECK_EQ(meta_holders(m, objs[0].id, &nodes, &n), 0);
	CHECK(n == 2 && (!strcmp(nodes[1], "node-b") || !strcmp(nodes[0], "node-b")));
	free(nodes);
	CHECK_EQ(meta_holders(m, objs[4].id, &nodes, &n), 0);
	CHECK_EQ(n, 1);
	free(nodes);

	/* a record of the wrong type on the way: the batch says EBADMSG */
	{
		char key[96], field[24];

		bucket_of("t-sync", objs[0].id, key, field);
		rdo("DEL %s", key);
		rdo("SET %s junk", key);
	}
	CHECK_EQ(meta_sync_holders(b, objs, 10, res), -EBADMSG);
	CHECK_EQ(meta_sync_holders(b, objs + 5, 10, res), 0);
	meta_sync_release(res, 10);
	CHECK_EQ(meta_sync_holders(b, objs, META_SYNC_BATCH + 1, res), -EINVAL);
	meta_free(b);
	meta_free(m);
	free(objs);
	free(res);
}

/* Registering a batch again after Redis lost it: one call; each one's
 * outcome as meta_reregister() would give it. */
TEST(reregister_batch)
{
	enum { N = 600 };
	struct meta *m = mk_connected("t-rereg"), *b = mk("t-rereg", "node-b", 0, 0);
	struct meta_obj *objs = calloc(N, sizeof(*objs)), other;
	struct meta_rereg *res = calloc(N, sizeof(*res));
	const char **paths = calloc(N, sizeof(*paths));
	char(*pbuf)[64] = calloc(N, sizeof(*pbuf)), got[OBJFS_PATH_MAX];
	char(*nodes)[OBJFS_NODE_MAX];
	struct meta_entry de, e;
	uint64_t i;
	size_t n;

	CHECK_EQ(meta_connect(b), 0);
	CHECK_EQ(meta_mkdir(m, META_ROOT_ID, "taken", 1, &de), 0);
	for (i = 0; i < N; i++) {
		mkobj(m, &objs[i], 100 + i);
		/* deep new directories, shared by many */
		snprintf(pbuf[i], sizeof(pbuf[i]), "/x%" PRIu64 "/y%" PRIu64 "/f%" PRIu64, i % 3,
			 i % 7, i);
		paths[i] = pbuf[i];
	}
	/* 5: its record is there already; 6: the id is another object's;
	 * 7: its name is taken; 8: a directory on its path is a file */
	CHECK_EQ(meta_reregister(m, &objs[5], paths[5], got), 0);
	other = objs[6];
	other.size++;
	CHECK_EQ(meta_reregister(m, &other, "/other", got), 0);
	snprintf(pbuf[7], sizeof(pbuf[7]), "/taken");
	snprintf(pbuf[8], sizeof(pbuf[8]), "/other/f8");

	CHECK_EQ(meta_reregister_batch(b, objs, paths, N, res), 0);
	for (i = 0; i < N; i++) {
		if (i == 6) {
			CHECK_EQ(res[i].r, -ENOTUNIQ);
			continue;
		}
		if (i == 5) {
			CHECK_EQ(res[i].r, 0);
			CHECK(!res[i].path);
		} else if (i == 7 || i == 8) {
			CHECK_EQ(res[i].r, 1);
			CHECK(res[i].path && !strncmp(res[i].path, "/lost+found/", 12));
		} else {
			CHECK_EQ(res[i].r, 0);
			CHECK(res[i].path && !strcmp(res[i].path, paths[i]));
		}
		CHECK_EQ(meta_holders(m, objs[i].id, &nodes, &n), 0);
		CHECK(n >= 1 &&
		      (!strcmp(nodes[0], "node-b") || (n > 1 && !strcmp(nodes[1], "node-b"))));
		free(nodes);
	}
	meta_rereg_release(res, N);
	CHECK_EQ(meta_lookup(m, META_ROOT_ID, "x2", &e), 0);
	CHECK_EQ(meta_lookup(m, e.id, "y3", &e), 0);
	CHECK_EQ(meta_lookup(m, e.id, "f17", &e), 0);
	CHECK_EQ(e.id, objs[17].id);
	/* a bad path fails the whole batch before Redis is asked */
	paths[3] = "relative";
	CHECK_EQ(meta_reregister_batch(b, objs, paths, 10, res), -EINVAL);
	CHECK_EQ(meta_reregister_batch(b, objs, paths, META_SYNC_BATCH + 1, res), -EINVAL);
	meta_free(b);
	meta_free(m);
	free(objs);
	free(res);
	free(paths);
	free(pbuf);
}

/*
 * A batch whose paths have spaces, UTF-8, '%' and ':' in them (the
 * script reads each path by its length, not up to a separator), two
 * objects that want the same name (the second goes to /lost+found, the
 * first keeps it), a file above a later one's name, and a name of 255
 * bytes that must be cut on a character boundary to go to /lost+found;
 * negative mtimes.  The same as meta_reregister() one at a time would
 * do.
 */
TEST(reregister_batch_names)
{
	enum { N = 9 };
	struct meta *m = mk_connected("t-rereg-names");
	struct meta_obj objs[N];
	struct meta_rereg res[N];
	char longname[256], longpath[300], got[OBJFS_PATH_MAX];
	const char *paths[N];
	struct meta_entry e;
	size_t i;

	/* 127 two-byte characters and one byte: 255 bytes */
	for (i = 0; i < 127; i++)
		memcpy(longname + 2 * i, "\xc3\xa9", 2);
	memcpy(longname + 254, "x", 2);
	snprintf(longpath, sizeof(longpath), "/long/%s", longname);
	for (i = 0; i < N; i++) {
		mkobj(m, &objs[i], 10 + i);
		objs[i].mtime_ns = -1000 - (int64_t)i;
	}
	paths[0] = "/with space/a b:c%d \xc3\xa9 %s%%";
	paths[1] = "/pct%20/co:lon: 3:/x";
	paths[2] = "/same/name";
	paths[3] = "/same/name"; /* taken by 2 within this batch */
	paths[4] = "/f";
	paths[5] = "/f/under"; /* "/f" is a file by now */
	paths[6] = longpath;
	paths[7] = longpath; /* moved, and its name cut */
	paths[8] = "/ 12:/7 x/10:/y";
	CHECK_EQ(meta_reregister_batch(m, objs, paths, N, res), 0);
	for (i = 0; i < N; i++) {
		bool moved = i == 3 || i == 5 || i == 7;

		CHECK_EQ(res[i].r, moved);
		CHECK(res[i].path != NULL);
		if (!res[i].path)
			continue;
		if (moved)
			CHECK(!strncmp(res[i].path, "/lost+found/", 12));
		else
			CHECK_STR(res[i].path, paths[i]);
		/* the name resolves to this object, and its record says so */
		CHECK_EQ(meta_object_path(m, objs[i].id, got), 0);
		CHECK_STR(got, res[i].path);
	}
	CHECK_EQ(lookup_id(m, META_ROOT_ID, "same") != 0, 1);
	CHECK_EQ(meta_lookup(m, lookup_id(m, META_ROOT_ID, "same"), "name", &e), 0);
	CHECK_EQ(e.id, objs[2].id);
	CHECK_EQ(meta_lookup(m, META_ROOT_ID, "f", &e), 0);
	CHECK_EQ(e.id, objs[4].id);
	if (res[7].path) {
		const char *name = res[7].path + 12;

		CHECK(strlen(name) <= 255);
		/* cut between characters: the UTF-8 of é, then the suffix */
		CHECK(!strncmp(name + strcspn(name, "."), ".objfs-", 7));
		CHECK_EQ(strcspn(name, ".") % 2, 0);
	}
	meta_rereg_release(res, N);
	meta_free(m);
}

/*
 * Issue 22: an object's block sums live in field bsum of its record.
 * Publish writes them; locate returns them only when asked; a fetcher's
 * add_holder records them only if the record has none and its copy is
 * of the record's bytes; lookups ignore them; every way a record goes
 * takes them along; a malformed field is logged and taken as none.
 */
TEST(block_sums)
{
	struct meta *m = mk_connected("t-bs"), *b = mk("t-bs", "node-b", 0, 0);
	const char *sums = "23:00000000000000010000000000000002";
	struct meta_holder *hs = NULL;
	struct meta_obj o, o2, got;
	struct meta_entry e;
	FILE *logf = tmpfile();
	char *bs = NULL, buf[128];
	uint64_t replaced;
	size_t n;

	CHECK(logf != NULL);
	if (!logf)
		return;
	log_setup(LOGL_INFO, logf);
	mkobj(m, &o, 9 << 20);
	CHECK_EQ(meta_publish_sums(m, 1, "f", &o, "23:XYZ", 0, NULL, NULL), -EINVAL);
	CHECK_EQ(meta_publish_sums(m, 1, "f", &o, sums, 0, NULL, NULL), 0);
	rget(buf, sizeof(buf), "HGET {t-bs}:x:%" PRIu64 " bsum", o.id);
	CHECK_STR(buf, sums);
	CHECK_EQ(meta_lookup(m, 1, "f", &e), 0);
	CHECK_EQ(e.id, o.id);
	CHECK_EQ(meta_locate_sums(b, o.id, &got, &hs, &n, NULL, &bs), 0);
	CHECK(bs && !strcmp(bs, sums));
	free(bs);
	free(hs);
	CHECK_EQ(meta_locate(b, o.id, &got, &hs, &n, NULL), 0);
	CHECK_EQ(got.size, o.size);
	free(hs);

	/* an older object: none; the fetcher's copy adds them once */
	rdo("HDEL {t-bs}:x:%" PRIu64 " bsum", o.id);
	bs = (char *)1;
	CHECK_EQ(meta_locate_sums(b, o.id, &got, &hs, &n, NULL, &bs), 0);
	CHECK(bs == NULL);
	free(hs);
	o2 = o;
	o2.size++; /* another object's bytes: nothing recorded */
	CHECK_EQ(meta_add_holder_sums(b, &o2, sums, NULL), -ENOTUNIQ);
	rget(buf, sizeof(buf), "HEXISTS {t-bs}:x:%" PRIu64 " bsum", o.id);
	CHECK_STR(buf, "0");
	CHECK_EQ(meta_add_holder_sums(b, &o, sums, NULL), 0);
	CHECK_EQ(meta_add_holder_sums(b, &o, "23:00000000000000030000000000000004", NULL), 0);
	rget(buf, sizeof(buf), "HGET {t-bs}:x:%" PRIu64 " bsum", o.id);
	CHECK_STR(buf, sums);

	/* malformed: logged, and fetched without */
	rdo("HSET {t-bs}:x:%" PRIu64 " bsum %s", o.id, "23:not-hex!");
	bs = (char *)1;
	CHECK_EQ(meta_locate_sums(b, o.id, &got, &hs, &n, NULL, &bs), 0);
	CHECK(bs == NULL);
	free(hs);
	CHECK(
	    logged(logf, "object %" PRIu64 ": its block sums (field 'bsum') are malformed", o.id));

	/* replaced, renamed over, unlinked: the record goes, sums and all */
	mkobj(m, &o2, 9 << 20);
	CHECK_EQ(meta_publish_sums(m, 1, "f", &o2, sums, META_PUBLISH_REPLACE, &replaced, NULL), 0);
	CHECK_EQ(replaced, o.id);
	snprintf(buf, sizeof(buf), "%d", rec_exists("t-bs", o.id));
	CHECK_STR(buf, "0");
	mkobj(m, &o, 9 << 20);
	CHECK_EQ(meta_publish_sums(m, 1, "g", &o, sums, 0, NULL, NULL), 0);
	CHECK_EQ(meta_rename(m, 1, "g", 1, "f", 0, true, &replaced), 0);
	CHECK_EQ(replaced, o2.id);
	snprintf(buf, sizeof(buf), "%d", rec_exists("t-bs", o2.id));
	CHECK_STR(buf, "0");
	CHECK_EQ(meta_unlink(m, 1, "f", NULL), 0);
	snprintf(buf, sizeof(buf), "%d", rec_exists("t-bs", o.id));
	CHECK_STR(buf, "0");
	log_setup(LOGL_INFO, NULL);
	fclose(logf);
	meta_free(b);
	meta_free(m);
}

/* A node card for @m's node (listening at @listen), for locate to see. */
static void card_make(struct meta_card *c, const char *node, const char *listen)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->host, sizeof(c->host), "test");
	snprintf(c->listen, sizeof(c->listen), "%s", listen);
	snprintf(c->caps, sizeof(c->caps), "tcp");
	snprintf(c->instance, sizeof(c->instance), "i-%s", node);
	c->pid = getpid();
}

static void card_of(struct meta *m, const char *node, const char *listen)
{
	struct meta_card c, other;

	card_make(&c, node, listen);
	CHECK_EQ(meta_node_claim(m, &c, 60, &other), 0);
}

/*
 * Issue 22: nodes fetching an object advertise themselves in its record
 * through the locate that starts their fetch ("~p:<node>", a deadline on
 * Redis's clock), only for an object with block sums; other fetchers
 * find a bounded sample of them; the entry goes when the node becomes a
 * holder or leaves, when it lapses, or when its card is gone; and it is
 * never a holder.
 */
TEST(fan_entries)
{
	struct meta *a = mk_connected("t-fan"), *b = mk("t-fan", "node-b", 0, 0),
		    *c = mk("t-fan", "node-c", 0, 0), *d = mk("t-fan", "node-d", 0, 0);
	const char *sums = "23:00000000000000010000000000000002";
	struct meta_locate l;
	struct meta_obj o, small;
	char buf[128];

	card_of(a, "node-a", "127.0.0.1:1");
	card_of(b, "node-b", "127.0.0.1:2");
	card_of(c, "node-c", "127.0.0.1:3");
	mkobj(a, &o, 9 << 20);
	CHECK_EQ(meta_publish_sums(a, 1, "f", &o, sums, 0, NULL, NULL), 0);
	mkobj(a, &small, 10);
	CHECK_EQ(meta_publish(a, 1, "s", &small, 0, NULL, NULL), 0);

	/* b starts fetching and advertises; c finds it, and a as the holder */
	CHECK_EQ(meta_locate_fan(b, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	CHECK_EQ(l.n, 1);
	CHECK_EQ(l.np, 0);
	CHECK(l.bsum && !strcmp(l.bsum, sums));
	meta_locate_release(&l);
	rget(buf, sizeof(buf), "HEXISTS {t-fan}:x:%" PRIu64 " ~p:node-b", o.id);
	CHECK_STR(buf, "1");
	CHECK_EQ(meta_locate_fan(c, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	CHECK_EQ(l.n, 1);
	CHECK_EQ(l.np, 1);
	if (l.np == 1) {
		CHECK_STR(l.partials[0].node, "node-b");
		CHECK_STR(l.partials[0].addr, "127.0.0.1:2");
	}
	meta_locate_release(&l);
	/* the sample is bounded; a fetcher never finds itself */
	CHECK_EQ(meta_locate_fan(b, o.id, 0, 0, 1, &l), 0);
	CHECK_EQ(l.np, 1);
	if (l.np == 1)
		CHECK_STR(l.partials[0].node, "node-c");
	meta_locate_release(&l);
	CHECK_EQ(meta_locate_fan(b, o.id, 0, 0, META_FAN_SAMPLE_MAX + 1, &l), -EINVAL);

	/* never a copy: the last-copy rule still sees a as the only holder */
	CHECK_EQ(meta_release_replica(a, o.id), 0);

	/* b becomes a holder: its entry goes; c leaves: its entry goes */
	CHECK_EQ(meta_add_holder_prune(b, &o, NULL), 0);
	CHECK_EQ(meta_fan_leave(c, o.id), 0);
	rget(buf, sizeof(buf), "HEXISTS {t-fan}:x:%" PRIu64 " ~p:node-b", o.id);
	CHECK_STR(buf, "0");
	rget(buf, sizeof(buf), "HEXISTS {t-fan}:x:%" PRIu64 " ~p:node-c", o.id);
	CHECK_STR(buf, "0");

	/* lapsed, of a node without a card, garbage: dropped as met */
	rdo("HSET {t-fan}:x:%" PRIu64 " ~p:node-c 1", o.id);
	rdo("HSET {t-fan}:x:%" PRIu64 " ~p:node-x 99999999999999", o.id);
	rdo("HSET {t-fan}:x:%" PRIu64 " ~p:node-y junk", o.id);
	CHECK_EQ(meta_locate_fan(d, o.id, 0, 0, 8, &l), 0);
	CHECK_EQ(l.np, 0);
	CHECK_EQ(l.stale, 3);
	meta_locate_release(&l);
	CHECK_EQ(nfields("t-fan", o.id, "~p:"), 0);

	/* an object without block sums: nobody advertises */
	CHECK_EQ(meta_locate_fan(b, small.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	CHECK(l.bsum == NULL);
	meta_locate_release(&l);
	rget(buf, sizeof(buf), "HEXISTS {t-fan}:x:%" PRIu64 " ~p:node-b", small.id);
	CHECK_STR(buf, "0");

	/* unlinked: everything goes with the record; leaving then is fine */
	CHECK_EQ(meta_locate_fan(c, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	meta_locate_release(&l);
	CHECK_EQ(meta_unlink(a, 1, "f", NULL), 0);
	snprintf(buf, sizeof(buf), "%d", rec_exists("t-fan", o.id));
	CHECK_STR(buf, "0");
	CHECK_EQ(meta_fan_leave(c, o.id), 0);
	snprintf(buf, sizeof(buf), "%d", rec_exists("t-fan", o.id));
	CHECK_STR(buf, "0");
	meta_free(d);
	meta_free(c);
	meta_free(b);
	meta_free(a);
}

/*
 * A fetcher that crashes leaves its entry behind, and once no other node
 * fetches the object no locate meets it again: the index {P}:fan (the
 * entries by deadline) lets any node's heartbeat remove it once it
 * lapsed.  The index follows the entries (advertise, leave, holder,
 * unlink); a member whose entry an older node renewed goes alone; a
 * broken index fails nothing.
 */
TEST(fan_lapsed)
{
	struct meta *a = mk_connected("t-fanl"), *b = mk("t-fanl", "node-b", 0, 0),
		    *c = mk("t-fanl", "node-c", 0, 0);
	const char *sums = "23:00000000000000010000000000000002";
	struct meta_card ca;
	struct meta_locate l;
	struct meta_obj o;
	char buf[128], field[64], mb[64], mc[64];

	card_make(&ca, "node-a", "127.0.0.1:1");
	card_of(a, "node-a", "127.0.0.1:1");
	card_of(b, "node-b", "127.0.0.1:2");
	card_of(c, "node-c", "127.0.0.1:3");
	mkobj(a, &o, 9 << 20);
	CHECK_EQ(meta_publish_sums(a, 1, "f", &o, sums, 0, NULL, NULL), 0);
	snprintf(mb, sizeof(mb), "%" PRIu64 " node-b", o.id); /* members of the index */
	snprintf(mc, sizeof(mc), "%" PRIu64 " node-c", o.id);

	/* advertised: the index has each entry, with its deadline */
	CHECK_EQ(meta_locate_fan(b, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	meta_locate_release(&l);
	CHECK_EQ(meta_locate_fan(c, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	meta_locate_release(&l);
	rget(field, sizeof(field), "HGET {t-fanl}:x:%" PRIu64 " ~p:node-b", o.id);
	rget(buf, sizeof(buf), "ZSCORE {t-fanl}:fan %s", mb);
	CHECK_STR(buf, field);
	rget(buf, sizeof(buf), "ZCARD {t-fanl}:fan");
	CHECK_STR(buf, "2");
	/* c leaves: its member goes */
	CHECK_EQ(meta_fan_leave(c, o.id), 0);
	rget(buf, sizeof(buf), "ZCARD {t-fanl}:fan");
	CHECK_STR(buf, "1");

	/* b crashed: a heartbeat before its deadline leaves it, one after
	 * (here: the deadline moved to the past) removes entry and member */
	CHECK_EQ(meta_node_heartbeat(a, &ca, 60), 0);
	rget(buf, sizeof(buf), "HEXISTS {t-fanl}:x:%" PRIu64 " ~p:node-b", o.id);
	CHECK_STR(buf, "1");
	rdo("HSET {t-fanl}:x:%" PRIu64 " ~p:node-b 1", o.id);
	rdo("ZADD {t-fanl}:fan 1 %s", mb);
	CHECK_EQ(meta_node_heartbeat(a, &ca, 60), 0);
	rget(buf, sizeof(buf), "HEXISTS {t-fanl}:x:%" PRIu64 " ~p:node-b", o.id);
	CHECK_STR(buf, "0");
	rget(buf, sizeof(buf), "ZCARD {t-fanl}:fan");
	CHECK_STR(buf, "0");

	/* an entry an older node renewed (its field later than its member)
	 * stays; a member of a record that is gone goes and makes none */
	rdo("HSET {t-fanl}:x:%" PRIu64 " ~p:node-c 99999999999999", o.id);
	rdo("ZADD {t-fanl}:fan 1 %s", mc);
	rdo("ZADD {t-fanl}:fan 1 %s", "777 node-c");
	CHECK_EQ(meta_node_heartbeat(a, &ca, 60), 0);
	rget(buf, sizeof(buf), "HEXISTS {t-fanl}:x:%" PRIu64 " ~p:node-c", o.id);
	CHECK_STR(buf, "1");
	rget(buf, sizeof(buf), "ZCARD {t-fanl}:fan");
	CHECK_STR(buf, "0");
	snprintf(buf, sizeof(buf), "%d", rec_exists("t-fanl", 777));
	CHECK_STR(buf, "0");
	rdo("HDEL {t-fanl}:x:%" PRIu64 " ~p:node-c", o.id);

	/* a fetcher that becomes a holder: its member goes */
	CHECK_EQ(meta_locate_fan(b, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	meta_locate_release(&l);
	CHECK_EQ(meta_add_holder_prune(b, &o, NULL), 0);
	rget(buf, sizeof(buf), "ZCARD {t-fanl}:fan");
	CHECK_STR(buf, "0");

	/* a broken index (a string) fails neither a locate, nor a
	 * heartbeat, nor a leave */
	rdo("SET {t-fanl}:fan string");
	CHECK_EQ(meta_locate_fan(c, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	meta_locate_release(&l);
	CHECK_EQ(meta_node_heartbeat(a, &ca, 60), 0);
	CHECK_EQ(meta_fan_leave(c, o.id), 0);
	rdo("DEL {t-fanl}:fan");

	/* unlinked: the members of its entries go with the record */
	CHECK_EQ(meta_locate_fan(c, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
	meta_locate_release(&l);
	rget(buf, sizeof(buf), "ZCARD {t-fanl}:fan");
	CHECK_STR(buf, "1");
	CHECK_EQ(meta_unlink(a, 1, "f", NULL), 0);
	rget(buf, sizeof(buf), "ZCARD {t-fanl}:fan");
	CHECK_STR(buf, "0");
	meta_free(c);
	meta_free(b);
	meta_free(a);
}

/*
 * Many fetchers of one object (the record has more than 64 fields, so a
 * locate looks at a random 64): a locate returns at most its sample,
 * never itself, and entries of nodes without a card go as they are met,
 * so that repeated locates clear them all and keep the live ones.
 */
TEST(fan_many)
{
	struct meta *a = mk_connected("t-fanm"), *b = mk("t-fanm", "node-b", 0, 0);
	const char *sums = "23:00000000000000010000000000000002";
	struct meta_locate l;
	struct meta_obj o;
	const char *count_dead = "local n = 0 for _, f in ipairs(redis.call('HKEYS', KEYS[1])) "
				 "do if string.sub(f, 1, 7) == '~p:dead' then n = n + 1 end end "
				 "return n";
	char buf[128];
	unsigned i, dead_left = 1;

	card_of(a, "node-a", "127.0.0.1:1");
	mkobj(a, &o, 9 << 20);
	CHECK_EQ(meta_publish_sums(a, 1, "f", &o, sums, 0, NULL, NULL), 0);
	/* 100 live fetchers (node-a's card stands in for theirs: only the
	 * name must have one), 900 of nodes with no card */
	for (i = 0; i < 1000; i++) {
		if (i < 100) {
			char node[32], listen[32];
			struct meta *m;

			snprintf(node, sizeof(node), "live-%u", i);
			snprintf(listen, sizeof(listen), "127.0.0.1:%u", 2000 + i);
			m = mk("t-fanm", node, 0, 0);
			card_of(m, node, listen);
			meta_free(m);
			rdo("HSET {t-fanm}:x:%" PRIu64 " ~p:%s 99999999999999", o.id, node);
		} else {
			rdo("HSET {t-fanm}:x:%" PRIu64 " ~p:dead-%u 99999999999999", o.id, i);
		}
	}
	for (i = 0; i < 200 && dead_left; i++) {
		CHECK_EQ(meta_locate_fan(b, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
		CHECK(l.np <= 8);
		for (size_t k = 0; k < l.np; k++)
			CHECK(!strncmp(l.partials[k].node, "live-", 5));
		meta_locate_release(&l);
		rget(buf, sizeof(buf), "EVAL %s 1 {t-fanm}:x:%" PRIu64, count_dead, o.id);
		dead_left = (unsigned)atoi(buf);
	}
	CHECK_EQ(dead_left, 0);
	printf("# 900 dead fetcher entries of 1,000 cleared by %u locates\n", i);
	/* the live ones, and b itself (advertised by its locates), remain */
	CHECK_EQ(nfields("t-fanm", o.id, "~p:"), 101); /* 100 live, node-b */
	meta_free(b);
	meta_free(a);
}

/* A locate's sample of fetchers moves: 15 other fetchers and a sample of
 * 8, located again and again (as a fetch does, once a second), meets
 * every one of them, not the same first 8 of the record's hash order. */
TEST(fan_sample_moves)
{
	struct meta *a = mk_connected("t-fans"), *b = mk("t-fans", "node-b", 0, 0);
	const char *sums = "23:00000000000000010000000000000002";
	struct meta_locate l;
	struct meta_obj o;
	unsigned i, met = 0, seen[15] = {0};

	card_of(a, "node-a", "127.0.0.1:1");
	card_of(b, "node-b", "127.0.0.1:2");
	mkobj(a, &o, 9 << 20);
	CHECK_EQ(meta_publish_sums(a, 1, "f", &o, sums, 0, NULL, NULL), 0);
	for (i = 0; i < 15; i++) {
		char node[32], listen[32];
		struct meta *m;

		snprintf(node, sizeof(node), "f-%u", i);
		snprintf(listen, sizeof(listen), "127.0.0.1:%u", 3000 + i);
		m = mk("t-fans", node, 0, 0);
		card_of(m, node, listen);
		meta_free(m);
		rdo("HSET {t-fans}:x:%" PRIu64 " ~p:%s 99999999999999", o.id, node);
	}
	for (i = 0; i < 100 && met < 15; i++) {
		CHECK_EQ(meta_locate_fan(b, o.id, META_LOCATE_SUMS, 30000, 8, &l), 0);
		CHECK_EQ(l.np, 8);
		for (size_t k = 0; k < l.np; k++) {
			unsigned n;

			CHECK_EQ(sscanf(l.partials[k].node, "f-%u", &n), 1);
			if (n < 15 && !seen[n]++)
				met++;
		}
		meta_locate_release(&l);
		usleep(1000);
	}
	CHECK_EQ(met, 15);
	printf("# every one of 15 fetchers met in %u locates of 8\n", i);
	meta_free(b);
	meta_free(a);
}

/* Issue 23: owners, modes and times.  A directory made with attributes
 * has them ("/attr"), a published object in its record and its entry;
 * lookup, getattr and a listing page return them; setattr merges the
 * fields asked for (the rest as Redis has them, or the caller's base for
 * an entry that has none), moves the ctime, changes the mtime where it
 * lives, and tells every node ("attr 0 - <id>"); entries without
 * attributes (older versions) still read, as not set; a malformed one is
 * a corrupt record. */
TEST(attributes)
{
	struct meta *m = mk_connected("t-at"), *b = mk("t-at", "node-b", 0, 0);
	struct meta_attr at = {.set = true,
			       .uid = 1234,
			       .gid = 99,
			       .mode = 0750,
			       .atime_ns = 5,
			       .ctime_ns = 6},
			 base, ch = {0};
	struct meta_dirent_plus *ents = NULL;
	struct meta_entry e, d;
	struct inval_log l;
	struct meta_obj o, o2;
	char buf[256], txt[META_ATTR_TEXT_MAX];
	uint64_t cursor = 0;
	size_t n = 0, i;

	inval_init(&l);
	CHECK_EQ(meta_subscribe(b, inval_cb, &l), 0);
	CHECK_EQ(meta_attr_text(&at, 7, txt), 0);
	CHECK_STR(txt, "1234 99 750 5 6");
	ch = at;
	ch.atime_ns = ch.ctime_ns = 7; /* both the mtime: left out */
	CHECK_EQ(meta_attr_text(&ch, 7, txt), 0);
	CHECK_STR(txt, "1234 99 750");
	ch.mode = 010000;
	CHECK_EQ(meta_attr_text(&ch, 7, txt), -EINVAL);
	ch = at;
	ch.uid = UINT32_MAX;
	CHECK_EQ(meta_attr_text(&ch, 7, txt), -EINVAL);
	CHECK_EQ(meta_mkdir_attr(m, 1, "d", 7, &ch, &d), -EINVAL);

	CHECK_EQ(meta_mkdir_attr(m, 1, "d", 7, &at, &d), 0);
	rget(buf, sizeof(buf), "HGET {t-at}:d:%" PRIu64 " /attr", d.id);
	CHECK_STR(buf, "1234 99 750 5 6");
	CHECK_EQ(meta_lookup(b, 1, "d", &e), 0);
	CHECK(e.attr.set && e.attr.uid == 1234 && e.attr.gid == 99 && e.attr.mode == 0750);
	CHECK(e.attr.atime_ns == 5 && e.attr.ctime_ns == 6);
	mkobj(m, &o, 10);
	at.mode = 0640;
	at.atime_ns = at.ctime_ns = o.mtime_ns; /* as a fresh object's */
	CHECK_EQ(meta_publish_attr(m, d.id, "f", &o, NULL, &at, 0, NULL, NULL), 0);
	/* in the entry alone (layout 2) */
	rget(buf, sizeof(buf), "HGET {t-at}:d:%" PRIu64 " f", d.id);
	CHECK(strlen(buf) > 12 && !strcmp(buf + strlen(buf) - 12, " 1234 99 640"));
	CHECK_EQ(nfields("t-at", o.id, "attr"), 0);
	CHECK_EQ(meta_lookup(b, d.id, "f", &e), 0);
	CHECK(e.attr.set && e.attr.mode == 0640 && e.obj.size == 10);
	CHECK(e.attr.atime_ns == o.mtime_ns && e.attr.ctime_ns == o.mtime_ns);
	CHECK_EQ(meta_getattr(b, o.id, &e), 0);
	CHECK(e.attr.set && e.attr.uid == 1234 && e.attr.mode == 0640);
	/* the directory is not empty only for its entry: /attr is reserved */
	CHECK_EQ(meta_rmdir(m, 1, "d", NULL), -ENOTEMPTY);

	/* an object without attributes, as older versions published it */
	mkobj(m, &o2, 3);
	CHECK_EQ(meta_publish(m, d.id, "old", &o2, 0, NULL, NULL), 0);
	CHECK_EQ(meta_lookup(b, d.id, "old", &e), 0);
	CHECK(!e.attr.set);
	CHECK_EQ(meta_readdir_page(b, d.id, &cursor, &ents, &n), 0);
	CHECK_EQ(n, 2);
	for (i = 0; i < n; i++) {
		CHECK(ents[i].attr);
		if (!strcmp(ents[i].name, "f"))
			CHECK(ents[i].e.attr.set && ents[i].e.attr.mode == 0640);
		else
			CHECK(!ents[i].e.attr.set);
	}
	free(ents);

	/* setattr: mode alone on a file keeps the owner; the entry follows */
	base = (struct meta_attr){.set = true, .uid = 7, .gid = 8, .mode = 0644};
	ch = (struct meta_attr){.mode = 0600};
	CHECK_EQ(meta_setattr(m, o.id, META_SET_MODE, &ch, 0, &base, &e), 0);
	CHECK(e.attr.uid == 1234 && e.attr.gid == 99 && e.attr.mode == 0600);
	CHECK(e.attr.ctime_ns > o.mtime_ns && e.attr.atime_ns == o.mtime_ns);
	CHECK_EQ(meta_lookup(b, d.id, "f", &e), 0);
	CHECK(e.attr.mode == 0600 && e.obj.csum[0] == o.csum[0] && e.obj.size == 10);
	/* times: the mtime is the record's and the entry's */
	ch = (struct meta_attr){.atime_ns = 1000};
	CHECK_EQ(meta_setattr(m, o.id, META_SET_ATIME | META_SET_MTIME, &ch, 2000, &base, &e), 0);
	CHECK(e.attr.atime_ns == 1000 && e.obj.mtime_ns == 2000 && e.attr.mode == 0600);
	CHECK_EQ(meta_lookup(b, d.id, "f", &e), 0);
	CHECK(e.obj.mtime_ns == 2000 && e.attr.atime_ns == 1000);
	CHECK_EQ(nfields("t-at", o.id, "mtime"), 0);
	/* an entry without attributes takes the caller's base, then the change */
	ch = (struct meta_attr){.uid = 55};
	CHECK_EQ(meta_setattr(m, o2.id, META_SET_UID, &ch, 0, &base, &e), 0);
	CHECK(e.attr.set && e.attr.uid == 55 && e.attr.gid == 8 && e.attr.mode == 0644);
	CHECK_EQ(meta_lookup(b, d.id, "old", &e), 0);
	CHECK(e.attr.set && e.attr.uid == 55);
	/* a directory: /attr and /mtime */
	ch = (struct meta_attr){.gid = 4321};
	CHECK_EQ(meta_setattr(m, d.id, META_SET_GID | META_SET_MTIME, &ch, 42, &base, &e), 0);
	CHECK(e.kind == META_DIR && e.attr.uid == 1234 && e.attr.gid == 4321);
	CHECK_EQ(meta_getattr(b, d.id, &e), 0);
	CHECK(e.attr.gid == 4321 && e.obj.mtime_ns == 42);
	/* every node hears of each change by id */
	for (int t = 0; t < 200; t++) {
		pthread_mutex_lock(&l.lock);
		n = 0;
		for (i = 0; i < (size_t)l.n; i++)
			n += !strcmp(l.ev[i].kind, "attr") && l.ev[i].parent == 0 &&
			     (l.ev[i].id == o.id || l.ev[i].id == o2.id || l.ev[i].id == d.id);
		pthread_mutex_unlock(&l.lock);
		if (n >= 4)
			break;
		usleep(10000);
	}
	CHECK_EQ(n, 4);
	/* bad input; no such id */
	CHECK_EQ(meta_setattr(m, o.id, 1u << 7, &ch, 0, &base, &e), -EINVAL);
	base.set = false;
	CHECK_EQ(meta_setattr(m, o.id, META_SET_UID, &ch, 0, &base, &e), -EINVAL);
	base.set = true;
	CHECK_EQ(meta_setattr(m, 424242424242ULL, META_SET_UID, &ch, 0, &base, &e), -ENOENT);

	/* damaged attributes are a corrupt record, named */
	rdo("HSET {t-at}:d:%" PRIu64 " /attr %s", d.id, "1 2 9999 0 0");
	CHECK_EQ(meta_getattr(b, d.id, &e), -EBADMSG);
	rdo("HSET {t-at}:d:%" PRIu64 " /attr %s", d.id, "1 2 755 0 0");
	CHECK_EQ(meta_getattr(b, d.id, &e), 0);
	/* a file's are in its entry: damaged, the entry is */
	rget(buf, sizeof(buf), "HGET {t-at}:d:%" PRIu64 " f", d.id);
	{
		char v[256];

		snprintf(v, sizeof(v), "%s x", buf);
		rdo("HSET {t-at}:d:%" PRIu64 " f %s", d.id, v);
		CHECK_EQ(meta_getattr(b, o.id, &e), -EBADMSG);
		ch = (struct meta_attr){.mode = 0444};
		CHECK_EQ(meta_setattr(m, o.id, META_SET_MODE, &ch, 0, &base, &e), -EBADMSG);
		rdo("HSET {t-at}:d:%" PRIu64 " f %s", d.id, buf);
		CHECK_EQ(meta_setattr(m, o.id, META_SET_MODE, &ch, 0, &base, &e), 0);
		CHECK(e.attr.uid == 1234 && e.attr.mode == 0444);
	}
	meta_unsubscribe(b);
	meta_free(b);
	meta_free(m);
}

/* Issue 23: symbolic links.  Entry "l<id>" and hash s:<id>; lookup,
 * getattr and listings say what they are (their size the target's
 * length); readlink gives the target, any bytes but NUL; rename moves
 * them and keeps their place in the hash, unlink and a rename over one
 * delete the hash; a link's name is taken for publish and mkdir; bad
 * targets are refused and a damaged hash is a corrupt record. */
TEST(symlinks)
{
	struct meta *m = mk_connected("t-ln"), *b = mk("t-ln", "node-b", 0, 0);
	const char *odd = "../a b/\n\xc3\xa9 tab\there";
	struct meta_attr at = {.set = true, .uid = 5, .gid = 6, .mode = 0777};
	struct meta_dirent_plus *ents = NULL;
	char target[META_LINK_MAX + 2], buf[256];
	struct meta_entry e, l;
	struct meta_obj o;
	uint64_t cursor = 0, id;
	size_t n = 0;

	at.atime_ns = at.ctime_ns = 77;
	CHECK_EQ(meta_symlink(m, 1, "ln", odd, 77, &at, &l), 0);
	CHECK(l.kind == META_LINK && l.obj.size == strlen(odd) && l.obj.mtime_ns == 77);
	CHECK(l.attr.set && l.attr.uid == 5 && l.attr.mode == 0777);
	rget(buf, sizeof(buf), "HGET {t-ln}:d:1 ln");
	snprintf(target, sizeof(target), "l%" PRIu64, l.id);
	CHECK_STR(buf, target);
	CHECK_EQ(meta_lookup(b, 1, "ln", &e), 0);
	CHECK(e.kind == META_LINK && e.id == l.id && e.obj.size == strlen(odd) && e.attr.gid == 6);
	CHECK_EQ(meta_getattr(b, l.id, &e), 0);
	CHECK(e.kind == META_LINK && e.obj.mtime_ns == 77);
	CHECK_EQ(meta_readlink(b, l.id, target, sizeof(target)), 0);
	CHECK_STR(target, odd);
	CHECK_EQ(meta_readlink(b, l.id, buf, sizeof(buf)), -EINVAL); /* too small a buffer */
	CHECK_EQ(meta_readdir_page(b, 1, &cursor, &ents, &n), 0);
	CHECK(n == 1 && ents[0].attr && ents[0].e.kind == META_LINK &&
	      ents[0].e.obj.size == strlen(odd));
	free(ents);

	/* names taken, bad targets */
	CHECK_EQ(meta_symlink(m, 1, "ln", "x", 1, NULL, NULL), -EEXIST);
	CHECK_EQ(meta_mkdir(m, 1, "ln", 1, NULL), -EEXIST);
	mkobj(m, &o, 4);
	CHECK_EQ(meta_publish(m, 1, "ln", &o, 0, NULL, NULL), -EEXIST);
	CHECK_EQ(meta_symlink(m, 1, "e", "", 1, NULL, NULL), -ENOENT);
	memset(target, 'y', META_LINK_MAX + 1);
	target[META_LINK_MAX + 1] = '\0';
	CHECK_EQ(meta_symlink(m, 1, "long", target, 1, NULL, NULL), -ENAMETOOLONG);
	target[META_LINK_MAX] = '\0';
	CHECK_EQ(meta_symlink(m, 1, "long", target, 1, NULL, &e), 0);
	CHECK_EQ(e.obj.size, META_LINK_MAX);
	CHECK(!e.attr.set);

	/* setattr: lchown and lutimes */
	at = (struct meta_attr){.set = true, .uid = 9, .gid = 9, .mode = 0777};
	l.attr.uid = 1000;
	CHECK_EQ(meta_setattr(m, l.id, META_SET_UID | META_SET_MTIME, &l.attr, 555, &at, &e), 0);
	CHECK(e.kind == META_LINK && e.attr.uid == 1000 && e.attr.gid == 6 &&
	      e.obj.mtime_ns == 555);

	/* rename keeps it a link, and its place */
	CHECK_EQ(meta_mkdir(m, 1, "d", 1, &e), 0);
	CHECK_EQ(meta_rename(m, 1, "ln", e.id, "moved", 0, false, NULL), 0);
	rget(buf, sizeof(buf), "HGET {t-ln}:s:%" PRIu64 " n", l.id);
	CHECK_STR(buf, "moved");
	CHECK_EQ(meta_lookup(b, e.id, "moved", &e), 0);
	CHECK(e.kind == META_LINK && e.id == l.id);
	/* a link is not a directory: rename over one, or of one onto a dir */
	CHECK_EQ(meta_rename(m, 1, "long", 1, "d", 0, true, NULL), -EISDIR);
	/* rename over it replaces it (with replace_files), and its hash goes */
	id = lookup_id(m, 1, "d");
	CHECK_EQ(meta_rename(m, 1, "long", id, "moved", 0, false, NULL), -EEXIST);
	CHECK_EQ(meta_rename(m, 1, "long", id, "moved", 0, true, NULL), 0);
	rget(buf, sizeof(buf), "EXISTS {t-ln}:s:%" PRIu64, l.id);
	CHECK_STR(buf, "0");
	id = lookup_id(m, id, "moved");
	CHECK_EQ(meta_readlink(b, id, target, sizeof(target)), 0);
	CHECK_EQ(strlen(target), META_LINK_MAX);
	/* unlink deletes the hash, and leaves no tombstone */
	CHECK_EQ(meta_unlink(m, lookup_id(m, 1, "d"), "moved", NULL), 0);
	rget(buf, sizeof(buf), "EXISTS {t-ln}:s:%" PRIu64 " {t-ln}:t:%" PRIu64, id, id);
	CHECK_STR(buf, "0");
	CHECK_EQ(meta_readlink(b, id, target, sizeof(target)), -ENOENT);

	/* a file published with replace (allow_overwrite) takes a link's name */
	CHECK_EQ(meta_symlink(m, 1, "rl", "t", 1, NULL, &l), 0);
	CHECK_EQ(meta_publish(m, 1, "rl", &o, META_PUBLISH_REPLACE, &id, NULL), 0);
	CHECK_EQ(id, l.id);
	rget(buf, sizeof(buf), "EXISTS {t-ln}:s:%" PRIu64, l.id);
	CHECK_STR(buf, "0");
	CHECK_EQ(meta_lookup(b, 1, "rl", &e), 0);
	CHECK(e.kind == META_FILE && e.id == o.id);

	/* damage */
	CHECK_EQ(meta_symlink(m, 1, "x", "t", 1, NULL, &l), 0);
	rdo("HDEL {t-ln}:s:%" PRIu64 " m", l.id);
	CHECK_EQ(meta_lookup(b, 1, "x", &e), -EBADMSG);
	rdo("HSET {t-ln}:d:1 y l%" PRIu64 "x", l.id);
	CHECK_EQ(meta_lookup(b, 1, "y", &e), -EBADMSG);
	meta_free(b);
	meta_free(m);
}

/* Issue 23: hard links.  A file gets more names (meta_link()); every
 * entry and the record count them; a change of attributes shows under
 * every name; unlink, rename and replace of one name leave the others,
 * the record's own name moving to one that is left; the object goes
 * with its last name.  Directories and symbolic links get EPERM. */
TEST(hard_links)
{
	struct meta *m = mk_connected("t-hl"), *b = mk("t-hl", "node-b", 0, 0);
	struct meta_attr base = {.set = true, .uid = 1, .gid = 2, .mode = 0644}, ch = {0};
	struct meta_entry e, d, l;
	struct meta_obj o, o2;
	uint64_t id, rep;
	char buf[256], f[64];

	mkobj(m, &o, 5);
	CHECK_EQ(meta_publish(m, 1, "f", &o, 0, NULL, NULL), 0);
	CHECK_EQ(meta_mkdir(m, 1, "d", 1, &d), 0);
	CHECK_EQ(meta_link(m, o.id, d.id, "g", &base, &e), 0);
	CHECK(e.kind == META_FILE && e.id == o.id && e.attr.nlink == 2 && e.attr.uid == 1);
	CHECK_EQ(meta_link(m, o.id, d.id, "g", &base, &e), 0); /* a repeat */
	CHECK_EQ(meta_lookup(b, 1, "f", &e), 0);
	CHECK(e.id == o.id && e.attr.nlink == 2 && e.obj.size == 5);
	snprintf(f, sizeof(f), "=%" PRIu64 "/g", d.id);
	rget(buf, sizeof(buf), "HGET {t-hl}:x:%" PRIu64 " %s", o.id, f);
	CHECK_STR(buf, "1");
	CHECK_EQ(meta_link(m, o.id, 1, "h", &base, &e), 0);
	CHECK_EQ(e.attr.nlink, 3);
	CHECK_EQ(meta_lookup(b, d.id, "g", &e), 0);
	CHECK_EQ(e.attr.nlink, 3);
	/* what may not be linked */
	CHECK_EQ(meta_link(m, o.id, 1, "d", &base, NULL), -EEXIST);
	CHECK_EQ(meta_link(m, d.id, 1, "dl", &base, NULL), -EPERM);
	CHECK_EQ(meta_symlink(m, 1, "sl", "t", 1, NULL, &l), 0);
	CHECK_EQ(meta_link(m, l.id, 1, "sl2", &base, NULL), -EPERM);
	CHECK_EQ(meta_link(m, 424242424242ULL, 1, "x", &base, NULL), -ENOENT);
	/* a change shows under every name */
	ch.mode = 0600;
	CHECK_EQ(meta_setattr(m, o.id, META_SET_MODE, &ch, 0, &base, &e), 0);
	CHECK(e.attr.mode == 0600 && e.attr.nlink == 3);
	CHECK_EQ(meta_lookup(b, d.id, "g", &e), 0);
	CHECK(e.attr.mode == 0600 && e.attr.nlink == 3);
	CHECK_EQ(meta_lookup(b, 1, "h", &e), 0);
	CHECK(e.attr.mode == 0600);
	/* unlink of the record's own name: 1, the record moves to another */
	CHECK_EQ(meta_unlink(m, 1, "f", &id), 1);
	CHECK_EQ(id, o.id);
	CHECK_EQ(meta_lookup(b, d.id, "g", &e), 0);
	CHECK(e.id == o.id && e.attr.nlink == 2);
	rec_get("t-hl", o.id, buf, sizeof(buf));
	*strchrnul(buf, '/') = '\0';
	snprintf(f, sizeof(f), "%" PRIu64, d.id);
	CHECK(!strcmp(buf, f) || !strcmp(buf, "1"));
	CHECK_EQ(meta_object_exists(b, o.id), 1);
	/* rename of a name that is not the record's own */
	CHECK_EQ(meta_rename(m, 1, "h", d.id, "h2", 0, false, NULL), 0);
	CHECK_EQ(meta_lookup(b, d.id, "h2", &e), 0);
	CHECK(e.id == o.id && e.attr.nlink == 2);
	/* a rename of one name over another of the same file changes nothing */
	CHECK_EQ(meta_rename(m, d.id, "h2", d.id, "g", 0, true, &rep), 0);
	CHECK_EQ(rep, 0);
	CHECK_EQ(meta_lookup(b, d.id, "h2", &e), 0);
	/* another file renamed over one name: the object keeps the other */
	mkobj(m, &o2, 7);
	CHECK_EQ(meta_publish(m, 1, "other", &o2, 0, NULL, NULL), 0);
	CHECK_EQ(meta_rename(m, 1, "other", d.id, "g", 0, true, &rep), 0);
	CHECK_EQ(rep, 0);
	CHECK_EQ(meta_object_exists(b, o.id), 1);
	CHECK_EQ(meta_lookup(b, d.id, "h2", &e), 0);
	CHECK(e.id == o.id && e.attr.nlink == 1);
	/* names are bounded: each link writes every entry of the file, so
	 * a file of N names costs O(N) a link (ext4 stops at 65,000 too) */
	for (int i = 2; i <= META_NAMES_MAX; i++) {
		snprintf(f, sizeof(f), "n%d", i);
		if (meta_link(m, o.id, d.id, f, &base, &e) != 0)
			break;
	}
	CHECK_EQ(e.attr.nlink, META_NAMES_MAX);
	CHECK_EQ(meta_link(m, o.id, d.id, "one-too-many", &base, NULL), -EMLINK);
	for (int i = 2; i <= META_NAMES_MAX; i++) {
		snprintf(f, sizeof(f), "n%d", i);
		CHECK_EQ(meta_unlink(m, d.id, f, NULL), 1);
	}
	/* its last name goes with the object */
	CHECK_EQ(meta_unlink(m, d.id, "h2", &id), 0);
	CHECK_EQ(meta_object_exists(b, o.id), 0);
	CHECK_EQ(meta_object_deleted(b, o.id), 1);
	meta_free(b);
	meta_free(m);
}

int main(void)
{
	harness_begin("test-meta-records");
	RUN(wrong_types);
	RUN(corrupt);
	RUN(readdir_page);
	RUN(sync_batch);
	RUN(reregister_batch);
	RUN(reregister_batch_names);
	RUN(block_sums);
	RUN(fan_entries);
	RUN(fan_lapsed);
	RUN(fan_many);
	RUN(fan_sample_moves);
	RUN(attributes);
	RUN(symlinks);
	RUN(hard_links);
	return harness_end();
}
