/*
 * test-store-catalog: unit tests of the store across a close and a
 * reopen: the catalog log (a line per step, torn and damaged lines,
 * compaction), conversion of the record files of earlier versions, bad
 * records, checksum verification at open, a smaller capacity, and notes.
 * Some cases edit the store's files between a close and a reopen; they
 * know the formats documented in store/store_catalog.c and
 * store/store_catalog_old.c.
 */
#include "store-harness.h"

struct saved {
	uint64_t id, size;
	int64_t mtime;
	uint8_t csum[OBJFS_CSUM_LEN];
	const char *path;
	uint8_t *data;
};

static int count_cb(struct store_obj *o, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static int stop_cb(struct store_obj *o, void *arg)
{
	(*(int *)arg)++;
	return 7;
}

TEST(reopen)
{
	struct saved sv[3] = {
	    {.id = 10, .size = 0, .path = ""},
	    {.id = 11, .size = 5000, .path = "/x/eleven"},
	    {.id = 0xfedcba9876543210ULL, .size = 300 * 1024 + 1, .path = "/renamed"},
	};
	struct store_obj *o, *pend, *gone;
	struct store_stats st;
	uint8_t *big = pattern(MiB, 77);
	struct tdir t;
	struct store *s;
	char path[64];
	int i, n = 0;

	tdir_init(&t);
	s = must_open(&t, 4 * MiB, false);
	for (i = 0; i < 3; i++) {
		sv[i].data = pattern(sv[i].size, sv[i].id);
		o = make_sealed(s, sv[i].id, sv[i].size, sv[i].id, i == 2 ? "/old" : sv[i].path);
		if (i == 2)
			CHECK_EQ(store_set_path(o, sv[i].path), 0);
		sv[i].mtime = store_obj_mtime(o);
		store_obj_csum(o, sv[i].csum);
		store_obj_unref(o);
	}
	/* neither a pending nor an unlinked object comes back */
	pend = store_create(s, 13, NULL);
	CHECK_EQ(store_write(pend, big, 4096, 0), 0);
	gone = make_sealed(s, 14, 4096, 14, "/gone");
	store_unlink(gone);
	store_obj_unref(gone);
	/* close with a reference still held (pend): nothing may leak */
	store_close(s);

	s = must_open(&t, 4 * MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 3);
	CHECK_EQ(st.pending, 0);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.used, (2 + 76) * PG);
	for (i = 0; i < 3; i++) {
		uint8_t csum[OBJFS_CSUM_LEN];

		o = store_lookup(s, sv[i].id);
		CHECK(o);
		if (!o)
			continue;
		CHECK(store_obj_sealed(o));
		CHECK(obj_equals(o, sv[i].data, sv[i].size));
		CHECK_EQ(store_obj_mtime(o), sv[i].mtime);
		store_obj_csum(o, csum);
		CHECK(!memcmp(csum, sv[i].csum, sizeof(csum)));
		store_obj_path(o, path, sizeof(path));
		CHECK_STR(path, sv[i].path);
		store_obj_unref(o);
	}
	CHECK(!store_lookup(s, 13));
	CHECK(!store_lookup(s, 14));
	CHECK_EQ(store_foreach(s, count_cb, &n), 0);
	CHECK_EQ(n, 3);
	n = 0;
	CHECK_EQ(store_foreach(s, stop_cb, &n), 7);
	CHECK_EQ(n, 1);

	/* new objects go around the adopted ones */
	o = store_create(s, 20, NULL);
	CHECK_EQ(store_write(o, big, MiB, 0), 0);
	CHECK_EQ(store_seal(o, "/20", 1), 0);
	store_obj_unref(o);
	for (i = 0; i < 3; i++) {
		o = store_lookup(s, sv[i].id);
		CHECK(o && obj_equals(o, sv[i].data, sv[i].size));
		store_obj_unref(o);
	}
	store_close(s);
	for (i = 0; i < 3; i++)
		free(sv[i].data);
	free(big);
	tdir_release(&t);
}

