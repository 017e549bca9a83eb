/*
 * store_catalog: the records and notes beside the objects' files.
 *
 * objects/<16 hex digits> is the catalog record of one sealed object.
 * Binary, little-endian:
 *
 *   u32 magic "OBJC", u32 version (2)
 *   u64 id, u64 size, i64 mtime_ns, u8 csum[16]  (xxh3-128, canonical)
 *   u32 path_len (<= 4095), u32 n_ext (0)
 *   path_len bytes of path (no NUL)
 *   n_ext times { u64 arena page, u64 npages }   (version 1 only)
 *   u64 XXH3_64bits of everything before it
 *
 * A record is written to objects/.tmp-<id>, fsynced and renamed over the
 * real name, so it is whole or absent.  At open, store_catalog_adopt_i()
 * reads every record in name (so id) order and adopts the valid ones:
 * the file must decode exactly, the hash match, the id match the name,
 * and the object's file data/<id> be there and exactly its size; with
 * cfg->verify the data checksum is recomputed too.  A record that fails
 * is renamed "<name>.bad" and counted; leftover temp files are deleted.
 *
 * Upgrade.  Version 1 records come from the arena layout of objfs 0.x:
 * every object's bytes in one file, DIR/arena, at the extents its record
 * lists.  If DIR/arena is there, each such object is copied into a file
 * of its own, checked against its checksum and given a version 2
 * record; then the arena is deleted.  Nothing is lost on the way: a
 * record is replaced only once its new file is whole, and the arena goes
 * only after every record was converted or set aside.
 *
 * notes/<key> holds one small value, replaced the same way.
 *
 * This file also sets up the directory itself: creates it and its
 * subdirectories and takes the flock on DIR/lock.
 */
#include "store_i.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "log.h"

#define REC_MAGIC 0x434a424fU /* "OBJC" */
#define REC_VERSION 2U
#define REC_VERSION_ARENA 1U
#define REC_HDR 56 /* bytes before the path */
#define REC_EXT 16 /* bytes per extent */
#define REC_TAIL 8 /* trailing hash */
#define REC_PATH_MAX (OBJFS_PATH_MAX - 1)
#define NOTE_KEY_MAX 64

