-- sem_release: give back one permit of a semaphore (see sem_acquire.lua).
-- Nothing changes unless the holder holds a live permit with that token: a
-- second release, a late one, or one after the lease ran out and was taken
-- back returns 0 and adds no permit.
--
-- KEYS[1]  holders (zset)
-- KEYS[2]  tokens (hash)
-- ARGV[1]  holder id
-- ARGV[2]  token, or '0' for whatever permit the holder has (the clean-up
--          of an attempt whose reply was lost)
-- ARGV[3]  the semaphore's channel (same hash slot; a channel, not a key)
-- ARGV[4]  the publish command: PUBLISH, or SPUBLISH on Cluster
-- Returns 1 released, 0 not held. A release, or a reclaim of expired
-- holders, publishes '' so that waiters try again.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, h in ipairs(gone) do redis.call('HDEL', KEYS[2], h) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end

local tok = redis.call('HGET', KEYS[2], ARGV[1])
if not tok or (ARGV[2] ~= '0' and tok ~= ARGV[2]) then
  if #gone > 0 then redis.call(ARGV[4], ARGV[3], '') end
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call(ARGV[4], ARGV[3], '')
return 1
