/*
 * meta_scripts: the Lua scripts of the location service, as C strings.
 *
 * Each script is one atomic change (or one consistent read) of the
 * namespace.  meta_pool.c loads them with SCRIPT LOAD on every new
 * connection and calls them with EVALSHA; the calling convention (ARGV
 * header, error replies) is in meta_i.h, the key schema in meta.h.
 *
 * Rules every script follows:
 *   - all checks come before the first write, because Redis does not roll
 *     back the writes of a script that fails half-way;
 *   - ids stay strings: Lua numbers are doubles and print big values in
 *     exponent notation, so a new id is read back with GET after INCR;
 *   - a value read from Redis that is not what a script wrote gives
 *     EBADMSG, never a Lua runtime error;
 *   - every namespace script starts by recreating the root, the counter and
 *     the epoch if they are missing, so a FLUSHALL (or a Redis that came
 *     back empty) heals on the next call of any node, and then checks the
 *     namespace's layout (meta_lua.h, LUA_NS).
 */
#include "meta.h"
#include "meta_i.h"
#include "meta_lua.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */

/* ARGV: (header).  The namespace init alone, run on every new connection.
 * Returns the layout: "2", "" if there is no layout key (layout 1, which
 * meta_connect() migrates), "?" if the key is not a string; never an
 * error of its own (a corrupt epoch must not fail the connection). */
static const char script_init[] =
	LUA_HEAL
	"local l = redis.pcall('GET', LAYOUT)\n"
	"if l == false then return '' end\n"
	"if type(l) ~= 'string' then return '?' end\n"
	"return l\n";

/* ARGV: (header).  Returns the epoch token. */
static const char script_epoch[] =
	LUA_NS
	"return call('GET', NS .. 'epoch')\n";

/* ARGV[5] candidate ids, separated by spaces.  Returns those that
 * nothing in Redis uses (no directory, record, symbolic link or tombstone),
 * in the same order. */
static const char script_alloc[] =
	LUA_NS
	"local out = {}\n"
	"for c in string.gmatch(ARGV[5], '%S+') do\n"
	"  if unused(c) then out[#out + 1] = c end\n"
	"end\n"
	"return out\n";

/*
 * ARGV[5] parent, ARGV[6] name.  Returns {"d<id>", mtime, nsub} or
 * {"f<id>", size, csum, mtime, origin}; fields may be nil if the record is
 * damaged (meta.c gives EBADMSG).
 */
static const char script_lookup[] =
	LUA_NS
	"local parent, name = ARGV[5], ARGV[6]\n"
	"local v = call('HGET', dkey(parent), name)\n"
	"if not v then\n"
	"  needdir(parent)\n"
	"  fail('ENOENT')\n"
	"end\n"
	"local k, id = parse(v, parent, name)\n"
	"if k == 'd' then\n"
	"  local a = call('HMGET', dkey(id), '/mtime', '/nsub', '/attr')\n"
	"  return {v, a[1], a[2], a[3]}\n"
	"end\n"
	"if k == 'l' then return linkattrs(id) end\n"
	"local sz, mt, cs, og, at = fattrs(string.sub(v, #id + 2))\n"
	"if sz then return {k .. id, sz, cs, mt, og, at} end\n"
	"local a = recof(id) or {}\n"
	"return {k .. id, a[1], a[2], a[3], a[4], a[5]}\n";

/* ARGV[5] id.  Same reply as lookup. */
static const char script_getattr[] =
	LUA_NS
	"local id = ARGV[5]\n"
	"if call('EXISTS', dkey(id)) == 1 then\n"
	"  local a = call('HMGET', dkey(id), '/mtime', '/nsub', '/attr')\n"
	"  return {'d' .. id, a[1], a[2], a[3]}\n"
	"end\n"
	"local a = recof(id)\n"
	"if a then\n"
	"  return {'f' .. id, a[1], a[2], a[3], a[4], a[5]}\n"
	"end\n"
	"if call('EXISTS', skey(id)) == 1 then return linkattrs(id) end\n"
	"fail('ENOENT')\n";

/* ARGV[5] directory id.  Returns the whole hash (meta.c skips the "/"
 * fields). */
static const char script_readdir[] =
	LUA_NS
	"needdir(ARGV[5])\n"
	"return call('HGETALL', dkey(ARGV[5]))\n";

/*
 * ARGV[5] directory id, ARGV[6] HSCAN cursor ("0" to start).  One page of
 * the listing: HSCAN ... COUNT 1000, so that a huge directory never holds
 * Redis up for long.  Returns {next cursor ("0": done), entries}, entries
 * being name, then for each name what lookup returns for it: {"d<id>",
 * mtime, nsub} or {"f<id>", size, csum, mtime, origin} (from the entry, or
 * from the record for an entry without them; nil fields where the record
 * is damaged), or {value} alone when the value is not an entry
 * (meta.c skips the name and says why) or its record is not a hash (the
 * name is listed without attributes; a lookup of it says why).  A name may come twice (HSCAN
 * does that while the hash is resized): the caller dedupes.
 */
static const char script_readdir_page[] =
	LUA_NS
	"local dir = ARGV[5]\n"
	"needdir(dir)\n"
	"local page = call('HSCAN', dkey(dir), ARGV[6], 'COUNT', 1000)\n"
	"local kv, out = page[2], {}\n"
	"for i = 1, #kv, 2 do\n"
	"  local name, v = kv[i], kv[i + 1]\n"
	"  if string.sub(name, 1, 1) ~= '/' then\n"
	"    local ok, k, id = pcall(parse, v, dir, name)\n"
	"    local e, a = {v}\n"
	"    if ok and k == 'd' then\n"
	"      ok, a = pcall(call, 'HMGET', dkey(id), '/mtime', '/nsub', '/attr')\n"
	"      if ok then e = {v, a[1], a[2], a[3]} end\n"
	"    elseif ok and k == 'l' then\n"
	"      ok, a = pcall(linkattrs, id)\n"
	"      if ok then e = a end\n"
	"    elseif ok then\n"
	"      local sz, mt, cs, og, at = fattrs(string.sub(v, #id + 2))\n"
	"      if sz then\n"
	"        e = {k .. id, sz, cs, mt, og, at}\n"
	"      else\n"
	"        ok, a = pcall(recof, id)\n"
	"        if ok and a then e = {k .. id, a[1], a[2], a[3], a[4], a[5]} end\n"
	"      end\n"
	"    end\n"
	"    out[#out + 1] = name\n"
	"    out[#out + 1] = e\n"
	"  end\n"
	"end\n"
	"return {page[1], out}\n";

/* ARGV[5] parent, ARGV[6] name, ARGV[7] mtime, ARGV[8] the new id (EAGAIN
 * if it is in use), ARGV[9] its owner, mode and times ("": none; see
 * script_setattr).  Returns the new id. */
static const char script_mkdir[] =
	LUA_NS
	"local parent, name, id = ARGV[5], ARGV[6], ARGV[8]\n"
	"needdir(parent)\n"
	/* a repeat of this very call (a retry after a lost reply) */
	"local v = call('HGET', dkey(parent), name)\n"
	"if v == 'd' .. id then return id end\n"
	"if v then fail('EEXIST') end\n"
	"if not unused(id) then fail('EAGAIN') end\n"
	"if ARGV[9] ~= '' and not isattr(ARGV[9]) then fail('EINVAL') end\n"
	"newdir(parent, name, id, ARGV[7], ARGV[9])\n"
	"inval('mkdir', parent, name, id)\n"
	"return id\n";

/* ARGV[5] parent, ARGV[6] name.  Returns the removed directory's id. */
static const char script_rmdir[] =
	LUA_NS
	"local parent, name = ARGV[5], ARGV[6]\n"
	"needdir(parent)\n"
	"local v = call('HGET', dkey(parent), name)\n"
	"if not v then fail('ENOENT') end\n"
	"local k, id = parse(v, parent, name)\n"
	"if k ~= 'd' then fail('ENOTDIR') end\n"
	"if not isempty(id) then fail('ENOTEMPTY') end\n"
	"call('DEL', dkey(id))\n"
	"call('HDEL', dkey(parent), name)\n"
	"call('HINCRBY', dkey(parent), '/nsub', -1)\n"
	"call('HSET', dkey(parent), '/mtime', NOW)\n"
	"inval('rmdir', parent, name, id)\n"
	"return id\n";

