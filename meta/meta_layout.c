/*
 * meta_layout: the namespace's layout, checked at connect
 * (meta_layout_settle()), and the migrations from layouts 1 and 2 to
 * layout 3, a SCAN page at a time, each step one call of meta_scripts.c's
 * script_migrate.  meta.h has the schema of layout 3; docs/design.md,
 * "Layout migrations", the older layouts and the steps.
 */
#include "meta.h"
#include "meta_i.h"
#include "meta_lua.h"

#include "log.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why the namespace could not be used, for meta_last_error() and the log
 * (the heartbeat retries: rate limited) */
static struct log_ratelimit layout_rl = LOG_RATELIMIT_INIT("namespace layout", 60000, 3);

static void set_why(struct meta *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_why(struct meta *m, const char *fmt, ...)
{
	char why[sizeof(m->last_err)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&m->lock);
	memcpy(m->last_err, why, sizeof(why));
	pthread_mutex_unlock(&m->lock);
	log_msg_limited(&layout_rl, LOGL_ERROR, "%s", why);
}

/* Reply element @i of @rep as text ("" if it is not one). */
static const char *elem_text(const redisReply *rep, size_t i)
{
	if (rep->type != REDIS_REPLY_ARRAY || i >= rep->elements ||
	    rep->element[i]->type != REDIS_REPLY_STRING)
		return "";
	return rep->element[i]->str;
}

static long long elem_int(const redisReply *rep, size_t i)
{
	if (rep->type != REDIS_REPLY_ARRAY || i >= rep->elements ||
	    rep->element[i]->type != REDIS_REPLY_INTEGER)
		return 0;
	return rep->element[i]->integer;
}

/* A node of the namespace's older layout @l is live on it (reply
 * elements @at.. are its name, host and pid): say who. */
static int busy(struct meta *m, const char *l, const redisReply *rep, size_t at)
{
	set_why(m,
		"namespace {%s} has layout %s%s and node '%s' (pid %s on host %s) is live on "
		"it: stop every objfs node of this namespace, then mount again to migrate it "
		"to layout %d",
		m->prefix, l[0] ? l : "1", l[0] ? "" : " (objfs before layout keys)",
		elem_text(rep, at), elem_text(rep, at + 2), elem_text(rep, at + 1), META_LAYOUT);
	return -EBUSY;
}

struct migration {
	long long migrated, completed, unplaced, left, skipped, folded, dropped;
	char first_skipped[128];
};

/* Run step @step from cursor "0" to the end; @each takes each page. */
static int run_step(struct meta *m, const char *step, const char *dir,
		    int (*each)(struct meta *m, const redisReply *rep, struct migration *mg),
		    struct migration *mg)
{
	char cursor[24] = "0";
	redisReply *rep;
	unsigned pages = 0;
	int r;

	do {
		r = meta_script(m, MS_MIGRATE, &rep, "ssss", step, cursor, m->node, dir ? dir : "");
		if (r < 0)
			return r;
		if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
		    rep->element[0]->type != REDIS_REPLY_STRING ||
		    rep->element[0]->len >= sizeof(cursor)) {
			freeReplyObject(rep);
			return -EBADMSG;
		}
		snprintf(cursor, sizeof(cursor), "%s", rep->element[0]->str);
		r = each(m, rep, mg);
		freeReplyObject(rep);
		if (r < 0)
			return r;
		if (++pages % 1000 == 0)
			log_info("migrating namespace {%s}: %lld records so far", m->prefix,
				 mg->migrated);
	} while (strcmp(cursor, "0"));
	return 0;
}

static int add_objs(struct meta *m, const redisReply *rep, struct migration *mg)
{
	mg->migrated += elem_int(rep, 1);
	mg->completed += elem_int(rep, 2);
	mg->unplaced += elem_int(rep, 3);
	mg->left += elem_int(rep, 4);
	mg->skipped += elem_int(rep, 5);
	if (!mg->first_skipped[0] && elem_text(rep, 6)[0])
		snprintf(mg->first_skipped, sizeof(mg->first_skipped), "%s", elem_text(rep, 6));
	return 0;
}

static int add_holders(struct meta *m, const redisReply *rep, struct migration *mg)
{
	mg->folded += elem_int(rep, 1);
	mg->dropped += elem_int(rep, 2);
	return 0;
}

static int each_dir(struct meta *m, const redisReply *rep, struct migration *mg)
{
	struct migration here = {0};
	size_t i;
	int r;

	for (i = 1; i < rep->elements; i++) {
		r = run_step(m, "dir", elem_text(rep, i), add_objs, &here);
		if (r < 0)
			return r;
	}
	mg->migrated += here.migrated;
	mg->completed += here.completed;
	mg->skipped += here.skipped;
	if (!mg->first_skipped[0])
		memcpy(mg->first_skipped, here.first_skipped, sizeof(here.first_skipped));
	/* the records the walk placed are no longer unplaced */
	mg->unplaced -= here.migrated + here.left;
	mg->left += here.left;
	return 0;
}

/* Step @step, which leaves the layout key @want, or -EBUSY: a node of
 * an older layout wrote it meanwhile. */
