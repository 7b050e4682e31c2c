-- extend: set a held lock's lease to ARGV[3] ms from now. Nothing changes
-- unless owner and token both match and the lease has not run out: a lost
-- lock is never taken again by extending it.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  token
-- ARGV[3]  lease in ms
-- ARGV[4]  key TTL in ms (>= lease)
-- Returns 1 extended, 0 not held.
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local a, b, c, e, w, d = string.match(v, '^(%d+) (%d+) (%d+)%+(%d+) ([01]) (.*)$')
if a ~= ARGV[2] or d ~= ARGV[1] or b == '0' then return 0 end
local t = redis.call('TIME')
local us = t[2]
if #us < 6 then us = string.rep('0', 6 - #us) .. us end
local nowStr = t[1] .. us
if c + e * 1000 <= t[1] * 1000000 + t[2] then return 0 end
redis.call('SET', KEYS[1], a .. ' ' .. b .. ' ' .. nowStr .. '+' .. ARGV[3] .. ' ' .. w .. ' ' .. d, 'PX', ARGV[4])
return 1