/*
 * ARGV[5] parent, ARGV[6] name, ARGV[7] id, ARGV[8] size, ARGV[9] csum,
 * ARGV[10] mtime, ARGV[11] origin, ARGV[12] replace ("0"/"1"), ARGV[13]
 * this node, ARGV[14] the highest write sequence this node has seen,
 * ARGV[15] the object's block sums ("": none; field bsum, see bsum.h),
 * ARGV[16] its owner, mode and times ("<uid> <gid> <mode> <atime>
 * <ctime>", see script_setattr; "": none).
 * Returns {replaced id or "0", full path or "", write sequence}.
 * Publishing the same id under the same name again (a retry after a lost
 * reply) succeeds and replaces nothing.  ENOTUNIQ if the id belongs to
 * another object (a record with other bytes, or a tombstone).
 *
 * The write sequence (the counter) goes up by one with every publish.  A
 * value not above what this node saw before means Redis went back in
 * time (a restore, a failover to a replica that lacked the last writes):
 * every node is told to reconcile at once ("resync" on P:inval).
 */
static const char script_publish[] =
	LUA_NS
	"local parent, name, id = ARGV[5], ARGV[6], ARGV[7]\n"
	"needdir(parent)\n"
	"if ARGV[16] ~= '' and not isattr(ARGV[16]) then fail('EINVAL') end\n"
	"local rec = recof(id)\n"
	"if rec and rec[1] then\n"
	"  if rec[1] ~= ARGV[8] or rec[2] ~= ARGV[9] then fail('ENOTUNIQ') end\n"
	"elseif call('EXISTS', tkey(id)) == 1 then\n"
	"  fail('ENOTUNIQ')\n"
	"end\n"
	"local v = call('HGET', dkey(parent), name)\n"
	"local replaced, rk = '0', nil\n"
	"if v then\n"
	"  local k, oid = parse(v, parent, name)\n"
	"  if k == 'd' then fail('EISDIR') end\n"
	"  if oid ~= id then\n"
	"    if ARGV[12] ~= '1' then fail('EEXIST') end\n"
	"    replaced, rk = oid, k\n"
	"  end\n"
	"end\n"
	"local path = pathof(parent, name)\n"
	/* a file replaced that has other names lives on; a link goes */
	"local rpl = rk == 'f' and unname_plan(replaced, parent, name)\n"
	"if rpl then\n"
	"  unname_apply(rpl)\n"
	"  replaced = '0'\n"
	"elseif rk == 'l' then\n"
	"  call('DEL', skey(replaced))\n"
	"elseif replaced ~= '0' then\n"
	"  bury(replaced)\n"
	"end\n"
	"recset(id, parent, name)\n"
	"if ARGV[15] ~= '' then call('HSET', xkey(id), 'bsum', ARGV[15]) end\n"
	"hold(id, ARGV[13])\n"
	"call('HSET', dkey(parent), name,\n"
	"     fval(id, ARGV[8], ARGV[10], ARGV[9], ARGV[11], ARGV[16]), '/mtime', NOW)\n"
	"if replaced ~= '0' then\n"
	"  inval('replace', parent, name, id)\n"
	"else\n"
	"  inval('publish', parent, name, id)\n"
	"end\n"
	"local seq = redis.pcall('INCR', CTR)\n"
	"local seen = tonumber(ARGV[14]) or 0\n"
	"if type(seq) ~= 'number' or seq <= seen then\n"
	"  seq = seen + 1\n"
	"  call('SET', CTR, string.format('%d', seq))\n"
	"  call('SPUBLISH', CHAN, '- resync 0 - 0')\n"
	"end\n"
	"return {replaced, path, string.format('%d', seq)}\n";

/* ARGV[5] parent, ARGV[6] name.  Returns {kind, id, full path}. */
static const char script_path[] =
	LUA_NS
	"local parent, name = ARGV[5], ARGV[6]\n"
	"needdir(parent)\n"
	"local v = call('HGET', dkey(parent), name)\n"
	"if not v then fail('ENOENT') end\n"
	"local k, id = parse(v, parent, name)\n"
	"return {k, id, pathof(parent, name)}\n";

/* ARGV[5] object id.  Returns the object's full path now, or "" if its
 * record does not say where it lives (older records) or that place does
 * not name it. */
static const char script_objpath[] =
	LUA_NS
	"local id = ARGV[5]\n"
	"local o = rec(id)\n"
	"if not o or not o.p then return '' end\n"
	"if not isfile(call('HGET', dkey(o.p), o.n), id) then return '' end\n"
	"return pathof(o.p, o.n)\n";

/*
 * ARGV[5] id, ARGV[6] what changes: some of the letters "ugmat" (uid,
 * gid, mode, atime, mtime), ARGV[7] uid, ARGV[8] gid, ARGV[9] mode
 * (octal), ARGV[10] atime, ARGV[11] mtime, ARGV[12] the attributes an
 * entry without any shows ("<uid> <gid> <mode> <atime> <ctime>": the
 * caller's mount defaults).  The change is merged here, so that two
 * nodes changing different fields at once both keep theirs; ctime
 * becomes now.  A file's attributes live in its record (field "attr"),
 * and in its entry for lookups and listings; a directory's in its own
 * hash ("/attr"); mtime where it was ("mtime", "/mtime").  Returns what
 * getattr returns after the change.  ENOENT if @id is neither.
 */
static const char script_setattr[] =
	LUA_NS
	"local id, what = ARGV[5], ARGV[6]\n"
	"local function has(c) return string.find(what, c, 1, true) ~= nil end\n"
	"if not isattr(ARGV[12]) or not string.match(ARGV[7], '^%d+$') or\n"
	"   not string.match(ARGV[8], '^%d+$') or not string.match(ARGV[9], '^[0-7]+$') or\n"
	"   not string.match(ARGV[10], '^%-?%d+$') or not string.match(ARGV[11], '^%-?%d+$')\n"
	"then\n"
	"  fail('EINVAL')\n"
	"end\n"
	/* @cur as changed; @mt the mtime before, the atime of attributes that have none of their own (a number, or EBADMSG before any write) */
	"local function merged(cur, mt)\n"
	"  if not string.match(mt or '', '^%-?%d+$') then\n"
	"    fail('EBADMSG ' .. id .. ': its mtime is ' .. shown(mt))\n"
	"  end\n"
	"  if not isattr(cur) then cur = ARGV[12] end\n"
	"  local u, g, m, a, c, n = attrparts(cur, mt)\n"
	"  if has('u') then u = ARGV[7] end\n"
	"  if has('g') then g = ARGV[8] end\n"
	"  if has('m') then m = ARGV[9] end\n"
	"  if has('a') then a = ARGV[10] end\n"
	"  return attrjoin(u, g, m, a, NOW, n)\n"
	"end\n"
	"local mt = has('t') and ARGV[11]\n"
	"if call('EXISTS', dkey(id)) == 1 then\n"
	"  local b = call('HMGET', dkey(id), '/attr', '/mtime')\n"
	"  local at = merged(b[1], b[2])\n"
	"  call('HSET', dkey(id), '/attr', at)\n"
	"  if mt then call('HSET', dkey(id), '/mtime', mt) end\n"
	"  local a = call('HMGET', dkey(id), '/mtime', '/nsub')\n"
	"  inval('attr', '0', '-', id)\n"
	"  return {'d' .. id, a[1], a[2], at}\n"
	"end\n"
	"if call('EXISTS', skey(id)) == 1 then\n"
	"  local b = call('HMGET', skey(id), 'a', 'm')\n"
	"  call('HSET', skey(id), 'a', merged(b[1], b[2]))\n"
	"  if mt then call('HSET', skey(id), 'm', mt) end\n"
	"  inval('attr', '0', '-', id)\n"
	"  return linkattrs(id)\n"
	"end\n"
	"local a = recof(id)\n"
	"if not a then fail('ENOENT') end\n"
	"if not a[1] or not a[2] or not a[3] or not a[4] then\n"
	"  fail('EBADMSG object ' .. id .. ': its record lacks size, csum, mtime or origin')\n"
	"end\n"
	"local at = merged(a[5], a[3])\n"
	"if mt then a[3] = mt end\n"
	/* every name of the file shows the change (hard links) */
	"local names = namesof(id, a)\n"
	"local v = fval(id, a[1], a[3], a[2], a[4], at)\n"
	"for _, pn in ipairs(names) do call('HSET', dkey(pn[1]), pn[2], v) end\n"
	"inval('attr', '0', '-', id)\n"
	"return {'f' .. id, a[1], a[2], a[3], a[4], at}\n";

