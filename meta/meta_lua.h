/*
 * meta_lua: the Lua helpers every script of the location service starts
 * with, as C string macros (meta_scripts.c and meta_layout.c hold the
 * scripts).  The key schema is in meta.h, the calling convention (ARGV
 * header, error replies) in meta_i.h.
 *
 * Rules every script follows:
 *   - all checks come before the first write, because Redis does not roll
 *     back the writes of a script that fails half-way;
 *   - ids stay strings: Lua numbers are doubles and print big values in
 *     exponent notation;
 *   - a value read from Redis that is not what a script wrote gives
 *     EBADMSG, never a Lua runtime error.
 */
#ifndef OBJFS_META_LUA_H
#define OBJFS_META_LUA_H

#define STR_(x) #x
#define STR(x) STR_(x)

/* clang-format off */

/*
 * Helpers of every script.  call() is redis.call() for commands whose
 * first argument is a key: a key of the wrong type (a string where a
 * hash belongs) is a corrupt record, EBADMSG naming the key, not a
 * failure of Redis.  shown() is how a value read back appears in such a
 * message: quoted and cut to 64 bytes, or "missing" (meta.c escapes the
 * whole message before it logs it).  fan_add() and fan_del() keep the
 * index of fetcher entries (meta.h, {P}:fan) with them; it only helps
 * clear entries, so a broken one fails no script: they use
 * redis.pcall() and ignore its errors.  bury() deletes an object's
 * record and leaves a tombstone.  isid(): a decimal uint64 >= 1 without
 * leading zeros.  fattrs(): the attributes of a file entry after
 * "f<id>" (owner, mode, atime and ctime may be missing: older entries).
 *
 * Records (layout 3, meta.h): rkey(id) is the bucket hash whose field
 * @id is the record "<parent>/<name>[/@<node>...]", xkey(id) the hash of
 * the object's extras (hard links, block sums, fetchers).  rec(id): the
 * record as {p = parent, n = name, hs = holders}, nil if there is none;
 * p and n are false and hs empty if the value is not of that form
 * (damaged: reads of it say EBADMSG).  recput() writes one back,
 * recset() sets where it is linked (making the record if need be),
 * recex() says whether there is one.
 *
 * recof(id): what a file's record and its entry say together, as
 * {size, csum, mtime, origin, attr, parent, name} (the first five live
 * in the entry only): nil if there is no record; false fields where the
 * record does not lead to an entry that names @id (its own name first,
 * then its hard links).  holders(), hold(), unhold(): the nodes holding
 * a copy (hold() and unhold() of an object without a record, or with a
 * damaged one, do nothing: recset() is what repairs one).
 */
