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
local a, b, c, w, d = string.match(v, '^(%d+) (%d+) (%d+) ([01]) (.*)$')
if not a or a ~= ARGV[2] or d ~= ARGV[1] then return {-1, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cnt = tonumber(b)
if cnt < 1 or tonumber(c) <= now then return {-1, 0} end
if cnt > 1 then
  redis.call('SET', KEYS[1], a .. ' ' .. (cnt - 1) .. ' ' .. c .. ' ' .. w .. ' ' .. d, 'KEEPTTL')
  return {cnt - 1, 0}
end
local tok = math.max(tonumber(a) + 1, now)
redis.call('SET', KEYS[1], string.format('%d 1 %d ', tok, now + ARGV[4] * 1000) .. w .. ' ' .. ARGV[3], 'PX', ARGV[5])
return {0, tok}
