-- rw_release: give back a hold of a read-write lock (see rw_acquire.lua).
-- Nothing changes unless the holder holds: the writer with that token, or
-- a reader (whose token is not its own). With token '0' (the clean-up of an
-- attempt, or of a waiting writer that gave up) any hold of the holder and
-- its waiting mark are taken out.
--
-- ARGV[1]  holder id
-- ARGV[2]  token, or '0'
-- ARGV[3]  the lock's channel (same hash slot; a channel, not a key)
-- ARGV[4]  the publish command: PUBLISH, or SPUBLISH on Cluster
-- Returns 1 released, 0 not held. It publishes '' when an attempt may now
-- succeed: the write given back, the last reader gone, a mark taken out.
--[[rw_reclaim.lua]]

local released = 0
if redis.call('HGET', KEYS[3], 'w') == ARGV[1] and
    (ARGV[2] == '0' or redis.call('HGET', KEYS[3], 'c') == ARGV[2]) then
  redis.call('HDEL', KEYS[3], 'w', 'we')
  released, freed = 1, true
elseif redis.call('HDEL', KEYS[2], ARGV[1]) == 1 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  released = 1
  if redis.call('ZCARD', KEYS[1]) == 0 then freed = true end
end
if ARGV[2] == '0' and redis.call('ZREM', KEYS[4], ARGV[1]) == 1 then freed = true end
if freed then redis.call(ARGV[4], ARGV[3], '') end
return released
