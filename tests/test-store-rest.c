/*
 * test-store-rest: objects at rest hold nothing of the process's (issue
 * 21).  A sealed object holds no descriptor, and a mapping only while it
 * is used or in the bounded cache of idle ones; the open-files limit
 * bounds only the objects being written at once; the inodes of the
 * store's filesystem bound the objects, and running out of them is
 * named.
 */
#include "store-harness.h"

#include "bsum.h"

#include <dirent.h>
#include <malloc.h>
#include <stdatomic.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* Entries in /proc/self/fd. */
static unsigned fds_now(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	unsigned n = 0;

	if (!d)
		exit(1);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* opendir's own */
}

/* Mappings of files under /dev/shm (where the test's stores live), from
 * /proc/self/maps: the allocator's (ASan's more so) come and go. */
static unsigned maps_now(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	unsigned n = 0;

	if (!f)
		exit(1);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, " /dev/shm/") != NULL;
	fclose(f);
	return n;
}

static struct store *open_cache(const struct tdir *t, uint64_t cap, uint64_t map_cache)
{
	struct store_config cfg = {
	    .dir = t->dir, .capacity = cap, .verify = true, .map_cache = map_cache};
	int err = 0;
	struct store *s = store_open(&cfg, &err, NULL);

	if (!s) {
		fprintf(stderr, "store_open %s: %s\n", t->dir, strerror(-err));
		exit(1);
	}
	return s;
}

static size_t rest_size(uint64_t id)
{
	return id % 50 == 0 ? 0 : (size_t)(id * 2654435761u % 8192) + 1;
}

/* Seal objects [from, to), each of rest_size(id) bytes of pattern id. */
static void seal_range(struct store *s, uint64_t from, uint64_t to)
{
	for (uint64_t id = from; id < to; id++)
		store_obj_unref(make_sealed(s, id, rest_size(id), id, "/x"));
}

/* Do objects [from, to) read back (store_read())? */
static bool read_range(struct store *s, uint64_t from, uint64_t to)
{
	bool ok = true;

	for (uint64_t id = from; id < to && ok; id++) {
		struct store_obj *o = store_lookup(s, id);
		uint8_t *want = pattern(rest_size(id), id);

		ok = o && obj_equals(o, want, rest_size(id));
		store_obj_unref(o);
		free(want);
	}
	return ok;
}

/* 2,000 sealed objects cost no descriptor and, beyond the cache of idle
 * mappings, no mapping; written, read, and adopted after a reopen. */
TEST(no_fd_at_rest)
{
	struct store_stats st;
	unsigned fds0, maps0;
	struct tdir t;
	struct store *s;

	tdir_init(&t);
	s = open_cache(&t, 64 * MiB, 8);
	seal_range(s, 1, 11);
	CHECK(read_range(s, 1, 11));
	fds0 = fds_now();
	maps0 = maps_now();
	seal_range(s, 11, 2011);
	printf("# after 10 objects: %u fds, %u maps; after 2010: %u fds, %u maps\n", fds0, maps0,
	       fds_now(), maps_now());
	CHECK(fds_now() <= fds0 + 1);
	CHECK(maps_now() <= maps0 + 4);
	CHECK(read_range(s, 1, 2011));
	CHECK(fds_now() <= fds0 + 1);
	CHECK(maps_now() <= maps0 + 4);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 2010);
	CHECK(st.mapped <= 8);
	CHECK(st.maps_dropped > 0);
	CHECK_EQ(st.open, 0);
	store_close(s);

	/* adoption opens nothing for good either (and checks every byte) */
	fds0 = fds_now();
	maps0 = maps_now();
	s = open_cache(&t, 64 * MiB, 8);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 2010);
	CHECK_EQ(st.bad_records, 0);
	CHECK(fds_now() <= fds0 + 6); /* the store's own: dir, lock, data... */
	CHECK(read_range(s, 1, 2011));
	CHECK(maps_now() <= maps0 + 12);
	store_close(s);
	tdir_release(&t);
}

