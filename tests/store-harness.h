/*
 * store-harness.h: what the store's unit test programs share: private
 * store directories under /dev/shm, opening stores, test patterns, and
 * the catalog record layout (store/store_catalog.c) for the cases that
 * edit records between a close and a reopen.
 */
#ifndef OBJFS_STORE_HARNESS_H
#define OBJFS_STORE_HARNESS_H

#pragma GCC diagnostic ignored "-Wunused-function"

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "tap.h"
#include "util.h"
#include "xxh.h"

#define MiB (1024ULL * 1024)
#define PG STORE_PAGE

/* record layout (store/store_catalog.c) */
#define REC_ID 8
#define REC_SIZE 16
#define REC_PATH_LEN 48
#define REC_N_EXT 52
#define REC_HDR 56

struct tdir {
	char root[64];
	char dir[96];
};

static void tdir_init(struct tdir *t)
{
	strcpy(t->root, "/dev/shm/objfs-test-store-XXXXXX");
	if (!mkdtemp(t->root)) {
		perror("mkdtemp");
		exit(1);
	}
	/* a subdirectory, so that store_open() has to create it */
	snprintf(t->dir, sizeof(t->dir), "%s/s", t->root);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void tdir_release(struct tdir *t)
{
	nftw(t->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static struct store *open_store(const struct tdir *t, uint64_t cap, bool verify, int *ret_err,
				uint64_t *ret_detail)
{
	struct store_config cfg = {.dir = t->dir, .capacity = cap, .verify = verify};
	uint64_t detail = 0;
	int err = 0;
	struct store *s = store_open(&cfg, &err, &detail);

	if (ret_err)
		*ret_err = err;
	if (ret_detail)
		*ret_detail = detail;
	return s;
}

static struct store *must_open(const struct tdir *t, uint64_t cap, bool verify)
{
	int err = 0;
	struct store *s = open_store(t, cap, verify, &err, NULL);

	if (!s) {
		fprintf(stderr, "store_open %s: %s\n", t->dir, strerror(-err));
		exit(1);
	}
	return s;
}

static void fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	size_t i;

	for (i = 0; i < len; i++) {
		uint64_t x = (off + i) * 0x9e3779b97f4a7c15ULL ^ seed * 0xbf58476d1ce4e5b9ULL;

		buf[i] = (uint8_t)(x >> 56 ^ x >> 29);
	}
}

static uint8_t *pattern(size_t len, uint64_t seed)
{
	uint8_t *buf = malloc(len ? len : 1);

	if (!buf)
		exit(1);
	fill(buf, len, seed, 0);
	return buf;
}

/* Does @o hold exactly @len bytes equal to @want? */
static bool obj_equals(struct store_obj *o, const uint8_t *want, size_t len)
{
	uint8_t *got = malloc(len + 1);
	ssize_t n;
	bool ok;

	if (!got)
		exit(1);
	n = store_read(o, got, len + 1, 0);
	ok = store_obj_size(o) == len && n == (ssize_t)len && !memcmp(got, want, len);
	free(got);
	return ok;
}

/* Create, write @len bytes of pattern @seed in one write, seal. */
static struct store_obj *make_sealed(struct store *s, uint64_t id, size_t len, uint64_t seed,
				     const char *path)
{
	uint8_t *buf = pattern(len, seed);
	struct store_obj *o;
	int err = 0;

	o = store_create(s, id, &err);
	if (!o) {
		fprintf(stderr, "store_create %llu: %s\n", (unsigned long long)id, strerror(-err));
		exit(1);
	}
	CHECK_EQ(store_write(o, buf, len, 0), 0);
	CHECK_EQ(store_seal(o, path, 1000 + (int64_t)id), 0);
	free(buf);
	return o;
}

static uint64_t used_bytes(struct store *s)
{
	struct store_stats st;

	store_stats(s, &st);
	return st.used;
}

static void *iov_base0(struct store_obj *o)
{
	struct iovec iov;
	size_t bytes;

	if (store_obj_iov(o, 0, 1, &iov, 1, &bytes) != 1)
		return NULL;
	return iov.iov_base;
}

static void rec_path(const struct tdir *t, uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/objects/%016llx", t->dir, (unsigned long long)id);
}

/* Read a whole small file; caller frees.  NULL if absent. */
static uint8_t *slurp(const char *path, size_t *ret_len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	fstat(fd, &st);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
		exit(1);
	close(fd);
	*ret_len = (size_t)st.st_size;
	return buf;
}

static void spew(const char *path, const uint8_t *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		exit(1);
	close(fd);
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void set_le64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static void rec_rehash(uint8_t *buf, size_t len)
{
	set_le64(buf + len - 8, XXH3_64bits(buf, len - 8));
}

/* Highest arena page end named by record @id (0 if absent). */
static uint64_t rec_end(const struct tdir *t, uint64_t id)
{
	char path[256];
	uint8_t *buf, *ext;
	uint32_t plen, n, i;
	uint64_t end = 0;
	size_t len;

	rec_path(t, id, path, sizeof(path));
	buf = slurp(path, &len);
	if (!buf)
		return 0;
	memcpy(&plen, buf + REC_PATH_LEN, 4);
	memcpy(&n, buf + REC_N_EXT, 4);
	ext = buf + REC_HDR + plen;
	for (i = 0; i < n; i++) {
		uint64_t e = le64(ext + 16 * i) + le64(ext + 16 * i + 8);

		if (e > end)
			end = e;
	}
	free(buf);
	return end;
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Write object @id's catalog record as objfs did before the catalog log
 * (issue 21): objects/<id>, version 2. */
static void write_old_record(const struct tdir *t, uint64_t id, uint64_t size, int64_t mtime,
			     const uint8_t csum[OBJFS_CSUM_LEN], const char *path)
{
	size_t plen = strlen(path), len = REC_HDR + plen + 8;
	uint8_t *buf = calloc(1, len);
	uint32_t pl = (uint32_t)plen;
	char name[256];

	if (!buf)
		exit(1);
	memcpy(buf, "OBJC", 4);
	buf[4] = 2;
	set_le64(buf + REC_ID, id);
	set_le64(buf + REC_SIZE, size);
	set_le64(buf + 24, (uint64_t)mtime);
	memcpy(buf + 32, csum, OBJFS_CSUM_LEN);
	memcpy(buf + REC_PATH_LEN, &pl, 4);
	memcpy(buf + REC_HDR, path, plen);
	rec_rehash(buf, len);
	rec_path(t, id, name, sizeof(name));
	spew(name, buf, len);
	free(buf);
}

static int old_record_cb(struct store_obj *o, void *arg)
{
	uint8_t csum[OBJFS_CSUM_LEN];
	char path[OBJFS_PATH_MAX];

	store_obj_csum(o, csum);
	store_obj_path(o, path, sizeof(path));
	write_old_record(arg, store_obj_id(o), store_obj_size(o), store_obj_mtime(o), csum, path);
	return 0;
}

/* Close @s, leaving its catalog as objfs before issue 21 kept it: a
 * record file per object, and no log. */
static void close_as_old(struct store *s, const struct tdir *t)
{
	char log[256];

	store_foreach(s, old_record_cb, (void *)t);
	store_close(s);
	snprintf(log, sizeof(log), "%s/catalog.log", t->dir);
	unlink(log);
}

/* The catalog log of store @t, whole (the caller frees); its length in
 * *@ret_len. */
static char *catalog_text(const struct tdir *t, size_t *ret_len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/catalog.log", t->dir);
	return (char *)slurp(path, ret_len);
}

/* Lines of @text that begin with @prefix. */
static int lines_starting(const char *text, size_t len, const char *prefix)
{
	size_t k = strlen(prefix), i = 0;
	int n = 0;

	while (i < len) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;

		if (end - i >= k && !memcmp(text + i, prefix, k))
			n++;
		i = end + 1;
	}
	return n;
}

/* The names in directory @path that do not begin with a dot (the caller
 * frees each and the array). */
static int dir_names(const char *path, char ***ret, size_t *ret_n)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char **v = NULL;
	size_t n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		v = realloc(v, (n + 1) * sizeof(*v));
		if (!v || !(v[n] = strdup(de->d_name)))
			exit(1);
		n++;
	}
	closedir(d);
	*ret = v;
	*ret_n = n;
	return 0;
}

/* ---- cases ---- */

#endif
