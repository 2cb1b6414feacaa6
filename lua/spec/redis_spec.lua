-- The store keys from Lua (docs/distributed.md) against a real redis-server: ab.FailureBreaker.new{
-- store=..., key=...} and ab.Monitor.new{store=..., key=...} reach the core's config, breakers and
-- monitors in two processes on one key share one circuit and one budget, the hot path never waits
-- for the store, a bad config is INVALID_CONFIG, a refused password IO and never shown.
-- Needs the server tools/with_redis.sh starts (AGENTBREAKER_REDIS_URL): `make test-lua-redis`.
-- Pending elsewhere.

local ab = require("agentbreaker")

local URL = os.getenv("AGENTBREAKER_REDIS_URL")
local PORT = URL and URL:match(":(%d+)/")
local INTERPRETER = jit and "luajit" or (_VERSION == "Lua 5.1" and "lua5.1" or "lua5.4")

local function codeOf(err)
  return type(err) == "string" and err:match("^([A-Z][A-Z_]*): ") or nil
end

local function expectCode(code, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected " .. code .. ", but the call succeeded")
  assert.are.equal(code, codeOf(err), tostring(err))
  return err
end

local function run(command)
  local pipe = assert(io.popen(command))
  local out = pipe:read("*a")
  pipe:close()
  return out
end

local function cli(...)
  return (run("redis-cli -p " .. PORT .. " " .. table.concat({ ... }, " ") .. " 2>&1"):gsub("%s+$", ""))
end

-- Runs `body` (Lua, with `ab` in scope) in another interpreter process; returns its output.
local function inAnotherProcess(body)
  local path = os.tmpname()
  local file = assert(io.open(path, "w"))
  file:write('local ab = require("agentbreaker")\n', body)
  file:close()
  local out = run(INTERPRETER .. " " .. path .. " 2>&1")
  os.remove(path)
  return out
end

local clock = ab.SystemClock.new()

local function eventually(check)
  local deadline = clock:now() + 5000
  while clock:now() < deadline do
    if check() then
      return true
    end
    os.execute("sleep 0.005")
  end
  return check()
end

local function ms(fn)
  local start = clock:now()
  fn()
  return clock:now() - start
end

local describeRedis = URL and describe or pending

describeRedis("a store (" .. (jit and jit.version or _VERSION) .. ")", function()
  before_each(function()
    cli("FLUSHALL")
  end)

  it("is the same class as CircuitBreaker under the contract's name", function()
    assert.are.equal(ab.CircuitBreaker, ab.FailureBreaker)
    assert.is_nil(ab.FailureBreaker.new({ quiet = true }):storeStatus())
    assert.is_nil(ab.Monitor.new():storeStatus())
  end)

  it("two breakers in two processes share one circuit", function()
    local config = ("{store = %q, key = 'tool:search', failureThreshold = 3, quiet = true}"):format(URL)
    local breaker = ab.FailureBreaker.new({ store = URL, key = "tool:search", failureThreshold = 3, quiet = true })
    local changes = {}
    breaker:addListener(function(e) changes[#changes + 1] = e end)
    breaker:recordFailure("boom")
    local other = inAnotherProcess(([[
      local b = ab.FailureBreaker.new(%s)
      local changes = {}
      b:addListener(function(e) changes[#changes + 1] = e.to end)
      b:recordFailure("boom"); b:recordFailure("boom")
      print(b.state, table.concat(changes, ","), b.consecutiveFailures)]]):format(config))
    assert.are.equal("OPEN\tOPEN\t3\n", other)
    assert.is_true(eventually(function() return breaker.state == "OPEN" end))
    assert.is_false((breaker:shouldAllowOperation()))
    expectCode("CIRCUIT_OPEN", breaker.call, breaker, function() end)
    assert.are.equal(0, #changes, "only the process whose call opened it emits the change")
    local status = breaker:storeStatus()
    assert.are.equal(URL, status.url)
    assert.are.equal("tool:search", status.key)
    assert.are.equal("shared", status.mode)
    assert.are.equal(0, status.outages)
    assert.is_nil(status.lastError)
    assert.are.equal("OPEN", cli("HGET", "tool:search:failure", "state"))
    breaker:reset()
    assert.are.equal("CLOSED", cli("HGET", "tool:search:failure", "state"))
  end)

  it("two monitors in two processes share one budget", function()
    local config = ("{store = %q, key = 'tenant-7', profile = 'seed', budget = {maxToolCallsPerTask = 3}}")
      :format(URL)
    local monitor = ab.Monitor.new({ store = URL, key = "tenant-7", profile = "seed",
      budget = { maxToolCallsPerTask = 3 } })
    local resolved = monitor:config()
    assert.are.equal(URL, resolved.store)
    assert.are.equal("tenant-7", resolved.key)
    assert.are.equal(50, resolved.storeTimeoutMs)
    assert.are.equal("open", resolved.storeFailure)
    local use = { type = "tool_use", name = "search", taskId = "t1" }
    assert.are.equal("continue", monitor:observe(use).action)
    local other = inAnotherProcess(([[
      local m = ab.Monitor.new(%s)
      local use = {type = "tool_use", name = "search", taskId = "t1"}
      print(m:observe(use).action, m:observe(use).action)]]):format(config))
    assert.are.equal("continue\twarn\n", other)
    local verdict = monitor:observe(use)
    assert.are.equal("halt", verdict.action)
    assert.are.equal("tool_call_limit", verdict.reason)
    assert.are.equal("tool calls: 4 of 3", verdict.message)
    assert.are.equal("shared", monitor:status().store.mode)
    assert.are.equal("shared", monitor:storeStatus().mode)
    assert.are.equal("4", cli("HGET", "tenant-7:task:t1", "toolCalls"))
  end)

  it("the hot path never waits for the store; the calls that may wait at most storeTimeoutMs", function()
    local timeout = 400
    local breaker = ab.FailureBreaker.new({ store = URL, key = "hot", storeTimeoutMs = timeout, quiet = true })
    local monitor = ab.Monitor.new({ store = URL, key = "hot", storeTimeoutMs = timeout })
    monitor:observe({ type = "alive" })
    local warnings = {}
    local listened = ab.FailureBreaker.new({ store = URL, key = "hot", storeTimeoutMs = timeout, quiet = true,
      listeners = { function(e) if e.type == "warning" then warnings[#warnings + 1] = e.message end end } })
    local pid = cli("INFO", "server"):match("process_id:(%d+)")
    os.execute("kill -STOP " .. pid)
    local ok, err = pcall(function()
      -- CLOSED with nothing pending: answered from this process's view, no round trip (the
      -- breaker without listeners takes the C fast paths, the one with listeners the checked way).
      local took = ms(function()
        for _ = 1, 1000 do
          breaker:shouldAllowOperation()
          breaker:recordSuccess()
          breaker:call(function() end)
          listened:shouldAllowOperation()
          listened:recordSuccess()
        end
      end)
      assert.is_true(took < timeout, "5000 CLOSED calls took " .. took .. " ms with the store paused")
      local failure = ms(function() listened:recordFailure("x") end)
      assert.is_true(failure >= timeout * 0.9 and failure < timeout + 200, "recordFailure took " .. failure .. " ms")
      assert.are.equal("local", listened:storeStatus().mode)
      assert.is_truthy(warnings[1]:find("Shared circuit state unreachable at " .. URL .. " (key hot)", 1, true))
      local observe = ms(function() monitor:observe({ type = "tool_use", name = "x" }) end)
      assert.is_true(observe < timeout + 200, "observe took " .. observe .. " ms")
    end)
    os.execute("kill -CONT " .. pid)
    assert(ok, err)
  end)

  it("a bad store config is INVALID_CONFIG", function()
    for _, config in ipairs({
      { key = "k" },
      { store = URL },
      { store = "http://127.0.0.1:6379/0", key = "k" },
      { store = "redis://127.0.0.1:0/0", key = "k" },
      { store = URL, key = "k", storeTimeoutMs = 0 },
      { store = URL, key = "k", storeFailure = "maybe" },
      { store = 42, key = "k" },
    }) do
      expectCode("INVALID_CONFIG", ab.FailureBreaker.new, config)
      expectCode("INVALID_CONFIG", ab.Monitor.new, config)
    end
    local err = expectCode("INVALID_CONFIG", ab.Monitor.new, { failure = { store = URL, key = "k" } })
    assert.is_truthy(err:find("top level", 1, true))
  end)

  it("a refused password is IO and never shown", function()
    local secret = "Pa55-n0t-sh0wn"
    cli("ACL", "SETUSER", "agent", "on", "'>" .. secret .. "'", "'~*'", "'&*'", "+@all")
    local function url(password)
      return URL:gsub("^redis://", "redis://agent:" .. password .. "@")
    end
    for _, new in ipairs({ ab.FailureBreaker.new, ab.Monitor.new }) do
      local err = expectCode("IO", new, { store = url("wrong-Pa55word"), key = "k" })
      assert.is_nil(err:find("wrong-Pa55word", 1, true), err)
      assert.is_truthy(err:find("redis://agent:***@127.0.0.1", 1, true), err)
    end
    local shown = {}
    local breaker = ab.FailureBreaker.new({ store = url(secret), key = "pw", failureThreshold = 2,
      log = function(_, line) shown[#shown + 1] = line end })
    breaker:recordFailure("x")
    breaker:recordFailure("x")
    assert.are.equal("OPEN", breaker.state)
    assert.are.equal("redis://agent:***@127.0.0.1:" .. PORT .. "/0", breaker:storeStatus().url)
    shown[#shown + 1] = tostring(breaker)
    shown[#shown + 1] = select(2, breaker:shouldAllowOperation())
    assert.is_true(#shown >= 3)
    for _, text in ipairs(shown) do
      assert.is_nil(text:find(secret, 1, true), text)
    end
  end)
end)