TEST(bad_record)
{
	char rec[256], bad[300], tmp[256];
	struct store_stats st;
	struct store_obj *o;
	struct tdir t;
	struct store *s;
	uint8_t *buf;
	size_t len;
	int i;

	tdir_init(&t);
	s = must_open(&t, MiB, false);
	for (i = 1; i <= 3; i++)
		store_obj_unref(make_sealed(s, (uint64_t)i, 10000, (uint64_t)i, "/f"));
	close_as_old(s, &t); /* the records of objfs before the log */

	rec_path(&t, 2, rec, sizeof(rec));
	buf = slurp(rec, &len);
	CHECK(buf);
	buf[REC_SIZE] ^= 0x01;
	spew(rec, buf, len);
	free(buf);
	snprintf(tmp, sizeof(tmp), "%s/objects/.tmp-0000000000000009", t.dir);
	spew(tmp, (const uint8_t *)"junk", 4);

	s = must_open(&t, MiB, false);
	store_stats(s, &st);
	CHECK_EQ(st.bad_records, 1);
	CHECK_EQ(st.objects, 2);
	CHECK_EQ(st.used, 2 * 3 * PG);
	CHECK(!store_lookup(s, 2));
	for (i = 1; i <= 3; i += 2) {
		uint8_t *want = pattern(10000, (uint64_t)i);

		o = store_lookup(s, (uint64_t)i);
		CHECK(o && obj_equals(o, want, 10000));
		store_obj_unref(o);
		free(want);
	}
	snprintf(bad, sizeof(bad), "%s.bad", rec);
	CHECK(exists(bad));
	CHECK(!exists(rec));
	CHECK(!exists(tmp));
	/* the good ones are converted: in the log, their files gone */
	store_stats(s, &st);
	CHECK_EQ(st.catalog_live, 2);
	rec_path(&t, 1, rec, sizeof(rec));
	CHECK(!exists(rec));
	store_close(s);

	s = must_open(&t, MiB, false);
	store_stats(s, &st);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.objects, 2);
	store_close(s);
	tdir_release(&t);
}

static void data_path(const struct tdir *t, uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/data/%016llx", t->dir, (unsigned long long)id);
}

