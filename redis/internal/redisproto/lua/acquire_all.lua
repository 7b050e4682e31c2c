-- acquire_all: take every key of KEYS for one owner, each exactly as
-- acquire.lua alone would take it (its own token, or a re-entry of the
-- owner's lock), or none of them: LockAll's one round trip for the keys of
-- one Cluster slot (all keys of a standalone or Sentinel deployment).
--
-- KEYS     the lock keys, distinct, of one hash slot
-- ARGV[1]  owner id (compared whole)
-- ARGV[2]  lease in ms
-- ARGV[3]  key TTL in ms (acquire.lua's ARGV[3])
--
-- acquire.lua's own text is the body of the function acquire below: the
-- driver puts it in place of the marker line when it builds this script,
-- so that every key holds what a single Lock would have written (the same
-- value, token and TTL) and single-key Lockers and inspection see ordinary
-- locks. It runs without a waiter: nothing is marked waited-for or queued.
-- Each key's value and TTL are read first; when a key is held by another
-- owner (or reserved for another Locker), the keys already handled get
-- them back, so a busy key leaves every key as it was.
--
-- Returns {1, r1, ..., rn}, ri acquire.lua's reply for KEYS[i], when it
--         took them all; {0, i, ms} when KEYS[i] is held by another owner
--         for ms more, having changed nothing.
local function acquire(KEYS, ARGV)
--[[acquire.lua]]
end
local before = {}
for i, k in ipairs(KEYS) do
  before[i] = {redis.call('GET', k), redis.call('PTTL', k)}
end
local out = {1}
for i, k in ipairs(KEYS) do
  local r = acquire({k}, ARGV)
  if type(r) == 'number' then -- held: minus its lease left
    for j = i, 1, -1 do
      local v, ttl = before[j][1], before[j][2]
      if not v then
        redis.call('DEL', KEYS[j])
      elseif ttl > 0 then
        redis.call('SET', KEYS[j], v, 'PX', ttl)
      else
        redis.call('SET', KEYS[j], v)
      end
    end
    return {0, i, -r}
  end
  out[i + 1] = r
end
return out
