/*
 * test-store-pack: small objects packed into slots of chunk files
 * (store/store_pack.c, issue 24): byte-exact on both sides of the
 * threshold, a page per few objects instead of one each, growth and
 * spilling, adoption after a close and after a crash, damaged slots,
 * slots kept while referenced and reused after, and the capacity.
 */
#include "store-harness.h"

#include <sys/mman.h>
#include <sys/wait.h>

#define T (32 * 1024) /* the threshold these tests pack up to */

static struct store *open_pack(const struct tdir *t, uint64_t cap, uint64_t pack_max, int *ret_err)
{
	struct store_config cfg = {
	    .dir = t->dir, .capacity = cap, .verify = true, .pack_max = pack_max};

	return store_open(&cfg, ret_err, NULL);
}

static struct store *must_pack(const struct tdir *t, uint64_t cap)
{
	int err = 0;
	struct store *s = open_pack(t, cap, T, &err);

	if (!s) {
		fprintf(stderr, "store_open %s: %s\n", t->dir, strerror(-err));
		exit(1);
	}
	return s;
}

static void stats(struct store *s, struct store_stats *st)
{
	store_stats(s, st);
}

/* Files in data/: chunk files, and the others. */
static void data_files(const struct tdir *t, unsigned *ret_chunks, unsigned *ret_other)
{
	char path[160];
	struct dirent *de;
	DIR *d;

	*ret_chunks = *ret_other = 0;
	snprintf(path, sizeof(path), "%s/data", t->dir);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!strncmp(de->d_name, ".pack-", 6))
			(*ret_chunks)++;
		else
			(*ret_other)++;
	}
	closedir(d);
}

static const size_t sizes[] = {1,    63,    64,	   65,	  1000,	 1024,	1025,  4095,
			       4096, 10000, 20000, 32767, 32768, 32769, 100000};

static bool check_lookup(struct store *s, uint64_t id, size_t len, uint64_t seed)
{
	struct store_obj *o = store_lookup(s, id);
	uint8_t *want = pattern(len, seed);
	bool ok = o && obj_equals(o, want, len);

	free(want);
	store_obj_unref(o);
	return ok;
}

static void test_sizes(void)
{
	struct tdir t;
	struct store *s;
	struct store_stats st;
	struct store_map m;
	unsigned chunks, other, packed = 0, i;
	uint64_t used;

	tdir_init(&t);
	s = must_pack(&t, 64 * MiB);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		struct store_obj *o = make_sealed(s, 100 + i, sizes[i], i, "/x");
		int fd = store_obj_open_fd(o);

		if (sizes[i] <= T) {
			packed++;
			CHECK_EQ(fd, -EOPNOTSUPP);
			CHECK_EQ(store_obj_map(o, &m), -EOPNOTSUPP);
			CHECK_EQ(store_obj_attach(o, NULL, NULL, NULL), -EOPNOTSUPP);
		} else {
			CHECK(fd >= 0);
			if (fd >= 0)
				close(fd);
		}
		store_obj_unref(o);
	}
	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		CHECK(check_lookup(s, 100 + i, sizes[i], i));
	stats(s, &st);
	CHECK_EQ(st.pack_max, T);
	CHECK_EQ(st.packed, packed);
	data_files(&t, &chunks, &other);
	CHECK_EQ(other, ARRAY_SIZE(sizes) - packed); /* a file each for the big ones */
	CHECK_EQ(chunks, st.chunks);
	CHECK(st.chunk_bytes > 0 && st.chunk_bytes <= st.used);
	used = st.used;
	store_close(s);

	/* a clean reopen adopts every one, from the same slots */
	s = must_pack(&t, 64 * MiB);
	stats(s, &st);
	CHECK_EQ(st.objects, ARRAY_SIZE(sizes));
	CHECK_EQ(st.packed, packed);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.used, used);
	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		CHECK(check_lookup(s, 100 + i, sizes[i], i));
	store_close(s);

	/* with packing off, packed objects stay where they are */
	{
		int err = 0;

		s = open_pack(&t, 64 * MiB, 0, &err);
		CHECK(s != NULL);
		if (s) {
			stats(s, &st);
			CHECK_EQ(st.objects, ARRAY_SIZE(sizes));
			CHECK_EQ(st.packed, packed);
			for (i = 0; i < ARRAY_SIZE(sizes); i++)
				CHECK(check_lookup(s, 100 + i, sizes[i], i));
			store_obj_unref(make_sealed(s, 999, 100, 9, "/y"));
			stats(s, &st);
			CHECK_EQ(st.packed, packed); /* the new one has a file */
			store_close(s);
		}
	}
	tdir_release(&t);
}

