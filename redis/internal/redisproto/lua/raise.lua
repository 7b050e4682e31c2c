-- raise: Redlock's second round. Give a lock this owner holds the token
-- chosen over the quorum (the highest the quorum's nodes issued), so that
-- every node of a majority carries it and its counter continues from it, and
-- so that release and extend, which compare the token, match on every node
-- that granted this acquisition.
--
-- A node that granted late may hold a higher value than the chosen token.
-- Lowering it is safe: that value was never issued to anyone, and the
-- chosen token already exceeds every token issued before (a majority carries
-- each issued token; any quorum meets that majority).
--
-- KEYS[1]  lock key
-- ARGV[1]  owner id
-- ARGV[2]  chosen token
-- Returns 1 set, 0 not held by owner.
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local a, b, c, e, w, d = string.match(v, '^(%d+) (%d+) (%d+)%+(%d+) ([01]) (.*)$')
if not a or d ~= ARGV[1] or b == '0' then return 0 end
if a ~= ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[2] .. ' ' .. b .. ' ' .. c .. '+' .. e .. ' ' .. w .. ' ' .. d, 'KEEPTTL')
end
return 1
