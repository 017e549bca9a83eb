/*
 * test-meta-layout: unit tests of the namespace's layout (meta_layout.c):
 * a namespace of layout 1, written key by key as objfs before layout keys
 * wrote it (meta.h of that version), is migrated by meta_layout_settle() with
 * no name, object, holder or empty directory lost; a namespace of
 * another layout, or of layout 1 with another node live on it, is
 * refused with the reason; an older objfsd's node claim fails on a
 * namespace of layout 2 or later; a namespace of layout 2 (a record key
 * per object) is migrated to layout 3 (records in buckets).
 *
 * main() starts a private redis-server as test-meta does (meta-harness.h).
 */
#include "meta-harness.h"

#include "log.h"

#define CS1 "0123456789abcdef0123456789abcdef"
#define CS2 "fedcba9876543210fedcba9876543210"

/* How many keys of namespace @prefix match "{prefix}:@pat" */
static int nkeys(const char *prefix, const char *pat)
{
	char cursor[32] = "0";
	int n = 0;

	do {
		redisReply *rep =
		    redisCommand(raw, "SCAN %s MATCH {%s}:%s COUNT 1000", cursor, prefix, pat);

		if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
			if (rep)
				freeReplyObject(rep);
			return -1;
		}
		snprintf(cursor, sizeof(cursor), "%s", rep->element[0]->str);
		n += (int)rep->element[1]->elements;
		freeReplyObject(rep);
	} while (strcmp(cursor, "0"));
	return n;
}

/* Layout 1 as objfs before layout keys wrote it: a root, directories
 * (one empty, one empty inside another), files with whole entries, a bare
 * entry "f<id>" (older versions), an entry without attributes, a record
 * without "parent" and "name" (older versions), a renamed object, a hard
 * link, a symbolic link, holder sets (one of no record), a record no
 * entry names, a tombstone, and a live node card. */
static void write_layout1(const char *p, const char *node)
{
	rdo("SET {%s}:ctr 42", p);
	rdo("SET {%s}:epoch abcdef0123", p);
	rdo("HSET {%s}:d:1 /mtime 1 /parent 1 /name %s /nsub 2", p, "");
	rdo("HSET {%s}:d:1 dir d100 empty d101 link l300", p);
	rdo("HSET {%s}:d:1 f1 %s", p, "f201 10 5 " CS1 " node-old 0 0 644 5 5");
	rdo("HSET {%s}:d:1 old f202", p);
	rdo("HSET {%s}:d:1 noattr %s", p, "f203 20 6 " CS2 " node-old");
	rdo("HSET {%s}:d:1 hl2 %s", p, "f205 30 8 " CS2 " node-b 0 0 644 8 9 2");
	rdo("HSET {%s}:d:100 /mtime 2 /parent 1 /name dir /nsub 1", p);
	rdo("HSET {%s}:d:100 renamed %s", p, "f204 40 7 " CS1 " node-old 0 0 600 7 7");
	rdo("HSET {%s}:d:100 hl1 %s", p, "f205 30 8 " CS2 " node-b 0 0 644 8 9 2");
	rdo("HSET {%s}:d:100 sub d102", p);
	rdo("HSET {%s}:d:101 /mtime 3 /parent 1 /name empty /nsub 0", p);
	rdo("HSET {%s}:d:102 /mtime 4 /parent 100 /name sub /nsub 0 /attr %s", p, "5 6 700 4 4");
	rdo("HSET {%s}:s:300 t target m 9 p 1 n link", p);
	rdo("HSET {%s}:o:201 size 10 csum %s mtime 5 origin node-old parent 1 name f1 attr %s", p,
	    CS1, "0 0 644 5 5");
	rdo("SADD {%s}:h:201 node-old node-b", p);
	rdo("HSET {%s}:o:202 size 11 csum %s mtime 7 origin node-old parent 1 name old attr %s", p,
	    CS2, "1000 1000 600 7 7");
	rdo("SADD {%s}:h:202 node-old", p);
	rdo("HSET {%s}:o:203 size 20 csum %s mtime 6 origin node-old", p, CS2);
	rdo("SADD {%s}:h:203 node-old", p);
	rdo("HSET {%s}:o:204 size 40 csum %s mtime 7 origin node-old parent 100 name renamed attr "
	    "%s",
	    p, CS1, "0 0 600 7 7");
	rdo("HSET {%s}:o:205 size 30 csum %s mtime 8 origin node-b parent 100 name hl1 attr %s "
	    "=1/hl2 1 bsum %s",
	    p, CS2, "0 0 644 8 9 2", "1:" CS2);
	rdo("SADD {%s}:h:205 node-b", p);
	rdo("HSET {%s}:o:206 size 1 csum %s mtime 1 origin node-old parent 1 name nothere", p, CS1);
	rdo("SADD {%s}:h:206 node-old", p);
	rdo("SADD {%s}:h:207 node-old", p);
	rdo("SET {%s}:t:208 1", p);
	rdo("SADD {%s}:nodes node-old node-b", p);
	if (node)
		rdo("HSET {%s}:node:%s listen 10.0.0.9:7000 host h9 pid 99", p, node);
}

