-- release: take one count of a held lock; the last count frees it and
-- notifies waiters. Nothing changes unless owner and token both match and the
-- lease has not run out.
--
-- KEYS[1]  lock key
-- KEYS[2]  release channel (same hash slot as KEYS[1])
-- KEYS[3]  optional: the queue of waiting Lockers (see acquire.lua); the
--          first is popped and the freed lock reserved for it for ARGV[5] ms
-- ARGV[1]  owner id
-- ARGV[2]  token
-- ARGV[3]  key TTL in ms (keeps the fencing counter)
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH on Cluster
-- ARGV[5]  with KEYS[3]: the reservation in ms
-- The notification carries the Locker the lock is reserved for ('' = any).
-- Returns the remaining count (0: freed), or -1 when not held.
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
local a, b, c, d = string.match(v, '^(%d+) (%d+) (%d+) (.*)$')
if not a or a ~= ARGV[2] or d ~= ARGV[1] then return -1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cnt = tonumber(b)
if cnt < 1 or tonumber(c) <= now then return -1 end
cnt = cnt - 1
if cnt > 0 then
  redis.call('SET', KEYS[1], string.format('%s %d %s %s', a, cnt, c, d), 'KEEPTTL')
  return cnt
end
local nextw = ''
if KEYS[3] then
  local q = redis.call('ZRANGE', KEYS[3], 0, 0)
  if q[1] then
    nextw = q[1]
    redis.call('ZREM', KEYS[3], nextw)
  end
end
if nextw ~= '' then
  redis.call('SET', KEYS[1], a .. ' 0 ' .. string.format('%.0f', now + tonumber(ARGV[5]) * 1000) .. ' ' .. nextw, 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], a .. ' 0 0 ', 'PX', ARGV[3])
end
redis.call(ARGV[4], KEYS[2], nextw)
return 0
