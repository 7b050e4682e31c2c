-- release: take one count of a held lock; the last count frees it and, if a
-- waiting Lock found it held meanwhile (the waited mark, see acquire.lua),
-- notifies waiters. Nothing changes unless owner and token both match.
--
-- Unlike extend, release does not read the clock to refuse a lease that ran
-- out while nobody took the lock: freeing such a lock harms no one, and the
-- caller checks its local lease deadline (which ends before the server's)
-- before it sends the release. This saves a TIME call on every Unlock.
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
local a, b, c, w, d = string.match(v, '^(%d+) (%d+) (%d+) ([01]) (.*)$')
if a ~= ARGV[2] or d ~= ARGV[1] or b == '0' then return -1 end
if b ~= '1' then
  redis.call('SET', KEYS[1], a .. ' ' .. (b - 1) .. ' ' .. c .. ' ' .. w .. ' ' .. d, 'KEEPTTL')
  return b - 1
end
if w == '0' then
  redis.call('SET', KEYS[1], a, 'PX', ARGV[3])
  return 0
end
local nextw = ''
if KEYS[3] then
  local q = redis.call('ZRANGE', KEYS[3], 0, 1)
  if q[1] then
    nextw = q[1]
    redis.call('ZREM', KEYS[3], nextw)
    local more = '0'
    if q[2] then more = '1' end
    local t = redis.call('TIME')
    local now = t[1] * 1000000 + t[2]
    redis.call('SET', KEYS[1], a .. ' 0 ' .. string.format('%d', now + ARGV[5] * 1000) .. ' ' .. more .. ' ' .. nextw, 'PX', ARGV[3])
  end
end
if nextw == '' then redis.call('SET', KEYS[1], a, 'PX', ARGV[3]) end
redis.call(ARGV[4], KEYS[2], nextw)
return 0
