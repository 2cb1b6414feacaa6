-- shouldAllowOperation outside CLOSED. ARGV: generation, now, cooldownMs, backoffMultiplier,
-- maxCooldownMs, halfOpenMaxProbes, probeTimeoutMs.
-- Extra reply: 'closed' | 'open', remaining ms | 'granted', moved (1: OPEN -> HALF_OPEN) |
-- 'more' | 'wait', grant time of the oldest probe.
local err = check_types()
if err then return err end
local st = load()
local now = tonumber(ARGV[2])
if st.state == 'CLOSED' then return reply(st, {'closed'}) end
if st.state == 'OPEN' then
  local cd = cooldown(st.level, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))
  local opened = st.openedAt
  if opened < 0 then opened = now end
  local waited = now - opened
  if waited < 0 then waited = 0 end
  if waited < cd then return reply(st, {'open', int(cd - waited)}) end
  local before = mirrored(st)
  st.state = 'HALF_OPEN'
  redis.call('DEL', PROBES)
  redis.call('RPUSH', PROBES, ARGV[2])
  save(st, before)
  return reply(st, {'granted', '1'})
end
local n = redis.call('LLEN', PROBES)
if n < tonumber(ARGV[6]) then
  redis.call('RPUSH', PROBES, ARGV[2])
  return reply(st, {'more'})
end
local oldest = tonumber(redis.call('LINDEX', PROBES, 0)) or 0
local age = now - oldest
if age < 0 then age = 0 end
if age >= tonumber(ARGV[7]) then
  redis.call('LPOP', PROBES)
  redis.call('RPUSH', PROBES, ARGV[2])
  return reply(st, {'granted', '0'})
end
return reply(st, {'wait', int(oldest)})
