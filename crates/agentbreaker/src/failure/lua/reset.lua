-- reset. ARGV: generation. Extra reply: the state before.
local err = check_types()
if err then return err end
local st = load()
local prev = st.state
st.state = 'CLOSED'; st.failures = 0; st.openedAt = -1; st.level = 0; st.trips = 0
st.fp = ''; st.run = 0
redis.call('DEL', PROBES, HISTORY)
save(st, nil)
return reply(st, {prev})
