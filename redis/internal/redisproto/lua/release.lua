-- release: take one count of a held lock; the last count frees it and, if a
-- waiting Lock found it held meanwhile (the waited-for mark, see
-- acquire.lua), reserves it for the first queued Locker and notifies.
-- Nothing changes unless owner and token both match.
--
-- Unlike extend, release does not read the clock to refuse a lease that ran
-- out while nobody took the lock: freeing such a lock harms no one, and the
-- caller checks its local lease deadline (which ends before the server's)
-- before it sends the release.
--
-- KEYS[1]  lock key; the release channel is KEYS[1]..':released' (same
--          hash slot; a channel, not a key, so not declared)
-- KEYS[2]  optional: the queue of waiting Lockers (see acquire.lua); the
--          first is popped and the freed lock reserved for it for 50 ms:
--          long enough for its notified head to ask, short enough that a
--          Locker that died in the queue costs little
-- ARGV[1]  the value the caller expects the key to hold: the acquisition's
--          "<token> 1 <token>+<lease-ms> 0 <owner>" (see acquire.lua; its
--          lease starts at the token when the token is the server time, as
--          it is unless a counter or proposal ran ahead). Only its token and
--          owner count: a value that differs (renewed, re-entered in Redis,
--          waited for) takes the slow path, which reads them from it.
-- ARGV[2]  token (ARGV[1]'s: the Locker builds both from one string)
-- ARGV[3]  optional: the publish command, SPUBLISH on Cluster; PUBLISH when
--          absent (every argument costs the server work)
-- The notification carries the Locker the lock is reserved for ('' = any).
-- Returns the remaining count (0: freed), or -1 when not held.
--
-- Speed: the common case (last count, nobody waited, never renewed) is one
-- SET that frees the lock and returns the old value, equal to ARGV[1]: one
-- string comparison (Lua's strings are interned: the reply's is ARGV[1]'s).
-- Building the expected value in the script instead costs the server more
-- than the rest of the script (see bench/README.md). The other cases put
-- right what the SET wrote. KEEPTTL keeps the key TTL of the last acquire
-- or renewal.
local v = redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL', 'GET')
if v == ARGV[1] then return 0 end
if not v then
  redis.call('DEL', KEYS[1])
  return -1
end
local owner = string.match(ARGV[1], '^%d+ %d+ %d+%+%d+ [01] (.*)$')
local a, b, c, e, w, d = string.match(v, '^(%d+) (%d+) (%d+)%+(%d+) ([01]) (.*)$')
if not owner or a ~= ARGV[2] or d ~= owner or b == '0' then
  redis.call('SET', KEYS[1], v, 'KEEPTTL')
  return -1
end
if b ~= '1' then
  redis.call('SET', KEYS[1], a .. ' ' .. (b - 1) .. ' ' .. c .. '+' .. e .. ' ' .. w .. ' ' .. d, 'KEEPTTL')
  return b - 1
end
if w == '0' then return 0 end
local nextw = ''
if KEYS[2] then
  local q = redis.call('ZRANGE', KEYS[2], 0, 1)
  if q[1] then
    nextw = q[1]
    redis.call('ZREM', KEYS[2], nextw)
    local more = '0'
    if q[2] then more = '1' end
    local t = redis.call('TIME')
    local us = t[2]
    if #us < 6 then us = string.rep('0', 6 - #us) .. us end
    redis.call('SET', KEYS[1], a .. ' 0 ' .. t[1] .. us .. '+50 ' .. more .. ' ' .. nextw, 'KEEPTTL')
  end
end
redis.call(ARGV[3] or 'PUBLISH', KEYS[1] .. ':released', nextw)
return 0
