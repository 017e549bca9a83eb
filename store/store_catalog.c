/*
 * store_catalog: the catalog log and the notes beside the objects' files.
 *
 * DIR/catalog.log records the sealed objects the store keeps, so that a
 * restart adopts them: one text line per step (R an object sealed, P its
 * new path, D it is gone), appended with one write(2) to a descriptor
 * kept open, each line ending with its own hash.  This file appends to
 * the log, replays it at open (store_catalog_adopt_i()) and compacts it.
 * notes/<key> holds one small value, replaced atomically.  It also sets
 * up the directory itself: creates it and its subdirectories and takes
 * the flock on DIR/lock.  docs/design.md, "The catalog log", has the
 * lines, the replay and the compaction.
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

#include "log.h"
#include "xxh.h"

#define NOTE_KEY_MAX 64
#define LOG_NAME "catalog.log"
#define LOG_NEW LOG_NAME ".new"
#define LOG_BAD "catalog.bad"
#define LOG_HEADER "objfs-catalog 2\n"
/* before packed objects (store_pack.c): read, and written anew as 2, so
 * that an objfs that cannot read their lines refuses the log */
#define LOG_HEADER_V1 "objfs-catalog 1\n"
#define LOG_HEADER_PREFIX "objfs-catalog "
#define LOG_COMPACT_MIN 4096		 /* dead lines before a runtime compaction */
#define LOG_RETRY_NS (60 * 1000000000LL) /* after a compaction failed */
#define LOG_BAD_MAX 1000		 /* lines kept in catalog.bad per open */
/* the longest line: R, id, size, mtime, csum, a path escaped 3 to 1, hash */
#define LOG_LINE_MAX (64 + 3 * OBJFS_PATH_MAX + 64)

/* Lines that objects or lines of the log repeat (common/log.h): at most a
 * burst in 10 s. */
static struct log_ratelimit append_rl =
    LOG_RATELIMIT_INIT("short catalog log lines left in place", 10000, 10);
static struct log_ratelimit path_rl =
    LOG_RATELIMIT_INIT("catalog paths that could not be read", 10000, 100);
static struct log_ratelimit bad_rl = LOG_RATELIMIT_INIT("catalog log lines set aside", 10000, 10);

