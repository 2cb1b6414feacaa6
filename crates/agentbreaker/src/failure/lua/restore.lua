-- restore (the restart rules already applied by the caller). ARGV: generation, state, failures,
-- openedAt ('' = none), level, trips, then the history entries, oldest first.
local err = check_types()
if err then return err end
local st = load()
st.state = ARGV[2]; st.failures = tonumber(ARGV[3]); st.openedAt = tonumber(ARGV[4]) or -1
st.level = tonumber(ARGV[5]); st.trips = tonumber(ARGV[6]); st.fp = ''; st.run = 0
redis.call('DEL', PROBES, HISTORY)
for i = 7, #ARGV do redis.call('RPUSH', HISTORY, ARGV[i]) end
save(st, nil)
return reply(st, {})
