/*
 * store_catalog_old: the catalog of earlier versions, read once to
 * convert it to the catalog log (store_catalog.c).
 *
 * objects/<16 hex digits> was the catalog record of one sealed object
 * (objfs before the catalog log).  Binary, little-endian:
 *
 *   u32 magic "OBJC", u32 version (2)
 *   u64 id, u64 size, i64 mtime_ns, u8 csum[16]  (xxh3-128, canonical)
 *   u32 path_len (<= 4095), u32 n_ext (0)
 *   path_len bytes of path (no NUL)
 *   n_ext times { u64 arena page, u64 npages }   (version 1 only)
 *   u64 XXH3_64bits of everything before it
 *
 * At open, after the log is replayed, every record whose id the log does
 * not have is adopted as it was: the file must decode exactly, the hash
 * match, the id match the name, and the object's file data/<id> be there
 * and exactly its size (and its bytes match the checksum).  A record that
 * fails is renamed "<name>.bad" and counted.  The log is then written
 * whole (store_catalog.c), and only then are the converted records
 * deleted (store_catalog_old_done_i()), so a crash on the way converts
 * again at the next open.
 *
 * Version 1 records come from the arena layout of objfs 0.x: every
 * object's bytes in one file, DIR/arena, at the extents its record lists.
 * If DIR/arena is there, each such object is copied into a file of its
 * own and checked against its checksum; the arena is deleted once the log
 * holds every record converted.
 */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "xxh.h"

#define REC_MAGIC 0x434a424fU /* "OBJC" */
#define REC_VERSION 2U
#define REC_VERSION_ARENA 1U
#define REC_HDR 56 /* bytes before the path */
#define REC_EXT 16 /* bytes per extent */
#define REC_TAIL 8 /* trailing hash */
#define REC_PATH_MAX (OBJFS_PATH_MAX - 1)

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
	r = store_read_upto_i(fd, buf, (size_t)st.st_size + 1, &n);
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
static int upgrade_copy(struct store_obj *o, const struct rec *rec, const struct arena *a);

static int upgrade_one(struct store_obj *o, const struct rec *rec, const struct arena *a)
{
	/* written as a pending object is: its mapping's length lives here
	 * until the freeze */
	struct store_writing w = {0};
	int r;

	o->w = &w;
	r = upgrade_copy(o, rec, a);
	if (r < 0 && o->map) {
		munmap(o->map, w.map_len);
		o->map = NULL;
	}
	o->w = NULL;
	if (r == 0) {
		store_file_rest_i(o); /* at rest: no mapping */
		o->recorded = true;   /* the log gets it (store_catalog_adopt_i()) */
	}
	return r;
}

static int upgrade_copy(struct store_obj *o, const struct rec *rec, const struct arena *a)
{
	uint8_t csum[OBJFS_CSUM_LEN];
	char name[STORE_ID_HEX + 1];
	uint64_t done = 0, i;
	int r;

	/* a file of this id can only be a copy a conversion cut short left
	 * (the log does not have the id): the arena still has the bytes */
	store_file_name_i(o->id, name);
	unlinkat(obj_store(o)->data_fd, name, 0);
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
		store_file_freeze_i(o);
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
		char *path = malloc(rec.path_len + 1);

		if (!path) {
			r = -ENOMEM;
			goto free_obj;
		}
		memcpy(path, rec.path, rec.path_len);
		path[rec.path_len] = '\0';
		o->path_ref = (uintptr_t)path; /* the log gets it at open */
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
	o->recorded = true; /* the log gets it (store_catalog_adopt_i()) */
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

int store_catalog_old_adopt_i(struct store *s, struct store_old *ret)
{
	struct arena a = {NULL, 0};
	struct store_obj *o;
	char **names = NULL;
	uint64_t id;
	size_t n = 0, i, k = 0, alen = 0, converted = 0;
	int r;

	memset(ret, 0, sizeof(*ret));
	r = arena_open(s, &a, &alen);
	if (r < 0)
		return r;
	ret->arena = alen > 0 || a.pages;
	r = store_list_dir_i(s->objects_fd, &names, &n);
	for (i = 0; r == 0 && i < n; i++) {
		if (has_suffix(names[i], STORE_BAD_SUFFIX)) {
			free(names[i]);
			continue;
		}
		if (rec_name_parse(names[i], &id) < 0) {
			r = -EBADMSG;
		} else {
			/* left by a conversion that stopped before deleting
			 * it: the log has it, and the log is newer */
			o = store_tab_find_i(&s->table, id);
			r = o ? 0 : adopt_one(s, names[i], id, ret->arena ? &a : NULL);
			converted += !o && r == 0;
		}
		if (r == -EBADMSG) {
			set_aside(s, names[i]);
			free(names[i]);
			r = 0;
			continue;
		}
		names[k++] = names[i]; /* converted: deleted once the log holds it */
	}
	for (; i < n; i++)
		free(names[i]);
	if (a.base)
		munmap((void *)a.base, alen);
	ret->names = names;
	ret->n = k;
	if (converted)
		log_info("store: converting %zu catalog records to the catalog log", converted);
	return r;
}

void store_catalog_old_done_i(struct store *s, struct store_old *old, bool committed)
{
	size_t i;

	for (i = 0; i < old->n; i++) {
		if (committed)
			unlinkat(s->objects_fd, old->names[i], 0);
		free(old->names[i]);
	}
	free(old->names);
	/* every record is converted or set aside: the arena can go */
	if (committed && old->arena && unlinkat(s->dir_fd, "arena", 0) < 0)
		log_warn("store: cannot delete the converted arena: %s", strerror(errno));
	memset(old, 0, sizeof(*old));
}