/*
 * ARGV[5] parent, ARGV[6] name, ARGV[7] mtime, ARGV[8] the new id (EAGAIN
 * if it is in use), ARGV[9] the target (1 to 4,095 bytes, no NUL; meta.c
 * checks), ARGV[10] owner, mode and times (see script_setattr).  A
 * symbolic link is entry "l<id>" and hash s:<id>: "t" its target, "m"
 * its mtime, "a" its attributes, "p" and "n" where it is linked.
 * Returns what lookup returns of it.  A repeat of this very call (a
 * retry after a lost reply) finds its link there and returns it.
 */
static const char script_symlink[] =
	LUA_NS
	"local parent, name, id = ARGV[5], ARGV[6], ARGV[8]\n"
	"needdir(parent)\n"
	"if ARGV[10] ~= '' and not isattr(ARGV[10]) then fail('EINVAL') end\n"
	"local v = call('HGET', dkey(parent), name)\n"
	"if v == 'l' .. id then return linkattrs(id) end\n"
	"if v then fail('EEXIST') end\n"
	"if not unused(id) then fail('EAGAIN') end\n"
	"call('HSET', skey(id), 't', ARGV[9], 'm', ARGV[7], 'p', parent, 'n', name)\n"
	"if ARGV[10] ~= '' then call('HSET', skey(id), 'a', ARGV[10]) end\n"
	"call('HSET', dkey(parent), name, 'l' .. id, '/mtime', NOW)\n"
	"inval('symlink', parent, name, id)\n"
	"return linkattrs(id)\n";

/* ARGV[5] a symbolic link's id.  Returns its target. */
static const char script_readlink[] =
	LUA_NS
	"local t = call('HGET', skey(ARGV[5]), 't')\n"
	"if not t then fail('ENOENT') end\n"
	"return t\n";

/*
 * ARGV[5] a file's id, ARGV[6] the new name's directory, ARGV[7] the new
 * name, ARGV[8] the attributes a file without any shows (the caller's
 * mount defaults).  Gives the file another name (link(2)): the record
 * keeps it as field "=<parent>/<name>" (the record's own "parent" and
 * "name" stay the first), the attributes count the names, and every
 * entry of the file is written again with them.  Returns what lookup
 * returns of the new name.  EPERM for a directory or a symbolic link,
 * ENOENT if there is no such file, EMLINK if it has META_NAMES_MAX
 * names already, EEXIST if the name is taken (by
 * another file: a repeat of this very call finds its name there and
 * returns it).
 */
static const char script_link[] =
	LUA_NS
	"local id, np, nn = ARGV[5], ARGV[6], ARGV[7]\n"
	"needdir(np)\n"
	"if not isattr(ARGV[8]) then fail('EINVAL') end\n"
	"if call('EXISTS', dkey(id), skey(id)) > 0 then fail('EPERM') end\n"
	"local a = recof(id)\n"
	"if not a then fail('ENOENT') end\n"
	"if not a[1] or not a[2] or not string.match(a[3] or '', '^%-?%d+$') or not a[4] then\n"
	"  fail('EBADMSG object ' .. id .. ': its record lacks size, csum, mtime or origin')\n"
	"end\n"
	"local v = call('HGET', dkey(np), nn)\n"
	"if v and isfile(v, id) then return {'f' .. id, a[1], a[2], a[3], a[4], a[5]} end\n"
	"if v then fail('EEXIST') end\n"
	"local names = namesof(id, a)\n"
	"if #names == 0 then fail('ENOENT') end\n"
	"if #names >= " STR(META_NAMES_MAX) " then fail('EMLINK') end\n"
	"local u, g, m, at = attrparts(isattr(a[5]) and a[5] or ARGV[8], a[3])\n"
	"a[5] = attrjoin(u, g, m, at, NOW, #names + 1)\n"
	"call('HSET', xkey(id), '=' .. np .. '/' .. nn, '1')\n"
	"local fv = fval(id, a[1], a[3], a[2], a[4], a[5])\n"
	"for _, pn in ipairs(names) do call('HSET', dkey(pn[1]), pn[2], fv) end\n"
	"call('HSET', dkey(np), nn, fv, '/mtime', NOW)\n"
	"inval('link', np, nn, id)\n"
	"inval('attr', '0', '-', id)\n"
	"return {'f' .. id, a[1], a[2], a[3], a[4], a[5]}\n";

/* ARGV[5] this node, ARGV[6] "<id> <size> <csum hex>;" per object.
 * Returns {state, path} per object: L (its record describes these bytes;
 * path: where it is linked now, "" if unknown), S (the same, and this
 * node is its only holder), X (the record describes
 * other bytes), D (a tombstone: deleted), U (neither).  Every read comes
 * before the first write (the SADDs of L objects). */
static const char script_sync_holders[] =
	LUA_NS
	"local me = ARGV[5]\n"
	"local ids, st, paths = {}, {}, {}\n"
	"for id, size, csum in string.gmatch(ARGV[6], '(%d+) (%d+) (%x+);') do\n"
	"  local rec = recof(id)\n"
	"  local s, p = 'U', ''\n"
	"  if rec and rec[1] then\n"
	"    if rec[1] ~= size or rec[2] ~= csum then\n"
	"      s = 'X'\n"
	"    else\n"
	"      s = 'L'\n"
	"      if isid(rec[6]) and rec[7] and rec[7] ~= '' and\n"
	"         isfile(call('HGET', dkey(rec[6]), rec[7]), id) then\n"
	"        local ok, v = pcall(pathof, rec[6], rec[7])\n"
	"        if ok and type(v) == 'string' then p = v end\n"
	"      end\n"
	"    end\n"
	"  elseif call('EXISTS', tkey(id)) == 1 then\n"
	"    s = 'D'\n"
	"  end\n"
	"  ids[#ids + 1] = id\n"
	"  st[#st + 1] = s\n"
	"  paths[#paths + 1] = p\n"
	"end\n"
	"local out = {}\n"
	"for i, id in ipairs(ids) do\n"
	"  if st[i] == 'L' then\n"
	"    hold(id, me)\n"
	/* this node the only holder: 'S' */
	"    if #holders(id) == 1 then st[i] = 'S' end\n"
	"  end\n"
	"  out[#out + 1] = st[i]\n"
	"  out[#out + 1] = paths[i]\n"
	"end\n"
	"return out\n";

/* ARGV[5] parent, ARGV[6] name.  Returns the object id. */
static const char script_unlink[] =
	LUA_NS
	"local parent, name = ARGV[5], ARGV[6]\n"
	"needdir(parent)\n"
	"local v = call('HGET', dkey(parent), name)\n"
	"if not v then fail('ENOENT') end\n"
	"local k, id = parse(v, parent, name)\n"
	"if k == 'd' then fail('EISDIR') end\n"
	/* a file with other names lives on */
	"local pl = k == 'f' and unname_plan(id, parent, name)\n"
	"call('HDEL', dkey(parent), name)\n"
	"call('HSET', dkey(parent), '/mtime', NOW)\n"
	"if pl then\n"
	"  unname_apply(pl)\n"
	"  inval('unlink-name', parent, name, id)\n"
	"  return {id, '1'}\n"
	"end\n"
	"if k == 'l' then\n"
	"  call('DEL', skey(id))\n"
	"else\n"
	"  bury(id)\n"
	"end\n"
	"inval('unlink', parent, name, id)\n"
	"return id\n";

/*
 * ARGV[5] old parent, ARGV[6] old name, ARGV[7] new parent, ARGV[8] new
 * name, ARGV[9] noreplace, ARGV[10] exchange, ARGV[11] replace files (each
 * "0"/"1").  Returns the replaced id or "0".
 */
