-- sem_acquire: grant a permit of a semaphore when fewer holders than its
-- limit hold one, else say when the next one comes back.
--
-- A semaphore is three keys of one hash slot: KEYS[1] a sorted set of
-- holder id by the end of its lease, in µs of this server's clock (TIME);
-- KEYS[2] a hash of holder id to token; KEYS[3] a hash with the limit (n)
-- and the last token issued (c). The count of permits held is the number
-- of live holders: nothing counts permits up or down, so no release can
-- add one. Every semaphore script first takes out the holders whose lease
-- ran out (reclaim), so a dead client's permit comes back within its lease.
--
-- KEYS[1]  holders (zset)
-- KEYS[2]  tokens (hash)
-- KEYS[3]  meta (hash: n, c)
-- ARGV[1]  holder id (compared whole)
-- ARGV[2]  lease in ms
-- ARGV[3]  limit to store when none is stored (the stored one wins)
-- ARGV[4]  key TTL in ms (>= 2 leases): how long the keys, and the token
--          counter, outlive their last use
--
-- The token is max(c + 1, TIME in µs), as a lock's: the counter covers
-- grants within one microsecond, the clock a lost counter. Numbers are
-- formatted with %d: Lua's own conversion (%.14g) would round them.
--
-- Returns {1, token} when granted (the holder's token again when it holds
-- one already: a retry); {0, ms} when every permit is held, ms the least
-- lease left among the holders (at least 1).
-- stretch raises key k's TTL to ms, never lowers it: a short lease's grant
-- must not make the keys expire under a longer holder's lease. A key without
-- a TTL (PTTL -1) is one just created here: it gets one.
local function stretch(k, ms)
  local p = redis.call('PTTL', k)
  if p ~= -2 and p < tonumber(ms) then redis.call('PEXPIRE', k, ms) end
end

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, h in ipairs(gone) do redis.call('HDEL', KEYS[2], h) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end

local ends = string.format('%d', now + ARGV[2] * 1000)
local mine = redis.call('HGET', KEYS[2], ARGV[1])
if mine then
  redis.call('ZADD', KEYS[1], ends, ARGV[1])
  return {1, mine}
end
redis.call('HSETNX', KEYS[3], 'n', ARGV[3])
local limit = tonumber(redis.call('HGET', KEYS[3], 'n'))
if redis.call('ZCARD', KEYS[1]) >= limit then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local left = 1
  if first[2] then left = math.max(1, math.ceil((first[2] - now) / 1000)) end
  stretch(KEYS[3], ARGV[4])
  return {0, left}
end
local tok = now
local c = tonumber(redis.call('HGET', KEYS[3], 'c'))
if c and c >= tok then tok = c + 1 end
tok = string.format('%d', tok)
redis.call('HSET', KEYS[3], 'c', tok)
redis.call('ZADD', KEYS[1], ends, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], tok)
for i = 1, 3 do stretch(KEYS[i], ARGV[4]) end
return {1, tok}
