"""The Lua scripts behind `RedisStore`: each one runs atomically on the Redis server.

Where SQLite opens a transaction (deposit under the caps, redeem an invite), Redis runs one of
these scripts, so two replicas racing for the last slot of a mailbox or for one invite cannot
both win. Key names are built inside the scripts from the prefix: fine on a single Redis server
(what the relay supports), not on Redis Cluster, whose keys would live in different slots.

Per mailbox FP under PREFIX:
    PREFIX blob:FP       hash   id -> sealed blob
    PREFIX meta:FP       hash   id -> "CREATED TAG" (its length is the mailbox's message count)
    PREFIX size:FP       string total blob bytes in the mailbox
    PREFIX tag:FP:TAG    zset   ids with that tag, scored by id (fetch order; ZCARD: its count)
    PREFIX tagsize:FP    hash   tag -> blob bytes under it (a tag's share is checked against both)
    PREFIX known:FP      set    the tags the owner registered (never shrinks; capped in size)
    PREFIX junk:FP       hash   n, bytes: the mail under tags not registered (its own quota)
    PREFIX utags:FP      set    tags not registered that hold mail (what an owner purge deletes)
    PREFIX ratchet:FP    hash   card, fallback, high (the highest one-time key id ever published)
    PREFIX otk:FP        zset   one-time keys waiting to be claimed, scored by id
Shared:
    PREFIX seq           string the last mail id handed out (INCR: unique across replicas)
    PREFIX age           zset   "FP ID" scored by minus its creation time (what purge sweeps)
    PREFIX notify:FP     pub/sub channel of FP's wake-ups, "FP TAG [ID BLOB]" (`relay.redis_hub`)
"""

from __future__ import annotations

from relay.notify import PUSH_BLOB_MAX

NOTIFY = "notify"  # after the prefix, then ":FP": where a deposit under a registered tag is announced