static int step_done(struct meta *m, const char *step, const char *want)
{
	redisReply *rep;
	int r;

	r = meta_script(m, MS_MIGRATE, &rep, "ssss", step, "0", m->node, "");
	if (r < 0)
		return r;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 1 ||
	    rep->element[0]->type != REDIS_REPLY_STRING) {
		r = -EBADMSG;
	} else if (strcmp(rep->element[0]->str, want)) {
		r = -EBUSY;
	}
	freeReplyObject(rep);
	return r;
}

static int migrate_failed(struct meta *m, int r)
{
	if (r == -EBUSY) {
		set_why(
		    m,
		    "namespace {%s}: its layout key changed during the migration (a node of an "
		    "older layout is live): stop every objfs node of this namespace, then mount "
		    "again",
		    m->prefix);
		return r;
	}
	set_why(m, "migrating namespace {%s} to layout %d failed: %s; mount again to go on",
		m->prefix, META_LAYOUT, strerror(-r));
	return r;
}

static void warn_skipped(struct meta *m, const struct migration *mg)
{
	if (mg->skipped)
		log_warn("namespace {%s}: the migration skipped %lld keys of the wrong type (the "
			 "first: '%s'); they were unreadable before and stay so: delete them",
			 m->prefix, mg->skipped, mg->first_skipped);
}

/* Layout 1 to layout 2 (docs/design.md, "Layout migrations": steps 1 to
 * 4). */
static int migrate1(struct meta *m)
{
	struct migration mg = {0};
	int64_t t0 = util_mono_ns();
	int r;

	log_info("namespace {%s} at %s has layout 1 (objfs before layout keys): migrating it to "
		 "layout %d",
		 m->prefix, m->url, META_LAYOUT);
	r = run_step(m, "objs", NULL, add_objs, &mg);
	/* only records of older versions say nowhere where they are */
	if (r == 0 && mg.unplaced > 0)
		r = run_step(m, "dirs", NULL, each_dir, &mg);
	if (r == 0)
		r = run_step(m, "holders", NULL, add_holders, &mg);
	if (r == 0)
		r = step_done(m, "done", META_LAYOUT_MOVING);
	if (r < 0)
		return migrate_failed(m, r);
	log_info("namespace {%s} migrated to layout 2 in %.1f s: %lld records, %lld entries "
		 "given their attributes, %lld holder sets folded into records and %lld of deleted "
		 "objects dropped; %lld records left as they were (no entry names them, or "
		 "damaged)",
		 m->prefix, (double)(util_mono_ns() - t0) / 1e9, mg.migrated, mg.completed,
		 mg.folded, mg.dropped, mg.left + (mg.unplaced > 0 ? mg.unplaced : 0));
	warn_skipped(m, &mg);
	return 0;
}

static int add_recs(struct meta *m, const redisReply *rep, struct migration *mg)
{
	mg->migrated += elem_int(rep, 1);
	mg->skipped += elem_int(rep, 2);
	if (!mg->first_skipped[0] && elem_text(rep, 3)[0])
		snprintf(mg->first_skipped, sizeof(mg->first_skipped), "%s", elem_text(rep, 3));
	return 0;
}

/* Layout 2 to layout 3 (docs/design.md, "Layout migrations": steps 5
 * and 6). */
static int migrate2(struct meta *m)
{
	struct migration mg = {0};
	int64_t t0 = util_mono_ns();
	int r;

	log_info("namespace {%s} at %s has layout 2: migrating it to layout %d", m->prefix, m->url,
		 META_LAYOUT);
	r = run_step(m, "recs", NULL, add_recs, &mg);
	if (r == 0)
		r = step_done(m, "done3", STR(META_LAYOUT));
	if (r < 0)
		return migrate_failed(m, r);
	log_info("namespace {%s} migrated to layout %d in %.1f s: %lld records moved into "
		 "buckets",
		 m->prefix, META_LAYOUT, (double)(util_mono_ns() - t0) / 1e9, mg.migrated);
	warn_skipped(m, &mg);
	return 0;
}

int meta_layout_settle(struct meta *m)
{
	redisReply *rep;
	const char *l;
	int r;

	r = meta_script(m, MS_MIGRATE, &rep, "ssss", "check", "0", m->node, "");
	if (r < 0)
		return r;
	if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 4 ||
	    rep->element[0]->type != REDIS_REPLY_STRING) {
		freeReplyObject(rep);
		return -EBADMSG;
	}
	l = elem_text(rep, 0);
	if (!strcmp(l, STR(META_LAYOUT))) {
		r = 0;
	} else if (!l[0] || !strcmp(l, "2")) {
		r = elem_text(rep, 1)[0] ? busy(m, l, rep, 1) : l[0] ? 2 : 1;
	} else if (!strcmp(l, META_LAYOUT_MOVING)) {
		r = 2;
	} else {
		char shown[META_SHOWN_MAX];

		set_why(
		    m,
		    "namespace {%s} has layout %s; this objfsd reads and writes layout %d only: "
		    "upgrade it",
		    m->prefix, meta_rep_shown(rep->element[0], shown, sizeof(shown)), META_LAYOUT);
		r = -EPROTO;
	}
	freeReplyObject(rep);
	if (r == 1)
		r = migrate1(m);
	else if (r != 2)
		return r;
	return r < 0 ? r : migrate2(m);
}
