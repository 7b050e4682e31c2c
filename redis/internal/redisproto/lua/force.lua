-- force: free a held lock behind its holder's back, safely. The key keeps
-- only a token floor one above the holder's token, as a released lock keeps
-- its last token: every later acquisition gets a larger token, the holder's
-- next extend, release or hand-off finds neither its owner nor its token and
-- fails (its lock is lost), and the floor itself can be recorded in a fence
-- (fenced.Guard.Raise) so that the holder's writes are refused at once. Who,
-- when, why and the tokens go to an audit stream beside the key.
--
-- KEYS[1]  lock key; its release channel is KEYS[1]..':released'
-- KEYS[2]  audit stream (same hash slot)
-- ARGV[1]  the holder's token expected, '' for whoever holds it
-- ARGV[2]  who forces it
-- ARGV[3]  why
-- ARGV[4]  the publish command (PUBLISH, SPUBLISH on Cluster)
-- ARGV[5]  the audit stream's TTL in ms
-- ARGV[6]  the user key, for the audit entry
-- Returns {1, token, floor, owner, count} freed; {0, ''} not held (free,
-- reserved for a waiter, or its lease ran out); {-1, token} held under
-- another token than ARGV[1].
local v = redis.call('GET', KEYS[1])
if not v then return {0, ''} end
local a, b, c, e, w, d = string.match(v, '^(%d+) (%d+) (%d+)%+(%d+) ([01]) (.*)$')
if not a or b == '0' then return {0, ''} end
local t = redis.call('TIME')
if c + e * 1000 <= t[1] * 1000000 + t[2] then return {0, ''} end
if ARGV[1] ~= '' and ARGV[1] ~= a then return {-1, a} end
local floor = string.format('%d', a + 1)
-- The audit first: a script's writes are not rolled back when a later
-- command fails, and the holder must never be ended off the record.
redis.call('XADD', KEYS[2], 'MAXLEN', '~', '1000', '*', 'key', ARGV[6], 'token', a, 'floor', floor,
  'owner', d, 'count', b, 'by', ARGV[2], 'reason', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('SET', KEYS[1], floor, 'KEEPTTL')
redis.call(ARGV[4], KEYS[1] .. ':released', '')
return {1, a, floor, d, b}