/* Mappings in use are never taken away; idle ones go beyond the cache. */
TEST(map_cache)
{
	struct store_obj *held[20], *keep, *o;
	const uint8_t *kp, *hp[20];
	struct store_stats st;
	uint8_t *want;
	struct tdir t;
	struct store *s;
	int i;

	tdir_init(&t);
	s = open_cache(&t, 64 * MiB, 8);
	seal_range(s, 1, 200);
	store_close(s); /* sealed objects adopted: nothing mapped */
	s = open_cache(&t, 64 * MiB, 8);
	store_stats(s, &st);
	CHECK_EQ(st.mapped, 0);

	for (i = 0; i < 20; i++) {
		held[i] = store_lookup(s, 101 + (uint64_t)i);
		hp[i] = iov_base0(held[i]);
		CHECK(hp[i] != NULL);
	}
	store_stats(s, &st);
	CHECK_EQ(st.mapped, 20); /* all in use: none taken away */
	for (i = 0; i < 20; i++) {
		want = pattern(rest_size(101 + (uint64_t)i), 101 + (uint64_t)i);
		CHECK(!memcmp(hp[i], want, rest_size(101 + (uint64_t)i)));
		free(want);
		store_obj_unref(held[i]);
	}

	/* one held while 100 others are mapped and let go */
	keep = store_lookup(s, 1);
	kp = iov_base0(keep);
	for (i = 2; i < 100; i++) {
		o = store_lookup(s, (uint64_t)i);
		CHECK(!rest_size((uint64_t)i) || iov_base0(o));
		store_obj_unref(o);
	}
	store_stats(s, &st);
	CHECK(st.mapped <= 8 + 1);
	CHECK(st.maps_dropped >= 100 - 8 - 10);
	want = pattern(rest_size(1), 1);
	CHECK(kp && !memcmp(kp, want, rest_size(1))); /* still mapped: no fault */
	free(want);
	store_obj_unref(keep);
	store_close(s);
	tdir_release(&t);
}

/* An unlinked object's file is reached by its new name. */
TEST(open_fd_unlinked)
{
	struct store_obj *o, *reader;
	struct store_map map;
	uint8_t *want = pattern(3 * MiB, 7), *got = malloc(3 * MiB);
	struct tdir t;
	struct store *s;
	int fd;

	tdir_init(&t);
	s = open_cache(&t, 64 * MiB, 8);
	o = make_sealed(s, 7, 3 * MiB, 7, "/seven");
	reader = store_lookup(s, 7);
	store_unlink(o);
	store_obj_unref(o);
	/* a new object may take the id meanwhile */
	store_obj_unref(make_sealed(s, 7, 100, 8, "/new-seven"));
	fd = store_obj_open_fd(reader);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, got, 3 * MiB, 0), (ssize_t)(3 * MiB));
	CHECK(!memcmp(got, want, 3 * MiB));
	close(fd);
	CHECK_EQ(store_obj_map(reader, &map), 0);
	CHECK(map.addr && !memcmp(map.addr, want, 3 * MiB));
	CHECK(map.fd >= 0);
	memset(got, 0, 3 * MiB);
	CHECK_EQ(pread(map.fd, got, 3 * MiB, 0), (ssize_t)(3 * MiB));
	CHECK(!memcmp(got, want, 3 * MiB));
	close(map.fd);
	CHECK(obj_equals(reader, want, 3 * MiB));
	store_obj_unref(reader);
	store_close(s);
	tdir_release(&t);
	free(want);
	free(got);
}

/* A pending object unlinked before it had a file, written after another
 * object took its id: each keeps its own bytes (the first one's file
 * gets its gone name at once), before and after a reopen.  (Found by a
 * review: the first one took over the other's file name.) */
TEST(unlinked_before_file)
{
	char a[100], b[100], got[100];
	struct store_obj *oa, *ob;
	struct store_stats st;
	struct tdir t;
	struct store *s;
	int err = 0;

	memset(a, 'A', sizeof(a));
	memset(b, 'B', sizeof(b));
	tdir_init(&t);
	s = open_cache(&t, 64 * MiB, 1);
	oa = store_create(s, 5, &err);
	store_unlink(oa);
	ob = store_create(s, 5, &err);
	CHECK(ob != NULL);
	CHECK_EQ(store_write(ob, b, sizeof(b), 0), 0);
	CHECK_EQ(store_write(oa, a, sizeof(a), 0), 0);
	CHECK_EQ(store_seal(oa, "/a", 1), -ENOENT);
	CHECK_EQ(store_seal(ob, "/b", 2), 0);
	CHECK_EQ(store_read(oa, got, sizeof(got), 0), (ssize_t)sizeof(got));
	CHECK(!memcmp(got, a, sizeof(a)));
	store_obj_unref(oa);
	store_obj_unref(ob);
	seal_range(s, 10, 14); /* B's mapping goes */
	ob = store_lookup(s, 5);
	CHECK_EQ(store_read(ob, got, sizeof(got), 0), (ssize_t)sizeof(got));
	CHECK(!memcmp(got, b, sizeof(b)));
	store_obj_unref(ob);
	store_close(s);
	s = open_cache(&t, 64 * MiB, 1);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 5);
	CHECK_EQ(st.bad_records, 0);
	ob = store_lookup(s, 5);
	CHECK(ob && obj_equals(ob, (const uint8_t *)b, sizeof(b)));
	store_obj_unref(ob);
	store_close(s);
	tdir_release(&t);
}