/* What objfsd does at mount */
static int connect_settle(struct meta *m)
{
	int r = meta_connect(m);

	return r < 0 ? r : meta_layout_settle(m);
}

static void check_file(struct meta *m, uint64_t dir, const char *name, uint64_t id, uint64_t size,
		       int64_t mtime, unsigned mode)
{
	struct meta_entry e;

	CHECK_EQ(meta_lookup(m, dir, name, &e), 0);
	CHECK_EQ(e.kind, META_FILE);
	CHECK_EQ(e.id, id);
	CHECK_EQ(e.obj.size, size);
	CHECK_EQ(e.obj.mtime_ns, mtime);
	if (mode)
		CHECK(e.attr.set && e.attr.mode == mode);
	CHECK_EQ(meta_getattr(m, id, &e), 0);
	CHECK_EQ(e.obj.size, size);
}

TEST(migrate)
{
	struct meta *m = mk("t-lay", "node-new", 0, 0), *b;
	char(*nodes)[OBJFS_NODE_MAX];
	struct meta_dirent *ents;
	struct meta_entry e;
	struct meta_obj got;
	char buf[256];
	size_t n;

	write_layout1("t-lay", NULL);
	CHECK_EQ(connect_settle(m), 0);

	/* the layout, the members, and no holder set or record key left */
	rget(buf, sizeof(buf), "GET {t-lay}:layout");
	CHECK_STR(buf, "3");
	rget(buf, sizeof(buf), "GET {t-lay}:nodes");
	CHECK(strstr(buf, "layout 2") != NULL);
	rget(buf, sizeof(buf), "SISMEMBER {t-lay}:members node-old");
	CHECK_STR(buf, "1");
	CHECK_EQ(nkeys("t-lay", "h:*"), 0);
	CHECK_EQ(nkeys("t-lay", "o:*"), 0);
	CHECK_EQ(nkeys("t-lay", "r:*"), 6); /* ids below 10,000: a bucket each */

	/* every name, with its size and mtime, and the records lead there */
	check_file(m, 1, "f1", 201, 10, 5, 0644);
	check_file(m, 1, "old", 202, 11, 7, 0600); /* was bare: given the record's */
	check_file(m, 1, "noattr", 203, 20, 6, 0); /* its record did not say where */
	check_file(m, 100, "renamed", 204, 40, 7, 0600);
	check_file(m, 100, "hl1", 205, 30, 8, 0644);
	check_file(m, 1, "hl2", 205, 30, 8, 0644);
	CHECK_EQ(meta_get_object(m, 202, &got), 0);
	CHECK(got.csum[0] == 0xfe && !strcmp(got.origin, "node-old"));
	CHECK_EQ(nfields("t-lay", 201, "size"), 0);
	CHECK_EQ(nfields("t-lay", 203, "csum"), 0);
	CHECK_EQ(nfields("t-lay", 205, "attr"), 0);
	CHECK_EQ(nfields("t-lay", 205, "bsum"), 1);
	rec_get("t-lay", 203, buf, sizeof(buf));
	CHECK_STR(buf, "1/noattr/@node-old");
	rec_get("t-lay", 205, buf, sizeof(buf));
	CHECK_STR(buf, "100/hl1/@node-b");
	CHECK_EQ(nfields("t-lay", 205, "=1/hl2"), 1);

	/* holders became fields */
	CHECK_EQ(meta_holders(m, 201, &nodes, &n), 0);
	CHECK_EQ(n, 2);
	free(nodes);
	CHECK_EQ(nholders("t-lay", 204), 0);
	CHECK_EQ(nholders("t-lay", 205), 1);
	/* the record no entry names keeps what it had, with its holder */
	CHECK_EQ(nfields("t-lay", 206, "size"), 1);
	CHECK_EQ(nholders("t-lay", 206), 1);
	rget(buf, sizeof(buf), "EXISTS {t-lay}:t:208");
	CHECK_STR(buf, "1");

	/* directories, empty ones too, and the link */
	CHECK_EQ(meta_readdir(m, 101, &ents, &n), 0);
	CHECK_EQ(n, 0);
	meta_dirents_free(ents);
	CHECK_EQ(meta_lookup(m, 100, "sub", &e), 0);
	CHECK(e.kind == META_DIR && e.id == 102);
	CHECK_EQ(meta_getattr(m, 102, &e), 0);
	CHECK(e.attr.uid == 5 && e.attr.mode == 0700);
	CHECK_EQ(meta_readdir(m, 1, &ents, &n), 0);
	CHECK_EQ(n, 7);
	meta_dirents_free(ents);
	{
		char target[META_LINK_MAX + 1];

		CHECK_EQ(meta_readlink(m, 300, target, sizeof(target)), 0);
		CHECK_STR(target, "target");
	}

	/* it all works on: an unlink of one hard link, a publish, a
	 * holder; another node connects without migrating again */
	CHECK_EQ(meta_unlink(m, 1, "hl2", NULL), 1);
	check_file(m, 100, "hl1", 205, 30, 8, 0644);
	b = mk("t-lay", "node-b", 0, 0);
	CHECK_EQ(connect_settle(b), 0);
	CHECK_EQ(meta_add_holder(b, 204), 0);
	CHECK_EQ(nholders("t-lay", 204), 1);
	meta_free(b);
	meta_free(m);
}