/* 2,000 objects of 1 KiB take about their bytes, not a page each. */
static void test_memory(void)
{
	struct tdir t;
	struct store *s;
	struct store_stats st;
	unsigned chunks, other, i;

	tdir_init(&t);
	s = must_pack(&t, 64 * MiB);
	for (i = 0; i < 2000; i++)
		store_obj_unref(make_sealed(s, 1 + i, 1024, i, "/m"));
	stats(s, &st);
	CHECK_EQ(st.packed, 2000);
	CHECK_EQ(st.chunk_bytes, 2000 * 1024);
	CHECK_EQ(st.used, 2000 * 1024);
	data_files(&t, &chunks, &other);
	CHECK_EQ(chunks, 1);
	CHECK_EQ(other, 0);
	/* every other one goes: no page is empty, none goes back */
	for (i = 0; i < 2000; i += 2)
		CHECK_EQ(store_unlink_id(s, 1 + i), 0);
	stats(s, &st);
	CHECK_EQ(st.packed, 1000);
	CHECK_EQ(st.chunk_bytes, 2000 * 1024);
	/* the freed slots are taken again before a new page is */
	for (i = 0; i < 1000; i++)
		store_obj_unref(make_sealed(s, 5000 + i, 1000, i, "/n"));
	stats(s, &st);
	CHECK_EQ(st.packed, 2000);
	CHECK_EQ(st.chunk_bytes, 2000 * 1024);
	/* all gone: the pages go back (the chunk may stay, empty) */
	for (i = 1; i < 2000; i += 2)
		CHECK_EQ(store_unlink_id(s, 1 + i), 0);
	for (i = 0; i < 1000; i++)
		CHECK_EQ(store_unlink_id(s, 5000 + i), 0);
	stats(s, &st);
	CHECK_EQ(st.packed, 0);
	CHECK_EQ(st.chunk_bytes, 0);
	CHECK_EQ(st.used, 0);
	CHECK(st.chunks <= 1);
	store_close(s);
	tdir_release(&t);
}

/* Writers that grow in small writes: within T they stay packed (at the
 * seal in the slot of their size), past it they spill into a file. */
static void test_growth(void)
{
	static const size_t ends[] = {100, 5000, 20000, T, T + 1, 200000};
	struct tdir t;
	struct store *s;
	struct store_stats st;
	unsigned i, chunks, other;
	size_t off;

	tdir_init(&t);
	s = must_pack(&t, 64 * MiB);
	for (i = 0; i < ARRAY_SIZE(ends); i++) {
		uint8_t *buf = pattern(ends[i], 40 + i);
		struct store_obj *o = store_create(s, 40 + i, NULL);

		CHECK(o != NULL);
		for (off = 0; o && off < ends[i]; off += 100) {
			size_t n = ends[i] - off < 100 ? ends[i] - off : 100;

			CHECK_EQ(store_write(o, buf + off, n, off), 0);
			CHECK_EQ(store_hash_follow(o, off, off + n), 0);
		}
		CHECK_EQ(store_seal(o, "/g", 1), 0);
		CHECK(obj_equals(o, buf, ends[i]));
		CHECK_EQ(store_obj_open_fd(o) == -EOPNOTSUPP, ends[i] <= T);
		store_obj_unref(o);
		free(buf);
	}
	stats(s, &st);
	CHECK_EQ(st.packed, 4);
	/* the slots they left while growing are free again: what is charged
	 * is the sealed objects' pages alone */
	data_files(&t, &chunks, &other);
	CHECK_EQ(other, 2);
	CHECK(st.chunk_bytes <= (100 + 4096) + (5000 + 4096) + (20000 + 8192) + (T + 4096));

	/* a write below the end, a cut, and a zero-filled gap */
	{
		uint8_t buf[3000], want[3000], got[3001];
		struct store_obj *o = store_create(s, 77, NULL);

		memset(buf, 'a', sizeof(buf));
		CHECK_EQ(store_write(o, buf, 2000, 0), 0);
		CHECK_EQ(store_write(o, "bb", 2, 10), 0);
		CHECK_EQ(store_truncate(o, 500), 0);
		CHECK_EQ(store_write(o, "c", 1, 2999), 0);
		memset(want, 0, sizeof(want));
		memset(want, 'a', 500);
		want[10] = want[11] = 'b';
		want[2999] = 'c';
		CHECK_EQ(store_seal(o, "/w", 1), 0);
		CHECK_EQ(store_read(o, got, sizeof(got), 0), 3000);
		CHECK(!memcmp(got, want, 3000));
		store_obj_unref(o);
	}
	store_close(s);
	s = must_pack(&t, 64 * MiB);
	stats(s, &st);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.objects, ARRAY_SIZE(ends) + 1);
	for (i = 0; i < ARRAY_SIZE(ends); i++)
		CHECK(check_lookup(s, 40 + i, ends[i], 40 + i));
	store_close(s);
	tdir_release(&t);
}