/* An open-files limit of 256 bounds the objects being written at once,
 * not the objects the store holds; the pool holds no descriptor. */
TEST(open_limit)
{
	struct store_obj *pend[256], *o;
	struct rlimit old, rl;
	struct store_stats st;
	unsigned fds0;
	struct tdir t;
	struct store *s;
	int n = 0, err = 0, i;

	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = old;
	rl.rlim_cur = 256;
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	tdir_init(&t);
	s = open_cache(&t, 256 * MiB, 8);
	seal_range(s, 1, 3001);
	store_stats(s, &st);
	CHECK_EQ(st.objects, 3000);
	CHECK(st.open_max > 64 && st.open_max < 256);
	CHECK(read_range(s, 1, 3001));

	/* pending objects: up to open_max, then -EMFILE */
	for (i = 0; i < 256; i++) {
		pend[n] = store_create(s, 10000 + (uint64_t)i, &err);
		if (!pend[n])
			break;
		CHECK_EQ(store_write(pend[n], "x", 1, 0), 0);
		n++;
	}
	store_stats(s, &st);
	CHECK_EQ(err, -EMFILE);
	CHECK_EQ((uint64_t)n, st.open_max);
	CHECK_EQ(st.open, st.open_max);
	/* a seal gives its slot back */
	CHECK_EQ(store_seal(pend[--n], "/p", 1), 0);
	store_obj_unref(pend[n]);
	o = store_create(s, 20000, &err);
	CHECK(o != NULL);
	store_unlink(o);
	store_obj_unref(o);
	for (i = 0; i < n; i++) {
		store_unlink(pend[i]);
		store_obj_unref(pend[i]);
	}

	/* freed files of 1 MiB and more go to the pool, by name */
	fds0 = fds_now();
	for (i = 0; i < 40; i++) {
		o = make_sealed(s, 30000 + (uint64_t)i, 1 * MiB + 1, 3, "/big");
		store_unlink(o);
		store_obj_unref(o);
	}
	store_stats(s, &st);
	CHECK(st.pool >= 1 * MiB);
	CHECK(st.files_reused > 0);
	CHECK(fds_now() <= fds0);
	store_close(s);
	tdir_release(&t);
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
}

/* Registrations a transport hangs on objects (RDMA): at most regs_max
 * stay, the coldest idle ones go first; one in use is never dropped, and
 * each is dropped exactly once (at the latest at store_close()). */
struct fake_reg {
	unsigned drops;
};

static void fake_drop(void *reg)
{
	((struct fake_reg *)reg)->drops++;
}

static void attach_one(struct store *s, uint64_t id, struct fake_reg *reg)
{
	struct store_obj *o = store_lookup(s, id);
	struct store_map m;

	CHECK(o != NULL);
	CHECK_EQ(store_obj_map(o, &m), 0);
	if (m.fd >= 0)
		close(m.fd);
	CHECK_EQ(store_obj_attach(o, reg, fake_drop, NULL), 0);
	store_obj_unref(o);
}

static void *reg_of(struct store *s, uint64_t id)
{
	struct store_obj *o = store_lookup(s, id);
	void *cur = (void *)1;

	CHECK(o != NULL);
	CHECK_EQ(store_obj_attach(o, NULL, NULL, &cur), 0);
	store_obj_unref(o);
	return cur;
}