/* A migration cut short (its steps ran, the layout key was not written)
 * runs again and finds nothing left to do. */
TEST(migrate_again)
{
	struct meta *m = mk("t-lay2", "node-new", 0, 0);
	char buf[64];

	write_layout1("t-lay2", NULL);
	CHECK_EQ(connect_settle(m), 0);
	rdo("DEL {t-lay2}:layout {t-lay2}:nodes");
	rdo("SADD {t-lay2}:nodes node-old");
	rdo("SADD {t-lay2}:h:201 node-c");
	meta_free(m);
	m = mk("t-lay2", "node-new", 0, 0);
	CHECK_EQ(connect_settle(m), 0);
	rget(buf, sizeof(buf), "GET {t-lay2}:layout");
	CHECK_STR(buf, "3");
	CHECK_EQ(nholders("t-lay2", 201), 3);
	check_file(m, 1, "old", 202, 11, 7, 0600);
	meta_free(m);
}

TEST(refused)
{
	struct meta *m = mk("t-lay3", "node-new", 0, 0);
	char why[256], buf[64];

	/* layout 1 with another node live on it: nothing changes */
	write_layout1("t-lay3", "node-b");
	CHECK_EQ(connect_settle(m), -EBUSY);
	meta_last_error(m, why, sizeof(why));
	CHECK(strstr(why, "layout 1") && strstr(why, "node 'node-b'") && strstr(why, "host h9"));
	rget(buf, sizeof(buf), "EXISTS {t-lay3}:layout {t-lay3}:o:201");
	CHECK_STR(buf, "1");
	CHECK_EQ(nkeys("t-lay3", "h:*"), 6);
	/* its card gone, the next mount migrates */
	rdo("DEL {t-lay3}:node:node-b");
	CHECK_EQ(connect_settle(m), 0);
	meta_free(m);

	/* a layout this objfsd does not know */
	m = mk("t-lay4", "node-new", 0, 0);
	rdo("SET {t-lay4}:layout 4");
	rdo("HSET {t-lay4}:d:1 /mtime 1 /parent 1 /name %s /nsub 0", "");
	CHECK_EQ(connect_settle(m), -EPROTO);
	meta_last_error(m, why, sizeof(why));
	CHECK(strstr(why, "layout '4'") && strstr(why, "upgrade"));
	meta_free(m);

	/* a namespace made afresh has layout 3, and an objfsd of layout 1's
	 * claim (SADD {P}:nodes) fails there */
	m = mk_connected("t-lay5");
	rget(buf, sizeof(buf), "GET {t-lay5}:layout");
	CHECK_STR(buf, "3");
	rget(buf, sizeof(buf), "SADD {t-lay5}:nodes node-old");
	CHECK_STR(buf, ""); /* an error reply */
	rget(buf, sizeof(buf), "GET {t-lay5}:nodes");
	CHECK(strstr(buf, "layout 2") != NULL);
	/* a FLUSHALL: the next call makes it afresh, layout 3 again */
	rdo("DEL {t-lay5}:layout {t-lay5}:nodes {t-lay5}:d:1 {t-lay5}:ctr {t-lay5}:epoch");
	CHECK_EQ(meta_mkdir(m, 1, "x", 1, NULL), 0);
	rget(buf, sizeof(buf), "GET {t-lay5}:layout");
	CHECK_STR(buf, "3");
	meta_free(m);
}