static const char script_rename[] =
	LUA_NS
	"local op, on, np, nn = ARGV[5], ARGV[6], ARGV[7], ARGV[8]\n"
	"local noreplace, exchange = ARGV[9] == '1', ARGV[10] == '1'\n"
	"needdir(op)\n"
	"needdir(np)\n"
	"local opd, npd = dkey(op), dkey(np)\n"
	"local sv = call('HGET', opd, on)\n"
	"if not sv then fail('ENOENT') end\n"
	"local sk, sid = parse(sv, op, on)\n"
	"local tv = call('HGET', npd, nn)\n"
	"local tk, tid\n"
	"if tv then tk, tid = parse(tv, np, nn) end\n"
	"if (op == np and on == nn) or tv == sv then return '0' end\n"
	"if exchange and not tv then fail('ENOENT') end\n"
	"if tv and noreplace then fail('EEXIST') end\n"
	/* is directory @dir @anc or below it? */
	"local function below(dir, anc)\n"
	"  local cur = dir\n"
	"  for i = 1, " STR(META_WALK_MAX) " do\n"
	"    if cur == anc then return true end\n"
	"    if cur == '1' then return false end\n"
	"    local p = call('HGET', dkey(cur), '/parent')\n"
	"    if not isid(p) then badfield(cur, '/parent', p) end\n"
	"    cur = p\n"
	"  end\n"
	"  fail('ELOOP')\n"
	"end\n"
	"if sk == 'd' then\n"
	"  needsub(op, on, sid)\n"
	"  if below(np, sid) then fail('EINVAL') end\n"
	"end\n"
	"if exchange then\n"
	"  if tk == 'd' then\n"
	"    needsub(np, nn, tid)\n"
	"    if below(op, tid) then fail('EINVAL') end\n"
	"  end\n"
	"  call('HSET', opd, on, tv)\n"
	"  call('HSET', npd, nn, sv)\n"
	"  if sk == 'd' then call('HSET', dkey(sid), '/parent', np, '/name', nn) end\n"
	"  if tk == 'd' then call('HSET', dkey(tid), '/parent', op, '/name', on) end\n"
	"  if sk == 'f' then moved(sid, op, on, np, nn) end\n"
	"  if sk == 'l' then placed(sid, np, nn) end\n"
	"  if tk == 'f' then moved(tid, np, nn, op, on) end\n"
	"  if tk == 'l' then placed(tid, op, on) end\n"
	"  if op ~= np then\n"
	"    if sk == 'd' then\n"
	"      call('HINCRBY', opd, '/nsub', -1)\n"
	"      call('HINCRBY', npd, '/nsub', 1)\n"
	"    end\n"
	"    if tk == 'd' then\n"
	"      call('HINCRBY', npd, '/nsub', -1)\n"
	"      call('HINCRBY', opd, '/nsub', 1)\n"
	"    end\n"
	"  end\n"
	"  call('HSET', opd, '/mtime', NOW)\n"
	"  call('HSET', npd, '/mtime', NOW)\n"
	"  inval('rename-from', op, on, sid)\n"
	"  inval('rename-to', np, nn, sid)\n"
	"  inval('rename-from', np, nn, tid)\n"
	"  inval('rename-to', op, on, tid)\n"
	"  return '0'\n"
	"end\n"
	"if tv then\n"
	"  if sk ~= 'd' and tk == 'd' then fail('EISDIR') end\n"
	"  if sk == 'd' and tk ~= 'd' then fail('ENOTDIR') end\n"
	"  if tk ~= 'd' and ARGV[11] ~= '1' then fail('EEXIST') end\n"
	"  if tk == 'd' and not isempty(tid) then fail('ENOTEMPTY') end\n"
	"end\n"
	"local replaced = '0'\n"
	/* a file replaced that has other names lives on */
	"local tpl = tv and tk == 'f' and unname_plan(tid, np, nn)\n"
	"if tpl then\n"
	"  unname_apply(tpl)\n"
	"elseif tv then\n"
	"  replaced = tid\n"
	"  if tk == 'f' then\n"
	"    bury(tid)\n"
	"  elseif tk == 'l' then\n"
	"    call('DEL', skey(tid))\n"
	"  else\n"
	"    call('DEL', dkey(tid))\n"
	"    call('HINCRBY', npd, '/nsub', -1)\n"
	"  end\n"
	"end\n"
	"call('HDEL', opd, on)\n"
	"call('HSET', npd, nn, sv)\n"
	"if sk == 'f' then moved(sid, op, on, np, nn) end\n"
	"if sk == 'l' then placed(sid, np, nn) end\n"
	"if sk == 'd' then\n"
	"  call('HSET', dkey(sid), '/parent', np, '/name', nn)\n"
	"  if op ~= np then\n"
	"    call('HINCRBY', opd, '/nsub', -1)\n"
	"    call('HINCRBY', npd, '/nsub', 1)\n"
	"  end\n"
	"end\n"
	"call('HSET', opd, '/mtime', NOW)\n"
	"call('HSET', npd, '/mtime', NOW)\n"
	"inval('rename-from', op, on, sid)\n"
	"inval('rename-to', np, nn, sid)\n"
	"return replaced\n";

/*
 * rereg(): register object id (size, csum, mtime, origin: its record)
 * again under absolute path (checked by meta.c), holding it on node me;
 * ids is a table of fresh ids for the directories it may have to make,
 * taken from ids[ids.at] on (EAGAIN if too few or one is in use).
 * Returns 1 if the object had to go elsewhere else 0, and the path it
 * has ("" if its record was there: only the holder is added).  ENOTUNIQ
 * if the id's record describes other bytes.  Every failure comes before
 * its first write.
 *
 * The path is used if every component is a directory or missing and the
 * name is free (or already this object's); otherwise the object goes to
 * /lost+found/<name>.objfs-<id>.
 */
#define LUA_REREG \
	"local function rereg(id, size, csum, mtime, origin, me, want_path, ids)\n" \
	"  local rec = recof(id)\n" \
	"  if rec and rec[1] then\n" \
	"    if rec[1] ~= size or rec[2] ~= csum then fail('ENOTUNIQ') end\n" \
	"    hold(id, me)\n" \
	"    return 0, ''\n" \
	"  end\n" \
	/* "<name>.objfs-<id>", cut on a character boundary to 255 bytes */ \
	"  local function altname(name)\n" \
	"    local suf = '.objfs-' .. id\n" \
	"    local cut = 255 - #suf\n" \
	"    if #name > cut then\n" \
	"      while cut > 0 do\n" \
	"        local b = string.byte(name, cut + 1)\n" \
	"        if b < 128 or b >= 192 then break end\n" \
	"        cut = cut - 1\n" \
	"      end\n" \
	"      name = string.sub(name, 1, cut)\n" \
	"    end\n" \
	"    return name .. suf\n" \
	"  end\n" \
	"  local want = fval(id, size, mtime, csum, origin)\n" \
	/* can @comps be used?  Then also   \ 								  how many directories are missing \ */ \
	"  local function usable(comps)\n" \
	"    local cur = '1'\n" \
	"    for i = 1, #comps - 1 do\n" \
	"      local v = call('HGET', dkey(cur), comps[i])\n" \
	"      if not v then return true, #comps - i end\n" \
	"      local k, nid = parse(v, cur, comps[i])\n" \
	"      if k ~= 'd' then return false, 0 end\n" \
	"      if call('EXISTS', dkey(nid)) == 0 then fail('EBADMSG') end\n" \
	"      cur = nid\n" \
	"    end\n" \
	"    local v = call('HGET', dkey(cur), comps[#comps])\n" \
	"    return not v or isfile(v, id), 0\n" \
	"  end\n" \
	"  local comps = {}\n" \
	"  for c in string.gmatch(want_path, '[^/]+') do comps[#comps + 1] = c end\n" \
	"  if #comps == 0 then fail('EINVAL') end\n" \
	"  local moved = 0\n" \
	"  local ok, missing = usable(comps)\n" \
	"  if not ok then\n" \
	"    comps = {'lost+found', altname(comps[#comps])}\n" \
	"    moved = 1\n" \
	"    ok, missing = usable(comps)\n" \
	"    if not ok then fail('EEXIST') end\n" \
	"  end\n" \
	"  local mine = {}\n" \
	"  while #mine < missing do\n" \
	"    local c = ids[ids.at]\n" \
	"    ids.at = ids.at + 1\n" \
	"    if not c or not unused(c) then fail('EAGAIN') end\n" \
	"    mine[#mine + 1] = c\n" \
	"  end\n" \
	"  local cur, path = '1', ''\n" \
	"  for i = 1, #comps - 1 do\n" \
	"    local v = call('HGET', dkey(cur), comps[i])\n" \
	"    local nid\n" \
	"    if v then\n" \
	"      local k\n" \
	"      k, nid = parse(v, cur, comps[i])\n" \
	"    else\n" \
	"      nid = table.remove(mine, 1)\n" \
	"      newdir(cur, comps[i], nid, NOW)\n" \
	"      inval('mkdir', cur, comps[i], nid)\n" \
	"    end\n" \
	"    path = path .. '/' .. comps[i]\n" \
	"    cur = nid\n" \
	"  end\n" \
	"  local name = comps[#comps]\n" \
	"  path = path .. '/' .. name\n" \
	"  recset(id, cur, name)\n" \
	"  hold(id, me)\n" \
	"  if not isfile(call('HGET', dkey(cur), name), id) then\n" \
	"    call('HSET', dkey(cur), name, want, '/mtime', NOW)\n" \
	"    inval('publish', cur, name, id)\n" \
	"  end\n" \
	"  return moved, path\n" \
	"end\n" \
	/* ARGV[5] id, ARGV[6] size, ARGV[7] csum, ARGV[8] mtime, ARGV[9] origin, ARGV[10] this node, ARGV[11] absolute path, ARGV[12] fresh ids for the directories it may have to make, separated by spaces.  Returns {moved, path} of rereg(). */