TEST(regs_bounded)
{
	struct store_config cfg = {
	    .capacity = 64 * MiB, .verify = true, .map_cache = 8, .regs_max = 4};
	struct fake_reg regs[41] = {0};
	struct store_obj *held, *gone;
	struct store_stats st;
	unsigned i, live = 0, dropped = 0;
	struct tdir t;
	struct store *s;
	int err = 0;

	tdir_init(&t);
	cfg.dir = t.dir;
	s = store_open(&cfg, &err, NULL);
	CHECK(s != NULL);
	seal_range(s, 1, 41);
	/* 1 is in use throughout, 2 is unlinked while in use */
	attach_one(s, 1, &regs[1]);
	held = store_lookup(s, 1);
	attach_one(s, 2, &regs[2]);
	gone = store_lookup(s, 2);
	store_unlink(gone);
	for (i = 3; i <= 40; i++)
		attach_one(s, i, &regs[i]);
	store_stats(s, &st);
	CHECK(st.pinned <= 4 + 2);
	CHECK_EQ(st.regs_max, 4);
	CHECK_EQ(regs[1].drops, 0);
	CHECK_EQ(regs[2].drops, 0);
	CHECK(reg_of(s, 1) == &regs[1]);
	for (i = 3; i <= 40; i++) {
		CHECK(regs[i].drops <= 1);
		if (regs[i].drops) {
			dropped++;
			CHECK(reg_of(s, i) == NULL); /* to be registered anew */
		} else {
			live++;
			CHECK(reg_of(s, i) == &regs[i]);
		}
	}
	CHECK_EQ(dropped, 38 - live);
	CHECK(dropped >= 38 - 4);
	CHECK_EQ(st.regs_dropped, dropped);
	/* their mappings went back to the cache of idle ones */
	CHECK(st.mapped + st.pinned <= 8 + 4 + 2 + 16);
	/* a dropped one can be registered again */
	for (i = 3; i <= 40 && regs[i].drops == 0; i++)
		;
	CHECK(i <= 40);
	attach_one(s, i, &regs[i]);
	CHECK(reg_of(s, i) == &regs[i] || regs[i].drops == 2);
	/* the unlinked one goes with its last reference */
	store_obj_unref(gone);
	CHECK_EQ(regs[2].drops, 1);
	store_obj_unref(held);
	store_close(s);
	for (i = 1; i <= 40; i++)
		CHECK(regs[i].drops >= 1 && regs[i].drops <= 2);
	CHECK_EQ(regs[1].drops, 1);
	tdir_release(&t);
}

/*
 * Registrations under load: threads that serve (look a registration up
 * with a reference held, or register the object and hang it), read,
 * lease, unlink and make objects again under the same ids, with a
 * registration cache of 2 and a mapping cache of 2.  A registration is
 * never dropped while a thread that found it holds its reference, its
 * memory holds its object's bytes until it is dropped, and each one is
 * dropped exactly once.
 */
#define STRESS_IDS 24
#define STRESS_REG_ALIVE 0x5245474cu
#define STRESS_REG_DEAD 0xdeadu

struct stress_reg {
	atomic_uint magic;
	atomic_uint users;
	atomic_uint drops;
	const uint8_t *addr;
	size_t len;
	uint64_t seed;
	struct stress_reg *next; /* stress.all, under stress.lock */
};

static struct {
	struct store *s;
	atomic_bool stop;
	atomic_uint bad_use, bad_drop, bad_bytes, bad_read, bad_make, made, dropped, reused;
	pthread_mutex_t lock;
	struct stress_reg *all;
} stress;

static size_t stress_size(uint64_t seed)
{
	return (size_t)(seed * 2654435761u % (3 * PG)) + 1;
}

static void stress_make(uint64_t id, uint64_t seed)
{
	size_t len = stress_size(seed);
	uint8_t *buf = pattern(len, seed);
	struct store_obj *o = store_create(stress.s, id, NULL);

	if (!o) {
		free(buf);
		return; /* the id is taken again already */
	}
	if (store_write(o, buf, len, 0) || store_seal(o, "/x", (int64_t)seed))
		atomic_fetch_add(&stress.bad_make, 1);
	store_obj_unref(o);
	free(buf);
}

static void stress_drop(void *reg)
{
	struct stress_reg *r = reg;
	uint8_t *want;

	if (atomic_load(&r->users) || atomic_load(&r->magic) != STRESS_REG_ALIVE)
		atomic_fetch_add(&stress.bad_drop, 1);
	/* still mapped, and still this object's bytes */
	want = pattern(r->len, r->seed);
	if (memcmp(r->addr, want, r->len))
		atomic_fetch_add(&stress.bad_bytes, 1);
	free(want);
	atomic_store(&r->magic, STRESS_REG_DEAD);
	atomic_fetch_add(&r->drops, 1);
	atomic_fetch_add(&stress.dropped, 1);
}

