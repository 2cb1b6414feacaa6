-- A Monitor's per-task budget counters (contract sections 11 and 12; docs/distributed.md, "A
-- Monitor's budgets"). One call per event that counts (a tool call, a usage event) and per task
-- first seen by a process: the increments are added atomically and the new totals returned, so
-- every process judges the fleet's totals and no increment is lost. Time is the caller's clock
-- (a ManualClock works too), never the server's.
--
-- KEYS[1] the task's hash: startedAt (ms), toolCalls, spendCents (a double, as %.17g), tools (how
-- many tools are itemized), tool:<name> per itemized tool, batches (how many batch: fields there
-- are) and batch:<process> per process that sent counts of an outage (the last batch applied).
-- ARGV: now, ttlMs (the hash's lifetime, set when it is created; 0 = none), trackedTools (the
-- most tools itemized besides those toolLimits names), calls to add, cents to add (a double as
-- %.17g), then three per tool: its name, the calls to add, 1 when toolLimits names it; then,
-- optionally (the argument count is then 5 + 3n + 1), the batches: what a process counted during
-- outages, which it sends again until a reply confirms them (a call that timed out may have run),
-- as one string of words: the process's id, then per batch its number (increasing), its calls, its
-- cents and its calls of each tool above, in their order. A batch whose number is not above the
-- process's batch: field was applied already and is skipped: each is added once.
-- Reply: startedAt, toolCalls, spendCents, then each tool's total (0: not itemized).
local K = KEYS[1]
local kind = redis.call('TYPE', K)['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE ' .. K .. ' holds a ' .. kind ..
    ', not agentbreaker state (a hash)')
end

-- The most processes whose last batch a task's hash remembers (a batch of a process beyond them
-- is added without being remembered: sent again after a timeout, it would count twice).
local MAX_BATCH_PROCESSES = 256

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

local ntools = math.floor((#ARGV - 5) / 3)
local calls = tonumber(ARGV[4])
local add = tonumber(ARGV[5])
local adds = {}
for t = 1, ntools do
  adds[t] = tonumber(ARGV[5 + 3 * t - 1])
end

if (#ARGV - 5) % 3 == 1 then
  local words = {}
  for w in string.gmatch(ARGV[#ARGV], '%S+') do
    words[#words + 1] = w
  end
  local field = 'batch:' .. words[1]
  local known = redis.call('HGET', K, field)
  local last = tonumber(known or '0')
  local applied = last
  local j = 2
  while j + 2 + ntools <= #words do
    local number = tonumber(words[j])
    if number > applied then
      calls = calls + tonumber(words[j + 1])
      add = add + tonumber(words[j + 2])
      for t = 1, ntools do
        adds[t] = adds[t] + tonumber(words[j + 2 + t])
      end
      applied = number
    end
    j = j + 3 + ntools
  end
  if applied > last then
    if known then
      redis.call('HSET', K, field, int(applied))
    elseif tonumber(redis.call('HGET', K, 'batches') or '0') < MAX_BATCH_PROCESSES then
      redis.call('HSET', K, field, int(applied))
      redis.call('HINCRBY', K, 'batches', 1)
    end
  end
end

local total
if calls > 0 then
  total = redis.call('HINCRBY', K, 'toolCalls', int(calls))
else
  total = tonumber(redis.call('HGET', K, 'toolCalls') or '0')
end

-- Spend is added in Lua's doubles, the arithmetic of the local Monitor (HINCRBYFLOAT adds in
-- long double and prints 17 digits: a single process would not get its own figures back).
local spend = tonumber(redis.call('HGET', K, 'spendCents') or '0')
if add ~= 0 then
  spend = spend + add
  redis.call('HSET', K, 'spendCents', string.format('%.17g', spend))
end

local out = {started, int(total), string.format('%.17g', spend)}
local tracked = tonumber(ARGV[3])
for t = 1, ntools do
  local i = 6 + 3 * (t - 1)
  local field = 'tool:' .. ARGV[i]
  local n = adds[t]
  local count = redis.call('HGET', K, field)
  if count then
    if n > 0 then count = redis.call('HINCRBY', K, field, int(n)) else count = tonumber(count) end
  elseif n > 0 and (ARGV[i + 2] == '1' or
      tonumber(redis.call('HGET', K, 'tools') or '0') < tracked) then
    count = redis.call('HINCRBY', K, field, int(n))
    redis.call('HINCRBY', K, 'tools', 1)
  else
    count = 0
  end
  out[#out + 1] = int(count)
end
return out
