-- claim: claim the current slot of a periodic job, once cluster-wide. The
-- slot is computed from this server's clock, never a replica's, so replicas
-- whose clocks disagree still agree on the slot.
--
-- KEYS[1]  the job's claim key: the last slot claimed
-- ARGV[1]  interval in ms
-- ARGV[2]  grace in ms: how late into its slot a slot may still be claimed
-- ARGV[3]  claim key TTL in ms
-- Returns {status, slot, now-ms}: status 1 claimed, 0 already claimed (by
-- anyone), -1 too late into the slot (skipped).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local every = tonumber(ARGV[1])
local slot = math.floor(now / every)
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if slot <= last then
  return {0, slot, now}
end
if now - slot * every > tonumber(ARGV[2]) then
  return {-1, slot, now}
end
redis.call('SET', KEYS[1], slot, 'PX', ARGV[3])
return {1, slot, now}