/* What a GET does: the registration of @o, found or made (rdma_serve.c
 * obj_reg()), then used while the reference is held. */
static void stress_serve(struct store_obj *o)
{
	struct stress_reg *r = NULL, *mine;
	void *cur = NULL;
	struct store_map m;
	uint8_t *want;
	int err;

	if (store_obj_attach(o, NULL, NULL, &cur))
		return;
	r = cur;
	if (!r) {
		if (store_obj_map(o, &m))
			return;
		if (m.fd >= 0)
			close(m.fd);
		if (!m.len)
			return;
		mine = calloc(1, sizeof(*mine));
		if (!mine)
			exit(1);
		atomic_init(&mine->magic, STRESS_REG_ALIVE);
		mine->addr = m.addr;
		mine->len = m.len;
		mine->seed = (uint64_t)store_obj_mtime(o);
		err = store_obj_attach(o, mine, stress_drop, &cur);
		if (!err) {
			r = mine;
			atomic_fetch_add(&stress.made, 1);
			pthread_mutex_lock(&stress.lock);
			mine->next = stress.all;
			stress.all = mine;
			pthread_mutex_unlock(&stress.lock);
		} else {
			free(mine);
			if (err != -EEXIST)
				return;
			r = cur;
		}
	} else {
		atomic_fetch_add(&stress.reused, 1);
	}
	atomic_fetch_add(&r->users, 1);
	if (atomic_load(&r->magic) != STRESS_REG_ALIVE || r->seed != (uint64_t)store_obj_mtime(o))
		atomic_fetch_add(&stress.bad_use, 1);
	want = pattern(r->len, r->seed);
	if (memcmp(r->addr, want, r->len))
		atomic_fetch_add(&stress.bad_bytes, 1);
	free(want);
	if (atomic_load(&r->magic) != STRESS_REG_ALIVE)
		atomic_fetch_add(&stress.bad_use, 1);
	atomic_fetch_sub(&r->users, 1);
}

static void *stress_server(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	while (!atomic_load(&stress.stop)) {
		struct store_obj *o = store_lookup(stress.s, 1 + rand_r(&seed) % STRESS_IDS);

		if (o && store_obj_sealed(o))
			stress_serve(o);
		store_obj_unref(o);
	}
	return NULL;
}

/* Readers (the mapping cache), leases (not use), unlinks and new objects
 * under the same ids. */
static void *stress_churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	struct store_obj *leased[4] = {0};
	uint64_t gen = 1000;

	while (!atomic_load(&stress.stop)) {
		uint64_t id = 1 + rand_r(&seed) % STRESS_IDS;
		struct store_obj *o = store_lookup(stress.s, id);
		unsigned k = rand_r(&seed) % 8;

		if (o && !store_obj_sealed(o)) {
			/* another thread's, being made */
			store_obj_unref(o);
			continue;
		}

		if (o && k < 4) {
			uint64_t sd = (uint64_t)store_obj_mtime(o);
			uint8_t *want = pattern(stress_size(sd), sd);

			if (!obj_equals(o, want, stress_size(sd)))
				atomic_fetch_add(&stress.bad_read, 1);
			free(want);
		} else if (o && k < 6) {
			unsigned i = rand_r(&seed) % 4;

			store_obj_unref_lease(leased[i]);
			leased[i] = store_obj_ref_lease(o);
		} else if (o) {
			/* seeds stay unique per thread: arg apart */
			store_unlink(o);
			stress_make(id, (uint64_t)(uintptr_t)arg * 1000000 + gen++);
		} else {
			stress_make(id, (uint64_t)(uintptr_t)arg * 1000000 + gen++);
		}
		store_obj_unref(o);
	}
	for (unsigned i = 0; i < 4; i++)
		store_obj_unref_lease(leased[i]);
	return NULL;
}

