-- luacheck configuration for the Lua side of the module and its tests (make lint-lua).
-- Code must run on Lua 5.1, LuaJIT and Lua 5.4: allow the globals of any of them (`warn`, `jit`).
std = "max"
max_line_length = 120
files["spec"] = { std = "+busted" }
