/*
 * test-fs-errors: the errno map of fs/ (fs_kernel_errno(), behind
 * fs_reply_err() and fs_reply_err_at(), the one way an op fails a FUSE
 * request), and what an open answers for node_open()'s errors
 * (fs_open_errno()).  A change to either changes what system calls
 * return, so both are pinned here.
 */
#include <errno.h>
#include <stdlib.h>

#include "fs_i.h"
#include "tap.h"

TEST(kernel_errno)
{
	struct fs *fs = calloc(1, sizeof(*fs)); /* no meta: the log says "-" */
	static const int same[] = {
	    ENOENT,  EACCES, EPERM,   EEXIST, ENOTEMPTY, ENAMETOOLONG, ENOSPC, EFBIG, ENOMEM,
	    ESTALE,  EISDIR, ENOTDIR, ELOOP,  EINVAL,	 EBUSY,	       EBADF,  EROFS, EXDEV,
	    ENODATA, ERANGE, ENOTSUP, EAGAIN, ETIMEDOUT, EMFILE,       EIO};
	size_t i;

	CHECK(fs != NULL);
	CHECK_EQ(fs_kernel_errno(fs, 0, "lookup", 1, "x"), 0);
	CHECK_EQ(fs_kernel_errno(fs, 0, NULL, 0, NULL), 0);
	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		CHECK_EQ(fs_kernel_errno(fs, -same[i], "lookup", 1, "x"), same[i]);
		CHECK_EQ(fs_kernel_errno(fs, -same[i], NULL, 0, NULL), same[i]);
	}
	/* a corrupt record in Redis is the user's EIO */
	CHECK_EQ(fs_kernel_errno(fs, -EBADMSG, "lookup", 1, "x"), EIO);
	CHECK_EQ(fs_kernel_errno(fs, -EBADMSG, NULL, 0, NULL), EIO);
	/* a positive errno is a bug, never a success */
	CHECK_EQ(fs_kernel_errno(fs, ENOENT, "lookup", 1, "x"), EIO);
	CHECK_EQ(fs_kernel_errno(fs, 1, NULL, 0, NULL), EIO);
	free(fs);
}

TEST(open_errno)
{
	static const int kept[] = {ENOENT, ENOSPC, EFBIG, ENOMEM};
	static const int eio[] = {EIO,	  ETIMEDOUT, ECONNREFUSED, ECONNRESET, EHOSTUNREACH,
				  EPROTO, EBADE,     EBADMSG,	   ESTALE,     EAGAIN,
				  EACCES, EPERM,     EMFILE,	   EBUSY,      EINVAL};
	size_t i;

	CHECK_EQ(fs_open_errno(0), 0);
	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		CHECK_EQ(fs_open_errno(-kept[i]), -kept[i]);
	for (i = 0; i < sizeof(eio) / sizeof(eio[0]); i++)
		CHECK_EQ(fs_open_errno(-eio[i]), -EIO);
}

int main(void)
{
	RUN(kernel_errno);
	RUN(open_errno);
	return tap_done();
}