TEST(regs_stress)
{
	struct store_config cfg = {
	    .capacity = 64 * MiB, .verify = true, .map_cache = 2, .regs_max = 2};
	pthread_t th[6];
	struct store_stats st;
	struct stress_reg *r, *next;
	unsigned i, live = 0, twice = 0;
	struct tdir t;
	int err = 0;

	tdir_init(&t);
	cfg.dir = t.dir;
	memset(&stress, 0, sizeof(stress));
	pthread_mutex_init(&stress.lock, NULL);
	stress.s = store_open(&cfg, &err, NULL);
	CHECK(stress.s != NULL);
	for (i = 1; i <= STRESS_IDS; i++)
		stress_make(i, i);
	for (i = 0; i < 4; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, stress_server, (void *)(uintptr_t)(i + 1)),
			 0);
	for (; i < 6; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, stress_churn, (void *)(uintptr_t)(i + 1)), 0);
	usleep(3000 * 1000);
	atomic_store(&stress.stop, true);
	for (i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	/* at rest: what hangs is what was made and not dropped */
	store_stats(stress.s, &st);
	for (r = stress.all; r; r = r->next)
		live += atomic_load(&r->drops) == 0;
	CHECK_EQ(st.pinned, live);
	CHECK_EQ(st.objects, STRESS_IDS);
	CHECK(st.mapped <= 2 + 16);
	store_close(stress.s);
	for (r = stress.all; r; r = next) {
		next = r->next;
		twice += atomic_load(&r->drops) != 1;
		free(r);
	}
	fprintf(stderr, "regs_stress: %u made, %u reused, %u dropped, %llu dropped by the cache\n",
		atomic_load(&stress.made), atomic_load(&stress.reused),
		atomic_load(&stress.dropped), (unsigned long long)st.regs_dropped);
	CHECK(atomic_load(&stress.made) > 0);
	CHECK(st.regs_dropped > 0);
	CHECK_EQ(twice, 0);
	CHECK_EQ(atomic_load(&stress.made), atomic_load(&stress.dropped));
	CHECK_EQ(atomic_load(&stress.bad_use), 0);
	CHECK_EQ(atomic_load(&stress.bad_drop), 0);
	CHECK_EQ(atomic_load(&stress.bad_bytes), 0);
	CHECK_EQ(atomic_load(&stress.bad_read), 0);
	CHECK_EQ(atomic_load(&stress.bad_make), 0);
	pthread_mutex_destroy(&stress.lock);
	tdir_release(&t);
}

/*
 * The store's filesystem out of inodes (a tmpfs of 16 on data/): the
 * next object's first write gets -ENOSPC (not -EMFILE or -EIO), the
 * stats say no inode is left, and unlinking an object makes room again.
 */
TEST(inodes_named)
{
	struct store_obj *o;
	struct store_stats st;
	char data[160];
	struct tdir t;
	struct store *s;
	uint64_t id;
	int err = 0, r = 0;

	tdir_init(&t);
	snprintf(data, sizeof(data), "%s/data", t.dir);
	if (mkdir(t.dir, 0700) < 0 || mkdir(data, 0700) < 0 ||
	    mount("objfs-test-data", data, "tmpfs", 0, "size=16M,nr_inodes=16,mode=0700") < 0) {
		printf("# skipped: cannot mount a tmpfs on %s: %s\n", data, strerror(errno));
		tdir_release(&t);
		return;
	}
	s = open_cache(&t, 64 * MiB, 8);
	store_stats(s, &st);
	CHECK_EQ(st.inodes, 16);
	CHECK(st.inodes_free > 0 && st.inodes_free < 16);
	for (id = 1; id <= 32; id++) {
		o = store_create(s, id, &err);
		CHECK(o != NULL);
		if (!o)
			break;
		r = store_write(o, "x", 1, 0);
		if (r < 0) {
			store_unlink(o);
			store_obj_unref(o);
			break;
		}
		CHECK_EQ(store_seal(o, "/i", 1), 0);
		store_obj_unref(o);
	}
	CHECK_EQ(r, -ENOSPC);
	CHECK(id > 8 && id <= 16);
	store_stats(s, &st);
	CHECK_EQ(st.inodes_free, 0);
	CHECK_EQ(st.objects, id - 1);

	/* an object goes: its inode is free for the next */
	o = store_lookup(s, 1);
	CHECK(o != NULL);
	store_unlink(o);
	store_obj_unref(o);
	store_stats(s, &st);
	CHECK_EQ(st.inodes_free, 1);
	o = store_create(s, 100, &err);
	CHECK(o != NULL);
	if (o) {
		CHECK_EQ(store_write(o, "y", 1, 0), 0);
		CHECK_EQ(store_seal(o, "/j", 1), 0);
		store_obj_unref(o);
	}
	store_close(s);
	umount2(data, MNT_DETACH);
	tdir_release(&t);
}

/* Bytes the allocator has handed out, and the store's blocks of objects
 * (struct store_stats.objects_mem). */
