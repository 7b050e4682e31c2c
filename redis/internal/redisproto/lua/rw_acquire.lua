-- rw_acquire: grant a read or the write of a read-write lock, or say how
-- long to wait.
--
-- A read-write lock is four keys of one hash slot, on this server's clock
-- (TIME, µs): KEYS[1] a sorted set of reader id by the end of its lease;
-- KEYS[2] a hash of reader id to its token; KEYS[3] a hash with the
-- writer's id (w), the end of its lease (we) and the last token issued (c);
-- KEYS[4] a sorted set of waiting writers' ids by the end of their mark.
-- Every writing script first takes out what ran out (rw_reclaim.lua).
--
-- Only writes issue tokens, max(c + 1, TIME in µs) as a lock's; a reader
-- gets c, the token of the last write it reads after ('0' when none). A
-- read is refused while a writer holds or a waiting writer's mark is live
-- (writers go first); a write while anyone holds, and then, with ARGV[4]
-- '1', the attempt marks its owner as waiting for ARGV[2] ms.
--
-- ARGV[1]  holder id (compared whole)
-- ARGV[2]  lease in ms
-- ARGV[3]  'r' or 'w'
-- ARGV[4]  '1': the caller waits when refused (mark a waiting writer)
-- ARGV[5]  key TTL in ms (>= 2 leases): how long the keys, and the token
--          counter, outlive their last use
--
-- Returns {1, token} when granted (the same grant again when the holder
-- holds already: a retry); {0, ms} when refused, ms the least lease left
-- among the holds in the way (a waiting writer's at most a third of its
-- own, so that its mark is renewed in time), at least 1.
--[[rw_reclaim.lua]]

local function wait(us)
  if ARGV[3] == 'w' and ARGV[4] == '1' then
    redis.call('ZADD', KEYS[4], string.format('%d', now + ARGV[2] * 1000), ARGV[1])
    stretch(ARGV[5])
    us = math.min(us, ARGV[2] * 1000 / 3)
  end
  return {0, math.max(1, math.ceil(us / 1000))}
end

local ends = string.format('%d', now + ARGV[2] * 1000)
local w = redis.call('HGET', KEYS[3], 'w')
if ARGV[3] == 'r' then
  local mine = redis.call('HGET', KEYS[2], ARGV[1])
  if mine then
    redis.call('ZADD', KEYS[1], ends, ARGV[1])
    return {1, mine}
  end
  if w then return wait(redis.call('HGET', KEYS[3], 'we') - now) end
  local q = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if q[2] then return wait(q[2] - now) end
  local tok = redis.call('HGET', KEYS[3], 'c') or '0'
  redis.call('ZADD', KEYS[1], ends, ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], tok)
  stretch(ARGV[5])
  return {1, tok}
end

if w == ARGV[1] then
  redis.call('HSET', KEYS[3], 'we', ends)
  return {1, redis.call('HGET', KEYS[3], 'c')}
end
if w then return wait(redis.call('HGET', KEYS[3], 'we') - now) end
local r = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if r[2] then return wait(r[2] - now) end
local tok = now
local c = tonumber(redis.call('HGET', KEYS[3], 'c'))
if c and c >= tok then tok = c + 1 end
tok = string.format('%d', tok)
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[3], 'w', ARGV[1], 'we', ends, 'c', tok)
stretch(ARGV[5])
return {1, tok}
