-- recordFailure. ARGV: generation, now, error, fingerprint ('' = identical-error rule off),
-- failureThreshold, warningThreshold (0 = off), identicalErrorThreshold, historyLimit.
-- Extra reply: warn (0/1), change (0 none, 1 opened by count, 2 opened by the identical-error
-- rule, 3 a half-open probe failed), the identical run.
local err = check_types()
if err then return err end
local st = load()
local before = mirrored(st)
local now = tonumber(ARGV[2])
local prev = st.state
st.failures = st.failures + 1
local limit = tonumber(ARGV[8])
if limit > 0 then
  redis.call('RPUSH', HISTORY, ARGV[2] .. ' ' .. prev .. ' ' .. ARGV[3])
  redis.call('LTRIM', HISTORY, -limit, -1)
end
local identical = 0
if ARGV[4] ~= '' then
  if st.fp == ARGV[4] then st.run = st.run + 1 else st.fp = ARGV[4]; st.run = 1 end
  identical = st.run
end
local warn, change = 0, 0
if prev == 'CLOSED' then
  local warning, threshold, same = tonumber(ARGV[6]), tonumber(ARGV[5]), tonumber(ARGV[7])
  if warning > 0 and st.failures == warning then warn = 1 end
  if st.failures >= threshold then
    change = 1
  elseif same > 0 and identical >= same then
    change = 2
  end
  if change > 0 then
    st.state = 'OPEN'; st.openedAt = now; st.trips = st.trips + 1
  end
elseif prev == 'HALF_OPEN' then
  change = 3
  st.state = 'OPEN'; st.openedAt = now; st.level = st.level + 1
  redis.call('DEL', PROBES)
end
save(st, before)
return reply(st, {tostring(warn), tostring(change), int(identical)})
