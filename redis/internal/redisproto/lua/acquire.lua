-- acquire: take the lock if it is free (or its lease ran out), re-enter it if
-- the caller already owns it, else report the holder's remaining lease.
--
-- The key holds "<token> <count> <from-us>+<lease-ms> <waited> <owner>" while
-- held: the lease runs from the server time <from-us> for <lease-ms> (kept as
-- two parts, so that the common case formats no number: Lua's own number to
-- string conversion, %.14g, would round 16-digit values, and
-- string.format costs as much as a command).
-- <waited> is 1 once a waiting Lock found it held, so that the release knows
-- whether anyone listens (an uncontended release neither reads the queue nor
-- publishes). A released lock keeps only "<token>", so the fencing counter
-- lives on in the same key (and slot), expiring after ARGV[3] ms of disuse.
-- A freed lock may be reserved for a moment for the Locker first in the
-- queue: "<token> 0 <from-us>+<ms> <waited> <locker id>".
--
-- KEYS[1]  lock key
-- KEYS[2]  optional (single deployment): the queue of Lockers waiting for the
--          key, a sorted set by first failed attempt, for fair turns
-- ARGV[1]  owner id (compared whole)
-- ARGV[2]  lease in ms
-- ARGV[3]  key TTL in ms (>= lease): how long the fencing counter outlives use;
--          absent: the default, one hour (WithFenceTTL's; the common call
--          leaves it out, since every argument costs the server work)
-- ARGV[4]  optional (Redlock): a proposed token, taken when it is at least
--          what this node would issue, so that a quorum agrees on one token
--          without a second round; '' for none
-- ARGV[5]  optional: the calling Locker's id when the caller waits (Lock, not
--          TryLock); it marks the lock waited-for and, with KEYS[2], queues
-- ARGV[6]  optional: "1" when the Locker is in the queue: leave it on success
--
-- The token is max(counter + 1, TIME in µs, proposal): the counter covers
-- acquisitions within one microsecond, the clock a lost counter.
--
-- Speed: the common case is a free (or new) key whose counter is behind the
-- clock. The script writes the acquisition for that case first and gets the
-- old value from the same SET; every other case then puts right what it
-- wrote. A waiter's attempt (ARGV[5]) reads first instead: it mostly finds
-- the lock held, and then changes nothing but the waited-for mark. Every call inside a script costs about as much as the script's own
-- overhead, so the common case makes two (TIME, SET) and keeps its arguments
-- few; its token is the server time as TIME gives it, as a string, compared
-- with the old one as a string of digits (no conversions): longer is larger,
-- and at equal length the string order is the numeric one (also under
-- strcoll, which Lua uses, in any locale that orders the digits).
--
-- Returns the token alone, as a string of digits, when acquired; minus the
--         remaining lease in ms (at most -1) when held by another owner;
--         {2, token, count} when re-entered. (A table costs the server about
--         as much as a call: only the rare re-entry builds one.)
local keyTTL = ARGV[3] or '3600000'
local t = redis.call('TIME')
local us = t[2]
if #us < 6 then us = string.rep('0', 6 - #us) .. us end
local nowStr = t[1] .. us
local tok = nowStr
local p = ARGV[4]
if p and p ~= '' and (#p > #tok or (#p == #tok and p > tok)) then tok = p end
local waiter = ARGV[5]
if waiter == '' then waiter = nil end
-- A waiter's attempt (one that already found the lock held) mostly finds it
-- held again: it reads first. Any other attempt writes first.
local written = not waiter
local v
if written then
  v = redis.call('SET', KEYS[1], tok .. ' 1 ' .. nowStr .. '+' .. ARGV[2] .. ' 0 ' .. ARGV[1], 'PX', keyTTL, 'GET')
  if not v then return tok end
else
  v = redis.call('GET', KEYS[1])
end
local win, w = tok, '0'
if not v then
  -- new key: nothing to compare
elseif not string.find(v, ' ', 1, true) then -- released: "<token>"
  if (#v > #tok or (#v == #tok and v >= tok)) and tonumber(v) then win = string.format('%d', v + 1) end
else
  local a, b, c, e, f, own = string.match(v, '^(%d+) (%d+) (%d+)%+(%d+) ([01]) (.*)$')
  if a then -- (an unreadable value is taken as free)
    local now = t[1] * 1000000 + t[2]
    local cnt, exp = tonumber(b), c + e * 1000
    if cnt > 0 and exp > now and own == ARGV[1] then
      -- Re-entry: same token, count + 1, the lease at least as long.
      local lease = c .. '+' .. e
      if now + ARGV[2] * 1000 > exp then lease = nowStr .. '+' .. ARGV[2] end
      redis.call('SET', KEYS[1], a .. ' ' .. (cnt + 1) .. ' ' .. lease .. ' ' .. f .. ' ' .. own, 'PX', keyTTL)
      return {2, a, cnt + 1}
    end
    if exp > now and (cnt > 0 or own ~= waiter) then
      -- Held by another owner, or reserved for another Locker (everyone
      -- else, TryLock included, waits for the reserved one): put the value
      -- back, marked waited-for if this caller waits, with a key TTL that
      -- still covers the lease.
      local left = math.ceil((exp - now) / 1000)
      if waiter then
        if KEYS[2] then
          redis.call('ZADD', KEYS[2], 'NX', now, waiter)
          redis.call('PEXPIRE', KEYS[2], keyTTL)
        end
        if f == '0' then
          redis.call('SET', KEYS[1], a .. ' ' .. b .. ' ' .. c .. '+' .. e .. ' 1 ' .. own, 'KEEPTTL')
        end
      else
        redis.call('SET', KEYS[1], v, 'PX', math.max(tonumber(keyTTL), 2 * left))
      end
      return -left
    end
    -- Free: a lease that ran out, or a reservation that ran out or is
    -- ours. Its waited-for mark carries over: others may still be queued.
    w = f
    if #a > #tok or (#a == #tok and a >= tok) then win = string.format('%d', a + 1) end
  end
end
if not written or win ~= tok or w == '1' then
  redis.call('SET', KEYS[1], win .. ' 1 ' .. nowStr .. '+' .. ARGV[2] .. ' ' .. w .. ' ' .. ARGV[1], 'PX', keyTTL)
end
if ARGV[6] == '1' and KEYS[2] then redis.call('ZREM', KEYS[2], waiter) end
return win
