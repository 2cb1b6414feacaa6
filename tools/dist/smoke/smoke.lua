-- The rock, installed into a fresh tree: the native module that fits the interpreter is the one
-- loaded, and the README's guarded tool call stops the 6th call.
-- usage: <lua> smoke.lua VARIANT VERSION      (VARIANT: lua54, lua51 or luajit)
local variant = assert(arg[1], "usage: smoke.lua VARIANT VERSION")
local version = assert(arg[2], "usage: smoke.lua VARIANT VERSION")
local ab = require("agentbreaker")
assert(ab.VERSION == version, "VERSION " .. tostring(ab.VERSION) .. ", not " .. version)

local mapped = {}
for line in io.lines("/proc/self/maps") do
  local file = line:match("agentbreaker/native/(%w+)%.so$")
  if file then
    mapped[file] = true
  end
end
assert(mapped[variant], "the " .. variant .. " module is not the one loaded")
for other in pairs(mapped) do
  assert(other == variant, "the " .. other .. " module is loaded too")
end

local cb = ab.CircuitBreaker.new({ quiet = true })
local calls = 0
local function readScript(path)
  calls = calls + 1
  error("Path not found: " .. path, 0)
end
local blocked
for attempt, guess in ipairs({ "MainScript", "Main", "Scripts.Main", "Core.Main", "MainHandler", "MainController" }) do
  local ok, err = cb:pcall(readScript, "ServerScriptService." .. guess)
  assert(not ok)
  if err:match("^CIRCUIT_OPEN: ") then
    blocked = attempt
    break
  end
end
assert(blocked == 6, "the 6th call must be refused, not " .. tostring(blocked))
assert(calls == 5, "the refused call must not run")
print(("%s: agentbreaker %s from agentbreaker/native/%s.so; guarded call: 5 failures, the 6th refused")
  :format(_VERSION, ab.VERSION, variant))
