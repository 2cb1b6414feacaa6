-- LuaRocks package of the agentbreaker Lua module: a Rust library (bindings/lua) built with
-- cargo for the Lua that LuaRocks runs (feature lua54, luajit or lua51, chosen by the
-- luarocks-build-rust-mlua backend) and installed as agentbreaker.so.
rockspec_format = "3.0"
package = "agentbreaker"
version = "0.1.0-1"

source = {
  url = "git+https://github.com/agentbreaker/agentbreaker",
  tag = "v0.1.0",
  -- The crate inside the repository (a member of its cargo workspace).
  dir = "agentbreaker/bindings/lua",
}

description = {
  summary = "A deterministic circuit breaker for autonomous AI-agent loops",
  detailed = [[
Stops stuck agent loops without asking an LLM: consecutive failures with cooldown (the
CircuitBreaker of the Roblox-style seed, drop-in compatible), stagnation (no progress, repeated
errors, declining output), per-task budgets over an event stream (tool calls, spend, duration, idle
time, near-identical outputs), a response analyzer with exit strategies and a loop coordinator.
One Rust core shared with the Python, Node and C surfaces.]],
  homepage = "https://github.com/agentbreaker/agentbreaker",
  license = "MIT OR Apache-2.0",
  labels = { "ai", "agents", "circuit-breaker" },
}

dependencies = {
  "lua >= 5.1",
  "luarocks-build-rust-mlua",
}

build = {
  type = "rust-mlua",
  modules = {
    -- module name = the cargo library (target/release/libagentbreaker_lua.so)
    ["agentbreaker"] = "agentbreaker_lua",
  },
  target_path = "target",
}

test_dependencies = {
  "busted",
  "dkjson",
  "luafilesystem",
}

test = {
  type = "busted",
  -- The specs live beside this rockspec, in lua/spec of the repository.
  flags = { "../../lua/spec" },
}