/* What review found: a key of the wrong type, a record whose own name is
 * gone but a hard link's is not, a damaged record, a layout 1 that lost
 * only its root, a node of layout 2 live on a namespace that lost its
 * layout key (a restore), and the heartbeat's way back from that
 * (node_tick() settles the layout when the epoch read gives EPROTO). */
TEST(hard_cases)
{
	struct meta *m = mk("t-lay6", "node-new", 0, 0), *b;
	struct meta_attr base = {.set = true, .mode = 0644};
	struct meta_entry e;
	char buf[256], epoch[64];

	write_layout1("t-lay6", NULL);
	rdo("SET {t-lay6}:o:900 garbage");
	rdo("HSET {t-lay6}:d:1 hlx %s", "f209 5 1 " CS1 " node-old 0 0 644");
	rdo("HSET {t-lay6}:o:209 size 5 csum %s mtime 1 origin node-old parent 1 name gone =1/hlx "
	    "1",
	    CS1);
	rdo("HSET {t-lay6}:d:1 dmg f210");
	rdo("HSET {t-lay6}:o:210 size 5 csum %s mtime abc origin node-old parent 1 name dmg", CS1);
	rdo("DEL {t-lay6}:d:1"); /* the root alone lost: layout 1 all the same */
	CHECK_EQ(connect_settle(m), 0);
	rget(buf, sizeof(buf), "GET {t-lay6}:layout");
	CHECK_STR(buf, "3");
	CHECK_EQ(nkeys("t-lay6", "h:*"), 0);
	meta_free(m);

	/* with a root again */
	m = mk("t-lay7", "node-new", 0, 0);
	write_layout1("t-lay7", NULL);
	rdo("SET {t-lay7}:o:900 garbage");
	rdo("HSET {t-lay7}:d:1 hlx %s", "f209 5 1 " CS1 " node-old 0 0 644");
	rdo("HSET {t-lay7}:o:209 size 5 csum %s mtime 1 origin node-old parent 1 name gone =1/hlx "
	    "1",
	    CS1);
	rdo("HSET {t-lay7}:d:1 dmg f210");
	rdo("HSET {t-lay7}:o:210 size 5 csum %s mtime abc origin node-old parent 1 name dmg", CS1);
	CHECK_EQ(connect_settle(m), 0);
	rget(buf, sizeof(buf), "GET {t-lay7}:layout");
	CHECK_STR(buf, "3");
	/* the hard link became the record's own name, once */
	rec_get("t-lay7", 209, buf, sizeof(buf));
	CHECK_STR(buf, "1/hlx");
	CHECK_EQ(nfields("t-lay7", 209, "="), 0);
	CHECK_EQ(meta_link(m, 209, 1, "hly", &base, &e), 0);
	CHECK_EQ(e.attr.nlink, 2);
	/* the damaged record keeps what a repair needs */
	CHECK_EQ(nfields("t-lay7", 210, "size"), 1);
	check_file(m, 1, "f1", 201, 10, 5, 0644);

	/* a restore from before the migration, while a node of layout 3
	 * is live: its next heartbeat (meta_epoch) migrates again */
	b = mk("t-lay7", "node-b", 0, 0);
	rdo("HSET {t-lay7}:node:node-b listen 10.0.0.2:7000 host h2 pid 2 layout 3");
	rdo("DEL {t-lay7}:layout");
	rdo("SADD {t-lay7}:h:201 node-c");
	CHECK_EQ(meta_mkdir(m, 1, "x", 1, NULL), -EPROTO);
	CHECK_EQ(meta_epoch(m, epoch, sizeof(epoch)), -EPROTO);
	/* meanwhile no call takes a record it cannot find in its bucket
	 * (here a record key of layout 2, restored) for a deleted object:
	 * the evictor would drop the last copy, a fetch its copy */
	rdo("HSET {t-lay7}:d:1 r211 %s", "f211 5 1 " CS1 " node-new 0 0 644");
	rdo("HSET {t-lay7}:o:211 parent 1 name r211 @node-new %s", "");
	CHECK_EQ(meta_release_replica(m, 211), -EPROTO);
	CHECK_EQ(meta_add_holder(m, 211), -EPROTO);
	{
		struct meta_holder *hs = NULL;
		struct meta_obj got;
		size_t n;

		CHECK_EQ(meta_locate(m, 211, &got, &hs, &n, NULL), -EPROTO);
		free(hs);
	}
	/* a node of layout 2 live on it: no migration */
	rdo("HSET {t-lay7}:node:node-c listen 10.0.0.3:7000 host h3 pid 3 layout 2");
	rdo("SADD {t-lay7}:members node-c");
	CHECK_EQ(meta_layout_settle(m), -EBUSY);
	rdo("DEL {t-lay7}:node:node-c");
	/* what node_tick() does then */
	CHECK_EQ(meta_layout_settle(m), 0);
	CHECK_EQ(meta_epoch(m, epoch, sizeof(epoch)), 0);
	rget(buf, sizeof(buf), "GET {t-lay7}:layout");
	CHECK_STR(buf, "3");
	CHECK_EQ(nholders("t-lay7", 201), 3);
	rec_get("t-lay7", 211, buf, sizeof(buf));
	CHECK_STR(buf, "1/r211/@node-new");
	CHECK_EQ(meta_release_replica(m, 211), 0); /* the only copy */
	CHECK_EQ(meta_mkdir(m, 1, "x", 1, NULL), 0);
	meta_free(b);
	meta_free(m);
}

