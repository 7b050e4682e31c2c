-- abandon: free a lock taken by an attempt whose reply never arrived (a
-- deadline or network error mid-call). Only used with random per-attempt
-- owner ids, which nobody else can hold, so matching the owner is enough.
--
-- KEYS[1]  lock key
-- KEYS[2]  release channel
-- ARGV[1]  owner id
-- ARGV[2]  key TTL in ms
-- ARGV[3]  publish command
-- Returns 1 freed, 0 not held by owner.
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local a, b, c, e, w, d = string.match(v, '^(%d+) (%d+) (%d+)%+(%d+) ([01]) (.*)$')
if not a or d ~= ARGV[1] or b == '0' then return 0 end
redis.call('SET', KEYS[1], a, 'PX', ARGV[2])
redis.call(ARGV[3], KEYS[2], '')
return 1
