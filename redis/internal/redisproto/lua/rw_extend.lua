-- rw_extend: set a hold's lease to ARGV[3] ms from now (see
-- rw_acquire.lua). Nothing changes unless the holder holds with that
-- token: a hold whose lease ran out is taken out first, never extended.
--
-- ARGV[1]  holder id
-- ARGV[2]  token
-- ARGV[3]  lease in ms
-- ARGV[4]  key TTL in ms (>= 2 leases)
-- Returns 1 extended, 0 not held.
--[[rw_reclaim.lua]]

local ends = string.format('%d', now + ARGV[3] * 1000)
if redis.call('HGET', KEYS[3], 'w') == ARGV[1] then
  if redis.call('HGET', KEYS[3], 'c') ~= ARGV[2] then return 0 end
  redis.call('HSET', KEYS[3], 'we', ends)
elseif redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZADD', KEYS[1], 'XX', ends, ARGV[1])
else
  return 0
end
stretch(ARGV[4])
return 1