/* A fetch lands in its slot: reserve, fill through the iovec, seal with
 * no path, then record it. */
static void test_fetch(void)
{
	struct tdir t;
	struct store *s;
	struct store_obj *o;
	struct iovec iov;
	struct store_stats st;
	uint8_t *want = pattern(3000, 5);
	size_t bytes;

	tdir_init(&t);
	s = must_pack(&t, 64 * MiB);
	o = store_create(s, 5, NULL);
	CHECK_EQ(store_reserve(o, 3000), 0);
	CHECK_EQ(store_obj_iov(o, 0, 3000, &iov, 1, &bytes), 1);
	CHECK_EQ(bytes, 3000);
	memcpy(iov.iov_base, want, 3000);
	CHECK_EQ(store_seal(o, NULL, 1), 0);
	CHECK_EQ(store_obj_iov(o, 0, 3000, &iov, 1, &bytes), 1);
	CHECK(!memcmp(iov.iov_base, want, 3000)); /* in place: no copy at the seal */
	CHECK_EQ(store_set_path(o, "/f"), 0);
	store_obj_unref(o);
	stats(s, &st);
	CHECK_EQ(st.packed, 1);
	store_close(s);
	s = must_pack(&t, 64 * MiB);
	CHECK(check_lookup(s, 5, 3000, 5));
	store_close(s);
	free(want);
	tdir_release(&t);
}

/* An unlinked object keeps its slot while referenced; the slot is taken
 * again only once it is let go. */
static void test_unlink_held(void)
{
	struct tdir t;
	struct store *s;
	struct store_obj *a, *b, *c;
	struct store_stats st;
	uint8_t *want = pattern(2048, 1);
	void *pa;

	tdir_init(&t);
	s = must_pack(&t, 64 * MiB);
	a = make_sealed(s, 1, 2048, 1, "/a");
	pa = iov_base0(a);
	store_unlink(a);
	CHECK(store_lookup(s, 1) == NULL);
	b = make_sealed(s, 2, 2048, 2, "/b");
	CHECK(iov_base0(b) != pa); /* a's slot is still a's */
	CHECK(obj_equals(a, want, 2048));
	stats(s, &st);
	CHECK_EQ(st.packed, 2);
	store_obj_unref(a);
	stats(s, &st);
	CHECK_EQ(st.packed, 1);
	c = make_sealed(s, 3, 2048, 3, "/c");
	CHECK(iov_base0(c) == pa); /* and now it is free again */
	store_obj_unref(b);
	store_obj_unref(c);
	/* a new object with a's id, after a restart: a's record is gone */
	store_close(s);
	s = must_pack(&t, 64 * MiB);
	stats(s, &st);
	CHECK_EQ(st.objects, 2);
	CHECK(check_lookup(s, 3, 2048, 3));
	store_close(s);
	free(want);
	tdir_release(&t);
}

/* A child seals some objects, starts others, and dies without closing
 * the store: the sealed ones are adopted, the pages of the others go. */