/* Layout 2 as the objfsd before layout 3 wrote it: records o:<id> with
 * where they are linked, holders "@<node>", a hard link, block sums and
 * a fetcher; one with an id of many digits, one damaged, a key of the
 * wrong type; directories (one empty) and a symbolic link; and, with
 * @node, that node's live card of layout 2. */
static void write_layout2(const char *p, const char *node)
{
	rdo("SET {%s}:layout 2", p);
	rdo("SET {%s}:nodes %s", p, "objfs namespace layout 2: this objfsd is too old for it");
	rdo("SADD {%s}:members node-old node-b", p);
	rdo("SET {%s}:ctr 42", p);
	rdo("SET {%s}:epoch abcdef0123", p);
	rdo("HSET {%s}:d:1 /mtime 1 /parent 1 /name %s /nsub 2", p, "");
	rdo("HSET {%s}:d:1 dir d100 empty d101 link l300", p);
	rdo("HSET {%s}:d:1 f1 %s", p, "f201 10 5 " CS1 " node-old 0 0 644");
	rdo("HSET {%s}:d:1 hl2 %s", p, "f205 30 8 " CS2 " node-b 0 0 644 8 9 2");
	rdo("HSET {%s}:d:1 big %s", p, "f12345678901234567 20 6 " CS2 " node-old 0 0 600");
	rdo("HSET {%s}:d:1 dmg %s", p, "f206 1 1 " CS1 " node-old 0 0 644");
	rdo("HSET {%s}:d:100 /mtime 2 /parent 1 /name dir /nsub 0", p);
	rdo("HSET {%s}:d:100 renamed %s", p, "f204 40 7 " CS1 " node-old 0 0 600");
	rdo("HSET {%s}:d:100 hl1 %s", p, "f205 30 8 " CS2 " node-b 0 0 644 8 9 2");
	rdo("HSET {%s}:d:101 /mtime 3 /parent 1 /name empty /nsub 0", p);
	rdo("HSET {%s}:s:300 t target m 9 p 1 n link", p);
	rdo("HSET {%s}:o:201 parent 1 name f1 @node-old %s @node-b %s", p, "", "");
	rdo("HSET {%s}:o:204 parent 100 name renamed", p);
	rdo("HSET {%s}:o:205 parent 100 name hl1 =1/hl2 1 bsum %s ~p:node-c 99999999999999 "
	    "@node-b %s",
	    p, "1:" CS2, "");
	rdo("ZADD {%s}:fan 99999999999999 %s", p, "205 node-c");
	rdo("HSET {%s}:o:12345678901234567 parent 1 name big @node-old %s", p, "");
	rdo("HSET {%s}:o:206 parent 1 size 1 @node-old %s", p, "");
	rdo("SET {%s}:o:900 garbage", p);
	if (node)
		rdo("HSET {%s}:node:%s listen 10.0.0.9:7000 host h9 pid 99 layout 2", p, node);
}