/*
 * ARGV[5] id, ARGV[6] size, ARGV[7] csum, ARGV[8] mtime, ARGV[9] origin,
 * ARGV[10] this node, ARGV[11] absolute path, ARGV[12] fresh ids for the
 * directories it may have to make, separated by spaces.  Returns {moved,
 * path} of rereg().
 */
static const char script_reregister[] =
	LUA_NS LUA_REREG
	"local ids = {at = 1}\n"
	"for c in string.gmatch(ARGV[12], '%S+') do ids[#ids + 1] = c end\n"
	"local moved, path = rereg(ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9],\n"
	"                          ARGV[10], ARGV[11], ids)\n"
	"return {moved, path}\n";

/*
 * A batch of rereg(): ARGV[5] this node, ARGV[6] the objects, each
 * "<id> <size> <csum> <mtime> <origin> <path length>:<path>", ARGV[7]
 * fresh ids for the directories they may have to make, separated by
 * spaces, shared by all.  Returns {moved, path} for each in order, or
 * {errno name, ''} for one that failed (before its first write): the
 * caller registers that one on its own.
 */
static const char script_reregister_batch[] =
	LUA_NS LUA_REREG
	"local me, s, ids = ARGV[5], ARGV[6], {at = 1}\n"
	"for c in string.gmatch(ARGV[7], '%S+') do ids[#ids + 1] = c end\n"
	"local out, pos = {}, 1\n"
	"while pos <= #s do\n"
	"  local id, size, csum, mtime, origin, plen, at = string.match(s,\n"
	"    '^(%d+) (%d+) (%x+) (%-?%d+) (%S+) (%d+):()', pos)\n"
	"  if not id then fail('EINVAL') end\n"
	"  local path = string.sub(s, at, at + tonumber(plen) - 1)\n"
	"  pos = at + tonumber(plen)\n"
	"  local ok, moved, got = pcall(rereg, id, size, csum, mtime, origin, me, path, ids)\n"
	"  if ok then\n"
	"    out[#out + 1] = tostring(moved)\n"
	"    out[#out + 1] = got\n"
	"  else\n"
	/* error_reply() comes back as a table or its text (Redis 7) */
	"    if type(moved) == 'table' then moved = moved.err end\n"
	"    out[#out + 1] = tostring(moved)\n"
	"    out[#out + 1] = ''\n"
	"  end\n"
	"end\n"
	"return out\n";

/* Writing this node's card. */
#define LUA_CARD \
	LUA_NODES \
	"local key = ckey(ARGV[5])\n" \
	"local function write()\n" \
	"  local kv = {}\n" \
	"  for i, f in ipairs(FIELDS) do\n" \
	"    kv[#kv + 1] = f\n" \
	"    kv[#kv + 1] = ARGV[8 + i]\n" \
	"  end\n" \
	"  call('DEL', key)\n" \
	"  call('HSET', key, unpack(kv))\n" \
	"  call('HSET', key, 'layout', '" STR(META_LAYOUT) "')\n" \
	"  call('EXPIRE', key, ARGV[8])\n" \
	"  call('SADD', T .. 'members', ARGV[5])\n" \
	"end\n" \
	/* ARGV[5] node, ARGV[6] instance, ARGV[7] instance that may be replaced (a card meta.c found stale) or "", ARGV[8] ttl, ARGV[9..17] the card (host, pid, listen, instance, started, capacity, used, caps, rdma). Returns {1}, or {0, <the other card's fields in the same order>}. */

/*
 * ARGV[5] node, ARGV[6] instance, ARGV[7] instance that may be replaced
 * (a card meta.c found stale) or "", ARGV[8] ttl, ARGV[9..17] the card
 * (host, pid, listen, instance, started, capacity, used, caps, rdma).
 * Returns {1}, or {0, <the other card's fields in the same order>}.
 */
static const char script_claim[] =
	LUA_BASE LUA_CARD
	"local cur = call('HGET', key, 'instance')\n"
	"if cur and cur ~= ARGV[6] and not (ARGV[7] ~= '' and cur == ARGV[7]) then\n"
	"  local a = call('HMGET', key, unpack(FIELDS))\n"
	"  return {0, a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]}\n"
	"end\n"
	"write()\n"
	"return {1}\n";

/*
 * Same ARGV as claim; EADDRINUSE if another instance holds the name.
 * Also removes up to 64 fetcher entries whose deadline has passed,
 * found through the index {P}:fan: a crashed fetcher's entry, which no
 * locate meets once no other node fetches the object, goes within a
 * heartbeat of its deadline.  An entry whose field holds a later
 * deadline than the index (an older node renewed it) stays; its index
 * member goes.  Returns 1.
 */
static const char script_heartbeat[] =
	LUA_BASE LUA_CARD
	"local cur = call('HGET', key, 'instance')\n"
	"if cur and cur ~= ARGV[6] then fail('EADDRINUSE') end\n"
	"write()\n"
	"local t = redis.call('TIME')\n"
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"local due = redis.pcall('ZRANGEBYSCORE', FAN, '-inf', now, 'LIMIT', 0, 64)\n"
	"if type(due) == 'table' and not due.err then\n"
	"  for _, m in ipairs(due) do\n"
	"    local id, n = string.match(m, '^(%d+) (%S+)$')\n"
	"    if id then\n"
	"      local v = redis.pcall('HGET', xkey(id), '~p:' .. n)\n"
	"      if type(v) == 'string' and not ((tonumber(v) or 0) > now) then\n"
	"        redis.pcall('HDEL', xkey(id), '~p:' .. n)\n"
	"      end\n"
	"    end\n"
	"    redis.pcall('ZREM', FAN, m)\n"
	"  end\n"
	"end\n"
	"return 1\n";

/* ARGV[5] node, ARGV[6] instance.  Returns 1 if the card was deleted. */
static const char script_release[] =
	LUA_BASE
	"local key = T .. 'node:' .. ARGV[5]\n"
	"if call('HGET', key, 'instance') ~= ARGV[6] then return 0 end\n"
	"call('DEL', key)\n"
	"return 1\n";

