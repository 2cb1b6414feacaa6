-- The FailureBreaker's shared state (contract §2 and §12; docs/distributed.md, "Data model").
-- Every script starts with this prelude. Time is never read from the server: callers pass their
-- clock's now. Numbers go out as decimal strings (Lua numbers are doubles; Redis would truncate
-- them to 64-bit integers and Lua's own tostring switches to exponents past 1e14).
--
-- KEYS[1] the state hash, KEYS[2] the probe list (grant times, oldest first),
-- KEYS[3] the history list (newest last). ARGV[1] is an id fresh for this call (the process's
-- random id and the number of its calls): the generation of a state that this call creates. A
-- state created afresh (a new store, or the keys deleted, flushed or evicted) thus never shares
-- a generation with an earlier one, whichever process created that, and every process takes its
-- news whatever the epochs. A missing state reads as generation '' (nothing created yet).
local STATE, PROBES, HISTORY = KEYS[1], KEYS[2], KEYS[3]

local function int(n)
  return string.format('%.0f', n)
end

-- An error reply when a key holds another type, before anything is written.
local function check_types()
  local want = {[STATE] = 'hash', [PROBES] = 'list', [HISTORY] = 'list'}
  for _, key in ipairs(KEYS) do
    local t = redis.call('TYPE', key)['ok']
    if t ~= 'none' and t ~= want[key] then
      return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. t ..
        ', not agentbreaker state (a ' .. want[key] .. ')')
    end
  end
  return nil
end

local function load()
  local v = redis.call('HMGET', STATE, 'gen', 'epoch', 'state', 'failures', 'openedAt', 'level',
    'trips', 'fp', 'run')
  if not v[1] then
    return {gen = '', epoch = 0, state = 'CLOSED', failures = 0, openedAt = -1, level = 0,
      trips = 0, fp = '', run = 0}
  end
  return {gen = v[1], epoch = tonumber(v[2]) or 0, state = v[3] or 'CLOSED',
    failures = tonumber(v[4]) or 0, openedAt = tonumber(v[5]) or -1, level = tonumber(v[6]) or 0,
    trips = tonumber(v[7]) or 0, fp = v[8] or '', run = tonumber(v[9]) or 0}
end

local function pending(st)
  if st.failures > 0 or st.fp ~= '' then return 1 end
  return 0
end

-- What other processes mirror: a change of it bumps the epoch and is published.
local function mirrored(st)
  return st.state .. ' ' .. int(st.openedAt) .. ' ' .. int(st.level) .. ' ' .. pending(st)
end

local function summary(st)
  return {st.gen, int(st.epoch), st.state, int(st.failures), int(st.openedAt), int(st.level),
    int(st.trips), tostring(pending(st))}
end

-- Writes the state; `before` is mirrored() before the change (nil: always publish).
local function save(st, before)
  if st.gen == '' then st.gen = ARGV[1] end
  local changed = before == nil or mirrored(st) ~= before
  if changed then st.epoch = st.epoch + 1 end
  local opened = ''
  if st.openedAt >= 0 then opened = int(st.openedAt) end
  redis.call('HSET', STATE, 'gen', st.gen, 'epoch', int(st.epoch), 'state', st.state,
    'failures', int(st.failures), 'openedAt', opened, 'level', int(st.level),
    'trips', int(st.trips), 'fp', st.fp, 'run', int(st.run))
  if changed then
    redis.call('PUBLISH', STATE .. ':events', table.concat(summary(st), ' '))
  end
end

local function reply(st, extra)
  local out = summary(st)
  for _, v in ipairs(extra) do out[#out + 1] = v end
  return out
end

-- The cooldown at a backoff level, computed exactly as the Rust core does it
-- (FailureConfig::cooldown_at: cooldownMs x multiplier^level by repeated squaring, capped).
local function cooldown(level, base, mult, max)
  if level == 0 or mult == 1 or base == 0 then return math.min(base, max) end
  local r, a, b = 1, mult, level
  while true do
    if b % 2 == 1 then r = r * a end
    b = math.floor(b / 2)
    if b == 0 then break end
    a = a * a
  end
  local scaled = base * r
  if scaled ~= scaled or scaled >= max then return max end
  return math.floor(scaled)
end