/* Write @buf to @dir_fd/@name through @tmp and rename(). */
static int write_atomic(int dir_fd, const char *tmp, const char *name, const void *buf, size_t len)
{
	int fd, r;

	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	r = util_write_full(fd, buf, len);
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
int store_read_upto_i(int fd, void *buf, size_t len, size_t *ret_n)
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

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The names in directory @dir_fd, sorted; deletes temp files on the way.
 * Caller frees each name and the array.
 */
int store_list_dir_i(int dir_fd, char ***ret_names, size_t *ret_n)
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

/* ---- lines of the log ---- */

static const char hex_digits[] = "0123456789abcdef";

/* Append " =<path>", %-escaped, to the line in @buf (*@n bytes). */
static void put_path(char *buf, size_t *n, const char *path)
{
	const unsigned char *p;

	buf[(*n)++] = ' ';
	buf[(*n)++] = '=';
	for (p = (const unsigned char *)path; *p; p++) {
		if (*p == '%' || *p <= ' ' || *p == 0x7f) {
			buf[(*n)++] = '%';
			buf[(*n)++] = hex_digits[*p >> 4];
			buf[(*n)++] = hex_digits[*p & 15];
		} else {
			buf[(*n)++] = (char)*p;
		}
	}
}

/* End the line in @buf (*@n bytes) with " <hash>\n". */
static void put_end(char *buf, size_t *n)
{
	uint64_t h = XXH3_64bits(buf, *n);

	*n += (size_t)snprintf(buf + *n, 19, " %016" PRIx64 "\n", h);
}

/* The R line of sealed @o with @path, in @buf (LOG_LINE_MAX bytes). */
static size_t line_rec(char *buf, const struct store_obj *o, const char *path)
{
	size_t n, i;

	n = (size_t)snprintf(buf, LOG_LINE_MAX, "R %016" PRIx64 " %" PRIu64 " %" PRId64 " ", o->id,
			     store_obj_size(o), o->mtime_ns);
	for (i = 0; i < OBJFS_CSUM_LEN; i++) {
		buf[n++] = hex_digits[o->csum[i] >> 4];
		buf[n++] = hex_digits[o->csum[i] & 15];
	}
	if (o->packed) {
		uint32_t no, off;

		store_pack_slot_i(o, &no, &off);
		n += (size_t)snprintf(buf + n, 24, " @%08" PRIx32 ":%08" PRIx32, no, off);
	}
	put_path(buf, &n, path);
	put_end(buf, &n);
	return n;
}

static size_t line_path(char *buf, uint64_t id, const char *path)
{
	size_t n = (size_t)snprintf(buf, LOG_LINE_MAX, "P %016" PRIx64, id);

	put_path(buf, &n, path);
	put_end(buf, &n);
	return n;
}

static size_t line_drop(char *buf, uint64_t id)
{
	size_t n = (size_t)snprintf(buf, LOG_LINE_MAX, "D %016" PRIx64, id);

	put_end(buf, &n);
	return n;
}

/* A parsed line. */
struct line {
	char kind; /* 'R', 'P', 'D' */
	uint64_t id, size;
	int64_t mtime_ns;
	uint8_t csum[OBJFS_CSUM_LEN];
	bool packed; /* in a slot of chunk @chunk at @off (store_pack.c) */
	uint32_t chunk, off;
	char path[OBJFS_PATH_MAX];
};

static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* A cursor over one line: each get_*() takes one field and the space
 * after it (none after the last); false once anything did not fit. */
struct cur {
	const char *p, *end;
	bool ok;
};

static void get_sep(struct cur *c)
{
	if (c->p < c->end) {
		if (*c->p == ' ')
			c->p++;
		else
			c->ok = false;
	}
}

static void get_hex(struct cur *c, unsigned digits, uint64_t *ret)
{
	uint64_t v = 0;
	unsigned i;
	int d;

	for (i = 0; i < digits; i++) {
		d = c->p < c->end ? hex_val(*c->p) : -1;
		if (d < 0) {
			c->ok = false;
			return;
		}
		v = v << 4 | (uint64_t)d;
		c->p++;
	}
	*ret = v;
	get_sep(c);
}

static void get_dec(struct cur *c, bool sign, uint64_t *ret, bool *ret_neg)
{
	uint64_t v = 0;
	unsigned n = 0;

	*ret_neg = false;
	if (sign && c->p < c->end && *c->p == '-') {
		*ret_neg = true;
		c->p++;
	}
	for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++, n++) {
		if (v > (UINT64_MAX - 9) / 10)
			c->ok = false;
		v = v * 10 + (uint64_t)(*c->p - '0');
	}
	if (!n)
		c->ok = false;
	*ret = v;
	get_sep(c);
}

static void get_path(struct cur *c, char *buf)
{
	size_t n = 0;
	int hi, lo;

	if (c->p >= c->end || *c->p != '=') {
		c->ok = false;
		return;
	}
	for (c->p++; c->p < c->end && *c->p != ' '; c->p++) {
		char ch = *c->p;

		if (ch == '%') {
			hi = c->end - c->p > 2 ? hex_val(c->p[1]) : -1;
			lo = c->end - c->p > 2 ? hex_val(c->p[2]) : -1;
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				c->ok = false;
				return;
			}
			ch = (char)(hi << 4 | lo);
			c->p += 2;
		}
		if (n + 1 >= OBJFS_PATH_MAX) {
			c->ok = false;
			return;
		}
		buf[n++] = ch;
	}
	buf[n] = '\0'; /* the last field: nothing may follow */
}

