/*
 * local_redis: fork/exec of a private redis-server and its supervision.
 */
#include "local_redis.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

struct local_redis {
	pid_t pid;
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char rundir[OBJFS_PATH_MAX];
	char datadir[OBJFS_PATH_MAX];
};

static bool answers_ping(const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = 1};
	char buf[16];
	bool ok = false;
	ssize_t n;
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    util_write_full(fd, "PING\r\n", 6) == 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		ok = n >= 5 && !memcmp(buf, "+PONG", 5);
	}
	close(fd);
	return ok;
}

static int spawn(struct local_redis *lr, char *err, size_t errlen)
{
	char logfile[OBJFS_PATH_MAX + 16];
	pid_t pid;
	int64_t deadline;

	snprintf(logfile, sizeof(logfile), "%s/redis.log", lr->rundir);
	/* A redis-server that still answers here was left by a daemon that
	 * died: PR_SET_PDEATHSIG sent it SIGTERM and it is on its way out.
	 * Wait for it, or as it exits it would unlink the socket of ours, and
	 * meanwhile two servers would write one append-only file. */
	deadline = util_mono_ns() + 10 * 1000000000LL;
	while (answers_ping(lr->sock)) {
		if (util_mono_ns() > deadline) {
			snprintf(err, errlen,
				 "a redis-server still answers on %s after 10 s: is another "
				 "objfsd using the run directory %s?",
				 lr->sock, lr->rundir);
			return -EADDRINUSE;
		}
		usleep(20000);
	}
	unlink(lr->sock);
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot fork redis-server: %s", strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		const char *argv[] = {
		    "redis-server", "--port",	  "0",
		    "--unixsocket", lr->sock,	  "--unixsocketperm",
		    "700",	    "--dir",	  lr->datadir,
		    "--appendonly", "yes",	  "--appendfsync",
		    "everysec",	    "--save",	  "",
		    "--daemonize",  "no",	  "--logfile",
		    logfile,	    "--loglevel", "warning",
		    NULL,
		};
		int fd = open("/dev/null", O_RDWR);
		sigset_t all;

		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		/* never hold the caller's terminal or pipe: a caller that
		 * reads our output, $(mount ...) say, would wait for redis */
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (!getenv("PATH"))
			setenv("PATH",
			       "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
		execvp("redis-server", (char *const *)argv);
		_exit(127);
	}
	lr->pid = pid;
	deadline = util_mono_ns() + 10 * 1000000000LL;
	while (util_mono_ns() < deadline) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid) {
			lr->pid = 0;
			if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
				snprintf(err, errlen,
					 "cannot run redis-server (is the redis-server "
					 "package installed?)");
			else
				snprintf(err, errlen,
					 "redis-server exited at start (status %d); see %s",
					 WIFEXITED(status) ? WEXITSTATUS(status) : -1, logfile);
			return -ECHILD;
		}
		if (answers_ping(lr->sock))
			return 0;
		usleep(20000);
	}
	snprintf(err, errlen, "redis-server did not answer on %s within 10 s", lr->sock);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	lr->pid = 0;
	return -ETIMEDOUT;
}

struct local_redis *local_redis_start(const char *rundir, const char *datadir, char *ret_url,
				      size_t urllen, char *err, size_t errlen)
{
	struct local_redis *lr = calloc(1, sizeof(*lr));

	if (!lr) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if ((size_t)snprintf(lr->sock, sizeof(lr->sock), "%s/redis.sock", rundir) >=
	    sizeof(lr->sock)) {
		snprintf(err, errlen, "run directory path '%s' is too long for a unix socket",
			 rundir);
		free(lr);
		return NULL;
	}
	snprintf(lr->rundir, sizeof(lr->rundir), "%s", rundir);
	snprintf(lr->datadir, sizeof(lr->datadir), "%s", datadir);
	if (mkdir(datadir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create %s: %s", datadir, strerror(errno));
		free(lr);
		return NULL;
	}
	if (spawn(lr, err, errlen) < 0) {
		free(lr);
		return NULL;
	}
	snprintf(ret_url, urllen, "unix:%s", lr->sock);
	return lr;
}

int local_redis_check(struct local_redis *lr)
{
	char err[512];
	int status, r;

	if (!lr)
		return 0;
	if (lr->pid && waitpid(lr->pid, &status, WNOHANG) != lr->pid)
		return 0;
	log_warn("the local redis-server (pid %d) died; starting it again", (int)lr->pid);
	lr->pid = 0;
	r = spawn(lr, err, sizeof(err));
	if (r < 0)
		log_error("cannot restart the local redis-server: %s", err);
	return r;
}

void local_redis_stop(struct local_redis *lr)
{
	int64_t deadline;

	if (!lr)
		return;
	if (lr->pid > 0) {
		kill(lr->pid, SIGTERM);
		deadline = util_mono_ns() + 5 * 1000000000LL;
		while (waitpid(lr->pid, NULL, WNOHANG) == 0) {
			if (util_mono_ns() > deadline) {
				kill(lr->pid, SIGKILL);
				waitpid(lr->pid, NULL, 0);
				break;
			}
			usleep(10000);
		}
	}
	unlink(lr->sock);
	free(lr);
}
