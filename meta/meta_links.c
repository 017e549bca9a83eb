/*
 * meta_links: what a file or directory is besides its bytes: owners,
 * modes and times (meta_setattr()), symbolic links and hard links (the
 * scripts symlink, readlink, link and setattr of meta_scripts.c).
 */
#include "meta.h"
#include "meta_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int meta_setattr(struct meta *m, uint64_t id, unsigned what, const struct meta_attr *a,
		 int64_t mtime_ns, const struct meta_attr *base, struct meta_entry *ret)
{
	static const char letters[] = "ugmat";
	char w[sizeof(letters)], bt[META_ATTR_TEXT_MAX], mode[16];
	redisReply *rep;
	size_t n = 0;
	unsigned i;
	int r;

	if (!id || !a || !base || !base->set || (what & ~0x1fu) || a->mode > 07777 ||
	    a->uid == UINT32_MAX || a->gid == UINT32_MAX)
		return -EINVAL;
	for (i = 0; i < 5; i++)
		if (what & (1u << i))
			w[n++] = letters[i];
	w[n] = '\0';
	r = meta_attr_text(base, INT64_MIN, bt);
	if (r < 0)
		return r;
	snprintf(mode, sizeof(mode), "%" PRIo32, a->mode);
	r = meta_script_self(m, MS_SETATTR, &rep, "usuusiis", id, w, (uint64_t)a->uid,
			     (uint64_t)a->gid, mode, a->atime_ns, mtime_ns, bt);
	if (r < 0)
		return r;
	return meta_rep_entry_of(rep, 0, id, ret);
}

int meta_symlink(struct meta *m, uint64_t parent, const char *name, const char *target,
		 int64_t mtime_ns, const struct meta_attr *attr, struct meta_entry *ret)
{
	char at[META_ATTR_TEXT_MAX];
	redisReply *rep;
	uint64_t id;
	size_t len = target ? strnlen(target, META_LINK_MAX + 1) : 0;
	int i, r;

	r = parent ? util_name_validate(name) : -EINVAL;
	if (r == 0 && (!len || len > META_LINK_MAX))
		r = len ? -ENAMETOOLONG : -ENOENT;
	if (r == 0)
		r = meta_attr_text(attr, mtime_ns, at);
	for (i = 0; r == 0 || (r == -EAGAIN && i < ID_TRIES); i++) {
		r = meta_draw_id(&id);
		if (r == 0)
			r = meta_script_self(m, MS_SYMLINK, &rep, "usiuss", parent, name, mtime_ns,
					     id, target, at);
		if (r == 0)
			break;
	}
	if (r < 0)
		return r;
	return meta_rep_entry_of(rep, META_LINK, id, ret);
}

int meta_link(struct meta *m, uint64_t id, uint64_t parent, const char *name,
	      const struct meta_attr *base, struct meta_entry *ret)
{
	char bt[META_ATTR_TEXT_MAX];
	redisReply *rep;
	int r;

	r = id && parent && base && base->set ? util_name_validate(name) : -EINVAL;
	if (r == 0)
		r = meta_attr_text(base, INT64_MIN, bt);
	if (r == 0)
		r = meta_script_self(m, MS_LINK, &rep, "uuss", id, parent, name, bt);
	if (r < 0)
		return r;
	return meta_rep_entry_of(rep, META_FILE, id, ret);
}

int meta_readlink(struct meta *m, uint64_t id, char *buf, size_t len)
{
	const char *t;
	redisReply *rep;
	int r;

	r = id && len > META_LINK_MAX ? meta_script(m, MS_READLINK, &rep, "u", id) : -EINVAL;
	if (r < 0)
		return r;
	t = meta_rep_text(rep, META_LINK_MAX);
	if (t && *t)
		memcpy(buf, t, strlen(t) + 1);
	else
		r = meta_rep_bad_field("symbolic link", id, "t", rep);
	freeReplyObject(rep);
	return r;
}
