-- rw_reclaim: the start of every writing read-write lock script (see
-- rw_acquire.lua), put in place of its marker line: now, stretch, and the
-- holds and waiting marks whose lease ran out taken out (freed says
-- whether any hold was). stretch raises the keys' TTL, never lowers it; a
-- key without one (PTTL -1) was just created here and gets one.
local function stretch(ms)
  for i = 1, 4 do
    local p = redis.call('PTTL', KEYS[i])
    if p ~= -2 and p < tonumber(ms) then redis.call('PEXPIRE', KEYS[i], ms) end
  end
end

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local freed = false
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, h in ipairs(gone) do redis.call('HDEL', KEYS[2], h) end
if #gone > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  freed = true
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local we = redis.call('HGET', KEYS[3], 'we')
if we and tonumber(we) <= now then
  redis.call('HDEL', KEYS[3], 'w', 'we')
  freed = true
end