/*
 * ARGV[5] object id, ARGV[6] this node, ARGV[7] "1" to have the block
 * sums, ARGV[8] ms to advertise this node as fetching the object (0:
 * not; only an object with block sums is), ARGV[9] how many nodes
 * fetching it to return at most.  Returns {size, csum, mtime, origin,
 * number of stale entries removed, block sums (nil if not asked or
 * there are none), number of holders, then node, listen, caps, rdma of
 * each other holder whose card exists, then the same of up to ARGV[9]
 * other nodes fetching it}; card fields may be nil (meta_nodes.c skips
 * such a node).  A holder other than this node whose card is gone is
 * removed from the set: its entry is stale.  A holder that is not a node
 * name is returned as it is, for meta.c to skip.
 *
 * A node fetching the object is a field "~p:<node>" of its record, whose
 * value is a deadline in ms on Redis's clock (so that the nodes' clocks
 * do not matter): a crashed fetcher's entry lapses.  Lapsed entries, and
 * those of nodes whose card is gone, are removed as they are met; a
 * record with many looks at a random 64 of its fields.  Of the live
 * entries, ARGV[9] are returned: consecutive ones in the record's order
 * from a place that moves with Redis's clock (microseconds), so that
 * fetchers that locate again and again meet every other one, not always
 * the same first few in hash order (16 readers: the 7 nobody ever met
 * got blocks from the origin that nobody asked of them, and the origin
 * sent the object twice).  ENOENT if the object has no record.
 */
static const char script_locate[] =
	LUA_BASE LUA_LAYOUT LUA_NODES
	"local id, me = ARGV[5], ARGV[6]\n"
	"local a = recof(id)\n"
	"if not a then fail('ENOENT') end\n"
	"local b = false\n"
	"if ARGV[7] == '1' then b = call('HGET', xkey(id), 'bsum') end\n"
	"local ttl, want = tonumber(ARGV[8]) or 0, tonumber(ARGV[9]) or 0\n"
	"local out, stale = {a[1], a[2], a[3], a[4], 0, b, 0}, 0\n"
	"local function card(n)\n"
	"  local c = redis.pcall('HMGET', ckey(n), 'listen', 'caps', 'rdma')\n"
	"  if type(c) ~= 'table' or c.err then c = {} end\n"
	"  out[#out + 1] = n\n"
	"  out[#out + 1] = c[1] or false\n"
	"  out[#out + 1] = c[2] or false\n"
	"  out[#out + 1] = c[3] or false\n"
	"end\n"
	"for _, n in ipairs(holders(id)) do\n"
	"  if n ~= me then\n"
	"    if isnode(n) and call('EXISTS', ckey(n)) == 0 then\n"
	"      unhold(id, n)\n"
	"      stale = stale + 1\n"
	"    else\n"
	"      card(n)\n"
	"    end\n"
	"  end\n"
	"end\n"
	"out[7] = (#out - 7) / 4\n"
	"if want > 0 or (ttl > 0 and b) then\n"
	"  local t = redis.call('TIME')\n"
	"  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
	"  local fs\n"
	"  if call('HLEN', xkey(id)) <= 64 then\n"
	"    fs = call('HGETALL', xkey(id))\n"
	"  else\n"
	"    fs = call('HRANDFIELD', xkey(id), 64, 'WITHVALUES')\n"
	"  end\n"
	"  local live = {}\n"
	"  for i = 1, #fs - 1, 2 do\n"
	"    local f = fs[i]\n"
	"    local n = string.sub(f, 4)\n"
	"    if string.sub(f, 1, 3) == '~p:' and n ~= me then\n"
	"      local d = tonumber(fs[i + 1])\n"
	"      if not d or d < now or not isnode(n) or\n"
	"         call('EXISTS', ckey(n)) == 0 then\n"
	"        call('HDEL', xkey(id), f)\n"
	"        fan_del(id, n)\n"
	"        stale = stale + 1\n"
	"      else\n"
	"        live[#live + 1] = n\n"
	"      end\n"
	"    end\n"
	"  end\n"
	"  local from = 0\n"
	"  if #live > want then from = tonumber(t[2]) % #live end\n"
	"  for i = 0, math.min(want, #live) - 1 do\n"
	"    card(live[(from + i) % #live + 1])\n"
	"  end\n"
	"  if ttl > 0 and b then\n"
	"    call('HSET', xkey(id), '~p:' .. me, string.format('%d', now + ttl))\n"
	"    fan_add(id, me, string.format('%d', now + ttl))\n"
	"  end\n"
	"end\n"
	"out[5] = stale\n"
	"return out\n";

/* ARGV[5] object id, ARGV[6] this node: this node no longer fetches the
 * object (its fetch failed or stopped).  Always 0, record or not. */
static const char script_fan_leave[] =
	LUA_BASE
	"call('HDEL', xkey(ARGV[5]), '~p:' .. ARGV[6])\n"
	"fan_del(ARGV[5], ARGV[6])\n"
	"return 0\n";

/*
 * ARGV[5] object id, ARGV[6] this node.  Removes this node from the
 * holders if another holder has a live card (exists, with a listen
 * address): returns 1 then, or if this node was no holder; else nothing
 * changes, and it returns 0 if no other holder is recorded at all, 2 if
 * some are but none is live (a node restarting: not the only copy).
 * ENOENT if the object has no record.
 */
static const char script_release_replica[] =
	LUA_BASE LUA_LAYOUT LUA_NODES
	"local id, me = ARGV[5], ARGV[6]\n"
	"if not recex(id) then fail('ENOENT') end\n"
	"local others = 0\n"
	"for _, n in ipairs(holders(id)) do\n"
	"  if n ~= me then\n"
	"    if live(n) then\n"
	"      unhold(id, me)\n"
	"      return 1\n"
	"    end\n"
	"    others = others + 1\n"
	"  end\n"
	"end\n"
	"if others > 0 then return 2 end\n"
	"return 0\n";

/*
 * ARGV[5] object id, ARGV[6] this node, ARGV[7] "1" to prune, ARGV[8]
 * and ARGV[9] the size and checksum this node's copy has ("" "": not
 * checked), ARGV[10] the block sums of the copy, checked, to record if
 * the record has none ("": none), ARGV[11] "1" to have the path too,
 * ARGV[12] and ARGV[13] the directory and name the copy was opened by
 * ("0" ""; none).  Adds this node as a holder and, when pruning, drops
 * the holders whose node card is gone (stale entries): returns how many
 * were dropped; -1 if the object has no record (deleted), -2 if the
 * record describes other bytes; in both cases nothing changes.  With
 * ARGV[11], returns {that number, the object's full path}: that of
 * ARGV[12]/ARGV[13] if that entry names the object, else where its
 * record says it is linked, else "" (as script_objpath).
 */
static const char script_add_holder[] =
	LUA_NS LUA_NODES
	"local id, me = ARGV[5], ARGV[6]\n"
	"local rec = recof(id)\n"
	/* the path, read before the first write; a damaged key on the way
	 * leaves it "" */
	"local path = ''\n"
	"if ARGV[11] == '1' and rec then\n"
	"  local function at(p, nm)\n"
	"    if not isid(p) or not nm or nm == '' or\n"
	"       not isfile(call('HGET', dkey(p), nm), id) then return nil end\n"
	"    return pathof(p, nm)\n"
	"  end\n"
	"  local ok, v = pcall(at, ARGV[12], ARGV[13])\n"
	"  if not (ok and v) then ok, v = pcall(at, rec[6], rec[7]) end\n"
	"  if ok and type(v) == 'string' then path = v end\n"
	"end\n"
	"local function reply(n)\n"
	"  if ARGV[11] ~= '1' then return n end\n"
	"  if n < 0 then return {n, ''} end\n"
	"  return {n, path}\n"
	"end\n"
	"if not rec then return reply(-1) end\n"
	"if ARGV[8] ~= '' and (rec[1] ~= ARGV[8] or rec[2] ~= ARGV[9]) then\n"
	"  return reply(-2)\n"
	"end\n"
	"if ARGV[10] and ARGV[10] ~= '' and ARGV[8] ~= '' then\n"
	"  call('HSETNX', xkey(id), 'bsum', ARGV[10])\n"
	"end\n"
	"hold(id, me)\n"
	"call('HDEL', xkey(id), '~p:' .. me)\n"
	"fan_del(id, me)\n"
	"local gone = 0\n"
	"if ARGV[7] ~= '1' then return reply(0) end\n"
	"for _, n in ipairs(holders(id)) do\n"
	"  if n ~= me and isnode(n) and call('EXISTS', ckey(n)) == 0 then\n"
	"    unhold(id, n)\n"
	"    gone = gone + 1\n"
	"  end\n"
	"end\n"
	"return reply(gone)\n";