TEST(files)
{
	char rec1[256], rec[256], data[256];
	struct store_stats st;
	struct store_obj *o;
	uint8_t *one, *buf, *want = pattern(3 * PG, 1);
	struct tdir t;
	struct store *s;
	size_t len;

	tdir_init(&t);
	s = must_open(&t, MiB, false);
	store_obj_unref(make_sealed(s, 1, 3 * PG, 1, ""));
	store_obj_unref(make_sealed(s, 2, 3 * PG, 2, ""));
	store_obj_unref(make_sealed(s, 3, 3 * PG, 3, ""));
	/* object 1 as an old record too (the log has it: the log wins) */
	o = store_lookup(s, 1);
	old_record_cb(o, &t);
	store_obj_unref(o);
	store_close(s);

	/* each object is a file of exactly its size, read-only */
	data_path(&t, 1, data, sizeof(data));
	CHECK_EQ(file_size(data), 3 * PG);
	CHECK(access(data, W_OK) == 0); /* root; the mode says it */
	{
		struct stat sb;

		CHECK(stat(data, &sb) == 0 && (sb.st_mode & 0777) == 0400);
	}

	rec_path(&t, 1, rec1, sizeof(rec1));
	one = slurp(rec1, &len);
	CHECK(one && len == REC_HDR + 8);
	buf = malloc(len + 16);

	/* object 2: its file is gone */
	data_path(&t, 2, data, sizeof(data));
	CHECK(unlink(data) == 0);

	/* object 3: its file is not its size */
	data_path(&t, 3, data, sizeof(data));
	CHECK(truncate(data, 3 * PG - 1) == 0);

	/* object 4: id differs from its name (object 1's file is there) */
	memcpy(buf, one, len);
	rec_rehash(buf, len);
	rec_path(&t, 4, rec, sizeof(rec));
	spew(rec, buf, len);

	/* object 5: a version 2 record that lists extents */
	memcpy(buf, one, REC_HDR);
	set_le64(buf + REC_ID, 5);
	buf[REC_N_EXT] = 1;
	set_le64(buf + REC_HDR, 0);
	set_le64(buf + REC_HDR + 8, 3);
	rec_rehash(buf, len + 16);
	rec_path(&t, 5, rec, sizeof(rec));
	spew(rec, buf, len + 16);

	/* object 6: a version 1 (arena) record, with no arena left */
	set_le64(buf + REC_ID, 6);
	buf[4] = 1;
	rec_rehash(buf, len + 16);
	rec_path(&t, 6, rec, sizeof(rec));
	spew(rec, buf, len + 16);

	/* a file no record claims */
	data_path(&t, 9, data, sizeof(data));
	spew(data, want, 100);

	s = must_open(&t, MiB, false);
	store_stats(s, &st);
	CHECK_EQ(st.bad_records, 5);
	CHECK_EQ(st.objects, 1);
	CHECK_EQ(st.used, 3 * PG);
	CHECK_EQ(st.catalog_live, 1);
	o = store_lookup(s, 1);
	CHECK(o && obj_equals(o, want, 3 * PG));
	store_obj_unref(o);
	for (uint64_t id = 2; id <= 6; id++)
		CHECK(!store_lookup(s, id));
	CHECK(!exists(data));
	CHECK(!exists(rec1)); /* a leftover of a conversion: deleted */
	store_close(s);
	/* the lines of 2 and 3 are kept aside, and gone from the log */
	snprintf(data, sizeof(data), "%s/catalog.bad", t.dir);
	free(buf);
	buf = slurp(data, &len);
	CHECK(buf && lines_starting((char *)buf, len, "R 0000000000000002 ") == 1);
	CHECK(buf && lines_starting((char *)buf, len, "R 0000000000000003 ") == 1);
	s = must_open(&t, MiB, false);
	store_stats(s, &st);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.objects, 1);
	store_close(s);
	free(one);
	free(buf);
	free(want);
	tdir_release(&t);
}

/* A store of the arena layout (objfs 0.x) is converted, byte for byte. */
TEST(upgrade)
{
	uint64_t size = 3 * PG - 100, id = 0x100000000ULL;
	uint8_t *want = pattern(size, 9), *arena_buf = calloc(1, MiB), rbuf[256];
	uint8_t csum[OBJFS_CSUM_LEN];
	char arena[256], rec[256], bad[300];
	struct store_stats st;
	struct store_obj *o;
	struct tdir t;
	struct store *s;
	size_t len = REC_HDR + 2 + 16 + 8;

	tdir_init(&t);
	s = must_open(&t, MiB, false);
	store_close(s);
	/* the object at arena pages 3..5 */
	memcpy(arena_buf + 3 * PG, want, size);
	snprintf(arena, sizeof(arena), "%s/arena", t.dir);
	spew(arena, arena_buf, MiB);
	memset(rbuf, 0, sizeof(rbuf));
	memcpy(rbuf, "OBJC", 4);
	rbuf[4] = 1;
	set_le64(rbuf + REC_ID, id);
	set_le64(rbuf + REC_SIZE, size);
	set_le64(rbuf + 24, 12345);
	util_csum_buf(want, size, csum);
	memcpy(rbuf + 32, csum, sizeof(csum));
	rbuf[REC_PATH_LEN] = 2;
	rbuf[REC_N_EXT] = 1;
	memcpy(rbuf + REC_HDR, "/u", 2);
	set_le64(rbuf + REC_HDR + 2, 3);
	set_le64(rbuf + REC_HDR + 2 + 8, 3);
	rec_rehash(rbuf, len);
	rec_path(&t, id, rec, sizeof(rec));
	spew(rec, rbuf, len);
	/* and one whose bytes do not match its checksum */
	set_le64(rbuf + REC_ID, id + 1);
	set_le64(rbuf + REC_HDR + 2, 10);
	rec_rehash(rbuf, len);
	rec_path(&t, id + 1, rec, sizeof(rec));
	spew(rec, rbuf, len);
	/* a half copy a conversion cut short left (the open used to fail
	 * with EEXIST from then on) */
	data_path(&t, id, arena, sizeof(arena));
	spew(arena, want, 100);
	snprintf(arena, sizeof(arena), "%s/arena", t.dir);

	s = must_open(&t, MiB, false);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 1);
	CHECK_EQ(st.bad_records, 1);
	o = store_lookup(s, id);
	CHECK(o && obj_equals(o, want, size));
	CHECK(o && store_obj_mtime(o) == 12345);
	store_obj_unref(o);
	CHECK(!exists(arena));
	snprintf(bad, sizeof(bad), "%s.bad", rec);
	CHECK(exists(bad));
	store_close(s);

	/* the new record stands on its own */
	s = must_open(&t, MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 1);
	CHECK_EQ(st.bad_records, 0);
	o = store_lookup(s, id);
	CHECK(o && obj_equals(o, want, size));
	store_obj_unref(o);
	store_close(s);
	free(want);
	free(arena_buf);
	tdir_release(&t);
}

