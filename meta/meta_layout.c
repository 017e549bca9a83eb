/*
 * meta_layout: the namespace's layout, checked at connect, and the
 * migration from layout 1.
 *
 * Layout 1 (objfs before the key {P}:layout) kept every object in two
 * keys besides its directory entry: the record o:<id> with size, csum,
 * mtime, origin and attr (copies of the entry's), and the holder set
 * h:<id>.  Layout 2 keeps the record only, with where the object is
 * linked, its hard links, block sums and fetchers as before, and its
 * holders as fields "@<node>"; the attributes live in the entries alone
 * (about 630 B an object in Redis before, under 300 after).  Node cards
 * list themselves in {P}:members instead of {P}:nodes, which becomes a
 * string so that an objfsd of layout 1 fails its claim (meta_i.h,
 * META_LAYOUT_POISON).
 *
 * meta_connect() migrates a namespace of layout 1 when no other node
 * has a live card on it, in steps of a few hundred keys (each step one
 * script, atomic, repeatable: a migration cut short goes on at the next
 * mount), and writes the layout key last:
 *   1. every record (SCAN o:*): each name of the object gets an entry
 *      with the attributes (entries of older versions had none), the
 *      holder set becomes fields, the copied attributes go;
 *   2. only if some record did not say where it is linked (records of
 *      older versions): every directory (SCAN d:*, HSCAN), whose entries
 *      tell those records where they are, then the same as 1;
 *   3. holder sets left (SCAN h:*): of records that 1 met meanwhile, or
 *      of no record at all (deleted);
 *   4. the members move to {P}:members, and {P}:layout is written.
 * Directories, empty or not, symbolic links and tombstones are the same
 * in both layouts: nothing touches them.  A record no entry names
 * keeps its attributes (it was unreachable before too).
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

/* clang-format off */

/*
 * ARGV[5] the step, ARGV[6] its cursor, ARGV[7] this node, ARGV[8] a
 * directory (step "dir").  Replies:
 *   check:   {layout ("" for none), a live node of layout 1 other than
 *            this one or "", its host, its pid}; with no such node, a
 *            namespace of layout 1 gets {P}:nodes turned into the string
 *            that keeps older nodes out (their claim fails) at once, for
 *            the whole migration
 *   objs:    {next cursor, records migrated, entries completed, records
 *            that do not say where they are (older versions: the walk
 *            of the directories finds them), records left as they were
 *            (no entry names them, or damaged), keys skipped (of the
 *            wrong type), the first of those}
 *   dirs:    {next cursor, directory ids...}
 *   dir:     {next HSCAN cursor of directory ARGV[8], then as objs}
 *   holders: {next cursor, holder sets folded, holder sets dropped}
 *   done:    {}: the layout key is written
 */