/*
 * ARGV: (header).  Returns for every member of P:members: its name, the
 * PTTL of its card (-2: no card), and the card fields in the order of
 * FIELDS (nil where missing; all nil if the key is not a hash).
 */
static const char script_members[] =
	LUA_BASE LUA_NODES
	"local out = {}\n"
	"for _, n in ipairs(call('SMEMBERS', T .. 'members')) do\n"
	"  out[#out + 1] = n\n"
	"  out[#out + 1] = call('PTTL', ckey(n))\n"
	"  local c = redis.pcall('HMGET', ckey(n), unpack(FIELDS))\n"
	"  if type(c) ~= 'table' or c.err then c = {} end\n"
	"  for i = 1, #FIELDS do out[#out + 1] = c[i] or false end\n"
	"end\n"
	"return out\n";

/*
 * The migration from layout 1 (meta_layout.c), step by step.
 */
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
 *   done:    {the layout key}: META_LAYOUT_MOVING is written if there
 *            is none (layout 1 is layout 2 now)
 *   recs:    {next cursor, records moved, keys skipped (not a hash, or
 *            not an id), the first of those}; EBUSY if the layout key is
 *            not META_LAYOUT_MOVING, EBADMSG (naming it) for a record
 *            that cannot move
 *   done3:   {the layout key}: META_LAYOUT is written if it was
 *            META_LAYOUT_MOVING
 */
static const char script_migrate[] =
	LUA_BASE LUA_NODES
	"local step, cur, me = ARGV[5], ARGV[6], ARGV[7]\n"
	"local LAYOUT, NODES, MEMBERS = T .. 'layout', T .. 'nodes', T .. 'members'\n"
	"local function hkey(id) return T .. 'h:' .. id end\n"
	"local function okey(id) return T .. 'o:' .. id end\n"
	/* a live node of an older layout in set @set: the field "layout" of
	 * its card is missing (layout 1), or with @any not this objfsd's */
	"local function busy(set, any)\n"
	"  local ok, ns = pcall(call, 'SMEMBERS', set)\n"
	"  if not ok then ns = {} end\n"
	"  for _, n in ipairs(ns) do\n"
	"    if n ~= me and live(n) then\n"
	"      local c = redis.pcall('HMGET', ckey(n), 'host', 'pid', 'layout')\n"
	"      if type(c) ~= 'table' or c.err then c = {} end\n"
	"      if not c[3] or (any and c[3] ~= '" STR(META_LAYOUT) "') then\n"
	"        return {n, c[1] or '', c[2] or ''}\n"
	"      end\n"
	"    end\n"
	"  end\n"
	"  return nil\n"
	"end\n"
	/* the holder set of @id becomes fields of its record (of layout 3
	 * if it has one: a namespace that lost its layout key) */
	"local function fold(id)\n"
	"  local ok, hs = pcall(call, 'SMEMBERS', hkey(id))\n"
	"  if ok then\n"
	"    local three = recex(id)\n"
	"    for _, n in ipairs(hs) do\n"
	"      if three then hold(id, n) else call('HSET', okey(id), '@' .. n, '') end\n"
	"    end\n"
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
	"  if l == '2' then\n"
	"    local b = busy(MEMBERS, true)\n"
	"    if b then return {l, b[1], b[2], b[3]} end\n"
	"    call('SET', LAYOUT, '" META_LAYOUT_MOVING "')\n"
	"  end\n"
	"  if l ~= '' then return {l, '', '', ''} end\n"
	"  local b = busy(NODES, false) or busy(MEMBERS, true)\n"
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
	"    if isid(id) and (redis.pcall('TYPE', okey(id)).ok == 'hash' or recex(id)) then\n"
	"      fold(id)\n"
	"      out[1] = out[1] + 1\n"
	"    else\n"
	"      call('DEL', k)\n"
	"      out[2] = out[2] + 1\n"
	"    end\n"
	"  end\n"
	"  return {page[1], out[1], out[2]}\n"
	"end\n"
	/* layout 1 is layout 2 now; nodes of layout 2 stay out */
	/* each only if the layout key is still what its step expects: an
	 * objfsd of layout 2 may have written '2' meanwhile */
	"local function layout()\n"
	"  local l = redis.pcall('GET', LAYOUT)\n"
	"  if type(l) ~= 'string' then return '' end\n"
	"  return l\n"
	"end\n"
	"if step == 'done' then\n"
	"  if redis.pcall('EXISTS', LAYOUT) == 0 then\n"
	"    call('SET', LAYOUT, '" META_LAYOUT_MOVING "')\n"
	"  end\n"
	"  return {layout()}\n"
	"end\n"
	/* record key @k of object @id to its bucket and x:<id> (again if a
	 * run was cut short: holders are not added twice); fields it cannot
	 * keep in the record (a bad parent or name) go to x:<id> too */
	"local function tobucket(k, id)\n"
	"  local kv = call('HGETALL', k)\n"
	"  local o = rec(id) or {p = false, n = false, hs = {}}\n"
	"  local has = {}\n"
	"  for _, h in ipairs(o.hs) do has[h] = true end\n"
	"  for i = 1, #kv - 1, 2 do\n"
	"    local f, v = kv[i], kv[i + 1]\n"
	"    local h = string.sub(f, 2)\n"
	"    if f == 'parent' and isid(v) then\n"
	"      o.p = v\n"
	"    elseif f == 'name' and v ~= '' and not string.find(v, '/', 1, true) then\n"
	"      o.n = v\n"
	"    elseif string.sub(f, 1, 1) == '@' and h ~= '' and not string.find(h, '/', 1, true) then\n"
	"      if not has[h] then o.hs[#o.hs + 1] = h end\n"
	"      has[h] = true\n"
	"    else\n"
	"      call('HSET', xkey(id), f, v)\n"
	"    end\n"
	"  end\n"
	"  recput(id, o)\n"
	"  call('DEL', k)\n"
	"end\n"
	/* only while the key says so: an objfsd of layout 2 that wrote '2'
	 * meanwhile would take the records moved for deleted objects */
	"if step == 'recs' then\n"
	"  if layout() ~= '" META_LAYOUT_MOVING "' then\n"
	"    fail('EBUSY the layout key became ' .. shown(layout()) .. ' during the migration')\n"
	"  end\n"
	"  local page = scan('o:*')\n"
	"  local out = {page[1], 0, 0, ''}\n"
	"  for _, k in ipairs(page[2]) do\n"
	"    local id = string.sub(k, #T + 3)\n"
	"    if not isid(id) or redis.pcall('TYPE', k).ok ~= 'hash' then\n"
	"      out[3] = out[3] + 1\n"
	"      if out[4] == '' then out[4] = k end\n"
	"    else\n"
	"      local ok, err = pcall(tobucket, k, id)\n"
	"      if not ok then\n"
	"        if type(err) == 'table' then err = err.err end\n"
	"        fail('EBADMSG record ' .. k .. ' cannot move: ' .. tostring(err))\n"
	"      end\n"
	"      out[2] = out[2] + 1\n"
	"    end\n"
	"  end\n"
	"  return out\n"
	"end\n"
	"if step == 'done3' then\n"
	"  if layout() == '" META_LAYOUT_MOVING "' then\n"
	"    call('SET', LAYOUT, '" STR(META_LAYOUT) "')\n"
	"  end\n"
	"  return {layout()}\n"
	"end\n"
	"fail('EINVAL')\n";

/* ARGV[5] object id, ARGV[6] this node: it holds no copy any more.
 * Always 0, record or not. */
static const char script_del_holder[] =
	LUA_BASE
	"unhold(ARGV[5], ARGV[6])\n"
	"return 0\n";

/* clang-format on */