TEST(verify)
{
	uint8_t *want = pattern(10000, 3), byte;
	char data[256], rec[256];
	struct store_stats st;
	struct store_obj *o;
	struct tdir t;
	struct store *s;
	int fd;

	tdir_init(&t);
	s = must_open(&t, MiB, false);
	store_obj_unref(make_sealed(s, 1, 10000, 3, ""));
	store_close(s);

	snprintf(rec, sizeof(rec), "%s/catalog.bad", t.dir);
	data_path(&t, 1, data, sizeof(data));
	fd = open(data, O_RDWR);
	CHECK(pread(fd, &byte, 1, 5000) == 1);
	byte ^= 0x40;
	CHECK(pwrite(fd, &byte, 1, 5000) == 1);
	close(fd);

	/* without verify the record is trusted */
	s = must_open(&t, MiB, false);
	o = store_lookup(s, 1);
	CHECK(o && !obj_equals(o, want, 10000));
	store_obj_unref(o);
	store_close(s);

	s = must_open(&t, MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.bad_records, 1);
	CHECK_EQ(st.objects, 0);
	CHECK_EQ(st.used, 0);
	CHECK(!store_lookup(s, 1));
	CHECK(exists(rec));
	CHECK(!exists(data));
	store_close(s);
	free(want);
	tdir_release(&t);
}

/* One line per step: R at a seal with a path, P for a new path, R when a
 * fetched copy gets its path, D at unlink; no file per object. */
TEST(log_lines)
{
	struct store_stats st;
	struct store_obj *o;
	char objects[256], path[64];
	struct tdir t;
	struct store *s;
	char **names;
	size_t len, n;
	char *text;

	tdir_init(&t);
	s = must_open(&t, MiB, false);
	store_obj_unref(make_sealed(s, 1, 100, 1, "/a b%c\n"));
	o = make_sealed(s, 2, 100, 2, ""); /* a create: published later */
	CHECK_EQ(store_set_path(o, "/two"), 0);
	store_obj_unref(o);
	o = store_create(s, 3, NULL); /* a fetched copy */
	CHECK_EQ(store_write(o, "three", 5, 0), 0);
	CHECK_EQ(store_seal(o, NULL, 3), 0);
	CHECK_EQ(store_set_path(o, "/three"), 0);
	store_obj_unref(o);
	o = make_sealed(s, 4, 100, 4, "/four");
	store_unlink(o);
	store_obj_unref(o);
	store_stats(s, &st);
	CHECK_EQ(st.catalog_lines, 6);
	CHECK_EQ(st.catalog_live, 3);
	store_close(s);

	text = catalog_text(&t, &len);
	CHECK(text && lines_starting(text, len, "objfs-catalog 2") == 1);
	CHECK(text && lines_starting(text, len, "R ") == 4);
	CHECK(text && lines_starting(text, len, "P 0000000000000002 =/two ") == 1);
	CHECK(text && lines_starting(text, len, "D 0000000000000004 ") == 1);
	CHECK(text && memmem(text, len, "=/a%20b%25c%0a ", 15));
	free(text);
	snprintf(objects, sizeof(objects), "%s/objects", t.dir);
	CHECK_EQ(dir_names(objects, &names, &n), 0);
	CHECK_EQ(n, 0);

	s = must_open(&t, MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 3);
	CHECK_EQ(st.bad_records, 0);
	o = store_lookup(s, 1);
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/a b%c\n");
	store_obj_unref(o);
	o = store_lookup(s, 2);
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/two");
	store_obj_unref(o);
	o = store_lookup(s, 3);
	CHECK(o && obj_equals(o, (const uint8_t *)"three", 5));
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/three");
	store_obj_unref(o);
	CHECK(!store_lookup(s, 4));
	store_close(s);
	tdir_release(&t);
}

