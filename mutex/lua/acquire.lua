-- acquire: take the lock if it is free (or its lease ran out), re-enter it if
-- the caller already owns it, else report the holder's remaining lease.
--
-- The key holds "<token> <count> <expires-us> <waited> <owner>" while held;
-- <waited> is 1 once a waiting Lock found it held, so that the release knows
-- whether anyone listens (an uncontended release neither reads the queue nor
-- publishes). A released lock keeps only "<token>", so the fencing counter
-- lives on in the same key (and slot), refreshed on every use and expiring
-- after ARGV[3] ms of disuse.
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
-- ARGV[5]  optional: the calling Locker's id when the caller waits (Lock, not
--          TryLock); it marks the lock waited-for and, with KEYS[2], queues
-- ARGV[6]  "1": the Locker is in the queue; leave it on success
--
-- A freed lock may be reserved for a moment for the Locker first in the
-- queue: "<token> 0 <until-us> <waited> <locker id>".
-- Numbers are formatted with %d (exact: Lua's own conversion, %.14g, would
-- round 16-digit microsecond values).
-- Returns {1, token, 0} acquired; {2, token, count} re-entered;
--         {0, 0, remaining lease ms} held by another owner.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local v = redis.call('GET', KEYS[1])
local a, b, c, w, own
if v then a, b, c, w, own = string.match(v, '^(%d+) (%d+) (%d+) ([01]) (.*)$') end
local tok, cnt, exp = 0, 0, 0
if a then
  tok, cnt, exp = tonumber(a), tonumber(b), tonumber(c)
else
  tok, w, own = v and tonumber(v) or 0, '0', ''
end
local waiter = ARGV[5] or ''
if cnt > 0 and exp > now then
  if own ~= ARGV[1] then
    if waiter ~= '' then
      if KEYS[2] then
        redis.call('ZADD', KEYS[2], 'NX', now, waiter)
        redis.call('PEXPIRE', KEYS[2], ARGV[3])
      end
      if w == '0' then redis.call('SET', KEYS[1], a .. ' ' .. b .. ' ' .. c .. ' 1 ' .. own, 'KEEPTTL') end
    end
    return {0, 0, math.ceil((exp - now) / 1000)}
  end
  cnt = cnt + 1
  if now + ARGV[2] * 1000 > exp then exp = now + ARGV[2] * 1000 end
  redis.call('SET', KEYS[1], string.format('%d %d %d ', tok, cnt, exp) .. w .. ' ' .. own, 'PX', ARGV[3])
  return {2, tok, cnt}
end
-- Free, but reserved for the next Locker in the queue: wait for it.
-- (TryLock does not queue and does not wait for reservations.)
if cnt == 0 and exp > now and waiter ~= '' and KEYS[2] and own ~= waiter then
  redis.call('ZADD', KEYS[2], 'NX', now, waiter)
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  if w == '0' then redis.call('SET', KEYS[1], a .. ' ' .. b .. ' ' .. c .. ' 1 ' .. own, 'KEEPTTL') end
  return {0, 0, math.ceil((exp - now) / 1000)}
end
if ARGV[6] == '1' and KEYS[2] then redis.call('ZREM', KEYS[2], waiter) end
-- Free: the token must exceed every earlier one. The counter covers
-- acquisitions within one microsecond; the clock covers a lost counter.
-- A reservation's mark carries over: others may still be queued.
if own == '' then w = '0' end
tok = math.max(tok + 1, now)
local proposed = tonumber(ARGV[4])
if proposed and proposed >= tok then tok = proposed end
redis.call('SET', KEYS[1], string.format('%d 1 %d ', tok, now + ARGV[2] * 1000) .. w .. ' ' .. ARGV[1], 'PX', ARGV[3])
return {1, tok, 0}
