"""File chunks in the shared Redis store (`relay.file_store`), one Lua script per change.

Per mailbox FP under PREFIX (beside the mail's keys, `relay.redis_scripts`):
    PREFIX files:FP          hash   file id -> "CREATED TAG BYTES"
    PREFIX chunk:FP:ID       hash   chunk index -> sealed chunk
Shared:
    PREFIX fileage           zset   "FP ID" scored by the file's first chunk's time (what purge sweeps)

A chunk's quota check reads the mailbox's files (at most `max_files` plus `max_unknown_files`
of them) and the owner's registered tags in the same script, so two replicas racing for the
last room cannot both win.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from relay.file_store import ChunkOutcome, FileProgress, FileQuota, first_missing
from relay.redis_link import guarded, in_batches

PURGE_BATCH = 200  # files per purge script call

_DROP = """
local function drop(prefix, fp, id)
  redis.call('DEL', prefix .. 'chunk:' .. fp .. ':' .. id)
  redis.call('ZREM', prefix .. 'fileage', fp .. ' ' .. id)
  return redis.call('HDEL', prefix .. 'files:' .. fp, id)
end
"""

# ARGV: prefix, fp, tag, id, index, blob, now, sealed_file_bytes, max_files, max_bytes,
# max_unknown_files, max_unknown_bytes, max_tag_bytes (0: no share)
PUT_CHUNK = """
local prefix, fp, tag, id, index, blob, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local files, chunks = prefix .. 'files:' .. fp, prefix .. 'chunk:' .. fp .. ':' .. id
local known = prefix .. 'known:' .. fp
local row = redis.call('HGET', files, id)
local file_bytes = nil
local created = now
if row then
  local c, t, b = string.match(row, '^(%S+) (%S+) (%d+)$')
  if t ~= tag then return 'wrong_tag' end
  created, file_bytes = c, tonumber(b)
end
if redis.call('HEXISTS', chunks, index) == 1 then return 'kept' end
if (file_bytes or 0) + #blob > tonumber(ARGV[8]) then return 'file_full' end
local registered = redis.call('SISMEMBER', known, tag) == 1
local n, used, mine = 0, 0, 0
local all = redis.call('HGETALL', files)
for i = 1, #all, 2 do
  local _, t, b = string.match(all[i + 1], '^(%S+) (%S+) (%d+)$')
  if (redis.call('SISMEMBER', known, t) == 1) == registered then
    n = n + 1
    used = used + tonumber(b)
    if t == tag then mine = mine + tonumber(b) end
  end
end
local most_files, most_bytes = tonumber(ARGV[9]), tonumber(ARGV[10])
if not registered then most_files, most_bytes = tonumber(ARGV[11]), tonumber(ARGV[12]) end
if (file_bytes == nil and n >= most_files) or used + #blob > most_bytes then
  if registered then return 'mailbox_full' end
  return 'unknown_full'
end
if registered and tonumber(ARGV[13]) > 0 and mine + #blob > tonumber(ARGV[13]) then return 'tag_full' end
redis.call('HSET', chunks, index, blob)
redis.call('HSET', files, id, created .. ' ' .. tag .. ' ' .. string.format('%d', (file_bytes or 0) + #blob))
if file_bytes == nil then redis.call('ZADD', prefix .. 'fileage', now, fp .. ' ' .. id) end
return 'stored'
"""

# ARGV: prefix, fp, ids...
ACK = _DROP + """
local gone = 0
for i = 3, #ARGV do gone = gone + drop(ARGV[1], ARGV[2], ARGV[i]) end
return gone
"""

# ARGV: prefix, fp → how many files under tags the owner never registered went
PURGE_UNKNOWN = _DROP + """
local all = redis.call('HGETALL', ARGV[1] .. 'files:' .. ARGV[2])
local known, gone = ARGV[1] .. 'known:' .. ARGV[2], 0
for i = 1, #all, 2 do
  local _, t = string.match(all[i + 1], '^(%S+) (%S+) ')
  if redis.call('SISMEMBER', known, t) == 0 then gone = gone + drop(ARGV[1], ARGV[2], all[i]) end
end
return gone
"""

# ARGV: prefix, cutoff, batch → {swept, removed}
PURGE = _DROP + """
local old = redis.call('ZRANGEBYSCORE', ARGV[1] .. 'fileage', '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local gone = 0
for _, entry in ipairs(old) do
  local fp, id = string.match(entry, '^(%S+) (%S+)$')
  gone = gone + drop(ARGV[1], fp, id)
  redis.call('ZREM', ARGV[1] .. 'fileage', entry)
end
return {#old, gone}
"""


class RedisFiles:
    def __init__(self, redis: Redis, prefix: str) -> None:
        self.redis = redis
        self.prefix = prefix
        self._put = redis.register_script(PUT_CHUNK)
        self._ack = redis.register_script(ACK)
        self._purge = redis.register_script(PURGE)
        self._purge_unknown = redis.register_script(PURGE_UNKNOWN)

    @guarded
    async def put_chunk(
        self, fp: str, tag: str, file_id: str, index: int, blob: bytes, now: float, quota: FileQuota
    ) -> ChunkOutcome:
        args: list[Any] = [self.prefix, fp, tag, file_id, index, blob, repr(float(now)),
                           quota.sealed_file_bytes, quota.max_files, quota.max_bytes,
                           quota.max_unknown_files, quota.max_unknown_bytes, quota.max_tag_bytes or 0]
        return ChunkOutcome((await self._put(args=args)).decode())

    @guarded
    async def progress(self, fp: str, file_id: str) -> FileProgress:
        row = await self.redis.hget(self.prefix + "files:" + fp, file_id)
        if row is None:
            return FileProgress(0, 0)
        indices = await self.redis.hkeys(f"{self.prefix}chunk:{fp}:{file_id}")
        return FileProgress(first_missing(int(i) for i in indices), int(row.split()[2]))

    @guarded
    async def get_chunk(self, fp: str, file_id: str, index: int) -> bytes | None:
        blob = await self.redis.hget(f"{self.prefix}chunk:{fp}:{file_id}", str(index))
        return blob.encode() if isinstance(blob, str) else blob  # bytes: decode_responses is off

    @guarded
    async def ack(self, fp: str, file_ids: list[str]) -> int:
        return int(await self._ack(args=[self.prefix, fp, *dict.fromkeys(file_ids)]))

    @guarded
    async def purge_unknown(self, fp: str) -> int:
        return int(await self._purge_unknown(args=[self.prefix, fp]))

    async def purge(self, now: float, ttl: float) -> int:
        cutoff = repr(float(now - ttl))

        @guarded
        async def sweep(batch: int) -> tuple[int, int]:
            swept, removed = await self._purge(args=[self.prefix, cutoff, batch])
            return int(swept), int(removed)

        return await in_batches(PURGE_BATCH, sweep)