#define LUA_BASE \
	"local P = ARGV[1]\n" \
	"local T = '{' .. P .. '}:'\n" \
	"local NS = T\n" \
	"local NOW = ARGV[3]\n" \
	"local ORIGIN = ARGV[4]\n" \
	"local CHAN = T .. 'inval'\n" \
	"local function fail(e) error(redis.error_reply(e)) end\n" \
	"local function call(cmd, key, ...)\n" \
	"  local r = redis.pcall(cmd, key, ...)\n" \
	"  if type(r) == 'table' and r.err then\n" \
	"    if string.find(r.err, '^WRONGTYPE') then\n" \
	"      fail(\"EBADMSG key '\" .. key .. \"' has the wrong type (\" ..\n" \
	"           redis.call('TYPE', key).ok .. ')')\n" \
	"    end\n" \
	"    error(r)\n" \
	"  end\n" \
	"  return r\n" \
	"end\n" \
	"local function shown(v)\n" \
	"  if not v then return 'missing' end\n" \
	"  return \"'\" .. string.sub(v, 1, 64) .. \"'\"\n" \
	"end\n" \
	"local function dkey(id) return T .. 'd:' .. id end\n" \
	"local function rkey(id) return T .. 'r:' .. string.sub(id, -4) end\n" \
	"local function xkey(id) return T .. 'x:' .. id end\n" \
	"local function tkey(id) return T .. 't:' .. id end\n" \
	"local function skey(id) return T .. 's:' .. id end\n" \
	"local FAN = T .. 'fan'\n" \
	"local function fan_add(id, n, d)\n" \
	"  redis.pcall('ZADD', FAN, d, id .. ' ' .. n)\n" \
	"end\n" \
	"local function fan_del(id, n)\n" \
	"  redis.pcall('ZREM', FAN, id .. ' ' .. n)\n" \
	"end\n" \
	"local function bury(id)\n" \
	"  local fs = redis.pcall('HKEYS', xkey(id))\n" \
	"  if type(fs) == 'table' and not fs.err then\n" \
	"    for _, f in ipairs(fs) do\n" \
	"      if string.sub(f, 1, 3) == '~p:' then fan_del(id, string.sub(f, 4)) end\n" \
	"    end\n" \
	"  end\n" \
	"  call('DEL', xkey(id))\n" \
	"  call('HDEL', rkey(id), id)\n" \
	"  call('SET', tkey(id), NOW, 'EX', " STR(META_TOMBSTONE_TTL) ")\n" \
	"  call('SPUBLISH', CHAN, ORIGIN .. ' gone 0 - ' .. id)\n" \
	"end\n" \
	"local function isid(s)\n" \
	"  return type(s) == 'string' and string.match(s, '^[1-9]%d*$') ~= nil and\n" \
	"         (#s < 20 or (#s == 20 and s <= '18446744073709551615'))\n" \
	"end\n" \
	"local FATTRS = '^ (%d+) (%-?%d+) (%x+) (%S*)$'\n" \
	"local FATTRS2 = '^ (%d+) (%-?%d+) (%x+) (%S*) (%d+ %d+ [0-7]+.*)$'\n" \
	"local function isattr(s)\n" \
	"  return type(s) == 'string' and\n" \
	"         (string.match(s, '^%d+ %d+ [0-7]+$') ~= nil or\n" \
	"          string.match(s, '^%d+ %d+ [0-7]+ %-?%d+ %-?%d+$') ~= nil or\n" \
	"          string.match(s, '^%d+ %d+ [0-7]+ %-?%d+ %-?%d+ %d+$') ~= nil)\n" \
	"end\n" \
	"local function fattrs(rest)\n" \
	"  local sz, mt, cs, og, at = string.match(rest, FATTRS2)\n" \
	"  if sz and isattr(at) then return sz, mt, cs, og, at end\n" \
	"  sz, mt, cs, og = string.match(rest, FATTRS)\n" \
	"  return sz, mt, cs, og, false\n" \
	"end\n" \
	"local function fval(id, size, mtime, csum, origin, attr)\n" \
	"  local v = 'f' .. id .. ' ' .. size .. ' ' .. mtime .. ' ' .. csum .. ' ' .. origin\n" \
	"  if attr and attr ~= '' then v = v .. ' ' .. attr end\n" \
	"  return v\n" \
	"end\n" \
	"local function isfile(v, id)\n" \
	"  return type(v) == 'string' and string.match(v, '^f(%d+)') == id\n" \
	"end\n" \
	"local function badfield(dir, f, v)\n" \
	"  fail('EBADMSG directory ' .. dir .. \": field '\" .. f .. \"' is \" .. shown(v))\n" \
	"end\n" \
	"local function rec(id)\n" \
	"  local v = call('HGET', rkey(id), id)\n" \
	"  if not v then return nil end\n" \
	"  local p, n, rest = string.match(v, '^(%d+)/([^/]+)(.*)$')\n" \
	"  local o = {p = false, n = false, hs = {}}\n" \
	"  if not p or string.gsub(rest, '/@[^/]+', '') ~= '' then return o end\n" \
	"  o.p, o.n = p, n\n" \
	"  for h in string.gmatch(rest, '/@([^/]+)') do o.hs[#o.hs + 1] = h end\n" \
	"  return o\n" \
	"end\n" \
	"local function recput(id, o)\n" \
	"  local v = (o.p or '') .. '/' .. (o.n or '')\n" \
	"  for _, h in ipairs(o.hs) do v = v .. '/@' .. h end\n" \
	"  call('HSET', rkey(id), id, v)\n" \
	"end\n" \
	"local function recset(id, p, n)\n" \
	"  local o = rec(id) or {hs = {}}\n" \
	"  o.p, o.n = p, n\n" \
	"  recput(id, o)\n" \
	"end\n" \
	"local function recex(id) return call('HEXISTS', rkey(id), id) == 1 end\n" \
	"local function recof(id)\n" \
	"  local o = rec(id)\n" \
	"  if not o then return nil end\n" \
	"  local r = {false, false, false, false, false, o.p, o.n}\n" \
	"  local function from(p, n)\n" \
	"    if not isid(p) or not n or n == '' then return false end\n" \
	"    local v = call('HGET', dkey(p), n)\n" \
	"    if not isfile(v, id) then return false end\n" \
	"    local sz, mt, cs, og, at = fattrs(string.sub(v, #id + 2))\n" \
	"    if sz then r[1], r[2], r[3], r[4], r[5] = sz, cs, mt, og, at end\n" \
	"    return sz ~= nil\n" \
	"  end\n" \
	"  if from(o.p, o.n) then return r end\n" \
	"  for _, f in ipairs(call('HKEYS', xkey(id))) do\n" \
	"    local p, n = string.match(f, '^=(%d+)/(.+)$')\n" \
	"    if p and from(p, n) then return r end\n" \
	"  end\n" \
	"  return r\n" \
	"end\n" \
	"local function holders(id)\n" \
	"  local o = rec(id)\n" \
	"  return o and o.hs or {}\n" \
	"end\n" \
	"local function hold(id, n)\n" \
	"  local o = rec(id)\n" \
	"  if not o or not o.p then return end\n" \
	"  for _, h in ipairs(o.hs) do\n" \
	"    if h == n then return end\n" \
	"  end\n" \
	"  o.hs[#o.hs + 1] = n\n" \
	"  recput(id, o)\n" \
	"end\n" \
	"local function unhold(id, n)\n" \
	"  local o = rec(id)\n" \
	"  if not o or not o.p then return end\n" \
	"  for i, h in ipairs(o.hs) do\n" \
	"    if h == n then\n" \
	"      table.remove(o.hs, i)\n" \
	"      recput(id, o)\n" \
	"      return\n" \
	"    end\n" \
	"  end\n" \
	"end\n"