# Shared by the scripts. `deposit` returns the new id and whether the tag is registered, or
# false and the outcome at a cap.
_LIB = """
local function box(prefix, fp)
  return prefix .. 'blob:' .. fp, prefix .. 'meta:' .. fp, prefix .. 'size:' .. fp
end

local function tags(prefix, fp)
  return prefix .. 'known:' .. fp, prefix .. 'junk:' .. fp, prefix .. 'utags:' .. fp
end

-- A number's text with its sign flipped, as text: no digit can be lost on the way through a Lua
-- number (older Redis servers print those with 14). The age index holds minus the creation time:
-- a new entry has the lowest score, so a small sorted set (one packed list, which an insertion
-- walks reading every score as text) takes it at the head at once instead of walking to the end:
-- measured, 12 µs of a deposit's ~20 in Redis with a hundred messages waiting.
local function negated(number)
  if string.sub(number, 1, 1) == '-' then return string.sub(number, 2) end
  return '-' .. number
end

local function deposit(prefix, fp, tag, blob, now, max_messages, max_bytes, max_unknown, max_unknown_bytes,
                       max_tag, max_tag_bytes)
  local blobs, meta, size = box(prefix, fp)
  local known, junk, utags = tags(prefix, fp)
  local by_tag, tagsize = prefix .. 'tag:' .. fp .. ':' .. tag, prefix .. 'tagsize:' .. fp
  local used = tonumber(redis.call('GET', size) or '0')
  local counts = redis.call('HMGET', junk, 'n', 'bytes')
  local junk_n, junk_bytes = tonumber(counts[1] or '0'), tonumber(counts[2] or '0')
  local registered = redis.call('SISMEMBER', known, tag) == 1
  if registered then
    if (max_tag > 0 and redis.call('ZCARD', by_tag) >= max_tag)
        or (max_tag_bytes > 0
            and tonumber(redis.call('HGET', tagsize, tag) or '0') + #blob > max_tag_bytes) then
      return false, 'tag_full'
    end
    if redis.call('HLEN', meta) - junk_n >= max_messages or used - junk_bytes + #blob > max_bytes then
      return false, 'mailbox_full'
    end
  elseif junk_n >= max_unknown or junk_bytes + #blob > max_unknown_bytes then
    return false, 'unknown_full'
  end
  if not registered then
    redis.call('HINCRBY', junk, 'n', 1)
    redis.call('HINCRBY', junk, 'bytes', #blob)
    redis.call('SADD', utags, tag)
  end
  local id = string.format('%d', redis.call('INCR', prefix .. 'seq'))
  redis.call('HSET', blobs, id, blob)
  redis.call('HSET', meta, id, now .. ' ' .. tag)
  redis.call('INCRBY', size, #blob)
  redis.call('HINCRBY', tagsize, tag, #blob)
  redis.call('ZADD', by_tag, id, id)
  redis.call('ZADD', prefix .. 'age', negated(now), fp .. ' ' .. id)
  return id, registered
end

local function remove(prefix, fp, id)
  local blobs, meta, size = box(prefix, fp)
  local row = redis.call('HGET', meta, id)
  if not row then
    return 0
  end
  local tag = string.sub(row, string.find(row, ' ', 1, true) + 1)
  local bytes = redis.call('HSTRLEN', blobs, id)
  local known, junk, utags = tags(prefix, fp)
  local by_tag = prefix .. 'tag:' .. fp .. ':' .. tag
  redis.call('DECRBY', size, bytes)
  redis.call('HDEL', blobs, id)
  redis.call('HDEL', meta, id)
  redis.call('ZREM', by_tag, id)
  redis.call('ZREM', prefix .. 'age', fp .. ' ' .. id)
  local tagsize = prefix .. 'tagsize:' .. fp
  local left = redis.call('ZCARD', by_tag)
  if left == 0 then
    redis.call('HDEL', tagsize, tag)
  else
    redis.call('HINCRBY', tagsize, tag, -bytes)
  end
  if redis.call('SISMEMBER', known, tag) == 0 then
    redis.call('HINCRBY', junk, 'n', -1)
    redis.call('HINCRBY', junk, 'bytes', -bytes)
    if left == 0 then
      redis.call('SREM', utags, tag)
    end
  end
  if redis.call('HLEN', meta) == 0 then
    redis.call('DEL', size, junk, utags, tagsize)  -- an emptied mailbox leaves only its registered tags
  end
  return 1
end

-- Register one tag (unless the mailbox has `most`); mail waiting under it moves to the
-- registered quota. Returns false once the mailbox is at its most.
local function register(prefix, fp, tag, most)
  local known, junk, utags = tags(prefix, fp)
  if redis.call('SISMEMBER', known, tag) == 1 then return true end
  if redis.call('SCARD', known) >= most then return false end
  redis.call('SADD', known, tag)
  if redis.call('SREM', utags, tag) == 1 then
    local blobs = prefix .. 'blob:' .. fp
    local ids = redis.call('ZRANGE', prefix .. 'tag:' .. fp .. ':' .. tag, 0, -1)
    local bytes = 0
    for _, id in ipairs(ids) do
      bytes = bytes + redis.call('HSTRLEN', blobs, id)
    end
    redis.call('HINCRBY', junk, 'n', -#ids)
    redis.call('HINCRBY', junk, 'bytes', -bytes)
  end
  return true
end
"""

# ARGV: prefix, fp, tag, blob, now, max_messages, max_bytes, max_unknown, max_unknown_bytes, max_tag,
# max_tag_bytes (0: no cap) -> {the new id, 1 if announced}, or the outcome at a cap ("mailbox_full",
# "unknown_full", "tag_full").
# Mail under a registered tag is announced here, saving the relay a second round trip, with its
# id and blob when small enough to push (`relay.redis_hub.announcement`); other tags' wake-ups
# are the relay's to throttle.
DEPOSIT = _LIB + """
local id, other = deposit(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]),
                          tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]),
                          tonumber(ARGV[11]))
if not id then return other end
if not other then return {id, 0} end
local told = ARGV[2] .. ' ' .. ARGV[3]
if #ARGV[4] <= """ + str(PUSH_BLOB_MAX) + """ then told = told .. ' ' .. id .. ' ' .. ARGV[4] end
redis.call('PUBLISH', ARGV[1] .. '""" + NOTIFY + """:' .. ARGV[2], told)
return {id, 1}
"""