/* Append @text to store @t's catalog log as it is. */
static void log_append_raw(const struct tdir *t, const char *text, size_t len)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/catalog.log", t->dir);
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		exit(1);
	close(fd);
}

/* A line cut short by a crash is cut off; a damaged line is set aside,
 * and only its object is lost. */
TEST(torn_and_damaged)
{
	struct store_stats st;
	struct store_obj *o;
	struct tdir t;
	struct store *s;
	char *text, *line, path[256];
	size_t len;
	int i;

	tdir_init(&t);
	s = must_open(&t, MiB, false);
	for (i = 1; i <= 3; i++)
		store_obj_unref(make_sealed(s, (uint64_t)i, 5000, (uint64_t)i, "/f"));
	store_close(s);
	log_append_raw(&t, "R 0000000000000009 10 1 ", 24);

	s = must_open(&t, MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 3);
	CHECK_EQ(st.bad_records, 0);
	store_close(s);
	text = catalog_text(&t, &len);
	CHECK(text && text[len - 1] == '\n');
	CHECK(text && !memmem(text, len, "0000000000000009", 16));

	/* flip a byte of object 2's line */
	line = text ? memmem(text, len, "R 0000000000000002 ", 19) : NULL;
	CHECK(line != NULL);
	if (line) {
		line[19] ^= 0x01;
		snprintf(path, sizeof(path), "%s/catalog.log", t.dir);
		spew(path, (uint8_t *)text, len);
	}
	free(text);
	s = must_open(&t, MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 2);
	CHECK_EQ(st.bad_records, 1);
	CHECK(!store_lookup(s, 2));
	for (i = 1; i <= 3; i += 2) {
		uint8_t *want = pattern(5000, (uint64_t)i);

		o = store_lookup(s, (uint64_t)i);
		CHECK(o && obj_equals(o, want, 5000));
		store_obj_unref(o);
		free(want);
	}
	store_close(s);
	snprintf(path, sizeof(path), "%s/catalog.bad", t.dir);
	text = (char *)slurp(path, &len);
	CHECK(text && lines_starting(text, len, "R 0000000000000002 ") == 1);
	free(text);
	s = must_open(&t, MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 2);
	CHECK_EQ(st.bad_records, 0);
	store_close(s);

	/* a log of version 1 (before packed objects) is read, and written
	 * anew as version 2 */
	snprintf(path, sizeof(path), "%s/catalog.log", t.dir);
	text = (char *)slurp(path, &len);
	CHECK(text && len > 16 && !memcmp(text, "objfs-catalog 2\n", 16));
	if (text) {
		text[14] = '1';
		spew(path, (const uint8_t *)text, len);
	}
	free(text);
	s = must_open(&t, MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 2);
	CHECK_EQ(st.bad_records, 0);
	store_close(s);
	text = (char *)slurp(path, &len);
	CHECK(text && len > 16 && !memcmp(text, "objfs-catalog 2\n", 16));
	free(text);

	/* a log written by a newer objfs is refused, not rewritten */
	spew(path, (const uint8_t *)"objfs-catalog 3\n", 16);
	int err = 0;
	CHECK(!open_store(&t, MiB, true, &err, NULL));
	CHECK_EQ(err, -EPROTONOSUPPORT);
	text = (char *)slurp(path, &len);
	CHECK(text && len == 16);
	free(text);
	tdir_release(&t);
}