/* Layout 2 to 3: every record becomes a field of its bucket, its other
 * fields go to x:<id>, and nothing else changes; refused while a node
 * of layout 2 is live; a migration cut short goes on. */
TEST(migrate2)
{
	struct meta *m = mk("t-l2", "node-new", 0, 0);
	char(*nodes)[OBJFS_NODE_MAX];
	struct meta_locate l;
	struct meta_dirent *ents;
	struct meta_entry e;
	char buf[256], why[256];
	size_t n;

	write_layout2("t-l2", "node-b");
	CHECK_EQ(connect_settle(m), -EBUSY);
	meta_last_error(m, why, sizeof(why));
	CHECK(strstr(why, "layout 2 and node 'node-b'") && strstr(why, "host h9"));
	rget(buf, sizeof(buf), "GET {t-l2}:layout");
	CHECK_STR(buf, "2");
	CHECK_EQ(nkeys("t-l2", "o:*"), 6);
	/* its card gone, the next mount migrates */
	rdo("DEL {t-l2}:node:node-b");
	CHECK_EQ(connect_settle(m), 0);
	rget(buf, sizeof(buf), "GET {t-l2}:layout");
	CHECK_STR(buf, "3");
	CHECK_EQ(nkeys("t-l2", "o:*"), 1); /* the key of the wrong type stays */

	/* the records, in their buckets */
	rec_get("t-l2", 201, buf, sizeof(buf));
	CHECK_STR(buf, "1/f1/@node-old/@node-b");
	rec_get("t-l2", 12345678901234567ULL, buf, sizeof(buf));
	CHECK_STR(buf, "1/big/@node-old");
	rget(buf, sizeof(buf), "HGET {t-l2}:r:4567 12345678901234567");
	CHECK_STR(buf, "1/big/@node-old");
	rec_get("t-l2", 204, buf, sizeof(buf));
	CHECK_STR(buf, "100/renamed");
	rec_get("t-l2", 205, buf, sizeof(buf));
	CHECK_STR(buf, "100/hl1/@node-b");
	CHECK_EQ(nfields("t-l2", 205, "=1/hl2"), 1);
	CHECK_EQ(nfields("t-l2", 205, "bsum"), 1);
	CHECK_EQ(nfields("t-l2", 205, "~p:node-c"), 1);
	CHECK_EQ(nfields("t-l2", 201, ""), 0); /* no extras, no key */
	rget(buf, sizeof(buf), "EXISTS {t-l2}:x:201");
	CHECK_STR(buf, "0");
	/* the damaged one keeps what it had */
	rec_get("t-l2", 206, buf, sizeof(buf));
	CHECK_STR(buf, "1//@node-old");
	CHECK_EQ(nfields("t-l2", 206, "size"), 1);
	CHECK_EQ(meta_get_object(m, 206, &l.obj), -EBADMSG);

	/* every name, its attributes, holders, links and sums */
	check_file(m, 1, "f1", 201, 10, 5, 0644);
	check_file(m, 1, "big", 12345678901234567ULL, 20, 6, 0600);
	check_file(m, 100, "renamed", 204, 40, 7, 0600);
	check_file(m, 100, "hl1", 205, 30, 8, 0644);
	check_file(m, 1, "hl2", 205, 30, 8, 0644);
	CHECK_EQ(meta_holders(m, 201, &nodes, &n), 0);
	CHECK(n == 2 && !strcmp(nodes[0], "node-old") && !strcmp(nodes[1], "node-b"));
	free(nodes);
	CHECK_EQ(meta_readdir(m, 101, &ents, &n), 0);
	CHECK_EQ(n, 0);
	meta_dirents_free(ents);
	CHECK_EQ(meta_readdir(m, 1, &ents, &n), 0);
	CHECK_EQ(n, 7);
	meta_dirents_free(ents);
	CHECK_EQ(meta_locate_fan(m, 205, META_LOCATE_SUMS, 0, 0, &l), 0);
	CHECK(l.bsum != NULL && !strcmp(l.bsum, "1:" CS2));
	meta_locate_release(&l);

	/* it all works on: an unlink of the record's own name moves it to
	 * the hard link's; a rename; a publish over */
	CHECK_EQ(meta_unlink(m, 100, "hl1", NULL), 1);
	rec_get("t-l2", 205, buf, sizeof(buf));
	CHECK_STR(buf, "1/hl2"); /* the locate dropped node-b: no card */
	CHECK_EQ(nfields("t-l2", 205, "="), 0);
	CHECK_EQ(meta_rename(m, 1, "big", 100, "big2", 0, false, NULL), 0);
	rec_get("t-l2", 12345678901234567ULL, buf, sizeof(buf));
	CHECK_STR(buf, "100/big2/@node-old");
	CHECK_EQ(meta_unlink(m, 1, "hl2", NULL), 0);
	CHECK_EQ(rec_exists("t-l2", 205), 0);
	rget(buf, sizeof(buf), "EXISTS {t-l2}:x:205");
	CHECK_STR(buf, "0");
	rget(buf, sizeof(buf), "ZCARD {t-l2}:fan");
	CHECK_STR(buf, "0");
	(void)e;
	meta_free(m);

	/* cut short: the layout key says a migration is under way, and
	 * some records are still keys of their own */
	m = mk("t-l2b", "node-new", 0, 0);
	write_layout2("t-l2b", NULL);
	rdo("SET {t-l2b}:layout 2>3");
	rdo("HSET {t-l2b}:r:201 201 %s", "1/f1/@node-old");
	rdo("DEL {t-l2b}:o:201");
	/* a record whose bucket is damaged cannot move: the migration
	 * stops, names it, and loses nothing */
	rdo("SET {t-l2b}:r:204 junk");
	CHECK_EQ(connect_settle(m), -EBADMSG);
	meta_last_error(m, why, sizeof(why));
	CHECK(strstr(why, "layout 3") != NULL);
	rget(buf, sizeof(buf), "GET {t-l2b}:layout");
	CHECK_STR(buf, "2>3");
	rget(buf, sizeof(buf), "HGET {t-l2b}:o:204 name");
	CHECK_STR(buf, "renamed");
	rdo("DEL {t-l2b}:r:204");
	CHECK_EQ(connect_settle(m), 0);
	rget(buf, sizeof(buf), "GET {t-l2b}:layout");
	CHECK_STR(buf, "3");
	CHECK_EQ(nkeys("t-l2b", "o:*"), 1);
	check_file(m, 1, "f1", 201, 10, 5, 0644);
	check_file(m, 100, "renamed", 204, 40, 7, 0600);
	meta_free(m);
}

int main(void)
{
	harness_begin("test-meta-layout");
	RUN(migrate);
	RUN(migrate_again);
	RUN(refused);
	RUN(hard_cases);
	RUN(migrate2);
	return harness_end();
}