const char *const meta_script_src[META_NSCRIPTS] = {
    [MS_INIT] = script_init,
    [MS_EPOCH] = script_epoch,
    [MS_ALLOC] = script_alloc,
    [MS_LOOKUP] = script_lookup,
    [MS_GETATTR] = script_getattr,
    [MS_READDIR] = script_readdir,
    [MS_MKDIR] = script_mkdir,
    [MS_RMDIR] = script_rmdir,
    [MS_PUBLISH] = script_publish,
    [MS_UNLINK] = script_unlink,
    [MS_RENAME] = script_rename,
    [MS_REREGISTER] = script_reregister,
    [MS_CLAIM] = script_claim,
    [MS_HEARTBEAT] = script_heartbeat,
    [MS_RELEASE] = script_release,
    [MS_PATH] = script_path,
    [MS_LOCATE] = script_locate,
    [MS_RELEASE_REPLICA] = script_release_replica,
    [MS_MEMBERS] = script_members,
    [MS_ADD_HOLDER] = script_add_holder,
    [MS_OBJPATH] = script_objpath,
    [MS_READDIR_PAGE] = script_readdir_page,
    [MS_SYNC_HOLDERS] = script_sync_holders,
    [MS_REREGISTER_BATCH] = script_reregister_batch,
    [MS_FAN_LEAVE] = script_fan_leave,
    [MS_SETATTR] = script_setattr,
    [MS_SYMLINK] = script_symlink,
    [MS_READLINK] = script_readlink,
    [MS_LINK] = script_link,
    [MS_MIGRATE] = script_migrate,
    [MS_DEL_HOLDER] = script_del_holder,
};

const char *const meta_script_name[META_NSCRIPTS] = {
    [MS_INIT] = "init",
    [MS_EPOCH] = "epoch",
    [MS_ALLOC] = "alloc",
    [MS_LOOKUP] = "lookup",
    [MS_GETATTR] = "getattr",
    [MS_READDIR] = "readdir",
    [MS_MKDIR] = "mkdir",
    [MS_RMDIR] = "rmdir",
    [MS_PUBLISH] = "publish",
    [MS_UNLINK] = "unlink",
    [MS_RENAME] = "rename",
    [MS_REREGISTER] = "reregister",
    [MS_CLAIM] = "claim",
    [MS_HEARTBEAT] = "heartbeat",
    [MS_RELEASE] = "release",
    [MS_PATH] = "path",
    [MS_LOCATE] = "locate",
    [MS_RELEASE_REPLICA] = "release-replica",
    [MS_MEMBERS] = "members",
    [MS_ADD_HOLDER] = "add_holder",
    [MS_OBJPATH] = "objpath",
    [MS_READDIR_PAGE] = "readdir_page",
    [MS_SYNC_HOLDERS] = "sync_holders",
    [MS_REREGISTER_BATCH] = "reregister_batch",
    [MS_FAN_LEAVE] = "fan_leave",
    [MS_SETATTR] = "setattr",
    [MS_SYMLINK] = "symlink",
    [MS_READLINK] = "readlink",
    [MS_LINK] = "link",
    [MS_MIGRATE] = "migrate",
    [MS_DEL_HOLDER] = "del_holder",
};

/*
 * The KEYS of each script, from its ARGV: "N" the namespace's own keys
 * (counter, epoch, root: the init of every namespace script may write
 * them, and the layout), "L" the layout key alone (LUA_LAYOUT), "S" the
 * set of members, "F" the index of fetcher entries, and a
 * letter and an ARGV index for the key of that id or node: d directory,
 * o the bucket of an object record, x an object's extras, t tombstone,
 * s symbolic link, c node card.  Keys a script
 * only finds on its way (the parents of a path, the entry's object) are
 * not known before it runs; they share the hash tag, so Redis Cluster
 * still runs the script in one slot, and every script reads them before
 * its first write.
 */
static const char *const script_keyspec[META_NSCRIPTS] = {
    [MS_INIT] = "N",
    [MS_EPOCH] = "N",
    [MS_ALLOC] = "N",
    [MS_LOOKUP] = "N d5",
    [MS_GETATTR] = "N d5 o5 s5",
    [MS_READDIR] = "N d5",
    [MS_MKDIR] = "N d5 d8 o8 t8 s8",
    [MS_RMDIR] = "N d5",
    [MS_PUBLISH] = "N d5 o7 x7 t7 F",
    [MS_UNLINK] = "N d5 F",
    [MS_RENAME] = "N d5 d7 F",
    [MS_REREGISTER] = "N o5",
    [MS_CLAIM] = "c5 S",
    [MS_HEARTBEAT] = "c5 S F",
    [MS_RELEASE] = "c5",
    [MS_PATH] = "N d5",
    [MS_LOCATE] = "L o5 x5 F",
    [MS_RELEASE_REPLICA] = "L o5",
    [MS_MEMBERS] = "S",
    [MS_ADD_HOLDER] = "N o5 x5 F",
    [MS_OBJPATH] = "N o5",
    [MS_READDIR_PAGE] = "N d5",
    [MS_SYNC_HOLDERS] = "N",
    [MS_REREGISTER_BATCH] = "N",
    [MS_FAN_LEAVE] = "x5 F",
    [MS_SETATTR] = "N d5 o5 s5",
    [MS_SYMLINK] = "N d5 d8 o8 t8 s8",
    [MS_READLINK] = "N s5",
    [MS_LINK] = "N d5 o5 x5 s5 d6",
    [MS_MIGRATE] = "N S",
    [MS_DEL_HOLDER] = "o5",
};

/* Append key "{P}:<what><arg>" to @a's keys. */
static int key_add(const struct meta *m, struct args *a, int *nk, const char *what, const char *arg)
{
	int n;

	if (*nk >= ARGS_KEYS_MAX)
		return -EINVAL;
	n = snprintf(a->keys[*nk], KEY_MAX, "{%s}:%s%s", m->prefix, what, arg);
	if (n < 0 || n >= KEY_MAX)
		return -EINVAL;
	(*nk)++;
	return 0;
}

int meta_script_keys(const struct meta *m, enum meta_script s, struct args *a)
{
	static const char *const kinds[] = {
	    ['d'] = "d:", ['o'] = "r:", ['x'] = "x:", ['t'] = "t:", ['s'] = "s:", ['c'] = "node:"};
	const char *p = script_keyspec[s];
	int nk = 0, r = 0, i;

	if (a->keyed)
		return 0;
	while (*p && r == 0) {
		char kind = *p++;
		long idx;

		if (kind == 'N') {
			r = key_add(m, a, &nk, "ctr", "");
			if (r == 0)
				r = key_add(m, a, &nk, "epoch", "");
			if (r == 0)
				r = key_add(m, a, &nk, "d:", "1");
			if (r == 0)
				r = key_add(m, a, &nk, "layout", "");
			if (r == 0)
				r = key_add(m, a, &nk, "nodes", "");
		} else if (kind == 'S') {
			r = key_add(m, a, &nk, "members", "");
		} else if (kind == 'F') {
			r = key_add(m, a, &nk, "fan", "");
		} else if (kind == 'L') {
			r = key_add(m, a, &nk, "layout", "");
		} else {
			/* ARGV[idx] is a->v[2 + idx] */
			idx = strtol(p, (char **)&p, 10);
			if (kind >= (char)(sizeof(kinds) / sizeof(kinds[0])) || !kinds[(int)kind] ||
			    idx < 1 || 2 + idx >= a->n)
				return -EINVAL;
			const char *arg = a->v[2 + idx];
			size_t len = strlen(arg);

			/* a record is a field of bucket "r:" + the id's last 4 digits */
			if (kind == 'o' && len > 4)
				arg += len - 4;
			r = key_add(m, a, &nk, kinds[(int)kind], arg);
		}
		while (*p == ' ')
			p++;
	}
	if (r < 0 || a->n + nk > ARGS_MAX)
		return r < 0 ? r : -EINVAL;
	/* make room after "EVALSHA sha numkeys" */
	for (i = a->n - 1; i >= 3; i--) {
		a->v[i + nk] = a->v[i];
		a->len[i + nk] = a->len[i];
	}
	for (i = 0; i < nk; i++) {
		a->v[3 + i] = a->keys[i];
		a->len[3 + i] = strlen(a->keys[i]);
	}
	a->n += nk;
	snprintf(a->nkeys, sizeof(a->nkeys), "%d", nk);
	a->keyed = true;
	return 0;
}