/* Dead lines are compacted away at the tick, and at open. */
TEST(compact)
{
	struct store_stats st, before;
	struct store_obj *o, *gone;
	char path[64], want[64];
	struct tdir t;
	struct store *s;
	uint64_t id;

	tdir_init(&t);
	s = must_open(&t, 64 * MiB, false);
	for (id = 1; id <= 5000; id++) {
		snprintf(want, sizeof(want), "/d/%" PRIu64, id);
		store_obj_unref(make_sealed(s, id, 0, id, want));
	}
	store_tick(s); /* nothing dead yet */
	store_stats(s, &before);
	CHECK_EQ(before.compactions, 0);
	gone = store_lookup(s, 1); /* held across its unlink */
	for (id = 1; id <= 5000; id++)
		if (id % 5)
			CHECK_EQ(store_unlink_id(s, id), 0);
	o = store_lookup(s, 5);
	CHECK_EQ(store_set_path(o, "/moved"), 0);
	store_obj_unref(o);
	store_tick(s);
	store_stats(s, &st);
	CHECK_EQ(st.compactions, 1);
	CHECK_EQ(st.catalog_live, 1000);
	CHECK_EQ(st.catalog_lines, 1000);
	CHECK(st.catalog_bytes < before.catalog_bytes / 4);
	/* paths are read from the log: from the new one now, and an
	 * unlinked object's, which the new log lacks, kept aside */
	for (id = 5; id <= 5000; id += 5) {
		o = store_lookup(s, id);
		store_obj_path(o, path, sizeof(path));
		snprintf(want, sizeof(want), "/d/%" PRIu64, id);
		CHECK_STR(path, id == 5 ? "/moved" : want);
		store_obj_unref(o);
	}
	store_obj_path(gone, path, sizeof(path));
	CHECK_STR(path, "/d/1");
	store_obj_unref(gone);
	/* appends go to the new log */
	store_obj_unref(make_sealed(s, 9999, 10, 1, "/after"));
	o = store_lookup(s, 9999);
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/after");
	CHECK_EQ(store_set_path(o, "/after2"), 0);
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/after2");
	store_obj_unref(o);
	store_close(s);

	s = must_open(&t, 64 * MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 1001);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.compactions, 0);
	for (id = 5; id <= 5000; id += 5) {
		o = store_lookup(s, id);
		CHECK(o != NULL);
		store_obj_path(o, path, sizeof(path));
		snprintf(want, sizeof(want), "/d/%" PRIu64, id);
		CHECK_STR(path, id == 5 ? "/moved" : want);
		store_obj_unref(o);
	}
	o = store_lookup(s, 9999);
	CHECK(o != NULL);
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/after2");
	store_obj_unref(o);
	store_close(s);
	tdir_release(&t);
}

/* The ids of the store's objects in use order, coldest first, as a
 * string ("3 1 5"). */
static void use_order(struct store *s, char *buf, size_t len)
{
	struct store_walk w = {0};
	struct store_cold c[64];
	size_t n = store_walk_cold(s, &w, c, 64), i, at = 0;

	buf[0] = '\0';
	for (i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%llu", i ? " " : "",
				       (unsigned long long)c[i].id);
	store_walk_end(&w);
}

/* A compaction keeps the order of use across a restart, and the only
 * copies (whose mark is not kept) come back the hottest, so that
 * eviction does not meet them first. */
