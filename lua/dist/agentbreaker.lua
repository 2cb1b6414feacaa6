-- The `agentbreaker` module of the prebuilt LuaRocks rock (make dist): the rock carries one native
-- module per Lua C API (Lua 5.4, Lua 5.1, LuaJIT; a module built for one does not load in another)
-- under agentbreaker/native/ in the rock tree's library directory. This picks the one for the
-- running interpreter, so one tree serves both lua5.1 and luajit, and returns the module it opens.
-- (Built from source, `luarocks make lua/agentbreaker-<version>-1.rockspec` installs the native
-- module itself as `agentbreaker`, without this file.)

local variant
if type(jit) == "table" then
  variant = "luajit"
elseif _VERSION == "Lua 5.4" then
  variant = "lua54"
elseif _VERSION == "Lua 5.1" then
  variant = "lua51"
else
  error("agentbreaker: this rock has native modules for Lua 5.4, Lua 5.1 and LuaJIT, not for "
    .. _VERSION .. "; build it for your Lua from source: luarocks build agentbreaker", 2)
end

local name = "agentbreaker.native." .. variant

-- package.searchpath (Lua 5.2+, LuaJIT), written out for Lua 5.1.
local function searchpath(module, templates)
  local file = module:gsub("%.", package.config:sub(1, 1))
  local tried = {}
  for template in templates:gmatch("[^;]+") do
    local candidate = template:gsub("%?", file)
    local handle = io.open(candidate, "rb")
    if handle then
      handle:close()
      return candidate
    end
    tried[#tried + 1] = "\n\tno file '" .. candidate .. "'"
  end
  return nil, table.concat(tried)
end

local path, tried = searchpath(name, package.cpath)
if not path then
  error("agentbreaker: the native module " .. name .. " is not on package.cpath:" .. tried, 2)
end
local open, problem = package.loadlib(path, "luaopen_agentbreaker")
if not open then
  error("agentbreaker: cannot load " .. path .. ": " .. tostring(problem), 2)
end
return open("agentbreaker", path)
