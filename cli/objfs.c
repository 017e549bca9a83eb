/*
 * objfs: the command-line tool for a mounted objfs node.
 *
 * It talks to the daemon through the mount itself: the daemon answers
 * reads of the "user.objfs.*" extended attributes, so no extra socket or
 * credentials are needed, and anything that can read a file's xattrs can
 * script objfs.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

static const char usage[] =
	"usage: objfs COMMAND [ARGS]\n"
	"\n"
	"Commands:\n"
	"  status MOUNTPOINT   store capacity and use, object count, Redis state\n"
	"  stat PATH...        id, size, checksum and holders of objects\n"
	"  help                this text\n";

/* Read xattr @name of @path into a heap string (caller frees). */
static char *get_xattr(const char *path, const char *name, int *ret_err)
{
	ssize_t n = getxattr(path, name, NULL, 0);
	char *buf;

	if (n < 0) {
		*ret_err = errno;
		return NULL;
	}
	buf = malloc((size_t)n + 1);
	if (!buf) {
		*ret_err = ENOMEM;
		return NULL;
	}
	n = getxattr(path, name, buf, (size_t)n);
	if (n < 0) {
		*ret_err = errno;
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

static int cmd_status(int argc, char **argv)
{
	char *text;
	int err;

	if (argc != 1) {
		fprintf(stderr, "usage: objfs status MOUNTPOINT\n");
		return 2;
	}
	text = get_xattr(argv[0], "user.objfs.status", &err);
	if (!text) {
		if (err == ENODATA || err == ENOTSUP)
			fprintf(stderr, "objfs: %s is not the root of an objfs mount\n", argv[0]);
		else
			fprintf(stderr, "objfs: %s: %s\n", argv[0], strerror(err));
		return 1;
	}
	fputs(text, stdout);
	free(text);
	return 0;
}

static int stat_one(const char *path)
{
	char *id, *csum, *loc, *p;
	struct stat st;
	int err = 0;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "objfs: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "objfs: %s: not an object (a directory?)\n", path);
		return 1;
	}
	id = get_xattr(path, "user.objfs.id", &err);
	if (!id) {
		fprintf(stderr, "objfs: %s: not on an objfs mount (%s)\n", path, strerror(err));
		return 1;
	}
	csum = get_xattr(path, "user.objfs.checksum", &err);
	loc = get_xattr(path, "user.objfs.locations", &err);
	for (p = loc; p && *p; p++)
		if (*p == ',')
			*p = ' ';
	printf("path: %s\n", path);
	printf("id: %s\n", id);
	printf("size: %lld\n", (long long)st.st_size);
	printf("checksum: %s\n", csum ? csum : "(not sealed yet)");
	printf("holders: %s\n", loc ? loc : "(unknown: Redis unreachable)");
	free(id);
	free(csum);
	free(loc);
	return 0;
}

static int cmd_stat(int argc, char **argv)
{
	int i, rc = 0;

	if (argc < 1) {
		fprintf(stderr, "usage: objfs stat PATH...\n");
		return 2;
	}
	for (i = 0; i < argc; i++) {
		if (i)
			putchar('\n');
		rc |= stat_one(argv[i]);
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "status"))
		return cmd_status(argc - 2, argv + 2);
	if (!strcmp(argv[1], "stat"))
		return cmd_stat(argc - 2, argv + 2);
	fprintf(stderr, "objfs: unknown command '%s' (see objfs --help)\n", argv[1]);
	return 2;
}
