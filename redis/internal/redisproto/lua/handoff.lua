-- handoff: release a held lock and take it, in the same step, for the next
-- goroutine of the same Locker waiting for the key: one round trip instead
-- of a release, a notification and an acquire. Nothing changes unless owner
-- and token match and the lease has not run out.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  token
-- ARGV[3]  the next owner id
-- ARGV[4]  the next owner's lease in ms
-- ARGV[5]  key TTL in ms
-- Returns {0, new token} handed off; {n, 0} n counts still held (a re-entry
-- in Redis: only counted down, not handed off); {-1, 0} not held.
local v = redis.call('GET', KEYS[1])
if not v then return {-1, 0} end
local a, b, c, e, w, d = string.match(v, '^(%d+) (%d+) (%d+)%+(%d+) ([01]) (.*)$')
if a ~= ARGV[2] or d ~= ARGV[1] or b == '0' then return {-1, 0} end
local t = redis.call('TIME')
local us = t[2]
if #us < 6 then us = string.rep('0', 6 - #us) .. us end
local nowStr = t[1] .. us
local now = t[1] * 1000000 + t[2]
if c + e * 1000 <= now then return {-1, 0} end
if b ~= '1' then
  redis.call('SET', KEYS[1], a .. ' ' .. (b - 1) .. ' ' .. c .. '+' .. e .. ' ' .. w .. ' ' .. d, 'KEEPTTL')
  return {b - 1, 0}
end
local tok = nowStr
if tonumber(a) >= now then tok = string.format('%d', a + 1) end
redis.call('SET', KEYS[1], tok .. ' 1 ' .. nowStr .. '+' .. ARGV[4] .. ' ' .. w .. ' ' .. ARGV[3], 'PX', ARGV[5])
return {0, tok}
