-- sem_limit: set a semaphore's limit (see sem_acquire.lua). Held permits
-- are never taken back: a lower limit only stops grants until the holders
-- are fewer; a higher one wakes the waiters.
--
-- KEYS[1]  holders (zset)
-- KEYS[2]  tokens (hash)
-- KEYS[3]  meta (hash)
-- ARGV[1]  the limit, at least 1
-- ARGV[2]  key TTL in ms
-- ARGV[3]  the semaphore's channel
-- ARGV[4]  the publish command
-- Returns the number of live holders.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, h in ipairs(gone) do redis.call('HDEL', KEYS[2], h) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end

redis.call('HSET', KEYS[3], 'n', ARGV[1])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[3], ARGV[2]) end
redis.call(ARGV[4], ARGV[3], '')
return redis.call('ZCARD', KEYS[1])