# ARGV: prefix, fp, most, tag...
REGISTER = _LIB + """
for i = 4, #ARGV do
  if not register(ARGV[1], ARGV[2], ARGV[i], tonumber(ARGV[3])) then break end
end
return 0
"""

# ARGV: prefix, fp -> how many blobs under tags not registered were deleted
PURGE_UNKNOWN = _LIB + """
local _, _, utags = tags(ARGV[1], ARGV[2])
local gone = 0
for _, tag in ipairs(redis.call('SMEMBERS', utags)) do
  for _, id in ipairs(redis.call('ZRANGE', ARGV[1] .. 'tag:' .. ARGV[2] .. ':' .. tag, 0, -1)) do
    gone = gone + remove(ARGV[1], ARGV[2], id)
  end
end
return gone
"""

# ARGV: prefix, tag, blob, now, max_messages, max_bytes
REDEEM = _LIB + """
local slot = ARGV[1] .. 'invite:' .. ARGV[2]
local fp, expires, used = unpack(redis.call('HMGET', slot, 'fp', 'expires', 'used'))
if not fp then return 'unknown' end
if used == '1' then return 'used' end
if tonumber(ARGV[4]) >= tonumber(expires) then return 'expired' end
local max_messages, max_bytes = tonumber(ARGV[5]), tonumber(ARGV[6])
if not deposit(ARGV[1], fp, ARGV[2], ARGV[3], ARGV[4], max_messages, max_bytes, max_messages, max_bytes,
               0, 0) then
  return 'mailbox_full'
end
redis.call('HSET', slot, 'used', '1')
return 'stored'
"""

# ARGV: prefix, fp, since, limit, n, n ids to ack, tag...
# -> {how many acked ids were deleted, then flat: id, created, tag, blob, ...}
# The acks go first, as in `ack`. Each tag's zset is read in id order, skipping mail created at
# or before `since` (expired but not yet purged; the purge runs every minute, so there are
# few); the per-tag heads are merged. Metadata and blobs are read with one HMGET per batch of ids:
# a call from Lua costs about as much as the lookup it makes.
FETCH = _LIB + """
local prefix, fp, since, limit = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local first_tag = 6 + tonumber(ARGV[5])
local deleted = 0
for i = 6, first_tag - 1 do
  deleted = deleted + remove(prefix, fp, ARGV[i])
end
local meta = prefix .. 'meta:' .. fp
local found, seen = {}, {}
for i = first_tag, #ARGV do
  local tag = ARGV[i]
  if not seen[tag] then
    seen[tag] = true
    local taken, start = 0, 0
    while taken < limit do
      local ids = redis.call('ZRANGE', prefix .. 'tag:' .. fp .. ':' .. tag, start, start + limit - 1)
      if #ids == 0 then break end
      start = start + #ids
      local rows = redis.call('HMGET', meta, unpack(ids))
      for k, id in ipairs(ids) do
        local row = rows[k]
        local sep = row and string.find(row, ' ', 1, true)
        if sep and tonumber(string.sub(row, 1, sep - 1)) > since and taken < limit then
          taken = taken + 1
          found[#found + 1] = {tonumber(id), id, string.sub(row, 1, sep - 1), tag}
        end
      end
    end
  end
end
table.sort(found, function(a, b) return a[1] < b[1] end)
local out, page = {deleted}, {}
for i = 1, math.min(limit, #found) do
  page[i] = found[i][2]
end
if #page == 0 then return out end
local blobs = redis.call('HMGET', prefix .. 'blob:' .. fp, unpack(page))
for i, id in ipairs(page) do
  local m = found[i]
  out[#out + 1] = id
  out[#out + 1] = m[3]
  out[#out + 1] = m[4]
  out[#out + 1] = blobs[i]
end
return out
"""