static uint64_t mem_now(struct store *s)
{
	struct mallinfo2 mi = mallinfo2();
	struct store_stats st;

	store_stats(s, &st);
	return mi.uordblks + mi.hblkhd + st.objects_mem;
}

/*
 * What a sealed object at rest costs the process's memory: its entry in
 * the store (from the store's own blocks), the id table's share, and
 * what the allocator still holds for it.  20,000 objects with paths as
 * long as a dataset's ("/bench/d0001/f0012345").
 */
#define REST_N 20000
#define REST_MEM_MAX 168 /* bytes per object: it was 342, then 173; the aim is 100 */
TEST(memory_at_rest)
{
	struct store_obj *o;
	struct tdir t;
	struct store *s;
	uint64_t before, after, per;
	char path[64];

	tdir_init(&t);
	s = open_cache(&t, 256 * MiB, 8);
	seal_range(s, 1, 2); /* the first allocations of a store */
	before = mem_now(s);
	for (uint64_t id = 2; id < 2 + REST_N; id++) {
		snprintf(path, sizeof(path), "/bench/d%04u/f%07u", (unsigned)(id / 10000),
			 (unsigned)id);
		store_obj_unref(make_sealed(s, id, id % 64 + 1, id, path));
	}
	after = mem_now(s);
	per = (after - before) / REST_N;
	printf("# %llu bytes per object at rest\n", (unsigned long long)per);
	/* ASan's allocator keeps no count (mallinfo2() says 0) */
	CHECK(per <= REST_MEM_MAX);
	CHECK(per >= sizeof(void *)); /* the table's share at least */
	o = store_lookup(s, 1 + REST_N);
	CHECK(o != NULL);
	store_obj_path(o, path, sizeof(path));
	CHECK_STR(path, "/bench/d0002/f0020001");
	store_obj_unref(o);
	store_close(s);
	tdir_release(&t);
}

/* Issue 22: the seal sums the blocks of what it checksums, in the same
 * pass, whether the writer went front to back (hashed as it wrote) or
 * rewrote its start (hashed again at the seal); an object of one block
 * has none. */
TEST(block_sums)
{
	const size_t len = 2 * 8 * MiB + 777, piece = 3 * MiB + 5;
	uint8_t *want = pattern(len, 41);
	struct bsums *b;
	struct store_obj *o;
	struct tdir t;
	struct store *s;
	size_t off, n;
	uint64_t id;

	tdir_init(&t);
	s = must_open(&t, 64 * MiB, false);
	for (id = 1; id <= 3; id++) {
		o = store_create(s, id, NULL);
		for (off = 0; off < len; off += n) {
			n = len - off < piece ? len - off : piece;
			CHECK_EQ(store_write(o, want + off, n, off), 0);
			CHECK_EQ(store_hash_follow(o, off, off + n), 0);
		}
		if (id == 2) { /* its start written again: hashed over */
			CHECK_EQ(store_write(o, want + 10, 100, 10), 0);
		} else if (id == 3) { /* a byte of the second block changed */
			want[8 * MiB + 1] ^= 0x5a;
			CHECK_EQ(store_write(o, want + 8 * MiB + 1, 1, 8 * MiB + 1), 0);
		}
		b = NULL;
		CHECK_EQ(store_seal_sums(o, "/x", 1, &b), 0);
		CHECK(b != NULL);
		if (b) {
			CHECK_EQ(b->n, 3);
			for (uint32_t i = 0; i < 3; i++)
				CHECK(b->sum[i] == bsum_block(want + (size_t)i * 8 * MiB, len, i));
		}
		free(b);
		store_obj_unref(o);
	}
	/* one block: no sums */
	o = store_create(s, 4, NULL);
	CHECK_EQ(store_write(o, want, 8 * MiB, 0), 0);
	b = (struct bsums *)1;
	CHECK_EQ(store_seal_sums(o, "/y", 1, &b), 0);
	CHECK(b == NULL);
	store_obj_unref(o);
	store_close(s);
	free(want);
	tdir_release(&t);
}

int main(void)
{
	RUN(no_fd_at_rest);
	RUN(map_cache);
	RUN(open_fd_unlinked);
	RUN(unlinked_before_file);
	RUN(open_limit);
	RUN(regs_bounded);
	RUN(regs_stress);
	RUN(inodes_named);
	RUN(memory_at_rest);
	RUN(block_sums);
	return tap_done();
}