/*
 * The layout check of the scripts that do not start with the init (a
 * record they cannot find must not read as "deleted" while the records
 * are not in this layout's keys: a restore from before a migration, or
 * one under way).
 */
#define LUA_LAYOUT \
	"if redis.pcall('GET', T .. 'layout') ~= '" STR(META_LAYOUT) "' then\n" \
	"  fail('EPROTO namespace ' .. P .. ' does not have layout " STR(META_LAYOUT) " now')\n" \
	"end\n"

/*
 * The namespace's init, idempotent: a FLUSHALL (or a Redis that came
 * back empty) heals on the next call of any node.  A namespace made
 * afresh (no layout key, root, counter or epoch) gets layout
 * META_LAYOUT, and {P}:nodes, the member set of layout 1, becomes a
 * string that makes an older objfsd's node claim fail (WRONGTYPE)
 * instead of letting it write records of layout 1.  A namespace without
 * a layout key but with a root, counter or epoch is of layout 1 (or lost
 * its layout key): it is left as it is, and meta_layout_settle() migrates it
 * (meta_layout.c).
 */
#define LUA_HEAL \
	LUA_BASE \
	"local CTR = NS .. 'ctr'\n" \
	"local LAYOUT = NS .. 'layout'\n" \
	"if call('EXISTS', CTR, NS .. 'epoch', NS .. 'd:1', LAYOUT) ~= 4 then\n" \
	"  if call('EXISTS', LAYOUT, NS .. 'd:1', CTR, NS .. 'epoch') == 0 then\n" \
	"    call('SET', LAYOUT, '" STR(META_LAYOUT) "')\n" \
	"    call('SET', NS .. 'nodes', '" META_LAYOUT_POISON "')\n" \
	"  end\n" \
	"  call('SETNX', CTR, '1')\n" \
	"  if call('SETNX', NS .. 'epoch', ARGV[2]) == 1 then\n" \
	"    call('SPUBLISH', CHAN, '- resync 0 - 0')\n" \
	"  end\n" \
	"  if call('EXISTS', NS .. 'd:1') == 0 then\n" \
	"    call('HSET', NS .. 'd:1', '/mtime', NOW, '/parent', '1', '/name', '',\n" \
	"                '/nsub', '0')\n" \
	"  end\n" \
	"end\n"

