/*
 * objfs-mapwrite PATH SIZE BYTE: create PATH, size it to SIZE with
 * ftruncate, map it shared and writable, close the descriptor, and only
 * then fill the mapping with BYTE and unmap it (issue 19, item 2: a common
 * pattern whose writes must not be lost).  Exits 0 if every call
 * succeeded, 1 otherwise, naming the call.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int die(const char *what, const char *path)
{
	fprintf(stderr, "objfs-mapwrite: %s %s: %s\n", what, path, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	size_t size;
	void *p;
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: objfs-mapwrite PATH SIZE BYTE\n");
		return 2;
	}
	size = strtoull(argv[2], NULL, 0);
	fd = open(argv[1], O_CREAT | O_EXCL | O_RDWR, 0644);
	if (fd < 0)
		return die("open", argv[1]);
	if (ftruncate(fd, (off_t)size) < 0)
		return die("ftruncate", argv[1]);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return die("mmap", argv[1]);
	if (close(fd) < 0)
		return die("close", argv[1]);
	memset(p, argv[3][0], size);
	if (munmap(p, size) < 0)
		return die("munmap", argv[1]);
	return 0;
}
