-- term_append: records an election's term, or its resignation, in the
-- term journal beside the election's lock key: a capped stream whose entry
-- ids are "<term>-1" (a start) and "<term>-2" (a resignation). Redis
-- refuses an id not above the stream's last, so a lower term never follows
-- a higher one, and a resignation lands only while its term is the newest.
--
-- KEYS[1]  the journal stream (TermsOf the lock key: same slot)
-- ARGV[1]  entry id, "<term>-1" or "<term>-2"
-- ARGV[2]  approximate cap on entries (XADD MAXLEN ~)
-- ARGV[3]  the journal's life after its last entry, ms
-- ARGV[4..] field, value pairs of the entry
-- Returns 1 when recorded, 0 when the journal holds an id at or above it.
local r = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], ARGV[1], unpack(ARGV, 4))
if type(r) == 'table' and r.err then
  if string.find(r.err, 'equal or smaller', 1, true) then return 0 end
  return r
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
