-- rw_inspect: a read-write lock's live holds (see rw_acquire.lua). It only
-- reads (EVALSHA_RO), so holds whose lease ran out are skipped, not taken
-- out.
--
-- Returns {last token or '', waiting writers, writer or '', its µs left
-- or '', reader, token, µs left, reader, ...}, readers by the end of their
-- lease.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local live = '(' .. string.format('%d', now)
local m = redis.call('HMGET', KEYS[3], 'c', 'w', 'we')
local out = {m[1] or '', redis.call('ZCOUNT', KEYS[4], live, '+inf'), '', ''}
if m[2] and tonumber(m[3]) > now then
  out[3], out[4] = m[2], string.format('%d', m[3] - now)
end
local rs = redis.call('ZRANGEBYSCORE', KEYS[1], live, '+inf', 'WITHSCORES')
for i = 1, #rs, 2 do
  out[#out + 1] = rs[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], rs[i]) or '0'
  out[#out + 1] = string.format('%d', rs[i + 1] - now)
end
return out
