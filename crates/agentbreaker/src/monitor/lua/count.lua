-- A Monitor's per-task budget counters (contract sections 11 and 12; docs/distributed.md, "A
-- Monitor's budgets"). One call per event that counts (a tool call, a usage event) and per task
-- first seen by a process: the increments are added atomically and the new totals returned, so
-- every process judges the fleet's totals and no increment is lost. Time is the caller's clock
-- (a ManualClock works too), never the server's.
--
-- KEYS[1] the task's hash: startedAt (ms), toolCalls, spendCents (a double, as %.17g), tools (how
-- many tools are itemized) and tool:<name> per itemized tool.
-- ARGV: now, ttlMs (the hash's lifetime, set when it is created; 0 = none), trackedTools (the
-- most tools itemized besides those toolLimits names), calls to add, cents to add (a double as
-- %.17g), then three per tool: its name, the calls to add, 1 when toolLimits names it.
-- Reply: startedAt, toolCalls, spendCents, then each tool's total (0: not itemized).
local K = KEYS[1]
local kind = redis.call('TYPE', K)['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE ' .. K .. ' holds a ' .. kind ..
    ', not agentbreaker state (a hash)')
end

local function int(n)
  return string.format('%.0f', n)
end

local started = redis.call('HGET', K, 'startedAt')
if not started then
  started = ARGV[1]
  redis.call('HSET', K, 'startedAt', started)
  local ttl = tonumber(ARGV[2])
  if ttl > 0 then redis.call('PEXPIRE', K, ttl) end
end

local calls = tonumber(ARGV[4])
local total
if calls > 0 then
  total = redis.call('HINCRBY', K, 'toolCalls', calls)
else
  total = tonumber(redis.call('HGET', K, 'toolCalls') or '0')
end

-- Spend is added in Lua's doubles, the arithmetic of the local Monitor (HINCRBYFLOAT adds in
-- long double and prints 17 digits: a single process would not get its own figures back).
local spend = tonumber(redis.call('HGET', K, 'spendCents') or '0')
local add = tonumber(ARGV[5])
if add ~= 0 then
  spend = spend + add
  redis.call('HSET', K, 'spendCents', string.format('%.17g', spend))
end

local out = {started, int(total), string.format('%.17g', spend)}
local tracked = tonumber(ARGV[3])
local i = 6
while i + 2 <= #ARGV do
  local field = 'tool:' .. ARGV[i]
  local n = tonumber(ARGV[i + 1])
  local count = redis.call('HGET', K, field)
  if count then
    if n > 0 then count = redis.call('HINCRBY', K, field, n) else count = tonumber(count) end
  elseif n > 0 and (ARGV[i + 2] == '1' or
      tonumber(redis.call('HGET', K, 'tools') or '0') < tracked) then
    count = redis.call('HINCRBY', K, field, n)
    redis.call('HINCRBY', K, 'tools', 1)
  else
    count = 0
  end
  out[#out + 1] = int(count)
  i = i + 3
end
return out