static void test_crash(void)
{
	struct tdir t;
	struct store *s;
	struct store_stats st;
	int status;
	pid_t pid;
	unsigned i;

	tdir_init(&t);
	pid = fork();
	if (pid == 0) {
		s = must_pack(&t, 64 * MiB);
		for (i = 0; i < 100; i++)
			store_obj_unref(make_sealed(s, 1 + i, 700, i, "/k"));
		for (i = 0; i < 50; i++) {
			struct store_obj *o = store_create(s, 1000 + i, NULL);
			uint8_t buf[5000];

			memset(buf, 'p', sizeof(buf));
			if (!o || store_write(o, buf, sizeof(buf), 0))
				_exit(2);
		}
		kill(getpid(), SIGKILL);
		_exit(3);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
	s = must_pack(&t, 64 * MiB);
	stats(s, &st);
	CHECK_EQ(st.objects, 100);
	CHECK_EQ(st.pending, 0);
	CHECK_EQ(st.bad_records, 0);
	CHECK_EQ(st.packed, 100);
	/* 100 x 704 B slots: 18 pages; the writers' 50 x 5 KiB are gone */
	CHECK_EQ(st.chunk_bytes, (100 * 704 + 4095) / 4096 * 4096);
	CHECK_EQ(st.used, st.chunk_bytes);
	for (i = 0; i < 100; i++)
		CHECK(check_lookup(s, 1 + i, 700, i));
	store_close(s);
	tdir_release(&t);
}

/* Damaged bytes in a slot, or a line pointing at a slot that is not
 * there: bad records, the others adopted. */
static void test_damage(void)
{
	char path[400], name[300] = "";
	struct tdir t;
	struct store *s;
	struct store_stats st;
	struct dirent *de;
	unsigned i;
	DIR *d;
	int fd;

	tdir_init(&t);
	s = must_pack(&t, 64 * MiB);
	for (i = 0; i < 10; i++)
		store_obj_unref(make_sealed(s, 1 + i, 512, i, "/d"));
	store_close(s);
	snprintf(path, sizeof(path), "%s/data", t.dir);
	d = opendir(path);
	while (d && (de = readdir(d)))
		if (!strncmp(de->d_name, ".pack-", 6))
			snprintf(name, sizeof(name), "%s", de->d_name);
	if (d)
		closedir(d);
	CHECK(name[0] != '\0');
	snprintf(path, sizeof(path), "%s/data/%s", t.dir, name);
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	/* the fourth object's slot (lowest first: 512-byte slots) */
	CHECK_EQ(pwrite(fd, "X", 1, 3 * 512 + 7), 1);
	close(fd);
	s = must_pack(&t, 64 * MiB);
	stats(s, &st);
	CHECK_EQ(st.bad_records, 1);
	CHECK_EQ(st.objects, 9);
	CHECK(store_lookup(s, 4) == NULL);
	for (i = 0; i < 10; i++)
		if (i != 3)
			CHECK(check_lookup(s, 1 + i, 512, i));
	store_close(s);

	/* the chunk goes: all of its objects are bad records, none served */
	unlink(path);
	s = must_pack(&t, 64 * MiB);
	stats(s, &st);
	CHECK_EQ(st.objects, 0);
	CHECK_EQ(st.bad_records, 9);
	CHECK_EQ(st.used, 0);
	store_close(s);
	tdir_release(&t);
}

/* An object whose D line was lost (a full filesystem under the catalog)
 * names a slot that a later object took: the later line wins, and the
 * earlier object is set aside, never served with the later one's bytes. */
static void test_stale_line(void)
{
	char path[200], *text, *d, *nl;
	struct tdir t;
	struct store *s;
	struct store_stats st;
	struct store_obj *a, *b;
	size_t len;
	int verify;

	for (verify = 0; verify < 2; verify++) {
		tdir_init(&t);
		s = must_pack(&t, 64 * MiB);
		a = make_sealed(s, 0xa, 3000, 1, "/a");
		store_unlink(a);
		store_obj_unref(a);
		b = make_sealed(s, 0xb, 3000, 2, "/b");
		store_obj_unref(b);
		store_close(s);
		snprintf(path, sizeof(path), "%s/catalog.log", t.dir);
		text = (char *)slurp(path, &len);
		CHECK(text != NULL);
		if (!text)
			break;
		text[len] = '\0';
		d = strstr(text, "D 000000000000000a ");
		CHECK(d != NULL);
		if (d) {
			nl = strchr(d, '\n');
			memmove(d, nl + 1, strlen(nl + 1) + 1);
		}
		spew(path, (uint8_t *)text, strlen(text));
		free(text);
		{
			struct store_config cfg = {
			    .dir = t.dir, .capacity = 64 * MiB, .verify = verify, .pack_max = T};
			int err = 0;

			s = store_open(&cfg, &err, NULL);
		}
		CHECK(s != NULL);
		if (!s)
			break;
		stats(s, &st);
		CHECK(store_lookup(s, 0xa) == NULL);
		CHECK(check_lookup(s, 0xb, 3000, 2));
		CHECK_EQ(st.bad_records, 1);
		CHECK_EQ(st.packed, 1);
		store_close(s);
		tdir_release(&t);
	}
}

/* The capacity counts the chunks' pages: small objects fill it, and a
 * freed slot makes room for the next. */
static void test_capacity(void)
{
	struct tdir t;
	struct store *s;
	struct store_stats st;
	struct store_obj *o;
	uint8_t buf[1024];
	unsigned n = 0, i;
	int r = 0;

	tdir_init(&t);
	s = must_pack(&t, 1 * MiB);
	memset(buf, 7, sizeof(buf));
	for (i = 0; i < 5000; i++) {
		o = store_create(s, 1 + i, NULL);
		CHECK(o != NULL);
		if (!o)
			break;
		r = store_write(o, buf, sizeof(buf), 0);
		if (r == 0)
			r = store_seal(o, "/c", 1);
		if (r < 0) {
			store_unlink(o);
			store_obj_unref(o);
			break;
		}
		store_obj_unref(o);
		n++;
	}
	CHECK_EQ(r, -ENOSPC);
	CHECK_EQ(n, 1024); /* 1 MiB of 1 KiB slots, no more */
	CHECK(!store_fits(s, 1024));
	CHECK(!store_fits(s, 100));
	CHECK(!store_fits(s, 100000));
	stats(s, &st);
	CHECK_EQ(st.used, 1 * MiB);
	CHECK(st.used <= st.capacity);
	CHECK_EQ(store_unlink_id(s, 10), 0);
	CHECK(store_fits(s, 1000)); /* its slot, on a page still held */
	CHECK(!store_fits(s, 100)); /* another class: a page it has not */
	o = store_create(s, 9999, NULL);
	CHECK_EQ(store_write(o, buf, 1000, 0), 0);
	CHECK_EQ(store_seal(o, "/c", 1), 0);
	store_obj_unref(o);
	/* a bigger class has no page: no room */
	o = store_create(s, 10000, NULL);
	CHECK_EQ(store_write(o, buf, 100, 0), -ENOSPC);
	store_unlink(o);
	store_obj_unref(o);
	/* a writer that outgrows its slot past T finds no room for a file:
	 * it keeps its slot and bytes, and leaves no file behind */
	for (i = 0; i < 40; i++)
		CHECK_EQ(store_unlink_id(s, 11 + i), 0);
	{
		uint8_t *big = pattern(40000, 8), got[20001];
		unsigned chunks, other;

		o = store_create(s, 20000, NULL);
		CHECK_EQ(store_write(o, big, 20000, 0), 0);
		CHECK_EQ(store_write(o, big + 20000, 20000, 20000), -ENOSPC);
		CHECK_EQ(store_read(o, got, sizeof(got), 0), 20000);
		CHECK(!memcmp(got, big, 20000));
		data_files(&t, &chunks, &other);
		CHECK_EQ(other, 0);
		CHECK_EQ(store_seal(o, "/s", 1), 0);
		CHECK(obj_equals(o, big, 20000));
		CHECK_EQ(store_obj_open_fd(o), -EOPNOTSUPP);
		store_obj_unref(o);
		free(big);
		stats(s, &st);
		CHECK(st.used <= st.capacity);
	}
	store_close(s);
	tdir_release(&t);
}

/* Threads writing, reading and unlinking small objects at once. */
struct churn {
	struct store *s;
	unsigned id0;
};

static void *churn_run(void *arg)
{
	struct churn *c = arg;
	unsigned i;

	for (i = 0; i < 3000; i++) {
		uint64_t id = c->id0 + i;
		size_t len = 1 + (id * 2654435761u) % 9000;
		struct store_obj *o = make_sealed(c->s, id, len, id, "/t");
		uint8_t *want = pattern(len, id);

		if (!obj_equals(o, want, len))
			CHECK(!"bytes");
		free(want);
		store_obj_unref(o);
		if (i >= 100)
			store_unlink_id(c->s, id - 100);
	}
	return NULL;
}

static void test_threads(void)
{
	struct churn c[4];
	pthread_t th[4];
	struct tdir t;
	struct store *s;
	struct store_stats st;
	unsigned i;

	tdir_init(&t);
	s = must_pack(&t, 256 * MiB);
	for (i = 0; i < 4; i++) {
		c[i] = (struct churn){s, 100000 * (i + 1)};
		pthread_create(&th[i], NULL, churn_run, &c[i]);
	}
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	stats(s, &st);
	CHECK_EQ(st.packed, 400);
	CHECK_EQ(st.objects, 400);
	store_close(s);
	s = must_pack(&t, 256 * MiB);
	stats(s, &st);
	CHECK_EQ(st.objects, 400);
	CHECK_EQ(st.bad_records, 0);
	for (i = 0; i < 4; i++)
		for (uint64_t id = c[i].id0 + 2900; id < c[i].id0 + 3000; id++)
			CHECK(check_lookup(s, id, 1 + (id * 2654435761u) % 9000, id));
	store_close(s);
	tdir_release(&t);
}

int main(void)
{
	test_sizes();
	test_memory();
	test_growth();
	test_fetch();
	test_unlink_held();
	test_crash();
	test_damage();
	test_stale_line();
	test_capacity();
	test_threads();
	return tap_done();
}