static void put_le32(uint8_t *p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v = 0;
	int i;

	for (i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void rec_name(uint64_t id, char name[STORE_ID_HEX + 1])
{
	snprintf(name, STORE_ID_HEX + 1, "%016" PRIx64, id);
}

/* Parse a record name: exactly 16 lower-case hex digits.  0 or -EINVAL. */
static int rec_name_parse(const char *name, uint64_t *ret_id)
{
	uint64_t id = 0;
	int i;

	for (i = 0; i < STORE_ID_HEX; i++) {
		char c = name[i];

		if (c >= '0' && c <= '9')
			id = id << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			id = id << 4 | (uint64_t)(c - 'a' + 10);
		else
			return -EINVAL;
	}
	if (name[STORE_ID_HEX])
		return -EINVAL;
	*ret_id = id;
	return 0;
}

/* Write @buf to @dir_fd/@name through @tmp and rename(). */
static int write_atomic(int dir_fd, const char *tmp, const char *name, const void *buf, size_t len)
{
	int fd, r;

	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	r = write_full(fd, buf, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dir_fd, tmp, 0);
	return r;
}

/* Read up to @len bytes at offset 0; sets *ret_n to what was read. */
static int read_upto(int fd, void *buf, size_t len, size_t *ret_n)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*ret_n = done;
	return 0;
}

/* ---- the directory ---- */

int store_subdir_open_i(int dir_fd, const char *name, int *ret_fd)
{
	int fd;

	if (mkdirat(dir_fd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

int store_dir_open_i(struct store *s, const char *dir)
{
	int r;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dir_fd < 0)
		return -errno;
	s->lock_fd = openat(s->dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return -errno;
	while (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EINTR)
			return errno == EWOULDBLOCK ? -EBUSY : -errno;
	}
	r = store_subdir_open_i(s->dir_fd, "objects", &s->objects_fd);
	if (r < 0)
		return r;
	return store_subdir_open_i(s->dir_fd, "notes", &s->notes_fd);
}

/* ---- records ---- */

int store_catalog_write_i(struct store_obj *o, const char *path)
{
	char name[STORE_ID_HEX + 1], tmp[sizeof(STORE_TMP_PREFIX) + STORE_ID_HEX];
	size_t plen = strlen(path), len;
	uint8_t *buf, *p;
	int r;

	if (plen > REC_PATH_MAX)
		return -ENAMETOOLONG;
	len = REC_HDR + plen + REC_TAIL;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	put_le32(buf, REC_MAGIC);
	put_le32(buf + 4, REC_VERSION);
	put_le64(buf + 8, o->id);
	put_le64(buf + 16, store_obj_size(o));
	put_le64(buf + 24, (uint64_t)o->mtime_ns);
	memcpy(buf + 32, o->csum, OBJFS_CSUM_LEN);
	put_le32(buf + 48, (uint32_t)plen);
	put_le32(buf + 52, 0);
	memcpy(buf + REC_HDR, path, plen);
	p = buf + REC_HDR + plen;
	put_le64(p, XXH3_64bits(buf, len - REC_TAIL));

	rec_name(o->id, name);
	snprintf(tmp, sizeof(tmp), STORE_TMP_PREFIX "%s", name);
	r = write_atomic(o->s->objects_fd, tmp, name, buf, len);
	free(buf);
	return r;
}

int store_catalog_remove_i(struct store *s, uint64_t id)
{
	char name[STORE_ID_HEX + 1];

	rec_name(id, name);
	if (unlinkat(s->objects_fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* A record's fields, pointing into the file's bytes. */
struct rec {
	uint32_t version;
	uint64_t id, size;
	int64_t mtime_ns;
	const uint8_t *csum;
	const uint8_t *path;
	uint32_t path_len, n_ext;
	const uint8_t *ext;
};

/* Decode and check one record; the extents of a version 1 record must lie
 * inside @valid_pages (what the arena file holds).  0 or -EBADMSG. */
static int rec_decode(const uint8_t *buf, size_t len, uint64_t valid_pages, struct rec *ret)
{
	struct rec rec;
	uint64_t total = 0, i;

	if (len < REC_HDR + REC_TAIL)
		return -EBADMSG;
	if (get_le64(buf + len - REC_TAIL) != XXH3_64bits(buf, len - REC_TAIL))
		return -EBADMSG;
	rec.version = get_le32(buf + 4);
	if (get_le32(buf) != REC_MAGIC ||
	    (rec.version != REC_VERSION && rec.version != REC_VERSION_ARENA))
		return -EBADMSG;
	rec.id = get_le64(buf + 8);
	rec.size = get_le64(buf + 16);
	rec.mtime_ns = (int64_t)get_le64(buf + 24);
	rec.csum = buf + 32;
	rec.path_len = get_le32(buf + 48);
	rec.n_ext = get_le32(buf + 52);
	rec.path = buf + REC_HDR;
	rec.ext = rec.path + rec.path_len;
	if (rec.path_len > REC_PATH_MAX || rec.n_ext > valid_pages ||
	    len != REC_HDR + (uint64_t)rec.path_len + (uint64_t)rec.n_ext * REC_EXT + REC_TAIL)
		return -EBADMSG;
	if (memchr(rec.path, '\0', rec.path_len) || rec.size > STORE_SIZE_MAX)
		return -EBADMSG;
	for (i = 0; i < rec.n_ext; i++) {
		uint64_t page = get_le64(rec.ext + i * REC_EXT);
		uint64_t n = get_le64(rec.ext + i * REC_EXT + 8);

		if (n == 0 || page >= valid_pages || n > valid_pages - page ||
		    n > valid_pages - total)
			return -EBADMSG;
		total += n;
	}
	if (rec.version == REC_VERSION ? rec.n_ext != 0 : total != store_pages(rec.size))
		return -EBADMSG;
	*ret = rec;
	return 0;
}

/* Read record file @name whole into *ret_buf (caller frees).  -EBADMSG if
 * it is not a regular file of a plausible size. */
static int rec_read(struct store *s, const char *name, uint64_t valid_pages, uint8_t **ret_buf,
		    size_t *ret_len)
{
	uint64_t max = REC_HDR + REC_PATH_MAX + valid_pages * REC_EXT + REC_TAIL;
	struct stat st;
	uint8_t *buf;
	size_t n;
	int fd, r;

	fd = openat(s->objects_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -EBADMSG : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto close_fd;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		r = -EBADMSG;
		goto close_fd;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto close_fd;
	}
	/* one byte more than fstat said, to notice a file that grew */
	r = read_upto(fd, buf, (size_t)st.st_size + 1, &n);
	if (r == 0 && n != (size_t)st.st_size)
		r = -EBADMSG;
	if (r < 0) {
		free(buf);
		goto close_fd;
	}
	*ret_buf = buf;
	*ret_len = n;
close_fd:
	close(fd);
	return r;
}

/* The arena of a store of the old layout, mapped read-only (see the top). */
struct arena {
	const uint8_t *base;
	uint64_t pages;
};

/*
 * Copy the object of version 1 record @rec out of the arena into @o's
 * own file, check it against the record's checksum and write @o's new
 * record.  @o has the record's size; single threaded.  -EBADMSG.
 */
static int upgrade_one(struct store_obj *o, const struct rec *rec, const struct arena *a)
{
	uint8_t csum[OBJFS_CSUM_LEN];
	uint64_t done = 0, i;
	int r;

	r = store_file_grow_i(o, rec->size, true);
	if (r < 0)
		return r;
	for (i = 0; i < rec->n_ext && done < rec->size; i++) {
		uint64_t page = get_le64(rec->ext + i * REC_EXT);
		uint64_t n =
		    min_u64(get_le64(rec->ext + i * REC_EXT + 8) * STORE_PAGE, rec->size - done);

		memcpy(o->map + done, a->base + page * STORE_PAGE, n);
		done += n;
	}
	store_hash_i(o->map, rec->size, csum);
	if (memcmp(csum, rec->csum, OBJFS_CSUM_LEN))
		return -EBADMSG;
	r = store_file_seal_i(o);
	if (r == 0)
		r = store_catalog_write_i(o, o->path ? o->path : "");
	if (r == 0) {
		store_file_freeze_i(o);
		store_file_rest_i(o); /* at rest: no mapping */
	}
	return r;
}

/*
 * Adopt the record in file @name for object @id (@a: the arena of an old
 * store, or NULL).  -EBADMSG if the record must be set aside, another
 * negative errno if the open must fail.
 */
static int adopt_one(struct store *s, const char *name, uint64_t id, const struct arena *a)
{
	struct store_obj *o;
	struct rec rec;
	uint8_t *buf = NULL;
	size_t len = 0;
	int r;

	r = rec_read(s, name, a ? a->pages : 0, &buf, &len);
	if (r < 0)
		return r;
	r = rec_decode(buf, len, a ? a->pages : 0, &rec);
	if (r == 0 && rec.id != id)
		r = -EBADMSG;
	if (r == 0 && rec.version == REC_VERSION_ARENA && !a)
		r = -EBADMSG; /* its arena is gone */
	if (r < 0)
		goto free_buf;

	o = store_obj_new_i(s, id);
	if (!o) {
		r = -ENOMEM;
		goto free_buf;
	}
	/* single threaded: nobody can see @o yet */
	atomic_store_explicit(&o->size, rec.size, memory_order_relaxed);
	o->mtime_ns = rec.mtime_ns;
	memcpy(o->csum, rec.csum, OBJFS_CSUM_LEN);
	if (rec.path_len) {
		/* not strndup: the path ends the record, unterminated */
		o->path = malloc(rec.path_len + 1);
		if (!o->path) {
			r = -ENOMEM;
			goto free_obj;
		}
		memcpy(o->path, rec.path, rec.path_len);
		o->path[rec.path_len] = '\0';
	}
	if (rec.version == REC_VERSION_ARENA) {
		/* charged as it grew, as an object not yet in the table */
		r = upgrade_one(o, &rec, a);
		if (r == 0)
			s->draining -= o->alloc;
	} else {
		/* a file adopted as it was may still be mapped by a process
		 * of an earlier mount: never handed to another object */
		r = store_file_adopt_i(o, s->verify ? rec.csum : NULL);
		if (r == 0) {
			s->used += o->alloc;
			s->extra += o->extra;
		}
	}
	if (r < 0)
		goto free_obj;
	atomic_store_explicit(&o->sealed, true, memory_order_relaxed);
	r = store_table_add_i(s, o);
	if (r < 0) {
		s->used -= o->alloc;
		s->extra -= o->extra;
		goto free_obj;
	}
	free(buf);
	return 0;

free_obj:
	if (rec.version == REC_VERSION_ARENA && o->has_file) {
		/* the half-made copy; the arena still has the bytes */
		char fname[STORE_ID_HEX + 1];

		store_file_name_i(id, fname);
		unlinkat(s->data_fd, fname, 0);
		s->used -= o->alloc;
		s->draining -= o->alloc;
	}
	store_obj_free_i(o);
free_buf:
	free(buf);
	return r;
}

static void set_aside(struct store *s, const char *name)
{
	char bad[NAME_MAX + 1];
	int r = -ENAMETOOLONG;

	s->bad_records++;
	if ((size_t)snprintf(bad, sizeof(bad), "%s" STORE_BAD_SUFFIX, name) < sizeof(bad))
		r = renameat(s->objects_fd, name, s->objects_fd, bad) < 0 ? -errno : 0;
	if (r < 0)
		log_debug("store: cannot set aside bad record '%s': %s", name, strerror(-r));
	else
		log_debug("store: bad record '%s' set aside", name);
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The names in directory @dir_fd, sorted; deletes temp files on the way.
 * Caller frees each name and the array.
 */
static int list_dir(int dir_fd, char ***ret_names, size_t *ret_n)
{
	char **names = NULL, **grown;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((errno = 0, de = readdir(d))) {
		if (!strncmp(de->d_name, STORE_TMP_PREFIX, strlen(STORE_TMP_PREFIX))) {
			unlinkat(dir_fd, de->d_name, 0);
			continue;
		}
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			grown = realloc(names, cap * sizeof(*names));
			if (!grown) {
				r = -ENOMEM;
				break;
			}
			names = grown;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	if (r == 0 && errno)
		r = -errno;
	closedir(d);
	if (r < 0) {
		while (n)
			free(names[--n]);
		free(names);
		return r;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	*ret_names = names;
	*ret_n = n;
	return 0;
}

/* Map DIR/arena, if the store has the old layout.  0 (a->base NULL if not). */
static int arena_open(struct store *s, struct arena *a, size_t *ret_len)
{
	struct stat st;
	void *p;
	int fd;

	fd = openat(s->dir_fd, "arena", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	p = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0) : NULL;
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	a->base = p;
	a->pages = (uint64_t)st.st_size / STORE_PAGE;
	*ret_len = (size_t)st.st_size;
	log_info("store: converting the arena layout: every object gets a file of its own");
	return 0;
}

int store_catalog_adopt_i(struct store *s, uint64_t *ret_bytes)
{
	struct arena a = {NULL, 0};
	char **names = NULL;
	uint64_t id;
	size_t n = 0, i, alen = 0;
	bool old;
	int r;

	r = arena_open(s, &a, &alen);
	if (r < 0)
		return r;
	old = alen > 0 || a.pages;
	r = list_dir(s->objects_fd, &names, &n);
	for (i = 0; r == 0 && i < n; i++) {
		if (has_suffix(names[i], STORE_BAD_SUFFIX))
			continue;
		if (rec_name_parse(names[i], &id) < 0)
			r = -EBADMSG;
		else
			r = adopt_one(s, names[i], id, old ? &a : NULL);
		if (r == -EBADMSG) {
			set_aside(s, names[i]);
			r = 0;
		}
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (a.base)
		munmap((void *)a.base, alen);
	/* every record is converted or set aside: the arena can go */
	if (r == 0 && old && unlinkat(s->dir_fd, "arena", 0) < 0)
		r = -errno;
	if (r < 0)
		return r;
	*ret_bytes = s->used;
	return 0;
}

/* ---- notes ---- */

static int note_key_check(const char *key)
{
	size_t i;

	if (!key)
		return -EINVAL;
	for (i = 0; key[i]; i++) {
		char c = key[i];

		if (i >= NOTE_KEY_MAX ||
		    !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return -EINVAL;
	}
	return i ? 0 : -EINVAL;
}

int store_note_get(struct store *s, const char *key, char *buf, size_t len)
{
	size_t n;
	int fd, r;

	r = note_key_check(key);
	if (r < 0)
		return r;
	if (!buf || !len)
		return -EINVAL;
	fd = openat(s->notes_fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	r = read_upto(fd, buf, len, &n);
	close(fd);
	if (r < 0)
		return r;
	if (n == len)
		return -ERANGE;
	buf[n] = '\0';
	return 0;
}

int store_note_set(struct store *s, const char *key, const char *value)
{
	char tmp[sizeof(STORE_TMP_PREFIX) + NOTE_KEY_MAX];
	size_t len;
	int r;

	r = note_key_check(key);
	if (r < 0)
		return r;
	if (!value)
		return -EINVAL;
	len = strnlen(value, STORE_NOTE_MAX + 1);
	if (len > STORE_NOTE_MAX)
		return -E2BIG;
	snprintf(tmp, sizeof(tmp), STORE_TMP_PREFIX "%s", key);
	pthread_mutex_lock(&s->note_lock);
	r = write_atomic(s->notes_fd, tmp, key, value, len);
	pthread_mutex_unlock(&s->note_lock);
	return r;
}

void store_notes_cleanup_i(struct store *s)
{
	char **names = NULL;
	size_t n = 0;

	/* listing deletes the temp files */
	if (list_dir(s->notes_fd, &names, &n) < 0)
		return;
	while (n)
		free(names[--n]);
	free(names);
}