TEST(compact_keeps_use_order)
{
	struct store_stats st;
	struct store_obj *o;
	char order[256], p[32];
	struct tdir t;
	struct store *s;
	int i, touch[] = {3, 1, 5, 2, 4};

	tdir_init(&t);
	s = must_open(&t, 64 * MiB, false);
	for (i = 1; i <= 6; i++)
		store_obj_unref(make_sealed(s, (uint64_t)i, 100, (uint64_t)i, "/x"));
	for (i = 0; i < 5; i++)
		store_touch(s, (uint64_t)touch[i]);
	store_set_sole(s, 6, true);
	use_order(s, order, sizeof(order));
	CHECK_STR(order, "3 1 5 2 4");
	/* dead lines enough for the tick to compact */
	o = store_lookup(s, 1);
	for (i = 0; i < 5000; i++) {
		snprintf(p, sizeof(p), "/x/%d", i);
		CHECK_EQ(store_set_path(o, p), 0);
	}
	store_obj_unref(o);
	store_tick(s);
	store_stats(s, &st);
	CHECK_EQ(st.compactions, 1);
	store_close(s);
	s = must_open(&t, 64 * MiB, false);
	use_order(s, order, sizeof(order));
	CHECK_STR(order, "3 1 5 2 4 6");
	o = store_lookup(s, 1);
	store_obj_path(o, p, sizeof(p));
	CHECK_STR(p, "/x/4999");
	store_obj_unref(o);
	store_close(s);
	tdir_release(&t);
}

/* A store of the record files of earlier versions is converted whole,
 * and a conversion cut short converts again. */
TEST(convert)
{
	struct store_stats st;
	struct store_obj *o;
	char objects[256], path[64], want[64];
	struct tdir t;
	struct store *s;
	char **names;
	size_t n, len;
	uint64_t id;
	char *text;

	tdir_init(&t);
	s = must_open(&t, 64 * MiB, false);
	for (id = 1; id <= 500; id++) {
		snprintf(want, sizeof(want), "/c/%" PRIu64, id);
		store_obj_unref(make_sealed(s, id, (size_t)id * 7, id, want));
	}
	close_as_old(s, &t);
	snprintf(objects, sizeof(objects), "%s/objects", t.dir);
	CHECK_EQ(dir_names(objects, &names, &n), 0);
	CHECK_EQ(n, 500);
	while (n)
		free(names[--n]);
	free(names);

	s = must_open(&t, 64 * MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 500);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.catalog_live, 500);
	store_close(s);
	CHECK_EQ(dir_names(objects, &names, &n), 0);
	CHECK_EQ(n, 0);
	free(names);
	text = catalog_text(&t, &len);
	CHECK(text && lines_starting(text, len, "R ") == 500);
	free(text);

	/* a crash after the log was written, before the records went: some
	 * records are still there, and the log has them */
	s = must_open(&t, 64 * MiB, false);
	o = store_lookup(s, 17);
	old_record_cb(o, &t);
	CHECK_EQ(store_set_path(o, "/c/renamed"), 0);
	store_obj_unref(o);
	store_close(s);
	s = must_open(&t, 64 * MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 500);
	CHECK_EQ(st.bad_records, 0);
	o = store_lookup(s, 17);
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/c/renamed"); /* the log is newer */
	store_obj_unref(o);
	for (id = 1; id <= 500; id += 99) {
		uint8_t *data = pattern((size_t)id * 7, id);

		o = store_lookup(s, id);
		CHECK(o && obj_equals(o, data, (size_t)id * 7));
		store_obj_unref(o);
		free(data);
	}
	store_close(s);
	CHECK_EQ(dir_names(objects, &names, &n), 0);
	CHECK_EQ(n, 0);
	free(names);
	tdir_release(&t);
}