/* @n hex digits at @p into *@ret. */
static bool hex_n(const char *p, unsigned n, uint64_t *ret)
{
	uint64_t v = 0;
	int d;

	while (n--) {
		d = hex_val(*p++);
		if (d < 0)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*ret = v;
	return true;
}

/* A packed object's slot: "@<chunk, 8 hex digits>:<offset, 8>". */
static void get_slot(struct cur *c, struct line *l)
{
	uint64_t no, off;

	if (c->end - c->p < 18 || !hex_n(c->p + 1, 8, &no) || c->p[9] != ':' ||
	    !hex_n(c->p + 10, 8, &off)) {
		c->ok = false;
		return;
	}
	l->chunk = (uint32_t)no;
	l->off = (uint32_t)off;
	c->p += 18;
	get_sep(c);
}

/* Parse line @p of @len bytes (without its newline).  0 or -EBADMSG. */
static int line_parse(const char *p, size_t len, struct line *ret)
{
	struct cur c = {p, NULL, true};
	uint64_t h, mt, id;
	bool neg;
	unsigned i;
	int hi, lo;

	/* " <16 hex digits>" ends every line: the hash of what is before */
	if (len < 2 + 17 || p[len - 17] != ' ')
		return -EBADMSG;
	c.end = p + len;
	c.p = p + len - 16;
	get_hex(&c, 16, &h);
	if (!c.ok || h != XXH3_64bits(p, len - 17))
		return -EBADMSG;
	c.p = p + 2;
	c.end = p + len - 17;
	ret->kind = p[0];
	if (p[1] != ' ')
		return -EBADMSG;
	get_hex(&c, 16, &id);
	ret->id = id;
	switch (ret->kind) {
	case 'R':
		get_dec(&c, false, &ret->size, &neg);
		get_dec(&c, true, &mt, &neg);
		if (mt > (uint64_t)INT64_MAX + neg)
			c.ok = false;
		/* as unsigned: -2^63 has no positive counterpart */
		ret->mtime_ns = (int64_t)(neg ? 0 - mt : mt);
		for (i = 0; c.ok && i < OBJFS_CSUM_LEN; i++, c.p += 2) {
			hi = c.end - c.p >= 2 ? hex_val(c.p[0]) : -1;
			lo = c.end - c.p >= 2 ? hex_val(c.p[1]) : -1;
			if (hi < 0 || lo < 0)
				c.ok = false;
			else
				ret->csum[i] = (uint8_t)(hi << 4 | lo);
		}
		if (c.ok)
			get_sep(&c);
		ret->packed = c.ok && c.p < c.end && *c.p == '@';
		if (ret->packed)
			get_slot(&c, ret);
		get_path(&c, ret->path);
		if (ret->size > STORE_SIZE_MAX)
			c.ok = false;
		break;
	case 'P':
		get_path(&c, ret->path);
		break;
	case 'D':
		break;
	default:
		return -EBADMSG;
	}
	return c.ok && c.p == c.end ? 0 : -EBADMSG;
}

/* ---- appending (s->log_lock held) ---- */

/* obj->path_ref of a path in the log line at @off. */
static uintptr_t path_at(uint64_t off)
{
	return (uintptr_t)(off << 1 | 1);
}

/* Append one line: whole or not at all (a short write is cut back). */
static int log_append(struct store *s, const char *line, size_t len)
{
	ssize_t n = write(s->log_fd, line, len);
	int r;

	if (n == (ssize_t)len) {
		s->log_size += len;
		s->log_lines++;
		return 0;
	}
	r = n < 0 ? -errno : -ENOSPC;
	if (n > 0 && ftruncate(s->log_fd, (off_t)s->log_size) < 0) {
		struct stat st;

		log_msg_limited(&append_rl, LOGL_WARN,
				"store: cannot cut a short line off the catalog log: %s",
				strerror(errno));
		/* end the fragment, so that the next line is not read as part
		 * of it (a damaged line, set aside at open), and go on from
		 * the file's end: an object's path is read at the offset of
		 * its line */
		if (write(s->log_fd, "\n", 1) == 1)
			s->log_lines++;
		if (fstat(s->log_fd, &st) == 0)
			s->log_size = (uint64_t)st.st_size;
		s->log_dirty = true; /* the next compaction drops the fragment */
	}
	return r;
}

int store_catalog_write_i(struct store_obj *o, const char *path)
{
	struct store *s = obj_store(o);
	uint64_t off;
	char *buf;
	size_t n;
	int r;

	if (strnlen(path, OBJFS_PATH_MAX) >= OBJFS_PATH_MAX)
		return -ENAMETOOLONG;
	buf = malloc(LOG_LINE_MAX);
	if (!buf)
		return -ENOMEM;
	pthread_mutex_lock(&s->log_lock);
	n = o->recorded ? line_path(buf, o->id, path) : line_rec(buf, o, path);
	off = s->log_size;
	r = log_append(s, buf, n);
	if (r == 0) {
		if (!o->recorded)
			s->log_live++;
		o->recorded = true;
		free(obj_path_str(o));
		o->path_ref = path_at(off);
	}
	pthread_mutex_unlock(&s->log_lock);
	free(buf);
	return r;
}

/* Read @o's path, which is in the log (o->path_ref), into @l (l->path),
 * through @buf (LOG_LINE_MAX bytes).  s->log_lock held.  0, -EBADMSG if
 * the line there is not @o's, or -errno. */
static int path_read_locked(struct store *s, const struct store_obj *o, struct line *l, char *buf)
{
	off_t off = (off_t)(o->path_ref >> 1);
	ssize_t n;
	char *nl;

	/* most lines are short: the first read is too */
	n = pread(s->log_fd, buf, 512, off);
	if (n == 512 && !memchr(buf, '\n', 512))
		n = pread(s->log_fd, buf, LOG_LINE_MAX, off);
	if (n < 0)
		return -errno;
	nl = memchr(buf, '\n', (size_t)n);
	if (!nl || line_parse(buf, (size_t)(nl - buf), l) < 0 || l->id != o->id ||
	    (l->kind != 'R' && l->kind != 'P'))
		return -EBADMSG;
	return 0;
}

/* Read @o's path, which is in the log, from the log mapped at @map (@len
 * bytes) into @l (l->path).  0 or -EBADMSG. */
static int path_mapped(const char *map, size_t len, const struct store_obj *o, struct line *l)
{
	uint64_t off = o->path_ref >> 1;
	const char *nl;

	if (!(o->path_ref & 1) || off >= len)
		return -EBADMSG;
	nl = memchr(map + off, '\n', (size_t)min_u64(len - off, LOG_LINE_MAX));
	if (!nl || line_parse(map + off, (size_t)(nl - (map + off)), l) < 0 || l->id != o->id ||
	    (l->kind != 'R' && l->kind != 'P'))
		return -EBADMSG;
	return 0;
}

/* @o's path into @l->path, wherever it is; "" (logged) if the log lost
 * it.  s->log_lock held. */
static void path_get_locked(struct store *s, const struct store_obj *o, struct line *l, char *buf)
{
	const char *str = obj_path_str(o);
	int r;

	if (!(o->path_ref & 1)) {
		snprintf(l->path, sizeof(l->path), "%s", str ? str : "");
		return;
	}
	r = path_read_locked(s, o, l, buf);
	if (r < 0) {
		log_msg_limited(&path_rl, LOGL_ERROR,
				"store: the catalog log has no path of object %016" PRIx64
				" at offset %" PRIu64 ": %s",
				o->id, (uint64_t)(o->path_ref >> 1), strerror(-r));
		l->path[0] = '\0';
	}
}

void store_catalog_path_i(struct store_obj *o, char *buf, size_t len)
{
	struct store *s = obj_store(o);
	struct line *l = NULL;
	char *line = NULL;
	const char *str;
	size_t n;

	pthread_mutex_lock(&s->log_lock);
	if (!(o->path_ref & 1)) {
		str = obj_path_str(o);
		snprintf(buf, len, "%s", str ? str : "");
	} else if ((l = malloc(sizeof(*l))) && (line = malloc(LOG_LINE_MAX))) {
		path_get_locked(s, o, l, line);
		n = strnlen(l->path, len - 1);
		memcpy(buf, l->path, n);
		buf[n] = '\0';
	} else {
		log_msg_limited(&path_rl, LOGL_ERROR,
				"store: no memory to read the path of object %016" PRIx64, o->id);
		buf[0] = '\0';
	}
	pthread_mutex_unlock(&s->log_lock);
	free(line);
	free(l);
}

/* Make @o's path a string of its own (NULL, "", if memory or the log
 * fails).  s->log_lock held. */
static void path_to_str_locked(struct store *s, struct store_obj *o)
{
	struct line *l = malloc(sizeof(*l));
	char *line = malloc(LOG_LINE_MAX), *str = NULL;

	if (l && line) {
		path_get_locked(s, o, l, line);
		str = l->path[0] ? strdup(l->path) : NULL;
	}
	o->path_ref = (uintptr_t)str;
	free(line);
	free(l);
}

void store_catalog_set_path_i(struct store_obj *o, char *path)
{
	pthread_mutex_lock(&obj_store(o)->log_lock);
	free(obj_path_str(o));
	o->path_ref = (uintptr_t)path;
	pthread_mutex_unlock(&obj_store(o)->log_lock);
}

int store_catalog_remove_i(struct store_obj *o)
{
	struct store *s = obj_store(o);
	char buf[64];
	size_t n;
	int r = 0;

	pthread_mutex_lock(&s->log_lock);
	/* once dropped, a compaction may leave its line behind: the path
	 * becomes a string of its own for whoever still asks */
	if (o->path_ref & 1)
		path_to_str_locked(s, o);
	if (o->recorded) {
		n = line_drop(buf, o->id);
		r = log_append(s, buf, n);
		if (r == 0) {
			o->recorded = false;
			s->log_live--;
		} else {
			/* its R stays in the log: the next compaction, which
			 * keeps only objects in the store, drops it */
			s->log_dirty = true;
		}
	}
	pthread_mutex_unlock(&s->log_lock);
	return r;
}

/* Keep @len bytes at @p (a line the store cannot use) in DIR/catalog.bad. */
static void keep_bad(struct store *s, const char *p, size_t len)
{
	int fd;

	/* counted, but kept only so far: it shares the catalog's room */
	if (s->bad_records++ >= LOG_BAD_MAX)
		return;
	fd = openat(s->dir_fd, LOG_BAD, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		    0600);
	if (fd < 0)
		return;
	if (util_write_full(fd, p, len) < 0 ||
	    (len && p[len - 1] != '\n' && util_write_full(fd, "\n", 1) < 0))
		log_debug("store: cannot keep a bad catalog line in %s", LOG_BAD);
	close(fd);
}

/* ---- compaction ---- */

/*
 * Write the live objects (those recorded) to a new log and put it in
 * place.  s->log_lock held: nothing is appended meanwhile, and every
 * object's recorded flag and path stay as they are.  The objects go to
 * *@ret_objs (*@ret_n, each with a reference) for the caller to drop
 * once it has let go of the lock.
 */
static int log_compact(struct store *s, struct store_obj ***ret_objs, size_t *ret_n)
{
	enum { CHUNK = 1 << 20 };
	struct store_obj **v = NULL, *o;
	size_t n = 0, i, used, at = 0, old_len = 0;
	uint64_t bytes = 0, *noff = NULL;
	char *buf = NULL, *line = NULL, *old = NULL;
	struct line *l = NULL;
	struct stat st;
	int fd = -1, r = 0;

	/* coldest first, so that adoption (which pushes each object onto
	 * the use list in log order) keeps the order of use; the known
	 * only copies last, as the hottest: that mark is not kept, and
	 * eviction would otherwise meet them first after a restart */
	pthread_mutex_lock(&s->lock);
	v = malloc((s->table.count + 1) * sizeof(*v));
	if (v) {
		for (o = store_tab_next_i(&s->table, NULL, &at); o;
		     o = store_tab_next_i(&s->table, o, &at))
			if (o->recorded && o->lru_list == LRU_NONE)
				v[n++] = store_obj_ref(o);
		for (o = s->lru_cold; o; o = o->lprev)
			if (o->recorded)
				v[n++] = store_obj_ref(o);
		for (o = s->sole_tail; o; o = o->lprev)
			if (o->recorded)
				v[n++] = store_obj_ref(o);
	}
	pthread_mutex_unlock(&s->lock);
	/* the paths, from the old log: mapped once, not read line by line */
	if (fstat(s->log_fd, &st) == 0 && st.st_size > 0) {
		old_len = (size_t)st.st_size;
		old = mmap(NULL, old_len, PROT_READ, MAP_PRIVATE, s->log_fd, 0);
		if (old == MAP_FAILED)
			old = NULL;
	}
	*ret_objs = v;
	*ret_n = n;
	buf = malloc(CHUNK + LOG_LINE_MAX);
	line = malloc(LOG_LINE_MAX);
	l = malloc(sizeof(*l));
	noff = malloc((n + 1) * sizeof(*noff));
	if (!v || !buf || !line || !l || !noff) {
		r = -ENOMEM;
		goto out;
	}
	/* kept as the log's descriptor once renamed: nothing can fail
	 * between the rename and appending to the new log */
	fd = openat(s->dir_fd, LOG_NEW,
		    O_RDWR | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	used = strlen(LOG_HEADER);
	memcpy(buf, LOG_HEADER, used);
	for (i = 0; r == 0 && i <= n; i++) {
		if (i < n) {
			/* from the old log (still s->log_fd) */
			if (!old || path_mapped(old, old_len, v[i], l) < 0)
				path_get_locked(s, v[i], l, line);
			noff[i] = bytes + used;
			used += line_rec(buf + used, v[i], l->path);
		}
		if (used >= CHUNK || i == n) {
			r = util_write_full(fd, buf, used);
			bytes += used;
			used = 0;
		}
	}
	if (r == 0 && renameat(s->dir_fd, LOG_NEW, s->dir_fd, LOG_NAME) < 0)
		r = -errno;
	if (r < 0)
		goto out;
	close(s->log_fd);
	s->log_fd = fd;
	fd = -1;
	s->log_dirty = false;
	s->log_size = bytes;
	s->log_lines = n;
	s->log_live = n;
	s->compactions++;
	/* paths are read from the new log now */
	for (i = 0; i < n; i++) {
		free(obj_path_str(v[i]));
		v[i]->path_ref = path_at(noff[i]);
	}
out:
	if (fd >= 0) {
		close(fd);
		unlinkat(s->dir_fd, LOG_NEW, 0);
	}
	if (old)
		munmap(old, old_len);
	free(noff);
	free(line);
	free(l);
	free(buf);
	return r;
}

static void unref_all(struct store_obj **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		store_obj_unref(v[i]);
	free(v);
}

/* Compact now.  No lock held. */
static int compact(struct store *s)
{
	struct store_obj **v = NULL;
	size_t n = 0;
	int r;

	pthread_mutex_lock(&s->log_lock);
	r = log_compact(s, &v, &n);
	pthread_mutex_unlock(&s->log_lock);
	unref_all(v, n);
	return r;
}

void store_tick(struct store *s)
{
	uint64_t dead, live;
	int r;

	bool dirty;

	pthread_mutex_lock(&s->log_lock);
	live = s->log_live;
	dead = s->log_lines - live;
	dirty = s->log_dirty;
	pthread_mutex_unlock(&s->log_lock);
	if (dead < max_u64(live, LOG_COMPACT_MIN) && !dirty)
		return;
	if (util_mono_ns() < s->log_retry_ns)
		return; /* it failed a moment ago (a full filesystem) */
	r = compact(s);
	if (r < 0) {
		log_warn("store: cannot compact the catalog log (%" PRIu64
			 " dead lines): %s; trying again in a minute",
			 dead, strerror(-r));
		s->log_retry_ns = util_mono_ns() + LOG_RETRY_NS;
	} else
		log_debug("store: catalog log compacted: %" PRIu64 " lines dropped", dead);
}

/* ---- adoption ---- */

/* The objects being replayed: by id, and in the order of their R lines
 * (through obj->lprev/lnext, which are theirs until they are adopted). */
struct replay {
	struct store_tab tab;
	struct store_obj *head, *tail;
};

static void replay_drop(struct replay *pend, struct store_obj *o)
{
	store_tab_del_i(&pend->tab, o);
	store_list_del_i(&pend->head, &pend->tail, o);
}

static void replay_free(struct replay *pend)
{
	struct store_obj *o, *next;

	for (o = pend->head; o; o = next) {
		next = o->lnext;
		store_obj_free_i(o);
	}
	store_tab_free_i(&pend->tab);
	pend->head = pend->tail = NULL;
}

/* Apply parsed line @l to the objects being replayed (@pend). */
static int replay_one(struct store *s, struct replay *pend, const struct line *l, uint64_t off)
{
	struct store_obj *o;

	o = store_tab_find_i(&pend->tab, l->id);
	if (l->kind == 'P') {
		if (!o)
			return 0; /* its object is gone */
		free(obj_path_str(o));
		o->path_ref = path_at(off);
		return 0;
	}
	if (o) {
		replay_drop(pend, o);
		store_obj_free_i(o);
	}
	if (l->kind == 'D')
		return 0;
	o = store_obj_new_i(s, l->id);
	if (!o)
		return -ENOMEM;
	atomic_store_explicit(&o->size, l->size, memory_order_relaxed);
	o->mtime_ns = l->mtime_ns;
	memcpy(o->csum, l->csum, OBJFS_CSUM_LEN);
	o->path_ref = path_at(off); /* read from the log when asked */
	o->recorded = true;
	if (l->packed) {
		/* its slot, kept in alloc until adopted (store_pack_slot_i()) */
		o->packed = true;
		o->alloc = (uint64_t)l->chunk << 32 | l->off;
	}
	if (store_tab_add_i(&pend->tab, o) < 0) {
		store_obj_free_i(o);
		return -ENOMEM;
	}
	o->lprev = pend->tail;
	if (pend->tail)
		pend->tail->lnext = o;
	else
		pend->head = o;
	pend->tail = o;
	return 0;
}

/*
 * Read the log into @pend.  *@ret_dirty if it should be written anew (a
 * bad or torn line, a header to write); *@ret_end is where its last whole
 * line ends.  0 or a negative errno that must fail the open.
 */
static int log_replay(struct store *s, struct replay *pend, bool *ret_dirty, uint64_t *ret_end)
{
	const char *map, *p, *end, *nl;
	struct line *l = NULL;
	struct stat st;
	size_t hlen = strlen(LOG_HEADER), plen = strlen(LOG_HEADER_PREFIX);
	int r = 0;

	if (fstat(s->log_fd, &st) < 0)
		return -errno;
	if (st.st_size == 0) {
		*ret_dirty = true; /* a new store: the header goes first */
		return 0;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, s->log_fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	l = malloc(sizeof(*l));
	if (!l) {
		r = -ENOMEM;
		goto out;
	}
	p = map;
	end = map + st.st_size;
	if ((size_t)(end - p) >= hlen && !memcmp(p, LOG_HEADER_V1, hlen)) {
		p += hlen;
		*ret_dirty = true; /* compacted at once, under the new header */
	} else if ((size_t)(end - p) >= plen && !memcmp(p, LOG_HEADER_PREFIX, plen) &&
		   ((size_t)(end - p) < hlen || memcmp(p, LOG_HEADER, hlen))) {
		nl = memchr(p, '\n', (size_t)(end - p));
		log_error("store: the catalog log begins '%.*s': written by a newer objfs, which "
			  "this one cannot read",
			  (int)(nl ? nl - p : 20), p);
		r = -EPROTONOSUPPORT;
		goto out;
	}
	if ((size_t)(end - p) >= hlen && !memcmp(p, LOG_HEADER, hlen))
		p += hlen;
	else
		*ret_dirty = true; /* its first line is not the header: a bad line */
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl) {
			/* cut short by a crash: never acknowledged */
			log_warn("store: catalog log ends with a line cut short (%zu bytes): "
				 "dropped",
				 (size_t)(end - p));
			*ret_dirty = true;
			break;
		}
		s->log_lines++;
		if (line_parse(p, (size_t)(nl - p), l) < 0) {
			log_msg_limited(&bad_rl, LOGL_WARN,
					"store: catalog log line %" PRIu64
					" is damaged: set aside in "
					"%s",
					s->log_lines, LOG_BAD);
			keep_bad(s, p, (size_t)(nl - p) + 1);
			*ret_dirty = true;
		} else {
			r = replay_one(s, pend, l, (uint64_t)(p - map));
			if (r < 0)
				break;
		}
		p = nl + 1;
	}
	*ret_end = (uint64_t)(p - map);
out:
	free(l);
	munmap((void *)map, (size_t)st.st_size);
	return r;
}

/* Adopt the replayed objects whose files are whole; the others are bad
 * records.  In log order. */
/* Replayed @o is a bad record (@why): its line goes to catalog.bad, and
 * @o is freed.  *@buf and *@path are the caller's, to be freed. */
static void adopt_bad(struct store *s, struct store_obj *o, const char *why, char **buf,
		      char **path)
{
	if (!*buf)
		*buf = malloc(LOG_LINE_MAX);
	if (!*path)
		*path = malloc(OBJFS_PATH_MAX);
	log_msg_limited(&bad_rl, LOGL_WARN,
			"store: object %016" PRIx64 " of the catalog log %s: set aside in %s",
			o->id, why, LOG_BAD);
	if (*buf && *path) {
		store_catalog_path_i(o, *path, OBJFS_PATH_MAX);
		keep_bad(s, *buf, line_rec(*buf, o, *path));
	} else {
		s->bad_records++;
	}
	store_obj_free_i(o);
}

static int adopt_replayed(struct store *s, struct replay *pend, bool *ret_dirty)
{
	struct store_obj *o, *prev;
	char *buf = NULL, *path = NULL;
	int r = 0;

	/* the slots of packed objects, the last line first: a slot is used
	 * again only once its object is gone, so an earlier line that names
	 * it is an object whose D line was lost */
	for (o = pend->tail; o; o = prev) {
		prev = o->lprev;
		if (o->packed && store_pack_claim_i(o) < 0) {
			replay_drop(pend, o);
			adopt_bad(s, o, "names a slot it does not have", &buf, &path);
			*ret_dirty = true;
		}
	}
	while ((o = pend->head)) {
		replay_drop(pend, o);
		if (r == 0 && o->packed)
			r = store_pack_adopt_i(o, s->verify ? o->csum : NULL);
		else if (r == 0)
			r = store_file_adopt_i(o, s->verify ? o->csum : NULL);
		if (r == -EBADMSG) {
			adopt_bad(s, o, "has no whole file", &buf, &path);
			*ret_dirty = true;
			r = 0;
			continue;
		}
		if (r == 0) {
			atomic_store_explicit(&o->sealed, true, memory_order_relaxed);
			s->used += o->alloc;
			s->extra += o->extra;
			r = store_table_add_i(s, o);
			if (r == 0) {
				s->log_live++;
				continue;
			}
			s->used -= o->alloc;
			s->extra -= o->extra;
		}
		store_obj_free_i(o);
	}
	free(path);
	free(buf);
	return r;
}

int store_catalog_adopt_i(struct store *s, uint64_t *ret_bytes)
{
	struct replay pend = {0};
	struct store_old old = {0};
	uint64_t end = 0;
	bool dirty = false;
	int r;

	unlinkat(s->dir_fd, LOG_NEW, 0); /* a compaction a crash cut short */
	s->log_fd =
	    openat(s->dir_fd, LOG_NAME, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->log_fd < 0)
		return -errno;
	r = log_replay(s, &pend, &dirty, &end);
	if (r == 0)
		r = adopt_replayed(s, &pend, &dirty);
	replay_free(&pend);
	if (r == 0)
		r = store_catalog_old_adopt_i(s, &old);
	/* the log becomes what was adopted, before the old records go */
	if (r == 0 && (dirty || old.n || old.arena || s->log_lines - s->log_live > s->log_live)) {
		r = compact(s);
		/* only a conversion (or a new log) needs it now: otherwise
		 * the tick compacts once the filesystem has room again */
		if (r < 0 && !old.n && !old.arena && end) {
			log_warn("store: cannot compact the catalog log at open (%s); trying "
				 "again later",
				 strerror(-r));
			s->log_dirty = true;
			r = 0;
			/* a line cut short goes, which needs no room */
			if (ftruncate(s->log_fd, (off_t)end) < 0)
				r = -errno;
		}
	}
	store_catalog_old_done_i(s, &old, r == 0);
	if (r < 0)
		return r;
	if (s->log_size == 0) {
		struct stat st;

		if (fstat(s->log_fd, &st) == 0)
			s->log_size = (uint64_t)st.st_size;
	}
	s->compactions = 0;	/* counted from here: at runtime */
	store_pack_settle_i(s); /* charges the chunks' pages */
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
	r = store_read_upto_i(fd, buf, len, &n);
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
	if (store_list_dir_i(s->notes_fd, &names, &n) < 0)
		return;
	while (n)
		free(names[--n]);
	free(names);
}
