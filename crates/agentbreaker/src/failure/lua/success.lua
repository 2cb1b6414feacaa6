-- recordSuccess. ARGV: generation. Extra reply: change (1 when a half-open circuit closed).
local err = check_types()
if err then return err end
local st = load()
if st.failures == 0 and st.fp == '' and st.state ~= 'HALF_OPEN' then
  return reply(st, {'0'})
end
local before = mirrored(st)
st.failures = 0; st.fp = ''; st.run = 0
local change = 0
if st.state == 'HALF_OPEN' then
  st.state = 'CLOSED'; st.openedAt = -1; st.level = 0
  redis.call('DEL', PROBES)
  change = 1
end
save(st, before)
return reply(st, {tostring(change)})
