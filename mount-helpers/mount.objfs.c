/*
 * mount.objfs: the helper mount(8) runs for "mount -t objfs" and fstab.
 *
 *   mount.objfs SPEC MOUNTPOINT [-sfnv] [-o OPTIONS]... [-t objfs]
 *
 * It turns mount(8)'s calling convention into objfsd's and execs the
 * daemon, which checks the options, mounts, and returns once the mount is
 * ready.  Several -o are joined into one list, as mount(8) does; objfsd
 * refuses an option given twice with different values.  -f (fake) checks
 * the options only, -n and -s are accepted and ignored, -v prints the
 * command it runs.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef OBJFSD_PATH
#define OBJFSD_PATH "/usr/local/bin/objfsd"
#endif

static const char usage[] =
    "usage: mount.objfs SPEC MOUNTPOINT [-sfnv] [-o OPTION[,OPTION...]]...\n"
    "\n"
    "Mount helper for objfs, run by 'mount -t objfs SPEC MOUNTPOINT' and by\n"
    "fstab lines such as:\n"
    "  local  /mnt/objfs  objfs  capacity=4G,_netdev  0 0\n"
    "\n"
    "SPEC is redis://[:PASSWORD@]HOST:PORT[/DB],\n"
    "redis-sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB],\n"
    "redis-cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT...],\n"
    "unix:/path/to/redis.sock or local.  The options are objfsd's (see objfsd --help);\n"
    "every -o counts, and an option given twice must have the same value.\n"
    "After a crash (the mount point gives ENOTCONN), mount again: the dead\n"
    "objfs mount is detached first.  A live objfs mount there is refused.\n"
    "  -f  fake: check the options, do not mount\n"
    "  -v  print the daemon command line\n"
    "  -n, -s  accepted and ignored (no mtab; sloppy)\n";

/* objfsd next to us in a build tree, else the installed one. */
static void find_daemon(char *buf, size_t len)
{
	char self[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(buf, len, "%s/../daemon/objfsd", self);
			if (access(buf, X_OK) == 0)
				return;
			snprintf(buf, len, "%s/objfsd", self);
			if (access(buf, X_OK) == 0)
				return;
		}
	}
	snprintf(buf, len, "%s", OBJFSD_PATH);
}

/* Append the list @more to the -o lists in *@opts so far, with a comma. */
static int opts_add(char **opts, const char *more)
{
	size_t have = *opts ? strlen(*opts) : 0, len = strlen(more);
	char *grown;

	if (!len)
		return 0;
	grown = realloc(*opts, have + len + 2);
	if (!grown)
		return -ENOMEM;
	if (have)
		grown[have++] = ',';
	memcpy(grown + have, more, len + 1);
	*opts = grown;
	return 0;
}

int main(int argc, char **argv)
{
	const char *pos[2];
	char daemon[PATH_MAX];
	char *dargv[8], *opts = NULL;
	int npos = 0, i, dargc = 0;
	int fake = 0, verbose = 0;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage, stdout);
			free(opts);
			return 0;
		} else if (!strcmp(a, "-o")) {
			if (++i >= argc) {
				fprintf(stderr, "mount.objfs: option '-o' needs an argument\n");
				goto fail;
			}
			if (opts_add(&opts, argv[i]) < 0)
				goto oom;
		} else if (!strncmp(a, "-o", 2)) {
			if (opts_add(&opts, a + 2) < 0)
				goto oom;
		} else if (!strcmp(a, "-t")) {
			if (++i >= argc ||
			    (strcmp(argv[i], "objfs") && strcmp(argv[i], "fuse.objfs"))) {
				fprintf(stderr, "mount.objfs: unsupported filesystem type\n");
				goto fail;
			}
		} else if (a[0] == '-' && a[1] && a[1] != '-') {
			const char *f;

			for (f = a + 1; *f; f++) {
				if (*f == 'f')
					fake = 1;
				else if (*f == 'v')
					verbose = 1;
				else if (*f != 'n' && *f != 's') {
					fprintf(stderr, "mount.objfs: unknown flag '-%c'\n", *f);
					goto fail;
				}
			}
		} else if (npos < 2) {
			pos[npos++] = a;
		} else {
			fprintf(stderr, "mount.objfs: unexpected argument '%s'\n", a);
			goto fail;
		}
	}
	if (npos < 2) {
		fputs(usage, stderr);
		goto fail;
	}
	find_daemon(daemon, sizeof(daemon));
	dargv[dargc++] = daemon;
	dargv[dargc++] = (char *)pos[0];
	dargv[dargc++] = (char *)pos[1];
	if (opts) {
		dargv[dargc++] = (char *)"-o";
		dargv[dargc++] = opts;
	}
	if (fake)
		dargv[dargc++] = (char *)"--check";
	dargv[dargc] = NULL;
	if (verbose) {
		for (i = 0; i < dargc; i++)
			fprintf(stderr, "%s%s", i ? " " : "", dargv[i]);
		fputc('\n', stderr);
	}
	execv(daemon, dargv);
	fprintf(stderr, "mount.objfs: cannot run %s: %s\n", daemon, strerror(errno));
	goto fail;

oom:
	fprintf(stderr, "mount.objfs: out of memory\n");
fail:
	free(opts);
	return 1;
}