/*
 * Helpers of the namespace scripts, after the init and the check that
 * the namespace has this objfsd's layout (EPROTO otherwise).
 *
 * parse(): entry @name of directory @dir, "d<id>" / "f<id>..." /
 * "l<id>" -> kind, id.  needsub(): the entry names directory @id: it
 * must exist.  pathof(): the full path of @name in directory @parent (""
 * if deeper or longer than a path may be).  needdir(): a directory that
 * must exist.  placed(): a file's or link's record says where it is.
 * linkattrs(): what lookup returns of a symbolic link (its mtime, size:
 * its target's length, attributes).  attrparts() and attrjoin():
 * attribute text (meta.h, struct meta_attr) to fields and back, the
 * atime and ctime the mtime @mt when left out, names n (1 when left
 * out).  namesof(): the names {parent, name} whose entries name file @id
 * (@a from recof()), its record's own first, then those of its
 * "=<parent>/<name>" fields (hard links); reads only.  unname_plan()
 * (reads only) and unname_apply(): name @parent/@name of file @id goes
 * (the caller removes the entry); the plan is nil when it was the last
 * one (the caller buries the object), else the apply moves the record's
 * own name to another if need be, counts the names left, and writes
 * every entry left.  moved(): name @op/@on of file @id is @np/@nn now.
 */