const char meta_script_migrate[] =
	LUA_BASE LUA_NODES
	"local step, cur, me = ARGV[5], ARGV[6], ARGV[7]\n"
	"local LAYOUT, NODES, MEMBERS = T .. 'layout', T .. 'nodes', T .. 'members'\n"
	"local function hkey(id) return T .. 'h:' .. id end\n"
	/* a live node of layout 1: its card has no field "layout" */
	"local function busy()\n"
	"  local ok, ns = pcall(call, 'SMEMBERS', NODES)\n"
	"  if not ok then ns = {} end\n"
	"  for _, n in ipairs(ns) do\n"
	"    if n ~= me and live(n) then\n"
	"      local c = redis.pcall('HMGET', ckey(n), 'host', 'pid', 'layout')\n"
	"      if type(c) ~= 'table' or c.err then c = {} end\n"
	"      if not c[3] then return {n, c[1] or '', c[2] or ''} end\n"
	"    end\n"
	"  end\n"
	"  return nil\n"
	"end\n"
	/* the holder set of @id becomes fields of its record */
	"local function fold(id)\n"
	"  local ok, hs = pcall(call, 'SMEMBERS', hkey(id))\n"
	"  if ok then\n"
	"    for _, n in ipairs(hs) do call('HSET', okey(id), '@' .. n, '') end\n"
	"  end\n"
	"  call('DEL', hkey(id))\n"
	"end\n"
	/* record @id to layout 2, found at @dir/@name (nil: by the record);
	 * returns migrated, entries completed, unplaced, left (each 0/1 but
	 * the second) */
	"local function migrate(id, dir, name)\n"
	"  local kv = call('HGETALL', okey(id))\n"
	"  if #kv == 0 then return 0, 0, 0, 0 end\n"
	"  local f = {}\n"
	"  for i = 1, #kv - 1, 2 do f[kv[i]] = kv[i + 1] end\n"
	"  if not (f.size or f.csum or f.mtime or f.origin or f.attr) then\n"
	"    fold(id)\n"
	"    return 0, 0, 0, 0\n"
	"  end\n"
	"  local function names(p, n)\n"
	"    return isid(p) and n and n ~= '' and isfile(call('HGET', dkey(p), n), id)\n"
	"  end\n"
	/* its own name is gone: a hard link, or the entry the walk met,
	 * becomes it */
	"  if not names(f.parent, f.name) then\n"
	"    local p2, n2\n"
	"    for k, _ in pairs(f) do\n"
	"      local p, n = string.match(k, '^=(%d+)/(.+)$')\n"
	"      if p and names(p, n) then p2, n2 = p, n break end\n"
	"    end\n"
	"    if not p2 and dir then p2, n2 = dir, name end\n"
	"    if not p2 then\n"
	"      fold(id)\n"
	"      if not f.parent then return 0, 0, 1, 0 end\n"
	"      return 0, 0, 0, 1\n"
	"    end\n"
	"    call('HDEL', okey(id), '=' .. p2 .. '/' .. n2)\n"
	"    call('HSET', okey(id), 'parent', p2, 'name', n2)\n"
	"    f['=' .. p2 .. '/' .. n2] = nil\n"
	"    f.parent, f.name = p2, n2\n"
	"  end\n"
	"  local full = false\n"
	"  if f.size and f.csum and f.mtime and f.origin then\n"
	"    full = fval(id, f.size, f.mtime, f.csum, f.origin, isattr(f.attr) and f.attr)\n"
	"    if not fattrs(string.sub(full, #id + 2)) then full = false end\n"
	"  end\n"
	"  local all, done, whole = {{f.parent, f.name}}, 0, true\n"
	"  for k, _ in pairs(f) do\n"
	"    local p, n = string.match(k, '^=(%d+)/(.+)$')\n"
	"    if p and names(p, n) then all[#all + 1] = {p, n} end\n"
	"  end\n"
	"  for _, pn in ipairs(all) do\n"
	"    local v = call('HGET', dkey(pn[1]), pn[2])\n"
	"    local sz, _, _, _, at = fattrs(string.sub(v, #id + 2))\n"
	"    if full and (not sz or (not at and isattr(f.attr))) then\n"
	"      call('HSET', dkey(pn[1]), pn[2], full)\n"
	"      done = done + 1\n"
	"    elseif not sz then\n"
	"      whole = false\n"
	"    end\n"
	"  end\n"
	"  fold(id)\n"
	/* a damaged record keeps what a repair would need */
	"  if not whole then return 0, done, 0, 1 end\n"
	"  call('HDEL', okey(id), 'size', 'csum', 'mtime', 'origin', 'attr')\n"
	"  return 1, done, 0, 0\n"
	"end\n"
	/* @out: {cursor, migrated, completed, unplaced, left, skipped,
	 * the first skipped} */
	"local function count(out, k, ok, a, b, c, d)\n"
	"  if not ok then\n"
	"    out[6] = out[6] + 1\n"
	"    if out[7] == '' then out[7] = k end\n"
	"    return\n"
	"  end\n"
	"  out[2], out[3], out[4], out[5] = out[2] + a, out[3] + b, out[4] + c, out[5] + d\n"
	"end\n"
	"if step == 'check' then\n"
	"  local l = redis.pcall('GET', LAYOUT)\n"
	"  if l == false then l = '' elseif type(l) ~= 'string' then l = '?' end\n"
	"  if l ~= '' then return {l, '', '', ''} end\n"
	"  local b = busy()\n"
	"  if b then return {l, b[1], b[2], b[3]} end\n"
	"  if call('TYPE', NODES).ok == 'set' then\n"
	"    call('SUNIONSTORE', MEMBERS, MEMBERS, NODES)\n"
	"  end\n"
	"  call('SET', NODES, '" META_LAYOUT_POISON "')\n"
	"  return {l, '', '', ''}\n"
	"end\n"
	"local function scan(pat)\n"
	"  return call('SCAN', cur, 'MATCH', T .. pat, 'COUNT', 1000)\n"
	"end\n"
	"if step == 'objs' then\n"
	"  local page = scan('o:*')\n"
	"  local out = {page[1], 0, 0, 0, 0, 0, ''}\n"
	"  for _, k in ipairs(page[2]) do\n"
	"    local id = string.sub(k, #T + 3)\n"
	"    if isid(id) then count(out, k, pcall(migrate, id)) end\n"
	"  end\n"
	"  return out\n"
	"end\n"
	"if step == 'dirs' then\n"
	"  local page = scan('d:*')\n"
	"  local out = {page[1]}\n"
	"  for _, k in ipairs(page[2]) do\n"
	"    local id = string.sub(k, #T + 3)\n"
	"    if isid(id) then out[#out + 1] = id end\n"
	"  end\n"
	"  return out\n"
	"end\n"
	"if step == 'dir' then\n"
	"  local dir = ARGV[8]\n"
	"  local out = {'0', 0, 0, 0, 0, 0, ''}\n"
	"  local ok, page = pcall(call, 'HSCAN', dkey(dir), cur, 'COUNT', 1000)\n"
	"  if not ok then\n"
	"    count(out, dkey(dir), false)\n"
	"  else\n"
	"    out[1] = page[1]\n"
	"    local kv = page[2]\n"
	"    for i = 1, #kv - 1, 2 do\n"
	"      local id = string.match(kv[i + 1], '^f(%d+)')\n"
	"      if string.sub(kv[i], 1, 1) ~= '/' and isid(id) then\n"
	"        count(out, okey(id), pcall(migrate, id, dir, kv[i]))\n"
	"      end\n"
	"    end\n"
	"  end\n"
	"  return out\n"
	"end\n"
	"if step == 'holders' then\n"
	"  local page, out = scan('h:*'), {0, 0}\n"
	"  for _, k in ipairs(page[2]) do\n"
	"    local id = string.sub(k, #T + 3)\n"
	"    if isid(id) and redis.pcall('TYPE', okey(id)).ok == 'hash' then\n"
	"      fold(id)\n"
	"      out[1] = out[1] + 1\n"
	"    else\n"
	"      call('DEL', k)\n"
	"      out[2] = out[2] + 1\n"
	"    end\n"
	"  end\n"
	"  return {page[1], out[1], out[2]}\n"
	"end\n"
	"if step == 'done' then\n"
	"  call('SET', LAYOUT, '" STR(META_LAYOUT) "')\n"
	"  return {}\n"
	"end\n"
	"fail('EINVAL')\n";