TEST(shrink_capacity)
{
	uint8_t *a = pattern(10 * PG, 1), *b = pattern(300 * PG, 3);
	struct store_obj *o, *filler;
	struct store_stats st;
	struct tdir t;
	struct store *s;
	uint64_t detail = 0;
	int err = 0;

	tdir_init(&t);
	s = must_open(&t, 4 * MiB, false);
	store_obj_unref(make_sealed(s, 1, 10 * PG, 1, "/a"));
	filler = make_sealed(s, 2, 2 * MiB, 2, "/filler");
	store_obj_unref(make_sealed(s, 3, 300 * PG, 3, "/b"));
	store_unlink(filler);
	store_obj_unref(filler);
	store_close(s);

	CHECK(!open_store(&t, MiB, false, &err, &detail));
	CHECK_EQ(err, -EFBIG);
	CHECK_EQ(detail, 310 * PG);

	/* enough room: the objects stay */
	s = must_open(&t, 2 * MiB, true);
	store_stats(s, &st);
	CHECK_EQ(st.capacity, 2 * MiB);
	CHECK_EQ(st.objects, 2);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.used, 310 * PG);
	o = store_lookup(s, 1);
	CHECK(o && obj_equals(o, a, 10 * PG));
	store_obj_unref(o);
	o = store_lookup(s, 3);
	CHECK(o && obj_equals(o, b, 300 * PG));
	store_obj_unref(o);
	o = store_create(s, 4, NULL);
	CHECK_EQ(store_truncate(o, 2 * MiB - 310 * PG + 1), -ENOSPC);
	CHECK_EQ(store_truncate(o, 2 * MiB - 310 * PG), 0);
	store_unlink(o);
	store_obj_unref(o);
	store_close(s);
	free(a);
	free(b);
	tdir_release(&t);
}

TEST(notes)
{
	char big[66], buf[64], notes[256];
	const char *bad_keys[] = {"", "Epoch", "a/b", "..", ".x", "a.b", "a b", big};
	struct tdir t;
	struct store *s;
	size_t i;

	tdir_init(&t);
	memset(big, 'a', 65);
	big[65] = '\0';
	s = must_open(&t, MiB, false);
	CHECK_EQ(store_note_get(s, "epoch", buf, sizeof(buf)), -ENOENT);
	CHECK_EQ(store_note_set(s, "epoch", "42"), 0);
	CHECK_EQ(store_note_get(s, "epoch", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "42");
	CHECK_EQ(store_note_set(s, "epoch", "43"), 0);
	CHECK_EQ(store_note_get(s, "epoch", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "43");
	CHECK_EQ(store_note_set(s, "e_-9", ""), 0);
	CHECK_EQ(store_note_get(s, "e_-9", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "");
	CHECK_EQ(store_note_set(s, "hello", "hello"), 0);
	CHECK_EQ(store_note_get(s, "hello", buf, 5), -ERANGE);
	CHECK_EQ(store_note_get(s, "hello", buf, 6), 0);
	CHECK_STR(buf, "hello");
	for (i = 0; i < ARRAY_SIZE(bad_keys); i++) {
		CHECK_EQ(store_note_set(s, bad_keys[i], "x"), -EINVAL);
		CHECK_EQ(store_note_get(s, bad_keys[i], buf, sizeof(buf)), -EINVAL);
	}
	big[64] = '\0';
	CHECK_EQ(store_note_set(s, big, "long key"), 0);
	CHECK_EQ(store_note_get(s, big, buf, sizeof(buf)), 0);
	CHECK_STR(buf, "long key");
	store_close(s);

	snprintf(notes, sizeof(notes), "%s/notes/.tmp-epoch", t.dir);
	CHECK(!exists(notes));
	s = must_open(&t, MiB, false);
	CHECK_EQ(store_note_get(s, "epoch", buf, sizeof(buf)), 0);
	CHECK_STR(buf, "43");
	store_close(s);
	tdir_release(&t);
}

int main(void)
{
	RUN(reopen);
	RUN(bad_record);
	RUN(files);
	RUN(upgrade);
	RUN(verify);
	RUN(log_lines);
	RUN(torn_and_damaged);
	RUN(compact);
	RUN(compact_keeps_use_order);
	RUN(convert);
	RUN(shrink_capacity);
	RUN(notes);
	return tap_done();
}
