-- ttl: the remaining lease of a held lock.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  token
-- Returns the remaining lease in µs, or -1 when not held by this owner/token.
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
local a, b, c, e, w, d = string.match(v, '^(%d+) (%d+) (%d+)%+(%d+) ([01]) (.*)$')
if a ~= ARGV[2] or d ~= ARGV[1] or b == '0' then return -1 end
local t = redis.call('TIME')
local left = c + e * 1000 - (t[1] * 1000000 + t[2])
if left <= 0 then return -1 end
return left