#define LUA_NS \
	LUA_HEAL \
	"if call('GET', LAYOUT) ~= '" STR(META_LAYOUT) "' then\n" \
	"  fail('EPROTO namespace ' .. P .. ' has layout ' .. shown(call('GET', LAYOUT)) ..\n" \
	"       ', not " STR(META_LAYOUT) " (meta_layout_settle() migrates layouts 1 and 2)')\n" \
	"end\n" \
	"local function parse(v, dir, name)\n" \
	"  local k, id, rest = string.match(v, '^([dfl])(%d+)(.*)$')\n" \
	"  if rest and rest ~= '' and (k ~= 'f' or not fattrs(rest)) then\n" \
	"    k = nil\n" \
	"  end\n" \
	"  if not k or not isid(id) then\n" \
	"    fail('EBADMSG directory ' .. dir .. \": entry '\" .. name .. \"' is \" .. shown(v))\n" \
	"  end\n" \
	"  return k, id\n" \
	"end\n" \
	"local function needsub(dir, name, id)\n" \
	"  if call('EXISTS', dkey(id)) == 0 then\n" \
	"    fail('EBADMSG directory ' .. dir .. \": entry '\" .. name .. \"' names directory \" ..\n" \
	"         id .. ', which does not exist')\n" \
	"  end\n" \
	"end\n" \
	"local function pathof(parent, name)\n" \
	"  local parts, cur, path = {}, parent, ''\n" \
	"  for i = 1, " STR(META_PATH_DEPTH) " do\n" \
	"    if cur == '1' then\n" \
	"      for j = #parts, 1, -1 do path = path .. '/' .. parts[j] end\n" \
	"      path = path .. '/' .. name\n" \
	"      break\n" \
	"    end\n" \
	"    local a = call('HMGET', dkey(cur), '/parent', '/name')\n" \
	"    if not isid(a[1]) then badfield(cur, '/parent', a[1]) end\n" \
	"    if not a[2] or a[2] == '' then badfield(cur, '/name', a[2]) end\n" \
	"    parts[#parts + 1] = a[2]\n" \
	"    cur = a[1]\n" \
	"  end\n" \
	"  if #path >= 4096 then return '' end\n" \
	"  return path\n" \
	"end\n" \
	"local function needdir(id)\n" \
	"  if call('EXISTS', dkey(id)) == 1 then return end\n" \
	"  if recex(id) then fail('ENOTDIR') end\n" \
	"  fail('ENOENT')\n" \
	"end\n" \
	"local RESERVED = {'/mtime', '/parent', '/name', '/nsub', '/attr'}\n" \
	"local function isempty(id)\n" \
	"  local n = call('HLEN', dkey(id))\n" \
	"  for _, f in ipairs(RESERVED) do\n" \
	"    n = n - call('HEXISTS', dkey(id), f)\n" \
	"  end\n" \
	"  return n <= 0\n" \
	"end\n" \
	"local function unused(id)\n" \
	"  return isid(id) and call('EXISTS', dkey(id), tkey(id), skey(id)) == 0 and not recex(id)\n" \
	"end\n" \
	"local function newdir(parent, name, id, mtime, attr)\n" \
	"  call('HSET', dkey(id), '/mtime', mtime, '/parent', parent, '/name', name,\n" \
	"       '/nsub', '0')\n" \
	"  if attr and attr ~= '' then call('HSET', dkey(id), '/attr', attr) end\n" \
	"  call('HSET', dkey(parent), name, 'd' .. id, '/mtime', mtime)\n" \
	"  call('HINCRBY', dkey(parent), '/nsub', 1)\n" \
	"end\n" \
	"local function placed(id, parent, name)\n" \
	"  if recex(id) then\n" \
	"    recset(id, parent, name)\n" \
	"  elseif call('EXISTS', skey(id)) == 1 then\n" \
	"    call('HSET', skey(id), 'p', parent, 'n', name)\n" \
	"  end\n" \
	"end\n" \
	"local function linkattrs(id)\n" \
	"  local a = call('HMGET', skey(id), 'm', 't', 'a')\n" \
	"  return {'l' .. id, a[1], a[2] and tostring(#a[2]), a[3]}\n" \
	"end\n" \
	"local function inval(kind, parent, name, id)\n" \
	"  local msg = ORIGIN .. ' ' .. kind .. ' ' .. parent .. ' ' .. name .. ' ' .. id\n" \
	"  call('SPUBLISH', CHAN, msg)\n" \
	"end\n" \
	"local function attrparts(s, mt)\n" \
	"  if not isattr(s) then return nil end\n" \
	"  local u, g, m, rest = string.match(s, '^(%d+) (%d+) ([0-7]+)(.*)$')\n" \
	"  local a, c, n = string.match(rest, '^ (%-?%d+) (%-?%d+) ?(%d*)$')\n" \
	"  if not a then a, c = mt or '0', mt or '0' end\n" \
	"  return u, g, m, a, c, tonumber(n) or 1\n" \
	"end\n" \
	"local function attrjoin(u, g, m, a, c, n)\n" \
	"  local s = u .. ' ' .. g .. ' ' .. m .. ' ' .. a .. ' ' .. c\n" \
	"  if n > 1 then s = s .. ' ' .. string.format('%d', n) end\n" \
	"  return s\n" \
	"end\n" \
	"local function namesof(id, a)\n" \
	"  local out = {}\n" \
	"  local function add(p, n)\n" \
	"    if isid(p) and n and n ~= '' and isfile(call('HGET', dkey(p), n), id) then\n" \
	"      out[#out + 1] = {p, n}\n" \
	"    end\n" \
	"  end\n" \
	"  add(a[6], a[7])\n" \
	"  for _, f in ipairs(call('HKEYS', xkey(id))) do\n" \
	"    local p, n = string.match(f, '^=(%d+)/(.+)$')\n" \
	"    if p then add(p, n) end\n" \
	"  end\n" \
	"  return out\n" \
	"end\n" \
	"local function unname_plan(id, parent, name)\n" \
	"  local a = recof(id)\n" \
	"  if not a or not a[1] then return nil end\n" \
	"  local rest = {}\n" \
	"  for _, pn in ipairs(namesof(id, a)) do\n" \
	"    if pn[1] ~= parent or pn[2] ~= name then rest[#rest + 1] = pn end\n" \
	"  end\n" \
	"  if #rest == 0 then return nil end\n" \
	"  local u, g, m, at = attrparts(a[5], a[3])\n" \
	"  if not u then u, g, m, at = '0', '0', '444', a[3] end\n" \
	"  return {id = id, a = a, rest = rest, gone = {parent, name},\n" \
	"          attr = attrjoin(u, g, m, at, NOW, #rest)}\n" \
	"end\n" \
	"local function unname_apply(pl)\n" \
	"  local id, a, r1 = pl.id, pl.a, pl.rest[1]\n" \
	"  call('HDEL', xkey(id), '=' .. pl.gone[1] .. '/' .. pl.gone[2])\n" \
	"  if a[6] == pl.gone[1] and a[7] == pl.gone[2] then\n" \
	"    call('HDEL', xkey(id), '=' .. r1[1] .. '/' .. r1[2])\n" \
	"    recset(id, r1[1], r1[2])\n" \
	"  end\n" \
	"  local v = fval(id, a[1], a[3], a[2], a[4], pl.attr)\n" \
	"  for _, pn in ipairs(pl.rest) do call('HSET', dkey(pn[1]), pn[2], v) end\n" \
	"  call('SPUBLISH', CHAN, '- attr 0 - ' .. id)\n" \
	"end\n" \
	"local function moved(id, op, on, np, nn)\n" \
	"  local a = rec(id) or {}\n" \
	"  local f = '=' .. op .. '/' .. on\n" \
	"  if (a.p ~= op or a.n ~= on) and call('HEXISTS', xkey(id), f) == 1 then\n" \
	"    call('HDEL', xkey(id), f)\n" \
	"    call('HSET', xkey(id), '=' .. np .. '/' .. nn, '1')\n" \
	"  else\n" \
	"    placed(id, np, nn)\n" \
	"  end\n" \
	"end\n"

/*
 * Helpers of the scripts that read node cards: the card fields in the
 * order ARGV carries them from ARGV[9] on and the scripts return them in,
 * the key of a card, whether a holder or member is a node name at all
 * (see util_node_name_validate(); anything else is left alone for
 * meta_nodes.c to report), and whether node @n has a card a fetch can
 * use.
 */
#define LUA_NODES \
	"local FIELDS = {'host', 'pid', 'listen', 'instance', 'started', 'capacity',\n" \
	"                'used', 'caps', 'rdma'}\n" \
	"local function ckey(n) return T .. 'node:' .. n end\n" \
	"local function isnode(n)\n" \
	"  return #n <= 63 and string.match(n, '^[A-Za-z0-9_][A-Za-z0-9._-]*$') ~= nil\n" \
	"end\n" \
	"local function live(n)\n" \
	"  if not isnode(n) then return false end\n" \
	"  local l = redis.pcall('HGET', ckey(n), 'listen')\n" \
	"  return type(l) == 'string' and l ~= ''\n" \
	"end\n"

/* clang-format on */

#endif
