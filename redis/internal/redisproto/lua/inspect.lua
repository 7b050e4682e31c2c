-- inspect: what a lock key holds, read in one step with the server's clock:
-- the value (see acquire.lua), its key TTL, the Lockers queued for it and
-- the latest forced releases. It changes nothing.
--
-- KEYS[1]  lock key
-- KEYS[2]  the queue of Lockers waiting for it (see acquire.lua)
-- KEYS[3]  the audit stream of forced releases (see force.lua)
-- ARGV[1]  how many queued Lockers to return, first ones first
-- ARGV[2]  how many audit entries to return, latest first; '0' for none
-- Returns {seconds, µs, value or '', key TTL in ms, {locker, since-µs, …},
--         {audit entries as XREVRANGE gives them}}.
local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1]) or ''
local ttl = redis.call('PTTL', KEYS[1])
local q = {}
if string.find(v, ' ', 1, true) then
  q = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
end
local a = {}
if ARGV[2] ~= '0' then a = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', ARGV[2]) end
return {t[1], t[2], v, ttl, q, a}
