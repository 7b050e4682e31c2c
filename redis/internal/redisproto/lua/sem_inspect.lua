-- sem_inspect: a semaphore's limit and live holders (see sem_acquire.lua).
-- It only reads (EVALSHA_RO), so that inspection works while the server
-- holds writes (CLIENT PAUSE WRITE): holders whose lease ran out are
-- skipped, left for the next writing script to take out.
--
-- KEYS[1]  holders (zset)
-- KEYS[2]  tokens (hash)
-- KEYS[3]  meta (hash)
-- Returns {limit or '', holder, token, lease left in µs, holder, ...}, the
-- live holders by the end of their lease.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local out = {redis.call('HGET', KEYS[3], 'n') or ''}
local hs = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
for i = 1, #hs, 2 do
  out[#out + 1] = hs[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], hs[i]) or '0'
  out[#out + 1] = string.format('%d', hs[i + 1] - now)
end
return out
