-- read: the state, the number of outstanding probes and the history. Writes nothing.
local err = check_types()
if err then return err end
local st = load()
local out = reply(st, {int(redis.call('LLEN', PROBES))})
for _, entry in ipairs(redis.call('LRANGE', HISTORY, 0, -1)) do out[#out + 1] = entry end
return out
