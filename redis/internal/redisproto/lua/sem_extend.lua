-- sem_extend: set a permit's lease to ARGV[3] ms from now (see
-- sem_acquire.lua). Nothing changes unless the holder holds a live permit
-- with that token: a permit whose lease ran out is taken back first, never
-- granted again by extending it.
--
-- KEYS[1]  holders (zset)
-- KEYS[2]  tokens (hash)
-- KEYS[3]  meta (hash)
-- ARGV[1]  holder id
-- ARGV[2]  token
-- ARGV[3]  lease in ms
-- ARGV[4]  key TTL in ms (>= 2 leases)
-- Returns 1 extended, 0 not held.
-- stretch raises key k's TTL to ms, never lowers it: a short lease's grant
-- must not make the keys expire under a longer holder's lease. A key without
-- a TTL (PTTL -1) is one just created here: it gets one.
local function stretch(k, ms)
  local p = redis.call('PTTL', k)
  if p ~= -2 and p < tonumber(ms) then redis.call('PEXPIRE', k, ms) end
end

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, h in ipairs(gone) do redis.call('HDEL', KEYS[2], h) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end

if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + ARGV[3] * 1000), ARGV[1])
for i = 1, 3 do stretch(KEYS[i], ARGV[4]) end
return 1