# ARGV: prefix, fp, id... -> how many of the ids were in this mailbox and are now gone
ACK = _LIB + """
local gone = 0
for i = 3, #ARGV do
  gone = gone + remove(ARGV[1], ARGV[2], ARGV[i])
end
return gone
"""

# ARGV: prefix, cutoff, batch -> {index entries swept, blobs deleted}; created <= cutoff. Entries
# scored by their creation time itself (stored by earlier versions: positive) are swept too.
PURGE = _LIB + """
local age, batch = ARGV[1] .. 'age', tonumber(ARGV[3])
local old = redis.call('ZRANGEBYSCORE', age, negated(ARGV[2]), 0, 'LIMIT', 0, batch)
if #old < batch then
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', age, '(0', ARGV[2], 'LIMIT', 0, batch - #old)) do
    old[#old + 1] = member
  end
end
local gone = 0
for _, member in ipairs(old) do
  local sep = string.find(member, ' ', 1, true)
  local fp, id = string.sub(member, 1, sep - 1), string.sub(member, sep + 1)
  local removed = remove(ARGV[1], fp, id)
  if removed == 0 then
    redis.call('ZREM', ARGV[1] .. 'age', member)  -- an index entry without mail: drop it too
  end
  gone = gone + removed
end
return {#old, gone}
"""

# KEYS: the slot. ARGV: fp, expires, expire_at_ms, prefix, most, tag. The first creator of a tag
# keeps it, as in SQLite's INSERT OR IGNORE; the owner's tag is registered either way.
CREATE_INVITE = _LIB + """
register(ARGV[4], ARGV[1], ARGV[6], tonumber(ARGV[5]))
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'expires', ARGV[2], 'used', '0')
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
"""

# KEYS: the slot. ARGV: fp. Only the slot's owner may revoke it.
REVOKE_INVITE = """
if redis.call('HGET', KEYS[1], 'fp') ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""

# KEYS: ratchet:FP, otk:FP. ARGV: card, fallback ("" keeps the stored one), most, then id, key
# pairs. Keys at or below the highest id ever published are dropped (already handed out, or
# here); -1 and nothing stored when the rest would not fit under `most`.
PUT_RATCHET = """
local high = tonumber(redis.call('HGET', KEYS[1], 'high') or '-1')
local top, fresh = high, {}
for i = 4, #ARGV, 2 do
  local id = tonumber(ARGV[i])
  if id > high then
    fresh[#fresh + 1] = ARGV[i]
    fresh[#fresh + 1] = ARGV[i + 1]
    if id > top then top = id end
  end
end
if redis.call('ZCARD', KEYS[2]) + #fresh / 2 > tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], 'card', ARGV[1], 'high', string.format('%d', top))
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'fallback', ARGV[2]) end
for i = 1, #fresh, 2 do redis.call('ZADD', KEYS[2], fresh[i], fresh[i + 1]) end
return redis.call('ZCARD', KEYS[2])
"""

# KEYS: ratchet:FP, otk:FP. Returns false (no card), or {card, key, 1} for a one-time key taken
# out, {card, fallback, 0} once none are left, {card} when there is no fallback either.
CLAIM_RATCHET = """
local card = redis.call('HGET', KEYS[1], 'card')
if not card then return false end
local popped = redis.call('ZPOPMIN', KEYS[2])
if popped[1] then return {card, popped[1], 1} end
local fallback = redis.call('HGET', KEYS[1], 'fallback')
if fallback then return {card, fallback, 0} end
return {card}
"""
