-- acquire: take the lock if it is free (or its lease ran out), re-enter it if
-- the caller already owns it, else report the holder's remaining lease.
--
-- The key holds "<token> <count> <expires-us> <owner>". A released lock keeps
-- "<token> 0 0 " so the fencing counter lives on in the same key (and slot),
-- refreshed on every use and expiring after ARGV[3] ms of disuse.
--
-- KEYS[1]  lock key
-- KEYS[2]  optional (single deployment): the queue of Lockers waiting for the
--          key, a sorted set by first failed attempt, for fair turns
-- ARGV[1]  owner id (compared whole)
-- ARGV[2]  lease in ms
-- ARGV[3]  key TTL in ms (>= lease): how long the fencing counter outlives use
-- ARGV[4]  optional (Redlock): a proposed token, taken when it is at least
--          what this node would issue, so that a quorum agrees on one token
--          without a second round
-- ARGV[5]  with KEYS[2]: the calling Locker's id
-- ARGV[6]  "1": the Locker is in the queue; leave it on success
--
-- A freed lock may be reserved for a moment for the Locker first in the
-- queue: "<token> 0 <until-us> <locker id>".
-- Returns {1, token, 0} acquired; {2, token, count} re-entered;
--         {0, 0, remaining lease ms} held by another owner.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lease = tonumber(ARGV[2]) * 1000
local tok, cnt, exp, own = 0, 0, 0, ''
local v = redis.call('GET', KEYS[1])
if v then
  local a, b, c, d = string.match(v, '^(%d+) (%d+) (%d+) (.*)$')
  if a then tok, cnt, exp, own = tonumber(a), tonumber(b), tonumber(c), d end
end
local queued = KEYS[2] and ARGV[5] and ARGV[5] ~= ''
if cnt > 0 and exp > now then
  if own ~= ARGV[1] then
    if queued then
      redis.call('ZADD', KEYS[2], 'NX', now, ARGV[5])
      redis.call('PEXPIRE', KEYS[2], ARGV[3])
    end
    return {0, 0, math.ceil((exp - now) / 1000)}
  end
  cnt = cnt + 1
  if now + lease > exp then exp = now + lease end
  redis.call('SET', KEYS[1], string.format('%.0f %d %.0f %s', tok, cnt, exp, own), 'PX', ARGV[3])
  return {2, tok, cnt}
end
-- Free, but reserved for the next Locker in the queue: wait for it.
if queued and cnt == 0 and exp > now and own ~= '' and own ~= ARGV[5] then
  redis.call('ZADD', KEYS[2], 'NX', now, ARGV[5])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return {0, 0, math.ceil((exp - now) / 1000)}
end
if queued and ARGV[6] == '1' then redis.call('ZREM', KEYS[2], ARGV[5]) end
-- Free: the token must exceed every earlier one. The counter covers
-- acquisitions within one microsecond; the clock covers a lost counter.
tok = math.max(tok + 1, now)
local proposed = tonumber(ARGV[4])
if proposed and proposed >= tok then tok = proposed end
redis.call('SET', KEYS[1], string.format('%.0f 1 %.0f %s', tok, now + lease, ARGV[1]), 'PX', ARGV[3])
return {1, tok, 0}
