-- sem_inspect: a semaphore's limit and live holders (see sem_acquire.lua),
-- after taking out those whose lease ran out.
--
-- KEYS[1]  holders (zset)
-- KEYS[2]  tokens (hash)
-- KEYS[3]  meta (hash)
-- Returns {limit or '', holder, token, lease left in µs, holder, ...}, the
-- holders by the end of their lease.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, h in ipairs(gone) do redis.call('HDEL', KEYS[2], h) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end

local out = {redis.call('HGET', KEYS[3], 'n') or ''}
local hs = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #hs, 2 do
  out[#out + 1] = hs[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], hs[i]) or '0'
  out[#out + 1] = string.format('%d', hs[i + 1] - now)
end
return out