/* clang-format on */

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

/* A node of layout 1 is live on the namespace (reply elements @at.. are
 * its name, host and pid): say who. */
static int busy(struct meta *m, const redisReply *rep, size_t at)
{
	set_why(m,
		"namespace {%s} has layout 1 (objfs before layout keys) and node '%s' (pid %s on "
		"host %s) is live on it: stop every objfs node of this namespace, then mount "
		"again to migrate it to layout %d",
		m->prefix, elem_text(rep, at), elem_text(rep, at + 2), elem_text(rep, at + 1),
		META_LAYOUT);
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
		r = script(m, MS_MIGRATE, &rep, "ssss", step, cursor, m->node, dir ? dir : "");
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

static int migrate(struct meta *m)
{
	struct migration mg = {0};
	int64_t t0 = mono_ns();
	redisReply *rep;
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
	if (r == 0) {
		r = script(m, MS_MIGRATE, &rep, "ssss", "done", "0", m->node, "");
		if (r == 0)
			freeReplyObject(rep);
	}
	if (r < 0) {
		set_why(m, "migrating namespace {%s} to layout %d failed: %s; mount again to go on",
			m->prefix, META_LAYOUT, strerror(-r));
		return r;
	}
	log_info("namespace {%s} migrated to layout %d in %.1f s: %lld records, %lld entries "
		 "given their attributes, %lld holder sets folded into records and %lld of deleted "
		 "objects dropped; %lld records left as they were (no entry names them, or "
		 "damaged)",
		 m->prefix, META_LAYOUT, (double)(mono_ns() - t0) / 1e9, mg.migrated, mg.completed,
		 mg.folded, mg.dropped, mg.left + (mg.unplaced > 0 ? mg.unplaced : 0));
	if (mg.skipped)
		log_warn("namespace {%s}: the migration skipped %lld keys of the wrong type (the "
			 "first: '%s'); they were unreadable before and stay so: delete them",
			 m->prefix, mg.skipped, mg.first_skipped);
	return 0;
}

int meta_layout_settle(struct meta *m)
{
	redisReply *rep;
	const char *l;
	int r;

	r = script(m, MS_MIGRATE, &rep, "ssss", "check", "0", m->node, "");
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
	} else if (!l[0]) {
		r = elem_text(rep, 1)[0] ? busy(m, rep, 1) : 1;
	} else {
		char shown[META_SHOWN_MAX];

		set_why(
		    m,
		    "namespace {%s} has layout %s; this objfsd reads and writes layout %d only: "
		    "upgrade it",
		    m->prefix, rep_shown(rep->element[0], shown, sizeof(shown)), META_LAYOUT);
		r = -EPROTO;
	}
	freeReplyObject(rep);
	return r == 1 ? migrate(m) : r;
}
