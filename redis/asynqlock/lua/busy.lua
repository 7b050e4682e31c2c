-- busy: record a task that found its key locked by another handler, and
-- count the tasks that did within the window: those asynq is retrying.
--
-- KEYS[1]  the key's record: a sorted set of task ids, each scored with the
--          server time (ms) it last found the key locked
-- ARGV[1]  the window in ms
-- ARGV[2]  the task's id (optional: without it, count only)
-- Returns the number of tasks that found the key locked within the window.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local since = now - tonumber(ARGV[1])
if ARGV[2] then
  redis.call('ZADD', KEYS[1], string.format('%d', now), ARGV[2])
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', since))
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', since), '+inf')
