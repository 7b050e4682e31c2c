-- claim: claim the current slot of a periodic job, once cluster-wide. The
-- slot is computed from this server's clock, never a replica's, so replicas
-- whose clocks disagree still agree on the slot.
--
-- KEYS[1]  the job's claim key: the last slot claimed
-- ARGV[1]  interval in ms
-- ARGV[2]  grace in ms: how late into its slot a slot may still be claimed
-- ARGV[3]  claim key TTL in ms
-- ARGV[4]  offset in ms: slots start this long after multiples of the
--          interval on the zone's wall clock (optional, default 0)
-- ARGV[5]  the zone's UTC offset in ms before ARGV[6]
-- ARGV[6]  start of the zone period around the replica's idea of now, Unix ms
-- ARGV[7]  the zone's UTC offset in ms within the period
-- ARGV[8]  end of the period, Unix ms
-- ARGV[9]  the zone's UTC offset in ms from ARGV[8] (ARGV[5..9] optional:
--          UTC without them)
-- Returns {status, slot, now-ms}: status 1 claimed, 0 already claimed (by
-- anyone), -1 too late into the slot (skipped).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local every = tonumber(ARGV[1])
local offset = tonumber(ARGV[4] or '0')
local wall = now
if ARGV[9] then
  if now < tonumber(ARGV[6]) then
    wall = now + tonumber(ARGV[5])
  elseif now < tonumber(ARGV[8]) then
    wall = now + tonumber(ARGV[7])
  else
    wall = now + tonumber(ARGV[9])
  end
end
local slot = math.floor((wall - offset) / every)
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if slot <= last then
  return {0, slot, now}
end
if wall - offset - slot * every > tonumber(ARGV[2]) then
  return {-1, slot, now}
end
redis.call('SET', KEYS[1], slot, 'PX', ARGV[3])
return {1, slot, now}
