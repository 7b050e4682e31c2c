-- rw_downgrade: make the writer a reader, with the write's token and a
-- lease of ARGV[3] ms, in one step (see rw_acquire.lua).
--
-- ARGV[1]  holder id
-- ARGV[2]  the write's token
-- ARGV[3]  lease in ms
-- ARGV[4]  key TTL in ms (>= 2 leases)
-- ARGV[5]  the lock's channel
-- ARGV[6]  the publish command
-- Returns 1 downgraded (or already: the holder reads with the write's
-- token, a retry after an unknown outcome), 0 when it holds neither.
--[[rw_reclaim.lua]]

if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then return 1 end
if redis.call('HGET', KEYS[3], 'w') ~= ARGV[1] or redis.call('HGET', KEYS[3], 'c') ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[3], 'w', 'we')
redis.call('ZADD', KEYS[1], string.format('%d', now + ARGV[3] * 1000), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
stretch(ARGV[4])
redis.call(ARGV[6], ARGV[5], '')
return 1
