/*
 * store_prefault: filling the pool of freed files with the free capacity
 * at mount (store_prefault()), so that the first large objects written or
 * fetched land on memory that is already faulted in.  The pool itself,
 * and the capacity it is taken from, are store_files.c's.
 */
#define _GNU_SOURCE /* fallocate */
#include "store_i.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/*
 * Touch [@off, @off + @len) of pooled file @fd, allocated already.  On
 * tmpfs, fallocate(2) only reserves pages: each is cleared at its first
 * fault, and on a VM whose host backs guest memory lazily that first
 * write is slow.  Without this, a store's first fetches paid it in the
 * data path, every objfsd in clear_page under shmem_fault
 * (docs/benchmarks.md, "Figures behind constants").  Best effort: a
 * kernel without MADV_POPULATE_WRITE (5.14) leaves the pages to their
 * first use, as before.
 */
static void prefault_touch(int fd, uint64_t off, uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);

	if (p == MAP_FAILED)
		return;
	(void)madvise(p, len, MADV_POPULATE_WRITE);
	munmap(p, len);
}

/* May a prefault take @step more bytes of memory now? */
static bool prefault_may(const struct store_prefault_limit *limit, uint64_t step)
{
	return !limit || !limit->room || limit->room(limit->ctx) >= step;
}

/*
 * One pooled file of @len bytes with its pages allocated, a step at a
 * time; each step is held (s->prefault_hold) before it is allocated, and
 * a writer short of room takes the whole hold back (charge_locked()): the
 * file is then deleted.  If @limit says no more memory part way, the part
 * allocated is kept (if it is worth pooling).  *@ret_bytes gets the bytes
 * pooled.  0, -ENOMEM (@limit said no), -EAGAIN (a writer took the room
 * back, or none is left), -ENOBUFS (the pool has no slot left), -ENOSPC
 * (the filesystem is full, or cannot allocate ahead), -ECANCELED
 * (*@stop), or the errno of open(2).
 */
static int prefault_one(struct store *s, uint64_t len, const atomic_bool *stop,
			const struct store_prefault_limit *limit, uint64_t *ret_bytes)
{
	char name[32];
	uint64_t seq, off, step;
	bool kept = false;
	int fd, r = 0;

	*ret_bytes = 0;
	pthread_mutex_lock(&s->lock);
	seq = s->seq++;
	pthread_mutex_unlock(&s->lock);
	store_files_seq_name_i(FREE_PREFIX, seq, name, sizeof(name));
	fd = openat(s->data_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	for (off = 0; r == 0 && off < len; off += step) {
		step = min_u64(PREFAULT_STEP, len - off);
		if (stop && atomic_load_explicit(stop, memory_order_relaxed)) {
			r = -ECANCELED;
			break;
		}
		if (!prefault_may(limit, step)) {
			r = -ENOMEM;
			break;
		}
		pthread_mutex_lock(&s->lock);
		if (s->prefault_cancel || store_files_free_locked_i(s) < step)
			r = -EAGAIN;
		else
			s->prefault_hold += step;
		pthread_mutex_unlock(&s->lock);
		if (r == 0 && fallocate(fd, 0, (off_t)off, (off_t)step) < 0)
			r = errno == EOPNOTSUPP ? -ENOSPC : -errno;
		if (r == 0)
			prefault_touch(fd, off, step);
		if (r == 0) {
			pthread_mutex_lock(&s->lock);
			s->prefault_alloc += step;
			pthread_mutex_unlock(&s->lock);
		}
	}
	if (r == -ENOMEM) {
		/* keep what was allocated: whole units, if worth pooling */
		len = off / s->unit * s->unit;
		if (len < STORE_POOL_MIN || ftruncate(fd, (off_t)len) < 0)
			len = 0;
	}
	pthread_mutex_lock(&s->lock);
	if ((r == 0 || (r == -ENOMEM && len)) && !s->prefault_cancel && s->npool < STORE_POOL_MAX) {
		s->pool[s->npool++] = (struct store_pooled){len, seq};
		s->pool_bytes += len;
		s->prefault_alloc = 0;
		*ret_bytes = len;
		kept = true;
	} else if (r == 0) {
		r = s->prefault_cancel ? -EAGAIN : -ENOBUFS;
	}
	s->prefault_hold = 0;
	pthread_mutex_unlock(&s->lock);
	close(fd); /* pooled by name */
	if (!kept) {
		unlinkat(s->data_fd, name, 0);
		/* its pages are gone: nothing to count any more */
		pthread_mutex_lock(&s->lock);
		s->prefault_alloc = 0;
		pthread_mutex_unlock(&s->lock);
	}
	return r;
}

int store_prefault(struct store *s, const atomic_bool *stop,
		   const struct store_prefault_limit *limit, struct store_prefault_report *ret)
{
	uint64_t free_bytes, len, room, done = 0, bytes;
	enum store_prefault_end end = STORE_PREFAULT_DONE;
	bool taken;
	int r = 0;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		taken = s->prefault_cancel;
		free_bytes = taken ? 0 : store_files_free_locked_i(s);
		pthread_mutex_unlock(&s->lock);
		if (free_bytes < PREFAULT_MIN) {
			end = taken ? STORE_PREFAULT_TAKEN : STORE_PREFAULT_DONE;
			break;
		}
		/* the largest power of two in half of what is free (a 1 GiB
		 * fetch into a 4 GiB store then finds a 1 GiB file, rather
		 * than cutting 3 GiB off one of 4), or in all of it at the end;
		 * and in the memory the limit leaves */
		len = free_bytes / 2 >= PREFAULT_MIN ? free_bytes / 2 : free_bytes;
		room = limit && limit->room ? limit->room(limit->ctx) : UINT64_MAX;
		if (room < len)
			len = room;
		if (len < PREFAULT_MIN) {
			end = STORE_PREFAULT_MEMORY;
			break;
		}
		len = 1ULL << (63 - __builtin_clzll(len));
		len = len / s->unit * s->unit;
		r = prefault_one(s, len, stop, limit, &bytes);
		done += bytes;
		if (r == -ENOBUFS)
			end = STORE_PREFAULT_DONE;
		else if (r == -ENOMEM)
			end = STORE_PREFAULT_MEMORY;
		else if (r == -EAGAIN)
			end = STORE_PREFAULT_TAKEN;
		else if (r == -ENOSPC)
			end = STORE_PREFAULT_FS_FULL;
		else if (r < 0)
			return r;
		if (r < 0)
			break;
	}
	ret->bytes = done;
	ret->end = end;
	return 0;
}
